#!/bin/sh
# Check couponlink's Prometheus rules: promtool check rules (syntax, lint)
# and promtool test rules (alerts/couponlink.rules.test.yml, and
# alerts/findings.rules.test.yml: the findings' lifecycle). Installs
# promtool from Debian's prometheus package when it is missing (2.42 on
# Debian 12; the rules use nothing newer). Run from anywhere.
set -eu
cd "$(dirname "$0")/.."

if ! command -v promtool >/dev/null 2>&1; then
	echo "promtool missing: installing Debian's prometheus package" >&2
	SUDO=
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null ||
		{ $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
		  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }
fi
promtool --version 2>&1 | head -1

promtool check rules alerts/couponlink.rules.yml
promtool test rules alerts/couponlink.rules.test.yml alerts/findings.rules.test.yml
