/* index/store_pg_read.c — the shared store's readers: documents, pages, chunks, images,
 * keyword search (tsvector + ts_rank_cd), vectors (pgvector HNSW), work lists, counts. */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "index/store_pg_int.h"

static const char *val(const PGresult *r, int row, int col) {
    return PQgetisnull(r, row, col) ? NULL : PQgetvalue(r, row, col);
}
static int64_t ival(const PGresult *r, int row, int col) {
    const char *v = val(r, row, col);
    return v ? strtoll(v, NULL, 10) : 0;
}
static float fval(const PGresult *r, int row, int col) {
    const char *v = val(r, row, col);
    return v ? strtof(v, NULL) : 0.0f;
}
static store_box bval(const PGresult *r, int row, int col) {
    return (store_box){fval(r, row, col), fval(r, row, col + 1), fval(r, row, col + 2),
                       fval(r, row, col + 3)};
}

uint8_t *pg_bytea(const PGresult *r, int row, int col, size_t *len) {
    *len = 0;
    const char *v = val(r, row, col);
    if (!v) return NULL;
    size_t n = 0;
    unsigned char *b = PQunescapeBytea((const unsigned char *)v, &n);
    if (!b) return NULL;
    uint8_t *out = malloc(n ? n : 1);   /* PQfreemem memory must not leak to callers */
    if (out) { memcpy(out, b, n); *len = n; }
    PQfreemem(b);
    return out;
}

int32_t pg_vec_parse(const char *t, float *out, int32_t cap) {
    if (!t || *t != '[') return -1;
    int32_t n = 0;
    const char *p = t + 1;
    while (*p && *p != ']') {
        char *end;
        float f = strtof(p, &end);
        if (end == p) return -1;
        if (n < cap) out[n] = f;
        n++;
        p = end;
        if (*p == ',') p++;
    }
    return n;
}

/* Read every row of r with fill(r, row, dst) into a calloc'd array of `size` bytes each.
 * fill returns 0, or -1 out of memory (the row is still cleared by clear). */
typedef int (*fill_fn)(const PGresult *r, int row, void *dst);
static int read_rows(store *s, PGresult *r, size_t size, fill_fn fill, void (*clear)(void *),
                     void **rows, int32_t *n) {
    int cnt = PQntuples(r);
    *rows = NULL; *n = 0;
    if (!cnt) { PQclear(r); return STORE_OK; }
    char *arr = calloc((size_t)cnt, size);
    int rc = arr ? STORE_OK : store_set_err(s, STORE_ERR_NOMEM, "out of memory");
    for (int i = 0; arr && i < cnt; i++)
        if (fill(r, i, arr + (size_t)i * size)) {
            for (int j = 0; clear && j <= i; j++) clear(arr + (size_t)j * size);
            free(arr);
            arr = NULL;
            rc = store_set_err(s, STORE_ERR_NOMEM, "out of memory");
        }
    PQclear(r);
    if (rc) return rc;
    *rows = arr;
    *n = cnt;
    return STORE_OK;
}

/* ---- documents ------------------------------------------------------------------- */
#define DOC_COLS "d.id, d.sha256, d.path, d.title, d.status, d.pages, d.bytes, d.added_at," \
    " d.updated_at, (SELECT count(*) FROM chunks c WHERE c.doc=d.id)," \
    " (SELECT count(*) FROM images i WHERE i.doc=d.id) FROM documents d"

static int doc_fill(const PGresult *r, int i, void *dst) {
    store_doc_row *d = dst;
    d->id = ival(r, i, 0);
    snprintf(d->sha256, sizeof d->sha256, "%s", PQgetvalue(r, i, 1));
    d->path = store_strdup(val(r, i, 2));
    d->title = store_strdup(val(r, i, 3));
    d->status = store_strdup(val(r, i, 4));
    d->pages = (int32_t)ival(r, i, 5);
    d->bytes = ival(r, i, 6);
    d->added_at = ival(r, i, 7);
    d->updated_at = ival(r, i, 8);
    d->n_chunks = (int32_t)ival(r, i, 9);
    d->n_images = (int32_t)ival(r, i, 10);
    return d->path && d->title && d->status ? 0 : -1;
}
static void doc_clear(void *row) { store_doc_row_clear(row); }

int pg_doc_list(store *s, store_doc_row **rows, int32_t *n) {
    if (!rows || !n) return STORE_ERR_ARG;
    STORE_LOCK(s);
    int rc;
    void *arr = NULL;
    *rows = NULL; *n = 0;
    PGresult *r = pg_run(s, "SELECT " DOC_COLS " ORDER BY d.id", NULL, "list documents", &rc);
    if (r && !(rc = read_rows(s, r, sizeof(store_doc_row), doc_fill, doc_clear, &arr, n))) *rows = arr;
    STORE_UNLOCK(s);
    return rc;
}

