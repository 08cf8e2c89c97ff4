/* api/cli/cli_search.c — `mmrag search "question"`: fused retrieval (MiniLM text vectors in
 * FAISS HNSW + image-space LSH + BM25, score fusion) with citations.
 * Also cli_retriever_open(), shared by `mmrag eval retrieval` and `mmrag compact`. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include "api/cli/cli.h"
#include "api/core/embed.h"
#include "retrieval/retrieval.h"

static const char usage[] =
    "usage: mmrag search \"question\" [-k N] [--doc DOC]... [--pages A-B] [--kind KIND]\n"
    "                    [--sources text,image,bm25] [--weights T,I,B] [--json] [--explain]\n"
    "  Fused search: text vectors (MiniLM, FAISS HNSW), image vectors (LSH + exact re-scoring)\n"
    "  and BM25 keywords (text and section path), combined by their scores: a chunk counts\n"
    "  by the better of its own and its best sentence's cosine. Weights adapt to the\n"
    "  question (chart/figure/photo/diagram words lean on images, \"quoted phrases\" on BM25).\n"
    "  Each hit: fused score, document, page, normalized box [x0,y0,x1,y1], chunk, snippet.\n"
    "  -k N             number of hits (default 10)\n"
    "  --doc DOC        only this document (id, sha256 prefix or path); repeatable\n"
    "  --pages A-B      only pages A..B (or --pages N)\n"
    "  --kind KIND      only chunks of this kind (text, caption, figure, table, ocr, heading)\n"
    "  --sources LIST   which sources to use (default all three)\n"
    "  --weights T,I,B  fixed fusion weights instead of the adaptive ones\n"
    "  --explain        show per-source ranks and scores, the weights and timings\n"
    "  --models DIR     model directory (default $MMRAG_MODELS or ./models)\n"
    "  Without the text model, search falls back to BM25 only (with a note).\n";

/* Retriever over the store, embedding any chunks/images that still lack vectors (unless
 * the caller needs keywords only: no model is loaded then). *emb may come back NULL (no
 * model: BM25 only, note printed unless quiet). */
int cli_retriever_open(store *s, const char *models, int quiet, int need_vectors, embed_ctx **emb,
                       retriever **r) {
    char err[512];
    *r = NULL;
    *emb = NULL;
    if (need_vectors && embed_create(models, emb, err, sizeof err)) {
        if (!quiet) cli_err("note: %s; keyword (BM25) search only", err);
        *emb = NULL;
    }
    if (*emb && !quiet && *embed_figure_notice(*emb)) cli_err("note: %s", embed_figure_notice(*emb));
    if (*emb && !quiet && embed_has_pending(*emb, s))
        cli_err("note: embedding chunks, sentences or images indexed without vectors or colour "
                "profiles (--no-embed, an earlier failure, a collection from before them, or a "
                "new figure encoder); once, then they are stored");
    if (*emb && embed_pending(*emb, s, NULL, err, sizeof err) && !quiet)
        cli_err("note: could not embed new chunks (%s); they are found by keywords only", err);
    if (embed_create_retriever(*emb, s, r, err, sizeof err)) {
        cli_err("%s", err);
        embed_free(*emb);
        *emb = NULL;
        return -1;
    }
    return 0;
}

static int parse_sources(const char *v, int *mask) {
    *mask = 0;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "text")) *mask |= RETR_USE_TEXT;
        else if (!strcmp(t, "image")) *mask |= RETR_USE_IMAGE;
        else if (!strcmp(t, "bm25")) *mask |= RETR_USE_BM25;
        else return -1;
    }
    return *mask ? 0 : -1;
}

static const char *const src_name[RETR_NSRC] = {"text", "image", "bm25"};

