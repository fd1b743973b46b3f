#!/usr/bin/env bash
# The latency SIEM export adds to requests that produce events (issue 17): alternating runs of
# `xtask bench check` at a fixed rate with export off and on, each on a fresh SQLite database
# (the embedded defaults), so that "on" is compared with the run-to-run spread of "off".
# Export "on" sends `jsonl` over syslog TCP to a local sink that reads and discards.
# Usage (from the repository root, after `cargo build --release -p steward-server -p xtask`):
#   xtask/scripts/siem-ab.sh [BIN]
# Environment: RATE (checks/s, default 2000), ROUNDS (off/on pairs, default 3), SECONDS per run
# (default 10), CLIENTS (default 8), PORT (default 18091), SIEM_EXTRA (more VAR=value settings for
# the "on" runs, e.g. "SIEM_BATCH_SIZE=500"). The order alternates per pair
# (off,on / on,off / ...) so that drift of the machine does not favour one side.
set -euo pipefail
BIN="${1:-./target/release/steward}"
RATE="${RATE:-2000}"; ROUNDS="${ROUNDS:-3}"; SECS="${SECONDS_PER_RUN:-10}"
CLIENTS="${CLIENTS:-8}"; PORT="${PORT:-18091}"; SINK_PORT=$((PORT + 1)); ADMIN=bench-admin-key
WORK="$(mktemp -d)"
SERVER_PID=""; SINK_PID=""
stop() { if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi; SERVER_PID=""; }
cleanup() { stop; [ -n "$SINK_PID" ] && kill "$SINK_PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

# The sink: accepts connections and discards what arrives (counts bytes to a file).
python3 - "$SINK_PORT" "$WORK/sink.bytes" <<'EOF' &
import socket, sys, threading
port, out = int(sys.argv[1]), sys.argv[2]
total = [0]
def serve(c):
    while True:
        b = c.recv(1 << 16)
        if not b:
            return
        total[0] += len(b)
        open(out, "w").write(str(total[0]))
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port)); s.listen(16)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
SINK_PID=$!

start() {  # start on|off
  local db="$WORK/steward-$RANDOM.db"
  local siem=(SIEM_ENABLED=false)
  if [ "$1" = on ]; then
    siem=(SIEM_ENABLED=true SIEM_TRANSPORT=syslog SIEM_FORMAT=jsonl SIEM_HOST=127.0.0.1 SIEM_PORT="$SINK_PORT" ${SIEM_EXTRA:-})
  fi
  env HOST=127.0.0.1 PORT="$PORT" LOG_LEVEL=WARNING ADMIN_API_KEY="$ADMIN" \
    SECRET_KEY=bench-secret-key-0123456789abcdef0123456789 \
    DATABASE_URL="sqlite://$db" EXPORT_STORAGE_PATH="$WORK/exports" "${siem[@]}" \
    "$BIN" >"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && return; sleep 0.1; done
  echo "server did not start:" >&2; cat "$WORK/server.log" >&2; exit 1
}

run() {  # run on|off
  start "$1"
  local line
  line="$(./target/release/xtask bench check --url "127.0.0.1:$PORT" --admin-key "$ADMIN" \
    --clients "$CLIENTS" --seconds "$SECS" --agents 50 --rate "$RATE" | grep 'policy check')"
  local status=""
  if [ "$1" = on ]; then
    sleep 6  # one batch time-out, so that the tail of the run is delivered
    status="$(curl -sf -H "X-Admin-Key: $ADMIN" "http://127.0.0.1:$PORT/api/v1/siem/status" \
      | python3 -c 'import json,sys; s=json.load(sys.stdin); print("sent %d queued %d failed %d" % (s["sent"], s["queued"], s["failed"]))' || echo "status unavailable")"
  fi
  stop
  printf '%-3s %s %s\n' "$1" "$(echo "$line" | sed 's/.*latency ms //')" "$status" | tee -a "$WORK/runs"
}

echo "rate $RATE checks/s, $CLIENTS clients, $SECS s per run, $ROUNDS pairs, binary $BIN"
for i in $(seq "$ROUNDS"); do
  if [ $((i % 2)) -eq 1 ]; then run off; run on; else run on; run off; fi
done
# Summary: per side, the median and the range of each percentile over its runs.
python3 - "$WORK/runs" <<'EOF'
import re, statistics, sys
runs = {"off": [], "on": []}
for line in open(sys.argv[1]):
    side = line.split()[0]
    runs[side].append({k: float(v) for k, v in re.findall(r"(p50|p95|p99) ([0-9.]+)", line)})
for pct in ("p50", "p95", "p99"):
    row = []
    for side in ("off", "on"):
        v = [r[pct] for r in runs[side]]
        row.append("%s median %.2f ms (%.2f-%.2f)" % (side, statistics.median(v), min(v), max(v)))
    print("%s: %s | %s" % (pct, row[0], row[1]))
EOF
