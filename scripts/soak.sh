#!/usr/bin/env bash
# Soak test: runs a release server for a long time under a steady mix of real requests and
# records, minute by minute, its throughput, latency, errors, resident memory and open files,
# so that leaks (memory, file descriptors, connections) and slow degradation show.
#
# Usage: scripts/soak.sh [MINUTES=30] [AGENTS=20000] [CONCURRENCY=32]
#
# What it does:
#   1. builds the release binary (`cargo build --release --locked`), unless SOAK_BINARY names
#      one already built;
#   2. imports AGENTS agents, live, into a fresh temporary data directory: the first AGENTS
#      lines of a JSON Lines file of real agents (REGISTRY_BENCH_DATA; the same default as
#      scripts/load.sh) when that file exists, otherwise AGENTS synthetic agents made here, so
#      the script also works from a clone of the repository alone;
#   3. starts the server on a free loopback port with a random master key, RUST_LOG=warn and
#      the per-token rate limit switched off (--token-rate-limit-per-minute 0): the soak
#      measures the server, not the limiter, and every worker shares a few tokens. The per-IP
#      limit does not apply either, since loopback clients are exempt by default;
#   4. runs scripts/soak.py: CONCURRENCY workers, for MINUTES minutes, each looping over a
#      weighted mix of valid requests: searches (GET and POST), resolves (card and record),
#      JSON-RPC SendMessage (search_agents, resolve_package), writes (publish, go-live,
#      update, delete of the worker's own agents), playground sessions (create, discover,
#      delete) and /healthz.
#
# How long it takes: MINUTES, plus the build, the import (under a minute for 20,000 agents on
# a release build) and the server's start-up (it builds its search index).
#
# What it needs: python3 (3.11 or newer) and curl. The driver uses httpx from a virtualenv made
# at .venv-soak on the first run, which needs network access to PyPI once.
#
# Where results go: target/soak/<UTC timestamp>/ holds
#   soak.tsv     one line a minute: requests, req/s, p50 and p99 latency, errors, the server's
#                resident memory (MB) and open file descriptors;
#   errors.tsv   every unexpected answer (5xx, connection error, timeout, or a status the
#                request's kind never expects), one a line with its kind and status;
#   summary.txt  totals, overall latency, errors by kind and status, and memory growth;
#   server.log   the server's output; import.log the import's.
#
# Exit status: 0 when every answer was expected; 1 when any 5xx, connection error or timeout
# happened (or the server exited); 2 when only other unexpected statuses did.
#
# Other settings: SOAK_BINARY=path runs an already built server (no cargo), SOAK_SEED fixes the
# driver's random choices (default 1), SOAK_PYTHON names the Python used to make the venv.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=${1:-30}
agents=${2:-20000}
concurrency=${3:-32}
data=${REGISTRY_BENCH_DATA:-bench-data/agents-real.jsonl}
python=${SOAK_PYTHON:-python3}
venv=.venv-soak
httpx_version=0.28.1

for value in "$minutes" "$agents" "$concurrency"; do
  case $value in
    '' | *[!0-9]* | 0) echo "usage: scripts/soak.sh [MINUTES=30] [AGENTS=20000] [CONCURRENCY=32] (positive integers)" >&2; exit 64 ;;
  esac
done
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "soak: needs Python 3.11 or newer as $python" >&2
  exit 1
fi
command -v curl >/dev/null || { echo "soak: needs curl" >&2; exit 1; }

out=target/soak/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
work=$(mktemp -d)
server_pid=
stop_server() {
  # Only ever signal the server we started.
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$server_pid" 2>/dev/null || true
  fi
  server_pid=
}
trap 'stop_server; rm -rf "$work"' EXIT

binary=${SOAK_BINARY:-target/release/agent-registry}
if [ -z "${SOAK_BINARY:-}" ]; then
  echo "== cargo build --release"
  cargo build --release --locked --quiet
fi
[ -x "$binary" ] || { echo "soak: no server binary at $binary" >&2; exit 1; }

if ! "$venv/bin/python" -c "import sys, httpx; sys.exit(httpx.__version__ != '$httpx_version')" 2>/dev/null; then
  echo "== create $venv with httpx $httpx_version"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "httpx==$httpx_version"
fi

if [ -f "$data" ]; then
  echo "== data: first $agents lines of $(basename "$data")"
  head -n "$agents" "$data" > "$work/agents.jsonl"