static json_t *hit_json(const retr_hit *h, int rank, int explain) {
    json_t *o = json_pack("{s:i,s:f,s:I,s:I,s:o,s:i,s:s,s:o,s:o,s:o}", "rank", rank, "score", h->fused,
                          "chunk_id", (json_int_t)h->chunk_id, "doc_id", (json_int_t)h->doc, "title",
                          cli_json_str(h->title), "page", h->page, "kind", store_chunk_kind_name(h->kind),
                          "box", cli_json_box(h->box), "snippet", cli_json_str(h->snippet), "text",
                          cli_json_str(h->text));
    json_object_set_new(o, "image_id", h->image_id ? json_integer(h->image_id) : json_null());
    if (explain) {
        json_t *src = json_object();
        for (int s = 0; s < RETR_NSRC; s++)
            json_object_set_new(src, src_name[s], h->rank[s] ? json_pack("{s:i,s:f}", "rank", h->rank[s],
                                                                         "score", (double)h->score[s])
                                                             : json_null());
        /* score fusion's dense inputs: the chunk's cosine and its best sentence's */
        json_object_set_new(src, "dense", h->dense > -1.5f ? json_real(h->dense) : json_null());
        json_object_set_new(src, "sentence", h->sentence > -1.5f ? json_real(h->sentence) : json_null());
        /* the parts of the image score the query's colours and words added */
        json_object_set_new(src, "colour", json_real(h->colour));
        json_object_set_new(src, "words", json_real(h->words));
        json_object_set_new(o, "sources", src);
    }
    return o;
}

static void print_text(const char *q, const retr_result *res, int explain, retriever *r) {
    if (explain) {
        char fts[1024];
        store_fts_query(q, fts, sizeof fts);
        retr_stats st;
        retr_get_stats(r, &st);
        printf("weights: text %.2f  image %.2f  bm25 %.2f   (rrf k=60)\n", res->weights.w[0],
               res->weights.w[1], res->weights.w[2]);
        printf("fts5 query: %s\n", fts);
        printf("index: %lld text vectors (%lld dead), %lld image vectors (%lld dead), generation %lld\n",
               (long long)st.text_vectors, (long long)st.text_dead, (long long)st.image_vectors,
               (long long)st.image_dead, (long long)st.generation);
        printf("time: encode %.1f ms, search %.1f ms\n\n", res->encode_ms, res->search_ms);
    }
    for (int32_t i = 0; i < res->n; i++) {
        const retr_hit *h = &res->hits[i];
        printf("%2d. %.4f  %s (doc %lld) p.%d [%.3f,%.3f,%.3f,%.3f] %s", i + 1, h->fused, h->title,
               (long long)h->doc, h->page, h->box.x0, h->box.y0, h->box.x1, h->box.y1,
               store_chunk_kind_name(h->kind));
        if (h->chunk_id) printf(" chunk %lld", (long long)h->chunk_id);
        if (h->image_id) printf(" image %lld", (long long)h->image_id);
        printf("\n      %s\n", h->snippet);
        if (explain) {
            printf("      ");
            for (int s = 0; s < RETR_NSRC; s++) {
                if (h->rank[s]) printf("%s #%d (%.3f)  ", src_name[s], h->rank[s], h->score[s]);
                else printf("%s -  ", src_name[s]);
            }
            if (h->colour > 0 || h->words > 0)
                printf("(colour +%.2f, words +%.2f)", h->colour, h->words);
            printf("\n");
        }
    }
    if (!res->n) printf("no hits\n");
}

