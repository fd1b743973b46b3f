#!/usr/bin/env bash
# Fault injection under a live mixed load (issue 21). One server ($BIN) on a private
# PostgreSQL cluster, a private Redis, a private OPA harness (fixtures/opa, the real OPA
# engine), SIEM export to a private rsyslogd, serves policy checks, audit writes, guard
# validations, HITL request/approve and WebSocket clients (.ci/e2e/faults.py) while this
# script stops and restarts its dependencies one at a time:
#   1. PostgreSQL stopped (`pg_ctl stop -m fast`) for 10 s, then once more `-m immediate`
#      (a crash: recovery from the WAL): failures are 503 problem documents, never 500, and
#      fast; the server recovers without restart; no acknowledged audit entry is lost; every
#      tenant's hash chain verifies.
#   2. Redis stopped and restarted: readiness shows `cache` down then up, events and
#      WebSocket fan-out recover, nothing answers 500.
#   3. OPA stopped: checks keep being answered (by the embedded engine), same decisions.
#   4. The SIEM receiver stopped, and (server restarted with SSO_PROVIDERS_JSON on a dead
#      port) the OpenID provider down: check latency p50/p99 stays that of the baseline.
# Figures per fault are printed and written to target/hardening/faults.json. Exits non-zero on
# any failed expectation.
#
# Run by .ci/run after the conformance suite (BIN set); by hand:
#   BIN=target/debug/steward bash .ci/e2e/faults.sh
# The shared PostgreSQL (5432) and Redis (6379) of the machine are not touched. As root the
# private cluster runs as the `postgres` user (initdb refuses root).
#
# `faults.sh ctl ACTION` is how faults.py stops and starts the dependencies (state in
# $FAULTS_WORK).
set -euo pipefail
ROOT="${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
BIN="${BIN:-$ROOT/target/debug/steward}"
CACHE="${STEWARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/steward}"
# Hash-locked environments (.ci/lib/venv.sh creates them at these paths).
VENV="$CACHE/venv-e2e"
OPA_VENV="$CACHE/venv-opa"
SELF="$ROOT/.ci/e2e/faults.sh"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_http() {  # wait_http URL TRIES(0.2 s each)
  for _ in $(seq 1 "$2"); do
    if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' "$1" 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  return 1
}
wait_tcp() {  # wait_tcp PORT TRIES(0.1 s each)
  for _ in $(seq 1 "$2"); do
    if python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()' "$1" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  return 1
}
as_pg() {  # runs a PostgreSQL tool as the cluster's owner
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
kill_pidfile() {  # kill_pidfile FILE [SECONDS]: SIGTERM, then SIGKILL after SECONDS (5)
  local pid
  pid="$(cat "$1" 2>/dev/null || true)"
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 $(( ${2:-5} * 20 ))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$1"
}

# --- the dependencies (also used by `ctl`) ---------------------------------------------------
pg_start() {
  as_pg "$PGBIN/pg_ctl" -D "$PGDATA" -l "$PGROOT/pg.log" -w -t 60 \
    -o "-p $PG_PORT -k $PGROOT -c listen_addresses=127.0.0.1 -c max_connections=100" start >/dev/null
}
pg_stop() {  # pg_stop fast|immediate
  as_pg "$PGBIN/pg_ctl" -D "$PGDATA" -m "$1" -w -t 60 stop >/dev/null
}
redis_start() {
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --daemonize yes --pidfile "$FAULTS_WORK/redis.pid" --logfile "$FAULTS_WORK/redis.log" \
    --dir "$FAULTS_WORK"
  for _ in $(seq 1 100); do
    redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  return 1
}
redis_stop() { kill_pidfile "$FAULTS_WORK/redis.pid"; }
opa_start() {
  nohup "$OPA_VENV/bin/python" "$ROOT/fixtures/opa/shim.py" --port "$OPA_PORT" \
    >>"$FAULTS_WORK/opa.log" 2>&1 </dev/null &
  echo "$!" >"$FAULTS_WORK/opa.pid"
  disown "$!"
  wait_http "http://127.0.0.1:$OPA_PORT/health" 150
}
opa_stop() { kill_pidfile "$FAULTS_WORK/opa.pid"; }
siem_start() {
  if [ "$SIEM_KIND" = rsyslog ]; then
    rm -f "$FAULTS_WORK/rsyslog.pid"
    nohup rsyslogd -n -f "$FAULTS_WORK/rsyslog.conf" -i "$FAULTS_WORK/rsyslog.pid" \
      >>"$FAULTS_WORK/rsyslog.out" 2>&1 </dev/null &
    echo "$!" >"$FAULTS_WORK/siem.pid"
    disown "$!"
  else
    # No rsyslogd on this machine (.ci/peers/siem.sh installs it in CI): a plain TCP
    # listener that appends what it receives to a file.
    nohup python3 -c '
import socket, sys, threading
srv = socket.create_server(("127.0.0.1", int(sys.argv[1])), reuse_port=False)
out = open(sys.argv[2], "ab", buffering=0)
def serve(c):
    while True:
        b = c.recv(65536)
        if not b:
            return
        out.write(b)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
' "$SIEM_PORT" "$FAULTS_WORK/siem.log" >>"$FAULTS_WORK/siem.out" 2>&1 </dev/null &
    echo "$!" >"$FAULTS_WORK/siem.pid"
    disown "$!"
  fi
  wait_tcp "$SIEM_PORT" 100
}
siem_stop() { kill_pidfile "$FAULTS_WORK/siem.pid"; }
server_start() {  # server_start [ENV=VALUE...]: starts $BIN with the suite's settings
  env HOST=127.0.0.1 PORT="$SERVER_PORT" \
    DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/steward" \
    REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0" OPA_URL="http://127.0.0.1:$OPA_PORT" \
    SIEM_ENABLED=true SIEM_TRANSPORT=syslog SIEM_FORMAT=jsonl SIEM_HOST=127.0.0.1 \
    SIEM_PORT="$SIEM_PORT" SIEM_BATCH_SIZE=50 SIEM_BATCH_TIMEOUT=1 SIEM_MAX_RETRIES=10 \
    SECRET_KEY="faults-secret-key-0123456789abcdef-0123" ADMIN_API_KEY="$FAULTS_ADMIN_KEY" \
    WEBHOOK_SECRET="faults-webhook-secret" SUPER_ADMIN_EMAIL="$FAULTS_SUPER_EMAIL" \
    SUPER_ADMIN_PASSWORD="$FAULTS_SUPER_PASSWORD" ENVIRONMENT=test LOG_LEVEL=WARNING \
    EXPORT_STORAGE_PATH="$FAULTS_WORK/exports" MODEL_STORAGE_PATH="$FAULTS_WORK/models" \
    "$@" nohup "$BIN" >>"$FAULTS_WORK/server.log" 2>&1 </dev/null &
  echo "$!" >"$FAULTS_WORK/server.pid"
  disown "$!"
  wait_http "http://127.0.0.1:$SERVER_PORT/health" 300
}
server_stop() { kill_pidfile "$FAULTS_WORK/server.pid" 12; }  # graceful: up to 10 s
# The OpenID provider down: one provider discovered from an issuer and one with explicit
# endpoints, both on a port nothing listens on.
sso_json() {
  local dead="http://127.0.0.1:$SSO_DEAD_PORT"
  printf '[{"id":"dead-issuer","name":"Dead issuer","client_id":"steward","client_secret":"s","issuer":"%s"},{"id":"dead-endpoints","name":"Dead endpoints","client_id":"steward","client_secret":"s","authorization_endpoint":"%s/auth","token_endpoint":"%s/token","userinfo_endpoint":"%s/me"}]' \
    "$dead" "$dead" "$dead" "$dead"
}

if [ "${1:-}" = ctl ]; then
  # shellcheck disable=SC1091
  . "$FAULTS_WORK/env"
  case "${2:-}" in
    pg-hold-lock)
      # A transaction that holds every audit head row: the audit writes that arrive next
      # wait on it inside PostgreSQL, so that a shutdown now finds statements in flight.
      nohup "$PGBIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -d steward -qAt \
        -c "BEGIN; SELECT tenant_id FROM audit_heads FOR UPDATE; SELECT pg_sleep(120); COMMIT;" \
        >>"$FAULTS_WORK/hold.log" 2>&1 </dev/null &
      disown "$!"
      ;;
    pg-stop-fast) pg_stop fast ;;
    pg-stop-immediate) pg_stop immediate ;;
    pg-start) pg_start ;;
    redis-stop) redis_stop ;;
    redis-start) redis_start ;;
    opa-stop) opa_stop ;;
    opa-start) opa_start ;;
    siem-stop) siem_stop ;;
    siem-start) siem_start ;;
    server-restart-sso)
      server_stop
      server_start SSO_PROVIDERS_JSON="$(sso_json)" SSO_CALLBACK_URL="http://127.0.0.1:$SERVER_PORT/api/v1/auth/sso/callback"
      ;;
    *) echo "faults.sh ctl: unknown action ${2:-}" >&2; exit 2 ;;
  esac
  exit 0
