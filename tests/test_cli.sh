#!/usr/bin/env bash
# CLI-level tests of `mmrag index/ls/show/search/rm` on generated PDFs and bad inputs:
# mixed folders (good PDFs, not-a-pdf, truncated, encrypted, zero pages, a text file, a
# broken link, a missing path), re-index no-op, replace on change, JSON output, exit codes,
# parallel writers, a read-only collection. Needs $MMRAG_BUILD/mmrag and
# $MMRAG_BUILD/tests/tool_gencorpus. Prints "N passed, N failed" last.
set -u
B=${MMRAG_BUILD:-build}
B=$(cd "$B" 2>/dev/null && pwd || echo "$B")
M=$B/mmrag
G=$B/tests/tool_gencorpus
PY=python3
T=$(mktemp -d "${MMRAG_TMP:-/tmp}/cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib.sh"  # pass/fail counters, ok, bad, check
# both 'COND' 'COND': two shell conditions evaluated in this shell
both() { eval "$1" && eval "$2"; }
finish() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }

if [ ! -x "$M" ] || [ ! -x "$G" ]; then
  bad "prerequisites: $M and $G must be built"; finish
fi
# run CMD...: sets rc, out (stdout) and err (stderr) for the checks
run() { "$@" >"$T/out" 2>"$T/err"; rc=$?; out=$(cat "$T/out"); err=$(cat "$T/err"); }
json_ok() { $PY -c 'import json,sys; json.load(sys.stdin)' <"$T/out" 2>/dev/null; }
# jq-free JSON queries: jget 'EXPR over d' < file
jget() { $PY -c "import json,sys; d=json.load(sys.stdin); print($1)" <"$T/out" 2>/dev/null; }

