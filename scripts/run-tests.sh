#!/usr/bin/env bash
# Run every test binary, add up their "N passed, N failed[, N skipped]" lines, print the
# totals with the skipped count, then the plain "N passed, N failed" last.
# Under CI=true a skipped case fails the run unless tests/skip-allowlist.txt names it with
# a reason (e.g. the CUDA kernels on a machine without a GPU).
# Usage: scripts/run-tests.sh BUILD MODELS TEST_BIN...
set -u
build=$1; models=$2; shift 2
export MMRAG_BUILD=$build MMRAG_MODELS=$models OMP_THREAD_LIMIT=1
# the machines these tests were written on set OPENBLAS_CORETYPE=Haswell (PITFALLS); where
# it is unset OpenBLAS picks its AVX-512 kernels, whose other summation order moves q8
# activation roundings in the engine's golden tests (test_archs: 1.5e-2 instead of 3e-7)
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
# sanitizer builds: leak checking stays on, minus system-library caches (tests/lsan.supp)
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$(cd "$(dirname "$0")/.." && pwd)/tests/lsan.supp}
export MMRAG_TMP=$(mktemp -d "${TMPDIR:-/tmp}/mmrag-test.XXXXXX")
# one real PostgreSQL + pgvector for the run (the shared store's tests), torn down at exit;
# in a folder of its own: the server's user must be able to enter it
pgdir=$(mktemp -d "${TMPDIR:-/tmp}/mmrag-pg.XXXXXX"); chmod 755 "$pgdir"
here=$(cd "$(dirname "$0")" && pwd)
trap '"$here/pg-test.sh" stop "$pgdir/primary" >/dev/null 2>&1; rm -rf "$MMRAG_TMP" "$pgdir"' EXIT
if MMRAG_TEST_PG=$("$here/pg-test.sh" start "$pgdir/primary" 2>"$pgdir/err"); then
  export MMRAG_TEST_PG MMRAG_TEST_PG_DIR=$pgdir/primary
  echo "== PostgreSQL for the shared store's tests: $MMRAG_TEST_PG"
else
  unset MMRAG_TEST_PG
  echo "== no PostgreSQL for the shared store's tests: $(tail -n1 "$pgdir/err")"
fi
# A skipped case (a line "skip ...": no model, no GPU) is counted apart, never as passed.
sum_re='^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$'
total_p=0; total_f=0; total_s=0
allow=$(cd "$(dirname "$0")/.." && pwd)/tests/skip-allowlist.txt
# skip_allowed KEY: 0 when an allowlist entry's glob matches KEY and gives a reason
skip_allowed() {
  local line pat reason
  [ -f "$allow" ] || return 1
  while IFS= read -r line; do
    case $line in ''|'#'*) continue ;; esac
    case $line in *'|'*) ;; *) continue ;; esac      # no "| reason": not an entry
    pat=${line%%|*}; reason=${line#*|}
    pat=$(printf '%s' "$pat" | sed 's/^[[:space:]]*//; s/[[:space:]]*$//')
    [ -n "$(printf '%s' "$reason" | tr -d '[:space:]')" ] || continue
    # shellcheck disable=SC2053
    [[ $1 == $pat ]] && return 0
  done <"$allow"
  return 1
}
for t in "$@"; do
  name=$(basename "$t")
  echo "== $name"
  out=$("$t" 2>&1); rc=$?
  printf '%s\n' "$out" | grep -v -E "$sum_re"
  line=$(printf '%s\n' "$out" | grep -E "$sum_re" | tail -n1)
  if [ -n "$line" ]; then
    p=${line%% passed*}; f=${line#*, }; f=${f%% failed*}
  else
    p=0; f=1; echo "FAIL $name crashed or printed no summary (exit $rc)"
  fi
  s=$(printf '%s\n' "$out" | grep -c '^skip ')
  if [ "${CI:-}" = true ] && [ "$s" -gt 0 ]; then
    while IFS= read -r sk; do
      if ! skip_allowed "$name:${sk#skip }"; then
        echo "FAIL $name: skipped under CI=true and not on tests/skip-allowlist.txt: ${sk#skip }"
        f=$((f + 1))
      fi
    done < <(printf '%s\n' "$out" | grep '^skip ')
  fi
  [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && { f=1; echo "FAIL $name exited $rc"; }
  total_p=$((total_p + p)); total_f=$((total_f + f)); total_s=$((total_s + s))
done
echo "$total_p passed, $total_f failed, $total_s skipped"
# the last line stays the plain "N passed, N failed" that CI parsers read
echo "$total_p passed, $total_f failed"
[ "$total_f" -eq 0 ]
