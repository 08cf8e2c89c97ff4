#!/usr/bin/env bash
# Locate latency on a ~1,000-page document (issue 13: p50 <= 0.3 s with --page, <= 1 s
# without): the nine Debian manuals of scripts/fetch-debian-docs.sh joined by pdfunite
# (1,209 pages), indexed once with embeddings, then `mmrag locate` per description, the
# CLI as a user runs it (process start and model load included). Prints p50/p90 of each.
# Usage: scripts/bench-locate.sh BIN MODELS DEBIAN_DOCS_DIR [RUNS]
set -euo pipefail
bin=$1 models=$2 docs=$3 runs=${4:-2}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mmrag-blocate.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
pdfunite "$docs"/*.pdf "$tmp/all.pdf" 2>/dev/null
pages=$(pdfinfo "$tmp/all.pdf" | awk '/^Pages:/ {print $2}')
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
t0=$(date +%s%N)
MMRAG_MODELS=$models "$bin" index --db "$tmp/db" "$tmp/all.pdf" >/dev/null 2>&1
echo "indexed $pages pages with embeddings in $(( $(ms "$t0") / 1000 )) s"
descs=("a plot of the density of a normal distribution" "a table of command line options"
       "a diagram of the package dependencies" "a three dimensional surface with a grid"
       "a drawing of circles and arrows" "a histogram of the data")
stat() {  # label, then milliseconds on stdin
  sort -n | awk -v l="$1" '{v[NR]=$1} END {printf "%-22s p50 %.2f s  p90 %.2f s  (%d calls)\n", l,
    v[int((NR+1)/2)] / 1000, v[int(NR*0.9+0.999)] / 1000, NR}'
}
for mode in nopage page; do
  for r in $(seq 1 "$runs"); do
    for i in "${!descs[@]}"; do
      args=(locate --db "$tmp/db" --doc 1 --json)
      [ $mode = page ] && args+=(--page $((100 + 150 * i)))
      s=$(date +%s%N)
      MMRAG_MODELS=$models "$bin" "${args[@]}" "${descs[$i]}" >/dev/null 2>&1 || true
      ms "$s"
    done
  done | stat "$([ $mode = page ] && echo "with --page (<= 0.3)" || echo "no page (<= 1.0)")"
done
