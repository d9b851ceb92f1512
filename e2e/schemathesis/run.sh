#!/usr/bin/env bash
# Schemathesis against a real `tarsy serve` (the offline example: scripted
# LLM, recorded MCP servers), on SQLite and on Postgres: requests generated
# from the served OpenAPI document (examples, boundary values, fuzzing,
# sequences through links), checking that no answer is a 5xx and that every
# answer conforms to the document (status, content type, headers, body), and
# that schema-invalid input is refused. Exits non-zero on any finding.
#
# Usage: e2e/schemathesis/run.sh [sqlite|postgres]...   (default: both)
#   TARSY_BIN               the tarsy binary (default: $CARGO_TARGET_DIR/debug/tarsy, built if missing)
#   TARSY_TEST_DATABASE_URL a Postgres server (default: scripts/postgres.sh starts one)
#   SCHEMATHESIS_EXAMPLES   test cases per operation and phase (default 100)
#   SCHEMATHESIS_SEED       random seed (default: a fixed one, for repeatable runs)
# Each finding is printed with a curl command reproducing it; against a
# server started by hand, `$VENV/bin/st --config-file e2e/schemathesis/schemathesis.toml
# replay ID` (with ST_CACHE_DIR set as below) replays it.
set -euo pipefail
cd "$(dirname "$0")/../.."

SCHEMATHESIS_VERSION="4.32.5"
VENV="${TARSY_SCHEMATHESIS_VENV:-$HOME/.cache/tarsy/schemathesis-$SCHEMATHESIS_VERSION}"
EXAMPLES="${SCHEMATHESIS_EXAMPLES:-100}"
export ST_CACHE_DIR="$HOME/.cache/tarsy/schemathesis-cache"
SEED="${SCHEMATHESIS_SEED:-20261127}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tarsy/target}"
TARSY_BIN="${TARSY_BIN:-$CARGO_TARGET_DIR/debug/tarsy}"

log() { echo "schemathesis: $*" >&2; }

if [[ ! -x "$VENV/bin/st" ]]; then
  log "installing schemathesis $SCHEMATHESIS_VERSION into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi
if [[ ! -x "$TARSY_BIN" ]]; then
  log "building tarsy"
  cargo build -p tarsy
fi

WORK="$(mktemp -d)"
SERVER_PID=""
DROP_DB=""
cleanup() {
  if [[ -n "$SERVER_PID" ]]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  if [[ -n "$DROP_DB" ]]; then
    psql -q "$TARSY_TEST_DATABASE_URL" -c "DROP DATABASE IF EXISTS $DROP_DB WITH (FORCE)" >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# GETs a URL and prints one field of its JSON answer, picked by a Python expression on `d`.
json_get() {
  curl -sf "$1" | python3 -c "import json, sys; d = json.load(sys.stdin); print($2)"
}

# Runs one investigation to the end, so that the generated requests meet a
# finished session with stages, a timeline and a trace; exports its ids.
seed_session() {
  local base="$1" id status="" i
  id="$(curl -sf -X POST "$base/api/v1/alerts" -H 'content-type: application/json' \
    -d '{"alert_type": "PodCrashLooping", "data": {"namespace": "shop", "pod": "checkout-api-7d9f"}}' |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["session_id"])')"
  for ((i = 0; i < 120; i++)); do
    status="$(json_get "$base/api/v1/sessions/$id" 'd["status"]')"
    [[ "$status" == completed || "$status" == failed || "$status" == timed_out ]] && break
    sleep 0.5
  done
  [[ "$status" == completed ]] || { log "the seed session did not complete: $status"; return 1; }
  export ST_SESSION_ID="$id"
  ST_LLM_INTERACTION_ID="$(json_get "$base/api/v1/sessions/$id/trace" \
    'd["stages"][0]["executions"][0]["llm_interactions"][0]["id"]')"
  ST_MCP_INTERACTION_ID="$(json_get "$base/api/v1/sessions/$id/trace" \
    'd["stages"][0]["executions"][0]["mcp_interactions"][0]["id"]')"
  export ST_LLM_INTERACTION_ID ST_MCP_INTERACTION_ID
}

run_backend() {
  local backend="$1" port base started
  port="$(free_port)"
  base="http://127.0.0.1:$port"
  local -a env=()
  case "$backend" in
    sqlite) ;;
    postgres)
      : "${TARSY_TEST_DATABASE_URL:=$(scripts/postgres.sh)}"
      DROP_DB="tarsy_schemathesis_$$"
      psql -q "$TARSY_TEST_DATABASE_URL" -c "CREATE DATABASE $DROP_DB" >/dev/null
      env=(DATABASE_URL="${TARSY_TEST_DATABASE_URL%/*}/$DROP_DB")
      ;;
    *) log "unknown backend $backend (sqlite or postgres)"; return 2 ;;
  esac
  mkdir -p "$WORK/$backend"
  started=$SECONDS
  env "${env[@]}" "$TARSY_BIN" serve --config examples/config --port "$port" \
    --data-dir "$WORK/$backend" --shutdown-grace 1 >"$WORK/$backend/server.log" 2>&1 &
  SERVER_PID=$!
  local i
  for ((i = 0; i < 120; i++)); do
    curl -sf "$base/health" >/dev/null 2>&1 && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.5
  done
  if ! curl -sf "$base/health" >/dev/null 2>&1; then
    log "tarsy serve ($backend) did not start:"; tail -20 "$WORK/$backend/server.log" >&2; return 1
  fi
  seed_session "$base"

  log "$backend: tarsy serve on $base"
  local rc=0
  # Every check but positive_data_acceptance (a schema-valid request must be
  # answered 2xx): the API refuses, by design, schema-valid requests that
  # name what does not exist (an alert type, chain or MCP server the
  # configuration lacks), which a schema cannot express.
  "$VENV/bin/st" --config-file e2e/schemathesis/schemathesis.toml run "$base/api/v1/openapi.json" \
    --checks all --exclude-checks positive_data_acceptance \
    --max-examples "$EXAMPLES" --seed "$SEED" || rc=$?
  if ((rc != 0)); then
    log "$backend: findings (server log: the last lines)"; tail -20 "$WORK/$backend/server.log" >&2
  fi
  # Anything the server logged as a panic is a finding too, whatever was answered.
  if grep -q "panicked" "$WORK/$backend/server.log"; then
    log "$backend: tarsy serve panicked:"; grep -A5 "panicked" "$WORK/$backend/server.log" >&2; rc=1
  fi
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
  if [[ -n "$DROP_DB" ]]; then
    psql -q "$TARSY_TEST_DATABASE_URL" -c "DROP DATABASE IF EXISTS $DROP_DB WITH (FORCE)" >/dev/null
    DROP_DB=""
  fi
  log "$backend: $((SECONDS - started)) s"
  return "$rc"
}

backends=("$@")
((${#backends[@]})) || backends=(sqlite postgres)
failed=0
for backend in "${backends[@]}"; do
  run_backend "$backend" || failed=1
done
exit "$failed"
