#!/usr/bin/env bash
# Replays every fuzz target's seed corpus (tests/fuzz/corpus/T) and every saved crasher
# (tests/fuzz/regressions/T) through the gcc-built target ($MMRAG_BUILD/tests/fuzz_T,
# tests/fuzz/replay.c as main), plus inputs made at test time: the generated sample PDFs
# (pdf, wire) and the tiny GGUF models of the golden tests (gguf). A crash or a broken
# property (abort) fails the case; `make fuzz` is what finds new inputs.
# Env: MMRAG_BUILD, MMRAG_MODELS, MMRAG_TMP. Prints "N passed, N failed".
set -u
B=${MMRAG_BUILD:-build}
B=$(cd "$B" 2>/dev/null && pwd || echo "$B")
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d "${MMRAG_TMP:-/tmp}/fuzz-replay.XXXXXX")
trap 'rm -rf "$T"' EXIT
. "$HERE/lib.sh"
export TMPDIR=$T
"$B/tests/tool_gencorpus" samples "$T/samples" >/dev/null 2>&1 || bad "gencorpus"
for src in "$HERE"/fuzz/fuzz_*.c; do
  t=$(basename "$src" .c); t=${t#fuzz_}
  bin=$B/tests/fuzz_$t
  [ -x "$bin" ] || { bad "$t: missing $bin"; continue; }
  extra=()
  case $t in
    pdf) extra=("$T"/samples/*.pdf) ;;
    gguf) extra=("$B"/golden/tiny_llama.gguf) ;;
  esac
  out=$(timeout 600 "$bin" "$HERE/fuzz/corpus/$t" "$HERE/fuzz/regressions/$t" "${extra[@]}" 2>&1)
  rc=$?
  n=$(printf '%s\n' "$out" | grep -c '^ok ')
  if [ "$rc" -eq 0 ]; then ok "$t: $n sets replayed"
  else bad "$t: exit $rc"; printf '%s\n' "$out" | tail -n 8; fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
