#!/usr/bin/env bash
# Agent SDKs (issue 19) against the real server binary of this build, on the embedded defaults
# (SQLite, in-process cache):
#  1. the generated code is up to date: sdks/openapi.json equals the server's /openapi.json and
#     the Python models/client and the TypeScript types/client equal what their generators make
#     of it;
#  2. the Python SDK's tests (pytest): governance layer, LangChain, LangGraph, OpenAI Agents SDK;
#     and its type check (mypy --strict);
#  3. the TypeScript SDK: type check (tsc) and tests (node --test), Vercel AI SDK wrapper;
#  4. the example agent (GDPR-restricted export, refused, approved, succeeds);
#  5. short runs of both SDKs' overhead benchmarks (print the figures; fail above the 2 ms budget).
# Python packages are hash-locked in sdks/python/requirements-ci.txt (venv cached under
# $STEWARD_CACHE_DIR/venv-sdk, rebuilt when the file changes); npm packages by
# sdks/typescript/package-lock.json (`npm ci`, cache under $STEWARD_CACHE_DIR/npm).
# Run by .ci/run after the conformance suite (BIN set); by hand:
#   BIN=target/debug/steward bash .ci/e2e/sdk.sh
set -euo pipefail
ROOT="${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
BIN="${BIN:-$ROOT/target/debug/steward}"
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
CACHE="${STEWARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/steward}"
VENV=""
# shellcheck source=../lib/venv.sh
source "$ROOT/.ci/lib/venv.sh"
PY_SDK="$ROOT/sdks/python"
TS_SDK="$ROOT/sdks/typescript"
T_START=$(date +%s)

step() {  # step NAME CMD... : runs CMD, prints its duration, fails the script on failure
  local name="$1"; shift
  local t0; t0=$(date +%s%N)
  echo "sdk: $name"
  if "$@"; then
    echo "sdk: $name: ok in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  else
    local rc=$?
    echo "sdk: $name: FAILED (status $rc) after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
    exit "$rc"
  fi
}

python_env() {
  VENV="$(ci_venv sdk "$PY_SDK/requirements-ci.txt")"
}

node_env() {
  ( cd "$TS_SDK" && npm ci --no-audit --no-fund --loglevel=error --prefer-offline --cache "$CACHE/npm" >/dev/null )
}

