#!/usr/bin/env bash
# Browser tests of the web interface: headless Debian Chromium driven by Python Playwright
# against the real registry binary (tests/e2e). Installs what is missing:
#   - chromium from Debian (apt-get; never `playwright install`, which downloads a browser)
#   - playwright and pytest from PyPI in a virtualenv (.venv-e2e)
# Screenshots of each page land in target/e2e-artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${E2E_VENV:-.venv-e2e}"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"

if [ ! -x "$CHROMIUM" ]; then
    echo "== install chromium (Debian)"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
echo "== $("$CHROMIUM" --version 2>/dev/null || echo "chromium at $CHROMIUM")"

if [ ! -d tests/oidc/node_modules/oidc-provider ]; then
    echo "== npm ci --prefix tests/oidc (the OpenID provider the sign-in test runs)"
    npm ci --prefix tests/oidc --no-audit --no-fund --loglevel=error
fi

echo "== build the registry binary"
# Same feature set as the test build (see scripts/interop.sh): nothing is compiled twice.
cargo test --locked --no-run --quiet

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import playwright.sync_api, pytest' 2>/dev/null; then
    echo "== create $VENV with playwright"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet 'playwright>=1.40,<2' pytest
fi
echo "== playwright $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("playwright"))')"

echo "== pytest tests/e2e (screenshots: target/e2e-artifacts/)"
status=0
CHROMIUM="$CHROMIUM" REGISTRY_BIN="${REGISTRY_BIN:-${CARGO_TARGET_DIR:-target}/debug/agent-registry}" \
    "$VENV/bin/python" -m pytest tests/e2e -q -p no:cacheprovider -rxX || status=$?
if [ "$status" -eq 5 ]; then
    echo "e2e: pytest collected no tests" >&2
    exit 1
fi
exit "$status"
