#!/usr/bin/env bash
# Regenerates the bundled LLM price book, operator/pricing/price-book.json,
# from LiteLLM's model price map as the litellm wheel on PyPI ships it
# (litellm/model_prices_and_context_window_backup.json).
#
#   scripts/price-book.sh [litellm-version]     (default: the pinned version below)
#
# Downloads the wheel only (no dependencies, nothing installed), extracts the
# catalog with python's zipfile and converts it with
# `cargo run -p tarsy-pricing --example price_book` (the conversion lives in
# Rust, in PriceBook::from_catalog). The date in the book is today's (UTC).
# Review the diff before checking it in.
set -euo pipefail

LITELLM_VERSION="${1:-1.110.2}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/operator/pricing/price-book.json"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

py=python3
if ! "$py" -m pip --version >/dev/null 2>&1; then
  echo "pip missing: using a throwaway virtualenv" >&2
  python3 -m venv "$tmp/venv"
  py="$tmp/venv/bin/python"
fi

echo "downloading litellm==$LITELLM_VERSION" >&2
"$py" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  -d "$tmp/wheel" "litellm==$LITELLM_VERSION" >&2

"$py" - "$tmp/wheel" "$tmp/catalog.json" <<'PY'
import pathlib, sys, zipfile
wheels = sorted(pathlib.Path(sys.argv[1]).glob("litellm-*.whl"))
if len(wheels) != 1:
    sys.exit(f"expected one litellm wheel, found {[w.name for w in wheels]}")
with zipfile.ZipFile(wheels[0]) as wheel:
    data = wheel.read("litellm/model_prices_and_context_window_backup.json")
pathlib.Path(sys.argv[2]).write_bytes(data)
PY

cd "$root"
cargo run -q -p tarsy-pricing --example price_book -- \
  "$tmp/catalog.json" "$LITELLM_VERSION" "$(date -u +%F)" >"$tmp/price-book.json"
mv "$tmp/price-book.json" "$out"
echo "wrote $out (litellm $LITELLM_VERSION)" >&2
