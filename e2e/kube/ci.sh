#!/usr/bin/env bash
# Runs the emulator harness's own tests (real kubectl against the emulator, the
# kubelet running real processes). Exits non-zero on failure and when no test ran.
# Extra arguments go to pytest. TARSY_KUBE_RUST_SMOKE=1 also builds and runs the
# kube-rs smoke test (slow: it compiles kube).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
eval "$("$HERE/install.sh")"
cd "$HERE"
set +e
# kmock ships a pytest plugin that needs pytest-asyncio; these tests do not use it.
"$TARSY_KUBE_PYTHON" -m pytest tests -p no:cacheprovider -p no:kmock -q "$@"
rc=$?
set -e
if [[ $rc -eq 5 ]]; then
    echo "kube emulator tests: no test ran" >&2
    exit 1
fi
exit $rc
