/* api/server/server_openai.c — the OpenAI surface besides chat: GET /v1/models (the
 * language model, the "mmrag" RAG alias and the encoders), GET /v1/models/{id}, and
 * POST /v1/embeddings over the text encoder (the vectors chunks and questions get).
 *
 * Design notes:
 * 1. Model ids: "mmrag" answers with retrieval + the language model; the language model's
 *    own id (its file name without .gguf) is accepted by chat too and answers the same
 *    way. The text encoder's id (all-MiniLM-L6-v2) is the embeddings model; the figure
 *    encoder is listed but embeds images only, so /v1/embeddings refuses it.
 * 2. Embeddings follow OpenAI's limits: 1..2048 inputs, no empty strings; token arrays
 *    (what tiktoken-based clients send) are refused with a hint, since our encoder has its
 *    own WordPiece vocabulary. base64 is little-endian float32, as the official client
 *    decodes it. */
#include "api/server/server_internal.h"
#include "api/core/embed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define EMB_MAX_INPUTS 2048
#define EMB_MAX_BYTES 32768   /* per input: the encoder reads 256 tokens of it anyway */
#define EMB_BATCH 32

/* The language model's id: its file name without directory and ".gguf". */
static void llm_id(srv_server *s, char *buf, size_t len) {
    const char *p = answer_llm_file(srv_query_llm(s));
    const char *b = strrchr(p, '/');
    b = b ? b + 1 : p;
    size_t n = strlen(b);
    if (n > 5 && !strcmp(b + n - 5, ".gguf")) n -= 5;
    snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), b);
}

static int64_t file_time(const char *path) {
    struct stat st;
    return path && !stat(path, &st) ? (int64_t)st.st_mtime : 0;
}

int srv_openai_chat_model_ok(srv_server *s, const char *id) {
    char llm[256];
    llm_id(s, llm, sizeof llm);
    return !strcmp(id, "mmrag") || !strcmp(id, llm);
}

static json_t *model_json(const char *id, int64_t created, const char *role, int32_t n_ctx,
                          int32_t dim) {
    json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:{s:s}}", "id", id, "object", "model", "created",
                          (json_int_t)created, "owned_by", "mmrag", "mmrag", "role", role);
    if (o && n_ctx > 0) json_object_set_new(o, "context_length", json_integer(n_ctx));
    if (o && dim > 0) json_object_set_new(o, "dimensions", json_integer(dim));
    return o;
}

/* Every model this server answers with, in the order /v1/models lists them. */
static json_t *models_json(srv_server *s) {
    answer_llm *l = srv_query_llm(s);
    char llm[256];
    llm_id(s, llm, sizeof llm);
    int64_t t = file_time(answer_llm_file(l));
    json_t *a = json_array();
    json_t *rag = model_json("mmrag", t, "rag", answer_llm_ctx(l), 0);
    if (rag) json_object_set_new(json_object_get(rag, "mmrag"), "language_model", json_string(llm));
    json_array_append_new(a, rag);
    json_array_append_new(a, model_json(llm, t, "language_model", answer_llm_ctx(l), 0));
    struct embed_ctx *e = srv_query_embedder(s);
    if (e) {
        json_array_append_new(a, model_json(embed_model_id(e), 0, "text_encoder",
                                            embed_max_tokens(e), embed_dim(e)));
        if (embed_figure_model_id(e))
            json_array_append_new(a, model_json(embed_figure_model_id(e), 0, "figure_encoder", 0,
                                                embed_dim(e)));
    }
    return a;
}

enum MHD_Result srv_handle_models(struct MHD_Connection *c, srv_req *r) {
    return srv_reply_json(c, r, 200, json_pack("{s:s,s:o}", "object", "list", "data", models_json(r->srv)));
}

