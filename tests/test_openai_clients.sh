#!/usr/bin/env bash
# The official `openai` Python client and `langchain-openai` against `mmrag serve` over
# loopback (tests/openai_clients.py): models, chat (whole, streamed, JSON mode on 20
# prompts, two tools in one turn and the answer after their results), embeddings, and bad
# input answered as a 4xx in OpenAI's error shape. The clients live in a venv cached per
# machine under ${XDG_CACHE_HOME:-~/.cache}/mmrag (created on first use; versions pinned).
# Env: MMRAG_BUILD, MMRAG_MODELS, MMRAG_TMP. Prints "N passed, N failed".
set -u
B=${MMRAG_BUILD:-build}
M=${MMRAG_MODELS:-models}
. "$(dirname "$0")/lib.sh"
OPENAI_VERSION=3.60.0
LANGCHAIN_OPENAI_VERSION=1.8.1
VENV=${XDG_CACHE_HOME:-$HOME/.cache}/mmrag/venv-openai
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
T=$(mktemp -d "${MMRAG_TMP:-/tmp}/oai.XXXXXX")
SPID=""
cleanup() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT

if [ ! -f "$M/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
  echo "skip openai clients: no language model (make models)"; echo "0 passed, 0 failed"; exit 0
fi
if ! "$VENV/bin/pip" show openai 2>/dev/null | grep -qx "Version: $OPENAI_VERSION" ||
   ! "$VENV/bin/pip" show langchain-openai 2>/dev/null | grep -qx "Version: $LANGCHAIN_OPENAI_VERSION"; then
  echo "installing openai $OPENAI_VERSION, langchain-openai $LANGCHAIN_OPENAI_VERSION into $VENV"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV" && "$VENV/bin/pip" install -q --disable-pip-version-check \
    "openai==$OPENAI_VERSION" "langchain-openai==$LANGCHAIN_OPENAI_VERSION" \
    || { bad "client venv could not be created (PyPI reachable?)"; echo "$pass passed, $fail failed"; exit 1; }
fi

"$B/tests/tool_gencorpus" samples "$T/samples" >/dev/null 2>&1
"$B/mmrag" serve --listen 127.0.0.1:0 --quiet --db "$T/db" --models "$M" >"$T/out" 2>"$T/err" &
SPID=$!
PORT=$(listen_port "$T/out" "$SPID")
[ -n "$PORT" ] || { bad "server did not start: $(tail -n 3 "$T/err")"; echo "$pass passed, $fail failed"; exit 1; }
URL=http://127.0.0.1:$PORT
for pdf in "$T"/samples/*.pdf; do
  curl -sf -H 'Content-Type: application/pdf' --data-binary @"$pdf" "$URL/v1/documents?name=$(basename "$pdf")" >/dev/null
done
want=$(ls "$T"/samples/*.pdf | wc -l); n=0
for _ in $(seq 1 900); do
  n=$(curl -sf "$URL/v1/documents" | jq -r .count 2>/dev/null || echo 0)
  [ "${n:-0}" -ge "$want" ] && break
  sleep 0.2
done
check "sample corpus indexed ($n of $want)" [ "${n:-0}" -ge "$want" ]

out=$("$VENV/bin/python" "$(dirname "$0")/openai_clients.py" "$URL" 2>&1)
printf '%s\n' "$out" | grep -v -E '^(ok|FAIL) '
while IFS= read -r line; do
  case $line in
    "ok   "*) ok "${line#ok   }" ;;
    "FAIL "*) bad "${line#FAIL }" ;;
  esac
done < <(printf '%s\n' "$out" | grep -E '^(ok|FAIL) ')
printf '%s\n' "$out" | grep -qE '^(ok|FAIL) ' || bad "the client script printed no results"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
