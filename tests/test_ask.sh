#!/usr/bin/env bash
# End-to-end `mmrag ask` through the CLI on the generated sample PDFs: a streamed answer
# with a citation that points at a real chunk (page and box) of the right document; --json
# fields; --show writing valid PNGs whose box border has the highlight colour (decoded
# here with python3's zlib, colour from api/core/render.h); `locate --show`; bad input gives a
# one-line error and a non-zero exit. The answer's wording is the model's: only its shape
# and its citations are checked.
set -u
build=${MMRAG_BUILD:-build}
models=${MMRAG_MODELS:-models}
tmp=${MMRAG_TMP:-/tmp}/ask-cli.$$
m="$build/mmrag"
export MMRAG_MODELS=$models
export MMRAG_DB="$tmp/db"
. "$(dirname "$0")/lib.sh"  # pass/fail counters, ok, bad, check
finish() { rm -rf "$tmp"; echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }
mkdir -p "$tmp"
model=$models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$model" ] || { bad "no model at $model (make models)"; finish; }
if ! "$build/tests/tool_gencorpus" samples "$tmp/pdf" >/dev/null 2>&1 ||
   ! "$m" index "$tmp/pdf" >/dev/null 2>&1; then
  bad "generate and index the samples"; finish
fi
doc=$("$m" ls 2>/dev/null | awk '/northwind/ {print $1; exit}')
"$m" show "$doc" --json >"$tmp/doc.json" 2>/dev/null || bad "show $doc --json"
q="What dividend per share did the Northwind board approve?"

# 1. text mode: answer, then "[n] -> title (doc D), page P, box [...]" lines, then "shown:"
"$m" ask "$q" -k 3 --max-tokens 40 --show "$tmp/pages" >"$tmp/out.txt" 2>"$tmp/err.txt"
rc=$?
[ "$rc" -eq 0 ] && ok "ask exits 0" || bad "ask exit $rc: $(head -c 300 "$tmp/err.txt")"
answer=$(sed -n '1,/^$/p' "$tmp/out.txt" | tr -d '[:space:]')
[ -n "$answer" ] && ok "non-empty answer" || bad "empty answer: $(cat "$tmp/out.txt")"
# every citation line must name a chunk of the document with the same page and box
if python3 - "$tmp/out.txt" "$tmp/doc.json" "$doc" <<'EOF'
import json, re, sys
out, doc = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
want = int(sys.argv[3])
cites = re.findall(r"^\[(\d+)\] -> .* \(doc (\d+)\), page (\d+), box \[([-0-9., ]+)\] \((sentence|chunk)\)", out, re.M)
assert cites, "no citation lines"
good = 0
inside = lambda b, c: all(b[i] >= c[i] - 0.0015 for i in (0, 1)) and all(b[i] <= c[i] + 0.0015 for i in (2, 3))
for _, d, p, box, src in cites:
    b = [float(x) for x in box.split(",")]
    if int(d) == want and src == "sentence" and any(c["page"] == int(p) and inside(b, c["box"])
                                                    for c in doc["chunks"]):
        good += 1
assert good >= 1, "no citation is a sentence box inside a chunk of doc %d: %s" % (want, cites)
EOF
then ok "text citation = a sentence box inside a chunk of the Northwind report"
else bad "text citations: $(grep -- '->' "$tmp/out.txt" | head -3)"; fi
shown=$(sed -n 's/^shown: \(.*\.png\)  (page.*/\1/p' "$tmp/out.txt" | head -n1)
[ -n "$shown" ] && [ -f "$shown" ] && [[ "$shown" == "$tmp/pages/doc"*-p*.png ]] &&
  ok "--show DIR wrote $shown" || bad "--show DIR: '$shown' $(ls "$tmp/pages" 2>&1)"

