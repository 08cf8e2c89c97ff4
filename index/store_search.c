/* index/store_search.c — FTS5 BM25 search and vector readers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "index/store_int.h"

#define MAX_TERMS 64

/* Does the piece contain something the tokenizer keeps (letter, digit, non-ASCII)? */
static int has_token(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 0x80 || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z')) return 1;
    }
    return 0;
}

/* Append `"piece"` (quotes inside doubled) joined with " OR ". */
static size_t put_piece(char *buf, size_t buflen, size_t at, const char *p, size_t n, int first) {
    const char *sep = first ? "\"" : " OR \"";
    for (const char *q = sep; *q; q++, at++)
        if (at + 1 < buflen) buf[at] = *q;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '"') { if (at + 1 < buflen) buf[at] = '"'; at++; }
        if (at + 1 < buflen) buf[at] = p[i];
        at++;
    }
    if (at + 1 < buflen) buf[at] = '"';
    return at + 1;
}

/* English function words: OR-ed into a BM25 query they rank pages by how often they say
 * "the" and "how". Spatial and negation words stay (they carry meaning in questions). */
static const char *const stop_words[] = {
    "a", "an", "the", "and", "or", "but", "if", "of", "at", "by", "for", "with", "to", "from",
    "in", "on", "into", "is", "are", "was", "were", "be", "been", "being", "do", "does", "did",
    "have", "has", "had", "i", "me", "my", "we", "our", "you", "your", "he", "she", "it",
    "its", "they", "them", "their", "what", "which", "who", "whom", "this", "that", "these",
    "those", "how", "when", "where", "why", "can", "could", "should", "would", "will", "shall",
    "may", "might", "must", "there", "here", "so", "as", "than", "then", "just", "also", "any",
    "some", "such", NULL};

/* Is the unquoted piece one stop word (ignoring case and punctuation around it)? */
static int is_stop_word(const char *p, size_t n) {
    while (n && !has_token(p, 1)) { p++; n--; }
    while (n && !has_token(p + n - 1, 1)) n--;
    for (int i = 0; stop_words[i]; i++)
        if (strlen(stop_words[i]) == n && strncasecmp(p, stop_words[i], n) == 0) return 1;
    return 0;
}

/* Splits the query into pieces: "..." phrases whole, other words at whitespace. Calls
 * fn for each piece with a token in it; stops after MAX_TERMS. */
typedef void (*piece_fn)(void *ctx, const char *p, size_t n, int quoted);
static void each_piece(const char *query, piece_fn fn, void *ctx) {
    int terms = 0;
    const char *p = query ? query : "";
    while (*p && terms < MAX_TERMS) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (!*p) break;
        const char *start;
        size_t n;
        int quoted = *p == '"';
        if (quoted) {              /* a user phrase: up to the closing quote (or the end) */
            start = ++p;
            while (*p && *p != '"') p++;
            n = (size_t)(p - start);
            if (*p) p++;
        } else {
            start = p;
            while (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != '"') p++;
            n = (size_t)(p - start);
        }
        if (!has_token(start, n)) continue;
        fn(ctx, start, n, quoted);
        terms++;
    }
}

typedef struct { store_piece_fn fn; void *ctx; int content, drop_stop; } pieces_ctx;
static void count_content(void *ctx, const char *p, size_t n, int quoted) {
    pieces_ctx *c = ctx;
    c->content += quoted || !is_stop_word(p, n);
}
static void pass_piece(void *ctx, const char *p, size_t n, int quoted) {
    pieces_ctx *c = ctx;
    if (c->drop_stop && !quoted && is_stop_word(p, n)) return;
    c->fn(c->ctx, p, n, quoted);
}

void store_query_pieces(const char *query, store_piece_fn fn, void *ctx) {
    pieces_ctx c = {fn, ctx, 0, 0};
    each_piece(query, count_content, &c);
    c.drop_stop = c.content > 0; /* a query of stop words only ("who is it?") keeps them */
    each_piece(query, pass_piece, &c);
}

typedef struct { char *buf; size_t buflen, at; int terms; } fts_build;
static void add_piece(void *ctx, const char *p, size_t n, int quoted) {
    fts_build *b = ctx;
    b->at = put_piece(b->buf, b->buflen, b->at, p, n, b->terms == 0);
    b->terms++;
}

size_t store_fts_query(const char *query, char *buf, size_t buflen) {
    fts_build b = {buf, buflen, 0, 0};
    store_query_pieces(query, add_piece, &b);
    if (buflen) buf[b.at < buflen ? b.at : buflen - 1] = 0;
    return b.at + 1;
}

