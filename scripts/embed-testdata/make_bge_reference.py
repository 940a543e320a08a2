"""Regenerate bge_reference.json: bge-small-en-v1.5 vectors from the reference runtime.

    pip install numpy onnxruntime tokenizers
    agent-registry models fetch            # or any directory holding the three model files
    python3 scripts/embed-testdata/make_bge_reference.py ~/.cache/agent-registry/models/bge-small-en-v1.5

Runs the shipped dynamic-int8 ONNX graph with onnxruntime, one text per run (no padding), on one
thread; tokenisation by Hugging Face `tokenizers` (truncation 512); pooling takes the [CLS]
token's last hidden state and L2-normalises it. Queries carry the retrieval instruction, as the
registry embeds them.
"""
import json
import sys

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

INSTRUCTION = "Represent this sentence for searching relevant passages: "

TEXTS = [
    INSTRUCTION + "will it rain in Paris tomorrow",
    INSTRUCTION + "current price of bitcoin",
    "weather forecast for Paris",
    "An MCP server that lets agents query PostgreSQL databases with SQL.",
    "Übersetzung von Dokumenten ins Spanische — schnell & günstig!",
    "北京天气预报 🌧️ https://example.com/weather?city=beijing",
    "Review pull requests on GitHub: summarise the diff, flag risky changes, and suggest tests "
    "for the code that changed. Works with private repositories through a token.",
]


def main():
    model_dir = sys.argv[1]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(f"{model_dir}/model.onnx", options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    tokenizer.no_padding()
    tokenizer.enable_truncation(512)
    cases = []
    for text in TEXTS:
        ids = tokenizer.encode(text).ids
        feed = {
            "input_ids": np.array([ids], dtype=np.int64),
            "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
            "token_type_ids": np.zeros((1, len(ids)), dtype=np.int64),
        }
        hidden = session.run(["last_hidden_state"], feed)[0]
        vector = hidden[0, 0]
        vector = vector / np.linalg.norm(vector)
        cases.append({"text": text, "ids": ids, "vector": [float(f"{x:.7g}") for x in vector]})
    generator = f"make_bge_reference.py (onnxruntime {ort.__version__}, int8 graph, 1 thread)"
    json.dump({"generator": generator, "cases": cases}, sys.stdout, ensure_ascii=False, indent=None)
    print()


if __name__ == "__main__":
    main()
