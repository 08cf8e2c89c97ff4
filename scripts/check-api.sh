#!/usr/bin/env bash
# `make check-api`: property-based API tests with Schemathesis (PyPI) against /openapi.json.
# Starts `mmrag serve` on 127.0.0.1 port 0 with a temp database holding the sample PDFs,
# then runs `st run` with the not_a_server_error check: any 5xx fails the run.
# Schemathesis lives in a venv under ${XDG_CACHE_HOME:-~/.cache}/mmrag (created on first use).
# Usage: scripts/check-api.sh BUILD MODELS
# Env: CHECK_API_EXAMPLES (test cases per operation, default 30)
set -euo pipefail
B=${1:-build}
MODELS=${2:-models}
ST_VERSION=4.32.5   # flag names change between major versions; bump deliberately
VENV=${XDG_CACHE_HOME:-$HOME/.cache}/mmrag/venv-schemathesis
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

OSV_VERSION=0.9.0   # openapi-spec-validator: the document itself must be valid OpenAPI
if [ "$("$VENV/bin/st" --version 2>/dev/null)" != "st, version $ST_VERSION" ] ||
   ! "$VENV/bin/pip" show openapi-spec-validator 2>/dev/null | grep -qx "Version: $OSV_VERSION"; then
  echo "check-api: installing schemathesis $ST_VERSION, openapi-spec-validator $OSV_VERSION into $VENV"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV" || { echo "check-api: python3 -m venv failed (Debian: apt-get install python3-venv)"; exit 1; }
  "$VENV/bin/pip" install -q --disable-pip-version-check "schemathesis==$ST_VERSION" \
    "openapi-spec-validator==$OSV_VERSION"
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/check-api.XXXXXX")
SPID=""
# The server gets 60 s to shut down after SIGTERM; one that hangs fails the check (a CI run
# once sat on a deadlocked server until its own time ran out)
stop_server() {
  [ -n "$SPID" ] || return 0
  kill "$SPID" 2>/dev/null || { SPID=""; return 0; }
  for _ in $(seq 1 600); do kill -0 "$SPID" 2>/dev/null || { wait "$SPID" 2>/dev/null; SPID=""; return 0; }; sleep 0.1; done
  echo "check-api: FAILED: the server did not exit within 60 s of SIGTERM"
  kill -9 "$SPID" 2>/dev/null; SPID=""
  return 1
}
cleanup() { stop_server || true; rm -rf "$T"; }
trap cleanup EXIT

"$B/tests/tool_gencorpus" samples "$T/samples" >/dev/null
# one generation at a time and small token caps keep the ask/chat cases cheap; the
# in-flight limit is far above the single schemathesis worker, so a 503 would be a bug
"$B/mmrag" serve --listen 127.0.0.1:0 --db "$T/db" --models "$MODELS" \
  >"$T/server.out" 2>"$T/server.err" &
SPID=$!
URL=""
for _ in $(seq 1 100); do
  PORT=$(sed -n 's/^listening on .*:\([0-9][0-9]*\)$/\1/p' "$T/server.out" 2>/dev/null || true)
  [ -n "$PORT" ] && { URL=http://127.0.0.1:$PORT; break; }
  kill -0 "$SPID" 2>/dev/null || break
  sleep 0.1
done
[ -n "$URL" ] || { echo "check-api: server did not start"; cat "$T/server.err"; exit 1; }

for pdf in "$T"/samples/*.pdf; do
  curl -sf -H 'Content-Type: application/pdf' --data-binary @"$pdf" \
    "$URL/v1/documents?name=$(basename "$pdf")" >/dev/null
done
# every upload must be indexed (at most 3 minutes): a stuck ingest is a failure, not a
# smaller corpus to test against
want=$(ls "$T"/samples/*.pdf | wc -l)
n=0
for _ in $(seq 1 900); do
  n=$(curl -sf "$URL/v1/documents" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["count"])')
  [ "$n" -ge "$want" ] && break
  sleep 0.2
done
[ "$n" -ge "$want" ] || { echo "check-api: FAILED: $n of $want uploads indexed after 3 minutes"; tail -n 20 "$T/server.err"; exit 1; }
echo "check-api: server $URL with $n indexed documents"

# the document as served (embedded in the binary) must be valid OpenAPI 3
curl -sf "$URL/openapi.json" -o "$T/openapi.json"
"$VENV/bin/openapi-spec-validator" "$T/openapi.json"

# Generation cost is what makes ask/chat slow (200 default tokens, ~300-token prompts on a
# CPU): valid max_tokens and k are clamped before each call. Invalid values (wrong type, out
# of range) go through unchanged, so the server's validation is still exercised.
cat >"$T/hooks.py" <<'PYEOF'
import schemathesis

def _clamp(d, key, cap, lo, hi, add):
    v = d.get(key)
    if isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi:
        d[key] = min(v, cap)
    elif key not in d and add:
        d[key] = cap

@schemathesis.hook
def before_call(context, case, kwargs):
    if case.path not in ("/v1/ask", "/v1/chat/completions"):
        return
    body = case.body
    if not isinstance(body, dict):
        return
    _clamp(body, "max_tokens", 8, 1, 2048, True)
    opts = body.get("mmrag") if case.path == "/v1/chat/completions" else body
    if isinstance(opts, dict):
        _clamp(opts, "k", 2, 1, 50, False)
PYEOF

# /v1/locate answers 501 until the VPE lands in the server; test it once it does
exclude=()
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' -d '{}' "$URL/v1/locate")
if [ "$code" = 501 ]; then
  echo "check-api: POST /v1/locate answers 501 (not implemented): excluded"
  exclude=(--exclude-path /v1/locate)
fi

rc=0
# run from $T: schemathesis keeps its cache (.schemathesis/) in the working directory
cd "$T"
SCHEMATHESIS_HOOKS=$T/hooks.py "$VENV/bin/st" run "$URL/openapi.json" "${exclude[@]}" \
  --checks not_a_server_error \
  --workers 1 \
  --max-examples "${CHECK_API_EXAMPLES:-30}" \
  --request-timeout 60 \
  --seed 1 \
  --suppress-health-check too_slow,filter_too_much \
  --report junit --report-dir "$T/report" || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "check-api: FAILED (schemathesis exit $rc); last server log lines:"
  tail -n 20 "$T/server.err"
fi
stop_server || rc=1
exit "$rc"
