# shellcheck shell=bash
# The OpenID provider for bins/server/tests/sso_oidc.rs (sourced by .ci/run): oidc-provider
# 9.13.3 from npm (fixtures/oidc-provider), installed with `npm ci` into the cache directory
# (reinstalled only when package-lock.json changes) and started on a free port.
# Exports TEST_OIDC_ISSUER, TEST_OIDC_CLIENT_ID, TEST_OIDC_CLIENT_SECRET.

oidc_peer() {
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "oidc peer: node/npm not found; the SSO end-to-end tests skip" >&2
    return 0
  fi
  local src="$ROOT/fixtures/oidc-provider" cache="$STEWARD_CACHE_DIR/oidc-provider"
  local dir="$ROOT/target/oidc-peer" stamp want
  mkdir -p "$cache" "$dir"
  want="$(sha256sum "$src/package-lock.json" | cut -d' ' -f1)"
  stamp="$(cat "$cache/.lock-sha256" 2>/dev/null || true)"
  if [ "$want" != "$stamp" ] || [ ! -d "$cache/node_modules/oidc-provider" ]; then
    echo "oidc peer: npm ci (oidc-provider)"
    cp "$src/package.json" "$src/package-lock.json" "$cache/"
    (cd "$cache" && npm ci --no-audit --no-fund --loglevel=error) || { echo "oidc peer: npm ci failed" >&2; return 1; }
    echo "$want" > "$cache/.lock-sha256"
  fi
  # ESM resolves packages from the script's directory: run a copy next to the cached modules.
  cp "$src/provider.mjs" "$cache/provider.mjs"
  local port; port="$(free_port)"
  export TEST_OIDC_CLIENT_ID="steward" TEST_OIDC_CLIENT_SECRET="steward-oidc-secret"
  OIDC_PORT="$port" OIDC_CLIENT_ID="$TEST_OIDC_CLIENT_ID" OIDC_CLIENT_SECRET="$TEST_OIDC_CLIENT_SECRET" \
    node "$cache/provider.mjs" >"$dir/provider.log" 2>&1 &
  CI_PIDS+=("$!")
  local i
  for i in $(seq 1 120); do
    if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' \
        "http://127.0.0.1:$port/.well-known/openid-configuration" >/dev/null 2>&1; then
      export TEST_OIDC_ISSUER="http://127.0.0.1:$port"
      echo "oidc peer: oidc-provider at $TEST_OIDC_ISSUER (log $dir/provider.log)"
      return 0
    fi
    sleep 0.5
  done
  echo "oidc peer: the provider did not answer within 60 s:" >&2
  tail -20 "$dir/provider.log" >&2
  return 1
}

oidc_peer
