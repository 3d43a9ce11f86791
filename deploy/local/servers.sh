#!/usr/bin/env bash
# Private MariaDB (binlog ROW, FULL row image and metadata, GTID) and Redis for couponlink's
# local runs and tests. Never touches the servers on the default ports.
#
#   deploy/local/servers.sh up      start both (idempotent), wait until they answer
#   deploy/local/servers.sh down    stop both by PID
#   deploy/local/servers.sh env     print the exports for the shell
#   deploy/local/servers.sh status  say what runs
#
# Settings (environment): COUPONLINK_LOCAL_DIR (default <repo>/.run/servers),
# COUPONLINK_LOCAL_MYSQL_PORT (3307), COUPONLINK_LOCAL_REDIS_PORT (6380),
# COUPONLINK_LOCAL_DB (couponlink). When a default port is taken by another
# process, `up` takes the next free one and remembers it in $BASE/ports.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BASE=${COUPONLINK_LOCAL_DIR:-$ROOT/.run/servers}
mkdir -p "$BASE" && BASE=$(cd "$BASE" && pwd -P) # absolute, as the servers report their paths
MPORT=${COUPONLINK_LOCAL_MYSQL_PORT:-3307}
RPORT=${COUPONLINK_LOCAL_REDIS_PORT:-6380}
DB=${COUPONLINK_LOCAL_DB:-couponlink}
# ports chosen by an earlier `up` of this directory win over the defaults
if [ -f "$BASE/ports" ] && [ -z "${COUPONLINK_LOCAL_MYSQL_PORT:-}${COUPONLINK_LOCAL_REDIS_PORT:-}" ]; then
  # shellcheck disable=SC1091
  . "$BASE/ports"
fi

log() { echo "servers.sh: $*" >&2; }

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port P: P if nothing listens there, else the next free port above it.
free_port() {
  local p=$1 i
  for i in $(seq 0 99); do
    if ! port_busy $((p + i)); then echo $((p + i)); return; fi
  done
  log "no free port in $p..$((p + 99))"; exit 1
}

choose_ports() {
  alive "$BASE/mysqld.pid" || MPORT=$(free_port "$MPORT")
  alive "$BASE/redis.pid" || RPORT=$(free_port "$RPORT")
  mkdir -p "$BASE"
  printf 'MPORT=%s\nRPORT=%s\n' "$MPORT" "$RPORT" > "$BASE/ports"
}

