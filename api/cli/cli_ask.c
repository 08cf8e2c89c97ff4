/* api/cli/cli_ask.c — `mmrag ask "question"`: fused retrieval, evidence numbered in rank order
 * within the context budget, the answer streamed from the local GGUF model, then the
 * citations [n] -> document, page, box; --show draws the cited boxes on their pages. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include "api/cli/cli.h"
#include "api/core/embed.h"
#include "api/core/render.h"
#include "engine/engine.h"
#include "retrieval/retrieval.h"

static const char usage[] =
    "usage: mmrag ask \"question\" [-k N] [--json] [--show FILE.png|DIR] [--model GGUF]\n"
    "                 [--max-tokens N] [--ctx N] [--kv f32|f16|int4|int4ch] [--temp T]\n"
    "                 [--seed S] [--threads N]\n"
    "  Retrieves evidence (text vectors + image vectors + BM25), numbers it [1], [2], ... in\n"
    "  rank order as long as it fits the context budget, streams the model's answer, then\n"
    "  prints each cited [n] with its document, page and normalized box [x0,y0,x1,y1].\n"
    "  -k N            evidence candidates to retrieve (default 6)\n"
    "  --json          one JSON object: answer, stop_reason, citations, evidence, timings\n"
    "  --show FILE.png the first cited page as a PNG with its cited boxes drawn and labelled\n"
    "  --show DIR      one PNG per cited page, DIR/doc<ID>-p<PAGE>.png (DIR is created);\n"
    "                  the written paths are printed (in --json: \"shown\")\n"
    "  --model GGUF    language model (default $MMRAG_MODELS/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf)\n"
    "  --max-tokens N  answer length limit (default 200)\n"
    "  --ctx N         context window in tokens (default 2048)\n"
    "  --kv TYPE       KV cache type (default f32; int4 = 4-bit blocks, int4ch = per channel)\n"
    "  --temp T        sampling temperature (default 0 = greedy); --seed S for sampling\n"
    "  --models DIR    model directory (default $MMRAG_MODELS or ./models)\n";

typedef struct {
    int json;
} ask_stream;

static int on_text(void *ud, const char *p, size_t n) {
    ask_stream *a = ud;
    if (!a->json) {
        fwrite(p, 1, n, stdout);
        fflush(stdout);
    }
    return 0;
}

/* Appends "[n] title, p.N: text" lines while the prompt stays within budget tokens. */
static char *build_evidence(struct mmrag_engine *e, const retr_result *res, int32_t budget,
                            int32_t *n_used) {
    size_t cap = 1024;
    char *buf = malloc(cap), line[1400];
    if (!buf) return NULL;
    buf[0] = 0;
    size_t len = 0;
    int32_t used_tokens = 0;
    *n_used = 0;
    for (int32_t i = 0; i < res->n; i++) {
        const retr_hit *h = &res->hits[i];
        const char *t = h->text && h->text[0] ? h->text : h->snippet ? h->snippet : "";
        int n = snprintf(line, sizeof line, "[%d] %s, page %d: %.1000s\n", *n_used + 1,
                         h->title ? h->title : "untitled", h->page, t);
        if (n < 0) continue;
        size_t ll = strlen(line);
        int32_t tk = mmrag_engine_tokenize(e, line, ll, NULL, 0, 0);
        tk = tk < 0 ? -tk : tk;
        if (used_tokens + tk > budget) break; /* rank order: stop at the first that does not fit */
        if (len + ll + 1 > cap) {
            while (len + ll + 1 > cap) cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) break;
            buf = nb;
        }
        memcpy(buf + len, line, ll + 1);
        len += ll;
        used_tokens += tk;
        (*n_used)++;
    }
    return buf;
}

static int has_cite(const int *cited, int n) {
    for (int i = 1; i <= n && i < 128; i++)
        if (cited[i]) return 1;
    return 0;
}

/* Evidence the answer quotes: words of >= 3 characters or with digits that are in the
 * answer but not in the question, counted in each evidence text (case-insensitive).
 * Returns the best 1-based index, 0 when nothing matches at least two such words. */
