#!/usr/bin/env bash
# What the console's browser test (console/browser_test.go) needs: Debian's
# chromium, node and npm (installed with apt-get when missing, as
# deploy/local/servers.sh installs the servers), and playwright-core from
# package-lock.json (npm ci, when node_modules lacks it).
set -euo pipefail
cd "$(dirname "$0")"
missing=()
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
[ -x /usr/bin/chromium ] || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  echo "console/e2e/deps.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq "${missing[@]}" >&2
fi
[ -d node_modules/playwright-core ] || npm ci --no-audit --no-fund
