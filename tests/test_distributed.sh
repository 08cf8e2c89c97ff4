#!/usr/bin/env bash
# The shared store end to end on a real PostgreSQL (the server scripts/run-tests.sh started:
# MMRAG_TEST_PG): the queue with workers on several processes, a worker killed (kill -9)
# in the middle of a document (nothing partial; another worker completes its job after
# the lease), two servers as stateless peers (an upload through one is searchable through
# the other, job status and deletes seen by both), the same file uploaded to both servers
# at once (one document), searches on a streaming-replication standby (pg_basebackup -R;
# mmrag serve --db-read),
# and a database that is down (a clear error naming the host, exit 3).
# Env: MMRAG_BUILD, MMRAG_MODELS, MMRAG_TMP, MMRAG_TEST_PG(_DIR). Prints "N passed, N failed".
set -u
B=${MMRAG_BUILD:-build}
MMRAG=$B/mmrag
MF=$B/tests/mmrag_faults
GEN=$B/tests/tool_gencorpus
. "$(dirname "$0")/lib.sh"
if [ -z "${MMRAG_TEST_PG:-}" ]; then
  echo "skip distributed ingest: no PostgreSQL test server (scripts/pg-test.sh could not start one)"
  echo "0 passed, 0 failed"; exit 0
fi
T=$(mktemp -d "${MMRAG_TMP:-/tmp}/dist.XXXXXX")
# the standby's folder: beside the primary's, where the server's user may enter
RD=$(dirname "${MMRAG_TEST_PG_DIR:-/nonexistent/x}")/replica-$$
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 -- "-$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
  [ -d "$RD" ] && "$(dirname "$0")/../scripts/pg-test.sh" stop "$RD" >/dev/null 2>&1
  [ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
coll=dist_$$
U="$MMRAG_TEST_PG?collection=$coll"
sql() { psql -qtA "$MMRAG_TEST_PG" -c "SET search_path TO mmrag_$coll; $1" 2>/dev/null | tail -n1; }
# wait_for SECONDS SQL EXPECTED
wait_for() {
  local i
  for i in $(seq 1 $(( $1 * 5 ))); do [ "$(sql "$2")" = "$3" ] && return 0; sleep 0.2; done
  echo "  waited $1 s for [$2] = $3, got [$(sql "$2")]"; return 1
}

"$GEN" samples "$T/pdf" >/dev/null
cp "$T/pdf/northwind-q3-report.pdf" "$T/pdf/fault-hang-report.pdf"
# the copy must differ from the original, or it would be "the same file"
printf '%% another copy\n' >>"$T/pdf/fault-hang-report.pdf"
out=$("$MMRAG" index --db "$U" --no-wait "$T/pdf" 2>&1)
check "index --no-wait queues 4 jobs" test "$(sql "SELECT count(*) FROM jobs WHERE state='queued'")" = 4 \
  || echo "$out"

# worker A takes the first job (the fault-hang file: its parse never ends) and dies
setsid "$MF" worker --db "$U" --lease 4 --no-embed >"$T/a.out" 2>&1 &
A=$!; PIDS+=("$A")
check "worker A holds the hanging document" wait_for 20 \
  "SELECT count(*) FROM jobs WHERE state='running' AND name LIKE '%fault-hang%' AND worker LIKE '%:$A:%'" 1
sleep 1
kill -9 -- "-$A" 2>/dev/null; kill -9 "$A" 2>/dev/null
check "killed mid-document: nothing of it in the store" test \
  "$(sql "SELECT count(*) FROM documents WHERE path LIKE '%fault-hang%'")" = 0

# two servers (each with its own workers) and worker B finish everything
start() {   # NAME ARGS...: sets PORT
  local name=$1; shift
  setsid "$MMRAG" serve --db "$U" --listen 127.0.0.1:0 --quiet "$@" >"$T/$name.out" 2>"$T/$name.err" &
  local p=$!; PIDS+=("$p")
  PORT=$(listen_port "$T/$name.out" "$p")
}
start s1; P1=$PORT
start s2; P2=$PORT
check "two servers on one collection" test -n "$P1" -a -n "$P2"
setsid "$MMRAG" worker --db "$U" --lease 4 >"$T/b.out" 2>&1 &
WB=$!; PIDS+=("$WB")
check "all jobs done, the dead worker's one taken over after its lease" wait_for 90 \
  "SELECT count(*) FROM jobs WHERE state='done'" 4
check "the taken-over job ran twice, by someone else" test \
  "$(sql "SELECT attempts::text || (worker NOT LIKE '%:$A:%')::text FROM jobs WHERE name LIKE '%fault-hang%'")" = 2true
check "4 documents, each whole" test "$(sql "SELECT count(*) FROM documents d WHERE EXISTS (SELECT 1 FROM fts_stats s WHERE s.doc = d.id AND s.chunks > 0) AND (SELECT count(*) FROM pages p WHERE p.doc = d.id) = d.pages")" = 4

# an upload through server 1 is searchable through server 2
"$GEN" corpus "$T/more" >/dev/null
up=$T/more/corpus.pdf
job=$(curl -s -F "file=@$up" "http://127.0.0.1:$P1/v1/documents" | sed -n 's/.*"job_id":"\(pg-[0-9]*\)".*/\1/p')
st=""
for _ in $(seq 1 150); do
  st=$(curl -s "http://127.0.0.1:$P2/v1/jobs/$job" | sed -n 's/.*"status":"\([a-z]*\)".*/\1/p')
  [ "$st" = done ] && break; sleep 0.2
done
check "upload on server 1, its job seen done on server 2 ($job)" test "$st" = done
# a word of the new PDF that none of the first four has
words() { pdftotext "$1" - 2>/dev/null | tr -cs 'A-Za-z' '\n' | awk 'length > 7' | tr 'A-Z' 'a-z' | sort -u; }
for f in "$T/pdf"/*.pdf; do words "$f"; done | sort -u >"$T/old-words"
word=$(words "$up" | comm -23 - "$T/old-words" | head -n1)
hits=$(curl -s -X POST -H 'Content-Type: application/json' -d "{\"query\":\"$word\",\"k\":3}" \
  "http://127.0.0.1:$P2/v1/search")
doc=$(sql "SELECT id FROM documents WHERE path = '$(basename "$up")'")
check "searchable through server 2 ('$word' in document $doc)" grep -q "\"document_id\":$doc," <<<"$hits" \
  || echo "$hits" | head -c 600
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P2/v1/documents/$doc/pages/1.png")
check "server 2 renders the page of a PDF uploaded to server 1" test "$code" = 200

# the same new file uploaded to both servers at once: one job, one document
up2=$T/more/again.pdf
cp "$up" "$up2"; printf '%% a new file\n' >>"$up2"
curl -s -F "file=@$up2" "http://127.0.0.1:$P1/v1/documents" >"$T/u1" & c1=$!
curl -s -F "file=@$up2" "http://127.0.0.1:$P2/v1/documents" >"$T/u2" & c2=$!
wait "$c1" "$c2"
j1=$(sed -n 's/.*"job_id":"\(pg-[0-9]*\)".*/\1/p' "$T/u1"); j2=$(sed -n 's/.*"job_id":"\(pg-[0-9]*\)".*/\1/p' "$T/u2")
check "same file to both servers: accepted by both ($j1, $j2)" test -n "$j1" -a -n "$j2" \
  || cat "$T/u1" "$T/u2"
sha=$(sha256sum "$up2" | cut -c1-64)
check "same file to both servers: one document" wait_for 60 \
  "SELECT count(*) FROM documents WHERE sha256 = '$sha'" 1
sleep 1
check "same file to both servers: still one document" test "$(sql "SELECT count(*) FROM documents WHERE sha256 = '$sha'")" = 1
doc2=$(sql "SELECT id FROM documents WHERE sha256 = '$sha'")

# a delete through server 2 is gone on server 1
code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "http://127.0.0.1:$P2/v1/documents/$doc")
n1=$(curl -s "http://127.0.0.1:$P1/v1/documents" | grep -o '"id":' | wc -l)
check "delete on server 2 ($code) seen by server 1 ($n1 documents)" test "$code" = 200 -a "$n1" = 5

