#!/usr/bin/env bash
# Build llama.cpp once per machine: llama-bench, the baseline `make bench` compares the
# engine against (scripts/bench-llamacpp.sh); llama-quantize, which re-quantizes SmolLM2
# for the K-quant checks and benches; and the static libllama + ggml libraries with their
# headers, which tests/tool_llamacpp_logits.c links to dump llama.cpp's prompt logits for
# `make check-llamacpp`. Neither `make` nor `make test` needs it. The sources come from the PyPI sdist of llama-cpp-python, which vendors
# llama.cpp (vendor/llama.cpp); the sdist is checked by sha256 and only vendor/llama.cpp
# is extracted. CPU only, native ISA (-march=native), no CUDA, no curl, Release, static.
# Result: ${XDG_CACHE_HOME:-~/.cache}/mmrag/llama.cpp-<version>/{bin/llama-bench,
#         bin/llama-quantize, lib/lib{llama,ggml,ggml-base,ggml-cpu}.a, include/*.h}
# Usage: scripts/build-llamacpp.sh [--check]  (prints the llama-bench path on its last line;
#        --check only looks for a finished build and exits 1 when there is none)
set -euo pipefail
ver=0.3.16   # llama-cpp-python release (Aug 2025); builds with gcc 12 / cmake 3.25
sdist=llama_cpp_python-$ver.tar.gz
sha=34ed0f9bd9431af045bb63d9324ae620ad0536653740e9bb163a2e1fcb973be6
cache=${XDG_CACHE_HOME:-$HOME/.cache}/mmrag
prefix=$cache/llama.cpp-$ver
built() { [ -f "$prefix/.done" ] && [ -x "$prefix/bin/llama-bench" ] && [ -x "$prefix/bin/llama-quantize" ] \
            && [ -f "$prefix/lib/libllama.a" ] && [ -f "$prefix/include/llama.h" ]; }
if [ "${1:-}" = --check ]; then   # print the path if built; never build
  built && echo "$prefix/bin/llama-bench"
  exit
fi
mkdir -p "$cache/sdist"
# one build per machine even when several make runs start at once
exec 9>"$cache/llama.cpp.lock"
flock 9
if built; then
  echo "$prefix/bin/llama-bench"
  exit 0
fi
if ! { [ -f "$cache/sdist/$sdist" ] && echo "$sha  $cache/sdist/$sdist" | sha256sum -c --status; }; then
  echo "llama.cpp: downloading llama-cpp-python==$ver (sdist, ~50 MB)" >&2
  rm -f "$cache/sdist/$sdist"
  # pip prepares the sdist's metadata in an isolated env (fetches scikit-build-core)
  python3 -m pip download --quiet --no-deps --no-binary :all: -d "$cache/sdist" \
    "llama-cpp-python==$ver" >&2 \
    || { echo "llama.cpp: pip download failed (offline?)" >&2; exit 1; }
  echo "$sha  $cache/sdist/$sdist" | sha256sum -c --status \
    || { echo "llama.cpp: $sdist sha256 mismatch (expected $sha); refusing it" >&2
         rm -f "$cache/sdist/$sdist"; exit 1; }
fi
echo "llama.cpp: building llama-bench, llama-quantize and libllama from llama-cpp-python $ver into $prefix (once per machine, ~10-20 min on 2 cores)" >&2
work=$(mktemp -d "$cache/llama.cpp-src.XXXXXX")
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)
# only the vendored llama.cpp; its .git file points into the sdist's absent git dir
tar -xzf "$cache/sdist/$sdist" -C "$work" --strip-components=2 \
  --exclude="llama_cpp_python-$ver/vendor/llama.cpp/.git" "llama_cpp_python-$ver/vendor/llama.cpp"
src=$work/llama.cpp
[ -f "$src/tools/llama-bench/llama-bench.cpp" ] || { echo "llama.cpp: no tools/llama-bench in $sdist" >&2; exit 1; }
cmake -S "$src" -B "$work/b" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
  -DLLAMA_BUILD_TOOLS=ON >"$work/cmake.log" 2>&1 \
  || { tail -30 "$work/cmake.log" >&2; exit 1; }
nice -n 19 cmake --build "$work/b" --target llama-bench llama-quantize llama -j"$(nproc)" >"$work/build.log" 2>&1 \
  || { tail -30 "$work/build.log" >&2; exit 1; }
rm -f "$prefix/.done"
mkdir -p "$prefix/bin" "$prefix/lib" "$prefix/include"
for t in llama-bench llama-quantize; do
  cp "$work/b/bin/$t" "$prefix/bin/$t"
  strip "$prefix/bin/$t" 2>/dev/null || true
done
for l in libllama.a libggml.a libggml-base.a libggml-cpu.a; do
  f=$(find "$work/b" -name "$l" | head -1)
  [ -n "$f" ] || { echo "llama.cpp: $l not built" >&2; exit 1; }
  cp "$f" "$prefix/lib/$l"
done
cp "$src"/include/llama.h "$src"/ggml/include/*.h "$prefix/include/"
{ echo "llama-cpp-python $ver ($sdist sha256 $sha)"
  echo "built $(date -u +%FT%TZ) in $(( $(date +%s) - t0 )) s, $(gcc -dumpfullversion), $(cmake --version | head -1)"
} > "$prefix/BUILD-INFO"
touch "$prefix/.done"
echo "llama.cpp: done in $(( $(date +%s) - t0 )) s" >&2
echo "$prefix/bin/llama-bench"
