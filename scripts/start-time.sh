#!/usr/bin/env bash
# Start-up time over a large catalogue, SQLite, release build: how long until the server answers
# (/readyz 200: keyword search on) and until intent ranking is on (/readyz "vectors": "ready"),
# with the resident memory then. Three starts over one data directory:
#   1. first start: every agent is embedded, the vector index built and its snapshot saved;
#   2. restart: the snapshot is loaded;
#   3. restart without the snapshot (deleted): stored vectors, the graph rebuilt.
# Usage: scripts/start-time.sh [AGENTS=100000] [EMBEDDER=static]
# START_SKIP_REBUILD=1 leaves out the third start (minutes at a million agents).
# START_DATA_DIR=dir keeps the imported data directory there and, when it already holds one
# (from an earlier run), reuses it without importing: its first start is then a restart.
# START_IMPORT_ONLY=1 stops after the import (to prepare START_DATA_DIR once).
# Resident memory is read when intent ranking turns on and START_SETTLE_SECS (15) later, with
# the process's peak.
# The catalogue is the real agents repeated with renamed packages; each copy's description
# drops a word and gains one from another agent, so that every agent is a distinct vector.
set -euo pipefail
cd "$(dirname "$0")/.."

agents=${1:-100000}
embedder=${2:-static}
data=${REGISTRY_BENCH_DATA:-bench-data/agents-real.jsonl}
port=${START_PORT:-18490}
settle=${START_SETTLE_SECS:-15}
work=$(mktemp -d)
data_dir=${START_DATA_DIR:-$work/data}
server_pid=
trap 'if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi; rm -rf "$work"' EXIT

binary=${START_BINARY:-target/release/agent-registry}
[ -n "${START_BINARY:-}" ] || cargo build --release --quiet

if [ -e "$data_dir/registry.db" ]; then
  echo "reusing the data directory $data_dir"
else
python3 - "$data" "$agents" "$work/agents.jsonl" <<'PY'
import json, random, sys
source, wanted, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
random.seed(20261124)
rows = [json.loads(line) for line in open(source) if line.strip()]
words = [w for row in rows for w in row.get("description", "").split() if w.isalpha()]
with open(out, "w") as f:
    for n in range(wanted):
        row = dict(rows[n % len(rows)])
        copy = n // len(rows)
        if copy:
            row["package_name"] = f"{row['package_name']}.copy{copy}"
            kept = row["description"].split()
            if len(kept) > 3:
                kept.pop(random.randrange(len(kept)))
            kept.insert(random.randrange(len(kept) + 1), random.choice(words))
            row["description"] = " ".join(kept)
        f.write(json.dumps(row) + "\n")
print(f"{wanted} agents")
PY

began=$(date +%s.%N)
"$binary" import "$work/agents.jsonl" --owner load --go-live \
  --data-dir "$data_dir" 2>&1 | grep -E '^import(ed)?[: ]' || true
echo "import: $(python3 -c "print(f'{$(date +%s.%N) - $began:.1f}')") s"
fi
[ -z "${START_IMPORT_ONLY:-}" ] || exit 0

start() {
  local label=$1
  local began ready_at vectors_at
  began=$(date +%s.%N)
  REGISTRY_EMBEDDER=$embedder REGISTRY_PROBE_INTERVAL_SECS=0 RUST_LOG=warn,agent_registry::search=info \
    "$binary" serve --bind "127.0.0.1:$port" --data-dir "$data_dir" >"$work/$label.log" 2>&1 &
  server_pid=$!
  until curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; do sleep 0.1; done
  ready_at=$(date +%s.%N)
  until curl -sf "http://127.0.0.1:$port/readyz" | grep -q '"vectors":"ready"'; do sleep 0.2; done
  vectors_at=$(date +%s.%N)
  local rss settled peak
  rss=$(awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$server_pid/status")
  # The allocator returns freed pages to the system within seconds: the resident memory a
  # while later is the steady one; VmHWM is the process's high-water mark.
  sleep "$settle"
  settled=$(awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$server_pid/status")
  peak=$(awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$server_pid/status")
  python3 -c "print(f'$label: serving after {$ready_at - $began:.1f} s, intent ranking after {$vectors_at - $began:.1f} s, resident {$rss} MiB then, {$settled} MiB ${settle} s later, peak {$peak} MiB')"
  # Where the time to serving went: loading the keyword snapshot, waiting for the store's
  # pages, cataloguing them; and whether the keyword snapshot was used.
  grep -hE "catalogue read|keyword index (loaded|snapshot)|search index built" "$work/$label.log" \
    | sed 's/^/  /' || true
  kill "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=
}

start first-start
ls -l "$data_dir/index/" | tail -n +2
start restart-from-snapshot
if [ -z "${START_SKIP_REBUILD:-}" ]; then
  rm -f "$data_dir/index/"*.snapshot
  start restart-without-snapshot
fi
