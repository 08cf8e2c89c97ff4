# Shared by scripts/crash-trials.sh (mmrag index) and scripts/crash-trials-server.sh
# (mmrag serve): the documents to index and the consistency checks after a kill -9.
# Needs $B, $T, $DB, $DOCS and tests/lib.sh.

# crash_docs BUNDLES: the generated corpus and samples in $DOCS, plus BUNDLES longer
# documents (each its own sha256): they widen the window a kill lands inside.
crash_docs() {
  mkdir -p "$DOCS"
  "$B/tests/tool_gencorpus" samples "$T/s" >/dev/null && "$B/tests/tool_gencorpus" corpus "$T/c" >/dev/null \
    || { bad "tool_gencorpus"; echo "$pass passed, $fail failed"; exit 1; }
  cp "$T"/s/*.pdf "$T/c/corpus.pdf" "$DOCS/"
  for i in $(seq 1 "$1"); do
    pdfunite "$T/c/corpus.pdf" "$T"/s/*.pdf "$T/c/corpus.pdf" "$DOCS/bundle-$i.pdf" 2>/dev/null
    printf '%% bundle %d\n' "$i" >>"$DOCS/bundle-$i.pdf"
  done
}
sql() { sqlite3 -readonly "$DB/mmrag.db" "$1" 2>&1; }
check_db() {   # check_db TRIAL -> 0 when consistent
  local ic orphans partial
  [ -f "$DB/mmrag.db" ] || return 0
  ic=$(sql "PRAGMA integrity_check")
  [ "$ic" = ok ] || { echo "  trial $1: integrity_check: $ic"; return 1; }
  orphans=$(sql "SELECT (SELECT count(*) FROM pages WHERE doc NOT IN (SELECT id FROM documents))
                      + (SELECT count(*) FROM chunks WHERE doc NOT IN (SELECT id FROM documents))
                      + (SELECT count(*) FROM images WHERE doc NOT IN (SELECT id FROM documents))
                      + (SELECT count(*) FROM vectors WHERE doc NOT IN (SELECT id FROM documents))
                      + (SELECT count(*) FROM sentence_vectors WHERE chunk_id NOT IN (SELECT id FROM chunks))")
  [ "$orphans" = 0 ] || { echo "  trial $1: $orphans orphaned rows"; return 1; }
  partial=$(sql "SELECT count(*) FROM documents d WHERE d.pages != (SELECT count(*) FROM pages p WHERE p.doc = d.id)
                 OR NOT EXISTS (SELECT 1 FROM chunks c WHERE c.doc = d.id)")
  [ "$partial" = 0 ] || { echo "  trial $1: $partial partial documents"; return 1; }
}

