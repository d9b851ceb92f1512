#!/usr/bin/env bash
# Installs the third-party MCP servers that TARSy's MCP tests run against
# ("real peers"), from the npm and PyPI registries, into a cache directory
# outside the repository. Idempotent: a stamp file records what is installed
# and a second run with the same versions does nothing.
#
# Usage:   e2e/install-mcp-peers.sh            (prints the variables to export)
#          eval "$(e2e/install-mcp-peers.sh)"  (installs and exports them)
#
# Directory: ${TARSY_PEERS_DIR:-$HOME/.cache/tarsy/mcp-peers}
#   npm/node_modules/...   @modelcontextprotocol/server-everything, kubernetes-mcp-server
#   venv/bin/mcp-server-time
set -euo pipefail

PEERS_DIR="${TARSY_PEERS_DIR:-$HOME/.cache/tarsy/mcp-peers}"
EVERYTHING_VERSION="2026.8.31"
K8S_MCP_VERSION="0.0.67"
TIME_VERSION="2026.10.19"
STAMP="everything=$EVERYTHING_VERSION k8s=$K8S_MCP_VERSION time=$TIME_VERSION"

log() { echo "install-mcp-peers: $*" >&2; }

mkdir -p "$PEERS_DIR/npm"
if [[ "$(cat "$PEERS_DIR/.installed" 2>/dev/null || true)" == "$STAMP" ]] \
    && [[ -f "$PEERS_DIR/npm/node_modules/@modelcontextprotocol/server-everything/package.json" ]] \
    && [[ -x "$PEERS_DIR/npm/node_modules/.bin/kubernetes-mcp-server" ]] \
    && [[ -x "$PEERS_DIR/venv/bin/mcp-server-time" ]]; then
    log "peers already installed in $PEERS_DIR"
else
    command -v npm >/dev/null || { log "npm is required (apt-get install nodejs npm)"; exit 1; }
    command -v python3 >/dev/null || { log "python3 is required"; exit 1; }
    log "installing npm peers into $PEERS_DIR/npm"
    # A package.json keeps npm from walking up to some parent project.
    [[ -f "$PEERS_DIR/npm/package.json" ]] || echo '{"name":"tarsy-mcp-peers","private":true}' > "$PEERS_DIR/npm/package.json"
    npm install --prefix "$PEERS_DIR/npm" --no-audit --no-fund --loglevel=error \
        "@modelcontextprotocol/server-everything@$EVERYTHING_VERSION" \
        "kubernetes-mcp-server@$K8S_MCP_VERSION" >&2
    log "installing PyPI peers into $PEERS_DIR/venv"
    [[ -x "$PEERS_DIR/venv/bin/python" ]] || python3 -m venv "$PEERS_DIR/venv"
    "$PEERS_DIR/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "mcp-server-time==$TIME_VERSION" >&2
    echo "$STAMP" > "$PEERS_DIR/.installed"
    log "done"
fi

echo "export TARSY_PEERS_DIR=$PEERS_DIR"