"$G" samples "$T/samples" >/dev/null && "$G" bad "$T/bad" >/dev/null || { bad "gencorpus"; finish; }
DB=$T/db
mkdir -p "$T/mixed/sub"
cp "$T"/samples/*.pdf "$T/mixed/"
cp "$T"/bad/not-a-pdf.pdf "$T"/bad/truncated.pdf "$T"/bad/encrypted.pdf "$T"/bad/zero-pages.pdf "$T/mixed/"
first=$(ls "$T"/samples/*.pdf | head -n1)
n_samples=$(ls "$T"/samples/*.pdf | wc -l)
# a PDF without the .pdf extension is found by its %PDF magic; a fresh copy (new bytes)
{ cat "$first"; printf '\n%%%%EOF\n'; } >"$T/mixed/sub/report-no-extension"
echo "just some notes, not a PDF" >"$T/mixed/notes.txt"          # skipped in a folder
ln -s "$T/does-not-exist.pdf" "$T/mixed/gone.pdf"                # broken link: an error
echo "plain text" >"$T/explicit.txt"                             # named explicitly: an error
n_good=$((n_samples + 1))

# ---- index a mixed folder ----
run "$M" index "$T/mixed" "$T/explicit.txt" "$T/missing.pdf" --db "$DB" --jobs 2
check "index mixed: exit code 1 when some files fail" [ "$rc" -eq 1 ]
check "index mixed: every good PDF indexed" [ "$(grep -c '^indexed' <<<"$out")" -eq "$n_good" ]
for f in not-a-pdf.pdf truncated.pdf encrypted.pdf zero-pages.pdf gone.pdf explicit.txt missing.pdf; do
  check "index mixed: one error line naming $f" [ "$(grep -c -- "$f" <<<"$err")" -eq 1 ]
done
check "index mixed: exactly 7 error lines, each 'mmrag: '" \
  [ "$(wc -l <<<"$err")" -eq 7 -a "$(grep -c '^mmrag: ' <<<"$err")" -eq 7 ]
check "index mixed: notes.txt in a folder is skipped silently" [ "$(grep -c notes.txt <<<"$out$err")" -eq 0 ]
check "index mixed: encrypted reported as encrypted" grep -qi 'encrypt' <<<"$(grep encrypted.pdf <<<"$err")"
check "index mixed: summary line" grep -q "^$n_good indexed, 0 unchanged, 7 failed" <<<"$out"

run "$M" ls --db "$DB" --json
check "ls --json parses" json_ok
check "ls: $n_good documents" [ "$(jget 'len(d["documents"])')" = "$n_good" ]
run "$M" ls --db "$DB"
check "ls: table lists the sample titles" grep -q "Northwind" <<<"$out"

# ---- re-index: no-op ----
run "$M" index "$T/samples" --db "$DB" --json
check "re-index: exit 0" [ "$rc" -eq 0 ]
check "re-index --json parses" json_ok
check "re-index: all unchanged" [ "$(jget 'd["unchanged"]')" = "$n_samples" -a "$(jget 'd["indexed"]')" = "0" ]
run "$M" ls --db "$DB" --json
check "re-index: still $n_good documents" [ "$(jget 'len(d["documents"])')" = "$n_good" ]

# ---- show ----
nw=$(ls "$T"/mixed/*.pdf | grep -m1 northwind || echo "$T/mixed/$(basename "$first")")
run "$M" ls --db "$DB" --json
id=$(jget "[x['id'] for x in d['documents'] if x['path'].endswith('$(basename "$nw")')][0]")
sha=$(jget "[x['sha256'] for x in d['documents'] if x['id']==$id][0]")
run "$M" show "$id" --db "$DB" --json
check "show --json parses" json_ok
check "show: chunks with kind, page, 4-number box in 0..1, text" [ "$(jget 'all(c["kind"] and c["page"]>=1 and len(c["box"])==4 and all(0<=v<=1 for v in c["box"]) and c["text"] for c in d["chunks"]) and len(d["chunks"])>0')" = "True" ]
check "show: embedding keys are <doc>_<chunk>_<img|none>" [ "$(jget 'all(c["embedding_key"]=="%d_%d_%s"%(d["document"]["id"],c["id"],c["image_id"] if c["image_id"] else "none") for c in d["chunks"])')" = "True" ]
run "$M" show "${sha:0:10}" --db "$DB"
check "show by sha prefix" both '[ "$rc" -eq 0 ]' 'grep -q "^doc $id " <<<"$out"'
run "$M" show "$nw" --db "$DB" --page 1 --json
check "show by path with --page 1: only page 1" [ "$rc" -eq 0 -a "$(jget 'set(c["page"] for c in d["chunks"])=={1}')" = "True" ]
run "$M" show 999999 --db "$DB"
check "show unknown doc: exit 1, one line naming it" both '[ "$rc" -eq 1 -a "$(wc -l <<<"$err")" -eq 1 ]' 'grep -q 999999 <<<"$err"'
run "$M" show "$id" --page 999 --db "$DB"
check "show --page past the end: exit 1" [ "$rc" -eq 1 ]

# ---- search ----
run "$M" search "revenue" --db "$DB" --json
check "search --json parses" json_ok
check "search: hits carry doc, page, box, snippet" [ "$(jget 'len(d["hits"])>0 and all(len(h["box"])==4 and h["page"]>=1 and h["snippet"] for h in d["hits"])')" = "True" ]
run "$M" search "revenue" -k 1 --db "$DB" --json
check "search -k 1" [ "$(jget 'len(d["hits"])')" = "1" ]
run "$M" search "revenue" --doc "$id" --db "$DB" --json
check "search --doc filters" [ "$rc" -eq 0 -a "$(jget "all(h['doc_id']==$id for h in d['hits'])")" = "True" ]
for q in '"' 'NEAR(' 'AND OR NOT' '(((' '*' ''; do
  run "$M" search "$q" --db "$DB"
  check "search hostile query [$q]: exit 0" [ "$rc" -eq 0 ]
done
run "$M" search --db "$DB"
check "search without a query: usage error 2" [ "$rc" -eq 2 ]

# ---- replace a changed file at the same path ----
cp "$first" "$T/chg.pdf"; printf '\n%%%%EOF\n%%%%EOF\n' >>"$T/chg.pdf"
run "$M" index "$T/chg.pdf" --db "$DB"
check "changed file: indexed" grep -q '^indexed' <<<"$out"
old=$(sed -n 's/^indexed *doc \([0-9]*\).*/\1/p' <<<"$out")
printf '%%%%EOF\n' >>"$T/chg.pdf"
run "$M" index "$T/chg.pdf" --db "$DB"
check "changed again: replaced (was doc $old)" grep -q "^replaced .*(was doc $old)" <<<"$out"
run "$M" show "$old" --db "$DB"
check "replaced document is gone" [ "$rc" -eq 1 ]

