#!/usr/bin/env bash
# Schema fuzzing: proves that the OpenAPI document the server serves at /openapi.json describes it.
#
# Builds the registry (the test build's feature set), creates .venv-fuzz with a pinned
# Schemathesis, and runs tests/fuzz/fuzz.py inside a network namespace that has only loopback:
# the server, a stand-in for the hosted agents' upstream APIs, and Schemathesis talk over
# 127.0.0.1, and nothing the fuzzer makes the server fetch can leave the machine.
#
# Schemathesis reads /openapi.json and, for every operation, sends generated requests, valid and
# invalid, authenticated with the master key, in its examples, coverage (boundary values),
# fuzzing and stateful (chains through links, e.g. publish then read, update, delete) phases.
# Every check is on (enabled in tests/fuzz/schemathesis.toml): no 5xx; status codes, content types, headers and bodies as
# documented; schema-valid requests accepted and schema-violating ones refused; documented auth
# enforced; undocumented methods answered 405; deleted resources gone. tests/fuzz/schemathesis.toml
# narrows three expectations for a few operations, each with its reason; tests/fuzz/hooks.py
# makes valid cases obey the rules JSON Schema cannot state (distinct capability names, ...).
#
# FUZZ_MAX_EXAMPLES (default 100) is the most cases per operation and phase: the default run is
# about 4,000 cases and takes about 2 minutes on 2 cores (plus the build); FUZZ_MAX_EXAMPLES=500
# is a longer run (about 10 minutes). Runs use a fixed seed by default, so CI's verdict is the same on every run; FUZZ_SEED=N
# picks another, FUZZ_SEED=random a fresh one (each run prints its seed). Extra
# arguments go to `schemathesis run`.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${FUZZ_VENV:-.venv-fuzz}"
SCHEMATHESIS_VERSION=4.32.5

echo "== build the registry binary"
# Through `cargo test --no-run`: the same feature set as the test build, so after `cargo test`
# nothing is compiled again (a plain `cargo build` unifies features differently).
cargo test --locked --no-run --quiet
REGISTRY_BIN="${REGISTRY_BIN:-${CARGO_TARGET_DIR:-target}/debug/agent-registry}"
REGISTRY_BIN="$(realpath "$REGISTRY_BIN")"

if [ ! -x "$VENV/bin/schemathesis" ] \
    || [ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("schemathesis"))' 2>/dev/null)" != "$SCHEMATHESIS_VERSION" ]; then
    echo "== create $VENV with schemathesis $SCHEMATHESIS_VERSION"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "schemathesis==$SCHEMATHESIS_VERSION"
fi

# A network namespace of our own with only loopback (as root directly, else as a user namespace's
# root).
if [ "$(id -u)" -eq 0 ]; then
    ISOLATE=(unshare --net)
else
    ISOLATE=(unshare --net --map-root-user)
fi
if ! "${ISOLATE[@]}" true 2>/dev/null; then
    echo "fuzz: cannot create a network namespace (unshare --net); the fuzzer must not reach other hosts" >&2
    exit 1
fi

echo "== schemathesis $SCHEMATHESIS_VERSION against the registry (${FUZZ_MAX_EXAMPLES:-100} examples per operation)"
started=$(date +%s)
status=0
REGISTRY_BIN="$REGISTRY_BIN" SCHEMATHESIS="$(realpath "$VENV/bin/schemathesis")" \
    "${ISOLATE[@]}" sh -c 'ip link set lo up && exec "$0" "$@"' \
    "$VENV/bin/python" tests/fuzz/fuzz.py "$@" || status=$?
echo "== fuzz: $(( $(date +%s) - started )) s, exit $status"
exit "$status"