/* A document query with one parameter: 0 rows NOTFOUND-free (count 0), >1 counted. */
static int doc_query(store *s, const char *where, const char *arg, store_doc_row *out, int *count) {
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT " DOC_COLS " WHERE %s ORDER BY d.id LIMIT 2", where);
    pg_args a = {0};
    pga_text(&a, arg);
    int rc;
    PGresult *r = pg_run(s, sql, &a, "find document", &rc);
    *count = r ? PQntuples(r) : 0;
    if (r && *count == 1 && doc_fill(r, 0, out)) {
        store_doc_row_clear(out);
        rc = store_set_err(s, STORE_ERR_NOMEM, "out of memory");
    }
    PQclear(r);
    return rc;
}

int pg_doc_get_id(store *s, int64_t id, store_doc_row *out) {
    if (!out) return STORE_ERR_ARG;
    memset(out, 0, sizeof *out);
    char num[32];
    snprintf(num, sizeof num, "%lld", (long long)id);
    STORE_LOCK(s);
    int cnt;
    int rc = doc_query(s, "d.id=$1::bigint", num, out, &cnt);
    if (!rc && !cnt) rc = store_set_err(s, STORE_ERR_NOTFOUND, "no document with id %lld", (long long)id);
    STORE_UNLOCK(s);
    return rc;
}

int pg_doc_get(store *s, const char *spec, store_doc_row *out) {
    if (!out) return STORE_ERR_ARG;
    memset(out, 0, sizeof *out);
    if (!spec || !*spec) return store_set_err(s, STORE_ERR_ARG, "empty document name");
    STORE_LOCK(s);
    int rc = STORE_OK, cnt = 0;
    int digits, hex;
    store_doc_spec_kind(spec, &digits, &hex);
    if (digits && (rc = doc_query(s, "d.id=$1::bigint", spec, out, &cnt))) goto out;
    if (!cnt && hex) {
        char pat[80];
        size_t i;
        for (i = 0; spec[i]; i++) pat[i] = (char)tolower((unsigned char)spec[i]);
        pat[i++] = '%'; pat[i] = 0;
        if ((rc = doc_query(s, "d.sha256 LIKE $1", pat, out, &cnt))) goto out;
        if (cnt > 1) {
            rc = store_set_err(s, STORE_ERR_AMBIGUOUS, "'%s' matches several documents; give more"
                               " of the sha256 or the id", spec);
            goto out;
        }
    }
    if (!cnt && (rc = doc_query(s, "d.path=$1", spec, out, &cnt))) goto out;
    if (!cnt) {
        char abs[PATH_MAX];
        if (realpath(spec, abs) && (rc = doc_query(s, "d.path=$1", abs, out, &cnt))) goto out;
    }
    if (!cnt) rc = store_set_err(s, STORE_ERR_NOTFOUND, "no document '%s' (give an id, a sha256"
                                 " prefix or a path; see `mmrag ls`)", spec);
out:
    STORE_UNLOCK(s);
    return rc;
}

/* ---- pages, chunks, images ------------------------------------------------------------ */
/* Run sql with ($1 = doc or id, $2 = page) and read the rows. */
static int query_rows(store *s, const char *sql, int64_t id, int32_t page, const char *what,
                      size_t size, fill_fn fill, void (*clear)(void *), void **rows, int32_t *n) {
    if (!rows || !n) return STORE_ERR_ARG;
    STORE_LOCK(s);
    pg_args a = {0};
    pga_int(&a, id);
    pga_int(&a, page);
    int rc;
    *rows = NULL; *n = 0;
    PGresult *r = pg_run(s, sql, &a, what, &rc);
    if (r) rc = read_rows(s, r, size, fill, clear, rows, n);
    STORE_UNLOCK(s);
    return rc;
}

/* The one row sql ("... WHERE id=$1") finds, or NOTFOUND naming `noun`. */
static int query_one(store *s, const char *sql, int64_t id, const char *noun, size_t size,
                     fill_fn fill, void (*clear)(void *), void *out) {
    memset(out, 0, size);
    void *rows = NULL;
    int32_t n = 0;
    int rc = query_rows(s, sql, id, 0, noun, size, fill, clear, &rows, &n);
    if (rc) return rc;
    if (n == 0) return store_set_err(s, STORE_ERR_NOTFOUND, "no %s with id %lld", noun, (long long)id);
    memcpy(out, rows, size);
    free(rows);
    return STORE_OK;
}