static int attribute(const char *answer, const char *question, const retr_result *res, int n_ev) {
    int best = 0, best_score = 1;
    for (int i = 0; i < n_ev; i++) {
        const char *t = res->hits[i].text ? res->hits[i].text : "";
        int score = 0;
        for (const char *p = answer; *p;) {
            while (*p && !isalnum((unsigned char)*p)) p++;
            const char *w = p;
            int digit = 0;
            while (*p && (isalnum((unsigned char)*p) || (*p == '.' && isdigit((unsigned char)p[1])))) {
                digit |= isdigit((unsigned char)*p);
                p++;
            }
            size_t wl = (size_t)(p - w);
            if (wl == 0 || (wl < 4 && !digit) || wl > 63) continue;
            char word[64];
            memcpy(word, w, wl);
            word[wl] = 0;
            if (strcasestr(question, word)) continue;
            if (strcasestr(t, word)) score += digit ? 2 : 1;
        }
        if (score > best_score) { best_score = score; best = i + 1; }
    }
    return best;
}

static json_t *hit_json(const retr_hit *h, int n) {
    return json_pack("{s:i,s:I,s:o,s:i,s:o,s:I,s:I}", "n", n, "doc_id", (json_int_t)h->doc,
                     "title", cli_json_str(h->title ? h->title : ""), "page", h->page, "box",
                     cli_json_box(h->box), "chunk_id", (json_int_t)h->chunk_id, "image_id",
                     (json_int_t)h->image_id);
}

/* ---- --show ---------------------------------------------------------------------------- */
#define ASK_SHOW_WIDTH 1000

/* A path ending in .png (and not an existing folder) is one file, whose folder must exist;
 * anything else is a folder, created when missing. Checked before the model runs so that a
 * typo costs nothing. Returns 0 (and *is_dir) or -1 with the error printed. */
static int show_prepare(const char *path, int *is_dir) {
    struct stat st;
    size_t l = strlen(path);
    int exists_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    if (!l) { cli_err("ask: --show needs a file name or a folder"); return -1; }
    if (l >= 4 && !strcasecmp(path + l - 4, ".png") && !exists_dir) {
        if (cli_show_folder_check("ask", path)) return -1;
        *is_dir = 0;
        return 0;
    }
    if (!exists_dir && mkdir(path, 0777)) {
        cli_err("ask: --show %s: cannot create the folder: %s", path, strerror(errno));
        return -1;
    }
    *is_dir = 1;
    return 0;
}

static float clamp01(float v) { return v > 0 ? (v < 1 ? v : 1) : 0; }

/* Renders each cited (document, page) once, with all the boxes cited on it labelled [n],
 * in citation order; a file target gets the first page only. Appends {path, doc_id, page,
 * citations} to shown. Returns the number of pages that failed (messages printed). */
