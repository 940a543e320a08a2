"""The importable agents of the corpus and the text each ranker sees of them (shared by pool.py
and the teacher scripts). Standard library only."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from check_queries import import_violations  # noqa: E402

DEFAULT_DATA = os.environ.get(
    "EVAL_DATA", os.path.join(REPO, "bench-data", "agents-real.jsonl"))
CACHE = os.path.join(REPO, "target", "eval-cache")


def load_agents(path=DEFAULT_DATA):
    """Every agent the service would import, in file order."""
    agents = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            a = json.loads(line)
            if not import_violations(a):
                agents.append(a)
    return agents


def embedding_text(a):
    """What the registry's embedders see of an agent: name, description, tags, category,
    capabilities (the same order as the service)."""
    parts = [a.get("name") or "", a.get("description") or ""]
    tags = " ".join(t.strip().lower() for t in a.get("tags") or [] if isinstance(t, str))
    if tags:
        parts.append(tags)
    if a.get("category"):
        parts.append(a["category"])
    caps = "\n".join(
        "%s %s" % ((c.get("name") or "").replace("_", " "), c.get("description") or "")
        for c in a.get("capabilities") or [])
    if caps:
        parts.append(caps)
    return "\n".join(parts)
