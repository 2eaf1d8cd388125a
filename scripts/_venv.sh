# shellcheck shell=bash
# Sourced by scripts/demo, scripts/test and benchmarks/run_all: makes sure ./.venv exists, works,
# and has snodo installed (editable) with the requested extras. Not meant to be run on its own.
#
#   source scripts/_venv.sh; snodo_venv test      # or: snodo_venv base, snodo_venv docs
#   snodo_venv test "$REPO/.venvs/python3.12" /usr/bin/python3.12   # another venv, made with that
#
# After it returns, $REPO is the repository root (also the cwd), $VENV the venv and $PY its python.
#
# The install is skipped when .venv/.snodo-install records the same pyproject.toml hash and an
# extras set that covers the request ("docs" is test and docs, and covers "test"; "test" covers
# "base"). Set SNODO_REINSTALL=1 to force it.
# The Python that creates the venv is $PYTHON if set, else the first python3.x >= 3.10 on PATH.

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
VENV="$REPO/.venv"
PY="$VENV/bin/python"
STAMP="$VENV/.snodo-install"
#: The minor versions snodo supports and tests (pyproject.toml's classifiers say the same).
SNODO_SUPPORTED_PYTHONS="3.10 3.11 3.12 3.13"

_snodo_log() { printf '%s\n' "[$(basename "$0")] $*" >&2; }

_snodo_py_ok() { # usage: _snodo_py_ok INTERPRETER -> true if it runs and is >= 3.10
  "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' >/dev/null 2>&1
}

snodo_py_version() { # usage: snodo_py_version INTERPRETER -> "3.12", from the interpreter itself
  "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null
}

_snodo_pick_python() {
  local candidate
  for candidate in ${PYTHON:-} python3 python3.13 python3.12 python3.11 python3.10; do
    if command -v "$candidate" >/dev/null 2>&1 && _snodo_py_ok "$candidate"; then
      printf '%s\n' "$candidate"
      return 0
    fi
  done
  return 1
}

_snodo_create_venv() { # usage: _snodo_create_venv [BASE]: BASE, else the first good python3.x
  local base="${1:-}"
  if [ -z "$base" ] && ! base="$(_snodo_pick_python)"; then
    _snodo_log "error: snodo needs Python 3.10 or newer (python3 on PATH is: $(python3 --version 2>&1 || echo missing))"
    return 1
  fi
  _snodo_log "creating ${VENV#"$REPO/"} with $base ($("$base" --version 2>&1))"
  rm -rf "$VENV"
  if ! "$base" -m venv "$VENV"; then
    _snodo_log "error: '$base -m venv' failed; on Debian/Ubuntu install it: apt-get install python3-venv"
    rm -rf "$VENV"
    return 1
  fi
  # Editable installs from pyproject.toml need pip >= 21.3; old distributions ship older ones.
  _snodo_pip install --upgrade 'pip>=23' || _snodo_log "warning: could not upgrade pip; continuing"
}

_snodo_pip() { # pip, quiet; its output (build-backend warnings included) is shown only on failure
  local log="$VENV/.snodo-pip.log"
  if "$PY" -m pip --disable-pip-version-check --quiet "$@" >"$log" 2>&1; then
    return 0
  fi
  cat "$log" >&2
  return 1
}

_snodo_pyproject_hash() {
  "$PY" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' \
    "$REPO/pyproject.toml"
}

_snodo_install_current() { # usage: _snodo_install_current EXTRAS HASH
  [ -f "$STAMP" ] || return 1
  local stamp_hash stamp_extras
  read -r stamp_hash stamp_extras <"$STAMP" || return 1
  [ "$stamp_hash" = "$2" ] || return 1
  [ "$stamp_extras" = "$1" ] || [ "$stamp_extras" = "docs" ] ||
    { [ "$stamp_extras" = "test" ] && [ "$1" != "docs" ]; }
}

snodo_venv() { # usage: snodo_venv base|test|docs [VENV_DIR BASE_PYTHON]
  local extras="${1:-base}" spec="." hash base="${3:-}" want=""
  case "$extras" in
    test) spec=".[test]" ;;
    docs) spec=".[test,docs]" ;;
  esac
  if [ -n "${2:-}" ]; then
    VENV="$2"
    PY="$VENV/bin/python"
    STAMP="$VENV/.snodo-install"
  fi
  if [ -n "$base" ] && ! want="$(snodo_py_version "$base")"; then
    _snodo_log "error: $base does not run"
    return 1
  fi

  # One set-up at a time: several scripts may start together (CI, editors, colleagues).
  # The lock is taken on pyproject.toml itself (read-only), so no lock file is left behind.
  exec 9<"$REPO/pyproject.toml"
  if command -v flock >/dev/null 2>&1; then
    flock -w 600 9 || { _snodo_log "error: waited 600 s for another set-up to finish"; return 1; }
  fi

  if [ ! -x "$PY" ] || ! _snodo_py_ok "$PY" || ! "$PY" -m pip --version >/dev/null 2>&1 ||
    { [ -n "$want" ] && [ "$(snodo_py_version "$PY")" != "$want" ]; }; then
    { [ -e "$PY" ] || [ -L "$PY" ]; } && _snodo_log "${VENV#"$REPO/"}'s python is broken, too old or not $base's; recreating it"
    _snodo_create_venv "$base" || return 1
  fi
  if [ -n "$want" ] && [ "$(snodo_py_version "$PY")" != "$want" ]; then
    _snodo_log "error: ${VENV#"$REPO/"} made with $base runs Python $(snodo_py_version "$PY"), not $want"
    return 1
  fi

  hash="$(_snodo_pyproject_hash)"
  if [ "${SNODO_REINSTALL:-0}" = "1" ] || ! _snodo_install_current "$extras" "$hash"; then
    _snodo_log "installing snodo ($spec) into ${VENV#"$REPO/"}"
    rm -f "$STAMP"
    _snodo_pip install -e "$spec" || {
      _snodo_log "error: pip install -e '$spec' failed"
      return 1
    }
    printf '%s %s\n' "$hash" "$extras" >"$STAMP"
  fi

  exec 9>&-
  export VIRTUAL_ENV="$VENV"
  export PATH="$VENV/bin:$PATH"
  return 0
}