enum MHD_Result srv_handle_model_get(struct MHD_Connection *c, srv_req *r) {
    json_t *all = models_json(r->srv);
    size_t i;
    json_t *m;
    json_array_foreach(all, i, m) {
        if (strcmp(json_string_value(json_object_get(m, "id")), r->segs[2])) continue;
        json_incref(m);
        json_decref(all);
        return srv_reply_json(c, r, 200, m);
    }
    json_decref(all);
    int printable = strlen(r->segs[2]) <= 200;   /* echoed only when it is plain text */
    for (const char *p = r->segs[2]; printable && *p; p++) printable = *p >= 0x20 && *p < 0x7f;
    return srv_reply_error(c, r, 404, "model_not_found", "\"model\" %s does not exist (GET /v1/models lists them)",
                           printable ? r->segs[2] : "(given)");
}

/* ---- embeddings ------------------------------------------------------------------------- */
static char *base64_floats(const float *v, int32_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t len = (size_t)n * 4, o = 0;
    unsigned char *b = malloc(len);
    char *out = malloc((len + 2) / 3 * 4 + 1);
    if (!b || !out) { free(b); free(out); return NULL; }
    for (int32_t i = 0; i < n; i++) {   /* little-endian float32, whatever the host */
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int k = 0; k < 4; k++) b[i * 4 + k] = (unsigned char)(u >> (8 * k));
    }
    for (size_t i = 0; i < len; i += 3) {
        uint32_t x = (uint32_t)b[i] << 16 | (i + 1 < len ? (uint32_t)b[i + 1] << 8 : 0) |
                     (i + 2 < len ? b[i + 2] : 0);
        out[o++] = tab[x >> 18 & 63];
        out[o++] = tab[x >> 12 & 63];
        out[o++] = i + 1 < len ? tab[x >> 6 & 63] : '=';
        out[o++] = i + 2 < len ? tab[x & 63] : '=';
    }
    out[o] = 0;
    free(b);
    return out;
}

/* "input" as a list of texts (pointing into body); 0 or -1 with a message. */
static int parse_input(json_t *in, const char ***texts, int32_t *n, char *msg, size_t ml) {
    static const char tok_hint[] = "\"input\" must be a string or a list of strings: token "
        "arrays are not supported (mmrag's encoder has its own vocabulary; LangChain: "
        "OpenAIEmbeddings(check_embedding_ctx_length=False))";
    size_t cnt = json_is_string(in) ? 1 : json_is_array(in) ? json_array_size(in) : 0;
    if (!in || (!json_is_string(in) && !json_is_array(in))) { snprintf(msg, ml, "%s", tok_hint); return -1; }
    if (cnt == 0 || cnt > EMB_MAX_INPUTS) {
        snprintf(msg, ml, "\"input\" must hold 1..%d texts (got %zu)", EMB_MAX_INPUTS, cnt);
        return -1;
    }
    *texts = calloc(cnt, sizeof **texts);
    if (!*texts) { snprintf(msg, ml, "out of memory"); return -1; }
    for (size_t i = 0; i < cnt; i++) {
        json_t *t = json_is_string(in) ? in : json_array_get(in, i);
        if (!json_is_string(t)) { snprintf(msg, ml, "%s", tok_hint); return -1; }
        size_t l = json_string_length(t);
        if (l == 0 || l > EMB_MAX_BYTES) {
            snprintf(msg, ml, "\"input\"[%zu] must be 1..%d bytes of text", i, EMB_MAX_BYTES);
            return -1;
        }
        (*texts)[i] = json_string_value(t);
    }
    *n = (int32_t)cnt;
    return 0;
}

/* The request's fields other than input: model, encoding_format, dimensions. Returns the
 * HTTP status of the problem (0 = fine). */