else
  echo "== data: $agents synthetic agents ($(basename "$data") not found)"
  "$python" - "$agents" "$work/agents.jsonl" <<'PY'
import json, random, sys
count, path = int(sys.argv[1]), sys.argv[2]
rng = random.Random(20261124)
words = ("weather forecast travel booking flight hotel price crypto stock market news summary "
         "translate language document invoice payment email calendar schedule meeting code "
         "review search index recipe music video image photo map route traffic health fitness "
         "legal contract research paper data chart report sales lead support ticket chat").split()
verbs = "finds tracks books answers summarises translates checks plans compares monitors".split()
tags = "realtime finance travel productivity developer media research commerce health legal".split()
with open(path, "w") as out:
    for i in range(count):
        topic = rng.sample(words, 3)
        body = {
            "package_name": f"com.soak.a{i}",
            "name": f"{topic[0].title()} {topic[1].title()} Agent {i}",
            "description": f"{rng.choice(verbs).title()} {' '.join(topic)} "
                           + " ".join(rng.choice(words) for _ in range(rng.randint(4, 12))) + ".",
            "url": f"https://a{i}.soak.example/a2a/v1",
            "tags": rng.sample(tags, rng.randint(1, 4)),
        }
        if rng.random() < 0.5:
            body["category"] = rng.choice(["Weather", "Finance", "Travel", "Developer Tools"])
        if rng.random() < 0.4:
            body["capabilities"] = [
                {"name": f"{verb}_{topic[0]}", "description": f"{verb.title()} {topic[0]} for a query",
                 "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}}
                for verb in rng.sample(verbs, rng.randint(1, 3))
            ]
        roll = rng.random()
        if roll < 0.15:
            body["payment"] = {"model": "paid", "protocols": ["x402"], "rails": ["base:usdc"]}
        elif roll < 0.25:
            body["payment"] = {"model": "freemium", "protocols": ["x402"], "rails": ["base:usdc", "polygon:usdc"]}
        elif roll < 0.35:
            body["payment"] = {"model": "free"}
        out.write(json.dumps(body) + "\n")
PY
fi

echo "== import"
"$binary" import "$work/agents.jsonl" --owner soak --go-live --data-dir "$work/data" \
  > "$out/import.log" 2>&1 || { cat "$out/import.log" >&2; exit 1; }
# The import's closing line ("import: created N, …"; older builds: "imported N agents, …").
grep -E '^import(ed |: )' "$out/import.log" || tail -n 1 "$out/import.log"
# What was actually imported (lines breaking the contract's limits are not) is what the driver
# searches for and resolves.
"$binary" export --output "$work/imported.jsonl" --data-dir "$work/data" 2>>"$out/import.log"

port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
master_key=soak-$("$python" -c 'import secrets; print(secrets.token_hex(16))')
echo "== start the server on 127.0.0.1:$port"
RUST_LOG=warn "$binary" --bind "127.0.0.1:$port" --data-dir "$work/data" \
  --master-key "$master_key" --token-rate-limit-per-minute 0 \
  > "$out/server.log" 2>&1 &
server_pid=$!
started=$(date +%s)
# Ready, and with every vector loaded (until then searches rank by keywords alone).
until curl -sf "http://127.0.0.1:$port/readyz" | grep -qE '"vectors":"(ready|none)"'; do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    server_pid=
    echo "soak: the server exited during start-up; the end of its log:" >&2
    tail -n 20 "$out/server.log" >&2
    exit 1
  fi
  if [ $(($(date +%s) - started)) -gt 600 ]; then
    echo "soak: the server was not ready after 600 s" >&2
    exit 1
  fi
  sleep 0.5
done
echo "ready after $(($(date +%s) - started)) s"

echo "== soak: $minutes min, $concurrency workers, results in $out"
status=0
SOAK_MASTER_KEY=$master_key "$venv/bin/python" scripts/soak.py \
  --base-url "http://127.0.0.1:$port" --pid "$server_pid" --agents "$work/imported.jsonl" \
  --minutes "$minutes" --concurrency "$concurrency" --outdir "$out" \
  --seed "${SOAK_SEED:-1}" || status=$?

if ! kill -0 "$server_pid" 2>/dev/null; then
  server_pid=
  echo "soak: the server is no longer running; the end of its log:" >&2
  tail -n 20 "$out/server.log" >&2
  [ "$status" -ne 0 ] || status=1
fi
stop_server
echo "server log: $out/server.log ($(wc -l < "$out/server.log") lines)"
echo "results: $out"
exit "$status"
