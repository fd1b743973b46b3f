#!/usr/bin/env bash
# Browser tests of the operator console (issue 18): Debian's Chromium, headless, driven by
# playwright-core (pinned in dashboard/package-lock.json) from node:test. Starts its own server
# from $BIN on SQLite, seeds it through the API and saves a screenshot of every screen under
# target/dashboard-screenshots/. Run by .ci/run (BIN set); by hand:
#   BIN=target/debug/steward bash .ci/e2e/dashboard.sh
set -euo pipefail
T0=$(date +%s)
ROOT="${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
BIN="${BIN:-$ROOT/target/debug/steward}"
CACHE="${STEWARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/steward}"
SRC="$ROOT/.ci/e2e/dashboard"
DEPS="$CACHE/dashboard-e2e"
SHOTS="$ROOT/target/dashboard-screenshots"

if [ ! -x /usr/bin/chromium ]; then
  echo "installing chromium (apt)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

# node_modules in the cache, reinstalled only when the lock file changes.
mkdir -p "$DEPS"
if ! cmp -s "$SRC/package-lock.json" "$DEPS/package-lock.json" || [ ! -d "$DEPS/node_modules/playwright-core" ]; then
  cp "$SRC/package.json" "$SRC/package-lock.json" "$DEPS/"
  (cd "$DEPS" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
echo "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo unknown); node $(node --version); playwright-core $(node -p "require('$DEPS/node_modules/playwright-core/package.json').version")"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
WORK="$(mktemp -d)"
PID=""
cleanup() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

PORT="$(free_port)"
URL="http://127.0.0.1:$PORT"
SUPER_EMAIL="super@dashboard.test"
SUPER_PASSWORD="Dashboard-Super-1"
# Single sign-on through the OpenID provider of .ci/peers/oidc.sh when it runs (TEST_OIDC_*);
# without it the SSO test skips.
SSO_ENV=()
if [ -n "${TEST_OIDC_ISSUER:-}" ]; then
  SSO_ENV=(
    SSO_PROVIDERS_JSON="[{\"id\": \"testidp\", \"name\": \"Test IdP\", \"issuer\": \"$TEST_OIDC_ISSUER\", \"client_id\": \"$TEST_OIDC_CLIENT_ID\", \"client_secret\": \"$TEST_OIDC_CLIENT_SECRET\", \"scopes\": [\"openid\", \"email\", \"profile\", \"groups\"]}]"
    SSO_CALLBACK_URL="$URL/api/v1/auth/sso/callback"
    SSO_ROLE_MAPPING_JSON='{"steward-analysts": "security_analyst"}'
  )
  echo "single sign-on through $TEST_OIDC_ISSUER"
fi
env "${SSO_ENV[@]+"${SSO_ENV[@]}"}" HOST=127.0.0.1 PORT="$PORT" DATABASE_URL="sqlite://$WORK/steward.db" \
  ADMIN_API_KEY="dashboard-admin-key" SECRET_KEY="dashboard-secret-key-0123456789abcdef" \
  WEBHOOK_SECRET="dashboard-webhook-secret" SUPER_ADMIN_EMAIL="$SUPER_EMAIL" \
  SUPER_ADMIN_PASSWORD="$SUPER_PASSWORD" ENVIRONMENT=test EXPORT_STORAGE_PATH="$WORK/exports" \
  LOG_LEVEL=WARNING "$BIN" >"$WORK/server.log" 2>&1 &
PID=$!
for _ in $(seq 1 100); do
  if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' "$URL/health/ready" 2>/dev/null; then break; fi
  sleep 0.3
done
python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' "$URL/health/ready" \
  || { echo "the server did not become ready"; tail -n 30 "$WORK/server.log"; exit 1; }

rm -rf "$SHOTS"
mkdir -p "$SHOTS"
status=0
PLAYWRIGHT_MODULES="$DEPS" STEWARD_URL="$URL" SUPER_EMAIL="$SUPER_EMAIL" SUPER_PASSWORD="$SUPER_PASSWORD" \
  SCREENSHOTS="$SHOTS" CHROMIUM=/usr/bin/chromium SSO_PROVIDER="${TEST_OIDC_ISSUER:+testidp}" \
  node --test --test-reporter=spec --test-concurrency=1 "$SRC/dashboard.test.mjs" || status=$?
echo "screenshots: $(ls "$SHOTS" | wc -l) in $SHOTS"
if [ "$status" -ne 0 ]; then
  echo "--- server log"; tail -n 40 "$WORK/server.log"
fi
echo "dashboard browser tests: $([ "$status" -eq 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - T0 ))s"
exit "$status"
