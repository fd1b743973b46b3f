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
# The ONNX backend's transformer interface inside the whole guard, on the hand-written probes
# (docs/guard.md, "Interface (b)"): the option an operator measures a model with.
$XTASK guard-eval --data "$SHARED/guard-data" --external fixtures/guard/probes.jsonl \
  --onnx fixtures/guard/transformer/model.onnx --backend hybrid