static int show_citations(store *s, const retr_result *res, const int *cited, int n_ev,
                          const char *target, int is_dir, json_t *shown) {
    int done[128] = {0}, failed = 0, written = 0, skipped = 0;
    for (int i = 0; i < n_ev && i < 127; i++) {
        if (!cited[i + 1] || done[i]) continue;
        const retr_hit *h = &res->hits[i];
        if (written && !is_dir) {
            for (int j = i; j < n_ev && j < 127; j++)
                if (res->hits[j].doc == h->doc && res->hits[j].page == h->page) done[j] = 1;
            skipped++;
            continue;
        }
        float boxes[4 * 128];
        char labels_buf[128][16];
        const char *labels[128];
        json_t *nums = json_array();
        int nb = 0;
        for (int j = i; j < n_ev && j < 127; j++) {
            const retr_hit *o = &res->hits[j];
            if (!cited[j + 1] || done[j] || o->doc != h->doc || o->page != h->page) continue;
            done[j] = 1;
            float *b = boxes + 4 * nb;
            b[0] = clamp01(o->box.x0); b[1] = clamp01(o->box.y0);
            b[2] = clamp01(o->box.x1); b[3] = clamp01(o->box.y1);
            if (b[2] < b[0] || b[3] < b[1]) b[2] = b[0], b[3] = b[1];   /* draws nothing */
            snprintf(labels_buf[nb], sizeof labels_buf[nb], "[%d]", j + 1);
            labels[nb] = labels_buf[nb];
            json_array_append_new(nums, json_integer(j + 1));
            nb++;
        }
        char out[4200], err[600];
        if (is_dir) snprintf(out, sizeof out, "%s/doc%lld-p%d.png", target, (long long)h->doc, h->page);
        else snprintf(out, sizeof out, "%s", target);
        store_doc_row d = {0};
        int rc = store_doc_get_id(s, h->doc, &d);
        if (rc != STORE_OK || !d.path) {
            cli_err("ask: --show: document %lld is gone from the collection", (long long)h->doc);
            failed++;
        } else if (render_page_png_file(d.path, h->page, boxes, nb, labels, ASK_SHOW_WIDTH, out,
                                        err, sizeof err)) {
            cli_err("ask: --show: %s, page %d: %s", d.path, h->page, err);
            failed++;
        } else {
            json_array_append_new(shown, json_pack("{s:o,s:I,s:i,s:O}", "path", cli_json_str(out), "doc_id",
                                                   (json_int_t)h->doc, "page", h->page,
                                                   "citations", nums));
            written++;
        }
        json_decref(nums);
        store_doc_row_clear(&d);
    }
    if (skipped)
        cli_err("ask: --show %s holds the first cited page; %d more cited page(s): give a folder "
                "to --show for all", target, skipped);
    return failed;
}

