#!/usr/bin/env bash
# Run every test binary, add up their "N passed, N failed" lines, print the total last.
# Usage: scripts/run-tests.sh BUILD MODELS TEST_BIN...
set -u
build=$1; models=$2; shift 2
export MMRAG_BUILD=$build MMRAG_MODELS=$models OMP_THREAD_LIMIT=1
# sanitizer builds: leak checking stays on, minus system-library caches (tests/lsan.supp)
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$(cd "$(dirname "$0")/.." && pwd)/tests/lsan.supp}
export MMRAG_TMP=$(mktemp -d "${TMPDIR:-/tmp}/mmrag-test.XXXXXX")
trap 'rm -rf "$MMRAG_TMP"' EXIT
total_p=0; total_f=0
for t in "$@"; do
  name=$(basename "$t")
  echo "== $name"
  out=$("$t" 2>&1); rc=$?
  printf '%s\n' "$out" | grep -v -E '^[0-9]+ passed, [0-9]+ failed$'
  line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n1)
  if [ -n "$line" ]; then
    p=${line%% passed*}; f=${line#*, }; f=${f%% failed*}
  else
    p=0; f=1; echo "FAIL $name crashed or printed no summary (exit $rc)"
  fi
  [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && { f=1; echo "FAIL $name exited $rc"; }
  total_p=$((total_p + p)); total_f=$((total_f + f))
done
echo "$total_p passed, $total_f failed"
[ "$total_f" -eq 0 ]
