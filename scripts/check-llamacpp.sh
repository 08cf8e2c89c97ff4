#!/usr/bin/env bash
# `make check-llamacpp`: the engine against llama.cpp on the same GGUF files. For every
# model it can find, both sides evaluate the same prompt tokens (tests/data/llamacpp_prompt.txt,
# ~550 tokens: two 512-token prefill chunks, past Gemma 3's 512-token sliding window) and
# the script compares every row of prompt logits, the tokenization of the prompt text and
# 16 greedy tokens after it.
#   models: SmolLM2-135M-Instruct as shipped (Q4_1) and re-quantized here by llama.cpp's
#   llama-quantize to Q4_K_M, Q5_K_M, Q6_K, Q8_0 (cached under BUILD/llamacpp/, never
#   committed); gemma-3-270m Q4_K_M when `make models-extra` fetched it; the tiny random
#   llama3/qwen2/qwen3/gemma3 test models (build/golden) when llama.cpp loads them.
# Pass, per model: the prompt tokenizes to the same ids, and with rel = max_v |ours -
# llama.cpp| / (row max - row min) over each row of logits: max rel <= MMRAG_LCPP_TOL
# (0.10), mean rel <= MMRAG_LCPP_TOL_MEAN (0.03), and at least 90% of the rows have the
# same argmax. Not bit for bit: llama.cpp rounds the activations to q8 blocks before
# every product with quantized weights, where the engine's prompt path multiplies fp32
# activations with dequantized weights (its decode path rounds as llama.cpp does). The
# table's self_rel column measures that rounding alone, the engine against itself: the
# llama.cpp differences are of the same size. A real bug (a wrong scale, RoPE base, norm,
# window) moves logits by a large part of their range and flips most argmaxes. Greedy
# agreement is reported, not required (a near tie may flip a token, and the continuations
# then diverge).
# Needs llama.cpp built by scripts/build-llamacpp.sh (the `make bench` baseline; builds it
# when missing unless MMRAG_LCPP_NO_BUILD=1). Exit 0 all pass, 1 a mismatch, 2 no llama.cpp.
# Usage: scripts/check-llamacpp.sh BUILD_DIR MODELS_DIR
# Env: MMRAG_LCPP_TOL (0.02), MMRAG_LCPP_THREADS (2), MMRAG_LCPP_ONLY (a regex: only the
#      models whose file name matches), MMRAG_LCPP_TOL_MEAN (0.03), MMRAG_LCPP_NO_BUILD=1 (never build llama.cpp)
set -u
build=${1:-build}; models=${2:-models}
here=$(cd "$(dirname "$0")" && pwd)
tol=${MMRAG_LCPP_TOL:-0.10}
tol_mean=${MMRAG_LCPP_TOL_MEAN:-0.03}
threads=${MMRAG_LCPP_THREADS:-2}
prompt_file=$here/../tests/data/llamacpp_prompt.txt
ours=$build/tests/tool_logits
if [ "${MMRAG_LCPP_NO_BUILD:-0}" = 1 ]; then lb=$("$here/build-llamacpp.sh" --check)
else lb=$("$here/build-llamacpp.sh" | tail -1); fi
[ -n "$lb" ] && [ -x "$lb" ] || { echo "check-llamacpp: llama.cpp not built (scripts/build-llamacpp.sh)"; exit 2; }
prefix=$(cd "$(dirname "$lb")/.." && pwd)
[ -x "$ours" ] || { echo "check-llamacpp: $ours not built"; exit 2; }
work=$build/llamacpp
mkdir -p "$work"
lc=$work/llamacpp-logits
if [ ! -x "$lc" ] || [ "$here/llamacpp-logits.c" -nt "$lc" ] || [ "$prefix/lib/libllama.a" -nt "$lc" ]; then
  ${CC:-cc} -O2 -std=c11 -Wall -Wextra -Werror -I"$prefix/include" -o "$lc" "$here/llamacpp-logits.c" \
    -L"$prefix/lib" -lllama -lggml -lggml-cpu -lggml-base -lstdc++ -lgomp -lm -pthread \
    || { echo "check-llamacpp: cannot build $lc" >&2; exit 2; }
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mmrag-lcpp-check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

src=$models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
list=()
if [ -f "$src" ]; then
  list+=("$src")
  while read -r f; do list+=("$f"); done < <("$here/quantize-smollm2.sh" "$build" "$models")
else
  echo "check-llamacpp: $src missing (make models)"
fi
g=$models/gemma3/gemma-3-270m-q4_k_m.gguf
if [ -f "$g" ]; then list+=("$g"); else echo "check-llamacpp: skipped gemma-3-270m ($g missing: make models-extra)"; fi
for a in llama3 qwen2 qwen3 gemma3; do
  [ -f "$build/golden/tiny_$a.gguf" ] && list+=("$build/golden/tiny_$a.gguf")
