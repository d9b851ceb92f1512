#!/usr/bin/env bash
# Prints the path of a `promtool` (Prometheus's checker; the metrics tests
# run `promtool check metrics` on every /metrics page): the one on PATH,
# else Debian's, taken out of its `prometheus` package into a cache
# (nothing is installed or started), idempotently.
set -euo pipefail

if command -v promtool >/dev/null 2>&1; then
  command -v promtool
  exit 0
fi
CACHE="${TARSY_PROMTOOL_CACHE:-$HOME/.cache/tarsy/promtool}"
if [[ ! -x "$CACHE/usr/bin/promtool" ]]; then
  mkdir -p "$CACHE"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  (
    cd "$work"
    apt-get download prometheus >/dev/null 2>&1 ||
      (apt-get update -qq >&2 && apt-get download prometheus >/dev/null)
    dpkg-deb -x prometheus_*.deb extracted
    install -D -m 0755 extracted/usr/bin/promtool "$CACHE/usr/bin/promtool"
  ) >&2
fi
echo "$CACHE/usr/bin/promtool"