# 2. --json: answer, citations, stop_reason, timings; --show FILE.png named in "shown"
"$m" ask "$q" -k 3 --max-tokens 40 --json --show "$tmp/answer.png" >"$tmp/out.json" 2>"$tmp/err.txt"
rc=$?
if [ "$rc" -eq 0 ] && python3 - "$tmp/out.json" "$tmp/doc.json" "$doc" "$tmp/answer.png" <<'EOF'
import json, sys
j, doc = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
want, png = int(sys.argv[3]), sys.argv[4]
assert isinstance(j["answer"], str) and j["answer"].strip(), "empty answer"
# the planted fact is 0.35 euros: whatever the model writes, what is shown must carry it
# (an invented figure fails the check and the quote of the evidence is shown instead)
assert not j["abstained"] and "0.35" in j["answer"], j["answer"]
assert j["mode"] == "auto" and j["mode_used"] in ("generative", "extractive"), j["mode_used"]
assert j["stop_reason"] in ("end_turn", "max_tokens", "stop_sequence", "repetition", "extractive", "unsupported", "enough"), j["stop_reason"]
assert all(s["supported"] for s in j["sentences"] if s["shown"]), j["sentences"]
t = j["timings"]
assert t["total_ms"] > 0 and t["prompt_tokens"] > 0 and t["completion_tokens"] > 0, t
assert j["citations"], "no citations"
chunks = {c["id"]: c for c in doc["chunks"]}
inside = lambda b, c: all(b[i] >= c[i] - 1e-4 for i in (0, 1)) and all(b[i] <= c[i] + 1e-4 for i in (2, 3))
ok = [c for c in j["citations"] if c["document_id"] == want and c["chunk_id"] in chunks
      and chunks[c["chunk_id"]]["page"] == c["page"] and c["box_source"] == "sentence"
      and inside(c["box"], chunks[c["chunk_id"]]["box"]) and c["text"] in chunks[c["chunk_id"]]["text"].replace("\n", " ")]
assert ok, "no citation is a sentence of a chunk of doc %d: %s" % (want, j["citations"])
assert [s["path"] for s in j["shown"]] == [png], j["shown"]
EOF
then ok "--json: answer carries the planted 0.35, shown sentences supported, sentence citations inside the right chunk, shown"
else bad "--json (exit $rc): $(head -c 400 "$tmp/out.json") $(head -c 200 "$tmp/err.txt")"; fi

# 3. the PNG: signature, IHDR size 1000 px wide with the page's aspect, the box border
#    pixel in the highlight colour and the page corner white
png_check() {   # PNG BOX(x0,y0,x1,y1)
  python3 - "$1" "$2" <<'EOF'
import struct, sys, zlib
data, box = open(sys.argv[1], "rb").read(), [float(v) for v in sys.argv[2].split(",")]
assert data[:8] == b"\x89PNG\r\n\x1a\n", "bad signature"
assert len(data) > 10000, "suspiciously small: %d bytes" % len(data)
pos, idat, ihdr = 8, b"", None
while pos < len(data):
    n, typ = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    assert zlib.crc32(typ + body) == struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0], "crc"
    if typ == b"IHDR": ihdr = struct.unpack(">IIBBBBB", body)
    if typ == b"IDAT": idat += body
    pos += 12 + n
