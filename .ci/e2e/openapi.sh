#!/usr/bin/env bash
# The OpenAPI document against the running server (issue 12):
#  1. openapi-spec-validator (PyPI, pinned) validates /openapi.json as OpenAPI 3.1;
#  2. schemathesis (PyPI, pinned) calls every operation with generated input, once with a
#     tenant API key and once with the super admin's JWT, checking `not_a_server_error` and
#     `response_schema_conformance`; a bounded number of examples keeps CI in budget.
# Any failure fails CI. Run by .ci/run after the conformance suite (BIN set); by hand:
#   BIN=target/debug/steward bash .ci/e2e/openapi.sh
set -euo pipefail
ROOT="${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
BIN="${BIN:-$ROOT/target/debug/steward}"
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
CACHE="${STEWARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/steward}"
# shellcheck source=../lib/venv.sh
source "$ROOT/.ci/lib/venv.sh"
EXAMPLES="${OPENAPI_MAX_EXAMPLES:-25}"

VENV="$(ci_venv openapi "$ROOT/.ci/requirements/openapi.txt")"

WORK="$(mktemp -d)"
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
URL="http://127.0.0.1:$PORT"
ADMIN_KEY="openapi-admin-key"
SUPER_EMAIL="super@openapi.test" SUPER_PASSWORD="OpenAPI-Super-1"
( cd "$WORK" && HOST=127.0.0.1 PORT="$PORT" DATABASE_URL="sqlite://$WORK/steward.db" \
  ADMIN_API_KEY="$ADMIN_KEY" SUPER_ADMIN_EMAIL="$SUPER_EMAIL" SUPER_ADMIN_PASSWORD="$SUPER_PASSWORD" \
  EXPORT_STORAGE_PATH="$WORK/exports" MODEL_STORAGE_PATH="$WORK/models" LOG_LEVEL=WARNING \
  exec "$BIN" ) >"$WORK/server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; rm -rf "$WORK"' EXIT
up=0
for _ in $(seq 1 100); do
  if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' "$URL/health" 2>/dev/null; then up=1; break; fi
  sleep 0.3
done
[ "$up" = 1 ] || { echo "openapi: the server did not start:" >&2; tail -20 "$WORK/server.log" >&2; exit 1; }

python3 - "$URL" "$ADMIN_KEY" "$SUPER_EMAIL" "$SUPER_PASSWORD" >"$WORK/creds" <<'PY'
import json, sys, urllib.request
url, admin, email, password = sys.argv[1:5]
def call(method, path, body, headers):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method=method,
                                 headers={"content-type": "application/json", **headers})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)
tenant = call("POST", "/api/v1/tenants", {"name": "openapi-fuzz"}, {"X-Admin-Key": admin})
login = call("POST", "/api/v1/auth/login", {"email": email, "password": password}, {})
key = tenant.get("api_key") or tenant.get("tenant_key") or tenant.get("key")
print(key)
print(login["access_token"])
PY
TENANT_KEY="$(sed -n 1p "$WORK/creds")"
JWT="$(sed -n 2p "$WORK/creds")"
[ -n "$TENANT_KEY" ] && [ "$TENANT_KEY" != "None" ] || { echo "no tenant key in the tenant response" >&2; exit 1; }

curl_json() { python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' "$1"; }
curl_json "$URL/openapi.json" > "$WORK/openapi.json"
echo "openapi: validating $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(len([m for m in v if m in ("get","put","post","delete","patch")]) for v in d["paths"].values()), "operations")' "$WORK/openapi.json")"
"$VENV/bin/openapi-spec-validator" "$WORK/openapi.json"

cd "$WORK"  # schemathesis keeps its cache in the working directory
fuzz() {  # fuzz NAME HEADER
  echo "openapi: schemathesis as $1 ($EXAMPLES examples per operation)"
  # `auth_logout` would end the JWT's session half-way through the run.
  "$VENV/bin/schemathesis" run "$URL/openapi.json" -H "$2" \
    -c not_a_server_error,response_schema_conformance -n "$EXAMPLES" \
    --phases examples,coverage,fuzzing --exclude-operation-id auth_logout \
    --seed 20261124 --no-color >"$WORK/st.log" 2>&1
  local rc=$?
  if [ "$rc" -ne 0 ] && grep -q '^=* *FAILURES' "$WORK/st.log"; then
    # The failures with their reproduction (curl), then the summary.
    sed -n '/^=* *FAILURES/,/^=* *SUMMARY/p' "$WORK/st.log" | head -200
  fi
  grep -v '^  - ' "$WORK/st.log" | tail -25
  return "$rc"
}
status=0
fuzz "tenant API key" "X-API-Key: $TENANT_KEY" || status=1
fuzz "super admin JWT" "Authorization: Bearer $JWT" || status=1
if grep -E '(panicked|internal_error)' "$WORK/server.log" >/dev/null; then
  echo "openapi: the server logged internal errors:" >&2
  grep -E '(panicked|internal_error)' "$WORK/server.log" | head -20 >&2
  exit 1
fi
[ "$status" = 0 ] || exit 1
echo "openapi: ok"
