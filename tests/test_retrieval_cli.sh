#!/usr/bin/env bash
# End-to-end retrieval through the CLI: index the generated corpus + samples, fused search
# with citations, deletion without ghosts, compact, and `mmrag eval retrieval` over
# tests/data/eval_questions.json (the fused MRR must not fall below text-only by more than a
# question, nor below a floor).
set -u
build=${MMRAG_BUILD:-build}
tmp=${MMRAG_TMP:-/tmp}/retrieval-cli.$$
mkdir -p "$tmp/pdf"
export MMRAG_DB="$tmp/db"
. "$(dirname "$0")/lib.sh"  # pass/fail counters, ok, bad, check
m="$build/mmrag"
if ! "$build/tests/tool_gencorpus" corpus "$tmp/pdf" >/dev/null 2>&1 ||
   ! "$build/tests/tool_gencorpus" samples "$tmp/pdf" >/dev/null 2>&1; then
  bad "generate corpus"; echo "$pass passed, $fail failed"; exit 1
fi
"$m" index "$tmp/pdf"/*.pdf >/dev/null 2>&1 && ok "index" || bad "index"

out=$("$m" search "the bar chart comparing output per quarter" -k 3 --json --explain 2>/dev/null)
if printf '%s' "$out" | grep -q '"Figure 2: Quarterly output' &&
   printf '%s' "$out" | grep -q '"box"' && printf '%s' "$out" | grep -q '"image"'; then
  ok "search json with box and per-source ranks"
else bad "search json: $out"; fi

top=$("$m" search "what was revenue in the third quarter" -k 1 --json 2>/dev/null | grep -c 'northwind\|Northwind')
[ "$top" -ge 1 ] && ok "fact question finds its document" || bad "fact question"

# images by their pixels (vision/data/figenc): words of appearance that no caption uses
img() { "$m" search "$1" -k 1 --sources image --json 2>"$tmp/err" | grep -o '"snippet": "[^"]*' | head -n1; }
# (the "aerial photo" is a flat-colour cartoon: since v3 the encoder calls it a drawing, not
# a photograph, so the query says what it shows)
sky="green hills under a blue sky with a yellow sun"
top=$(img "$sky"); [[ $top == *"Aerial photo"* ]] && ok "figure encoder: '$sky' -> the aerial photo" || bad "$sky -> '$top'"
top=$(img "a line plot"); [[ $top == *"Validation loss"* || $top == *"Efficiency"* ]] && ok "figure encoder: 'a line plot' -> a line graph ($top)" || bad "a line plot -> '$top'"
top=$(MMRAG_FIGENC=none img "$sky"); [[ $top != *"Aerial photo"* ]] && ok "without it the caption alone does not find the photo ('$top')" || bad "MMRAG_FIGENC=none still finds the photo"
head -c 3000 vision/data/figenc/model.safetensors >"$tmp/broken.safetensors"
for f in "$tmp/broken.safetensors" "$tmp/missing.safetensors"; do
  top=$(MMRAG_FIGENC=$f "$m" search "chart of revenue for each quarter" -k 1 --sources image 2>"$tmp/err")
  [[ $top == *"Revenue by quarter"* ]] && grep -q "figure encoder not loaded" "$tmp/err" && ok "figure encoder $(basename "$f"): notice, caption search still works" || bad "figure encoder $(basename "$f"): '$top' $(cat "$tmp/err")"
done

# a new figure encoder file (one weight's lowest bits changed) re-embeds every image at the
# next run that embeds and becomes the collection's figure id (the id follows the file's
# bytes: v2 and v3 once shipped under one id, and old collections kept v1 vectors); the old
# encoder's vectors stay for running readers until `mmrag compact`
figs() { python3 -c 'import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
m = dict(c.execute("SELECT value, 1 FROM meta WHERE key=\"figure_model\""))
r = c.execute("SELECT model, count(*) FROM vectors WHERE model LIKE \"mmrag-figenc-%\" GROUP BY model").fetchall()
print(json.dumps([list(m), r, c.execute("SELECT count(*) FROM images").fetchone()[0]]))' "$MMRAG_DB/mmrag.db"; }
before=$(figs)
cp vision/data/figenc/model.safetensors "$tmp/new.safetensors"
size=$(stat -c %s "$tmp/new.safetensors")
printf '\x01' | dd of="$tmp/new.safetensors" bs=1 seek=$((size - 64)) conv=notrunc 2>/dev/null
# before anything embeds with it, a server holding the new encoder searches the old one's
# complete set of vectors (the caption alone does not find the photo: see above)
MMRAG_FIGENC="$tmp/new.safetensors" "$m" serve --db "$MMRAG_DB" --listen 127.0.0.1:0 >"$tmp/srv.out" 2>"$tmp/srv.err" &
spid=$!
port=$(listen_port "$tmp/srv.out" "$spid")
srv_img() { curl -s -X POST "http://127.0.0.1:$port/v1/search" -d "{\"query\":\"$sky\",\"k\":1,\"weights\":{\"text\":0,\"bm25\":0,\"image\":1}}" |
      jq -r '.hits[0].snippet // empty'; }
top=$(srv_img)
[[ $top == *"Aerial photo"* && $(figs) == "$before" ]] && ok "new figure encoder, not yet embedded: the server searches the old vectors ('$top')" ||
  bad "new figure encoder, not yet embedded: server found '$top', vectors $(figs) (before $before)"
MMRAG_FIGENC="$tmp/new.safetensors" "$m" search "$sky" -k 1 --sources image >/dev/null 2>"$tmp/err"
grep -q "new figure encoder" "$tmp/err" && ok "the search that re-embeds says why" || bad "no note on re-embedding: $(cat "$tmp/err")"
top=$(MMRAG_FIGENC="$tmp/new.safetensors" img "$sky")
after=$(figs)
MMRAG_FIGENC="$tmp/new.safetensors" "$m" compact >"$tmp/compact" 2>&1
compacted=$(figs)
if python3 - "$before" "$after" "$compacted" <<'EOF'
import json, sys
(m0, r0, n0), (m1, r1, n1), (m2, r2, n2) = (json.loads(a) for a in sys.argv[1:])
assert len(r0) == 1 and r0[0][0] == m0[0] and r0[0][1] == n0, (m0, r0, n0)
assert m1[0] != m0[0] and sorted(r1) == sorted([[m0[0], n0], [m1[0], n0]]) and n1 == n0, (m1, r1)
assert m2 == m1 and r2 == [[m1[0], n0]], (m2, r2)
EOF
then ok "new figure encoder: every image re-embedded, the old vectors deleted by compact, still '$top'"
else bad "new figure encoder: before $before, after $after, compacted $compacted $(cat "$tmp/compact")"; fi
# the server, running all along, follows the collection to the new vectors (before, it kept
# searching the old encoder's until a restart, and compact left it without any)
top=$(srv_img)
kill "$spid"; wait "$spid" 2>/dev/null
[[ $top == *"Aerial photo"* ]] && ok "a running server follows the collection to the new encoder's vectors" ||
  bad "after re-embedding and compact, the running server found '$top'"

# colour profiles (vision/colour.c), stored by index and read by locate even with the figure
# encoder off: on page 2 the line chart (blue and orange curves) shows orange, the bar chart
# (blue-violet bars) does not, and the line chart is the one picked
cdoc=$("$m" ls 2>/dev/null | awk '/corpus\.pdf/ {print $1}' | head -n1)
out=$(MMRAG_FIGENC=none "$m" locate --doc "$cdoc" --page 2 --debug "the chart with an orange line" 2>"$tmp/dbg")
if grep "Efficiency in percent" "$tmp/dbg" | grep -q " col 1.00" &&
   grep "figure .*Quarterly output" "$tmp/dbg" | grep -q " col 0.00" && [[ $out == *"[0.18"*",0.52"* ]]; then
  ok "colour: 'an orange line' picks the line chart, not the bar chart"
else bad "colour: '$out' $(grep ' col ' "$tmp/dbg" | head -n3)"; fi

# locate without a page on a long document: stored vectors propose a few pages, VPE scores
# only their regions (api/core/locate.c), and finds what it finds with every page
if command -v pdfunite >/dev/null; then
  args=(); for _ in $(seq 1 12); do args+=("$tmp/pdf/corpus.pdf"); done
  pdfunite "${args[@]}" "$tmp/long.pdf" 2>/dev/null
  "$m" index --db "$tmp/longdb" "$tmp/long.pdf" >/dev/null 2>&1
  out=$("$m" locate --db "$tmp/longdb" --doc 1 --debug "the bar chart comparing output per quarter" 2>"$tmp/dbg")
  pg=$(printf '%s' "$out" | grep -o 'page [0-9]*' | head -n1 | awk '{print $2}')
  scored=$(grep -c "^vpe:  #" "$tmp/dbg")
  [[ $out == found* || $out == *"page"* ]] && [ -n "$pg" ] && [ $((pg % 5)) = 2 ] && [ "$scored" -lt 200 ] &&
    ok "locate, 60 pages, no page given: page $pg (a copy of page 2), $scored regions scored" ||
    bad "locate on the long document: '$out' ($scored regions scored)"
  pg2=$("$m" locate --db "$tmp/longdb" --doc 1 --page "$pg" "the bar chart comparing output per quarter" | grep -o 'page [0-9]*' | head -n1)
  [ "$pg2" = "page $pg" ] && ok "locate with that page gives the same page" || bad "locate --page $pg: $pg2"
else bad "locate long document: pdfunite missing"; fi

doc=$("$m" ls 2>/dev/null | grep -i northwind | awk '{print $1}' | head -n1)
q="revenue chart dividend Northwind"
before=$("$m" search "$q" -k 10 --json 2>/dev/null | grep -c '"doc_id": '"$doc"',')
[ -n "$doc" ] && [ "$before" -ge 1 ] && ok "query finds doc $doc before rm" || bad "query before rm ($doc, $before)"
"$m" rm "$doc" >/dev/null 2>&1 && ok "rm" || bad "rm ($doc)"
ghost=$("$m" search "$q" -k 10 --json 2>/dev/null | grep -c '"doc_id": '"$doc"',')
[ "$ghost" -eq 0 ] && ok "no ghost hits after rm" || bad "ghost hits after rm ($ghost)"
"$m" compact >/dev/null 2>&1 && ok "compact" || bad "compact"
"$m" search 'NEAR(" AND OR * ^' -k 2 >/dev/null 2>&1 && ok "hostile query" || bad "hostile query"
# keywords only: no model is loaded (nothing to embed, no note), even where none exists
err=$("$m" search "Northwind revenue" -k 2 --sources bm25 --models "$tmp/no-models" 2>&1 >/dev/null)
[ -z "$err" ] && ok "--sources bm25 loads no model" || bad "--sources bm25 said: $err"

# eval over the full question set needs the removed document back
"$m" index "$tmp/pdf"/*.pdf >/dev/null 2>&1
ev=$("$m" eval retrieval tests/data/eval_questions.json 2>&1)
printf '%s\n' "$ev" | sed -n '/^overall/,/^  fused/p'
mrr() { printf '%s\n' "$ev" | sed -n '/^overall/,/^$/p' | awk -v s="$1" '$1 == s {print $5}'; }
# fusion must not lose to text-only by more than one question moving from first to second
# place (0.5/34 = 0.015 of MRR): the encoder's rounding moves single text-only questions
# either way while fused stays at 0.900 (text-only 0.888 with OpenBLAS's Cooperlake kernels
# in the int8 calibration, 0.905 with the Haswell ones run-tests.sh picks)
f=$(mrr fused); t=$(mrr text)
if [ -n "$f" ] && awk -v f="$f" -v t="$t" 'BEGIN { exit !(f >= 0.7 && f >= t - 0.015) }'; then
  ok "eval: fused MRR $f >= text-only $t - 0.015 and >= 0.7"
else bad "eval: fused MRR '$f' text '$t'"; fi

# sentence vectors pooled in their chunk's pass (MMRAG_SENTVEC=context): one encoder run per
# chunk, and search still works (MRR 0.848 here vs 0.900 with sentences encoded alone)
out=$(MMRAG_SENTVEC=context "$m" index --db "$tmp/ctxdb" "$tmp/pdf"/*.pdf 2>&1)
ev=$("$m" eval retrieval --db "$tmp/ctxdb" tests/data/eval_questions.json 2>&1)
f=$(mrr fused); enc=$(printf '%s' "$out" | grep -o '([0-9]* texts encoded' | grep -o '[0-9]*')
# at most one encoder text per chunk and per image text, however the embedding thread and
# the parsers interleave (a chunk committed mid-pass once had its sentences encoded alone)
want=$(printf '%s' "$out" | sed -n 's/^embedded \([0-9]*\) chunks, \([0-9]*\) images by their text.*/\1 + \2/p')
want=$((${want:-0}))
if [ -n "$f" ] && [ -n "$enc" ] && [ "$enc" -gt 0 ] && [ "$enc" -le "$want" ] &&
   awk -v f="$f" 'BEGIN { exit !(f >= 0.7) }'; then
  ok "MMRAG_SENTVEC=context: $enc encoder texts for $want chunks and image texts (sentences pooled in context), fused MRR $f"
else bad "MMRAG_SENTVEC=context: MRR '$f', encoded '$enc' (at most $want): $out"; fi
rm -rf "$tmp"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
