"""Time the reference runtime on the queries examples/embed_speed times, for scale.

    pip install numpy onnxruntime tokenizers
    python3 scripts/embed-testdata/bge_onnxruntime_speed.py models/bge-small-en-v1.5 eval/hard/dev.jsonl

Each query (with the retrieval instruction) runs alone through the shipped dynamic-int8 graph
on one thread, as a search embeds it; three rounds after a warm-up round; p50 and p99 in ms.
"""
import json
import sys
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

INSTRUCTION = "Represent this sentence for searching relevant passages: "
ROUNDS = 3


def main():
    model_dir, queries_path = sys.argv[1], sys.argv[2]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(f"{model_dir}/model.onnx", options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    tokenizer.no_padding()
    tokenizer.enable_truncation(256)
    with open(queries_path) as f:
        queries = [json.loads(line)["query"] for line in f if line.strip()]
    times = []
    for round_ in range(ROUNDS + 1):
        for query in queries:
            start = time.perf_counter()
            ids = tokenizer.encode(INSTRUCTION + query).ids
            feed = {
                "input_ids": np.array([ids], dtype=np.int64),
                "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
                "token_type_ids": np.zeros((1, len(ids)), dtype=np.int64),
            }
            session.run(["last_hidden_state"], feed)
            if round_ > 0:
                times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    at = lambda q: times[round((len(times) - 1) * q)]
    print(f"onnxruntime {ort.__version__}, one thread: {len(queries)} queries x {ROUNDS} rounds: "
          f"p50 {at(0.5):.2f} ms, p99 {at(0.99):.2f} ms")


if __name__ == "__main__":
    main()
