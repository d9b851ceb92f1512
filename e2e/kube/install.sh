#!/usr/bin/env bash
# Creates (or reuses) the Python virtualenv of the Kubernetes API emulator harness,
# outside the repository, with the pinned dependencies of requirements.txt, and makes
# the `tarsy_kube_emulator` package importable from it. Idempotent: a stamp records
# the installed requirements; a second run with the same ones only re-points the
# package path (so a fresh clone elsewhere works too).
#
# Usage:   e2e/kube/install.sh              (prints the variable to export)
#          eval "$(e2e/kube/install.sh)"    (installs and exports TARSY_KUBE_PYTHON)
#
# Then:    "$TARSY_KUBE_PYTHON" -m tarsy_kube_emulator --port 0 --kubeconfig-out kubeconfig [--kubelet]
#
# Directory: ${TARSY_KUBE_VENV:-$HOME/.cache/tarsy/kube-venv}
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${TARSY_KUBE_VENV:-$HOME/.cache/tarsy/kube-venv}"
PYTHON_BIN="${PYTHON:-python3}"

log() { echo "kube-emulator install: $*" >&2; }

command -v "$PYTHON_BIN" >/dev/null || { log "python3 (>= 3.11) is required"; exit 1; }
"$PYTHON_BIN" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
    || { log "python >= 3.11 is required (kmock uses typing.Self)"; exit 1; }

STAMP="$("$PYTHON_BIN" --version 2>&1) $(sha256sum "$HERE/requirements.txt" | cut -d' ' -f1)"
if [[ -x "$VENV/bin/python" ]] && [[ "$(cat "$VENV/.tarsy-kube-installed" 2>/dev/null || true)" == "$STAMP" ]]; then
    log "venv up to date in $VENV"
else
    log "installing pinned requirements into $VENV"
    [[ -x "$VENV/bin/python" ]] || "$PYTHON_BIN" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$HERE/requirements.txt" >&2
    echo "$STAMP" > "$VENV/.tarsy-kube-installed"
fi

# The package is used from the working tree (no build step): a .pth entry points at it.
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$HERE" > "$SITE/tarsy_kube_emulator.pth"
"$VENV/bin/python" -c 'import tarsy_kube_emulator' >&2

echo "export TARSY_KUBE_PYTHON=$VENV/bin/python"
