#!/usr/bin/env bash
# Isolated ingest end to end: PDFs that crash, hang or exhaust the parser (the fault hook of
# $MMRAG_BUILD/tests/mmrag_faults, triggered by "fault-*" in a file name) and a real
# stalling PDF (300 pages sharing one 50,000-stroke content stream, tests/gen_hostile_pdf.py)
# cost their own document only: `mmrag index` indexes the good files of the folder, reports
# each bad one with its reason and exits 1, and nothing partial is stored; uploaded to a
# running `mmrag serve`, the same documents fail with their reason while the server keeps
# answering, and a small manual uploaded after the stalling PDF is indexed without waiting
# behind it. Also: a 14,400 pt square page is indexed (rendered at a lower resolution).
# Env: MMRAG_BUILD, MMRAG_TMP. Prints "N passed, N failed".
set -u
B=${MMRAG_BUILD:-build}
B=$(cd "$B" 2>/dev/null && pwd || echo "$B")
MF=$B/tests/mmrag_faults
GEN=$B/tests/tool_gencorpus
HOSTILE=$(cd "$(dirname "$0")" && pwd)/gen_hostile_pdf.py
T=$(mktemp -d "${MMRAG_TMP:-/tmp}/iso.XXXXXX")
. "$(dirname "$0")/lib.sh"  # pass/fail counters, ok, bad, check
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
finish() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

