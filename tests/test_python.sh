#!/usr/bin/env bash
# The Python package (bindings/python, ctypes over libmmrag.so): `make install` into a temp
# prefix, `pip install ./bindings/python` into a fresh venv (pure Python: pip needs no
# compiler, only setuptools from PyPI, as a user's install would), then the example indexes
# the sample PDFs, searches, streams an answer, locates, lists and deletes.
# Env: MMRAG_BUILD, MMRAG_MODELS, MMRAG_TMP. Prints "N passed, N failed".
set -u
B=${MMRAG_BUILD:-build}
M=${MMRAG_MODELS:-models}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$(dirname "$0")/lib.sh"
T=$(mktemp -d "${MMRAG_TMP:-/tmp}/py.XXXXXX")
trap 'rm -rf "$T"' EXIT
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
# A sanitizer build (make test SAN=1): the interpreter is not built with ASan, so its
# runtimes must be loaded first; CPython's own allocations at exit are not leaks of ours
if ldd "$B/libmmrag.so" 2>/dev/null | grep -q libasan; then
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
  export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
fi

check "make install PREFIX=tmp" make -s -C "$ROOT" install BUILD="$B" PREFIX="$T/prefix" >"$T/install.log" 2>&1 \
  || tail -n 5 "$T/install.log"
"$PY" -m venv "$T/venv" >/dev/null 2>&1
# from a copy: pip writes build/ and *.egg-info next to the sources it builds
cp -r "$ROOT/bindings/python" "$T/pkg"
check "pip install ./bindings/python" "$T/venv/bin/pip" install -q --disable-pip-version-check \
  "$T/pkg" >"$T/pip.log" 2>&1 || tail -n 5 "$T/pip.log"
"$B/tests/tool_gencorpus" samples "$T/samples" >/dev/null 2>&1
# the library is found from the install prefix (MMRAG_PREFIX), the models from MMRAG_MODELS
out=$(cd "$T" && MMRAG_PREFIX="$T/prefix" MMRAG_MODELS="$ROOT/$M" "$T/venv/bin/python" \
  "$ROOT/bindings/python/examples/quickstart.py" "$T/db" "$T"/samples/northwind-q3-report.pdf \
  "$T"/samples/helios-inverter-manual.pdf 2>&1); rc=$?
printf '%s\n' "$out" | sed 's/^/  | /'
check "example runs (exit $rc)" [ "$rc" -eq 0 ]
check "example: indexed, searched, answered with citations" bash -c \
  'grep -q "^doc 1:" <<<"$1" && grep -q "^hit p\." <<<"$1" && grep -Eq "^\[[a-z_]+\] [1-9][0-9]* citations" <<<"$1"' _ "$out"
check "example: mmrag's error message as an exception" bash -c 'grep -q "^delete 999999: .*(status -4)" <<<"$1"' _ "$out"
check "example: delete left one document" bash -c 'grep -q "^documents left: 1" <<<"$1"' _ "$out"
out=$(MMRAG_LIB=/nonexistent/libmmrag.so "$T/venv/bin/python" -c 'import mmrag; mmrag.Collection("x")' 2>&1)
check "a missing library is an OSError naming it" bash -c 'grep -q "nonexistent/libmmrag.so" <<<"$1"' _ "$out"
# OpenBLAS's kernels: on a CPU with AVX2 the package loads it with AVX2 kernels or better (the
# library's mmrag_blas_kernels_better, asked in a child process), unless the user set some
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  blas='import ctypes, mmrag; mmrag._load(); f = ctypes.CDLL("libopenblas.so.0").openblas_get_corename
f.restype = ctypes.c_char_p; print(f().decode())'
  core=$(env -u OPENBLAS_CORETYPE MMRAG_PREFIX="$T/prefix" "$T/venv/bin/python" -c "$blas" 2>&1)
  check "OpenBLAS kernels under the package: $core, not Prescott" test -n "$core" -a "$core" != Prescott
  core=$(OPENBLAS_CORETYPE=Prescott MMRAG_PREFIX="$T/prefix" "$T/venv/bin/python" -c "$blas" 2>&1)
  check "the user's OPENBLAS_CORETYPE is kept: $core" [ "$core" = Prescott ]
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
