/* Fuzz target: the FTS query builder (store_fts_query, index/store_search.c), which turns
 * any user text into an FTS5 MATCH expression. Properties: the size it asks for is the size
 * it writes, and SQLite's FTS5 (same tokenizer as the store) accepts every expression it
 * builds: user text must never reach FTS5 as syntax. */
#include <sqlite3.h>
#include "tests/fuzz/fuzz.h"
#include "index/store.h"

static sqlite3 *db;
static sqlite3_stmt *st;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
        sqlite3_exec(db,
                     "CREATE VIRTUAL TABLE t USING fts5(text, section,"
                     " tokenize='porter unicode61 remove_diacritics 2');"
                     "INSERT INTO t VALUES('the axis range of a plot', 'Graphics > Axes');"
                     "INSERT INTO t VALUES('set logscale x; 3.5 \"quoted\" words', 'Set-show');",
                     NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT count(*) FROM t WHERE t MATCH ?1", -1, &st, NULL) != SQLITE_OK)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!db) LLVMFuzzerInitialize(NULL, NULL);
    char *q = malloc(size + 1);
    if (!q) return 0;
    memcpy(q, data, size);
    q[size] = 0;
    size_t need = store_fts_query(q, NULL, 0);
    char *m = malloc(need);
    FUZZ_ASSERT(m != NULL, "need %zu", need);
    size_t again = store_fts_query(q, m, need);
    FUZZ_ASSERT(again == need && strlen(m) == need - 1, "asked %zu, wrote %zu", need, strlen(m));
    if (m[0]) {
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, m, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        FUZZ_ASSERT(rc == SQLITE_ROW, "FTS5 refused [%s]: %s", m, sqlite3_errmsg(db));
    }
    sqlite3_reset(st);
    free(m);
    free(q);
    return 0;
}
