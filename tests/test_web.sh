#!/usr/bin/env bash
# Web page end to end in headless Chromium: starts `mmrag serve` on 127.0.0.1 port 0 with a
# temp database, then tests/web_e2e.py drives the page through chromedriver (W3C WebDriver,
# Python standard library only): upload a PDF, wait for ingest, ask, watch the answer
# stream, click the first citation, check the page image with its box, take a screenshot.
# Needs Debian `chromium` + `chromium-driver` (scripts/deps.sh); fails, not skips, without.
# Env: MMRAG_BUILD, MMRAG_MODELS, MMRAG_TMP; MMRAG_SCREENSHOT=FILE also copies the
# screenshot there (docs/screenshot-citation.png was made that way). Prints "N passed, N failed".
set -u
B=${MMRAG_BUILD:-build}
MMRAG=$B/mmrag
GEN=$B/tests/tool_gencorpus
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
T=$(mktemp -d "${MMRAG_TMP:-/tmp}/web.XXXXXX")
SPID=""
cleanup() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null; rm -rf "$T/db" "$T/samples"; }
trap cleanup EXIT

die() { echo "FAIL $*"; echo "0 passed, 1 failed"; exit 1; }

for f in "$MMRAG" "$GEN"; do [ -x "$f" ] || die "missing $f (build it first)"; done
command -v chromium >/dev/null && command -v chromedriver >/dev/null ||
  die "chromium/chromedriver not installed: run scripts/deps.sh (Debian packages chromium chromium-driver)"
[ -f "${MMRAG_MODELS:-models}/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" ] ||
  die "LLM model missing under ${MMRAG_MODELS:-models}: run make models"

"$GEN" samples "$T/samples" >/dev/null 2>&1
PDF=$T/samples/helios-inverter-manual.pdf
[ -f "$PDF" ] || die "no sample PDF from $GEN"

MMRAG_MODELS=${MMRAG_MODELS:-models} "$MMRAG" serve --listen 127.0.0.1:0 --quiet --db "$T/db" \
  >"$T/server.out" 2>"$T/server.err" &
SPID=$!
PORT=""
for _ in $(seq 1 100); do
  PORT=$(sed -n 's/^listening on .*:\([0-9][0-9]*\)$/\1/p' "$T/server.out" 2>/dev/null)
  [ -n "$PORT" ] && break
  kill -0 "$SPID" 2>/dev/null || break
  sleep 0.1
done
[ -n "$PORT" ] || die "server did not start: $(cat "$T/server.err")"

copy=()
[ -n "${MMRAG_SCREENSHOT:-}" ] && copy=(--copy "$MMRAG_SCREENSHOT")
# the whole browser flow is bounded so a hung chromium cannot stall `make test`
timeout 120 "$PY" "$HERE/web_e2e.py" --url "http://127.0.0.1:$PORT" --pdf "$PDF" --out "$T" "${copy[@]}"
rc=$?
if [ "$rc" -eq 124 ]; then die "web_e2e.py timed out after 120 s"; fi
if [ "$rc" -ne 0 ]; then echo "server log:"; tail -n 20 "$T/server.err"; fi
exit "$rc"
