# Sourced by .ci/run, .ci/peers/*.sh and .ci/e2e/*.sh: Python environments from hash-locked
# requirement files, cached between runs.
#
#   VENV="$(ci_venv NAME LOCKFILE [PIP-ARGS...])"
#
# creates (or reuses) $STEWARD_CACHE_DIR/venv-NAME with exactly the packages of LOCKFILE, a
# `pip-compile --generate-hashes` output (.ci/requirements/*.txt, sdks/python/requirements-ci.txt).
# pip refuses any file whose hash differs from the lock. The venv is rebuilt when the lock
# file changes (its sha256 is kept in the venv). Progress goes to stderr, the path to stdout.
ci_venv() {
  local name="$1" lock="$2"; shift 2
  local cache="${STEWARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/steward}"
  local venv="$cache/venv-$name" want
  want="$(sha256sum "$lock" | cut -d' ' -f1)"
  if [ "$(cat "$venv/.lock-sha256" 2>/dev/null)" != "$want" ] || [ ! -x "$venv/bin/python" ]; then
    echo "venv $name: installing $(basename "$lock") into $venv" >&2
    rm -rf "$venv"
    mkdir -p "$cache"
    python3 -m venv "$venv" >&2 || return 1
    "$venv/bin/pip" install -q --disable-pip-version-check --require-hashes --no-deps "$@" \
      -r "$lock" >&2 || { rm -rf "$venv"; return 1; }
    echo "$want" >"$venv/.lock-sha256"
  fi
  echo "$venv"
}
