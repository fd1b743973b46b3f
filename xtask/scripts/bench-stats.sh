#!/usr/bin/env bash
# GET /api/v1/stats latency with N audit entries (default 1,000,000) in one tenant, all inside
# the 7-day window of the activity chart (the worst case for it). Usage (server running on a
# PostgreSQL database):
#   xtask/scripts/bench-stats.sh URL ADMIN_KEY DATABASE [N] [REQUESTS]
# DATABASE is a PostgreSQL database name, or sqlite:PATH for the server's SQLite file.
# Creates a tenant, seeds N entries straight into PostgreSQL spread evenly from the start of
# the window (UTC midnight 6 days ago) to now (the triggers of migration audit_daily_counts
# count them as they are inserted), then sends REQUESTS (default 2,000) sequential requests
# on one keep-alive connection after 200 warm-up requests and prints p50/p95/p99 of the full
# round trip. Also prints, for comparison,
# the time PostgreSQL takes to count the same week from the (tenant_id, timestamp) index.
# With KEY set (a tenant key printed by an earlier run) nothing is seeded and only the requests
# are timed.
set -euo pipefail
URL="$1"; ADMIN="$2"; DB="$3"; N="${4:-1000000}"; REQUESTS="${5:-2000}"
json() { python3 -c "import sys, json; print(json.load(sys.stdin)$1)"; }
if [ -z "${KEY:-}" ]; then
KEY="$(curl -sf -X POST "$URL/api/v1/tenants" -H "X-Admin-Key: $ADMIN" -H 'Content-Type: application/json' \
  -d "{\"name\": \"stats-bench-$RANDOM$RANDOM\"}" | json "['api_key']")"
TENANT="$(curl -sf "$URL/api/v1/status" -H "X-API-Key: $KEY" | json "['tenant']['id']")"
echo "tenant $TENANT; seeding $N entries over the last 7 days"
t0=$(date +%s.%N)
if [[ "$DB" == sqlite:* ]]; then
# SQLite: the server's database file (WAL; the server may keep running).
python3 - "${DB#sqlite:}" "$TENANT" "$N" <<'PY'
import datetime, hashlib, sqlite3, sys, time, uuid
path, tenant, n = sys.argv[1], uuid.UUID(sys.argv[2]).bytes, int(sys.argv[3])
db = sqlite3.connect(path, timeout=30)
db.execute("PRAGMA busy_timeout = 30000")
now = datetime.datetime.now(datetime.timezone.utc)
start = now.replace(hour=0, minute=0, second=0, microsecond=0) - datetime.timedelta(days=6)
span = (now - start).total_seconds()
def rows():
    for g in range(1, n + 1):
        ts = start + datetime.timedelta(seconds=span * (g - 1) / n)
        h = hashlib.sha256(str(g).encode()).hexdigest()
        yield (uuid.uuid4().bytes, tenant, g, "read_data", f"crm/contacts/{g}", '{"rows":%d}' % (g % 50),
               "{}", "[]", (g % 100) / 100.0, int(g % 3 == 0), ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), h, h)
with db:
    db.executemany("""INSERT INTO audit_entries (id, tenant_id, seq, action, resource, input, output,
        reasoning, risk_score, is_approved, "timestamp", prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)""", rows())
    db.execute("INSERT INTO audit_heads (tenant_id, seq, hash) VALUES (?, ?, ?) ON CONFLICT (tenant_id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash", (tenant, n, "0" * 64))
db.execute("ANALYZE")
t = time.perf_counter()
first = start.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
c = db.execute('SELECT count(*) FROM audit_entries WHERE tenant_id = ? AND "timestamp" >= ?', (tenant, first)).fetchone()[0]
print(f"index count of the week (what the rollup replaces): {c} entries in {(time.perf_counter() - t) * 1000:.1f} ms")
PY
echo "seeded in $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s"
else
psql -q -h 127.0.0.1 -U postgres -d "$DB" <<SQL
INSERT INTO audit_entries (id, tenant_id, seq, agent_id, user_id, action, resource, input, output,
  reasoning, risk_score, is_approved, "timestamp", prev_hash, hash, signature)
SELECT gen_random_uuid(), '$TENANT', g, NULL, NULL, 'read_data', 'crm/contacts/' || g,
  jsonb_build_object('rows', g % 50), '{}'::jsonb, '[]'::jsonb, (g % 100) / 100.0, g % 3 = 0,
  w.start + (now() - w.start) * ((g - 1)::float8 / $N),
  md5((g - 1)::text) || md5((g - 1)::text), md5(g::text) || md5(g::text), NULL
FROM generate_series(1, $N) AS g,
  (SELECT date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '6 days' AS start) AS w;
INSERT INTO audit_heads (tenant_id, seq, hash) VALUES ('$TENANT', $N, md5('$N') || md5('$N'))
ON CONFLICT (tenant_id) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash;
VACUUM ANALYZE audit_entries;
SQL
echo "seeded in $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s"
echo "index count of the week (what the rollup replaces):"
psql -h 127.0.0.1 -U postgres -d "$DB" -c "EXPLAIN (ANALYZE, TIMING OFF) SELECT count(*) FROM audit_entries WHERE tenant_id = '$TENANT' AND \"timestamp\" >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '6 days'" \
  | grep -E "Execution Time|Heap Fetches"
fi
echo "tenant key (KEY=... to time again without seeding): $KEY"
fi
python3 - "$URL" "$KEY" "$REQUESTS" <<'PY'
import http.client, json, sys, time, urllib.parse
url, key, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
u = urllib.parse.urlparse(url)
conn = http.client.HTTPConnection(u.hostname, u.port)
def get():
    conn.request("GET", "/api/v1/stats", headers={"X-API-Key": key})
    r = conn.getresponse()
    body = r.read()
    assert r.status == 200, (r.status, body)
    return body
for _ in range(200):
    get()
times = []
for _ in range(n):
    t = time.perf_counter()
    body = get()
    times.append((time.perf_counter() - t) * 1000)
times.sort()
q = lambda p: times[min(len(times) - 1, int(p * len(times)))]
acts = json.loads(body)["activities"]
print("activities:", sum(a["count"] for a in acts), "entries over", len(acts), "days")
print(f"GET /api/v1/stats x{n}: p50 {q(0.5):.2f} ms, p95 {q(0.95):.2f} ms, p99 {q(0.99):.2f} ms, max {times[-1]:.2f} ms")
PY
