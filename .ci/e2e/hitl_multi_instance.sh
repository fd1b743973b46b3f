#!/usr/bin/env bash
# Two server instances on one PostgreSQL database and one Redis: a HITL request created through
# A is approved through B, a WebSocket client on A receives hitl.requested and hitl.resolved,
# connection counts are summed over both instances, a user blocked through B is disconnected
# from A within 2 s (1008), and concurrent decisions through A and B give one 200 and one 409.
# Run by .ci/run after the conformance suite (BIN set); by hand:
#   BIN=target/debug/steward bash .ci/e2e/hitl_multi_instance.sh
set -euo pipefail
ROOT="${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
BIN="${BIN:-$ROOT/target/debug/steward}"
CACHE="${STEWARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/steward}"
# shellcheck source=../lib/venv.sh
source "$ROOT/.ci/lib/venv.sh"
export PGHOST="${PGHOST:-127.0.0.1}" PGPORT="${PGPORT:-5432}" PGUSER="${PGUSER:-postgres}"
REDIS_DB=13

VENV="$(ci_venv e2e "$ROOT/.ci/requirements/e2e.txt")"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_ready() {
  for _ in $(seq 1 100); do
    if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' "$1" 2>/dev/null; then return 0; fi
    sleep 0.3
  done
  return 1
}

DB="steward_e2e_multi_$$"
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]+"${PIDS[@]}"}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  dropdb --if-exists "$DB" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
createdb "$DB"
redis-cli -h 127.0.0.1 -p 6379 -n "$REDIS_DB" flushdb >/dev/null

start() {  # start NAME PORT
  env HOST=127.0.0.1 PORT="$2" DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB" \
    REDIS_URL="redis://127.0.0.1:6379/$REDIS_DB" SECRET_KEY="e2e-secret-key-0123456789abcdef-0123" \
    ADMIN_API_KEY="e2e-admin-key" WEBHOOK_SECRET="e2e-webhook-secret" \
    SUPER_ADMIN_EMAIL="super@e2e.test" SUPER_ADMIN_PASSWORD="E2e-Super-Password-1" \
    ENVIRONMENT=test EXPORT_STORAGE_PATH="$WORK/exports-$1" LOG_LEVEL=WARNING \
    "$BIN" >"$WORK/$1.log" 2>&1 &
  PIDS+=("$!")
}
PORT_A="$(free_port)"; PORT_B="$(free_port)"
start a "$PORT_A"
wait_ready "http://127.0.0.1:$PORT_A/health/ready" || { tail -n 20 "$WORK/a.log"; exit 1; }
start b "$PORT_B"
wait_ready "http://127.0.0.1:$PORT_B/health/ready" || { tail -n 20 "$WORK/b.log"; exit 1; }
echo "instances: A on $PORT_A, B on $PORT_B (PostgreSQL $DB, Redis db $REDIS_DB)"

if ! "$VENV/bin/python" "$ROOT/.ci/e2e/multi_instance.py" \
    "http://127.0.0.1:$PORT_A" "http://127.0.0.1:$PORT_B" e2e-admin-key super@e2e.test E2e-Super-Password-1; then
  echo "--- instance A log"; tail -n 30 "$WORK/a.log"
  echo "--- instance B log"; tail -n 30 "$WORK/b.log"
  exit 1
fi
