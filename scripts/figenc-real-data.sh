#!/usr/bin/env bash
# Real figures for the figure encoder's fine-tuning (vision/train/finetune_figenc.py):
# the PDFs of three Debian TeX documentation packages, indexed by mmrag's own ingest
# (--no-embed), their captioned figures cropped with their captions (harvest_real.py).
# The packages of the dev set (vision/train/dev_figures.json) are left out, and no
# octave-doc or python-reportlab-doc PDF is ever read (reserved for evaluation).
#   texlive-pictures-doc 2022.20230122-3, texlive-metapost-doc 2022.20230122-3,
#   texlive-science-doc 2022.20230122-4 (~340 MB of .debs, fetched once)
# Usage: scripts/figenc-real-data.sh BUILD OUT     (prints OUT/figs when done; dev crops in OUT/dev)
set -euo pipefail
build=$1 out=$2
cache=${XDG_CACHE_HOME:-$HOME/.cache}/mmrag/figenc-real
pkgs=(texlive-pictures-doc=2022.20230122-3 texlive-metapost-doc=2022.20230122-3
      texlive-science-doc=2022.20230122-4)
# the dev set's documents and their packages (tuned on: never trained on)
dev="circuit-macros,bodeplot,featpost,genealogytree,fast-diagram,metaobj,metapost/base/,generic/pgf/,latex/pgfplots/,pgf-spectra,sankey,yquant"
mkdir -p "$cache"
if [ ! -f "$cache/.extracted" ]; then
  work=$(mktemp -d "$cache/dl.XXXXXX")
  chmod 755 "$work"   # apt's sandbox user writes the .debs here
  for p in "${pkgs[@]}"; do
    (cd "$work" && apt-get download -qq "$p" >/dev/null 2>&1) ||
      { echo "figenc-real-data: apt-get download $p failed (offline?)" >&2; rm -rf "$work"; exit 1; }
  done
  for d in "$work"/*.deb; do dpkg-deb -x "$d" "$cache/x"; done
  rm -rf "$work"
  touch "$cache/.extracted"
fi
# PDFs under 4 MB (the big galleries are mostly one package's repeats), dev packages out
list=$(mktemp)
find "$cache/x" -name '*.pdf' -size -4M | sort | grep -v -E "$(echo "$dev" | tr ',' '|')" > "$list"
echo "figenc-real-data: $(wc -l < "$list") PDFs" >&2
rm -rf "$out/db"
mkdir -p "$out"
xargs -d '\n' "$build/mmrag" index --no-embed --no-ocr --db "$out/db" < "$list" >/dev/null 2>&1 || true
rm -f "$list"
here=$(dirname "$0")/..
/usr/bin/python3 "$here/vision/train/harvest_real.py" "$out/db" "$out/figs" --captioned "--exclude=$dev" >&2
# the labelled dev figures, cropped from their PDFs (finetune_figenc.py --dev-dir)
/usr/bin/python3 "$here/vision/train/harvest_real.py" --dev "$here/vision/train/dev_figures.json" \
  "$cache/x" "$out/dev" >&2
echo "$out/figs"
