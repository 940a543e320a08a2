#!/usr/bin/env python3
"""Build examples/agents.jsonl, the sample catalogue that ships with the repository.

It takes agents from the public data set (agents-real.jsonl, with how-to-reach data from
agents-reach.jsonl beside it) whose sources are published under MIT or ISC licences, so the
sample can be redistributed with attribution (examples/README.md):

  - every such agent that states how to reach it (remotes, packages, A2A interfaces), with those
    fields merged into its line;
  - the first 150 (by package name) of each of three MIT-licensed lists that state none
    (A2A agent lists and the reference MCP servers), so the sample also shows agents that are
    only described.

Usage: python3 scripts/make-sample-catalogue.py [DATA_DIR [REJECTS]] (default: bench-data)
The output is sorted by package name, so running it again gives the same file. Lines the
registry refuses (a few sources exceed its limits) are left out when REJECTS, the file
`agent-registry import examples/agents.jsonl --rejects REJECTS` wrote for the unfiltered
output, is given:

    python3 scripts/make-sample-catalogue.py bench-data
    agent-registry import examples/agents.jsonl --owner x --data-dir /tmp/sample --rejects /tmp/rejects.jsonl
    python3 scripts/make-sample-catalogue.py bench-data /tmp/rejects.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# Sources whose licence allows redistribution with attribution (see examples/README.md).
WITH_REACH = {
    "github:docker/mcp-registry",
    "github:toolsdk-ai/awesome-mcp-registry",
    "github:yksanjo/mcp-discovery",
    "github:prassanna-ravishankar/a2a-registry",
    "github:ravitemer/mcp-registry",
    "github:modelcontextprotocol/registry",
}
DESCRIBED_ONLY = {
    "github:xpxxx/awesome-a2a-agents",
    "github:ai-boost/awesome-a2a",
    "github:modelcontextprotocol/servers",
}
DESCRIBED_PER_SOURCE = 150
REACH_FIELDS = ("interfaces", "remotes", "packages", "repository")


def source_repo(source: str) -> str:
    head = source.split("@", 1)[0]
    return "/".join(head.split("/")[:2])


def main() -> None:
    data = Path(sys.argv[1] if len(sys.argv) > 1 else "bench-data")
    out = Path(__file__).resolve().parent.parent / "examples" / "agents.jsonl"
    reach = {}
    with open(data / "agents-reach.jsonl", encoding="utf-8") as lines:
        for line in lines:
            entry = json.loads(line)
            reach[entry["package_name"]] = entry
    chosen = []
    described: dict[str, list] = {source: [] for source in DESCRIBED_ONLY}
    with open(data / "agents-real.jsonl", encoding="utf-8") as lines:
        for line in lines:
            agent = json.loads(line)
            repo = source_repo(agent.get("source", ""))
            how = reach.get(agent["package_name"])
            if repo in WITH_REACH and how:
                for field in REACH_FIELDS:
                    value = how.get(field)
                    if value:
                        agent[field] = value
                chosen.append(agent)
            elif repo in DESCRIBED_ONLY and not how:
                described[repo].append(agent)
    for agents in described.values():
        agents.sort(key=lambda agent: agent["package_name"])
        chosen.extend(agents[:DESCRIBED_PER_SOURCE])
    chosen.sort(key=lambda agent: agent["package_name"])
    if len(sys.argv) > 2:
        with open(sys.argv[2], encoding="utf-8") as lines:
            refused = {json.loads(line)["line"] for line in lines if line.strip()}
        chosen = [agent for number, agent in enumerate(chosen, start=1) if number not in refused]
    with open(out, "w", encoding="utf-8") as sink:
        for agent in chosen:
            sink.write(json.dumps(agent, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"{out}: {len(chosen)} agents", file=sys.stderr)


if __name__ == "__main__":
    main()