WORK="$(mktemp -d)"
SERVERS=()
cleanup() {
  for p in "${SERVERS[@]+"${SERVERS[@]}"}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK" "$TS_SDK/node_modules/.cache" 2>/dev/null || true
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT="$(free_port)"
export STEWARD_URL="http://127.0.0.1:$PORT"
export STEWARD_ADMIN_KEY="sdk-admin-key"
export STEWARD_SUPER_EMAIL="super@sdk.test" STEWARD_SUPER_PASSWORD="Sdk-Super-Password-1"

start_server() {  # start_server NAME PORT [ENV=VALUE...]: the binary on the embedded defaults (SQLite)
  local name="$1" port="$2"; shift 2
  mkdir -p "$WORK/$name"
  ( cd "$WORK/$name" && exec env HOST=127.0.0.1 PORT="$port" DATABASE_URL="sqlite://$WORK/$name/steward.db" \
    ADMIN_API_KEY="$STEWARD_ADMIN_KEY" SECRET_KEY="sdk-secret-key-0123456789abcdef-0123" WEBHOOK_SECRET="sdk-webhook" \
    SUPER_ADMIN_EMAIL="$STEWARD_SUPER_EMAIL" SUPER_ADMIN_PASSWORD="$STEWARD_SUPER_PASSWORD" ENVIRONMENT=test \
    EXPORT_STORAGE_PATH="$WORK/$name/exports" MODEL_STORAGE_PATH="$WORK/$name/models" LOG_LEVEL=WARNING \
    "$@" "$BIN" ) >"$WORK/$name.log" 2>&1 &
  SERVERS+=("$!")
  for _ in $(seq 1 200); do
    if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' "http://127.0.0.1:$port/health/ready" 2>/dev/null; then
      return 0
    fi
    sleep 0.3
  done
  echo "the server ($name) did not become ready:" >&2; tail -n 20 "$WORK/$name.log" >&2
  return 1
}

on_failure_log() { echo "--- server log (last 30 lines)"; tail -n 30 "$WORK/main.log" || true; }

step "python environment (pinned, cached)" python_env
step "node environment (npm ci)" node_env
step "server on the embedded defaults" start_server main "$PORT"

step "generated Python code up to date with /openapi.json" \
  python3 "$PY_SDK/scripts/generate.py" --url "$STEWARD_URL" --check
step "generated TypeScript code up to date with /openapi.json" \
  node "$TS_SDK/scripts/generate.mjs" --url "$STEWARD_URL" --check

py_tests() {
  ( cd "$PY_SDK" && OPENAI_AGENTS_DISABLE_TRACING=1 PYTHONPATH="$PY_SDK" PYTHONDONTWRITEBYTECODE=1 \
      "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests ) || { on_failure_log; return 1; }
}
step "Python SDK tests (pytest)" py_tests

# The approval paths once more against a server with HITL_REQUIRE_APPROVAL_ID=true (the setting
# docs/hitl.md recommends for production): the SDK approves only through the approval_id.
STRICT_PORT="$(free_port)"
strict_tests() {
  start_server strict "$STRICT_PORT" HITL_REQUIRE_APPROVAL_ID=true || return 1
  ( cd "$PY_SDK" && STEWARD_URL="http://127.0.0.1:$STRICT_PORT" STEWARD_STRICT_HITL=1 OPENAI_AGENTS_DISABLE_TRACING=1 \
      PYTHONPATH="$PY_SDK" PYTHONDONTWRITEBYTECODE=1 "$VENV/bin/python" -m pytest -q -p no:cacheprovider -k approv tests ) \
    || { tail -n 30 "$WORK/strict.log"; return 1; }
}
step "Python SDK approval paths with HITL_REQUIRE_APPROVAL_ID=true" strict_tests

py_types() {
  ( cd "$PY_SDK" && "$VENV/bin/python" -m mypy --strict --cache-dir "$CACHE/mypy-sdk" steward_sdk )
}
step "Python SDK type check (mypy --strict)" py_types

ts_tests() {
  ( cd "$TS_SDK" && npx --no-install tsc -p tsconfig.json && node --test test/*.test.mjs ) || { on_failure_log; return 1; }
}
step "TypeScript SDK type check and tests (node --test)" ts_tests

example() {
  PYTHONPATH="$PY_SDK" PYTHONDONTWRITEBYTECODE=1 "$VENV/bin/python" "$ROOT/examples/gdpr_export/agent.py" \
    --url "$STEWARD_URL" --admin-key "$STEWARD_ADMIN_KEY" --super-email "$STEWARD_SUPER_EMAIL" \
    --super-password "$STEWARD_SUPER_PASSWORD" --auto-approve
}
step "example: GDPR-restricted export, refused, approved, succeeds" example

bench() {
  PYTHONPATH="$PY_SDK" PYTHONDONTWRITEBYTECODE=1 "$VENV/bin/python" "$PY_SDK/bench/overhead.py" \
    --url "$STEWARD_URL" --admin-key "$STEWARD_ADMIN_KEY" --calls 300 --budget-ms 2
}
step "Python SDK overhead benchmark (short run)" bench

ts_bench() {
  node "$TS_SDK/bench/overhead.mjs" --url "$STEWARD_URL" --admin-key "$STEWARD_ADMIN_KEY" --calls 200 --budget-ms 2
}
step "TypeScript SDK overhead benchmark (short run)" ts_bench

echo "sdk: all steps passed in $(( $(date +%s) - T_START ))s"
