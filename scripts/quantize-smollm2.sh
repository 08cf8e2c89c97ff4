#!/usr/bin/env bash
# SmolLM2-135M-Instruct re-quantized by llama.cpp's llama-quantize (scripts/build-llamacpp.sh)
# into BUILD_DIR/llamacpp/SmolLM2-135M-Instruct.<TYPE>.gguf, once: test and bench inputs,
# never committed. The source is the shipped Q4_1 (--allow-requantize: the point is the
# same file on both sides of a comparison, not the best quality). K-quant blocks are 256
# wide and SmolLM2's rows 576, so most "K" tensors fall back to Q5_0/Q5_1/Q8_0.
# Usage: scripts/quantize-smollm2.sh BUILD_DIR MODELS_DIR [TYPE...]  (default Q4_K_M Q5_K_M
#        Q6_K Q8_0); prints one path per type made or found; exit 1 if llama.cpp is missing.
set -u
build=${1:-build}; models=${2:-models}; shift 2 2>/dev/null
types=("$@"); [ ${#types[@]} -gt 0 ] || types=(Q4_K_M Q5_K_M Q6_K Q8_0)
here=$(cd "$(dirname "$0")" && pwd)
lb=$("$here/build-llamacpp.sh" --check) || true
q=$(dirname "${lb:-/nonexistent/x}")/llama-quantize
[ -x "$q" ] || { echo "quantize-smollm2: llama-quantize not built (scripts/build-llamacpp.sh)" >&2; exit 1; }
src=$models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$src" ] || { echo "quantize-smollm2: $src missing (make models)" >&2; exit 1; }
mkdir -p "$build/llamacpp"
for t in "${types[@]}"; do
  dst=$build/llamacpp/SmolLM2-135M-Instruct.$t.gguf
  if [ ! -s "$dst" ] || [ "$src" -nt "$dst" ]; then
    "$q" --allow-requantize "$src" "$dst.tmp" "$t" 2 >"$dst.log" 2>&1 && mv "$dst.tmp" "$dst" \
      || { echo "quantize-smollm2: $t failed: $(tail -1 "$dst.log")" >&2; rm -f "$dst.tmp"; continue; }
    rm -f "$dst.log"
  fi
  echo "$dst"
done
