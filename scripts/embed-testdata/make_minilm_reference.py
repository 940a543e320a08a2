"""Regenerate minilm_reference.json: all-MiniLM-L6-v2 vectors from an independent numpy forward pass.

    pip install numpy safetensors tokenizers
    python3 scripts/embed-testdata/make_minilm_reference.py models/all-MiniLM-L6-v2

Tokenisation by Hugging Face `tokenizers` (truncation 256, no padding), BERT forward in float32
numpy with exact erf GELU, mean pooling, L2 normalisation: what sentence-transformers computes.
"""
import json
import math
import sys

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

TEXTS = [
    "current price of bitcoin",
    "crypto market quotes",
    "weather forecast for Paris",
    "An MCP server that lets agents query PostgreSQL databases with SQL.",
    "Übersetzung von Dokumenten ins Spanische — schnell & günstig!",
    "北京天气预报 🌧️ https://example.com/weather?city=beijing",
]

ERF = np.frompyfunc(math.erf, 1, 1)


def layer_norm(x, w, name):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * w[name + ".weight"] + w[name + ".bias"]


def linear(x, w, name):
    return x @ w[name + ".weight"].T + w[name + ".bias"]


def gelu(x):
    return (0.5 * x * (1.0 + ERF(x.astype(np.float64) / math.sqrt(2.0)).astype(np.float64))).astype(np.float32)


def forward(w, config, ids):
    heads = config["num_attention_heads"]
    hidden = config["hidden_size"]
    size = hidden // heads
    length = len(ids)
    x = w["embeddings.word_embeddings.weight"][ids]
    x = x + w["embeddings.position_embeddings.weight"][:length]
    x = x + w["embeddings.token_type_embeddings.weight"][0]
    x = layer_norm(x, w, "embeddings.LayerNorm")
    for layer in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{layer}."
        q, k, v = (
            linear(x, w, p + f"attention.self.{n}").reshape(length, heads, size).transpose(1, 0, 2)
            for n in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(size)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attention = scores / scores.sum(-1, keepdims=True)
        context = (attention @ v).transpose(1, 0, 2).reshape(length, hidden)
        x = layer_norm(linear(context, w, p + "attention.output.dense") + x, w, p + "attention.output.LayerNorm")
        inner = gelu(linear(x, w, p + "intermediate.dense"))
        x = layer_norm(linear(inner, w, p + "output.dense") + x, w, p + "output.LayerNorm")
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


def main():
    model_dir = sys.argv[1]
    weights = {k: v.astype(np.float32) for k, v in load_file(f"{model_dir}/model.safetensors").items()}
    config = json.load(open(f"{model_dir}/config.json"))
    tokenizer = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    tokenizer.no_padding()
    tokenizer.enable_truncation(256)
    cases = []
    for text in TEXTS:
        ids = tokenizer.encode(text).ids
        vector = forward(weights, config, np.array(ids))
        cases.append({"text": text, "ids": ids, "vector": [float(f"{x:.7g}") for x in vector]})
    json.dump({"generator": "make_minilm_reference.py (numpy float32, exact erf)", "cases": cases},
              sys.stdout, ensure_ascii=False, indent=None)
    print()


if __name__ == "__main__":
    main()