static int page_fill(const PGresult *r, int i, void *dst) {
    *(store_page_row *)dst = (store_page_row){(int32_t)ival(r, i, 0), fval(r, i, 1), fval(r, i, 2),
                                              (int32_t)ival(r, i, 3)};
    return 0;
}

int pg_pages_get(store *s, int64_t doc, store_page_row **rows, int32_t *n) {
    return query_rows(s, "SELECT number, width_pt, height_pt, ocr FROM pages WHERE doc=$1 AND"
                         " $2::int = $2 ORDER BY number", doc, 0, "read pages",
                      sizeof(store_page_row), page_fill, NULL, (void **)rows, n);
}

#define CHUNK_COLS "id, doc, page, ord, kind, x0, y0, x1, y1, image_id, text, embedding_key, section FROM chunks"

static int chunk_fill(const PGresult *r, int i, void *dst) {
    store_chunk_row *c = dst;
    c->id = ival(r, i, 0);
    c->doc = ival(r, i, 1);
    c->page = (int32_t)ival(r, i, 2);
    c->ord = (int32_t)ival(r, i, 3);
    c->kind = store_chunk_kind_parse(val(r, i, 4));
    c->box = bval(r, i, 5);
    c->image_id = ival(r, i, 9);
    c->text = store_strdup(val(r, i, 10));
    c->embedding_key = store_strdup(val(r, i, 11));
    c->section = store_strdup(val(r, i, 12));
    return c->text && c->embedding_key && c->section ? 0 : -1;
}
static void chunk_clear(void *row) { store_chunk_row_clear(row); }

int pg_chunks_get(store *s, int64_t doc, int32_t page, store_chunk_row **rows, int32_t *n) {
    return query_rows(s, "SELECT " CHUNK_COLS " WHERE doc=$1 AND ($2 = 0 OR page=$2) ORDER BY ord",
                      doc, page, "read chunks", sizeof(store_chunk_row), chunk_fill, chunk_clear,
                      (void **)rows, n);
}

int pg_chunk_get(store *s, int64_t id, store_chunk_row *out) {
    if (!out) return STORE_ERR_ARG;
    return query_one(s, "SELECT " CHUNK_COLS " WHERE id=$1 AND $2::int = $2", id, "chunk",
                     sizeof *out, chunk_fill, chunk_clear, out);
}

int pg_chunk_lines(store *s, int64_t chunk_id, store_line **out, int32_t *n) {
    if (!out || !n) return STORE_ERR_ARG;
    *out = NULL; *n = 0;
    STORE_LOCK(s);
    pg_args a = {0};
    pga_int(&a, chunk_id);
    int rc;
    PGresult *r = pg_run(s, "SELECT lines, octet_length(text) FROM chunks WHERE id=$1", &a,
                         "read chunk lines", &rc);
    if (r && PQntuples(r) == 0) {
        rc = store_set_err(s, STORE_ERR_NOTFOUND, "no chunk with id %lld", (long long)chunk_id);
    } else if (r) {
        size_t len;
        uint8_t *blob = pg_bytea(r, 0, 0, &len);
        rc = store_lines_decode(blob, len, (size_t)ival(r, 0, 1), out, n);
        if (rc) rc = store_set_err(s, rc, "out of memory");
        free(blob);
    }
    PQclear(r);
    STORE_UNLOCK(s);
    return rc;
}

#define IMAGE_COLS "id, doc, page, idx, kind, x0, y0, x1, y1, width_px, height_px, preview," \
    " phash, caption_chunk FROM images"

static int image_fill(const PGresult *r, int i, void *dst) {
    store_image_row *m = dst;
    m->id = ival(r, i, 0);
    m->doc = ival(r, i, 1);
    m->page = (int32_t)ival(r, i, 2);
    m->idx = (int32_t)ival(r, i, 3);
    const char *k = val(r, i, 4);
    m->kind = k && !strcmp(k, "vector") ? STORE_IMAGE_VECTOR : STORE_IMAGE_RASTER;
    m->box = bval(r, i, 5);
    m->width_px = (int32_t)ival(r, i, 9);
    m->height_px = (int32_t)ival(r, i, 10);
    m->png = pg_bytea(r, i, 11, &m->png_len);
    m->phash = (uint64_t)ival(r, i, 12);
    m->caption_chunk = ival(r, i, 13);
    return !val(r, i, 11) || m->png ? 0 : -1;
}
static void image_clear(void *row) { store_image_row_clear(row); }

