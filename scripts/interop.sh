#!/usr/bin/env bash
# Interop with real A2A clients: builds the registry, installs the official Python SDK
# (a2a-sdk 1.x) in a virtualenv once, and runs tests/interop against the real binary.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${INTEROP_VENV:-.venv-interop}"

echo "== build the registry binary"
# Through `cargo test --no-run`: the same feature set as the test build, so after `cargo test`
# nothing is compiled again (a plain `cargo build` unifies features differently).
cargo test --locked --no-run --quiet

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import a2a.client, a2a.utils.signing, pytest, httpx' 2>/dev/null; then
    echo "== create $VENV with a2a-sdk 1.x"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet 'a2a-sdk[http-server,signing]>=1,<2' pytest httpx
fi
echo "== a2a-sdk $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("a2a-sdk"))')"

echo "== pytest tests/interop"
status=0
REGISTRY_BIN="${REGISTRY_BIN:-${CARGO_TARGET_DIR:-target}/debug/agent-registry}" \
    "$VENV/bin/python" -m pytest tests/interop -q -p no:cacheprovider || status=$?
if [ "$status" -eq 5 ]; then
    echo "interop: pytest collected no tests" >&2
    exit 1
fi
exit "$status"
