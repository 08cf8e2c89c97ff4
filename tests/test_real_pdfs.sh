#!/usr/bin/env bash
# The second corpus: two real PDFs from Debian documentation packages (fetched and
# sha256-checked by scripts/fetch-debian-docs.sh; 572 pages of pdfTeX and xdvipdfmx
# output with tables). Checked against Poppler's own command-line tools as an independent
# reference: page counts (pdfinfo), that the page of a keyword hit really has the word
# (pdftotext -f/-l) and that the cited box really holds it (pdftotext cropped to the box),
# plus boxes normalized, tables found, and re-indexing unchanged files is a no-op.
# Keyword search only (--no-embed): the semantic path is covered on the generated corpus.
set -u
build=${MMRAG_BUILD:-build}
tmp=${MMRAG_TMP:-/tmp}/real-pdfs.$$
mkdir -p "$tmp"
export MMRAG_DB="$tmp/db"
. "$(dirname "$0")/lib.sh"  # pass/fail counters, ok, bad, check
m="$build/mmrag"
here=$(cd "$(dirname "$0")/.." && pwd)
if ! dir=$("$here/scripts/fetch-debian-docs.sh" 2>"$tmp/fetch.err"); then
  echo "skip real PDFs: $(tail -1 "$tmp/fetch.err")"
  echo "0 passed, 0 failed"; exit 0
fi
ref=$dir/debian-reference.en.pdf; gp=$dir/gnuplot.pdf

"$m" index --no-embed --json "$ref" "$gp" >"$tmp/index.json" 2>"$tmp/index.err"
rc=$?
[ $rc -eq 0 ] && [ "$(jq -r '.indexed' "$tmp/index.json")" = 2 ] && ok "index both (exit 0)" \
  || bad "index rc $rc: $(cat "$tmp/index.err")"
for f in "$ref" "$gp"; do
  want=$(pdfinfo "$f" | awk '/^Pages:/ {print $2}')
  got=$(jq -r --arg p "$f" '.documents[] | select(.path == $p) | .pages' "$tmp/index.json")
  chunks=$(jq -r --arg p "$f" '.documents[] | select(.path == $p) | .chunks' "$tmp/index.json")
  [ "$got" = "$want" ] && [ "${chunks:-0}" -gt 1000 ] \
    && ok "$(basename "$f"): $got pages as pdfinfo says, $chunks chunks" \
    || bad "$(basename "$f"): pages $got vs pdfinfo $want, chunks $chunks"
done
echo "info $(jq -r '"\(.pages) pages in \(.seconds) s (\(.pages_per_s | floor) pages/s, no embeddings)"' "$tmp/index.json")"

# every box normalized and non-empty, in both documents
badbox=0
for d in "$ref" "$gp"; do
  n=$("$m" show "$d" --json | jq '[.chunks[].box | select(.[0] < 0 or .[1] < 0 or .[2] > 1 or .[3] > 1 or .[0] >= .[2] or .[1] >= .[3])] | length')
  badbox=$((badbox + ${n:-1}))
done
[ "$badbox" -eq 0 ] && ok "all chunk boxes inside the page and non-empty" || bad "$badbox bad boxes"

# running headers are page furniture, not content: at most the first two pages keep them
nh=$("$m" show "$ref" --json | jq '[.chunks[] | select(.text | test("^Debian Reference"))] | length')
ng=$("$m" show "$gp" --json | jq '[.chunks[] | select(.text | test("^gnuplot 5\\.4"))] | length')
[ "${nh:-99}" -le 3 ] && [ "${ng:-99}" -le 3 ] && ok "running headers dropped (chunks starting with them: $nh, $ng)" \
  || bad "running headers kept: $nh debian-reference chunks, $ng gnuplot chunks start with them"

tables=$("$m" show "$ref" --json | jq '[.chunks[] | select(.kind == "table")] | length')
[ "${tables:-0}" -ge 20 ] && ok "debian-reference: $tables table chunks" || bad "debian-reference tables: $tables"

# keyword hits: the page has the word (pdftotext) and so does the box (pdftotext cropped)
check_hit() {  # query word file
  local q=$1 word=$2 f=$3 hit page box w h x y W H
  hit=$("$m" search "$q" -k 1 --sources bm25 --doc "$f" --json 2>/dev/null | jq -c '.hits[0]')
  page=$(jq -r '.page' <<<"$hit")
  box=$(jq -r '.box | map(tostring) | join(" ")' <<<"$hit")
  if [ -z "$page" ] || [ "$page" = null ]; then bad "search '$q': no hit"; return; fi
  if pdftotext -f "$page" -l "$page" "$f" - 2>/dev/null | grep -qi -- "$word"; then
    ok "search '$q' -> p.$page of $(basename "$f"), and pdftotext finds '$word' there"
  else bad "search '$q' -> p.$page, but pdftotext has no '$word' there"; fi
  read -r w h < <(pdfinfo -f "$page" -l "$page" "$f" | awk '/^Page.*size:/ {print $4, $6; exit}')
  # crop in points at 72 dpi, one point of slack around the box
  read -r x y W H < <(awk -v b="$box" -v w="$w" -v h="$h" 'BEGIN { split(b, a, " ");
    printf "%d %d %d %d\n", a[1]*w - 1, a[2]*h - 1, (a[3]-a[1])*w + 3, (a[4]-a[2])*h + 3 }')
  if pdftotext -r 72 -x "$x" -y "$y" -W "$W" -H "$H" -f "$page" -l "$page" "$f" - 2>/dev/null |
     grep -qi -- "$word"; then
    ok "  its box [$box] holds '$word' (pdftotext cropped to it)"
  else bad "  box [$box] on p.$page does not hold '$word'"; fi
}
check_hit "xrange" "xrange" "$gp"
check_hit "logscale" "logscale" "$gp"
check_hit "sources.list" "sources.list" "$ref"
check_hit "debootstrap" "debootstrap" "$ref"

out=$("$m" index --no-embed --json "$ref" "$gp" 2>/dev/null | jq -r '"\(.indexed) \(.unchanged)"')
[ "$out" = "0 2" ] && ok "re-index unchanged files: no-op" || bad "re-index: indexed/unchanged $out"
rm -rf "$tmp"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