int cli_search(int argc, char **argv) {
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'},      {"json", no_argument, 0, 'J'},
        {"doc", required_argument, 0, 'D'},     {"explain", no_argument, 0, 'E'},
        {"pages", required_argument, 0, 'P'},   {"kind", required_argument, 0, 'K'},
        {"sources", required_argument, 0, 'S'}, {"weights", required_argument, 0, 'W'},
        {"models", required_argument, 0, 'M'},  {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *db = NULL, *models = NULL;
    const char *docspec[64];
    int ndoc = 0, json = 0, explain = 0, k = 10, o;
    retr_opts ro;
    retr_opts_default(&ro);
    optind = 0;
    while ((o = getopt_long(argc, argv, "d:k:h", opts, NULL)) != -1) {
        switch (o) {
        case 'd': db = optarg; break;
        case 'J': json = 1; break;
        case 'E': explain = 1; break;
        case 'M': models = optarg; break;
        case 'k': if (cli_parse_int("-k", optarg, 1, 1000, &k)) return CLI_USAGE; break;
        case 'D':
            if (ndoc == 64) return cli_usage_error(usage, "search: at most 64 --doc");
            docspec[ndoc++] = optarg;
            break;
        case 'P': {
            int a = 0, b = 0;
            if (sscanf(optarg, "%d-%d", &a, &b) == 2 && a >= 1 && b >= a) { ro.page_min = a; ro.page_max = b; }
            else if (sscanf(optarg, "%d", &a) == 1 && a >= 1 && !strchr(optarg, '-')) ro.page_min = ro.page_max = a;
            else return cli_usage_error(usage, "search: --pages wants N or A-B, got '%s'", optarg);
            break;
        }
        case 'K':
            ro.kind = store_chunk_kind_parse(optarg);
            if (ro.kind < 0) return cli_usage_error(usage, "search: unknown kind '%s'", optarg);
            break;
        case 'S':
            if (parse_sources(optarg, &ro.sources))
                return cli_usage_error(usage, "search: --sources wants a list of text,image,bm25");
            break;
        case 'W': {
            float w[3];
            char tail;
            if (sscanf(optarg, "%f,%f,%f%c", &w[0], &w[1], &w[2], &tail) != 3 || w[0] < 0 || w[1] < 0 ||
                w[2] < 0 || w[0] > 100 || w[1] > 100 || w[2] > 100)
                return cli_usage_error(usage, "search: --weights wants T,I,B (0..100), got '%s'", optarg);
            for (int i = 0; i < 3; i++) ro.weight[i] = w[i];
            break;
        }
        case 'h': fputs(usage, stdout); return CLI_OK;
        default: fputs(usage, stderr); return CLI_USAGE;
        }
    }
    if (optind >= argc) return cli_usage_error(usage, "search: no question given");
    size_t len = 1;
    for (int i = optind; i < argc; i++) len += strlen(argv[i]) + 1;
    char *q = calloc(1, len);
    if (!q) { cli_err("out of memory"); return CLI_FAIL; }
    for (int i = optind; i < argc; i++) {
        if (i > optind) strcat(q, " ");
        strcat(q, argv[i]);
    }
    store *s = cli_store_open(db, 0);
    if (!s) { free(q); return CLI_DBERR; }
    int rc = CLI_OK;
    int64_t ids[64];
    embed_ctx *emb = NULL;
    retriever *r = NULL;
    for (int i = 0; i < ndoc; i++) {
        store_doc_row d;
        if (cli_doc_resolve(s, docspec[i], &d) != STORE_OK) { rc = CLI_FAIL; goto out; }
        ids[i] = d.id;
        store_doc_row_clear(&d);
    }
    int need_vectors = (ro.sources & (RETR_USE_TEXT | RETR_USE_IMAGE)) != 0;
    if (cli_retriever_open(s, models, json, need_vectors, &emb, &r)) { rc = CLI_DBERR; goto out; }
    ro.k = k;
    ro.docs = ndoc ? ids : NULL;
    ro.n_docs = ndoc;
    retr_result res;
    char err[512];
    if (retr_search(r, q, &ro, &res, err, sizeof err)) {
        cli_err("%s", err);
        rc = CLI_DBERR;
        goto out;
    }
    if (json) {
        json_t *arr = json_array();
        for (int32_t i = 0; i < res.n; i++) json_array_append_new(arr, hit_json(&res.hits[i], i + 1, explain));
        json_t *top = json_pack("{s:o,s:s,s:o}", "query", cli_json_str(q), "mode", emb ? "fused" : "bm25",
                                "hits", arr);
        if (explain)
            json_object_set_new(top, "weights", json_pack("{s:f,s:f,s:f}", "text", (double)res.weights.w[0],
                                                          "image", (double)res.weights.w[1], "bm25",
                                                          (double)res.weights.w[2]));
        cli_json_print(top);
    } else {
        print_text(q, &res, explain, r);
    }
    retr_result_free(&res);
out:
    retr_free(r);
    embed_free(emb);
    free(q);
    store_close(s);
    return rc;
}
