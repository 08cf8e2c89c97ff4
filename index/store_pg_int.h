/* Private to index/store_pg*.c: libpq helpers shared by the PostgreSQL backend. */
#ifndef MMRAG_INDEX_STORE_PG_INT_H
#define MMRAG_INDEX_STORE_PG_INT_H
#include "index/store_int.h"

/* Parameters of one statement, sent as text (numbers printed here) or binary (bytea). */
#define PG_MAXARGS 16
typedef struct {
    int n;
    const char *v[PG_MAXARGS];
    int len[PG_MAXARGS], fmt[PG_MAXARGS];
    char num[PG_MAXARGS][32];
} pg_args;
void pga_int(pg_args *a, int64_t v);
void pga_real(pg_args *a, double v);
void pga_text(pg_args *a, const char *t);            /* not copied */
void pga_bin(pg_args *a, const void *p, size_t n);   /* not copied */

/* Run one statement; NULL + *rc and the message on failure (the result is cleared). */
PGresult *pg_run(store *s, const char *sql, const pg_args *a, const char *what, int *rc);
int pg_exec(store *s, const char *sql, const pg_args *a, const char *what);
/* Map r's SQLSTATE (or the connection's state when r is NULL) to a store_status with the
 * message "store: URL: what: ..."; clears r. */
int pg_fail(store *s, PGresult *r, const char *what);
int pg_tx_begin(store *s);
int pg_tx_commit(store *s);
void pg_tx_rollback(store *s);
int pg_bump_generation(store *s);
int pg_session_setup(store *s);
/* "[v0,v1,...]" for dim floats (malloc'd), and back; parse gives the count or -1. */
char *pg_vec_text(const float *v, int32_t dim);
int32_t pg_vec_parse(const char *t, float *out, int32_t cap);
/* Image vectors also carry a PG_LSH_BITS-bit sign-random-projection code in a bit(n)
 * column with an HNSW bit_hamming_ops index: searches take candidates by Hamming
 * distance and re-score them exactly (the embedded store's LSH + re-score, in SQL). The
 * hyperplanes are fixed by a seed, so every writer and reader computes the same codes.
 * pg_lsh_code writes PG_LSH_BITS '0'/'1' characters and a NUL into out. */
#define PG_LSH_BITS 256
void pg_lsh_code(const float *v, int32_t dim, char out[PG_LSH_BITS + 1]);
/* A bytea column of a text-format result, decoded (malloc'd); NULL/0 when SQL NULL. */
uint8_t *pg_bytea(const PGresult *r, int row, int col, size_t *len);
#endif
