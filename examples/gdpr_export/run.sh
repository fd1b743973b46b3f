#!/usr/bin/env bash
# One command: installs the Python SDK into examples/gdpr_export/.venv (first run only) and runs
# the agent against http://127.0.0.1:8080 (start the server with `cargo run --release`).
# Arguments are passed to agent.py (--auto-approve, --url, --admin-key, ...).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ ! -x "$HERE/.venv/bin/python" ] || ! "$HERE/.venv/bin/python" -c 'import httpx, pydantic' 2>/dev/null; then
  python3 -m venv "$HERE/.venv"
  "$HERE/.venv/bin/pip" install -q --disable-pip-version-check "httpx==0.28.1" "pydantic==2.14.4"
fi
exec "$HERE/.venv/bin/python" "$HERE/agent.py" "$@"
