#!/usr/bin/env python3
"""Merge the labelled parts (queries-*.jsonl) into dev.jsonl and test.jsonl, once.

The split is fixed by rule, decided before any tuning: within each part and each kind of
query, in id order, the 1st, 3rd, 5th… query goes to `dev` and the 2nd, 4th, 6th… to `test`.
Tune on dev only; report test.

    python3 eval/hard/split.py
"""
import collections
import glob
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    dev, test = [], []
    for path in sorted(glob.glob(os.path.join(HERE, "queries-*.jsonl"))):
        by_kind = collections.defaultdict(list)
        for line in open(path):
            if line.strip():
                q = json.loads(line)
                by_kind[q["kind"]].append(q)
        for kind in sorted(by_kind):
            for position, q in enumerate(sorted(by_kind[kind], key=lambda q: q["id"])):
                q["split"] = "dev" if position % 2 == 0 else "test"
                (dev if position % 2 == 0 else test).append(q)
    for name, rows in (("dev", dev), ("test", test)):
        rows.sort(key=lambda q: q["id"])
        with open(os.path.join(HERE, name + ".jsonl"), "w") as f:
            for q in rows:
                f.write(json.dumps(q, ensure_ascii=False) + "\n")
        kinds = collections.Counter(q["kind"] for q in rows)
        print("%s: %d queries %s" % (name, len(rows), dict(sorted(kinds.items()))))


if __name__ == "__main__":
    main()
