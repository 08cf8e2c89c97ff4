#!/usr/bin/env bash
# mmrag's engine vs llama.cpp (llama-bench, built by scripts/build-llamacpp.sh) on the same
# GGUF with the same thread counts: prompt processing (ppN) and generation (tgM) tokens/s.
# Both sides measure alike: N random tokens into an empty cache, then M one-token evals
# from an empty cache, each after a warm-up run. The machine is shared, so the two sides
# alternate run by run (and swap which goes first) and the table shows median (min-max).
# Models: the shipped SmolLM2 Q4_1, SmolLM2 re-quantized by llama-quantize to Q4_K_M, Q6_K
# and Q8_0 (scripts/quantize-smollm2.sh) and gemma-3-270m Q4_K_M when `make models-extra`
# fetched it; MMRAG_BENCH_MODELS="a.gguf b.gguf" replaces the list.
# Usage: scripts/bench-llamacpp.sh BUILD_DIR MODELS_DIR
# Env: MMRAG_BENCH_THREADS ("1 2"), MMRAG_BENCH_LCPP_REPS (5), MMRAG_BENCH_PP (512),
#      MMRAG_BENCH_TG (128), MMRAG_BENCH_LCPP_TIMEOUT (60 s a run), MMRAG_BENCH_KV (mmrag's KV type; llama.cpp keeps its f16),
#      MMRAG_LLAMA_BENCH (a llama-bench binary to use instead of the cached build).
set -u
build=${1:-build}; models=${2:-models}
here=$(cd "$(dirname "$0")" && pwd)
smol=$models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
eng=$build/bench/bench_engine
threads=${MMRAG_BENCH_THREADS:-1 2}
reps=${MMRAG_BENCH_LCPP_REPS:-5}
pp=${MMRAG_BENCH_PP:-512}; tg=${MMRAG_BENCH_TG:-128}
tmo=${MMRAG_BENCH_LCPP_TIMEOUT:-60}   # seconds per run; a run past it counts as missing
lb=${MMRAG_LLAMA_BENCH:-$("$here/build-llamacpp.sh" --check 2>/dev/null)}
[ "$reps" -gt 0 ] 2>/dev/null || { echo "llama.cpp comparison: skipped (MMRAG_BENCH_LCPP_REPS=$reps)"; exit 0; }
if [ -z "$lb" ] || [ ! -x "$lb" ]; then
  echo "llama.cpp: not built (scripts/build-llamacpp.sh)"; exit 0
fi
if [ -n "${MMRAG_BENCH_MODELS:-}" ]; then
  read -r -a list <<<"$MMRAG_BENCH_MODELS"
else
  list=()
  [ -f "$smol" ] && list+=("$smol")
  [ -f "$smol" ] && while read -r f; do list+=("$f"); done < <("$here/quantize-smollm2.sh" "$build" "$models" Q4_K_M Q6_K Q8_0 2>/dev/null)
  [ -f "$models/gemma3/gemma-3-270m-q4_k_m.gguf" ] && list+=("$models/gemma3/gemma-3-270m-q4_k_m.gguf")
fi
[ ${#list[@]} -gt 0 ] || { echo "llama.cpp comparison: skipped ($smol missing)"; exit 0; }
[ -x "$eng" ] || { echo "llama.cpp comparison: skipped ($eng not built)"; exit 0; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mmrag-lcpp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

run_llama() {  # threads -> appends tok/s to $tmp/llama.{pp,tg}.T (model: $model)
  local out
  out=$(timeout "$tmo" "$lb" -m "$model" -p "$pp" -n "$tg" -t "$1" -r 1 -o jsonl 2>"$tmp/llama.err") \
    || { echo "llama-bench failed: $(tail -1 "$tmp/llama.err")" >&2; return 1; }
  # one JSON object per test: the pp line has "n_gen": 0, the tg line "n_prompt": 0
  grep '"n_gen": 0,' <<<"$out" | grep -o '"avg_ts": [0-9.]*' | awk '{print $2}' >>"$tmp/llama.pp.$1"
  grep '"n_prompt": 0,' <<<"$out" | grep -o '"avg_ts": [0-9.]*' | awk '{print $2}' >>"$tmp/llama.tg.$1"
}
run_mmrag() {  # threads -> appends tok/s to $tmp/mmrag.{pp,tg}.T
  local out
  out=$(MMRAG_BENCH_MODEL="$model" MMRAG_BENCH_PPTG="$pp,$tg,$1" timeout "$tmo" "$eng") || { echo "mmrag pp/tg failed: $out" >&2; return 1; }
  awk '/^pp_tok_s/{print $2}' <<<"$out" >>"$tmp/mmrag.pp.$1"
  awk '/^tg_tok_s/{print $2}' <<<"$out" >>"$tmp/mmrag.tg.$1"
}
stats() {  # file of tok/s -> "median median (min-max)" (the first field for the ratio)
  [ -s "$1" ] || { echo "0 n/a"; return; }
  sort -g "$1" | awk '{v[NR]=$1} END {
    m = NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2
    printf "%.2f %.1f (%.1f-%.1f)\n", m, m, v[1], v[NR]}'
}

info=$(head -1 "$(dirname "$lb")/../BUILD-INFO" 2>/dev/null | cut -d' ' -f1-2)
echo "llama.cpp: $lb${info:+ (vendored in $info)}"
echo "$reps alternating runs per side and model, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-30s %-6s %-7s %-22s %-22s %s\n" model test threads "mmrag tok/s" "llama.cpp tok/s" "mmrag/llama.cpp"
for model in "${list[@]}"; do
  rm -f "$tmp"/mmrag.* "$tmp"/llama.*
  for t in $threads; do
    for ((i = 0; i < reps; i++)); do
      if ((i % 2 == 0)); then run_llama "$t"; run_mmrag "$t"
      else run_mmrag "$t"; run_llama "$t"; fi
    done
  done
  for t in $threads; do
    for k in pp tg; do
      n=$([ $k = pp ] && echo "$pp" || echo "$tg")
      read -r am a <<<"$(stats "$tmp/mmrag.$k.$t")"
      read -r bm b <<<"$(stats "$tmp/llama.$k.$t")"
      r=$(awk -v a="$am" -v b="$bm" 'BEGIN { if (a > 0 && b > 0) printf "x%.2f", a / b; else print "n/a" }')
      printf "%-30s %-6s %-7s %-22s %-22s %s\n" "$(basename "$model" .gguf)" "$k$n" "$t" "$a" "$b" "$r"
    done
  done
done
echo "(tok/s median (min-max); KV cache: mmrag ${MMRAG_BENCH_KV:-fp32}, llama.cpp f16; each side at its default batch size)"