void store_search_opts_default(store_search_opts *o) {
    memset(o, 0, sizeof *o);
    o->k = 10;
    o->kind = -1;
    o->section_weight = 1.0f;
}

void store_hits_free(store_hit *hits, int32_t n) {
    for (int32_t i = 0; hits && i < n; i++) {
        free(hits[i].title); free(hits[i].snippet); free(hits[i].text);
    }
    free(hits);
}

int store_search_bm25(store *s, const char *query, const store_search_opts *opt,
                      store_hit **hits, int32_t *n) {
    STORE_ROUTE_PG(s, pg_search_text(s, query, opt, hits, n));
    if (!s || !hits || !n) return STORE_ERR_ARG;
    *hits = NULL; *n = 0;
    store_search_opts o;
    if (opt) o = *opt; else store_search_opts_default(&o);
    if (o.k <= 0) o.k = 10;
    if (o.n_docs < 0 || (o.n_docs > 0 && !o.docs) || o.n_docs > 10000) {
        return store_set_err(s, STORE_ERR_ARG, "bad document filter");
    }
    size_t need = store_fts_query(query, NULL, 0);
    char *match = malloc(need);
    size_t sqlcap = 1024 + (size_t)o.n_docs * 2;
    char *sql = malloc(sqlcap);
    if (!match || !sql) {
        free(match); free(sql);
        return store_set_err(s, STORE_ERR_NOMEM, "out of memory");
    }
    store_fts_query(query, match, need);
    STORE_LOCK(s);
    int rc = STORE_OK;
    store_hit *arr = NULL;
    int32_t cnt = 0;
    sqlite3_stmt *st = NULL;
    if (!match[0]) goto out;    /* nothing searchable: no hits, not an error */
    int k = snprintf(sql, sqlcap,
        "SELECT c.id, c.doc, d.title, c.page, c.kind, c.x0, c.y0, c.x1, c.y1, c.image_id,"
        " snippet(chunks_fts, 0, '[', ']', '…', 16), c.text, bm25(chunks_fts, 1.0, %g)"
        " FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid JOIN documents d ON d.id = c.doc"
        " WHERE chunks_fts MATCH ?1 AND (?2 = 0 OR c.page >= ?2) AND (?3 = 0 OR c.page <= ?3)"
        " AND (?4 IS NULL OR c.kind = ?4)", (double)o.section_weight);
    if (o.n_docs > 0) {
        k += snprintf(sql + k, sqlcap - (size_t)k, " AND c.doc IN (");
        for (int32_t i = 0; i < o.n_docs; i++)
            k += snprintf(sql + k, sqlcap - (size_t)k, i ? ",?" : "?");
        k += snprintf(sql + k, sqlcap - (size_t)k, ")");
    }
    snprintf(sql + k, sqlcap - (size_t)k, " ORDER BY bm25(chunks_fts, 1.0, %g) LIMIT %d", (double)o.section_weight, o.k);
    if ((rc = store_prepare(s, sql, &st))) goto out;
    sqlite3_bind_text(st, 1, match, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, o.page_min);
    sqlite3_bind_int(st, 3, o.page_max);
    if (o.kind >= 0) sqlite3_bind_text(st, 4, store_chunk_kind_name(o.kind), -1, SQLITE_STATIC);
    for (int32_t i = 0; i < o.n_docs; i++) sqlite3_bind_int64(st, 5 + i, o.docs[i]);
    arr = calloc((size_t)o.k, sizeof *arr);
    if (!arr) { rc = store_set_err(s, STORE_ERR_NOMEM, "out of memory"); goto out; }
    int step;
    while (cnt < o.k && (step = sqlite3_step(st)) == SQLITE_ROW) {
        store_hit *h = &arr[cnt++];
        h->chunk_id = sqlite3_column_int64(st, 0);
        h->doc = sqlite3_column_int64(st, 1);
        h->title = store_strdup((const char *)sqlite3_column_text(st, 2));
        h->page = sqlite3_column_int(st, 3);
        h->kind = store_chunk_kind_parse((const char *)sqlite3_column_text(st, 4));
        h->box = (store_box){(float)sqlite3_column_double(st, 5), (float)sqlite3_column_double(st, 6),
                             (float)sqlite3_column_double(st, 7), (float)sqlite3_column_double(st, 8)};
        h->image_id = sqlite3_column_int64(st, 9);
        h->snippet = store_strdup((const char *)sqlite3_column_text(st, 10));
        h->text = store_strdup((const char *)sqlite3_column_text(st, 11));
        h->score = -sqlite3_column_double(st, 12);
        if (!h->title || !h->snippet || !h->text) {
            rc = store_set_err(s, STORE_ERR_NOMEM, "out of memory");
            goto out;
        }
    }
    if (cnt < o.k && step != SQLITE_DONE) rc = store_sql_err(s, "search");
out:
    sqlite3_finalize(st);
    STORE_UNLOCK(s);
    free(match);
    free(sql);
    if (rc) { store_hits_free(arr, cnt); return rc; }
    if (cnt == 0) { free(arr); arr = NULL; }
    *hits = arr; *n = cnt;
    return rc;
}

