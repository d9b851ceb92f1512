#!/usr/bin/env bash
# CI for the LLM service: virtualenv (outside the clone, reused), install from PyPI,
# generate the gRPC code from the shared proto, lint, test.
#
#   TARSY_VENV_DIR   where the virtualenv lives (default ~/.cache/tarsy/llm-venv)
#   PYTHON           interpreter to create it with (default python3)
#
# Re-runs skip the install while pyproject.toml, constraints.txt, the interpreter
# and this checkout's location are unchanged (hash stamp in the virtualenv).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

: "${HOME:=$(getent passwd "$(id -u)" | cut -d: -f6)}"
venv="${TARSY_VENV_DIR:-$HOME/.cache/tarsy/llm-venv}"
python="${PYTHON:-python3}"
py="$venv/bin/python"

log() { echo "llm-service ci: $*" >&2; }

if [ ! -x "$py" ] || ! "$py" -c 'import sys' 2>/dev/null; then
  log "creating virtualenv in $venv"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv"
fi

stamp_file="$venv/.tarsy-llm-stamp"
stamp="$(
  {
    cat pyproject.toml constraints.txt setup.py
    "$py" -c 'import sys; print(sys.version)'
    echo "$here"
  } | sha256sum | cut -d' ' -f1
)"
if [ ! -f "$stamp_file" ] || [ "$(cat "$stamp_file")" != "$stamp" ]; then
  log "installing dependencies (pyproject.toml or constraints changed)"
  rm -f "$stamp_file"
  # Build requirements first, so the editable install needs no isolated build env.
  "$py" -m pip install --quiet --disable-pip-version-check -c constraints.txt \
    setuptools grpcio-tools
  "$py" -m pip install --quiet --disable-pip-version-check -c constraints.txt \
    --no-build-isolation -e ".[test]"
  echo "$stamp" >"$stamp_file"
else
  log "dependencies up to date ($venv)"
fi

log "generating gRPC code"
"$py" scripts/gen_proto.py >/dev/null

# Keep tool caches out of the working tree.
export RUFF_CACHE_DIR="$venv/.ruff-cache"
log "ruff"
"$venv/bin/ruff" check .
"$venv/bin/ruff" format --check .

log "pytest"
set +e
"$py" -m pytest -p no:cacheprovider -q "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  log "pytest collected no tests"
  exit 1
fi
exit "$status"