for f in "$MF" "$GEN"; do [ -x "$f" ] || { bad "missing $f"; finish; }; done
"$GEN" samples "$T/samples" >/dev/null 2>&1 || { bad "gencorpus"; finish; }
python3 "$HOSTILE" stall "$T/stall.pdf" && python3 "$HOSTILE" poster "$T/poster.pdf" || { bad "gen_hostile_pdf.py"; finish; }
GOOD=$(ls "$T"/samples/*.pdf | head -1)
SMALL=$(ls "$T"/samples/*.pdf | sed -n 2p)
# a bad file: the good one with a marker name and a byte more (its own sha256)
mkbad() { { cat "$GOOD"; printf '%% %s\n' "$2"; } >"$1"; }

# ---- mmrag index: a folder of good files and bad ones -----------------------------------
mkdir -p "$T/mixed"
cp "$T"/samples/*.pdf "$T/mixed/"
for k in crash hang oom; do mkbad "$T/mixed/fault-$k.pdf" "$k"; done
n_good=$(ls "$T"/samples/*.pdf | wc -l)
t0=$(now)
"$MF" index --db "$T/db" --no-embed --json --timeout 4 --mem-limit 600 "$T/mixed" >"$T/out.json" 2>"$T/err"
rc=$?
t1=$(now)
check "index: exit 1 = some files failed (rc $rc, $(secs "$t0" "$t1") s)" [ "$rc" = 1 ]
check "index: every good file indexed" [ "$(jq '[.documents[] | select(.status == "indexed")] | length' "$T/out.json")" = "$n_good" ]
reason() { jq -r --arg p "$T/mixed/fault-$1.pdf" '.documents[] | select(.path == $p) | "\(.status) \(.failure) \(.error)"' "$T/out.json"; }
check "index: crashing file failed as crashed ($(reason crash))" bash -c "[[ '$(reason crash)' == 'failed crashed '*'SEGV'* ]]"
check "index: hanging file failed as timeout ($(reason hang))" bash -c "[[ '$(reason hang)' == 'failed timeout '*'timed out after 4 s'* ]]"
check "index: memory-hungry file failed as memory ($(reason oom))" bash -c "[[ '$(reason oom)' == 'failed memory '*'600 MiB'* ]]"
check "index: reasons on stderr too" bash -c "grep -q 'fault-crash.pdf: parser crashed' '$T/err' && grep -q 'fault-hang.pdf: parsing timed out' '$T/err'"
"$MF" ls --db "$T/db" --json >"$T/ls.json"
check "ls: only the good documents, nothing partial" bash -c "[ \$(jq '.documents | length' '$T/ls.json') = $n_good ] && ! grep -q fault- '$T/ls.json'"
check "ls: every stored document is whole (chunks > 0)" bash -c "jq -e '[.documents[] | select(.chunks < 1)] | length == 0' '$T/ls.json' >/dev/null"
check "no ingest worker left running" bash -c "! pgrep -f '[i]ngest-worker.*$T' >/dev/null"
"$MF" index --db "$T/db" --no-embed --timeout 4 --cpu-limit 1 "$T/mixed/fault-hang.pdf" >/dev/null 2>"$T/err"
check "a sleeping child is killed by the wall clock, not the CPU limit" grep -q 'timed out' "$T/err"
mkbad "$T/fault-spin.pdf" spin
"$MF" index --db "$T/db" --no-embed --json --timeout 30 --cpu-limit 1 "$T/fault-spin.pdf" >"$T/out.json" 2>/dev/null
check "a spinning child is stopped by its CPU limit" [ "$(jq -r '.documents[0].failure' "$T/out.json")" = cpu ]

# ---- a real stall: one shared 50,000-stroke stream on 300 pages ---------------------------
# the CPU limit (default: the timeout) is raised so the wall clock is what stops it: a
# child that has a core to itself reaches 3 CPU seconds as soon as 3 wall seconds
t0=$(now)
"$MF" index --db "$T/db" --no-embed --json --timeout 3 --cpu-limit 30 "$T/stall.pdf" >"$T/out.json" 2>/dev/null
t1=$(now)
check "stalling PDF killed at its timeout ($(secs "$t0" "$t1") s for --timeout 3)" \
  bash -c "[ \"\$(jq -r '.documents[0].failure' '$T/out.json')\" = timeout ] && awk 'BEGIN { exit !($(secs "$t0" "$t1") < 8) }'"

# ---- a page too large to render at the usual resolution -----------------------------------
"$MF" index --db "$T/db" --no-embed --json "$T/poster.pdf" >"$T/out.json" 2>"$T/err"
check "14,400 pt page indexed at a lower render resolution" bash -c "[ \"\$(jq -r '.documents[0].status' '$T/out.json')\" = indexed ] && [ \"\$(jq -r '.documents[0].chunks' '$T/out.json')\" -ge 2 ]"

# ---- the server: the same files uploaded --------------------------------------------------
start_srv() {   # start_srv DB WORKERS TIMEOUT -> SPID, URL
  "$MF" serve --listen 127.0.0.1:0 --quiet --db "$1" --ingest-workers "$2" --ingest-timeout "$3" \
    --ingest-mem-limit 600 >"$T/srv.out" 2>"$T/srv.err" &
  SPID=$!; PIDS+=("$SPID")
  PORT=$(listen_port "$T/srv.out" "$SPID")
  [ -n "$PORT" ] || { bad "server did not start: $(cat "$T/srv.err")"; finish; }
  URL=http://127.0.0.1:$PORT
}
start_srv "$T/sdb" 2 8
upload() { curl -s -X POST "$URL/v1/documents?name=$2" -H 'Content-Type: application/pdf' --data-binary @"$1" | jq -r .job_id; }
job() { curl -s "$URL/v1/jobs/$1"; }
wait_job() {   # wait_job ID [SECONDS] -> JOB
  for _ in $(seq 1 $((${2:-30} * 10))); do
    JOB=$(job "$1")
    case $(jq -r .status <<<"$JOB") in done|failed|cancelled) return 0 ;; esac
    sleep 0.1
  done
  return 1
}
J1=$(upload "$T/mixed/fault-crash.pdf" fault-crash.pdf)
J2=$(upload "$T/mixed/fault-oom.pdf" fault-oom.pdf)
wait_job "$J1"; S1=$(jq -r '"\(.status) \(.failure) \(.error)"' <<<"$JOB")
check "upload: crashing PDF fails as crashed ($S1)" bash -c "[[ '$S1' == 'failed crashed fault-crash.pdf: parser crashed ('*'SEGV'* ]]"
wait_job "$J2"; S2=$(jq -r '"\(.status) \(.failure)"' <<<"$JOB")
check "upload: memory-hungry PDF fails as memory ($S2)" [ "$S2" = "failed memory" ]
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/healthz")
check "server alive after the crashes" [ "$code" = 200 ]

# the stall first, the small manual a second later: the manual must not wait for it
t0=$(now)
JS=$(upload "$T/stall.pdf" stall.pdf)
sleep 1
JM=$(upload "$SMALL" manual.pdf)
wait_job "$JM" 30; tm=$(now); SM=$(jq -r .status <<<"$JOB")
SS=$(jq -r .status <<<"$(job "$JS")")
check "small manual indexed while the stall still runs ($(secs "$t0" "$tm") s after the stall's upload; stall $SS)" \
  bash -c "[ '$SM' = done ] && [ '$SS' = running ]"
worst=0
while [ "$(jq -r .status <<<"$(job "$JS")")" = running ]; do
  a=$(now); code=$(curl -s -o /dev/null -w '%{http_code}' -m 5 "$URL/healthz"); b=$(now)
  [ "$code" = 200 ] || worst=99
  worst=$(awk -v w="$worst" -v d="$(secs "$a" "$b")" 'BEGIN { print (d > w ? d : w) }')
  curl -s -o /dev/null -X POST "$URL/v1/search" -d '{"query":"inverter","k":3}'
  sleep 0.3
  awk -v e="$(secs "$t0" "$(now)")" 'BEGIN { exit !(e > 40) }' && break
done
wait_job "$JS" 10; ts=$(now); SS=$(jq -r '"\(.status) \(.failure)"' <<<"$JOB")
check "stalling upload killed at --ingest-timeout 8 ($(secs "$t0" "$ts") s after upload: $SS)" [ "$SS" = "failed timeout" ]
check "server answered throughout the stall (slowest healthz ${worst} s)" awk -v w="$worst" 'BEGIN { exit !(w < 2) }'
curl -s "$URL/v1/documents" >"$T/docs.json"
check "server stored only the manual" bash -c "[ \$(jq '.documents | length' '$T/docs.json') = 1 ] && [ \"\$(jq -r '.documents[0].title' '$T/docs.json')\" != null ]"
kill -TERM "$SPID"; wait "$SPID" 2>/dev/null; RC=$?
check "server shuts down cleanly after all that (exit $RC)" [ "$RC" = 0 ]

# ---- durable uploads: acknowledged jobs survive a kill -9 and a restart ---------------------
# one ingest worker busy with a hanging PDF; a good one queued behind it; the server killed
start_srv "$T/ddb" 1 4
JH=$(upload "$T/mixed/fault-hang.pdf" fault-hang.pdf)
sleep 0.5
JG=$(upload "$GOOD" good.pdf)
SG=$(jq -r .status <<<"$(job "$JG")")
kill -9 "$SPID"; wait "$SPID" 2>/dev/null
start_srv "$T/ddb" 1 4
wait_job "$JG" 60; SG2=$(jq -r .status <<<"$JOB")
wait_job "$JH" 30; SH=$(jq -r '"\(.status) \(.failure)"' <<<"$JOB")
check "queued upload ($SG when killed) resumed after kill -9 under its id $JG: $SG2" [ "$SG2" = done ]
check "running upload resumed too, and failed for its own reason: $SH" [ "$SH" = "failed timeout" ]
n=$(curl -s "$URL/v1/documents" | jq '.documents | length')
left=$(find "$T/ddb/files" -name '*.queued' | wc -l)
check "one document, no job markers left ($n, $left)" [ "$n-$left" = 1-0 ]
# a graceful stop keeps queued jobs for the next start as well
JH=$(upload "$T/mixed/fault-hang.pdf" fault-hang-2.pdf)
sleep 0.5
JG=$(upload "$SMALL" small.pdf)
kill -TERM "$SPID"; wait "$SPID" 2>/dev/null
start_srv "$T/ddb" 1 4
wait_job "$JG" 60; SG=$(jq -r .status <<<"$JOB")
check "upload queued at a graceful stop indexed after the restart: $SG" [ "$SG" = done ]
kill -TERM "$SPID"; wait "$SPID" 2>/dev/null
finish
