"""Measure how closely static-table variants follow MiniLM (the table in docs/embeddings.md).

    pip install numpy safetensors tokenizers
    python3 scripts/embed-testdata/eval_static_table.py models/all-MiniLM-L6-v2 \
        path/to/agents-real.jsonl [assets/static-embeddings/minilm-l6-v2.bin]

Embeds 2,000 agent descriptions (every 10th line) and 50 intent queries with MiniLM (a batched
numpy forward pass; cached in /tmp), builds token tables from the model as the distiller does,
and prints, per variant, the Spearman correlation and the top-10 overlap of static rankings with
MiniLM rankings (queries against descriptions, and 300 descriptions against the rest). With a
third argument it evaluates that asset file instead of the variants.
"""
import json
import math
import os
import struct
import sys

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

QUERIES = [
    'current price of bitcoin',
    'crypto market quotes',
    'weather forecast for Paris',
    'translate a document into Spanish',
    'review my GitHub pull requests',
    'run SQL queries against a Postgres database',
    'send an email to my team',
    'schedule a meeting on my calendar',
    'scrape product prices from a website',
    'generate images from a text prompt',
    'summarise a YouTube video',
    'search academic papers about protein folding',
    'book a flight to Tokyo',
    'find a hotel near the Eiffel Tower',
    'monitor Kubernetes cluster health',
    'deploy a static site to the cloud',
    'analyse a CSV file and draw charts',
    'transcribe an audio recording',
    'convert speech to text',
    'write unit tests for my Python code',
    'check a smart contract for vulnerabilities',
    'track stock portfolio performance',
    'get real-time exchange rates',
    'manage Jira tickets',
    'post a message to a Slack channel',
    'read and summarise PDF documents',
    'answer questions about legal contracts',
    'find recipes with chicken and rice',
    'play music on Spotify',
    'control smart home lights',
    'search the web for recent news',
    'take notes in Notion',
    "query my company's knowledge base",
    'generate a marketing blog post',
    'create a presentation from an outline',
    'detect fraud in payment transactions',
    'pay an invoice with a credit card',
    'look up a drug interaction',
    'find open source alternatives to a tool',
    'browse a website with a headless browser',
    'store and retrieve memories for an agent',
    'compute route directions between two cities',
    'buy groceries online',
    'file a tax return',
    'monitor server logs for errors',
    'manage AWS S3 buckets',
    'analyse customer sentiment in reviews',
    'design a logo',
    'create a 3D model',
    'teach me math step by step',
]
SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class MiniLm:
    def __init__(self, model_dir):
        self.w = {k: v.astype(np.float32) for k, v in load_file(f"{model_dir}/model.safetensors").items()}
        self.wt = {}
        self.config = json.load(open(f"{model_dir}/config.json"))

    def linear(self, x, name):
        if name not in self.wt:
            self.wt[name] = np.ascontiguousarray(self.w[name + ".weight"].T)
        shape = x.shape
        return (x.reshape(-1, shape[-1]) @ self.wt[name]).reshape(*shape[:-1], -1) + self.w[name + ".bias"]

    def norm(self, x, name):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-12) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def pooled(self, batch):
        """Mean-pooled last hidden states of id sequences (already framed with [CLS]/[SEP])."""
        width = max(len(ids) for ids in batch)
        ids = np.zeros((len(batch), width), np.int64)
        mask = np.zeros((len(batch), width), np.float32)
        for row, seq in enumerate(batch):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        heads = self.config["num_attention_heads"]
        hidden = self.config["hidden_size"]
        size = hidden // heads
        b, t = ids.shape
        x = self.w["embeddings.word_embeddings.weight"][ids]
        x = x + self.w["embeddings.position_embeddings.weight"][:t][None]
        x = self.norm(x + self.w["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
        bias = (1.0 - mask[:, None, None, :]) * -1e9
        for layer in range(self.config["num_hidden_layers"]):
            p = f"encoder.layer.{layer}."
            q, k, v = (
                self.linear(x, p + f"attention.self.{n}").reshape(b, t, heads, size).transpose(0, 2, 1, 3)
                for n in ("query", "key", "value")
            )
            s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + bias
            a = np.exp(s - s.max(-1, keepdims=True))
            a = a / a.sum(-1, keepdims=True)
            c = (a @ v).transpose(0, 2, 1, 3).reshape(b, t, hidden)
            x = self.norm(self.linear(c, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
            h = self.linear(x, p + "intermediate.dense")
            h = 0.5 * h * (1.0 + erf(h / math.sqrt(2.0)))
            x = self.norm(self.linear(h, p + "output.dense") + x, p + "output.LayerNorm")
        return (x * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)


def erf(x):
    """Numerical Recipes erfc approximation (fractional error < 1.2e-7), vectorised."""
    z = np.abs(x).astype(np.float64)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    r = t * np.exp(poly)
    return np.where(x >= 0, 1.0 - r, r - 1.0).astype(np.float32)


def unit(rows):
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1
    return rows / norms


def cached(path, compute):
    if os.path.exists(path):
        return np.load(path)
    value = compute()
    np.save(path, value)
    return value


def rank(values):
    out = np.empty_like(values)
    out[np.argsort(values)] = np.arange(len(values))
    return out


def agreement(student_q, student_d, teacher_q, teacher_d, exclude_self=False):
    spearman, overlap = [], []
    for i in range(len(student_q)):
        s, t = student_d @ student_q[i], teacher_d @ teacher_q[i]
        if exclude_self:
            s, t = np.delete(s, i), np.delete(t, i)
        spearman.append(np.corrcoef(rank(s), rank(t))[0, 1])
        overlap.append(len(set(np.argsort(-s)[:10]) & set(np.argsort(-t)[:10])) / 10)
    return np.mean(spearman), np.mean(overlap)


def table(means, kept, dims, weighting, a):
    centred = means[kept] - means[kept].mean(0)
    if dims < centred.shape[1]:
        _, vectors = np.linalg.eigh(np.cov(centred.T))
        centred = centred @ vectors[:, ::-1][:, :dims]
    rows = np.zeros((len(means), centred.shape[1]))
    rows[kept] = centred
    ranks = np.arange(1, len(means) + 1)
    if weighting == "sif":
        p = (1 / ranks) / (1 / ranks).sum()
        rows *= (a / (a + p))[:, None]
    elif weighting == "log":
        rows *= np.log1p(ranks)[:, None]
    return rows


def read_asset(path):
    data = open(path, "rb").read()
    _, _, _, rows, dims, vocab_len = struct.unpack("<4sHHIII", data[:20])
    at = 20 + vocab_len
    scales = np.frombuffer(data[at : at + 4 * rows], "<f4")
    values = np.frombuffer(data[at + 4 * rows :], "i1").reshape(rows, dims)
    return values.astype(np.float64) * scales[:, None]


def main():
    model_dir, corpus = sys.argv[1], sys.argv[2]
    tokenizer = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    tokenizer.no_padding()
    tokenizer.no_truncation()
    docs = []
    with open(corpus, encoding="utf-8") as lines:
        for number, line in enumerate(lines):
            if number % 10 == 0 and len(docs) < 2000:
                agent = json.loads(line)
                docs.append(f"{agent['name']}: {agent['description']}")
    doc_ids = [tokenizer.encode(d, add_special_tokens=False).ids[:254] for d in docs]
    query_ids = [tokenizer.encode(q, add_special_tokens=False).ids for q in QUERIES]
    model = MiniLm(model_dir)

    def embed(id_lists):
        framed = [[101] + ids + [102] for ids in id_lists]
        return unit(np.concatenate([model.pooled(framed[i : i + 32]) for i in range(0, len(framed), 32)]))

    teacher_d = cached("/tmp/eval_static_teacher_docs.npy", lambda: embed(doc_ids))
    teacher_q = cached("/tmp/eval_static_teacher_queries.npy", lambda: embed(query_ids))
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    kept = np.array([not (t.startswith("[unused") or t in SPECIAL) for t, _ in vocab])

    def token_means():
        ids = [[101, i, 102] for i in range(len(vocab))]
        return np.concatenate([model.pooled(ids[i : i + 1024]) for i in range(0, len(ids), 1024)])

    def report(label, rows):
        def student(id_lists):
            return unit(np.stack([rows[ids].sum(0) if ids else np.zeros(rows.shape[1]) for ids in id_lists]))

        sd, sq = student(doc_ids), student(query_ids)
        q = agreement(sq, sd, teacher_q, teacher_d)
        d = agreement(sd[:300], sd, teacher_d[:300], teacher_d, exclude_self=True)
        print(f"{label:32} q->d spearman {q[0]:.3f} top10 {q[1]:.3f} | d->d spearman {d[0]:.3f} top10 {d[1]:.3f}")

    if len(sys.argv) > 3:
        report(os.path.basename(sys.argv[3]), read_asset(sys.argv[3]))
        return
    means = cached("/tmp/eval_static_token_means.npy", token_means).astype(np.float64)
    for dims, weighting, a in [(384, "none", 0), (256, "none", 0), (256, "log", 0), (256, "sif", 1e-4),
                               (256, "sif", 3e-5), (192, "sif", 3e-5), (128, "sif", 3e-5)]:
        report(f"dims {dims} {weighting} {a or ''}", table(means, kept, dims, weighting, a))


if __name__ == "__main__":
    main()
