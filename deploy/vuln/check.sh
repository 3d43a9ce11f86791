#!/usr/bin/env bash
# govulncheck on couponlink, offline: the Go vulnerability database is built
# from the golang.org/x/vulndb module (its data/osv JSON, as the module proxy
# serves it) with vulndb's own cmd/indexdb into a v1 database directory
# (index/db.json, index/modules.json, ID/<id>.json), and govulncheck reads it
# with -db file://. Tools and database are cached under .run/vuln/.
#
# Exit 0: no vulnerability our code reaches in a module we require; 1: some
# (or the check could not run). Findings in the Go standard library are
# printed and fail too (VULN_STDLIB=fail, the default; VULN_STDLIB=warn only prints them):
# they are fixed by a newer Go release (GOTOOLCHAIN above), not by go.mod.
set -euo pipefail
cd "$(dirname "$0")/../.."

VULN_VERSION=v1.9.0                                 # golang.org/x/vuln (govulncheck)
VULNDB_VERSION=v0.0.0-20261105234957-e22db6528018   # golang.org/x/vulndb: the database's date
export GOTOOLCHAIN=go1.27.3   # go.mod says go 1.27: the standard library checked is 1.27.3's
GO=${GO:-go}
dir=.run/vuln
bin=$dir/bin-$VULN_VERSION-$VULNDB_VERSION
db=$dir/db-$VULNDB_VERSION

if [ ! -x "$bin/govulncheck" ] || [ ! -x "$bin/indexdb" ]; then
  echo "vuln: installing govulncheck $VULN_VERSION and vulndb's indexdb (first run: a few minutes)" >&2
  mkdir -p "$bin"
  GOBIN=$PWD/$bin $GO install "golang.org/x/vuln/cmd/govulncheck@$VULN_VERSION"
  GOBIN=$PWD/$bin $GO install "golang.org/x/vulndb/cmd/indexdb@$VULNDB_VERSION"
fi
if [ ! -f "$db/index/db.json" ]; then
  src=$($GO mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [ -d "$src/data/osv" ] || { echo "vuln: no data/osv in golang.org/x/vulndb@$VULNDB_VERSION ($src)" >&2; exit 1; }
  rm -rf "$db.tmp" && mkdir -p "$dir"
  "$bin/indexdb" -vulns "$src/data/osv" -out "$db.tmp"
  mv "$db.tmp" "$db"
fi

out=$dir/govulncheck.txt
rc=0
"$bin/govulncheck" -db "file://$PWD/$db" ./... > "$out" 2>&1 || rc=$?
case $rc in
0) echo "vuln: no known vulnerability reached (database $VULNDB_VERSION)"; exit 0 ;;
3) ;;   # vulnerabilities found: sorted below
*) cat "$out" >&2; echo "vuln: govulncheck failed (exit $rc)" >&2; exit 1 ;;
esac

# "Found in: <module>@<version>"; the standard library's versions are go1.x
modules=$(grep -E '^ +Found in: ' "$out" | grep -vE '@go[0-9]' || true)
stdlib=$(grep -E '^ +Found in: ' "$out" | grep -E '@go[0-9]' || true)
if [ -n "$modules" ] || { [ -n "$stdlib" ] && [ "${VULN_STDLIB:-fail}" = fail ]; }; then
  cat "$out"
  echo "vuln: vulnerabilities our code reaches (report above, also in $out)" >&2
  exit 1
fi
echo "vuln: no vulnerability reached in a required module (database $VULNDB_VERSION)"
echo "vuln: WARNING: $(echo "$stdlib" | wc -l) in the Go standard library of $($GO env GOVERSION), fixed by a newer Go release:"
grep -E '^Vulnerability #|^ +Found in: |^ +Fixed in: ' "$out" | paste - - - | grep -E '@go[0-9]' | sed 's/^/  /'
