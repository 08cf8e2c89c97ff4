#!/usr/bin/env bash
# pgvector for Debian's PostgreSQL server, built from Debian's own source package (trixie's
# pgvector: bookworm has none) and installed into the server's extension folder. Once per
# machine; a no-op when that version is installed. A private apt configuration fetches the
# source: the system's sources stay untouched (as scripts/build-faiss.sh does).
set -euo pipefail
pgc=$(ls /usr/lib/postgresql/*/bin/pg_config 2>/dev/null | sort -V | tail -n1 || true)
[ -n "$pgc" ] || { echo "pgvector: no pg_config (apt install postgresql-server-dev-15)" >&2; exit 1; }
ext=$("$pgc" --sharedir)/extension
want=0.8.0
cache=${XDG_CACHE_HOME:-$HOME/.cache}/mmrag
mkdir -p "$cache"
exec 9>"$cache/pgvector.lock"
flock 9
if [ -f "$ext/vector.control" ] && grep -q "default_version = '$want'" "$ext/vector.control"; then exit 0; fi
echo "pgvector: building $want from Debian's source into $ext (once per machine, ~30 s)"
work=$(mktemp -d "$cache/pgvector-src.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/apt/lists/partial"
uri=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1 | awk '{print $2}')
[ -n "$uri" ] || uri=http://deb.debian.org/debian
echo "deb-src $uri trixie main" >"$work/apt/sources.list"
apt_opts=(-o Dir::Etc::sourcelist="$work/apt/sources.list" -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$work/apt/lists" -o APT::Get::List-Cleanup=0)
apt-get "${apt_opts[@]}" update -qq
(cd "$work" && apt-get "${apt_opts[@]}" source --download-only -qq "pgvector=$want-1" >/dev/null 2>&1 \
   && dpkg-source -x ./pgvector_*.dsc src >/dev/null) || { echo "pgvector: cannot fetch the source package" >&2; exit 1; }
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
make -C "$work/src" -s -j"$(nproc)" PG_CONFIG="$pgc" OPTFLAGS="" >"$work/build.log" 2>&1 || { tail -20 "$work/build.log"; exit 1; }
$SUDO make -C "$work/src" -s PG_CONFIG="$pgc" install >/dev/null
echo "pgvector: done"
