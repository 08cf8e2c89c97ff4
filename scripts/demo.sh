#!/usr/bin/env bash
# `make demo`: generate the sample PDFs, index them into a fresh collection and show what
# mmrag found (documents, one document's chunks with boxes, a search, a located region),
# then ask a question: the streamed answer, its citations, and the cited page as a PNG.
# Usage: scripts/demo.sh BUILD MODELS
set -euo pipefail
build=${1:-build}; models=${2:-models}
mmrag=$build/mmrag
gen=$build/tests/tool_gencorpus
demo=$build/demo
for f in "$mmrag" "$gen"; do
  [ -x "$f" ] || { echo "demo: $f is missing (run make first)" >&2; exit 1; }
done
export MMRAG_MODELS=$models
rm -rf "$demo"
mkdir -p "$demo"
"$gen" samples "$demo/samples" >/dev/null
db=$demo/db

if [ -t 1 ]; then step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else step() { printf '\n== %s\n' "$*"; }; fi

step "mmrag index $demo/samples --db $db"
"$mmrag" index "$demo/samples" --db "$db"

step "mmrag ls"
"$mmrag" ls --db "$db"

first=$("$mmrag" ls --db "$db" --json | sed -n 's/^ *"id": \([0-9]*\),*$/\1/p' | head -n1)
step "mmrag show $first --page 1   (chunks: kind, page, box [x0,y0,x1,y1] in 0..1, anchored image)"
shown=$("$mmrag" show "$first" --page 1 --db "$db")
printf '%s\n' "$shown" | head -n 24

step "mmrag search \"revenue by quarter\" -k 3"
"$mmrag" search "revenue by quarter" -k 3 --db "$db"

nw=$("$mmrag" ls --db "$db" | awk '/northwind/ {print $1; exit}')
if [ -n "$nw" ]; then
  step "mmrag locate --doc $nw \"the revenue chart\" --show $demo/locate.png"
  "$mmrag" locate --doc "$nw" "the revenue chart" --db "$db" --show "$demo/locate.png" ||
    echo "(locate needs the text model: make models)"
fi

# the answer shows only sentences the evidence supports (the 135M model often invents the
# figure: then the evidence sentence is quoted), each citing its sentence box on the page
q="What dividend per share did the Northwind board approve?"
model=$models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
step "mmrag ask \"$q\" -k 3 --show $demo/answer.png"
if [ -f "$model" ]; then
  "$mmrag" ask "$q" -k 3 --db "$db" --max-tokens 60 --show "$demo/answer.png"
else
  echo "(no language model at $model: run make models)"
fi

echo
echo "demo: collection in $db (try: $mmrag ask \"your question\" --db $db)"