install_missing() {
  local pkgs=()
  command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || pkgs+=(mariadb-server)
  command -v mariadb >/dev/null 2>&1 || pkgs+=(mariadb-client)
  command -v redis-server >/dev/null 2>&1 || pkgs+=(redis-server)
  # the event-stream tests start their own nats-server -js (testenv.OwnNATS)
  command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] || pkgs+=(nats-server)
  # the RabbitMQ tests start their own nodes (testenv.OwnRabbitMQ), or use a running broker
  [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || pkgs+=(rabbitmq-server)
  if [ ${#pkgs[@]} -gt 0 ]; then
    log "installing ${pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2
  fi
}

mariadbd_bin() { command -v mariadbd 2>/dev/null || echo /usr/sbin/mariadbd; }

up_mysql() {
  if alive "$BASE/mysqld.pid"; then log "MariaDB already runs (pid $(cat "$BASE/mysqld.pid"), port $MPORT)"; return; fi
  mkdir -p "$BASE"
  if [ ! -d "$BASE/data/mysql" ]; then
    log "initialising MariaDB datadir $BASE/data"
    mkdir -p "$BASE/tmp" # its own: installs at once in the shared /tmp have failed on each other's files
    mariadb-install-db --no-defaults --datadir="$BASE/data" --tmpdir="$BASE/tmp" --user="$(id -un)" \
      --auth-root-authentication-method=normal --skip-test-db >"$BASE/install.log" 2>&1 \
      || { cat "$BASE/install.log" >&2; exit 1; }
  fi
  mkdir -p "$BASE/tmp"
  "$(mariadbd_bin)" --no-defaults --user="$(id -un)" --datadir="$BASE/data" --tmpdir="$BASE/tmp" \
    --bind-address=127.0.0.1 --port="$MPORT" --socket="$BASE/mysqld.sock" \
    --pid-file="$BASE/mysqld.pid" --log-error="$BASE/mysqld.err" \
    --server-id=1 --log-bin="$BASE/data/mysql-bin" --binlog-format=ROW \
    --binlog-row-image=FULL --binlog-row-metadata=FULL --gtid-domain-id=0 --log-slave-updates=ON \
    --skip-name-resolve --max-connections=1000 --innodb-buffer-pool-size=512M \
    --innodb-log-file-size=256M --max-binlog-size=256M \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_bin \
    </dev/null >/dev/null 2>&1 &
  local i pid=$!
  for i in $(seq 1 300); do
    # ours, not another `up`'s that took the same free port a moment earlier
    kill -0 "$pid" 2>/dev/null || { log "MariaDB exited at start (port $MPORT taken?); see $BASE/mysqld.err"; tail -5 "$BASE/mysqld.err" >&2; exit 1; }
    if [ "$(mariadb --no-defaults -h127.0.0.1 -P"$MPORT" -uroot -N -e 'SELECT @@socket' 2>/dev/null)" = "$BASE/mysqld.sock" ]; then
      mariadb --no-defaults -h127.0.0.1 -P"$MPORT" -uroot -e "CREATE DATABASE IF NOT EXISTS \`$DB\`"
      log "MariaDB up on 127.0.0.1:$MPORT (pid $(cat "$BASE/mysqld.pid"))"
      return
    fi
    sleep 0.1
  done
  log "MariaDB did not answer within 30 s; see $BASE/mysqld.err"; tail -20 "$BASE/mysqld.err" >&2; exit 1
}

up_redis() {
  if alive "$BASE/redis.pid"; then log "Redis already runs (pid $(cat "$BASE/redis.pid"), port $RPORT)"; return; fi
  mkdir -p "$BASE/redis"
  redis-server --bind 127.0.0.1 --port "$RPORT" --save '' --appendonly no \
    --dir "$BASE/redis" --daemonize yes --pidfile "$BASE/redis.pid" --logfile "$BASE/redis.log"
  local i
  for i in $(seq 1 100); do
    # ours (its dir), not another `up`'s that took the same free port
    if [ "$(redis-cli -h 127.0.0.1 -p "$RPORT" config get dir 2>/dev/null | tail -1)" = "$BASE/redis" ]; then
      log "Redis up on 127.0.0.1:$RPORT (pid $(cat "$BASE/redis.pid"))"; return
    fi
    sleep 0.1
  done
  log "Redis did not answer within 10 s; see $BASE/redis.log"; exit 1
}

stop_pid() {
  local name=$1 pidfile=$2 i
  if ! alive "$pidfile"; then rm -f "$pidfile"; return; fi
  local pid; pid=$(cat "$pidfile")
  kill -TERM "$pid"
  for i in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || { log "$name stopped (pid $pid)"; rm -f "$pidfile"; return; }; sleep 0.1; done
  log "$name did not stop within 30 s; killing pid $pid"; kill -KILL "$pid" 2>/dev/null || true; rm -f "$pidfile"
}

print_env() {
  echo "export COUPONLINK_MYSQL_DSN='root@tcp(127.0.0.1:$MPORT)/$DB'"
  echo "export COUPONLINK_REDIS_ADDR='127.0.0.1:$RPORT'"
  echo "export COUPONLINK_TEST_MYSQL_DSN='root@tcp(127.0.0.1:$MPORT)/'"
  echo "export COUPONLINK_TEST_REDIS_ADDR='127.0.0.1:$RPORT'"
}

case "${1:-}" in
  up) install_missing; choose_ports; up_mysql; up_redis; print_env ;;
  down) stop_pid Redis "$BASE/redis.pid"; stop_pid MariaDB "$BASE/mysqld.pid" ;;
  env) print_env ;;
  status)
    alive "$BASE/mysqld.pid" && echo "MariaDB: running, pid $(cat "$BASE/mysqld.pid"), 127.0.0.1:$MPORT" || echo "MariaDB: stopped"
    alive "$BASE/redis.pid" && echo "Redis: running, pid $(cat "$BASE/redis.pid"), 127.0.0.1:$RPORT" || echo "Redis: stopped" ;;
  *) echo "usage: $0 up|down|env|status" >&2; exit 2 ;;
esac
