#!/usr/bin/env bash
# Install the Debian packages mmrag needs, only those that are missing.
# Usage: scripts/deps.sh [--dev]   (--dev adds the golden-reference and bench tools)
set -euo pipefail
pkgs=(pkg-config build-essential libpoppler-glib-dev libcairo2-dev libvips-dev libfaiss-dev
      libopenblas-dev libblas-dev liblapack-dev libmicrohttpd-dev libsqlite3-dev
      libjansson-dev libtesseract-dev libleptonica-dev tesseract-ocr-eng poppler-utils cmake
      dpkg-dev python3-pip python3-numpy unzip
      chromium chromium-driver python3-venv jq curl    # browser test (tests/test_web.sh), make check-api
      libpq-dev postgresql-15 postgresql-server-dev-15 postgresql-contrib)   # the shared store
if [ "${1:-}" = "--dev" ]; then
  pkgs+=(libhnswlib-dev python3-torch python3-numpy python3-matplotlib python3-pil valgrind)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
here=$(cd "$(dirname "$0")" && pwd)
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#pkgs[@]} packages present"
  exec "$here/build-pgvector.sh"
fi
echo "deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps: done"
exec "$here/build-pgvector.sh"