/* ---- vectors ----------------------------------------------------------------------- */
int store_vectors_knn(store *s, const char *space, const char *model, int32_t owner_kind,
                      const float *q, int32_t dim, int32_t k, store_knn_hit *out, int32_t *nout) {
    if (!s) return STORE_ERR_ARG;
    STORE_ROUTE_PG(s, pg_vectors_knn(s, space, model, owner_kind, q, dim, k, out, nout));
    if (nout) *nout = 0;
    return store_set_err(s, STORE_ERR_STATE, "the embedded store searches vectors through its"
                         " FAISS index (vindex), not store_vectors_knn");
}
int store_vector_get(store *s, int32_t owner_kind, int64_t owner_id, const char *space,
                     const char *model, float *buf, int32_t buflen, int32_t *dim) {
    STORE_ROUTE_PG(s, pg_vector_get(s, owner_kind, owner_id, space, model, buf, buflen, dim));
    if (!s) return STORE_ERR_ARG;
    STORE_LOCK(s);
    sqlite3_stmt *st = NULL;
    int rc = store_check_space(s, space, model);
    if (rc) goto out;
    if (!store_owner_name(owner_kind)) { rc = store_set_err(s, STORE_ERR_ARG, "bad owner kind"); goto out; }
    if ((rc = store_prepare(s, "SELECT dim, blob FROM vectors WHERE owner_kind=? AND owner_id=?"
                               " AND space=? AND model=?", &st)))
        goto out;
    sqlite3_bind_text(st, 1, store_owner_name(owner_kind), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, owner_id);
    sqlite3_bind_text(st, 3, space, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, model, -1, SQLITE_STATIC);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        int32_t d = sqlite3_column_int(st, 0);
        if (dim) *dim = d;
        if (sqlite3_column_bytes(st, 1) != d * (int)sizeof(float))
            rc = store_set_err(s, STORE_ERR_CORRUPT, "vector %s %lld: blob size does not match dim",
                               store_owner_name(owner_kind), (long long)owner_id);
        else if (!buf || buflen < d)
            rc = store_set_err(s, STORE_ERR_ARG, "vector buffer too small (%d < %d)", buflen, d);
        else
            memcpy(buf, sqlite3_column_blob(st, 1), (size_t)d * sizeof(float));
    } else if (step == SQLITE_DONE) {
        rc = store_set_err(s, STORE_ERR_NOTFOUND, "no %s vector for %s %lld (model %s)", space,
                           store_owner_name(owner_kind), (long long)owner_id, model);
    } else {
        rc = store_sql_err(s, "read vector");
    }
out:
    sqlite3_finalize(st);
    STORE_UNLOCK(s);
    return rc;
}