int pg_images_get(store *s, int64_t doc, int32_t page, store_image_row **rows, int32_t *n) {
    return query_rows(s, "SELECT " IMAGE_COLS " WHERE doc=$1 AND ($2 = 0 OR page=$2) ORDER BY idx",
                      doc, page, "read images", sizeof(store_image_row), image_fill, image_clear,
                      (void **)rows, n);
}

int pg_image_get(store *s, int64_t id, store_image_row *out) {
    if (!out) return STORE_ERR_ARG;
    return query_one(s, "SELECT " IMAGE_COLS " WHERE id=$1 AND $2::int = $2", id, "image",
                     sizeof *out, image_fill, image_clear, out);
}

int pg_counts_get(store *s, store_counts *c) {
    if (!c) return STORE_ERR_ARG;
    memset(c, 0, sizeof *c);
    STORE_LOCK(s);
    int rc;
    PGresult *r = pg_run(s, "SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM pages),"
                            " (SELECT count(*) FROM images), (SELECT count(*) FROM chunks),"
                            " (SELECT count(*) FROM vectors)", NULL, "count", &rc);
    if (r) *c = (store_counts){ival(r, 0, 0), ival(r, 0, 1), ival(r, 0, 2), ival(r, 0, 3), ival(r, 0, 4)};
    PQclear(r);
    STORE_UNLOCK(s);
    return rc;
}

/* ---- keyword search ------------------------------------------------------------------ */
/* The tsquery text: each piece's tokens (letters, digits, valid UTF-8 beyond ASCII)
 * quoted and joined with <-> (a phrase, or a word with punctuation inside), pieces OR-ed
 * with |. Only token characters reach the string, so no tsquery syntax from the user
 * survives, and a byte that is not UTF-8 separates tokens instead of failing the query. */
typedef struct { char *buf; size_t cap, at; int pieces; } tsq_build;

/* Bytes of the token character at p (n left), 0 if none. */
static size_t tok_len(const unsigned char *p, size_t n) {
    if (p[0] < 0x80) return isalnum(p[0]) ? 1 : 0;
    size_t len = p[0] >= 0xf0 && p[0] < 0xf5 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++) if ((p[i] & 0xc0) != 0x80) return 0;
    return len;
}
static void tsq_put(tsq_build *b, const char *t, size_t n) {
    for (size_t i = 0; i < n; i++, b->at++) if (b->at + 1 < b->cap) b->buf[b->at] = t[i];
}
static void tsq_piece(void *ctx, const char *p, size_t n, int quoted) {
    tsq_build *b = ctx;
    const unsigned char *u = (const unsigned char *)p;
    int toks = 0;
    for (size_t i = 0; i < n;) {
        while (i < n && !tok_len(u + i, n - i)) i++;
        if (i >= n) break;
        const char *open = toks ? " <-> '" : b->pieces ? " | ('" : "('";
        tsq_put(b, open, strlen(open));
        for (size_t l; i < n && (l = tok_len(u + i, n - i)); i += l) tsq_put(b, p + i, l);
        tsq_put(b, "'", 1);
        toks++;
    }
    if (toks) { tsq_put(b, ")", 1); b->pieces++; }
}

void pg_tsquery(const char *query, char *buf, size_t cap) {
    tsq_build b = {buf, cap, 0, 0};
    store_query_pieces(query, tsq_piece, &b);
    if (cap) buf[b.at < cap ? b.at : cap - 1] = 0;
}

static int hit_fill(const PGresult *r, int i, void *dst) {
    store_hit *h = dst;
    h->chunk_id = ival(r, i, 0);
    h->doc = ival(r, i, 1);
    h->title = store_strdup(val(r, i, 2));
    h->page = (int32_t)ival(r, i, 3);
    h->kind = store_chunk_kind_parse(val(r, i, 4));
    h->box = bval(r, i, 5);
    h->image_id = ival(r, i, 9);
    h->snippet = store_strdup(val(r, i, 10));
    h->text = store_strdup(val(r, i, 11));
    h->score = strtod(PQgetvalue(r, i, 12), NULL);
    return h->title && h->snippet && h->text ? 0 : -1;
}
static void hit_clear(void *row) {
    store_hit *h = row;
    free(h->title); free(h->snippet); free(h->text);
}