done

prompt=$(cat "$prompt_file")
field() {  # KEY FILE: the value after KEY on the file's "compare:" line
  awk -v k="$1" '/^compare:/ { for (i = 2; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' "$2"
}
fail=0
printf "%-30s %-6s %-9s %-8s %-8s %-8s %-8s %-8s %-8s %-7s %s\n" model tokens tokenize max_abs max_rel mean_rel top1 max_kl self_rel greedy result
for m in "${list[@]}"; do
  name=$(basename "$m" .gguf)
  [[ $name =~ ${MMRAG_LCPP_ONLY:-.} ]] || continue
  text=$prompt gen=16
  # the tiny random models: a 299-token vocabulary and a trained context of 128
  case $name in tiny_*) text=${prompt:0:200} gen=8 ;; esac
  if ! "$lc" "$m" --text "$text" --gen "$gen" --threads "$threads" --out "$tmp/ref.bin" >"$tmp/lc.out" 2>"$tmp/lc.err"; then
    printf "%-38s llama.cpp does not load it: %s\n" "$name" "$(grep -v '^$' "$tmp/lc.err" | tail -1)"
    continue
  fi
  ids=$(awk '/^ids:/{print $2}' "$tmp/lc.out")
  ids_text=$(awk '/^ids_text:/{print $2}' "$tmp/lc.out")
  our_text=$("$ours" "$m" --text "$text" 2>/dev/null | awk '/^ids:/{print $2}')
  if [ "$our_text" = "$ids_text" ]; then tk=same
  elif [ "$name" = tiny_gemma3 ]; then tk='differs*'   # see the note below the table
  else tk=DIFFERS; fi
  "$ours" "$m" --ids "$ids" --gen "$gen" --threads "$threads" --ref "$tmp/ref.bin" --tol "$tol" \
    --out "$tmp/our.bin" >"$tmp/our.out" 2>"$tmp/our.err"
  st=$?
  # the engine against itself: one token at a time (activations rounded to q8, as llama.cpp
  # rounds them in every product) vs 512-token chunks (fp32 GEMM): the rounding's own size
  "$ours" "$m" --ids "$ids" --seq --threads "$threads" --ref "$tmp/our.bin" >"$tmp/self.out" 2>&1
  self=$(field max_rel "$tmp/self.out")
  if [ "$st" != 0 ] && [ "$st" != 3 ]; then
    printf "%-38s mmrag failed: %s\n" "$name" "$(tail -1 "$tmp/our.err")"; fail=1; continue
  fi
  rows=$(field rows "$tmp/our.out"); mabs=$(field max_abs "$tmp/our.out"); mrel=$(field max_rel "$tmp/our.out")
  mean=$(field mean_rel "$tmp/our.out"); top1=$(field top1 "$tmp/our.out"); mkl=$(field max_kl "$tmp/our.out")
  a=$(awk '/^gen:/{print $2}' "$tmp/lc.out" | tr ',' ' '); b=$(awk '/^gen:/{print $2}' "$tmp/our.out" | tr ',' ' ')
  same=$(awk -v a="$a" -v b="$b" 'BEGIN { n = split(a, x, " "); split(b, y, " ");
    for (i = 1; i <= n && x[i] == y[i]; i++); print i - 1 "/" n }')
  res=ok
  if [ "$st" = 3 ] || [ "$tk" = DIFFERS ] || ! awk -v m="$mean" -v t="$tol_mean" -v k="$top1" \
       'BEGIN { split(k, r, "/"); exit !(m <= t && r[1] >= 0.9 * r[2]) }'; then res=FAIL; fail=1; fi
  printf "%-30s %-6s %-9s %-8s %-8s %-8s %-8s %-8s %-8s %-7s %s\n" "$name" "$rows" "$tk" "$mabs" "$mrel" "$mean" "$top1" "$mkl" "$self" "$same" "$res"
done
echo "(max_rel: worst row's max |Δlogit| / that row's logit range, tolerance $tol; mean_rel: its mean"
echo " over rows, tolerance $tol_mean. top1: rows with the same argmax, at least 90%. max_kl: worst KL(llama.cpp || mmrag) in nats."
echo " self_rel: max_rel of the engine one token at a time against itself in 512-token chunks, the"
echo " size of q8 activation rounding alone. greedy: leading greedy tokens equal."
echo " *tiny_gemma3.gguf has no tokenizer.ggml.add_space_prefix: llama.cpp then adds a leading"
echo " space, mmrag follows Gemma's converter (false); the logits compare on llama.cpp's ids."
echo " llama.cpp: $(head -1 "$prefix/BUILD-INFO" 2>/dev/null), KV cache f32 on both sides, $threads threads)"
exit $fail
