#!/usr/bin/env bash
# WebSocket fan-out A/B (issue 13): alternating runs of `xtask bench ws` (1,000 clients of one
# tenant, a burst of 10,000 `audit.created` events) against one or more server binaries, each
# run on a fresh database, so that builds are compared in the same machine state.
# Usage (from the repository root, after `cargo build --release -p steward-server -p xtask`):
#   xtask/scripts/ws-ab.sh BIN [BIN ...]
# Environment: BACKEND (`postgres`, the default: PostgreSQL + Redis on 127.0.0.1; or `sqlite`),
# ROUNDS (default 2), CLIENTS (1000), EVENTS (10000), PORT (18093), RATE (events per second;
# default 0 = the producers write as fast as the server answers).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BIN [BIN ...]" >&2; exit 2; }
BACKEND="${BACKEND:-postgres}"; ROUNDS="${ROUNDS:-2}"; CLIENTS="${CLIENTS:-1000}"
EVENTS="${EVENTS:-10000}"; PORT="${PORT:-18093}"; RATE="${RATE:-0}"; ADMIN=bench-admin-key
SUPER_EMAIL=admin@bench.local; SUPER_PASSWORD=Bench-super-password-1
WORK="$(mktemp -d)"; DB="steward_ws_ab_$$"
SERVER_PID=""
stop() { if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi; SERVER_PID=""; }
cleanup() { stop; dropdb -h 127.0.0.1 -U postgres --if-exists "$DB" >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

start() {  # start BIN
  local url extra=()
  if [ "$BACKEND" = postgres ]; then
    dropdb -h 127.0.0.1 -U postgres --if-exists "$DB" >/dev/null 2>&1 || true
    createdb -h 127.0.0.1 -U postgres "$DB"
    redis-cli -n 7 flushdb >/dev/null
    url="postgres://postgres@127.0.0.1:5432/$DB"; extra=(REDIS_URL=redis://127.0.0.1:6379/7)
  else
    url="sqlite://$WORK/steward-$RANDOM.db"
  fi
  env HOST=127.0.0.1 PORT="$PORT" LOG_LEVEL=WARNING ADMIN_API_KEY="$ADMIN" RATE_LIMIT_ENABLED=false \
    SECRET_KEY=bench-secret-key-0123456789abcdef0123456789 SUPER_ADMIN_EMAIL="$SUPER_EMAIL" \
    SUPER_ADMIN_PASSWORD="$SUPER_PASSWORD" DATABASE_URL="$url" EXPORT_STORAGE_PATH="$WORK/exports" \
    "${extra[@]}" "$1" >"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 200); do curl -sf "http://127.0.0.1:$PORT/health/ready" >/dev/null && return; sleep 0.1; done
  echo "server did not start:" >&2; cat "$WORK/server.log" >&2; exit 1
}

echo "backend $BACKEND, $CLIENTS clients, $EVENTS events, rate $RATE, $ROUNDS rounds"
for _ in $(seq "$ROUNDS"); do
  for bin in "$@"; do
    start "$bin"
    echo "== $bin"
    /usr/bin/time -f "generator cpu: user %U s, sys %S s, wall %e s" ./target/release/xtask bench ws --url "127.0.0.1:$PORT" --admin-key "$ADMIN" \
      --super-email "$SUPER_EMAIL" --super-password "$SUPER_PASSWORD" \
      --clients "$CLIENTS" --events "$EVENTS" --rate "$RATE" --pid "$SERVER_PID" | grep -v '^$'
    stop
  done
done