int pg_search_text(store *s, const char *query, const store_search_opts *opt, store_hit **hits,
                   int32_t *n) {
    if (!hits || !n) return STORE_ERR_ARG;
    *hits = NULL; *n = 0;
    store_search_opts o;
    if (opt) o = *opt; else store_search_opts_default(&o);
    if (o.k <= 0) o.k = 10;
    if (o.n_docs < 0 || (o.n_docs > 0 && !o.docs) || o.n_docs > 10000)
        return store_set_err(s, STORE_ERR_ARG, "bad document filter");
    size_t cap = 64 + (query ? strlen(query) * 3 : 0);
    char *tsq = malloc(cap), *docs = malloc(16 + (size_t)o.n_docs * 21);
    if (!tsq || !docs) { free(tsq); free(docs); return store_set_err(s, STORE_ERR_NOMEM, "out of memory"); }
    pg_tsquery(query, tsq, cap);
    size_t at = (size_t)sprintf(docs, "{");
    for (int32_t i = 0; i < o.n_docs; i++)
        at += (size_t)sprintf(docs + at, i ? ",%lld" : "%lld", (long long)o.docs[i]);
    sprintf(docs + at, "}");
    STORE_LOCK(s);
    int rc = STORE_OK;
    if (!tsq[0]) goto out;     /* nothing searchable: no hits, not an error */
    /* Okapi BM25 (k1 1.2, b 0.75) as FTS5 ranks: idf from each query lexeme's document
     * frequency (GIN), the collection's size and mean length from fts_stats; a lexeme's
     * frequency counts its section positions (weight B) times section_weight. The
     * query's lexemes are to_tsvector of the tsquery text itself (its operators and
     * quotes are separators to the parser). */
    char sql[2400];
    snprintf(sql, sizeof sql,
        "WITH q AS (SELECT to_tsquery('english', $1) AS q),"
        " lx AS (SELECT DISTINCT lexeme AS lex FROM unnest(to_tsvector('english', $1))),"
        " st AS (SELECT greatest(coalesce(sum(chunks), 0), 1)::float8 AS n,"
        "  greatest(coalesce(sum(lexemes), 0), 1)::float8 / greatest(coalesce(sum(chunks), 0), 1) AS avgdl"
        "  FROM fts_stats),"
        " df AS (SELECT lex, (SELECT count(*) FROM chunks WHERE tsv @@ quote_literal(lex)::tsquery)::float8"
        "  AS df FROM lx),"
        " cand AS (SELECT c.id, c.tsv FROM chunks c, q WHERE c.tsv @@ q.q AND ($2 = 0 OR c.page >= $2)"
        "  AND ($3 = 0 OR c.page <= $3) AND ($4::text IS NULL OR c.kind = $4)"
        "  AND ($5 = '{}' OR c.doc = ANY($5::bigint[]))),"
        " top AS (SELECT cand.id, sum(ln(1 + (st.n - df.df + 0.5) / (df.df + 0.5)) * t.tf * 2.2 /"
        "  (t.tf + 1.2 * (0.25 + 0.75 * length(cand.tsv) / st.avgdl))) AS score"
        "  FROM cand CROSS JOIN st CROSS JOIN LATERAL (SELECT u.lexeme, (SELECT coalesce(sum(CASE"
        "  WHEN w = 'A' THEN 1.0 ELSE %g END), 0) FROM unnest(u.weights) w) AS tf FROM unnest(cand.tsv) u) t"
        "  JOIN df ON df.lex = t.lexeme GROUP BY cand.id ORDER BY score DESC, cand.id LIMIT $6)"
        " SELECT c.id, c.doc, d.title, c.page, c.kind, c.x0, c.y0, c.x1, c.y1, c.image_id,"
        " ts_headline('english', c.text, q.q, 'StartSel=[, StopSel=], MaxWords=16, MinWords=6,"
        " MaxFragments=1, FragmentDelimiter=…'), c.text, top.score"
        " FROM top JOIN chunks c ON c.id = top.id JOIN documents d ON d.id = c.doc, q"
        " ORDER BY top.score DESC, c.id", (double)o.section_weight);
    pg_args a = {0};
    pga_text(&a, tsq);
    pga_int(&a, o.page_min);
    pga_int(&a, o.page_max);
    pga_text(&a, o.kind >= 0 ? store_chunk_kind_name(o.kind) : NULL);
    pga_text(&a, docs);
    pga_int(&a, o.k);
    PGresult *r = pg_run(s, sql, &a, "search", &rc);
    if (r) rc = read_rows(s, r, sizeof(store_hit), hit_fill, hit_clear, (void **)hits, n);
out:
    STORE_UNLOCK(s);
    free(tsq);
    free(docs);
    return rc;
}

