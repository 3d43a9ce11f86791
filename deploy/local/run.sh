#!/usr/bin/env bash
# `make run`: start the private MariaDB + Redis, migrate, run the cdc in the
# background and the API in the foreground. Ctrl-C stops both; the servers
# keep running until `make servers-down`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
eval "$(deploy/local/servers.sh up)"
BIN=${BIN:-bin/couponlink}
"$BIN" migrate
mkdir -p .run
"$BIN" cdc >>.run/cdc.log 2>&1 &
CDC=$!
trap 'kill -TERM $CDC 2>/dev/null; wait $CDC 2>/dev/null || true' EXIT
echo "couponlink cdc running (pid $CDC, log .run/cdc.log, metrics http://${COUPONLINK_CDC_METRICS_ADDR:-127.0.0.1:9464}/metrics)"
echo "couponlink api on http://${COUPONLINK_API_ADDR:-127.0.0.1:8080}  (MySQL $COUPONLINK_MYSQL_DSN, Redis $COUPONLINK_REDIS_ADDR)"
echo "operator console: http://${COUPONLINK_API_ADDR:-127.0.0.1:8080}/console/"
echo "try: curl -s -XPOST http://${COUPONLINK_API_ADDR:-127.0.0.1:8080}/v1/templates -H 'Content-Type: application/json' -d '{\"name\":\"demo\",\"total_quota\":100,\"channels\":{\"app\":100},\"valid_seconds\":3600}'"
echo "     bin/couponlink status      (stop with Ctrl-C, then: make servers-down)"
export COUPONLINK_CDC_METRICS_URL=${COUPONLINK_CDC_METRICS_URL:-http://${COUPONLINK_CDC_METRICS_ADDR:-127.0.0.1:9464}/metrics}
"$BIN" api
