#!/usr/bin/env bash
# More real figures for the figure encoder's fine-tuning: the 59 vignettes of 28 more Debian
# r-cran-* packages (vision/train/r_more_figures.json: pinned, none of r_figures.json's),
# indexed by mmrag's own ingest (--no-embed) and every image it finds cropped
# (harvest_real.py); finetune_figenc.py trains those described by eye in r_more_figures.json.
# Usage: scripts/figenc-r-data.sh BUILD RDOCS OUT   (RDOCS: scripts/eval_figures.py --fetch-r's
# directory; prints OUT/figs when done)
set -euo pipefail
build=$1 rdocs=$2 out=$3
here=$(dirname "$0")/..
list=$(mktemp)
/usr/bin/python3 -c 'import json, sys; print("\n".join(sorted(json.load(open(sys.argv[1]))["pdfs"])))' \
  "$here/vision/train/r_more_figures.json" | sed "s|^|$rdocs/|" > "$list"
rm -rf "$out/db" "$out/figs"
mkdir -p "$out"
xargs -d '\n' "$build/mmrag" index --no-embed --no-ocr --db "$out/db" < "$list" >/dev/null 2>&1 || true
rm -f "$list"
/usr/bin/python3 "$here/vision/train/harvest_real.py" "$out/db" "$out/figs" >&2
echo "$out/figs"
