#!/usr/bin/env bash
# Run every bench binary in turn; each prints its own side-by-side table.
set -u
build=$1; models=$2; shift 2
export MMRAG_BUILD=$build MMRAG_MODELS=$models
export MMRAG_TMP=$(mktemp -d "${TMPDIR:-/tmp}/mmrag-bench.XXXXXX")
# the bench binaries load OpenBLAS with the kernels mmrag itself runs (api/cli/main.c sets
# them when OpenBLAS does not know the CPU): what a user of mmrag gets
if [ -z "${OPENBLAS_CORETYPE+x}" ] && [ -x "$build/mmrag" ]; then
  core=$("$build/mmrag" models --models "$models" 2>/dev/null | sed -n 's/^math: .*OpenBLAS \([A-Za-z0-9]*\) kernels$/\1/p')
  [ -n "$core" ] && export OPENBLAS_CORETYPE=$core
fi
echo "OpenBLAS kernels: ${OPENBLAS_CORETYPE:-as OpenBLAS picks them}"
# a throwaway PostgreSQL + pgvector for bench_pgvector (the shared store), torn down at exit
pgdir=$(mktemp -d "${TMPDIR:-/tmp}/mmrag-bench-pg.XXXXXX"); chmod 755 "$pgdir"
here=$(cd "$(dirname "$0")" && pwd)
trap '"$here/pg-test.sh" stop "$pgdir/p" >/dev/null 2>&1; rm -rf "$MMRAG_TMP" "$pgdir"' EXIT
case " $* " in *bench_pgvector*)
  MMRAG_BENCH_PG=$("$here/pg-test.sh" start "$pgdir/p") && export MMRAG_BENCH_PG ;;
esac
for b in "$@"; do
  echo "== $(basename "$b")"
  "$b" || echo "bench $(basename "$b") failed (exit $?)"
  # the figure encoder we ship (issue 13 target: >= 20 figures/s on 2 cores)
  [ "$(basename "$b")" = bench_clip ] && { "$b" --figenc --images 64 || echo "bench_clip --figenc failed"; }
done
# llama.cpp on the same GGUF and threads, next to the engine (a note when it is not built)
for b in "$@"; do
  [ "$(basename "$b")" = bench_engine ] || continue
  echo "== llama.cpp vs mmrag (pp/tg tokens/s)"
  "$(dirname "$0")/bench-llamacpp.sh" "$build" "$models" || echo "bench-llamacpp failed (exit $?)"
done
