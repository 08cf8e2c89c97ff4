#!/usr/bin/env bash
# REST server end to end: starts `mmrag serve` on 127.0.0.1 port 0 with a temp database and
# drives it with curl. Covers uploads + jobs + list/get/delete + search + page PNG + ask
# (when the model is present), every bad-input class (malformed JSON, wrong types, huge and
# chunked bodies, bad multipart, slow bodies, path traversal, unknown routes), locate (VPE:
# found / not found / bad input), the concurrency limit (503 + Retry-After), API-key
# isolation, loopback-only without keys, kill -9 during an ingest (restart: no partial
# document), and SIGTERM.
# Env: MMRAG_BUILD (build dir), MMRAG_MODELS, MMRAG_TMP. Prints "N passed, N failed".
set -u
B=${MMRAG_BUILD:-build}
MMRAG=$B/mmrag
GEN=$B/tests/tool_gencorpus
T=$(mktemp -d "${MMRAG_TMP:-/tmp}/srv.XXXXXX")
. "$(dirname "$0")/lib.sh"  # pass/fail counters, ok, bad, check
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT


for f in "$MMRAG" "$GEN"; do
  [ -x "$f" ] || { echo "FAIL missing $f"; echo "0 passed, 1 failed"; exit 1; }
done

# start_server NAME ARGS... : sets PORT and SPID, waits for "listening on"
start_server() {
  local name=$1; shift
  "$MMRAG" serve --listen 127.0.0.1:0 ${QUIET---quiet} "$@" >"$T/$name.out" 2>"$T/$name.err" &
  SPID=$!
  PIDS+=("$SPID")
  PORT=$(listen_port "$T/$name.out" "$SPID")
  [ -n "$PORT" ] || { echo "server $name did not start:"; cat "$T/$name.err"; return 1; }
  URL=http://127.0.0.1:$PORT
}

# req METHOD PATH [curl args...] : sets CODE and BODY (file $T/body)
req() {
  local m=$1 p=$2; shift 2
  CODE=$(curl -s -o "$T/body" -w '%{http_code}' -X "$m" "$URL$p" "$@")
  BODY=$(cat "$T/body")
}
# a 4xx whose body is our JSON error
is_json_4xx() { [ "$CODE" -ge 400 ] && [ "$CODE" -lt 500 ] && jq -e '.error.code and .error.message' "$T/body" >/dev/null 2>&1; }
expect_4xx() { local name=$1; shift; req "$@"; if is_json_4xx; then ok "$name ($CODE)"; else bad "$name: got $CODE $BODY"; fi; }

wait_job() {   # wait_job JOB_ID [KEY] -> JOB (json)
  local auth=()
  [ -n "${2:-}" ] && auth=(-H "Authorization: Bearer $2")
  for _ in $(seq 1 600); do
    JOB=$(curl -s "${auth[@]}" "$URL/v1/jobs/$1")
    case $(jq -r .status <<<"$JOB") in done|failed|cancelled) return 0 ;; esac
    sleep 0.1
  done
  return 1
}