/* ---- vectors ------------------------------------------------------------------------- */
int pg_vector_get(store *s, int32_t owner_kind, int64_t owner_id, const char *space,
                  const char *model, float *buf, int32_t buflen, int32_t *dim) {
    STORE_LOCK(s);
    int rc = store_check_space(s, space, model);
    if (rc) goto out;
    if (!store_owner_name(owner_kind)) { rc = store_set_err(s, STORE_ERR_ARG, "bad owner kind"); goto out; }
    pg_args a = {0};
    pga_text(&a, store_owner_name(owner_kind));
    pga_int(&a, owner_id);
    pga_text(&a, space);
    pga_text(&a, model);
    PGresult *r = pg_run(s, "SELECT dim, v::text FROM vectors WHERE owner_kind=$1 AND owner_id=$2"
                            " AND space=$3 AND model=$4", &a, "read vector", &rc);
    if (!r) goto out;
    if (PQntuples(r) == 0) {
        rc = store_set_err(s, STORE_ERR_NOTFOUND, "no %s vector for %s %lld (model %s)", space,
                           store_owner_name(owner_kind), (long long)owner_id, model);
    } else {
        int32_t d = (int32_t)ival(r, 0, 0);
        if (dim) *dim = d;
        if (!buf || buflen < d)
            rc = store_set_err(s, STORE_ERR_ARG, "vector buffer too small (%d < %d)", buflen, d);
        else if (pg_vec_parse(PQgetvalue(r, 0, 1), buf, buflen) != d)
            rc = store_set_err(s, STORE_ERR_CORRUPT, "vector %s %lld: length does not match dim",
                               store_owner_name(owner_kind), (long long)owner_id);
    }
    PQclear(r);
out:
    STORE_UNLOCK(s);
    return rc;
}

int pg_vectors_foreach(store *s, const char *space, const char *model, int32_t owner_kind,
                       store_vec_cb cb, void *user) {
    if (!cb) return STORE_ERR_ARG;
    STORE_LOCK(s);
    float *tmp = NULL;
    int rc = store_check_space(s, space, model);
    if (rc) goto out;
    pg_args a = {0};
    pga_text(&a, space);
    pga_text(&a, model);
    pga_text(&a, store_owner_name(owner_kind));
    PGresult *r = pg_run(s, "SELECT owner_kind, owner_id, doc, dim, v::text FROM vectors"
                            " WHERE space=$1 AND model=$2 AND ($3::text IS NULL OR owner_kind=$3)"
                            " ORDER BY owner_id", &a, "read vectors", &rc);
    if (!r) goto out;
    for (int i = 0; i < PQntuples(r) && !rc; i++) {
        int32_t d = (int32_t)ival(r, i, 3);
        float *t = d > 0 ? realloc(tmp, (size_t)d * sizeof(float)) : NULL;
        if (!t) { rc = store_set_err(s, STORE_ERR_CORRUPT, "vector of owner %lld: bad dim", (long long)ival(r, i, 1)); break; }
        tmp = t;
        if (pg_vec_parse(PQgetvalue(r, i, 4), tmp, d) != d) {
            rc = store_set_err(s, STORE_ERR_CORRUPT, "vector of owner %lld: length does not match dim",
                               (long long)ival(r, i, 1));
            break;
        }
        int32_t kind = !strcmp(PQgetvalue(r, i, 0), "image") ? STORE_OWNER_IMAGE : STORE_OWNER_CHUNK;
        rc = cb(user, kind, ival(r, i, 1), ival(r, i, 2), d, tmp);
    }
    PQclear(r);
out:
    free(tmp);
    STORE_UNLOCK(s);
    return rc;
}

int pg_vectors_count(store *s, const char *space, const char *model, int32_t owner_kind,
                     int64_t *count) {
    if (!count) return STORE_ERR_ARG;
    *count = 0;
    STORE_LOCK(s);
    int rc = store_check_space(s, space, model);
    if (!rc) {
        pg_args a = {0};
        pga_text(&a, space);
        pga_text(&a, model);
        pga_text(&a, store_owner_name(owner_kind));
        PGresult *r = pg_run(s, "SELECT count(*) FROM vectors WHERE space=$1 AND model=$2"
                                " AND ($3::text IS NULL OR owner_kind=$3)", &a, "count vectors", &rc);
        if (r) *count = ival(r, 0, 0);
        PQclear(r);
    }
    STORE_UNLOCK(s);
    return rc;
}

