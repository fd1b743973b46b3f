#!/usr/bin/env bash
# Async audit export of N entries (default 1,000,000): entries per second and the server's
# peak memory. Usage (server already running on an empty PostgreSQL database):
#   xtask/scripts/bench-export.sh URL ADMIN_KEY DATABASE [N] [FORMAT]
# Seeds N entries for a new tenant straight into PostgreSQL (the export reads rows; it does
# not verify the chain), starts POST /api/v1/audit/export/async, polls its status until it
# completes, and reads the server's peak resident memory (VmHWM) from /proc. With KEY set (a
# tenant key printed by an earlier run) the tenant is reused and nothing is seeded.
set -euo pipefail
URL="$1"; ADMIN="$2"; DB="$3"; N="${4:-1000000}"; FORMAT="${5:-jsonl}"
PID="$(pgrep -f 'target/release/steward$' | head -n1)"
json() { python3 -c "import sys, json; print(json.load(sys.stdin)$1)"; }
if [ -z "${KEY:-}" ]; then
KEY="$(curl -sf -X POST "$URL/api/v1/tenants" -H "X-Admin-Key: $ADMIN" -H 'Content-Type: application/json' \
  -d "{\"name\": \"export-bench-$RANDOM$RANDOM\"}" | json "['api_key']")"
TENANT="$(curl -sf "$URL/api/v1/status" -H "X-API-Key: $KEY" | json "['tenant']['id']")"
echo "tenant $TENANT; seeding $N entries"
t0=$(date +%s.%N)
psql -q -h 127.0.0.1 -U postgres -d "$DB" <<SQL
INSERT INTO audit_entries (id, tenant_id, seq, agent_id, user_id, action, resource, input, output,
  reasoning, risk_score, is_approved, "timestamp", prev_hash, hash, signature)
SELECT gen_random_uuid(), '$TENANT', g, NULL, NULL, 'read_data', 'crm/contacts/' || g,
  jsonb_build_object('query', 'select name from contacts where id = ' || g, 'rows', g % 50),
  jsonb_build_object('status', 'ok'), '["needed for the support ticket"]'::jsonb,
  (g % 100) / 100.0, g % 3 = 0, now() - (($N - g) * interval '1 millisecond'),
  md5((g - 1)::text) || md5((g - 1)::text), md5(g::text) || md5(g::text), md5('s' || g)
FROM generate_series(1, $N) AS g;
INSERT INTO audit_heads (tenant_id, seq, hash) VALUES ('$TENANT', $N, md5('$N') || md5('$N'))
ON CONFLICT (tenant_id) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash;
ANALYZE audit_entries;
SQL
echo "seeded in $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s"
echo "tenant key (KEY=... to export again without seeding): $KEY"
fi
before="$(grep VmHWM /proc/$PID/status | awk '{print $2}')"
start=$(date +%s.%N)
JOB="$(curl -sf -X POST "$URL/api/v1/audit/export/async" -H "X-API-Key: $KEY" -H 'Content-Type: application/json' \
  -d "{\"format\": \"$FORMAT\"}" | json "['job_id']")"
while true; do
  S="$(curl -sf "$URL/api/v1/audit/export/status/$JOB" -H "X-API-Key: $KEY")"
  # Parsed with sed, not Python: the poll must cost next to nothing.
  st="$(echo "$S" | sed -n 's/.*"status":"\([a-z]*\)".*/\1/p')"
  [ "$st" = completed ] || [ "$st" = failed ] && break
  sleep 0.1
done
end=$(date +%s.%N)
records="$(echo "$S" | json "['records']")"
peak="$(grep VmHWM /proc/$PID/status | awk '{print $2}')"
secs="$(python3 -c "print(round($end - $start, 2))")"
echo "export $FORMAT: status $st, $records records in $secs s = $(python3 -c "print(round($records / ($end - $start)))") entries/s"
echo "server peak RSS (VmHWM): before $((before / 1024)) MiB, after $((peak / 1024)) MiB"
ls -la "${EXPORT_DIR:-/tmp/benchsrv/exports}" | tail -n 2