"$GEN" samples "$T/samples" >/dev/null 2>&1
PDF1=$(ls "$T"/samples/*.pdf | head -1)
PDF2=$(ls "$T"/samples/*.pdf | sed -n 2p)
[ -n "$PDF1" ] && [ -n "$PDF2" ] || { echo "FAIL no sample PDFs"; echo "0 passed, 1 failed"; exit 1; }

# ---- main server ---------------------------------------------------------------------
start_server main --db "$T/db" --max-upload 2000000 --max-body 65536 --timeout 2 || { echo "0 passed, 1 failed"; exit 1; }

req GET /healthz; check "healthz" [ "$CODE" = 200 ]
req GET /; check "web page served" bash -c "[ $CODE = 200 ] && grep -q '<title>mmrag</title>' '$T/body'"
req GET /openapi.json
check "openapi.json is an OpenAPI 3 document" bash -c "[ $CODE = 200 ] && jq -e '.openapi | startswith(\"3.\")' '$T/body' >/dev/null && jq -e '.paths[\"/v1/search\"].post' '$T/body' >/dev/null"

# upload (raw body), poll the job
req POST "/v1/documents?name=$(basename "$PDF1")" -H 'Content-Type: application/pdf' --data-binary @"$PDF1"
JID=$(jq -r .job_id "$T/body")
check "raw upload -> 202 + job id" bash -c "[ $CODE = 202 ] && [ -n '$JID' ] && [ '$JID' != null ]"
wait_job "$JID"; DOC1=$(jq -r .document_id <<<"$JOB")
check "job finishes with a document id" bash -c "[ '$(jq -r .status <<<"$JOB")' = done ] && [ '$DOC1' -ge 1 ]"
check "job reports page progress" bash -c "[ '$(jq -r .pages_done <<<"$JOB")' = '$(jq -r .pages_total <<<"$JOB")' ] && [ '$(jq -r .pages_total <<<"$JOB")' -ge 1 ]"

# multipart upload
req POST /v1/documents -F "file=@$PDF2;type=application/pdf"
JID2=$(jq -r .job_id "$T/body")
check "multipart upload -> 202" [ "$CODE" = 202 ]
wait_job "$JID2"; DOC2=$(jq -r .document_id <<<"$JOB")
check "multipart job done" bash -c "[ '$(jq -r .status <<<"$JOB")' = done ] && [ '$DOC2' != '$DOC1' ]"
# same bytes again: no new document
req POST /v1/documents -H 'Content-Type: application/pdf' --data-binary @"$PDF1"
wait_job "$(jq -r .job_id "$T/body")"
check "re-upload of same bytes is a no-op" bash -c "[ '$(jq -r .already_indexed <<<"$JOB")' = true ] && [ '$(jq -r .document_id <<<"$JOB")' = '$DOC1' ]"

req GET /v1/documents
check "list shows 2 documents" bash -c "[ $CODE = 200 ] && [ \$(jq '.documents | length' '$T/body') = 2 ]"
req GET "/v1/documents/$DOC1?chunks=true"
check "get document with pages and chunks" bash -c "[ $CODE = 200 ] && [ \$(jq '.page_list | length' '$T/body') -ge 1 ] && [ \$(jq '.chunk_list | length' '$T/body') -ge 1 ]"
WORD=$(jq -r '.chunk_list[0].text' "$T/body" | tr -cs 'A-Za-z' '\n' | awk 'length > 4' | head -1)

req POST /v1/search -H 'Content-Type: application/json' -d "{\"query\":\"$WORD\",\"k\":3}"
check "search finds the document's own word ($WORD)" bash -c "[ $CODE = 200 ] && jq -e '[.hits[] | select(.document_id == $DOC1)] | length > 0' '$T/body' >/dev/null"
check "search hits carry page, box and text" bash -c "jq -e '.hits[0] | (.page >= 1) and (.box | length == 4) and (.text | length > 0)' '$T/body' >/dev/null"
req POST /v1/search -d "{\"query\":\"$WORD\",\"documents\":[$DOC2]}"
check "search document filter" bash -c "[ $CODE = 200 ] && jq -e '[.hits[] | select(.document_id != $DOC2)] | length == 0' '$T/body' >/dev/null"

curl -s -o "$T/p.png" -w '%{http_code} %{content_type}' "$URL/v1/documents/$DOC1/pages/1.png?box=0.1,0.1,0.5,0.4&width=400" >"$T/pcode"
check "page PNG with box" bash -c "grep -q '^200 image/png' '$T/pcode' && head -c 8 '$T/p.png' | od -An -c | grep -q 'P   N   G'"
expect_4xx "page beyond the document" GET "/v1/documents/$DOC1/pages/999.png"
expect_4xx "bad box" GET "/v1/documents/$DOC1/pages/1.png?box=0.5,0.5,0.1,0.1"
expect_4xx "box with junk" GET "/v1/documents/$DOC1/pages/1.png?box=a,b,c,d"

# ---- bad input: always a 4xx JSON error, never 5xx -----------------------------------
expect_4xx "malformed JSON" POST /v1/search -d '{"query": "x",'
expect_4xx "JSON array body" POST /v1/search -d '[1,2]'
expect_4xx "empty body" POST /v1/search
expect_4xx "query of wrong type" POST /v1/search -d '{"query": 5}'
expect_4xx "k of wrong type" POST /v1/search -d '{"query": "x", "k": "5"}'
expect_4xx "k out of range" POST /v1/search -d '{"query": "x", "k": 0}'
expect_4xx "documents of wrong type" POST /v1/search -d '{"query": "x", "documents": "1"}'
expect_4xx "unknown kind" POST /v1/search -d '{"query": "x", "kind": "poem"}'
expect_4xx "duplicate keys" POST /v1/search -d '{"query": "x", "query": "y"}'
expect_4xx "invalid UTF-8" POST /v1/search --data-binary $'{"query": "\xff\xfe"}'
expect_4xx "ask without question" POST /v1/ask -d '{"stream": true}'
expect_4xx "ask stream of wrong type" POST /v1/ask -d '{"question": "x", "stream": "yes"}'
expect_4xx "ask bad response_format" POST /v1/ask -d '{"question": "x", "response_format": {"type": "xml"}}'
expect_4xx "chat messages not an array" POST /v1/chat/completions -d '{"messages": "hi"}'
expect_4xx "chat message without content" POST /v1/chat/completions -d '{"messages": [{"role": "user"}]}'
expect_4xx "chat bad role" POST /v1/chat/completions -d '{"messages": [{"role": "wizard", "content": "x"}]}'
expect_4xx "unknown route" GET /v2/nothing
expect_4xx "unknown v1 route" GET /v1/secrets
expect_4xx "wrong method" PUT /v1/search -d '{}'
expect_4xx "path traversal id (..)" GET /v1/documents/..
expect_4xx "path traversal id (%2e%2e%2f)" GET "/v1/documents/%2e%2e%2f%2e%2e%2fetc%2fpasswd"
expect_4xx "path traversal in pages" GET "/v1/documents/$DOC1/pages/..%2f..%2f1.png"
expect_4xx "non-numeric id" GET /v1/documents/1abc
expect_4xx "negative id" DELETE /v1/documents/-1
expect_4xx "huge id" GET /v1/documents/99999999999999999999
expect_4xx "unknown job" GET /v1/jobs/..%2f..%2fjob-1
expect_4xx "double slash" GET //v1/documents
expect_4xx "upload: not a PDF" POST /v1/documents -H 'Content-Type: application/pdf' --data-binary 'hello world'
expect_4xx "upload: empty" POST /v1/documents -H 'Content-Type: application/pdf' --data-binary ''
expect_4xx "upload: wrong content type" POST /v1/documents -H 'Content-Type: text/plain' --data-binary @"$PDF1"
expect_4xx "bad multipart (garbage)" POST /v1/documents -H 'Content-Type: multipart/form-data; boundary=XyZ' --data-binary $'--XyZ\r\nnonsense without headers'
expect_4xx "bad multipart (no boundary)" POST /v1/documents -H 'Content-Type: multipart/form-data' --data-binary 'abc'
expect_4xx "multipart without a file part" POST /v1/documents -F 'note=hello'

# huge bodies: refused from Content-Length before the body is read
head -c 5000000 /dev/zero >"$T/big.bin"
UP=$(curl -s -o "$T/body" -w '%{http_code} %{size_upload}' -H 'Content-Type: application/pdf' --data-binary @"$T/big.bin" "$URL/v1/documents")
check "huge upload -> 413 before the body is read (sent ${UP#* } of 5000000 bytes)" bash -c "[ '${UP% *}' = 413 ] && [ ${UP#* } -lt 5000000 ] && jq -e .error.code '$T/body' >/dev/null"
head -c 200000 /dev/zero | tr '\0' 'a' >"$T/bigjson"
expect_4xx "huge JSON body -> 413" POST /v1/search -H 'Content-Type: application/json' --data-binary @"$T/bigjson"
# chunked (no Content-Length): counted as it streams; past the cap the server answers 413
# if it still can, otherwise it closes the connection (curl then fails: exit != 0)
CODE=$(curl -s -o "$T/body" -w '%{http_code}' -H 'Transfer-Encoding: chunked' -H 'Content-Type: application/pdf' --data-binary @"$T/big.bin" "$URL/v1/documents"); CRC=$?
check "chunked oversize upload refused (code $CODE, curl exit $CRC)" bash -c "[ '$CODE' = 413 ] || [ $CRC -ne 0 ]"
req GET /v1/documents
check "refused uploads left no document" bash -c "[ \$(jq '.documents | length' '$T/body') = 2 ]"

# slow body: the idle timeout (2 s here) closes the connection; the server stays up
exec 3<>/dev/tcp/127.0.0.1/"$PORT"
printf 'POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"qu' >&3
t0=$(date +%s)
timeout 8 cat <&3 >/dev/null
t1=$(date +%s)
exec 3<&- 3>&-
check "slow body is cut off by the timeout ($((t1 - t0)) s)" [ $((t1 - t0)) -le 6 ]
req GET /healthz; check "server alive after bad input" [ "$CODE" = 200 ]

# ---- ask / chat (needs the language model) --------------------------------------------
if [ -f "${MMRAG_MODELS:-models}/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
  req POST /v1/ask -d "{\"question\":\"What is $WORD?\",\"k\":2,\"max_tokens\":4}"
  check "ask returns an answer with numbered citations" bash -c "[ $CODE = 200 ] && jq -e '(.answer | type == \"string\") and (.citations[0].n == 1) and (.citations[0].box | length == 4)' '$T/body' >/dev/null"
  curl -sN -o "$T/sse" -X POST "$URL/v1/ask" -d "{\"question\":\"What is $WORD?\",\"k\":1,\"max_tokens\":4,\"stream\":true}"
  check "ask stream: tokens, citations, done" bash -c "grep -q '^event: token' '$T/sse' && grep -q '^event: citations' '$T/sse' && grep -q '^event: done' '$T/sse'"
  curl -sN -o "$T/sse2" -X POST "$URL/v1/chat/completions" -d "{\"model\":\"mmrag\",\"messages\":[{\"role\":\"user\",\"content\":\"What is $WORD?\"}],\"max_tokens\":3,\"stream\":true,\"mmrag\":{\"k\":1}}"
  check "chat stream: chunks and [DONE]" bash -c "grep -q 'chat.completion.chunk' '$T/sse2' && tail -n 2 '$T/sse2' | grep -q '^data: \[DONE\]'"
  req POST /v1/chat/completions -d "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"What is $WORD?\"}],\"max_tokens\":3,\"mmrag\":{\"k\":1}}"
  check "chat completion (OpenAI shape, sources in message)" bash -c "[ $CODE = 200 ] && jq -e '(.object == \"chat.completion\") and (.choices[0].message.role == \"assistant\") and ((.choices[0].message.content | contains(\"Sources:\")) == ((.citations | length) > 0)) and (.usage.total_tokens >= 0) and (.abstained | type == \"boolean\")' '$T/body' >/dev/null"
  # found by schemathesis: max_tokens cutting a multi-byte character must still give JSON
  req POST /v1/ask -d '{"question":"\u00c0","max_tokens":1}'
  check "ask cut mid-character still answers JSON" bash -c "[ $CODE = 200 ] && jq -e '.answer | type == \"string\"' '$T/body' >/dev/null"
  req POST /v1/chat/completions -d '{"messages":[{"role":"user","content":"\u00c0"}],"max_tokens":1}'
  check "chat cut mid-character still answers JSON" bash -c "[ $CODE = 200 ] && jq -e '.choices[0].message.content | type == \"string\"' '$T/body' >/dev/null"
  req GET /metrics
  check "metrics: TTFT histogram observed" bash -c "grep -Eq '^mmrag_ttft_seconds_count\{\} [1-9]' '$T/body'"
else
  echo "skip ask/chat (no language model)"
fi

# ---- locate (VPE) ---------------------------------------------------------------------------
# The found case is checked against the ingest's own figure region of the northwind sample
# (DOC2, page 1, "Figure 1: Revenue by quarter"): IoU >= 0.5 with the figure chunk's box.
iou_jq='def iou(a; b): ([a[0], b[0]] | max) as $x0 | ([a[1], b[1]] | max) as $y0 | ([a[2], b[2]] | min) as $x1 | ([a[3], b[3]] | min) as $y1 | (if $x1 > $x0 and $y1 > $y0 then ($x1 - $x0) * ($y1 - $y0) else 0 end) as $i | $i / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - $i);'
if [ -f "${MMRAG_MODELS:-models}/minilm/model.safetensors" ]; then
  req GET "/v1/documents/$DOC2?chunks=true"
  FIGBOX=$(jq -c '[.chunk_list[] | select(.kind == "figure" and .page == 1)][0].box' "$T/body")
  req POST /v1/locate -d "{\"doc\":$DOC2,\"description\":\"the bar chart of revenue by quarter\"}"
  check "locate finds the revenue chart (figure box $FIGBOX)" bash -c "[ $CODE = 200 ] && [ '$FIGBOX' != null ] && jq -e '$iou_jq (.found == true) and (.page == 1) and (.kind == \"figure\" or .kind == \"raster\") and (.confidence >= 0.75) and (.ref_id >= 1) and (iou(.box; $FIGBOX) >= 0.5)' '$T/body' >/dev/null"
  RENDER=$(jq -r .render "$T/body")
  curl -s -o "$T/loc.png" -w '%{http_code} %{content_type}' "$URL$RENDER" >"$T/pcode"
  check "locate render link is the page PNG with the box ($RENDER)" bash -c "[[ '$RENDER' == /v1/documents/$DOC2/pages/1.png?box=* ]] && grep -q '^200 image/png' '$T/pcode'"
  req POST /v1/locate -d "{\"doc\":$DOC2,\"page\":1,\"description\":\"the pie chart of fish sales in Norway\",\"threshold\":0.75}"
  check "locate: nonsense description -> found false" bash -c "[ $CODE = 200 ] && jq -e '(.found == false) and (.confidence < 0.75)' '$T/body' >/dev/null"
  req POST /v1/locate -d "{\"doc\":$DOC2,\"description\":\"the revenue chart\",\"threshold\":1}"
  check "locate: threshold 1 -> not found" bash -c "[ $CODE = 200 ] && jq -e '.found == false' '$T/body' >/dev/null"
else
  echo "skip locate found/not-found (no models/minilm)"
fi
req POST /v1/locate -d '{"doc": 999999, "description": "the chart"}'
check "locate: unknown document -> 404" bash -c "[ $CODE = 404 ] && jq -e .error.code '$T/body' >/dev/null"
expect_4xx "locate without description" POST /v1/locate -d "{\"doc\": $DOC2}"
expect_4xx "locate without doc" POST /v1/locate -d '{"description": "the chart"}'
expect_4xx "locate doc of wrong type" POST /v1/locate -d '{"doc": "1", "description": "the chart"}'
expect_4xx "locate description of wrong type" POST /v1/locate -d "{\"doc\": $DOC2, \"description\": [\"x\"]}"
expect_4xx "locate page of wrong type" POST /v1/locate -d "{\"doc\": $DOC2, \"description\": \"x\", \"page\": \"1\"}"
expect_4xx "locate page beyond the document" POST /v1/locate -d "{\"doc\": $DOC2, \"description\": \"x\", \"page\": 999}"
expect_4xx "locate threshold out of range" POST /v1/locate -d "{\"doc\": $DOC2, \"description\": \"x\", \"threshold\": 1.5}"
expect_4xx "locate malformed JSON" POST /v1/locate -d '{"doc": 1,'
# found by schemathesis: a form feed is blank to VPE, so it must be a 400, not a 500
expect_4xx "locate blank description (form feed)" POST /v1/locate -d "{\"doc\": $DOC2, \"description\": \"\\f\"}"

req GET /metrics
check "metrics: request counters and latency histograms by route" bash -c "grep -q 'mmrag_http_requests_total{route=\"search\",code=\"2xx\"}' '$T/body' && grep -q 'mmrag_http_request_duration_seconds_bucket{route=\"search\",le=\"+Inf\"}' '$T/body' && grep -Eq '^mmrag_ingest_pages_total [1-9]' '$T/body'"

# delete
req DELETE "/v1/documents/$DOC1"; check "delete document" [ "$CODE" = 200 ]
expect_4xx "delete again -> 404" DELETE "/v1/documents/$DOC1"
req POST /v1/search -d "{\"query\":\"$WORD\",\"k\":10}"
check "deleted document leaves search results" bash -c "[ $CODE = 200 ] && jq -e '[.hits[] | select(.document_id == $DOC1)] | length == 0' '$T/body' >/dev/null"

# SIGTERM: graceful exit
kill -TERM "$SPID"; for _ in $(seq 1 50); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
wait "$SPID" 2>/dev/null; RC=$?
check "SIGTERM shuts down cleanly (exit $RC)" [ "$RC" = 0 ]

# ---- kill -9 during an upload-triggered ingest -> restart -> no partial document ------
BIGPDF=$T/many.pdf
if command -v pdfunite >/dev/null; then
  args=(); for _ in $(seq 1 25); do args+=("$PDF1" "$PDF2"); done
  pdfunite "${args[@]}" "$BIGPDF" 2>/dev/null
fi
if [ -s "$BIGPDF" ]; then
  start_server crash --db "$T/crashdb"
  req POST /v1/documents -H 'Content-Type: application/pdf' --data-binary @"$BIGPDF"
  CJ=$(jq -r .job_id "$T/body"); CSHA=$(jq -r .sha256 "$T/body")
  for _ in $(seq 1 300); do
    J=$(curl -s "$URL/v1/jobs/$CJ")
    [ "$(jq -r .pages_done <<<"$J")" -ge 2 ] 2>/dev/null && break
    sleep 0.05
  done
  STATE=$(jq -r '.status + " " + (.pages_done|tostring) + "/" + (.pages_total|tostring)' <<<"$J")
  kill -9 "$SPID"; wait "$SPID" 2>/dev/null
  check "killed mid-ingest (job was $STATE)" bash -c "[ '$(jq -r .status <<<"$J")' = running ]"
  start_server crash2 --db "$T/crashdb"
  # the acknowledged job resumes under its id; until it commits there is no document at all
  partial=0
  for _ in $(seq 1 1200); do
    J=$(curl -s "$URL/v1/jobs/$CJ"); st=$(jq -r .status <<<"$J")
    # a listed document must be whole (the job may commit between the two requests)
    curl -s "$URL/v1/documents" | jq -e '[.documents[] | select(.pages != 75)] | length == 0' >/dev/null || partial=1
    case $st in done|failed|cancelled) break ;; esac
    sleep 0.1
  done
  check "after restart: no partial document while the job runs again" [ "$partial" = 0 ]
  req GET /v1/documents
  check "after restart: the killed job $CJ resumed and committed all pages ($(jq -r .status <<<"$J"))" \
    bash -c "[ '$(jq -r .status <<<"$J")' = done ] && [ \$(jq '.documents | length' '$T/body') = 1 ] && [ \$(jq '.documents[0].pages' '$T/body') = 75 ]"
  check "after restart: upload spool swept, job marker gone" \
    bash -c "[ -z \"\$(ls -A '$T/crashdb/uploads' 2>/dev/null)\" ] && [ -z \"\$(ls '$T/crashdb/files/$CSHA' | grep queued)\" ]"
  req POST /v1/documents?name=many.pdf -H 'Content-Type: application/pdf' --data-binary @"$PDF2"
  wait_job "$(jq -r .job_id "$T/body")"
  check "after restart: ingest works" [ "$(jq -r .status <<<"$JOB")" = done ]
  kill -TERM "$SPID"; wait "$SPID" 2>/dev/null
else
  bad "kill -9 test: could not build a many-page PDF (pdfunite missing?)"
fi

# ---- concurrency limit -> 503 + Retry-After ---------------------------------------------
start_server busy --db "$T/busydb" --max-inflight 2 --timeout 5
exec 4<>/dev/tcp/127.0.0.1/"$PORT"; exec 5<>/dev/tcp/127.0.0.1/"$PORT"
for fd in 4 5; do printf 'POST /v1/search HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{' >&$fd; done
sleep 0.3
curl -s -D "$T/hdr" -o "$T/body" -X POST "$URL/v1/search" -d '{"query":"x"}' >/dev/null
check "over the concurrency limit -> 503 + Retry-After" bash -c "head -1 '$T/hdr' | grep -q ' 503' && grep -qi '^Retry-After:' '$T/hdr' && jq -e .error.code '$T/body' >/dev/null"
req GET /healthz; check "healthz still answers when saturated" [ "$CODE" = 200 ]
exec 4<&- 4>&- 5<&- 5>&-
sleep 0.3
req POST /v1/search -d '{"query":"x"}'; check "slots free again after the clients leave" [ "$CODE" = 200 ]
kill -TERM "$SPID"; wait "$SPID" 2>/dev/null

# ---- a full ingest queue holds an upload until there is room; past --timeout, 503 ----------
if [ -s "$BIGPDF" ]; then
  start_server queue --db "$T/qdb" --queue 1 --ingest-workers 1 --timeout 1
  req POST "/v1/documents?name=big" -H 'Content-Type: application/pdf' --data-binary @"$BIGPDF"   # runs
  req POST "/v1/documents?name=one" -H 'Content-Type: application/pdf' --data-binary @"$PDF1"     # queued
  curl -s -D "$T/hdr" -o "$T/body" -X POST "$URL/v1/documents?name=two" -H 'Content-Type: application/pdf' --data-binary @"$PDF2"
  check "queue still full after --timeout 1 -> 503 queue_full + Retry-After" bash -c "head -1 '$T/hdr' | grep -q ' 503' && grep -qi '^Retry-After:' '$T/hdr' && jq -e '.error.code == \"queue_full\"' '$T/body' >/dev/null"
  kill -TERM "$SPID"; wait "$SPID" 2>/dev/null
  start_server queue2 --db "$T/qdb2" --queue 1 --ingest-workers 1 --timeout 120
  req POST "/v1/documents?name=big" -H 'Content-Type: application/pdf' --data-binary @"$BIGPDF"
  req POST "/v1/documents?name=one" -H 'Content-Type: application/pdf' --data-binary @"$PDF1"
  req POST "/v1/documents?name=two" -H 'Content-Type: application/pdf' --data-binary @"$PDF2"
  J2=$(jq -r .job_id "$T/body")
  check "upload to a full queue waits for room -> 202 ($CODE)" [ "$CODE" = 202 ]
  wait_job "$J2"
  check "the upload that waited is indexed ($(jq -r .status <<<"$JOB"))" [ "$(jq -r .status <<<"$JOB")" = done ]
  kill -TERM "$SPID"; wait "$SPID" 2>/dev/null
fi

# ---- a first token later than the idle timeout: keep-alive comments hold the stream -------
if [ -f "${MMRAG_MODELS:-models}/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
  start_server slow --db "$T/db" --timeout 1 --gen-threads 1
  Q="Explain in detail everything these documents say about $WORD, revenue, wiring and attention."
  curl -sN -o "$T/sse-slow" -X POST "$URL/v1/ask" -d "{\"question\":\"$Q\",\"k\":10,\"max_tokens\":8,\"stream\":true}"
  check "stream outlives --timeout 1 while the model starts (keep-alives: $(grep -c '^:$' "$T/sse-slow" 2>/dev/null))" \
    bash -c "grep -q '^event: citations' '$T/sse-slow' && grep -q '^event: done' '$T/sse-slow'"
  kill -TERM "$SPID"; wait "$SPID" 2>/dev/null
fi

# ---- API keys: collections are isolated ----------------------------------------------------
printf '# test keys\nkey-alpha-0001 alpha\nkey-bravo-0002 bravo\n' >"$T/keys"
chmod 644 "$T/keys"
"$MMRAG" serve --listen 127.0.0.1:0 --db "$T/kdb" --keys "$T/keys" >"$T/k644.out" 2>"$T/k644.err"; RC=$?
check "a keys file others may read is refused with a message ($(head -c 90 "$T/k644.err"))" bash -c "[ $RC -ne 0 ] && grep -q 'chmod 600' '$T/k644.err'"
chmod 600 "$T/keys"
start_server keys --db "$T/kdb" --keys "$T/keys"
A=(-H 'Authorization: Bearer key-alpha-0001'); Bk=(-H 'Authorization: Bearer key-bravo-0002')
req POST /v1/documents "${A[@]}" -H 'Content-Type: application/pdf' --data-binary @"$PDF1"
KJ=$(jq -r .job_id "$T/body")
wait_job "$KJ" key-alpha-0001; KD=$(jq -r .document_id <<<"$JOB")
check "key alpha uploads" [ "$(jq -r .status <<<"$JOB")" = done ]
expect_4xx "no key -> 401" GET /v1/documents
expect_4xx "wrong key -> 401" GET /v1/documents -H 'Authorization: Bearer key-alpha-0002'
req GET /v1/documents "${Bk[@]}"
check "key bravo sees none of alpha's documents" bash -c "[ $CODE = 200 ] && [ \$(jq '.documents | length' '$T/body') = 0 ]"
expect_4xx "bravo cannot get alpha's document" GET "/v1/documents/$KD" "${Bk[@]}"
expect_4xx "bravo cannot delete alpha's document" DELETE "/v1/documents/$KD" "${Bk[@]}"
expect_4xx "bravo cannot see alpha's job" GET "/v1/jobs/$KJ" "${Bk[@]}"
expect_4xx "bravo cannot render alpha's page" GET "/v1/documents/$KD/pages/1.png" "${Bk[@]}"
req POST /v1/locate "${Bk[@]}" -d "{\"doc\":$KD,\"description\":\"the wiring diagram\"}"
check "bravo cannot locate in alpha's document (404)" bash -c "[ $CODE = 404 ] && jq -e .error.code '$T/body' >/dev/null"
if [ -f "${MMRAG_MODELS:-models}/minilm/model.safetensors" ]; then
  req POST /v1/locate "${A[@]}" -d "{\"doc\":$KD,\"description\":\"the wiring diagram\"}"
  check "alpha locates in its own document" bash -c "[ $CODE = 200 ] && jq -e '.page == 1' '$T/body' >/dev/null"
fi
req POST /v1/search "${Bk[@]}" -d "{\"query\":\"$WORD\"}"
check "bravo's search finds nothing of alpha's" bash -c "[ $CODE = 200 ] && [ \$(jq '.hits | length' '$T/body') = 0 ]"
req GET /v1/documents "${A[@]}"
check "alpha still sees its document" bash -c "[ \$(jq '.documents | length' '$T/body') = 1 ]"
kill -TERM "$SPID"; wait "$SPID" 2>/dev/null

# ---- per-key rate limits, request ids, headers, the PDF sniff -------------------------------
QUIET= start_server rl --db "$T/rdb" --keys "$T/keys" --rate-limit 1 --rate-burst 3
codes=""
for _ in 1 2 3 4 5; do
  codes="$codes $(curl -s -D "$T/rl.hdr" -o "$T/body" -w '%{http_code}' "${A[@]}" "$URL/v1/documents")"
done
check "rate limit: burst of 3 then 429 ($codes)" bash -c "[ '$codes' = ' 200 200 200 429 429' ]"
check "429 carries Retry-After and a JSON error" bash -c "grep -qi '^Retry-After: [1-9]' '$T/rl.hdr' && jq -e '.error.code == \"rate_limited\"' '$T/body' >/dev/null"
req GET /v1/documents "${Bk[@]}"; check "rate limit is per key (bravo still served)" [ "$CODE" = 200 ]
req GET /healthz; check "healthz is not rate limited" [ "$CODE" = 200 ]
{ head -c 100 /dev/zero | tr '\0' ' '; cat "$PDF1"; } >"$T/prefixed.pdf"
req POST /v1/documents "${Bk[@]}" -H 'Content-Type: application/pdf' --data-binary @"$T/prefixed.pdf"
check "upload with %PDF- after 100 bytes is accepted (sniffed in the first 1024)" [ "$CODE" = 202 ]
{ head -c 1100 /dev/zero | tr '\0' ' '; cat "$PDF1"; } >"$T/late.pdf"
sleep 1.2
req POST /v1/documents "${Bk[@]}" -H 'Content-Type: application/pdf' --data-binary @"$T/late.pdf"
check "upload with %PDF- only after 1024 bytes is refused before queueing ($CODE)" bash -c "[ $CODE = 415 ] && jq -e '.error.code == \"not_pdf\"' '$T/body' >/dev/null"
sleep 1.2
curl -s -D "$T/id.hdr" -o "$T/body" "${Bk[@]}" "$URL/v1/documents/999999"
RID=$(sed -n 's/^X-Request-Id: *\([^[:space:]]*\).*/\1/Ip' "$T/id.hdr")
check "error body carries the reply's request id ($RID)" bash -c "[ -n '$RID' ] && jq -e --arg id '$RID' '.error.request_id == \$id' '$T/body' >/dev/null"
sleep 0.2
check "the access log carries the request id" grep -q -- "$RID" "$T/rl.err"
sleep 1.2
curl -s -D "$T/id2.hdr" -o /dev/null -H 'X-Request-Id: trace-abc.1' "${Bk[@]}" "$URL/v1/documents"
check "a client's X-Request-Id is echoed" grep -qi '^X-Request-Id: trace-abc.1' "$T/id2.hdr"
curl -s -D "$T/h.hdr" -o /dev/null "$URL/"
check "web page: nosniff and a Content-Security-Policy" bash -c "grep -qi '^X-Content-Type-Options: nosniff' '$T/h.hdr' && grep -qi \"^Content-Security-Policy: default-src 'self'.*frame-ancestors 'none'\" '$T/h.hdr'"
check "JSON replies: nosniff" grep -qi '^X-Content-Type-Options: nosniff' "$T/id.hdr"
kill -TERM "$SPID"; wait "$SPID" 2>/dev/null

# ---- loopback only without keys ------------------------------------------------------------
"$MMRAG" serve --listen 0.0.0.0:0 --db "$T/db0" >"$T/any.out" 2>"$T/any.err"; RC=$?
check "0.0.0.0 without keys is refused with a clear message" bash -c "[ $RC -ne 0 ] && grep -q 'loopback' '$T/any.err'"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