/* store_pg.c, design note 3: the index expression and predicate are repeated literally. */
int pg_vectors_knn(store *s, const char *space, const char *model, int32_t owner_kind,
                   const float *q, int32_t dim, int32_t k, store_knn_hit *out, int32_t *nout) {
    if (!q || !out || !nout || dim <= 0 || dim > 16000 || k < 0) return STORE_ERR_ARG;
    *nout = 0;
    STORE_LOCK(s);
    char *lit = NULL, *qv = NULL, *sql = NULL;
    int rc = store_check_space(s, space, model);
    if (rc || k == 0) goto out;
    lit = PQescapeLiteral(s->pg, model, strlen(model));
    qv = pg_vec_text(q, dim);
    sql = malloc(1024 + strlen(lit ? lit : ""));
    if (!lit || !qv || !sql) { rc = store_set_err(s, STORE_ERR_NOMEM, "out of memory"); goto out; }
    /* images: Hamming candidates from the LSH index, re-scored exactly (pool as vindex's) */
    int image = !strcmp(space, "image");
    int32_t pool = k * 10 > 400 ? k * 10 : 400;
    int32_t ef = image ? (pool > 1000 ? 1000 : pool) : k > 1000 ? 1000 : k < 128 ? 128 : k;
    if (ef != s->pg_ef) {   /* the beam must hold the k hits (or the pool) */
        char set[64];
        snprintf(set, sizeof set, "SET hnsw.ef_search = %d", ef);
        if ((rc = pg_exec(s, set, NULL, "set ef_search"))) goto out;
        s->pg_ef = ef;
    }
    char owner[64] = "", code[PG_LSH_BITS + 1];
    if (owner_kind >= 0) snprintf(owner, sizeof owner, " AND owner_kind = '%s'", store_owner_name(owner_kind));
    if (image) {
        pg_lsh_code(q, dim, code);
        sprintf(sql, "SELECT owner_id, s FROM (SELECT owner_id, 1 - ((v::vector(%d)) <=> $1::vector(%d))"
                " AS s FROM (SELECT owner_id, v FROM vectors WHERE space = 'image' AND model = %s%s"
                " ORDER BY (lsh::bit(%d)) <~> $2::bit(%d) LIMIT %d) c) d ORDER BY s DESC LIMIT %d",
                dim, dim, lit, owner, PG_LSH_BITS, PG_LSH_BITS, pool, k);
    } else {
        sprintf(sql, "SELECT owner_id, 1 - ((v::vector(%d)) <=> $1::vector(%d)) FROM vectors"
                " WHERE space = '%s' AND model = %s%s ORDER BY (v::vector(%d)) <=> $1::vector(%d)"
                " LIMIT %d", dim, dim, space, lit, owner, dim, dim, k);
    }
    pg_args a = {0};
    pga_text(&a, qv);
    if (image) pga_text(&a, code);
    PGresult *r = pg_run(s, sql, &a, "vector search", &rc);
    for (int i = 0; r && i < PQntuples(r) && i < k; i++)
        out[(*nout)++] = (store_knn_hit){ival(r, i, 0), fval(r, i, 1)};
    PQclear(r);
out:
    if (lit) PQfreemem(lit);
    free(qv);
    free(sql);
    STORE_UNLOCK(s);
    return rc;
}

/* ---- work lists -------------------------------------------------------------------- */
static char *image_text(store *s, int64_t image_id) {
    pg_args a = {0};
    pga_int(&a, image_id);
    int rc;
    PGresult *r = pg_run(s, "SELECT coalesce(string_agg(t, E'\\n'), '') FROM (SELECT c.text AS t"
                            " FROM chunks c JOIN images i ON i.id=$1 WHERE c.image_id=$1"
                            " OR c.id=i.caption_chunk ORDER BY (c.id = i.caption_chunk) DESC, c.ord"
                            " LIMIT 8) x", &a, "image text", &rc);
    char *t = r ? strdup(PQgetvalue(r, 0, 0)) : NULL;
    PQclear(r);
    if (t && strlen(t) > 4096) t[4096] = 0;
    return t;
}

static int todo_fill(const PGresult *r, int i, void *dst) {
    store_todo *t = dst;
    t->id = ival(r, i, 0);
    t->doc = ival(r, i, 1);
    int image = val(r, i, 2) == NULL;
    if (!image) {
        t->text = store_strdup(val(r, i, 2));
        t->section = store_strdup(val(r, i, 6));
        if (!t->text || !t->section) return -1;
    }
    t->png = pg_bytea(r, i, 3, &t->png_len);
    t->width_px = (int32_t)ival(r, i, 4);
    t->height_px = (int32_t)ival(r, i, 5);
    return !val(r, i, 3) || t->png ? 0 : -1;
}
static void todo_clear(void *row) {
    store_todo *t = row;
    free(t->text); free(t->section); free(t->png);
}

