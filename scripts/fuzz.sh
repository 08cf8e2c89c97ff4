#!/usr/bin/env bash
# `make fuzz`: libFuzzer campaigns, one per target in tests/fuzz/ (clang, ASan+UBSan, built
# into build-fuzz/ with `make FUZZ=1`). Each runs SECONDS on one core from a working corpus
# under ~/.cache/mmrag/fuzz-corpus/T (seeded from tests/fuzz/corpus/T, its regressions, the
# generated sample PDFs and the tiny golden GGUF models; it grows across runs). A crash,
# a broken property (abort), a leak, a timeout (-timeout=30) or a blow-up past 3 GiB lands
# in build-fuzz/crashes/T/; minimize it (`build-fuzz/fuzz/fuzz_T -minimize_crash=1 FILE`),
# fix the bug, and commit the input to tests/fuzz/regressions/T/ so `make test` replays it.
# Prints per target: executions, exec/s, coverage (cov: edges, ft: features), corpus size,
# findings. Usage: scripts/fuzz.sh BUILD MODELS SECONDS [TARGET...]
set -uo pipefail
B=${1:-build}; MODELS=${2:-models}; SECS=${3:-60}; shift 3 || true
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=($(ls tests/fuzz/fuzz_*.c | sed 's|.*/fuzz_||; s|\.c$||'))
command -v clang >/dev/null || { echo "fuzz: clang is missing (Debian: apt-get install clang)"; exit 1; }
CORP=${XDG_CACHE_HOME:-$HOME/.cache}/mmrag/fuzz-corpus
export MMRAG_MODELS=$(cd "$MODELS" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/mmrag-fuzz.XXXXXX")
trap 'rm -rf "$T"' EXIT
"$B/tests/tool_gencorpus" samples "$T/samples" >/dev/null 2>&1
bins=()
for t in "${targets[@]}"; do bins+=("build-fuzz/fuzz/fuzz_$t"); done
nice -n 19 make --no-print-directory FUZZ=1 -j2 "${bins[@]}" || { echo "fuzz: build failed"; exit 1; }
found=0
printf '%-12s %12s %8s %7s %7s %7s %s\n' target execs exec/s cov ft corpus findings
for t in "${targets[@]}"; do
  c=$CORP/$t; art=$ROOT/build-fuzz/crashes/$t
  mkdir -p "$c" "$art"
  cp -n tests/fuzz/corpus/$t/* "$c"/ 2>/dev/null
  find tests/fuzz/regressions/$t -type f ! -name '.*' -exec cp -n {} "$c"/ \; 2>/dev/null
  case $t in
    pdf) cp -n "$T"/samples/*.pdf "$c"/ ;;
    gguf) cp -n "$B"/golden/*.gguf "$c"/ 2>/dev/null ;;
  esac
  opts=(-max_total_time="$SECS" -timeout=30 -rss_limit_mb=3072 -print_final_stats=1
        -artifact_prefix="$art/")
  case $t in
    pdf|server) opts+=(-max_len=262144) ;;
    gguf) opts+=(-max_len=1048576) ;;
    *) opts+=(-max_len=16384) ;;
  esac
  # the server keeps state (the collection, its threads) across inputs: leaks are not per input
  [ "$t" = server ] && opts+=(-detect_leaks=0)
  log=$T/$t.log
  before=$(ls "$art" | wc -l)
  TMPDIR=$T LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/tests/lsan.supp} ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
    build-fuzz/fuzz/fuzz_$t "${opts[@]}" "$c" >"$log" 2>&1
  rc=$?
  after=$(ls "$art" | wc -l)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  n=$(ls "$c" | wc -l)
  new=$((after - before))
  what=none
  if [ "$rc" -ne 0 ] || [ "$new" -gt 0 ]; then
    found=$((found + 1))
    what="exit $rc, $new new in $art: $(grep -m1 -E 'ERROR: |fuzz property failed|SUMMARY' "$log" | cut -c1-160)"
    cp "$log" "$art/last-run.log"
  fi
  printf '%-12s %12s %8s %7s %7s %7s %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$n" "$what"
done
[ "$found" -eq 0 ]