fi

# --- set-up ------------------------------------------------------------------------------------
SUITE_START=$(date +%s)
[ -x "$BIN" ] || { echo "no server binary at $BIN" >&2; exit 1; }
# shellcheck source=../lib/venv.sh
source "$ROOT/.ci/lib/venv.sh"
VENV="$(ci_venv e2e "$ROOT/.ci/requirements/e2e.txt")"
OPA_VENV="$(ci_venv opa "$ROOT/.ci/requirements/opa.txt" --ignore-requires-python)"
PGBIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)"
[ -x "$PGBIN/initdb" ] || { echo "no PostgreSQL server binaries under /usr/lib/postgresql" >&2; exit 1; }

FAULTS_WORK="$(mktemp -d)"
chmod 755 "$FAULTS_WORK"
PGROOT="$FAULTS_WORK/pg"
PGDATA="$PGROOT/data"
mkdir -p "$PGROOT" "$FAULTS_WORK/exports" "$FAULTS_WORK/models"
[ "$(id -u)" = 0 ] && chown postgres "$PGROOT"
PG_PORT="$(free_port)"; REDIS_PORT="$(free_port)"; OPA_PORT="$(free_port)"
SIEM_PORT="$(free_port)"; SERVER_PORT="$(free_port)"; SSO_DEAD_PORT="$(free_port)"
SIEM_KIND=listener
command -v rsyslogd >/dev/null 2>&1 && SIEM_KIND=rsyslog
FAULTS_ADMIN_KEY="faults-admin-key"
FAULTS_SUPER_EMAIL="super@faults.test"
FAULTS_SUPER_PASSWORD="Faults-Super-Password-1"
cat >"$FAULTS_WORK/env" <<EOF
ROOT='$ROOT' BIN='$BIN' OPA_VENV='$OPA_VENV' PGBIN='$PGBIN' FAULTS_WORK='$FAULTS_WORK'
PGROOT='$PGROOT' PGDATA='$PGDATA' PG_PORT=$PG_PORT REDIS_PORT=$REDIS_PORT OPA_PORT=$OPA_PORT
SIEM_PORT=$SIEM_PORT SERVER_PORT=$SERVER_PORT SSO_DEAD_PORT=$SSO_DEAD_PORT SIEM_KIND=$SIEM_KIND
FAULTS_ADMIN_KEY='$FAULTS_ADMIN_KEY' FAULTS_SUPER_EMAIL='$FAULTS_SUPER_EMAIL'
FAULTS_SUPER_PASSWORD='$FAULTS_SUPER_PASSWORD'
EOF
export FAULTS_WORK

