#!/usr/bin/env bash
# The first walk of a local MCP Registry of N servers, and an idle poll after it: starts
# scripts/fake-mcp-registry.py with N servers (built from the data set when present), a release
# server mirroring it on a fresh data directory, and reports
#   - when the last server of the walk is keyword-searchable (from the server's start),
#   - how many requests a pass with nothing new costs.
# Usage: scripts/mirror-bench.sh [N=20000] [EMBEDDER=static]
# LOAD_BINARY=path measures a built server. Data: REGISTRY_BENCH_DATA, else
# bench-data/agents-real.jsonl, else made-up servers.
set -euo pipefail
cd "$(dirname "$0")/.."

count=${1:-20000}
embedder=${2:-static}
data=${REGISTRY_BENCH_DATA:-bench-data/agents-real.jsonl}
[ -f "$data" ] || data=
port=${LOAD_PORT:-18491}
upstream_port=$((port + 1))
work=$(mktemp -d)
pids=()
trap 'for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; rm -rf "$work"' EXIT

binary=${LOAD_BINARY:-target/release/agent-registry}
[ -n "${LOAD_BINARY:-}" ] || cargo build --release --quiet

python3 scripts/fake-mcp-registry.py "$upstream_port" "$count" $data &
pids+=($!)
for _ in $(seq 1 300); do
  curl -fsS "http://127.0.0.1:$upstream_port/_stats" >/dev/null 2>&1 && break
  sleep 0.1
done
last=$(python3 - "$upstream_port" <<'PY'
import json, sys, urllib.parse, urllib.request
port = sys.argv[1]
cursor, last = None, None
# The last name in the upstream's order: what the walk writes last.
url = f"http://127.0.0.1:{port}/v0.1/servers?limit=100"
while True:
    page = json.load(urllib.request.urlopen(url + (f"&cursor={urllib.parse.quote(cursor)}" if cursor else "")))
    if page["servers"]:
        last = page["servers"][-1]["server"]["name"]
    cursor = page["metadata"].get("nextCursor")
    if not cursor:
        break
print(last)
PY
)
requests_before=$(curl -fsS "http://127.0.0.1:$upstream_port/_stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["served"])')
package=$(python3 -c 'import sys; n=sys.argv[1]; print(n.replace("/", ".").lower())' "$last")

started=$(date +%s.%N)
REGISTRY_EMBEDDER=$embedder RUST_LOG=info REGISTRY_MASTER_KEY=bench REGISTRY_PROBE_INTERVAL_SECS=0 \
  "$binary" --bind "127.0.0.1:$port" --data-dir "$work/data" \
  --mirror "mcp-registry=http://127.0.0.1:$upstream_port" --mirror-interval-secs 5 \
  2> "$work/server.log" &
pids+=($!)
server_pid=$!
until curl -fsS "http://127.0.0.1:$port/public/agents/$package" >/dev/null 2>&1; do
  sleep 0.05
done
searchable=$(python3 - "$port" "$package" <<'PY'
import json, sys, time, urllib.parse, urllib.request
port, package = sys.argv[1], sys.argv[2]
# The last agent's record answers: now wait until a keyword search finds it.
name = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/public/agents/{package}"))["name"]
while True:
    q = urllib.parse.quote(package)
    hits = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/public/agents?q={q}&limit=5"))["agents"]
    if any(hit["package_name"] == package for hit in hits):
        break
    time.sleep(0.05)
PY
date +%s.%N)
status=$(curl -fsS -H 'Authorization: Bearer bench' "http://127.0.0.1:$port/api/mirrors")
walk_requests=$(( $(curl -fsS "http://127.0.0.1:$upstream_port/_stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["served"])') - requests_before ))
# The next pass finds nothing new: wait until it has run, then count what it asked.
python3 - "$port" <<'PY'
import json, sys, time, urllib.request
port = sys.argv[1]
def status():
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/mirrors", headers={"Authorization": "Bearer bench"})
    return json.load(urllib.request.urlopen(request))["mirrors"][0]
first = None
deadline = time.time() + 60
while time.time() < deadline:
    current = status()
    if current.get("last_success"):
        if first is None:
            first = current["last_success"]
        elif current["last_success"] != first:
            break
    time.sleep(0.2)
PY
idle_requests=$(( $(curl -fsS "http://127.0.0.1:$upstream_port/_stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["served"])') - requests_before - walk_requests ))
rss=$(ps -o rss= -p "$server_pid" | tr -d ' ')
python3 - "$started" "$searchable" "$status" "$walk_requests" "$idle_requests" "$rss" "$count" <<'PY'
import json, sys
started, searchable = float(sys.argv[1]), float(sys.argv[2])
status = json.loads(sys.argv[3])["mirrors"][0]
print(f"servers upstream:             {sys.argv[7]}")
print(f"mirrored entries:             {status['entries']} (skipped {status['skipped']}, state {status['state']})")
print(f"walk requests:                {sys.argv[4]}")
print(f"last server keyword-findable: {searchable - started:.1f} s after the server started")
print(f"idle pass:                    {sys.argv[5]} request(s)")
print(f"server RSS after the walk:    {int(sys.argv[6]) // 1024} MiB")
PY
grep -E 'mirror: first walk (started|done)' "$work/server.log" | sed -E 's/\x1b\[[0-9;]*m//g' | tail -2 || true
