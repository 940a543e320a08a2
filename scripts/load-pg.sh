#!/usr/bin/env bash
# Two release servers on one PostgreSQL: aggregate search throughput with wrk, propagation delay
# (publish through one → found by a search on the other), and start-up time over N agents.
# Usage: scripts/load-pg.sh [AGENTS=10000] [SECONDS=15] [EMBEDDER=static]
# LOAD_COPIES=k repeats the imported agents k times in SQL (renamed packages), e.g. 20k × 5 =
# 100k agents without importing 100k through the API path.
# Needs: wrk, python3, curl, psql, PostgreSQL at REGISTRY_TEST_DATABASE_URL (default
# postgres://postgres@127.0.0.1:5432/test); the run uses a fresh schema and drops it after.
set -euo pipefail
cd "$(dirname "$0")/.."

agents=${1:-10000}
seconds=${2:-15}
embedder=${3:-static}
data=${REGISTRY_BENCH_DATA:-bench-data/agents-real.jsonl}
db=${REGISTRY_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}
port_a=${LOAD_PORT:-18480}
port_b=$((port_a + 1))
schema="load_$(date +%s)_$$"
url="$db?options=-c%20search_path%3D$schema"
work=$(mktemp -d)
pids=()
cleanup() {
  # Only ever signal the servers this script started.
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  psql "$db" -qc "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

bash scripts/ensure-postgres.sh >/dev/null
cargo build --release --quiet
bin=target/release/agent-registry
psql "$db" -qc "CREATE SCHEMA $schema"

head -n "$agents" "$data" > "$work/agents.jsonl"
$bin import "$work/agents.jsonl" --owner load --go-live --database-url "$url" 2>&1 | grep -E '^import(ed)?[: ]'
copies=${LOAD_COPIES:-1}
if [ "$copies" -gt 1 ]; then
  psql "$url" -qc "INSERT INTO agents (id, package_name, owner, state, verification_level,
      verification_token, revision, name, description, version, manifest_url, url, target,
      category, tags, capabilities, payment, card, created_at, updated_at, published_at)
    SELECT id || 'C' || k, package_name || '.copy' || k, owner, state, verification_level,
      verification_token, revision, name, description, version, manifest_url, url, target,
      category, tags, capabilities, payment, card, created_at, updated_at, published_at
    FROM agents CROSS JOIN generate_series(1, $copies - 1) AS k WHERE owner = 'load'"
fi
echo "agents in the database: $(psql "$url" -Atc 'SELECT count(*) FROM agents')"

python3 - "$work/agents.jsonl" "$work/queries.txt" <<'PY'
import json, random, sys, urllib.parse
random.seed(20261122)
phrases = set()
with open("eval/queries.jsonl") as f:
    phrases.update(json.loads(line)["query"] for line in f if line.strip())
descriptions = [json.loads(l)["description"] for l in open(sys.argv[1])]
while len(phrases) < 1200:
    words = [w for w in random.choice(descriptions).split() if w.isalnum()]
    if len(words) < 5:
        continue
    n = random.randint(2, 5)
    start = random.randrange(len(words) - n + 1)
    phrases.add(" ".join(words[start:start + n]).lower())
with open(sys.argv[2], "w") as out:
    for phrase in sorted(phrases):
        out.write("/public/agents?limit=10&q=" + urllib.parse.quote(phrase) + "\n")
PY

cat > "$work/rotate.lua" <<LUA
local paths = {}
for line in io.lines("$work/queries.txt") do paths[#paths + 1] = line end
local counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", paths[(counter % #paths) + 1])
end
LUA

# Start a server (in this shell, so its pid is ours to stop) and set `ready_secs` to the seconds
# until it answered /readyz.
start() {
  local port=$1 began
  began=$(date +%s.%N)
  REGISTRY_EMBEDDER=$embedder REGISTRY_MASTER_KEY=load-master-key RUST_LOG=warn \
    $bin --bind "127.0.0.1:$port" --database-url "$url" >"$work/server-$port.log" 2>&1 &
  pids+=($!)
  # Ready, and with every vector loaded (until then searches rank by keywords alone).
  for _ in $(seq 2400); do
    curl -sf "http://127.0.0.1:$port/readyz" | grep -qE '"vectors":"(ready|none)"' && break
    sleep 0.05
  done
  curl -sf "http://127.0.0.1:$port/readyz" >/dev/null || {
    echo "server on port $port did not become ready:" >&2
    cat "$work/server-$port.log" >&2
    exit 1
  }
  ready_secs=$(python3 -c "print(f'{$(date +%s.%N) - $began:.2f}')")
}
start "$port_a"
echo "server A start-up (embeds what is not stored): $ready_secs s"
start "$port_b"
echo "server B start-up (stored vectors): $ready_secs s"

echo "== GET /public/agents?q=…, 32 connections to each server, ${seconds}s, embedder=$embedder"
wrk -t1 -c32 -d"${seconds}s" --latency -s "$work/rotate.lua" "http://127.0.0.1:$port_a" > "$work/a.txt" &
wrk_a=$!
wrk -t1 -c32 -d"${seconds}s" --latency -s "$work/rotate.lua" "http://127.0.0.1:$port_b" > "$work/b.txt"
wait "$wrk_a"
for side in a b; do
  echo "-- server ${side^^}"
  grep -E 'Requests/sec|50%|90%|99%' "$work/$side.txt"
done
python3 - "$work/a.txt" "$work/b.txt" <<'PY'
import re, sys
total = sum(float(re.search(r"Requests/sec:\s+([\d.]+)", open(p).read()).group(1)) for p in sys.argv[1:])
print(f"aggregate: {total:.0f} req/s")
PY

echo "== propagation: publish + go-live on A, then search on B until found (50 agents)"
python3 - "$port_a" "$port_b" <<'PY'
import json, sys, time, urllib.request
a, b = (f"http://127.0.0.1:{p}" for p in sys.argv[1:3])
def call(method, url, token=None, body=None):
    request = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode())
    request.add_header("content-type", "application/json")
    if token:
        request.add_header("authorization", f"Bearer {token}")
    with urllib.request.urlopen(request) as response:
        return json.load(response)
token = call("POST", f"{a}/api/tokens", "load-master-key", {"owner": "propagation"})["token"]
delays = []
for i in range(50):
    word = f"zebraquokka{i}x"
    record = call("POST", f"{a}/api/agents/publish", token,
                  {"package_name": f"com.load.propagation{i}", "name": "Propagation probe",
                   "description": f"Measures {word} propagation."})
    call("POST", f"{a}/api/agents/{record['id']}/go-live", token)
    acknowledged = time.perf_counter()
    while True:
        found = call("GET", f"{b}/public/agents?q={word}&limit=100")["agents"]
        if any(agent["id"] == record["id"] for agent in found):
            delays.append((time.perf_counter() - acknowledged) * 1000)
            break
        if time.perf_counter() - acknowledged > 5:
            sys.exit(f"{word} not visible on B after 5 s")
        time.sleep(0.001)
delays.sort()
print(f"propagation ms: p50 {delays[len(delays)//2]:.1f}, p90 {delays[int(len(delays)*0.9)]:.1f}, max {delays[-1]:.1f}")
PY