cleanup() {
  local rc=$?
  server_stop
  siem_stop
  opa_stop
  redis_stop
  if [ -f "$PGDATA/postmaster.pid" ]; then pg_stop immediate 2>/dev/null || true; fi
  if [ "$rc" != 0 ]; then
    mkdir -p "$ROOT/target/hardening/faults-logs"
    cp "$FAULTS_WORK"/*.log "$PGROOT/pg.log" "$ROOT/target/hardening/faults-logs/" 2>/dev/null || true
    echo "faults: logs kept in target/hardening/faults-logs"
  fi
  rm -rf "$FAULTS_WORK"
}
trap cleanup EXIT

as_pg "$PGBIN/initdb" -D "$PGDATA" -U postgres --auth=trust -E UTF8 >"$FAULTS_WORK/initdb.log" 2>&1 \
  || { cat "$FAULTS_WORK/initdb.log" >&2; exit 1; }
pg_start
"$PGBIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres steward
redis_start
opa_start || { echo "the OPA harness did not start" >&2; tail -n 20 "$FAULTS_WORK/opa.log" >&2; exit 1; }
if [ "$SIEM_KIND" = rsyslog ]; then
  cat >"$FAULTS_WORK/rsyslog.conf" <<EOF
global(workDirectory="$FAULTS_WORK" maxMessageSize="64k")
module(load="imtcp" maxSessions="50")
template(name="raw" type="string" string="%rawmsg%\n")
input(type="imtcp" port="$SIEM_PORT" address="127.0.0.1" ruleset="plain")
ruleset(name="plain") { action(type="omfile" file="$FAULTS_WORK/siem.log" template="raw" flushOnTXEnd="on" asyncWriting="off") }
EOF
fi
siem_start || { echo "the SIEM receiver ($SIEM_KIND) did not start" >&2; exit 1; }
server_start || { echo "the server did not start" >&2; tail -n 30 "$FAULTS_WORK/server.log" >&2; exit 1; }
wait_http "http://127.0.0.1:$SERVER_PORT/health/ready" 150 \
  || { echo "the server did not become ready" >&2; tail -n 30 "$FAULTS_WORK/server.log" >&2; exit 1; }
echo "faults: server on $SERVER_PORT; PostgreSQL $PG_PORT (private cluster), Redis $REDIS_PORT, OPA $OPA_PORT, SIEM $SIEM_KIND $SIEM_PORT (set-up $(( $(date +%s) - SUITE_START ))s)"

mkdir -p "$ROOT/target/hardening"
status=0
FAULTS_ADMIN_KEY="$FAULTS_ADMIN_KEY" FAULTS_SUPER_EMAIL="$FAULTS_SUPER_EMAIL" \
  FAULTS_SUPER_PASSWORD="$FAULTS_SUPER_PASSWORD" FAULTS_SERVER_LOG="$FAULTS_WORK/server.log" \
  "$VENV/bin/python" "$ROOT/.ci/e2e/faults.py" "http://127.0.0.1:$SERVER_PORT" "$SELF" \
  "$ROOT/target/hardening/faults.json" || status=$?
if grep -q "panicked" "$FAULTS_WORK/server.log"; then
  echo "FAIL the server log shows a panic:"; grep -m5 -A3 "panicked" "$FAULTS_WORK/server.log"
  status=1
fi
if [ "$status" != 0 ]; then
  echo "--- server log (last 40 lines)"; tail -n 40 "$FAULTS_WORK/server.log"
fi
echo "faults: suite ran in $(( $(date +%s) - SUITE_START ))s"
exit "$status"
