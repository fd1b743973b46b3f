#!/usr/bin/env bash
# Kill suite (issue 21, "Hardening"): two server instances on one PostgreSQL database and one
# Redis; for each kind of claimed background work (an async audit export, a guard training, an
# anomaly training, a discovery clustering job, SIEM delivery) the work is started, the
# instance that claimed it (found through its lease row in the database) is SIGKILLed, and the
# other instance must finish it or fail it visibly; no half-written file or model is ever
# served, no SIEM event is lost. Figures go to target/hardening/kills.json.
# Run by .ci/run after the conformance suite (BIN set); by hand:
#   BIN=target/debug/steward bash .ci/e2e/kills.sh
set -euo pipefail
ROOT="${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
BIN="${BIN:-$ROOT/target/debug/steward}"
TARGET_DIR="${TARGET_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}}"
CACHE="${STEWARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/steward}"
# shellcheck source=../lib/venv.sh
source "$ROOT/.ci/lib/venv.sh"
export PGHOST="${PGHOST:-127.0.0.1}" PGPORT="${PGPORT:-5432}" PGUSER="${PGUSER:-postgres}"
REDIS_DB=12

VENV="$(ci_venv e2e "$ROOT/.ci/requirements/e2e.txt")"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

DB="steward_e2e_kills_$$"
WORK="$(mktemp -d)"
RSYSLOG_PID=""
cleanup() {
  if [ -n "$RSYSLOG_PID" ]; then kill "$RSYSLOG_PID" 2>/dev/null || true; fi
  if [ -f "$WORK/rsyslog.pid" ]; then kill "$(cat "$WORK/rsyslog.pid" 2>/dev/null)" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  dropdb --if-exists "$DB" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
createdb "$DB"
redis-cli -h 127.0.0.1 -p 6379 -n "$REDIS_DB" flushdb >/dev/null

# The SIEM receiver: a real rsyslogd of its own (plain TCP input, raw messages to a file), as the
# SIEM peer (.ci/peers/siem.sh) runs it; installed there when missing.
if ! command -v rsyslogd >/dev/null 2>&1; then
  echo "kills: installing rsyslog"
  apt-get update -qq && apt-get install -y -qq rsyslog >/dev/null
fi
SYSLOG_PORT="$(free_port)"
mkdir -p "$WORK/rsyslog-work"
cat > "$WORK/rsyslog.conf" <<EOF
global(workDirectory="$WORK/rsyslog-work" maxMessageSize="64k")
module(load="imtcp" maxSessions="50")
template(name="raw" type="string" string="%rawmsg%\n")
input(type="imtcp" port="$SYSLOG_PORT" address="127.0.0.1" ruleset="plain")
ruleset(name="plain") { action(type="omfile" file="$WORK/siem.log" template="raw" flushOnTXEnd="on" asyncWriting="off") }
EOF
rsyslogd -n -f "$WORK/rsyslog.conf" -i "$WORK/rsyslog.pid" >"$WORK/rsyslog.out" 2>&1 &
RSYSLOG_PID=$!
for _ in $(seq 1 100); do
  python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$SYSLOG_PORT" 2>/dev/null && break
  sleep 0.1
done

# audit-verify: the xtask binary of this build when present, else through cargo.
# shellcheck source=../lib/xtask.sh
source "$ROOT/.ci/lib/xtask.sh"

mkdir -p "$ROOT/target/hardening"
env KILLS_BIN="$BIN" KILLS_DB="$DB" KILLS_REDIS="redis://127.0.0.1:6379/$REDIS_DB" \
  KILLS_WORK="$WORK" KILLS_SYSLOG_PORT="$SYSLOG_PORT" KILLS_SYSLOG_OUT="$WORK/siem.log" \
  KILLS_XTASK="$XTASK" KILLS_ROOT="$ROOT" KILLS_OUT="$ROOT/target/hardening/kills.json" \
  "$VENV/bin/python" "$ROOT/.ci/e2e/kills.py"