w, h, depth, ctype, _, _, inter = ihdr
assert w == 1000 and abs(h - round(1000 * 792 / 612)) <= 1, (w, h)   # US letter samples
assert depth == 8 and ctype in (2, 6) and inter == 0, ihdr
bpp = 3 if ctype == 2 else 4
raw, stride = zlib.decompress(idat), w * bpp
x, y = int(box[0] * w), int((box[1] + box[3]) / 2 * h)
rows, prev = [], bytearray(stride)
for r in range(y + 1):                      # unfilter only the rows needed
    f, line = raw[r * (stride + 1)], bytearray(raw[r * (stride + 1) + 1:(r + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line)
    prev = line
px = lambda xx, yy: tuple(rows[yy][xx * bpp:xx * bpp + 3])
assert px(2, 2) == (255, 255, 255), "corner not white: %s" % (px(2, 2),)
edge = px(x, y)
assert all(abs(u - v) <= 3 for u, v in zip(edge, (230, 26, 26))), "border pixel %s at %d,%d" % (edge, x, y)
EOF
}
cbox=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["citations"][0]["box"]; print(",".join(map(str,c)))' "$tmp/out.json" 2>/dev/null)
if [ -f "$tmp/answer.png" ] && err=$(png_check "$tmp/answer.png" "$cbox" 2>&1); then
  ok "--show FILE.png: valid PNG, border of the cited box in the highlight colour"
else bad "--show PNG: ${err:-missing} (box $cbox)"; fi

# 4. locate --show (needs the text model, like locate itself)
if [ -f "$models/minilm/model.safetensors" ]; then
  "$m" locate --doc "$doc" "the revenue chart" --show "$tmp/loc.png" >"$tmp/loc.txt" 2>&1
  lbox=$(sed -n 's/^found page 1 .*\[\([0-9.,]*\)\].*/\1/p' "$tmp/loc.txt")
  if grep -q "^shown: $tmp/loc.png" "$tmp/loc.txt" && [ -n "$lbox" ] &&
     err=$(png_check "$tmp/loc.png" "$lbox" 2>&1); then
    ok "locate --show: the located box drawn on page 1"
  else bad "locate --show: $(cat "$tmp/loc.txt") ${err:-}"; fi
fi

# 5. bad input: a one-line "mmrag: ..." error and the exit status the CLI documents
one_line_err() {   # NAME WANT_RC WANT_TEXT CMD...
  local name=$1 want=$2 text=$3; shift 3
  "$@" >"$tmp/bo.txt" 2>"$tmp/be.txt"
  local rc=$? n
  n=$(wc -l <"$tmp/be.txt")
  if [ "$rc" -eq "$want" ] && [ "$n" -eq 1 ] && grep -q "^mmrag: .*$text" "$tmp/be.txt" &&
     [ ! -s "$tmp/bo.txt" ]; then ok "$name -> exit $rc: $(cat "$tmp/be.txt")"
  else bad "$name: exit $rc, $n stderr lines: $(head -c 300 "$tmp/be.txt")"; fi
}
one_line_err "empty question" 2 "empty question" "$m" ask ""
one_line_err "blank question" 2 "empty question" "$m" ask "   "
one_line_err "missing database" 3 "$tmp/nodb" "$m" ask "$q" --db "$tmp/nodb"
one_line_err "missing model" 1 "/nonexistent" "$m" ask "$q" --model /nonexistent
one_line_err "--show into a missing folder" 2 "does not exist" "$m" ask "$q" --show "$tmp/no/such/a.png"
printf 'not a gguf' >"$tmp/bad.gguf"
one_line_err "corrupt model" 1 "bad.gguf" "$m" ask "$q" --model "$tmp/bad.gguf"
one_line_err "100 KB question" 2 "question too long" "$m" ask "$(head -c 100000 /dev/zero | tr '\0' 'a')"
one_line_err "invalid UTF-8 question" 2 "not valid UTF-8" "$m" ask "$(printf 'revenue \xff\xfe?')"
one_line_err "unknown mode" 2 "unknown --mode" "$m" ask "$q" --mode poetic

# 6. modes: extractive quotes the evidence verbatim (no model needed); a question the
#    documents cannot answer abstains in every mode, with the nearest passages
"$m" ask "$q" --mode extractive --json --model /nonexistent >"$tmp/ext.json" 2>"$tmp/err.txt"
rc=$?
if [ "$rc" -eq 0 ] && python3 - "$tmp/ext.json" "$tmp/doc.json" <<'EOF2'
import json, sys
j, doc = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert j["mode_used"] == "extractive" and not j["abstained"] and "0.35" in j["answer"], j["answer"]
text = " ".join(c["text"].replace("\n", " ") for c in doc["chunks"])
assert j["citations"] and all(c["text"] in text for c in j["citations"]), j["citations"]
assert j["timings"]["completion_tokens"] == 0
EOF2
then ok "extractive: verbatim quote with the planted 0.35, no model loaded"
else bad "extractive (exit $rc): $(head -c 300 "$tmp/ext.json") $(head -c 200 "$tmp/err.txt")"; fi
for mode in auto extractive generative; do
  "$m" ask "How do I deploy a Kubernetes cluster on these servers?" --mode $mode --json >"$tmp/abs.json" 2>"$tmp/err.txt"
  rc=$?
  if [ "$rc" -eq 0 ] && python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["abstained"] and j["answer"].startswith("The documents do not answer"), j' "$tmp/abs.json" 2>"$tmp/perr.txt"
  then ok "unanswerable question abstains ($mode): $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["abstain_reason"])' "$tmp/abs.json")"
  else bad "unanswerable ($mode, exit $rc): $(head -c 300 "$tmp/abs.json") $(cat "$tmp/perr.txt" | tail -1)"; fi
done

# 6b. a FAQ (tool_gencorpus faq): a heading that poses the question is quoted with the
#     paragraph under it (a chunk of its own), its box spanning both, the later "See
#     Section 1.1 [...], page 1" pointer back at it ranks below it, a sentence that refers
#     back is quoted with its antecedent, one that says "as follows." with what follows; a
#     question in British spelling does not abstain over a manual in American spelling; no
#     quote repeats another (the pointer and the sentence before it, quoted along)
if "$build/tests/tool_gencorpus" faq "$tmp/faq" >/dev/null 2>&1 &&
   "$m" index --db "$tmp/faqdb" "$tmp/faq" >/dev/null 2>&1; then
  for fq in "Why does the unit stop after a few minutes?" "Why does my dehumidifier stop running after a few minutes?"; do
    "$m" ask --db "$tmp/faqdb" "$fq" --mode extractive --json --model /nonexistent >"$tmp/faq.json" 2>"$tmp/err.txt"
    rc=$?
    if [ "$rc" -eq 0 ] && python3 - "$tmp/faq.json" "$fq" <<'EOF4'
import json, sys
j, q = json.load(open(sys.argv[1])), sys.argv[2]
assert not j["abstained"] and "coil temperature" in j["answer"], j["answer"]
c = next(c for c in j["citations"] if "coil temperature" in c["text"])
assert c["text"].startswith("1.1 Why does the unit stop") and c["page"] == 1, c
assert c["box"][1] < 0.2 < 0.25 < c["box"][3], c["box"]     # the heading's line to the body's
if q.startswith("Why does the unit"):                          # the heading's own words
    assert j["citations"][0] is c, [x["text"][:40] for x in j["citations"]]
assert j["answer"].count("See Section 1.1") <= 1, j["answer"]  # no quote repeats another
EOF4
    then ok "FAQ: \"$fq\" quotes the heading with the answer under it"
    else bad "FAQ \"$fq\" (exit $rc): $(head -c 400 "$tmp/faq.json") $(head -c 200 "$tmp/err.txt")"; fi
  done
  # faq_ask QUESTION ASSERTION NAME: an extractive ask over the FAQ whose JSON (j) must
  # satisfy the Python ASSERTION
  faq_ask() {
    "$m" ask --db "$tmp/faqdb" "$1" --mode extractive --json --model /nonexistent >"$tmp/faq.json" 2>"$tmp/err.txt"
    local rc=$?
    if [ "$rc" -eq 0 ] && python3 -c "import json,sys; j=json.load(open(sys.argv[1])); c=(j['citations'] or [{}])[0]; assert $2, j" \
         "$tmp/faq.json" 2>"$tmp/perr.txt"
    then ok "$3"
    else bad "$3 (exit $rc): $(head -c 400 "$tmp/faq.json") $(tail -1 "$tmp/perr.txt")"; fi
  }
  # a sentence that refers back ("Fit this nozzle ...") is quoted with the one it refers to
  faq_ask "How do I drain the water continuously into a floor drain?" \
    'c["text"].startswith("The outlet nozzle sits behind") and "12 mm garden hose" in c["text"] and c["page"] == 2' \
    "a sentence that refers back is quoted with the sentence before it"
  # "... proceed as follows." is quoted with the instruction it announces, however long
  faq_ask "How do I reset the filter counter?" '"as follows. Hold the FAN and MODE buttons" in j["answer"]' \
    "a sentence that announces an instruction is quoted with it"
  # a word the manual spells the other way ("maximise" / "maximize") is not absent from it
  faq_ask "How can I maximise drying in a cold basement?" 'not j["abstained"] and "top speed" in j["answer"]' \
    "a British spelling finds the American one: no false abstention"
else
  bad "generate and index the FAQ"
fi

# 7. the real gemma-3-270m (a base model without chat template: plain completion prompt)
#    answers over the same collection, citations and all (make models-extra; skipped without)
gemma=$models/gemma3/gemma-3-270m-q4_k_m.gguf
if [ -f "$gemma" ]; then
  "$m" ask "$q" --model "$gemma" --max-tokens 60 --json >"$tmp/gemma.json" 2>"$tmp/err.txt"
  rc=$?
  if [ "$rc" -eq 0 ] && grep -q "using the plain format" "$tmp/err.txt" && python3 - "$tmp/gemma.json" <<'EOF3'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["answer"].strip() and j["citations"], j
assert j["timings"]["prompt_tokens"] > 0, j["timings"]
EOF3
  then ok "gemma-3-270m answers with citations ($(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["mode_used"], j["timings"]["completion_tokens"], "tokens")' "$tmp/gemma.json"))"
  else bad "gemma-3-270m ask (exit $rc): $(head -c 300 "$tmp/gemma.json") $(head -c 300 "$tmp/err.txt")"; fi
else
  echo "skip gemma-3-270m ask: $gemma not fetched (make models-extra)"
fi
finish
