# Sourced by the e2e suites: XTASK is the xtask binary of this build (.ci/run builds the whole
# workspace once, xtask included) when present, else `cargo xtask`. `cargo xtask` alone
# resolves xtask's features apart from the workspace's and rebuilds the dependencies whose
# features differ (minutes on a cold machine). By hand, after changing xtask, rebuild it first
# (`cargo build -p xtask`) or run with XTASK="cargo xtask".
if [ -z "${XTASK:-}" ]; then
  _xtask_bin="${TARGET_DIR:-${CARGO_TARGET_DIR:-$ROOT/target}}/debug/xtask"
  if [ -x "$_xtask_bin" ]; then
    XTASK="$_xtask_bin"
  else
    XTASK="cargo xtask"
  fi
fi
