#!/usr/bin/env bash
# Crash consistency of `mmrag serve` during uploads and deletes: N times, start the server
# on one collection, upload PDFs and delete documents from concurrent clients, kill -9 the
# server at a random moment, and check (scripts/crash-check.sh) that the database is whole,
# every document all-or-nothing, no ingest worker outlived it. Then restart it and check the
# durable upload queue: every upload it acknowledged (202) and nobody deleted since is
# indexed once the restarted server has drained its queue, and no job marker is left.
# Usage: scripts/crash-trials-server.sh BUILD [TRIALS=30] [MODELS]
# (`make crash-trials-server TRIALS=N`; not part of `make test`). Prints "N passed, N failed".
set -u
B=$(cd "${1:-build}" && pwd); N=${2:-30}; MODELS=${3:-${MMRAG_MODELS:-models}}
M=$B/mmrag
T=$(mktemp -d "${TMPDIR:-/tmp}/mmrag-crash-srv.XXXXXX")
SPID=""
trap '[ -n "$SPID" ] && kill -9 "$SPID" 2>/dev/null; rm -rf "$T"' EXIT
. "$(dirname "$0")/../tests/lib.sh"
export OMP_THREAD_LIMIT=1 MMRAG_MODELS=$MODELS
DB=$T/db; DOCS=$T/docs
. "$(dirname "$0")/crash-check.sh"   # crash_docs, sql, check_db
crash_docs 2
ACK=$T/acked   # sha256 of every acknowledged upload not deleted since
: >"$ACK"

start() {
  "$M" serve --listen 127.0.0.1:0 --quiet --db "$DB" --ingest-workers 2 >"$T/srv.out" 2>"$T/srv.err" &
  SPID=$!
  PORT=$(listen_port "$T/srv.out" "$SPID")
  URL=http://127.0.0.1:$PORT
  [ -n "$PORT" ]
}
upload() {   # a new variant of a random file, so every upload is a new document
  local f=$T/up-$RANDOM-$1.pdf
  cp "$(ls "$DOCS"/*.pdf | shuf -n1)" "$f"; printf '%% upload %s\n' "$1" >>"$f"
  local r; r=$(curl -s -m 20 -X POST "$URL/v1/documents?name=u$1.pdf" -H 'Content-Type: application/pdf' \
               --data-binary @"$f")
  [ "$(jq -r '.job_id // empty' <<<"$r" 2>/dev/null)" != "" ] && jq -r .sha256 <<<"$r" >>"$ACK"
}
delete_one() {
  local d; d=$(curl -s -m 5 "$URL/v1/documents" | jq -c '.documents[]?' 2>/dev/null | shuf -n1)
  [ -n "$d" ] || return 0
  local id sha; id=$(jq -r .id <<<"$d"); sha=$(jq -r .sha256 <<<"$d")
  # forget it first: a delete the server applied but could not answer is still a delete
  grep -v "^$sha" "$ACK" >"$ACK.t"; mv "$ACK.t" "$ACK"
  curl -s -m 5 -X DELETE "$URL/v1/documents/$id" >/dev/null
}
drained() {   # every acknowledged upload is a document
  local have; have=$(curl -s -m 5 "$URL/v1/documents" | jq -r '.documents[]?.sha256' 2>/dev/null | sort -u)
  while read -r sha; do
    [ -z "$sha" ] && continue
    grep -q "^$sha" <<<"$have" || return 1
  done <"$ACK"
}

bad_trials=0; killed_busy=0
for i in $(seq 1 "$N"); do
  start || { bad "trial $i: server did not start: $(head -c 200 "$T/srv.err")"; bad_trials=$((bad_trials + 1)); continue; }
  # clients: a burst of uploads and a delete or two, racing the kill
  for k in 1 2 3; do upload "$i-$k" & done
  [ $((RANDOM % 2)) = 0 ] && delete_one &
  sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.3f", 0.2 + (r % 2500) / 1000 }')"
  kill -9 "$SPID"; wait "$SPID" 2>/dev/null; SPID=""
  busy=$(find "$DB" -name '*.queued' 2>/dev/null | wc -l)   # acknowledged, not finished
  wait 2>/dev/null
  [ "${busy:-0}" != 0 ] && killed_busy=$((killed_busy + 1))
  ok_trial=1
  check_db "$i" || ok_trial=0
  sleep 0.1
  if pgrep -f "[i]ngest-worker.*$T" >/dev/null; then echo "  trial $i: an ingest worker outlived the server"; ok_trial=0; fi
  # restart: the queue resumes; wait for it to drain (at most 90 s)
  if start; then
    for _ in $(seq 1 180); do drained && break; sleep 0.5; done
    drained || { echo "  trial $i: acknowledged uploads missing after restart: $(wc -l <"$ACK") acknowledged"; ok_trial=0; }
    kill -TERM "$SPID"; wait "$SPID" 2>/dev/null; SPID=""
    check_db "$i-restarted" || ok_trial=0
  else
    echo "  trial $i: restart failed: $(head -c 200 "$T/srv.err")"; ok_trial=0
  fi
  [ "$ok_trial" = 1 ] || bad_trials=$((bad_trials + 1))
done
n_ack=$(sort -u "$ACK" | wc -l)
check "$N trials ($killed_busy killed with ingest queued or running): database whole, documents all-or-nothing, no stray workers, every acknowledged upload indexed after restart ($n_ack kept, $bad_trials bad trials)" [ "$bad_trials" = 0 ]
markers=$(find "$DB" -name '*.queued' 2>/dev/null | wc -l)
check "no job marker left ($markers)" [ "$markers" = 0 ]
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