# a streaming-replication standby serves searches
if [ -n "${MMRAG_TEST_PG_DIR:-}" ] && rurl=$("$(dirname "$0")/../scripts/pg-test.sh" replica "$MMRAG_TEST_PG_DIR" "$RD" 2>"$T/replica.err"); then
  R="$rurl?collection=$coll"
  ok_r=""
  for _ in $(seq 1 50); do
    out=$("$MMRAG" search "$word" -k 3 --db "$R" 2>&1) && grep -q "(doc $doc2)" <<<"$out" && { ok_r=1; break; }
    sleep 0.2
  done
  check "the standby answers searches" test -n "$ok_r" || echo "$out"
  out=$("$MMRAG" rm 1 --db "$R" 2>&1); rc=$?
  check "the standby refuses writes with a clear error (exit $rc)" test "$rc" = 3 || echo "$out"
  # a server with --db-read: its searches run on the standby, its listing on the primary
  start s3 --db-read "$rurl"; P3=$PORT
  hits=$(curl -s -X POST -H 'Content-Type: application/json' -d "{\"query\":\"$word\",\"k\":3}" \
    "http://127.0.0.1:$P3/v1/search")
  check "--db-read: the server's search finds document $doc2" grep -q "\"document_id\":$doc2," <<<"$hits" \
    || echo "$hits" | head -c 600
  n3=$(psql -qtA "$rurl" -c "SELECT count(*) FROM pg_stat_activity WHERE datname = 'mmrag' AND pid <> pg_backend_pid()")
  check "--db-read: the server holds connections on the standby ($n3)" test "${n3:-0}" -ge 1
  n1=$(curl -s "http://127.0.0.1:$P3/v1/documents" | grep -o '"id":' | wc -l)
  check "--db-read: documents are listed from the primary ($n1)" test "$n1" = 5
