#!/usr/bin/env bash
# Build FAISS (Debian's own source package) with its C API into a per-machine cache,
# then link it into build/faiss. Debian's libfaiss-dev has the c_api headers but no
# faiss_* symbols, so we must compile it ourselves. Built once per machine.
# Usage: scripts/build-faiss.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/mmrag
mkdir -p "$cache" "$build"
# the version of the source package pins the cache entry
ver=$(dpkg-query -W -f='${Version}' libfaiss-dev 2>/dev/null || echo unknown)
prefix="$cache/faiss-$ver-avx2c"
# one build per machine even when several make runs start at once
exec 9>"$cache/faiss.lock"
flock 9
if [ -f "$prefix/.done" ] && [ -f "$prefix/lib/libfaiss_c.so" ]; then
  ln -sfn "$prefix" "$build/faiss"
  exit 0
fi
echo "faiss: building $ver with the C API into $prefix (once per machine, ~3 min)"
work=$(mktemp -d "$cache/faiss-src.XXXXXX")
trap 'rm -rf "$work"' EXIT
# private apt configuration: the system's sources stay untouched
mkdir -p "$work/apt/lists/partial"
src_list="$work/apt/sources.list"
uri=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1 | awk '{print $2}')
[ -n "$uri" ] || uri=http://deb.debian.org/debian
echo "deb-src $uri bookworm main" > "$src_list"
apt_opts=(-o Dir::Etc::sourcelist="$src_list" -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$work/apt/lists" -o APT::Get::List-Cleanup=0)
apt-get "${apt_opts[@]}" update -qq
(cd "$work" && apt-get "${apt_opts[@]}" source --download-only -qq faiss >/dev/null && dpkg-source -x --skip-patches ./*.dsc src >/dev/null 2>&1 || dpkg-source -x ./*.dsc src >/dev/null)
# link the C API against the AVX2 build of the library (upstream links the generic one)
sed -i -E 's/(target_link_libraries\(faiss_c[^)]*[[:space:]])faiss([[:space:])])/\1faiss_avx2\2/' "$work/src/c_api/CMakeLists.txt"
grep -q faiss_avx2 "$work/src/c_api/CMakeLists.txt" || { echo "faiss: could not point the C API at faiss_avx2" >&2; exit 1; }
cmake -S "$work/src" -B "$work/b" -DCMAKE_BUILD_TYPE=Release \
  -DFAISS_ENABLE_C_API=ON -DBUILD_SHARED_LIBS=ON -DFAISS_OPT_LEVEL=avx2 \
  -DFAISS_ENABLE_GPU=OFF -DFAISS_ENABLE_PYTHON=OFF -DBUILD_TESTING=OFF \
  -DBLA_VENDOR=OpenBLAS -DCMAKE_INSTALL_RPATH="$prefix/lib" -DCMAKE_BUILD_RPATH="$prefix/lib" -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib >"$work/cmake.log" 2>&1 \
  || { tail -30 "$work/cmake.log"; exit 1; }
cmake --build "$work/b" -j"$(nproc)" >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
cmake --install "$work/b" >/dev/null
# the C API's install rule is missing in some versions: copy what is absent
mkdir -p "$prefix/lib" "$prefix/include/faiss/c_api"
find "$work/b" -name 'libfaiss_c*.so*' -exec cp -a {} "$prefix/lib/" \;
(cd "$work/src/c_api" && find . -name '*.h' -exec cp --parents {} "$prefix/include/faiss/c_api/" \;)
touch "$prefix/.done"
ln -sfn "$prefix" "$build/faiss"
echo "faiss: done"
