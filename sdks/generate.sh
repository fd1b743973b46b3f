#!/usr/bin/env bash
# Regenerate both SDKs from a running server's /openapi.json (after an API change):
#   sdks/generate.sh http://127.0.0.1:8080
# writes sdks/openapi.json (the snapshot), the Python models/client and the TypeScript
# types/client; commit them. `.ci/e2e/sdk.sh` fails while they differ from the server's document.
set -euo pipefail
URL="${1:?usage: sdks/generate.sh SERVER_URL}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python3 "$HERE/python/scripts/generate.py" --url "$URL" --snapshot
node "$HERE/typescript/scripts/generate.mjs"
