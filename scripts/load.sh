#!/usr/bin/env bash
# HTTP load test: GET /healthz vs GET /public/agents?q=… (1,000+ distinct queries, rotated) at
# 64 concurrent connections against a release build over the first N real agents.
# Usage: scripts/load.sh [AGENTS=10000] [SECONDS=20] [EMBEDDER=static]
# LOAD_BINARY=path measures a built server; LOAD_DATA_DIR=dir serves an existing data directory.
# Needs: wrk (installed from Debian's packages when missing), python3.
set -euo pipefail
cd "$(dirname "$0")/.."

agents=${1:-10000}
seconds=${2:-20}
embedder=${3:-static}
data=${REGISTRY_BENCH_DATA:-bench-data/agents-real.jsonl}
port=${LOAD_PORT:-18480}
work=$(mktemp -d)
server_pid=
# Only ever signal the server we started (a bare `kill 0` would hit this whole process group).
# The server saves its keyword index into the data directory as it stops: wait for it to exit
# before removing the directory.
trap 'if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi; rm -rf "$work"' EXIT

if ! command -v wrk >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq wrk) >/dev/null
fi
# LOAD_BINARY=path measures an already built server (for comparing builds) instead.
binary=${LOAD_BINARY:-target/release/agent-registry}
[ -n "${LOAD_BINARY:-}" ] || cargo build --release --quiet

head -n "$agents" "$data" > "$work/agents.jsonl"
# LOAD_DATA_DIR=dir serves an existing data directory instead of importing (for catalogues
# larger than the data set, e.g. one that `START_IMPORT_ONLY=1 START_DATA_DIR=dir
# scripts/start-time.sh 100000` prepared; its first start embeds every agent).
data_dir=${LOAD_DATA_DIR:-$work/data}
if [ -z "${LOAD_DATA_DIR:-}" ]; then
  "$binary" import "$work/agents.jsonl" --owner load --go-live \
    --data-dir "$data_dir" 2>&1 | grep -E '^import(ed)?[: ]'
fi

python3 scripts/bench-queries.py "$work/agents.jsonl" 20261122 | python3 -c '
import sys, urllib.parse
for phrase in sys.stdin.read().splitlines():
    print("/public/agents?limit=10&q=" + urllib.parse.quote(phrase))' > "$work/queries.txt"

cat > "$work/rotate.lua" <<LUA
local paths = {}
for line in io.lines("$work/queries.txt") do paths[#paths + 1] = line end
local counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", paths[(counter % #paths) + 1])
end
LUA

REGISTRY_EMBEDDER=$embedder RUST_LOG=warn "$binary" \
  --bind "127.0.0.1:$port" --data-dir "$data_dir" &
server_pid=$!
# Ready, and with every vector loaded (until then searches rank by keywords alone).
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$port/readyz" | grep -qE '"vectors":"(ready|none)"' && break
  sleep 0.2
done

# The server's CPU time so far (user + system, in clock ticks): with the requests served, the
# CPU each request cost, which a shared machine's changing speed moves less than throughput.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; }
ticks_start=$(cpu_ticks)
echo "== GET /healthz, 64 connections, ${seconds}s"
wrk -t2 -c64 -d"${seconds}s" --latency "http://127.0.0.1:$port/healthz" | tee "$work/health.txt"
ticks_health=$(cpu_ticks)
echo "== GET /public/agents?q=…, 64 connections, ${seconds}s, embedder=$embedder"
wrk -t2 -c64 -d"${seconds}s" --latency -s "$work/rotate.lua" "http://127.0.0.1:$port" | tee "$work/search.txt"
ticks_search=$(cpu_ticks)

rss=$(awk '/VmRSS/ {print $2}' "/proc/$server_pid/status")
health=$(awk '/Requests\/sec/ {print $2}' "$work/health.txt")
search=$(awk '/Requests\/sec/ {print $2}' "$work/search.txt")
# The targets: a fifth of /healthz's rate with intent ranking, three tenths with keywords alone.
target=0.2
[ "$embedder" != none ] || target=0.3
python3 -c "print(f'search/healthz throughput ratio: {float($search)/float($health):.3f} (target >= $target)')"
served_health=$(awk '/requests in/ {print $1}' "$work/health.txt")
served_search=$(awk '/requests in/ {print $1}' "$work/search.txt")
python3 - "$(getconf CLK_TCK)" "$ticks_start" "$ticks_health" "$ticks_search" "$served_health" "$served_search" <<'PY'
import sys
tick, start, health, search, n_health, n_search = map(float, sys.argv[1:])
per_health = (health - start) / tick / n_health * 1e6
per_search = (search - health) / tick / n_search * 1e6
print(f"server CPU per request: /healthz {per_health:.1f} µs, search {per_search:.1f} µs "
      f"(ratio {per_health / per_search:.3f})")
PY
echo "server resident memory: $((rss / 1024)) MiB with ${LOAD_DATA_DIR:+the agents of }${LOAD_DATA_DIR:-$agents agents}"
