#!/usr/bin/env python3
"""Try fusion settings offline on the registry's own keyword and vector rankings.

    cargo run --release --example search_quality -- --queries eval/hard/dev.jsonl \
        --depth 100 --dump target/eval-cache/dev-dump.jsonl
    python3 eval/hard/fusion.py eval/hard/dev.jsonl target/eval-cache/dev-dump.jsonl [minilm]

Prints NDCG@10 by kind for reciprocal rank fusion with several constants and weights, the
vector weight optionally higher for sentence queries. Only for choosing the settings on dev;
the registry's search function is what gets reported.
"""
import collections
import json
import math
import sys


def ndcg10(ranking, grades):
    dcg = sum((2 ** grades.get(n, 0) - 1) / math.log2(r + 2) for r, n in enumerate(ranking[:10]))
    ideal = sorted(grades.values(), reverse=True)[:10]
    idcg = sum((2 ** g - 1) / math.log2(r + 2) for r, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def fuse(keyword, vector, k, wk, wv):
    scores = collections.defaultdict(float)
    for r, n in enumerate(keyword):
        scores[n] += wk / (k + r + 1)
    for r, n in enumerate(vector):
        scores[n] += wv / (k + r + 1)
    return [n for n, _ in sorted(scores.items(), key=lambda x: -x[1])]


def main():
    queries = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    rankings = collections.defaultdict(dict)
    for line in open(sys.argv[2]):
        row = json.loads(line)
        rankings[row["ranker"]][row["id"]] = row["ranking"]
    keyword_name = next(r for r in rankings if "keyword" in r)
    wanted = sys.argv[3] if len(sys.argv) > 3 else "static"
    vector_name = next(r for r in rankings if "vector" in r and wanted in r)
    print("keyword ranker: %s, vector ranker: %s" % (keyword_name, vector_name))

    def table(label, rank):
        by = collections.defaultdict(list)
        for q in queries:
            s = ndcg10(rank(q), q["relevant"])
            by["all"].append(s)
            by[q["kind"]].append(s)
        print("%-34s " % label + "  ".join("%s %.3f" % (k, sum(v) / len(v)) for k, v in sorted(by.items())))

    for name in rankings:
        table(name, lambda q, name=name: rankings[name][q["id"]])
    for k in (5, 10, 20, 30, 60):
        for wv in (0.25, 0.5, 0.75, 1.0, 1.5):
            table("rrf k=%d wv=%.1f" % (k, wv),
                  lambda q: fuse(rankings[keyword_name][q["id"]], rankings[vector_name][q["id"]], k, 1.0, wv))
    for k in (30, 60):
        for wv_long in (1.5, 2.0, 3.0):
            def rank(q, k=k, wv_long=wv_long):
                words = len(q["query"].split())
                wv = wv_long if words >= 6 else 1.0
                return fuse(rankings[keyword_name][q["id"]], rankings[vector_name][q["id"]], k, 1.0, wv)
            table("rrf k=%d, sentences wv=%.1f" % (k, wv_long), rank)


if __name__ == "__main__":
    main()
