#!/usr/bin/env bash
# The dashboard's checks, in two steps around the Rust build:
#   dashboard/ci.sh build    npm ci, API types current with openapi.json, type check,
#                            lint, unit tests, production build (before cargo builds
#                            tarsy, which embeds dashboard/dist)
#   dashboard/ci.sh browser  browser tests against the real tarsy binary
#                            (after cargo has built it), with Debian's chromium
# Caches live outside the clone, under ~/.cache/tarsy.
set -euo pipefail
cd "$(dirname "$0")"

export npm_config_cache="${npm_config_cache:-$HOME/.cache/tarsy/npm}"
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

case "${1:-}" in
build)
  npm ci --no-progress
  # The API's types must be those generated from the committed OpenAPI
  # document (which a Rust test of tarsy-api keeps current with the server).
  if ! npm run --silent gen:api -- --check; then
    echo "dashboard/src/api/openapi.gen.ts is not what dashboard/openapi.json generates:" \
      "run 'npm run gen:api' in dashboard/ and commit the result" >&2
    exit 1
  fi
  npm run typecheck
  npm run lint
  npm test
  npm run build
  ;;
browser)
  if ! command -v chromium >/dev/null 2>&1 && [ -z "${CHROMIUM_PATH:-}" ]; then
    echo "installing Debian's chromium for the browser tests" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null) >&2
  fi
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tarsy/target}"
  if [ -z "${TARSY_BIN:-}" ] && [ ! -x "$CARGO_TARGET_DIR/debug/tarsy" ]; then
    (cd .. && cargo build -p tarsy)
  fi
  npm run test:browser
  ;;
*)
  echo "usage: $0 build|browser" >&2
  exit 2
  ;;
esac
