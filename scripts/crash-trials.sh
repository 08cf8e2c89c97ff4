#!/usr/bin/env bash
# Crash consistency of `mmrag index`: kill -9 it at random moments, N times, on one
# collection, and after every kill check that
#   1. `PRAGMA integrity_check` says ok and no page/image/chunk/vector row is orphaned;
#   2. every document is all or nothing: its page rows number its page count, and it has
#      chunks (a partial document would show fewer pages);
#   3. no ingest worker outlived its parent (they die with it: PR_SET_PDEATHSIG);
#   4. search works: the vector index files agree with the database or are rebuilt.
# Between kills the collection keeps changing (a document deleted, a file rewritten) so
# there is always work to interrupt. At the end one run must complete: exit 0 and every
# file indexed. Usage: scripts/crash-trials.sh BUILD [TRIALS=100] [MODELS]
# (`make crash-trials TRIALS=N`; not part of `make test`). Prints "N passed, N failed".
set -u
B=$(cd "${1:-build}" && pwd); N=${2:-100}; MODELS=${3:-${MMRAG_MODELS:-models}}
M=$B/mmrag
T=$(mktemp -d "${TMPDIR:-/tmp}/mmrag-crash.XXXXXX")
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/../tests/lib.sh"
export OMP_THREAD_LIMIT=1 MMRAG_MODELS=$MODELS
DB=$T/db; DOCS=$T/docs
. "$(dirname "$0")/crash-check.sh"   # crash_docs, sql, check_db
crash_docs 3
n_files=$(ls "$DOCS" | wc -l)

# time one full run to pick kill moments inside it
t0=$(date +%s%N); "$M" index --db "$T/probe" --jobs 2 "$DOCS" >/dev/null 2>&1; t1=$(date +%s%N)
full_ms=$(( (t1 - t0) / 1000000 )); [ "$full_ms" -lt 200 ] && full_ms=200
echo "a full run takes $full_ms ms; $N trials with kill -9 at random moments inside it"

bad_trials=0; killed_mid=0
for i in $(seq 1 "$N"); do
  # keep work to do: delete a document or rewrite a file now and then
  case $((RANDOM % 3)) in
    0) id=$("$M" ls --db "$DB" --json 2>/dev/null | jq -r '.documents[].id' 2>/dev/null | shuf -n1)
       [ -n "$id" ] && "$M" rm --db "$DB" "$id" >/dev/null 2>&1 ;;
    1) f=$(ls "$DOCS"/*.pdf | shuf -n1); printf '%% trial %d\n' "$i" >>"$f" ;;
  esac
  a=$(date +%s%N)
  "$M" index --db "$DB" --jobs 2 "$DOCS" >/dev/null 2>&1 &
  pid=$!
  sleep "$(awk -v ms="$full_ms" -v r="$RANDOM" 'BEGIN { printf "%.3f", (r % ms) / 1000 }')"
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid"; killed_mid=$((killed_mid + 1))
  else   # it finished first: later runs have about that much work, aim inside it
    full_ms=$(( ($(date +%s%N) - a) / 1000000 )); [ "$full_ms" -lt 100 ] && full_ms=100
  fi
  wait "$pid" 2>/dev/null
  ok_trial=1
  check_db "$i" || ok_trial=0
  sleep 0.1
  if pgrep -f "[i]ngest-worker.*$DOCS" >/dev/null; then echo "  trial $i: an ingest worker outlived its parent"; ok_trial=0; fi
  if [ -f "$DB/mmrag.db" ] && ! "$M" search --db "$DB" "inverter" -k 3 >/dev/null 2>"$T/search.err"; then
    echo "  trial $i: search failed: $(head -c 200 "$T/search.err")"; ok_trial=0
  fi
  [ "$ok_trial" = 1 ] || bad_trials=$((bad_trials + 1))
done
check "$N trials ($killed_mid killed mid-run): database whole, documents all-or-nothing, no stray workers, search works ($bad_trials bad)" [ "$bad_trials" = 0 ]
"$M" index --db "$DB" --jobs 2 "$DOCS" >"$T/final.out" 2>&1; rc=$?
check "the next run completes (exit $rc)" [ "$rc" = 0 ]
n_docs=$("$M" ls --db "$DB" --json | jq '.documents | length')
check "every file indexed after it ($n_docs of $n_files)" [ "$n_docs" = "$n_files" ]
check_db final; check "final database consistent" [ $? = 0 ]
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
