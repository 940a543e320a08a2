#!/usr/bin/env bash
# Interop with real clients: builds the registry, installs the official Python SDKs of A2A
# (a2a-sdk 1.x) and MCP (mcp, pinned below) in a virtualenv once, and runs tests/interop against
# the real binary.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${INTEROP_VENV:-.venv-interop}"
# The MCP SDK speaks the stateless 2026-07-28 revision by default and the initialize handshake
# (2025-11-25 and earlier) on request; tests/interop/test_mcp_sdk.py drives both.
MCP_VERSION=2.3.0

echo "== build the registry binary"
# Through `cargo test --no-run`: the same feature set as the test build, so after `cargo test`
# nothing is compiled again (a plain `cargo build` unifies features differently).
cargo test --locked --no-run --quiet

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import a2a.client, a2a.utils.signing, pytest, httpx' 2>/dev/null; then
    echo "== create $VENV with a2a-sdk 1.x"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet 'a2a-sdk[http-server,signing]>=1,<2' pytest httpx "mcp==$MCP_VERSION"
fi
if [ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))' 2>/dev/null)" != "$MCP_VERSION" ]; then
    echo "== install mcp $MCP_VERSION in $VENV"
    "$VENV/bin/pip" install --quiet "mcp==$MCP_VERSION"
fi
echo "== a2a-sdk $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("a2a-sdk"))'), mcp $MCP_VERSION"

echo "== pytest tests/interop"
status=0
REGISTRY_BIN="${REGISTRY_BIN:-${CARGO_TARGET_DIR:-target}/debug/agent-registry}" \
    "$VENV/bin/python" -m pytest tests/interop -q -p no:cacheprovider || status=$?
if [ "$status" -eq 5 ]; then
    echo "interop: pytest collected no tests" >&2
    exit 1
fi
exit "$status"
