#!/usr/bin/env bash
# ARD search against the REST search, one sitting: the same 1,200 queries (rotated) at 64
# concurrent connections, as POST /public/agents/search {query, limit 10, collapse false} and as
# POST /ard/search {query: {text}, pageSize 10, federation none}, alternated in rounds so a shared
# machine's drift falls on both. Reports throughput, latency and the server's CPU per request.
# Usage: scripts/load-ard.sh [AGENTS=10000] [SECONDS=15] [ROUNDS=2] [EMBEDDER=static]
# LOAD_BINARY=path measures a built server. Needs: wrk (installed from Debian's packages when
# missing), python3, the data set at bench-data/agents-real.jsonl (REGISTRY_BENCH_DATA).
set -euo pipefail
cd "$(dirname "$0")/.."

agents=${1:-10000}
seconds=${2:-15}
rounds=${3:-2}
embedder=${4:-static}
data=${REGISTRY_BENCH_DATA:-bench-data/agents-real.jsonl}
port=${LOAD_PORT:-18481}
work=$(mktemp -d)
server_pid=
trap 'if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi; rm -rf "$work"' EXIT

if ! command -v wrk >/dev/null; then
  (apt-get update -qq && apt-get install -y -qq wrk) >/dev/null
fi
binary=${LOAD_BINARY:-target/release/agent-registry}
[ -n "${LOAD_BINARY:-}" ] || cargo build --release --quiet

head -n "$agents" "$data" > "$work/agents.jsonl"
"$binary" import "$work/agents.jsonl" --owner load --go-live --data-dir "$work/data" 2>&1 \
  | grep -E '^import(ed)?[: ]' || true

python3 scripts/bench-queries.py "$work/agents.jsonl" 20261127 > "$work/phrases.txt"
python3 - "$work" <<'PY'
import json, sys
phrases = open(f"{sys.argv[1]}/phrases.txt").read().splitlines()
with open(f"{sys.argv[1]}/rest.txt", "w") as out:
    for p in phrases:
        out.write(json.dumps({"query": p, "limit": 10, "collapse": False}) + "\n")
with open(f"{sys.argv[1]}/ard.txt", "w") as out:
    for p in phrases:
        out.write(json.dumps({"query": {"text": p}, "pageSize": 10, "federation": "none"}) + "\n")
PY

for kind in rest ard; do
  path=/public/agents/search
  [ "$kind" = ard ] && path=/ard/search
  cat > "$work/$kind.lua" <<LUA
local bodies = {}
for line in io.lines("$work/$kind.txt") do bodies[#bodies + 1] = line end
local counter = 0
request = function()
  counter = counter + 1
  return wrk.format("POST", "$path", {["Content-Type"] = "application/json"}, bodies[(counter % #bodies) + 1])
end
LUA
done

REGISTRY_EMBEDDER=$embedder RUST_LOG=warn "$binary" \
  --bind "127.0.0.1:$port" --data-dir "$work/data" &
server_pid=$!
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$port/readyz" | grep -qE '"vectors":"(ready|none)"' && break
  sleep 0.2
done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; }
for round in $(seq "$rounds"); do
  for kind in rest ard; do
    before=$(cpu_ticks)
    wrk -t2 -c64 -d"${seconds}s" --latency -s "$work/$kind.lua" "http://127.0.0.1:$port" > "$work/$kind-$round.txt"
    after=$(cpu_ticks)
    python3 - "$kind" "$round" "$(getconf CLK_TCK)" "$before" "$after" "$work/$kind-$round.txt" <<'PY'
import re, sys
kind, round_, tick, before, after, path = sys.argv[1:]
text = open(path).read()
served = int(re.search(r"(\d+) requests in", text).group(1))
rate = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
p50 = re.search(r"50%\s+(\S+)", text).group(1)
p99 = re.search(r"99%\s+(\S+)", text).group(1)
errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
cpu = (float(after) - float(before)) / float(tick) / served * 1e6
print(f"round {round_} {kind:4}: {rate:8.0f} req/s  p50 {p50:>8}  p99 {p99:>8}  "
      f"server CPU {cpu:6.1f} µs/request" + (f"  NON-2xx {errors.group(1)}" if errors else ""))
PY
  done
done
