#!/usr/bin/env bash
# Smoke test of the benchmark suite (issue 20): `cargo xtask bench --quick` runs every scenario
# (health, check, guard, audit writes, heartbeat, search, audit list, stats, anomaly report,
# HITL round trip, login, WebSocket fan-out, async export) for 3 s on a small seed against the
# server binary of this build ($BIN, the dev profile), on the embedded defaults (SQLite,
# in-process cache and bus). It fails when a scenario answers an error or completes nothing;
# it never checks a time (figures of a debug build on a shared machine mean nothing).
# The report goes to target/bench-quick/report.{json,md}.
# By hand: BIN=target/debug/steward bash .ci/e2e/bench_quick.sh
set -euo pipefail
ROOT="${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
BIN="${BIN:-$ROOT/target/debug/steward}"
cd "$ROOT"
# shellcheck source=../lib/xtask.sh
source "$ROOT/.ci/lib/xtask.sh"
$XTASK bench --quick --embedded --bin "$BIN" --out "$ROOT/target/bench-quick"