int store_vectors_foreach(store *s, const char *space, const char *model, int32_t owner_kind,
                          store_vec_cb cb, void *user) {
    STORE_ROUTE_PG(s, pg_vectors_foreach(s, space, model, owner_kind, cb, user));
    if (!s || !cb) return STORE_ERR_ARG;
    STORE_LOCK(s);
    sqlite3_stmt *st = NULL;
    float *tmp = NULL;
    int32_t tmpcap = 0;
    int rc = store_check_space(s, space, model);
    if (rc) goto out;
    if ((rc = store_prepare(s, "SELECT owner_kind, owner_id, doc, dim, blob FROM vectors"
                               " WHERE space=?1 AND model=?2 AND (?3 IS NULL OR owner_kind=?3)"
                               " ORDER BY owner_id", &st)))
        goto out;
    sqlite3_bind_text(st, 1, space, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, model, -1, SQLITE_STATIC);
    if (store_owner_name(owner_kind))
        sqlite3_bind_text(st, 3, store_owner_name(owner_kind), -1, SQLITE_STATIC);
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        int32_t d = sqlite3_column_int(st, 3);
        if (d <= 0 || sqlite3_column_bytes(st, 4) != d * (int)sizeof(float)) {
            rc = store_set_err(s, STORE_ERR_CORRUPT, "vector of owner %lld: blob size does not match dim",
                               (long long)sqlite3_column_int64(st, 1));
            goto out;
        }
        if (d > tmpcap) {   /* copy: SQLite blobs are not guaranteed float-aligned */
            float *t = realloc(tmp, (size_t)d * sizeof(float));
            if (!t) { rc = store_set_err(s, STORE_ERR_NOMEM, "out of memory"); goto out; }
            tmp = t; tmpcap = d;
        }
        memcpy(tmp, sqlite3_column_blob(st, 4), (size_t)d * sizeof(float));
        const char *ok = (const char *)sqlite3_column_text(st, 0);
        int32_t kind = ok && strcmp(ok, "image") == 0 ? STORE_OWNER_IMAGE : STORE_OWNER_CHUNK;
        int r = cb(user, kind, sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2), d, tmp);
        if (r) { rc = r; goto out; }
    }
    if (step != SQLITE_DONE) rc = store_sql_err(s, "read vectors");
out:
    free(tmp);
    sqlite3_finalize(st);
    STORE_UNLOCK(s);
    return rc;
}

int store_vectors_count(store *s, const char *space, const char *model, int32_t owner_kind,
                        int64_t *count) {
    STORE_ROUTE_PG(s, pg_vectors_count(s, space, model, owner_kind, count));
    if (!s || !count) return STORE_ERR_ARG;
    *count = 0;
    STORE_LOCK(s);
    sqlite3_stmt *st = NULL;
    int rc = store_check_space(s, space, model);
    if (rc) goto out;
    if ((rc = store_prepare(s, "SELECT count(*) FROM vectors WHERE space=?1 AND model=?2"
                               " AND (?3 IS NULL OR owner_kind=?3)", &st)))
        goto out;
    sqlite3_bind_text(st, 1, space, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, model, -1, SQLITE_STATIC);
    if (store_owner_name(owner_kind))
        sqlite3_bind_text(st, 3, store_owner_name(owner_kind), -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) *count = sqlite3_column_int64(st, 0);
    else rc = store_sql_err(s, "count vectors");
out:
    sqlite3_finalize(st);
    STORE_UNLOCK(s);
    return rc;
}

void store_todos_free(store_todo *items, int32_t n) {
    for (int32_t i = 0; items && i < n; i++) {
        free(items[i].text);
        free(items[i].section);
        free(items[i].png);
    }
    free(items);
}

/* Text for an image: its caption first, then the chunks anchored to it (capped). */
static char *image_text(store *s, int64_t image_id) {
    sqlite3_stmt *st;
    if (store_prepare(s, "SELECT c.text FROM chunks c JOIN images i ON i.id=?1"
                         " WHERE c.image_id=?1 OR c.id=i.caption_chunk"
                         " ORDER BY (c.id = i.caption_chunk) DESC, c.ord LIMIT 8", &st))
        return NULL;
    sqlite3_bind_int64(st, 1, image_id);
    size_t len = 0, cap = 256;
    char *out = malloc(cap);
    if (!out) { sqlite3_finalize(st); return NULL; }
    out[0] = 0;
    while (sqlite3_step(st) == SQLITE_ROW && len < 4000) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        size_t tl = t ? strlen(t) : 0;
        if (len + tl + 2 > cap) {
            cap = (len + tl + 2) * 2;
            char *n2 = realloc(out, cap);
            if (!n2) break;
            out = n2;
        }
        if (len) out[len++] = '\n';
        memcpy(out + len, t ? t : "", tl);
        len += tl;
        out[len] = 0;
    }
    sqlite3_finalize(st);
    return out;
}

