#!/usr/bin/env bash
# Audit write throughput (issue 6), the whole series in one run on one fresh database:
#   1. RUNS x `xtask bench audit` with 64 clients over 8 tenants,
#   2. one hot tenant (64 clients, 1 tenant),
#   3. pgbench: a plain single-row INSERT of the same columns into the same table, 64 clients,
# so that the ratio to the plain INSERT is measured on the same machine, in the same state.
# Usage (from the repository root, after `cargo build --release -p steward-server -p xtask`):
#   xtask/scripts/bench-audit.sh [RUNS] [SECONDS]
# Needs PostgreSQL on 127.0.0.1:5432 (user postgres, trust auth) with createdb/dropdb/pgbench.
# Starts the server itself (release build, no Redis, signing on) on port 18080 and stops it.
set -euo pipefail
RUNS="${1:-3}"; SECONDS_PER_RUN="${2:-15}"
DB=steward_bench_audit; PORT=18080; ADMIN=bench-admin-key
PG=(-h 127.0.0.1 -U postgres)
SERVER_PID=""
stop() { if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi; SERVER_PID=""; }
trap stop EXIT
start() {
  dropdb "${PG[@]}" --if-exists "$DB" >/dev/null 2>&1
  createdb "${PG[@]}" "$DB"
  mkdir -p /tmp/steward-bench-exports
  HOST=127.0.0.1 PORT=$PORT LOG_LEVEL=WARN AGENT_INACTIVITY_SECONDS=86400 \
    SECRET_KEY=bench-secret-key-0123456789abcdef0123456789 ADMIN_API_KEY=$ADMIN \
    EXPORT_STORAGE_PATH=/tmp/steward-bench-exports \
    DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB" \
    ./target/release/steward >/tmp/steward-bench-server.log 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && return; sleep 0.2; done
  echo "server did not start; see /tmp/steward-bench-server.log" >&2; exit 1
}
bench() { ./target/release/xtask bench audit --url "127.0.0.1:$PORT" --admin-key "$ADMIN" --clients 64 "$@"; }

start
for _ in $(seq "$RUNS"); do bench --tenants 8 --seconds "$SECONDS_PER_RUN"; done
bench --tenants 1 --seconds "$SECONDS_PER_RUN"
TENANT="$(psql "${PG[@]}" -d "$DB" -Atc 'SELECT id FROM tenants LIMIT 1')"
H="$(printf 'a%.0s' $(seq 64))"
SQL="$(mktemp)"
cat >"$SQL" <<EOF
\set s random(1, 9000000000000000)
INSERT INTO audit_entries (id, tenant_id, seq, agent_id, user_id, action, resource, input, output,
  reasoning, risk_score, is_approved, "timestamp", prev_hash, hash, signature)
VALUES (gen_random_uuid(), '$TENANT', :s, NULL, NULL, 'read_data', 'crm/' || :s,
  '{"q": 1}', '{}', '[]', 0.25, true, now(), '$H', '$H', '$H');
EOF
stop
echo "pgbench (plain single-row INSERT, 64 clients, same database):"
LOGS="$(mktemp -d)"
(cd "$LOGS" && pgbench "${PG[@]}" -d "$DB" -n -c 64 -j 2 -T "$SECONDS_PER_RUN" -l -f "$SQL" 2>&1 |
  grep -E "^(tps|number of failed)")
# Per-transaction log: the third field is the latency in microseconds.
cat "$LOGS"/pgbench_log.* | awk '{print $3}' | sort -n | awk '
  { v[NR] = $1 } END { if (NR) printf "pgbench latency ms p50 %.2f, p95 %.2f, p99 %.2f, max %.2f\n",
    v[int(NR * 0.50)] / 1000, v[int(NR * 0.95)] / 1000, v[int(NR * 0.99)] / 1000, v[NR] / 1000 }'
rm -rf "$SQL" "$LOGS"
