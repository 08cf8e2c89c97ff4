#!/usr/bin/env bash
# The store's own cases (tests/test_store.c) run a second time against the shared store:
# PostgreSQL + pgvector, the server scripts/run-tests.sh started for this run
# (MMRAG_TEST_PG). Each case gets a fresh collection (see test_store.c's header).
set -u
if [ -z "${MMRAG_TEST_PG:-}" ]; then
  echo "skip store cases on PostgreSQL: no test server (scripts/pg-test.sh could not start one)"
  echo "0 passed, 0 failed"
  exit 0
fi
MMRAG_STORE_URL=$MMRAG_TEST_PG exec "${MMRAG_BUILD:-build}/tests/test_store"