/* what: STORE_TODO_CHUNKS, _IMAGES or _SENTENCES (chunks without sentence vectors) */
#define TODO_CHUNKS STORE_TODO_CHUNKS
#define TODO_IMAGES STORE_TODO_IMAGES
#define TODO_SENTENCES STORE_TODO_SENTENCES
static int todo_list(store *s, int what, const char *space, const char *model, int64_t after,
                     int32_t limit, store_todo **items, int32_t *n) {
    if (!s || !items || !n) return STORE_ERR_ARG;
    STORE_ROUTE_PG(s, pg_todo_list(s, what, space, model, after, limit, items, n));
    *items = NULL; *n = 0;
    STORE_LOCK(s);
    sqlite3_stmt *st = NULL;
    store_todo *arr = NULL;
    int32_t cnt = 0;
    int rc = store_check_space(s, space, model);
    if (rc) goto out;
    if (limit <= 0) limit = 64;
    int image = what == TODO_IMAGES;
    static const char *const sql[3] = {
        "SELECT c.id, c.doc, c.text, NULL, 0, 0, c.section FROM chunks c WHERE c.id > ?1 AND NOT EXISTS"
        " (SELECT 1 FROM vectors v WHERE v.owner_kind='chunk' AND v.owner_id=c.id AND v.space=?2"
        " AND v.model=?3) ORDER BY c.id LIMIT ?4",
        "SELECT i.id, i.doc, NULL, i.preview, i.width_px, i.height_px, NULL FROM images i WHERE i.id > ?1"
        " AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.owner_kind='image' AND v.owner_id=i.id"
        " AND v.space=?2 AND v.model=?3) ORDER BY i.id LIMIT ?4",
        "SELECT c.id, c.doc, c.text, NULL, 0, 0, c.section FROM chunks c WHERE c.id > ?1 AND ?2 != ''"
        " AND NOT EXISTS (SELECT 1 FROM sentence_vectors v WHERE v.chunk_id=c.id AND v.model=?3)"
        " ORDER BY c.id LIMIT ?4"};
    if ((rc = store_prepare(s, sql[what], &st))) goto out;
    sqlite3_bind_int64(st, 1, after);
    sqlite3_bind_text(st, 2, space, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, model, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 4, limit);
    if (!(arr = calloc((size_t)limit, sizeof *arr))) {
        rc = store_set_err(s, STORE_ERR_NOMEM, "out of memory");
        goto out;
    }
    int step;
    while (cnt < limit && (step = sqlite3_step(st)) == SQLITE_ROW) {
        store_todo *t = &arr[cnt++];
        t->id = sqlite3_column_int64(st, 0);
        t->doc = sqlite3_column_int64(st, 1);
        if (!image) {
            t->text = store_strdup((const char *)sqlite3_column_text(st, 2));
            t->section = store_strdup((const char *)sqlite3_column_text(st, 6));
        }
        const void *b = sqlite3_column_blob(st, 3);
        int bl = sqlite3_column_bytes(st, 3);
        if (b && bl > 0 && (t->png = malloc((size_t)bl))) {
            memcpy(t->png, b, (size_t)bl);
            t->png_len = (size_t)bl;
        }
        t->width_px = sqlite3_column_int(st, 4);
        t->height_px = sqlite3_column_int(st, 5);
        if ((!image && (!t->text || !t->section)) || (b && bl > 0 && !t->png)) {
            rc = store_set_err(s, STORE_ERR_NOMEM, "out of memory");
            goto out;
        }
    }
    if (cnt < limit && step != SQLITE_DONE) { rc = store_sql_err(s, "list missing vectors"); goto out; }
    sqlite3_finalize(st);
    st = NULL;
    for (int32_t i = 0; image && i < cnt; i++)
        if (!(arr[i].text = image_text(s, arr[i].id))) {
            rc = store_set_err(s, STORE_ERR_NOMEM, "image text for %lld", (long long)arr[i].id);
            goto out;
        }
out:
    sqlite3_finalize(st);
    STORE_UNLOCK(s);
    if (rc) { store_todos_free(arr, cnt); return rc; }
    if (!cnt) { free(arr); arr = NULL; }
    *items = arr; *n = cnt;
    return rc;
}

int store_chunks_without_vector(store *s, const char *space, const char *model, int64_t after_id,
                                int32_t limit, store_todo **items, int32_t *n) {
    return todo_list(s, TODO_CHUNKS, space, model, after_id, limit, items, n);
}

int store_images_without_vector(store *s, const char *space, const char *model, int64_t after_id,
                                int32_t limit, store_todo **items, int32_t *n) {
    return todo_list(s, TODO_IMAGES, space, model, after_id, limit, items, n);
}

int store_chunks_without_sentvecs(store *s, const char *model, int64_t after_id, int32_t limit,
                                  store_todo **items, int32_t *n) {
    return todo_list(s, TODO_SENTENCES, "text", model, after_id, limit, items, n);
}