# ---- rm ----
run "$M" ls --db "$DB" --json
before=$(jget 'len(d["documents"])')
run "$M" rm "$id" --db "$DB"
check "rm: exit 0" both '[ "$rc" -eq 0 ]' 'grep -q "removed doc $id" <<<"$out"'
run "$M" ls --db "$DB" --json
check "rm: one document fewer" [ "$(jget 'len(d["documents"])')" = "$((before - 1))" ]
run "$M" search "revenue" --doc "$id" --db "$DB"
check "rm: removed doc is unknown to search --doc" [ "$rc" -eq 1 ]
run "$M" search "Northwind" --db "$DB" --json
check "rm: no hits from the removed doc" [ "$(jget "all(h['doc_id']!=$id for h in d['hits'])")" = "True" ]
run "$M" rm 424242 --db "$DB"
check "rm unknown: exit 1" [ "$rc" -eq 1 ]

# ---- usage and help ----
for c in index ls show rm search; do
  run "$M" "$c" --help
  check "$c --help: exit 0 with usage" both '[ "$rc" -eq 0 ]' 'grep -q "usage: mmrag $c" <<<"$out"'
done
run "$M" index --precision fp16 --db "$DB" /nonexistent.pdf
check "index --precision fp16: usage error 2" [ "$rc" -eq 2 ]
run "$M" --help
check "mmrag --help lists commands" both '[ "$rc" -eq 0 ]' 'grep -q "index" <<<"$out"'
run "$M" frobnicate
check "unknown command: exit 2, one line" [ "$rc" -eq 2 -a "$(wc -l <<<"$err")" -eq 1 ]
run "$M" index --db "$DB"
check "index without PATH: exit 2" [ "$rc" -eq 2 ]
run "$M" search x -k zero --db "$DB"
check "bad -k: exit 2" [ "$rc" -eq 2 ]
run "$M" ls --db "$T/nowhere"
check "ls on a missing collection: exit 3, says so" both '[ "$rc" -eq 3 ]' 'grep -q "no database" <<<"$err"'
run "$M" index "$first" --db "$T/explicit.txt"
check "db path is a file: exit 3, one line" [ "$rc" -eq 3 -a "$(wc -l <<<"$err")" -eq 1 ]

