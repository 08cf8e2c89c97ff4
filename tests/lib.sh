# Shared by tests/test_*.sh: the pass/fail counters and the ok/bad/check reporters whose
# lines scripts/run-tests.sh reads. A script sources this, then ends with
#   echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]
pass=0; fail=0
ok()  { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
# A case that cannot run here prints a line "skip WHY" (no counter): scripts/run-tests.sh
# counts those lines as skipped, never as passed.
# listen_port OUT PID: the port `mmrag serve --listen HOST:0` printed to OUT ("listening on
# HOST:PORT"), waiting up to 10 s while PID lives; prints nothing when it did not start.
listen_port() {
  local p=""
  for _ in $(seq 1 100); do
    p=$(sed -n 's/^listening on .*:\([0-9][0-9]*\)$/\1/p' "$1" 2>/dev/null)
    [ -n "$p" ] && break
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  printf '%s' "$p"
}
# check NAME CMD...: ok when CMD succeeds, else bad; returns 1 then, for `check ... || diag`
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; return 1; fi; }
