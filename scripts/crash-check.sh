# Shared by scripts/crash-trials.sh (mmrag index) and scripts/crash-trials-server.sh
# (mmrag serve): the consistency checks after a kill -9. Needs $DB.
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