# ---- two index processes writing one collection at once ----
P=$T/par; mkdir -p "$P/a" "$P/b"
for i in 1 2 3; do
  for s in "$T"/samples/*.pdf; do
    { cat "$s"; printf '\n%%%%EOF %s\n' "$i"; } >"$P/a/$i-$(basename "$s")"
    { cat "$s"; printf '\n%%%%EOF b%s\n' "$i"; } >"$P/b/$i-$(basename "$s")"
  done
done
"$M" index "$P/a" --db "$P/db" --jobs 2 >"$T/pa" 2>&1 & pa=$!
"$M" index "$P/b" --db "$P/db" --jobs 2 >"$T/pb" 2>&1 & pb=$!
wait $pa; ra=$?; wait $pb; rb=$?
run "$M" ls --db "$P/db" --json
check "two concurrent index processes: both exit 0, all documents in" \
  [ "$ra" -eq 0 -a "$rb" -eq 0 -a "$(jget 'len(d["documents"])')" = "$((6 * n_samples))" ] ||
  { echo "  exit codes $ra $rb"; cat "$T/pa" "$T/pb"; }

# ---- Ctrl-C while indexing: exit 130, committed documents whole, nothing half-written ----
I=$T/int; mkdir -p "$I/in"
for i in 1 2 3; do { cat "$T/bad/big-2000.pdf"; printf '\n%%%%EOF %s\n' "$i"; } >"$I/in/big$i.pdf"; done
"$M" index "$I/in" --db "$I/db" --jobs 1 >"$T/iout" 2>&1 & pi=$!
sleep 1; kill -INT $pi 2>/dev/null; wait $pi; ri=$?
run "$M" ls --db "$I/db" --json
check "interrupt: exit 130 (or 0 if it had finished)" [ "$ri" -eq 130 -o "$ri" -eq 0 ]
whole=1
for id in $(jget '" ".join(str(x["id"]) for x in d["documents"])'); do
  "$M" show "$id" --db "$I/db" --json >"$T/out" 2>/dev/null
  [ "$(jget 'len(d["pages"])==d["document"]["pages"]==2000 and len(d["chunks"])==d["document"]["chunks"]>0')" = "True" ] || whole=0
done
check "interrupt: every committed document is whole (2000 page rows)" [ "$whole" -eq 1 ]

# ---- Ctrl-C while embedding: exit 130, a note, the vectors so far kept, search still works
if [ -f "${MMRAG_MODELS:-models}/minilm/model.safetensors" ]; then
  E=$T/emb
  "$M" index "$I/in/big1.pdf" --db "$E" --no-embed >/dev/null 2>&1
  "$M" index "$I/in/big1.pdf" --db "$E" >"$T/eout" 2>&1 & pe=$!  # unchanged: straight to embedding
  sleep 3; kill -INT $pe 2>/dev/null; wait $pe; re=$?
  check "interrupted embedding: exit 130 and a note" \
    bash -c "[ $re -eq 130 ] && grep -q 'embedding interrupted after' '$T/eout'" || cat "$T/eout"
  run "$M" search "revenue" -k 3 --db "$E" --sources bm25 --json
  check "interrupted embedding: the collection still answers" [ "$rc" -eq 0 ]
fi

# ---- a read-only collection ----
RO=$T/ro
"$M" index "$first" --db "$RO" >/dev/null 2>&1
ro_cmds="'$M' index '$nw' --db '$RO' >'$T/ro1' 2>'$T/ro1e'; echo \$? >'$T/ro1rc';
         '$M' ls --db '$RO' --json >'$T/ro2' 2>'$T/ro2e'; echo \$? >'$T/ro2rc'"
ro_mode=""
if [ "$(id -u)" -ne 0 ]; then
  chmod -R a-w "$RO" && sh -c "$ro_cmds" && ro_mode=chmod
  chmod -R u+w "$RO"
elif command -v unshare >/dev/null && unshare -m sh -c "mount --bind -o ro '$RO' '$RO' && $ro_cmds" 2>/dev/null; then
  ro_mode="read-only bind mount"
fi
if [ -n "$ro_mode" ]; then
  check "read-only collection ($ro_mode): index fails with exit 3" [ "$(cat "$T/ro1rc")" -eq 3 ]
  check "read-only collection: one clear line" both '[ "$(wc -l <"$T/ro1e")" -eq 1 ]' 'grep -q "read-only" "$T/ro1e"'
  cp "$T/ro2" "$T/out"
  check "read-only collection: ls still works" [ "$(cat "$T/ro2rc")" -eq 0 -a "$(jget 'len(d["documents"])')" = "1" ]
  run "$M" ls --db "$RO" --json
  check "read-only collection: nothing written" [ "$(jget 'len(d["documents"])')" = "1" ]
else
  echo "skip read-only collection (root without mount namespaces)"
fi

finish
