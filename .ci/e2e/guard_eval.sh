#!/usr/bin/env bash
# The prompt guard's quality on the public labelled sets: leave-one-source-out and 5-fold
# (cargo xtask guard-eval), printed into the CI log; and the obfuscation tests.
set -euo pipefail
ROOT="${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
SHARED="${SHARED:-$ROOT/../shared}"
cd "$ROOT"
# shellcheck source=../lib/xtask.sh
source "$ROOT/.ci/lib/xtask.sh"
$XTASK guard-eval --data "$SHARED/guard-data"
