#!/usr/bin/env bash
# Run every bench binary in turn; each prints its own side-by-side table.
set -u
build=$1; models=$2; shift 2
export MMRAG_BUILD=$build MMRAG_MODELS=$models
export MMRAG_TMP=$(mktemp -d "${TMPDIR:-/tmp}/mmrag-bench.XXXXXX")
trap 'rm -rf "$MMRAG_TMP"' EXIT
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