static int parse_emb_opts(json_t *body, struct embed_ctx *e, int *b64, char *msg, size_t ml) {
    json_t *m = json_object_get(body, "model");
    if (m && !json_is_null(m)) {
        if (!json_is_string(m)) { snprintf(msg, ml, "\"model\" must be a string"); return 400; }
        const char *id = json_string_value(m);
        if (embed_figure_model_id(e) && !strcmp(id, embed_figure_model_id(e))) {
            snprintf(msg, ml, "\"model\" %s embeds images, not text; use %s", id, embed_model_id(e));
            return 400;
        }
        if (strcmp(id, embed_model_id(e))) {
            snprintf(msg, ml, "\"model\" %.200s does not exist; the text encoder is %s", id, embed_model_id(e));
            return 404;
        }
    }
    json_t *f = json_object_get(body, "encoding_format");
    if (f && !json_is_null(f)) {
        const char *fs = json_is_string(f) ? json_string_value(f) : "";
        if (strcmp(fs, "float") && strcmp(fs, "base64")) {
            snprintf(msg, ml, "\"encoding_format\" must be \"float\" or \"base64\"");
            return 400;
        }
        *b64 = !strcmp(fs, "base64");
    }
    int64_t dim = embed_dim(e);
    if (srv_json_int(body, "dimensions", 1, 1 << 20, &dim, msg, ml)) return 400;
    if (dim != embed_dim(e)) {
        snprintf(msg, ml, "\"dimensions\" must be %d (%s has fixed-size vectors)", embed_dim(e), embed_model_id(e));
        return 400;
    }
    json_t *u = json_object_get(body, "user");
    if (u && !json_is_null(u) && !json_is_string(u)) { snprintf(msg, ml, "\"user\" must be a string"); return 400; }
    return 0;
}

static json_t *embeddings_data(const float *v, int32_t n, int32_t dim, int b64) {
    json_t *data = json_array();
    for (int32_t i = 0; data && i < n; i++) {
        json_t *emb;
        if (b64) {
            char *s = base64_floats(v + (size_t)i * dim, dim);
            emb = s ? json_string(s) : NULL;
            free(s);
        } else {
            emb = json_array();
            for (int32_t k = 0; emb && k < dim; k++) json_array_append_new(emb, json_real(v[(size_t)i * dim + k]));
        }
        if (!emb) { json_decref(data); return NULL; }
        json_array_append_new(data, json_pack("{s:s,s:i,s:o}", "object", "embedding", "index", i, "embedding", emb));
    }
    return data;
}

enum MHD_Result srv_handle_embeddings(struct MHD_Connection *c, srv_req *r) {
    enum MHD_Result ret;
    json_t *body = srv_body_object(c, r, &ret);
    if (!body) return ret;
    struct embed_ctx *e = srv_query_embedder(r->srv);
    char msg[512];
    const char **texts = NULL;
    int32_t n = 0;
    int b64 = 0, st = 0;
    if (!e) {
        json_decref(body);
        return srv_reply_error(c, r, 503, "unavailable", "no text encoder loaded (make models)");
    }
    if ((st = parse_emb_opts(body, e, &b64, msg, sizeof msg)) ||
        (parse_input(json_object_get(body, "input"), &texts, &n, msg, sizeof msg) && (st = 400))) {
        free(texts);
        json_decref(body);
        return srv_reply_error(c, r, st, st == 404 ? "model_not_found" : "invalid_request", "%s", msg);
    }
    int32_t dim = embed_dim(e);
    float *v = malloc((size_t)n * (size_t)dim * sizeof *v);
    int64_t tokens = 0, t;
    int rc = v ? 0 : -1;
    snprintf(msg, sizeof msg, "out of memory");
    for (int32_t i = 0; !rc && i < n; i += EMB_BATCH) {   /* bounded work per encoder call */
        int32_t nb = n - i < EMB_BATCH ? n - i : EMB_BATCH;
        rc = embed_texts(e, texts + i, nb, v + (size_t)i * dim, &t, msg, sizeof msg);
        tokens += t;
    }
    json_t *data = rc ? NULL : embeddings_data(v, n, dim, b64);
    free(v);
    free(texts);
    json_decref(body);
    if (!data) return srv_reply_error(c, r, 500, "embedding_failed", "%s", rc ? msg : "out of memory");
    return srv_reply_json(c, r, 200, json_pack("{s:s,s:o,s:s,s:i,s:{s:I,s:I}}", "object", "list",
                                               "data", data, "model", embed_model_id(e), "dimensions", dim,
                                               "usage", "prompt_tokens", (json_int_t)tokens,
                                               "total_tokens", (json_int_t)tokens));
}
