#!/usr/bin/env python3
"""Validate eval/queries.jsonl against the agent data set and print statistics.

Usage:
    python3 eval/check_queries.py [--queries eval/queries.jsonl]
                                  [--data bench-data/agents-real.jsonl]

Checks (exit status 1 if any fails):
  * every line is a JSON object with id, query, kind, relevant (domain optional)
  * ids are unique, queries are non-empty strings, kind is one of KINDS
  * relevant maps package_name -> grade in {1, 2, 3}, with at least MIN_LABELS entries
  * every labelled package_name exists in the data file and the agent would pass the
    import limits (so it can actually be found after import). The limits mirror the
    publish validation of the service (src/domain/agent.rs, src/domain/package_name.rs):
    package_name regex / <= 200 chars, name required <= 200, description required
    <= 2000 chars, category <= 100, tags trimmed+lowercased, non-empty, <= 40 chars,
    <= 32 distinct, <= 64 capabilities with distinct non-empty names <= 128 chars and
    descriptions <= 8000 chars, manifest_url http(s) with a host.

Standard library only.
"""
import argparse
import collections
import json
import os
import re
import sys
from urllib.parse import urlparse

KINDS = {"intent", "keyword", "typo", "question", "imperative", "task"}
MIN_LABELS = 3
GRADES = {1, 2, 3}
PKG_RE = re.compile(r"^[a-z0-9]([a-z0-9_-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9_-]*[a-z0-9])?){1,15}$")

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_QUERIES = os.path.join(HERE, "queries.jsonl")
DEFAULT_DATA = os.environ.get(
    "EVAL_DATA", os.path.join(HERE, "..", "bench-data", "agents-real.jsonl"))


def _strip(v):
    return v.strip() if isinstance(v, str) else v


def import_violations(a):
    """Return the list of reasons this agent would be rejected at import (empty = ok)."""
    v = []
    pn = a.get("package_name")
    if not isinstance(pn, str) or len(pn) > 200 or not PKG_RE.match(pn):
        v.append("package_name invalid")
    name = _strip(a.get("name"))
    if not isinstance(name, str) or not name or len(name) > 200:
        v.append("name missing or > 200 chars")
    desc = _strip(a.get("description"))
    if not isinstance(desc, str) or not desc:
        v.append("description missing")
    elif len(desc) > 2000:
        v.append("description > 2000 chars")
    cat = _strip(a.get("category"))
    if cat is not None and (not isinstance(cat, str) or len(cat) > 100):
        v.append("category > 100 chars")
    distinct = set()
    for t in a.get("tags") or []:
        if not isinstance(t, str) or not t.strip():
            v.append("empty tag")
            continue
        t = t.strip().lower()
        if len(t) > 40:
            v.append("tag > 40 chars")
        distinct.add(t)
    if len(distinct) > 32:
        v.append("more than 32 distinct tags")
    caps = a.get("capabilities") or []
    if len(caps) > 64:
        v.append("more than 64 capabilities")
    seen = set()
    for c in caps:
        cname = _strip(c.get("name")) if isinstance(c, dict) else None
        if not cname or len(cname) > 128:
            v.append("capability name missing or > 128 chars")
            continue
        if cname in seen:
            v.append("duplicate capability name")
        seen.add(cname)
        cdesc = c.get("description")
        if cdesc is not None and (not isinstance(cdesc, str) or len(cdesc.strip()) > 8000):
            v.append("capability description > 8000 chars")
    mu = _strip(a.get("manifest_url"))
    if mu:
        try:
            u = urlparse(mu)
            if u.scheme not in ("http", "https") or not u.hostname:
                v.append("manifest_url not http(s)")
        except ValueError:
            v.append("manifest_url unparsable")
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", default=DEFAULT_QUERIES)
    ap.add_argument("--data", default=DEFAULT_DATA)
    args = ap.parse_args()

    errors = []
    agents = {}
    with open(args.data, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                a = json.loads(line)
                agents[a.get("package_name")] = a
    rejected = {k for k, a in agents.items() if import_violations(a)}

    queries = []
    ids = set()
    texts = collections.Counter()
    with open(args.queries, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                errors.append(f"line {n}: blank line")
                continue
            try:
                q = json.loads(line)
            except json.JSONDecodeError as e:
                errors.append(f"line {n}: invalid JSON ({e})")
                continue
            if not isinstance(q, dict):
                errors.append(f"line {n}: not a JSON object")
                continue
            qid = q.get("id")
            where = f"line {n} ({qid})"
            if not isinstance(qid, str) or not qid:
                errors.append(f"{where}: missing id")
            elif qid in ids:
                errors.append(f"{where}: duplicate id")
            ids.add(qid)
            text = q.get("query")
            if not isinstance(text, str) or not text.strip():
                errors.append(f"{where}: missing query text")
            else:
                texts[text.strip().lower()] += 1
            if q.get("kind") not in KINDS:
                errors.append(f"{where}: kind {q.get('kind')!r} not in {sorted(KINDS)}")
            rel = q.get("relevant")
            if not isinstance(rel, dict):
                errors.append(f"{where}: relevant is not an object")
                continue
            if len(rel) < MIN_LABELS:
                errors.append(f"{where}: only {len(rel)} labels (< {MIN_LABELS})")
            for pkg, g in rel.items():
                if not isinstance(g, int) or isinstance(g, bool) or g not in GRADES:
                    errors.append(f"{where}: {pkg} has grade {g!r} (expected 1, 2 or 3)")
                if pkg not in agents:
                    errors.append(f"{where}: {pkg} not found in data")
                elif pkg in rejected:
                    errors.append(f"{where}: {pkg} would be rejected at import: "
                                  + ", ".join(import_violations(agents[pkg])))
            if not any(g == 3 for g in rel.values() if isinstance(g, int)):
                errors.append(f"{where}: no grade-3 label")
            queries.append(q)
    for t, c in texts.items():
        if c > 1:
            errors.append(f"query text repeated {c} times: {t!r}")

    # ---- statistics
    print(f"data: {len(agents)} agents, {len(agents) - len(rejected)} importable, "
          f"{len(rejected)} would be rejected")
    print(f"queries: {len(queries)}")
    kinds = collections.Counter(q.get("kind") for q in queries)
    print("by kind: " + ", ".join(f"{k}={kinds[k]}" for k in sorted(kinds, key=lambda k: -kinds[k])))
    doms = collections.Counter((q.get("domain") or "?").split("/")[0] for q in queries)
    print("by domain (top level): " + ", ".join(f"{d}={c}" for d, c in doms.most_common()))
    nl = [len(q["relevant"]) for q in queries if isinstance(q.get("relevant"), dict)]
    if nl:
        grades = collections.Counter(g for q in queries for g in q["relevant"].values())
        hi = [sum(1 for g in q["relevant"].values() if g >= 2) for q in queries]
        s = sorted(nl)
        print(f"labels per query: avg {sum(nl) / len(nl):.1f}, median {s[len(s) // 2]}, "
              f"min {s[0]}, max {s[-1]}")
        print(f"grade>=2 labels per query: avg {sum(hi) / len(hi):.1f}, min {min(hi)}")
        print(f"grade distribution: 3={grades[3]}, 2={grades[2]}, 1={grades[1]} "
              f"(total {sum(grades.values())})")
        distinct = {p for q in queries for p in q["relevant"]}
        print(f"distinct labelled agents: {len(distinct)}")
    if errors:
        print(f"\nFAIL: {len(errors)} problem(s)")
        for e in errors[:200]:
            print("  " + e)
        sys.exit(1)
    print("\nOK")


if __name__ == "__main__":
    main()