int cli_ask(int argc, char **argv) {
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'},     {"json", no_argument, 0, 'J'},
        {"model", required_argument, 0, 'm'},  {"models", required_argument, 0, 'M'},
        {"max-tokens", required_argument, 0, 'n'}, {"ctx", required_argument, 0, 'c'},
        {"kv", required_argument, 0, 'v'},     {"temp", required_argument, 0, 't'},
        {"seed", required_argument, 0, 's'},   {"threads", required_argument, 0, 'T'},
        {"show", required_argument, 0, 'S'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    const char *db = NULL, *models = NULL, *model = NULL, *show = NULL;
    int show_dir = 0, json = 0, k = 6, max_tokens = 200, ctx = 2048, kv = MMRAG_KV_F32, threads = 0, o;
    double temp = 0;
    unsigned long long seed = 0;
    optind = 0;
    while ((o = getopt_long(argc, argv, "d:k:h", opts, NULL)) != -1) {
        switch (o) {
        case 'd': db = optarg; break;
        case 'J': json = 1; break;
        case 'm': model = optarg; break;
        case 'S': show = optarg; break;
        case 'M': models = optarg; break;
        case 'k': if (cli_parse_int("-k", optarg, 1, 100, &k)) return CLI_USAGE; break;
        case 'n': if (cli_parse_int("--max-tokens", optarg, 1, 8192, &max_tokens)) return CLI_USAGE; break;
        case 'c': if (cli_parse_int("--ctx", optarg, 256, 1 << 20, &ctx)) return CLI_USAGE; break;
        case 'T': if (cli_parse_int("--threads", optarg, 1, 1024, &threads)) return CLI_USAGE; break;
        case 't': temp = atof(optarg); break;
        case 's': seed = strtoull(optarg, NULL, 10); break;
        case 'v':
            if (!strcmp(optarg, "f32")) kv = MMRAG_KV_F32;
            else if (!strcmp(optarg, "f16")) kv = MMRAG_KV_F16;
            else if (!strcmp(optarg, "int4")) kv = MMRAG_KV_INT4;
            else if (!strcmp(optarg, "int4ch")) kv = MMRAG_KV_INT4_CH;
            else return cli_usage_error(usage, "ask: unknown --kv '%s'", optarg);
            break;
        case 'h': fputs(usage, stdout); return CLI_OK;
        default: return cli_usage_error(usage, "ask: bad option");
        }
    }
    if (optind + 1 != argc) return cli_usage_error(usage, "ask: one question expected");
    const char *q = argv[optind];
    if (!q[strspn(q, " \t\r\n")]) {
        cli_err("ask: empty question (give the question as one argument)");
        return CLI_USAGE;
    }
    if (!models) models = getenv("MMRAG_MODELS") && *getenv("MMRAG_MODELS") ? getenv("MMRAG_MODELS") : "models";
    char mpath[1024];
    if (!model) {
        snprintf(mpath, sizeof mpath, "%s/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", models);
        model = mpath;
    }
    /* cheap checks first: retrieval may embed chunks and the model takes seconds to load */
    FILE *mf = fopen(model, "rb");
    if (!mf) {
        cli_err("ask: cannot read the model %s: %s", model, strerror(errno));
        return CLI_FAIL;
    }
    fclose(mf);
    if (show && show_prepare(show, &show_dir)) return CLI_USAGE;
    store *s = cli_store_open(db, 0);
    if (!s) return CLI_DBERR;
    embed_ctx *emb = NULL;
    retriever *r = NULL;
    int rc = CLI_FAIL;
    struct mmrag_engine *e = NULL;
    struct mmrag_session *ss = NULL;
    char *ev = NULL, *prompt = NULL, err[600];
    retr_result res = {0};
    struct mmrag_gen_result gr = {0};
    if (cli_retriever_open(s, models, json, 1, &emb, &r)) goto out;
    retr_opts ro;
    retr_opts_default(&ro);
    ro.k = k;
    if (retr_search(r, q, &ro, &res, err, sizeof err)) {
        cli_err("ask: %s", err);
        goto out;
    }
    struct mmrag_engine_params ep = mmrag_engine_default_params();
    ep.n_ctx = ctx;
    ep.kv_type = kv;
    ep.n_threads = threads;
    if (!(e = mmrag_engine_init_from_file(model, ep, err, sizeof err))) {
        cli_err("ask: %s", err);
        goto out;
    }
    if (!(ss = mmrag_session_create(e, err, sizeof err))) {
        cli_err("ask: %s", err);
        goto out;
    }
    /* budget: context minus the answer and ~160 tokens of template, system text, question */
    int32_t qtok = mmrag_engine_tokenize(e, q, strlen(q), NULL, 0, 0);
    qtok = qtok < 0 ? -qtok : qtok;
    int32_t budget = ctx - max_tokens - 160 - qtok, n_ev = 0;
    if (budget < 0) {
        cli_err("ask: the question (%d tokens) and --max-tokens %d leave no room in --ctx %d",
                qtok, max_tokens, ctx);
        goto out;
    }
    if (!(ev = build_evidence(e, &res, budget, &n_ev))) goto out;
    const char *sys = "You answer questions about documents. Use only the numbered evidence and "
                      "cite it as [n]. If the evidence does not answer the question, say so.";
    size_t ul = strlen(ev) + strlen(q) + 64;
    char *user = malloc(ul);
    if (!user) goto out;
    snprintf(user, ul, "Evidence:\n%s\nQuestion: %s", n_ev ? ev : "(no evidence found)\n", q);
    int32_t need = mmrag_engine_chat_prompt(e, sys, user, NULL, 0);
    need = need < 0 ? -need : need;
    prompt = malloc((size_t)need + 1);
    if (prompt) mmrag_engine_chat_prompt(e, sys, user, prompt, (size_t)need + 1);
    free(user);
    if (!prompt) goto out;
    ask_stream st = {json};
    struct mmrag_gen_params g = mmrag_gen_default_params();
    g.max_tokens = max_tokens;
    g.sampling.temperature = (float)temp;
    g.sampling.top_p = 0.95f;
    g.sampling.repeat_penalty = 1.15f; /* a 135M model loops without it */
    g.sampling.seed = seed;
    g.on_text = on_text;
    g.user_data = &st;
    if (mmrag_session_generate(ss, prompt, &g, &gr) < 0) {
        cli_err("ask: %s", mmrag_session_errmsg(ss));
        goto out;
    }
    /* citations: every [n] in the answer that names a numbered piece of evidence */
    int cited[128] = {0}, attributed = 0;
    for (const char *p = gr.text; (p = strchr(p, '[')); p++) {
        int n = atoi(p + 1);
        if (n >= 1 && n <= n_ev && n < 128) cited[n] = 1;
    }
    int best = 0;
    if (!has_cite(cited, n_ev) && (best = attribute(gr.text, q, &res, n_ev)) > 0) {
        cited[best] = 1; /* small models often skip [n]: cite the evidence the answer quotes */
        attributed = 1;
    }
    json_t *shown = json_array();
    int show_failed = 0;
    if (!json) {
        printf("\n\n");
        fflush(stdout);   /* --show messages on stderr come after the answer */
    }
    if (show) {
        if (has_cite(cited, n_ev)) show_failed = show_citations(s, &res, cited, n_ev, show, show_dir, shown);
        else cli_err("ask: --show: the answer cites no evidence; no PNG written");
    }
    if (json) {
        json_t *c = json_array(), *evj = json_array();
        for (int i = 0; i < n_ev; i++) {
            json_array_append_new(evj, hit_json(&res.hits[i], i + 1));
            if (cited[i + 1]) json_array_append_new(c, hit_json(&res.hits[i], i + 1));
        }
        json_t *out = json_pack("{s:o,s:o,s:s,s:o,s:b,s:o,s:{s:f,s:f,s:i,s:i}}", "question", cli_json_str(q),
                                "answer", cli_json_str(gr.text), "stop_reason",
                                mmrag_stop_reason_str(gr.stop_reason), "citations", c,
                                "citations_attributed", attributed, "evidence", evj,
                                "timings", "ttft_ms", gr.ttft_ms, "decode_ms", gr.decode_ms,
                                "prompt_tokens", gr.n_prompt, "completion_tokens", gr.n_gen);
        if (out && show) json_object_set(out, "shown", shown);
        cli_json_print(out);
    } else {
        int any = 0;
        for (int i = 0; i < n_ev; i++) {
            if (!cited[i + 1]) continue;
            const retr_hit *h = &res.hits[i];
            printf("[%d] -> %s (doc %lld), page %d, box [%.3f, %.3f, %.3f, %.3f]%s\n", i + 1,
                   h->title ? h->title : "untitled", (long long)h->doc, h->page, h->box.x0,
                   h->box.y0, h->box.x1, h->box.y1,
                   attributed ? "  (attributed: the answer quotes it; the model wrote no [n])" : "");
            any = 1;
        }
        if (!any && n_ev) {
            printf("(no [n] citations in the answer; evidence given to the model:)\n");
            for (int i = 0; i < n_ev; i++)
                printf("[%d] %s (doc %lld), page %d\n", i + 1, res.hits[i].title ? res.hits[i].title : "untitled",
                       (long long)res.hits[i].doc, res.hits[i].page);
        }
        if (!n_ev) printf("(no evidence found in the collection)\n");
        for (size_t i = 0; i < json_array_size(shown); i++) {
            json_t *o = json_array_get(shown, i), *nums = json_object_get(o, "citations");
            printf("shown: %s  (page %d with box", json_string_value(json_object_get(o, "path")),
                   (int)json_integer_value(json_object_get(o, "page")));
            for (size_t k = 0; k < json_array_size(nums); k++)
                printf(" [%d]", (int)json_integer_value(json_array_get(nums, k)));
            printf(")\n");
        }
        fflush(stdout);
        fprintf(stderr, "mmrag: %d evidence, %d prompt tokens, TTFT %.0f ms, %d tokens (%s)\n", n_ev,
                gr.n_prompt, gr.ttft_ms, gr.n_gen, mmrag_stop_reason_str(gr.stop_reason));
    }
    json_decref(shown);
    rc = show_failed ? CLI_FAIL : CLI_OK;
out:
    mmrag_gen_result_free(&gr);
    free(prompt);
    free(ev);
    retr_result_free(&res);
    mmrag_session_free(ss);
    mmrag_engine_free(e);
    retr_free(r);
    embed_free(emb);
    store_close(s);
    return rc;
}