int pg_todo_list(store *s, int what, const char *space, const char *model, int64_t after,
                 int32_t limit, store_todo **items, int32_t *n) {
    *items = NULL; *n = 0;
    STORE_LOCK(s);
    int rc = store_check_space(s, space, model);
    if (rc) goto out;
    if (limit <= 0) limit = 64;
    static const char *const sql[3] = {
        "SELECT c.id, c.doc, c.text, NULL, 0, 0, c.section FROM chunks c WHERE c.id > $1 AND NOT EXISTS"
        " (SELECT 1 FROM vectors v WHERE v.owner_kind='chunk' AND v.owner_id=c.id AND v.space=$2"
        " AND v.model=$3) ORDER BY c.id LIMIT $4",
        "SELECT i.id, i.doc, NULL, i.preview, i.width_px, i.height_px, NULL FROM images i WHERE i.id > $1"
        " AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.owner_kind='image' AND v.owner_id=i.id"
        " AND v.space=$2 AND v.model=$3) ORDER BY i.id LIMIT $4",
        "SELECT c.id, c.doc, c.text, NULL, 0, 0, c.section FROM chunks c WHERE c.id > $1 AND $2 != ''"
        " AND NOT EXISTS (SELECT 1 FROM sentence_vectors v WHERE v.chunk_id=c.id AND v.model=$3)"
        " ORDER BY c.id LIMIT $4"};
    pg_args a = {0};
    pga_int(&a, after);
    pga_text(&a, space);
    pga_text(&a, model);
    pga_int(&a, limit);
    PGresult *r = pg_run(s, sql[what], &a, "list missing vectors", &rc);
    if (r) rc = read_rows(s, r, sizeof(store_todo), todo_fill, todo_clear, (void **)items, n);
    for (int32_t i = 0; !rc && what == STORE_TODO_IMAGES && i < *n; i++)
        if (!((*items)[i].text = image_text(s, (*items)[i].id)))
            rc = store_set_err(s, STORE_ERR_NOMEM, "image text for %lld", (long long)(*items)[i].id);
    if (rc) { store_todos_free(*items, *n); *items = NULL; *n = 0; }
out:
    STORE_UNLOCK(s);
    return rc;
}

/* ---- sentence vectors -------------------------------------------------------------- */
int pg_sentvecs_best(store *s, const char *model, const float *q, int32_t dim,
                     const int64_t *ids, int32_t n, float *best) {
    if (n > 0 && (!ids || !best || !q)) return STORE_ERR_ARG;
    for (int32_t i = 0; i < n; i++) best[i] = -2.0f;
    STORE_LOCK(s);
    char *arr = NULL;
    int rc = store_check_space(s, "text", model);
    if (rc || n == 0) goto out;
    if (!(arr = malloc(16 + (size_t)n * 21))) { rc = store_set_err(s, STORE_ERR_NOMEM, "out of memory"); goto out; }
    size_t at = (size_t)sprintf(arr, "{");
    for (int32_t i = 0; i < n; i++) at += (size_t)sprintf(arr + at, i ? ",%lld" : "%lld", (long long)ids[i]);
    sprintf(arr + at, "}");
    pg_args a = {0};
    pga_text(&a, arr);
    pga_text(&a, model);
    PGresult *r = pg_run(s, "SELECT chunk_id, dim, n, blob FROM sentence_vectors WHERE"
                            " chunk_id = ANY($1::bigint[]) AND model=$2", &a,
                         "read sentence vectors", &rc);
    for (int row = 0; r && row < PQntuples(r); row++) {
        int64_t id = ival(r, row, 0);
        int32_t d = (int32_t)ival(r, row, 1), k = (int32_t)ival(r, row, 2);
        size_t len;
        float *v = (float *)pg_bytea(r, row, 3, &len);   /* malloc'd: aligned */
        /* a row that does not add up is read as "no sentences", never past its blob */
        if (v && d == dim && k > 0 && len == (size_t)k * (size_t)d * sizeof(float)) {
            float b = store_best_dot(q, v, dim, k);
            for (int32_t i = 0; i < n; i++) if (ids[i] == id) best[i] = b;
        }
        free(v);
    }
    PQclear(r);
out:
    free(arr);
    STORE_UNLOCK(s);
    return rc;
}

int pg_sentvecs_count(store *s, const char *model, int64_t *count) {
    if (!count) return STORE_ERR_ARG;
    *count = 0;
    STORE_LOCK(s);
    int rc = store_check_space(s, "text", model);
    if (!rc) {
        pg_args a = {0};
        pga_text(&a, model);
        PGresult *r = pg_run(s, "SELECT count(*) FROM sentence_vectors WHERE model=$1", &a,
                             "count sentence vectors", &rc);
        if (r) *count = ival(r, 0, 0);
        PQclear(r);
    }
    STORE_UNLOCK(s);
    return rc;
}