else
  bad "a standby could not be started: $(tail -n3 "$T/replica.err" 2>/dev/null)"
fi

out=$("$MMRAG" serve --db "$T/local" --db-read "$MMRAG_TEST_PG" --listen 127.0.0.1:0 2>&1); rc=$?
check "--db-read with a local --db is refused (exit $rc: $out)" test "$rc" != 0 -a -n "$(grep -o 'postgres:// URLs' <<<"$out")"

# a database that is down: the CLI says so and exits 3; a running server answers an error
# naming the database, stays up, and serves again once the database is back
if [ -n "${MMRAG_TEST_PG_DIR:-}" ] && "$(dirname "$0")/../scripts/pg-test.sh" down "$MMRAG_TEST_PG_DIR"; then
  body="{\"query\":\"$word\",\"k\":3}"
  out=$(curl -s -w ' %{http_code}' -X POST -d "$body" "http://127.0.0.1:$P1/v1/search")
  host=$(sed 's|.*@\([^/]*\)/.*|\1|' <<<"$MMRAG_TEST_PG")
  check "database down: the server's search is a JSON error naming it (${out: -3})" \
    test "${out: -3}" = 500 -a -n "$(grep -o "$host" <<<"$out")" || echo "$out"
  check "database down: the server stays up (healthz)" test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P1/healthz")" = 200
  sleep 1.5   # a poll of the idle worker falls in it
  "$(dirname "$0")/../scripts/pg-test.sh" up "$MMRAG_TEST_PG_DIR"
  out=$(curl -s -w ' %{http_code}' -X POST -d "$body" "http://127.0.0.1:$P1/v1/search")
  check "database back: the same server answers again" test "${out: -3}" = 200
  check "database back: the worker rode it out (still running, said why)" \
    test -d "/proc/$WB" -a -n "$(grep -o 'database down or unreachable' "$T/b.out" | head -n1)"
fi
out=$("$MMRAG" ls --db "postgres://mmrag@127.0.0.1:1/mmrag" 2>&1); rc=$?
check "database down: exit 3 naming the host (${out:0:90}...)" test "$rc" = 3 -a -n "$(grep -o '127.0.0.1:1' <<<"$out")"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
