/* api/cli/cli_ask.c — `mmrag ask "question"`: options -> answer_request, the answer core
 * (api/core/answer.h) streams the checked answer, then each citation [n] -> document,
 * page and the cited sentence's box; --show draws those boxes on their pages. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include "api/cli/cli.h"
#include "api/core/answer.h"
#include "api/core/embed.h"
#include "api/core/render.h"
#include "engine/engine.h"

static const char usage[] =
    "usage: mmrag ask \"question\" [--mode auto|extractive|generative] [-k N] [--json]\n"
    "                 [--show FILE.png|DIR] [--show-unsupported] [--model GGUF]\n"
    "                 [--max-tokens N] [--ctx N] [--kv f32|f16|int4|int4ch] [--temp T]\n"
    "                 [--seed S] [--threads N]\n"
    "  Retrieves evidence (text vectors + image vectors + BM25), splits it into sentences\n"
    "  with their boxes and answers from them; every sentence shown cites [n] the evidence\n"
    "  sentence that supports it (document, page, box). When the documents do not answer,\n"
    "  it says so and shows the nearest passages.\n"
    "  --mode M        extractive: the best sentences quoted verbatim; generative: the model\n"
    "                  writes, sentences the evidence does not support are dropped; auto\n"
    "                  (default): generative, the quotes when nothing survives\n"
    "  --show-unsupported  also show dropped sentences, marked [unsupported: ...]\n"
    "  -k N            evidence chunks to retrieve (default 6)\n"
    "  --json          one JSON object: answer, abstained, sentences, citations, evidence\n"
    "  --show FILE.png the first cited page as a PNG with its cited boxes drawn and labelled\n"
    "  --show DIR      one PNG per cited page, DIR/doc<ID>-p<PAGE>.png (DIR is created)\n"
    "  --model GGUF    language model (default $MMRAG_LLM, else\n"
    "                  $MMRAG_MODELS/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf)\n"
    "  --max-tokens N  answer length limit (default 200)\n"
    "  --ctx N         context window in tokens (default 2048)\n"
    "  --kv TYPE       KV cache type (default f32; int4 = 4-bit blocks, int4ch = per channel)\n"
    "  --temp T        sampling temperature (default 0 = greedy); --seed S for sampling\n"
    "  --models DIR    model directory (default $MMRAG_MODELS or ./models)\n";

static int on_text(void *ud, const char *p, size_t n) {
    if (!*(int *)ud) {
        fwrite(p, 1, n, stdout);
        fflush(stdout);
    }
    return 0;
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

#define SHOW_MAX 64

/* The citations on the page of citation `first` (not yet drawn): boxes and [n] labels. */
static int page_boxes(const answer_result *a, int32_t first, int *done, float *boxes,
                      char labels[][16], json_t *nums) {
    const retr_hit *h = &a->hits.hits[a->ev[a->cites[first]].hit];
    int nb = 0;
    for (int32_t j = first; j < a->n_cites && j < SHOW_MAX; j++) {
        const answer_evidence *e = &a->ev[a->cites[j]];
        const retr_hit *o = &a->hits.hits[e->hit];
        if (done[j] || o->doc != h->doc || o->page != h->page) continue;
        done[j] = 1;
        float *b = boxes + 4 * nb;
        b[0] = clamp01(e->box.x0); b[1] = clamp01(e->box.y0);
        b[2] = clamp01(e->box.x1); b[3] = clamp01(e->box.y1);
        if (b[2] < b[0] || b[3] < b[1]) b[2] = b[0], b[3] = b[1];   /* draws nothing */
        snprintf(labels[nb], 16, "[%d]", j + 1);
        json_array_append_new(nums, json_integer(j + 1));
        nb++;
    }
    return nb;
}

/* Renders each cited (document, page) once with its cited sentence boxes labelled [n];
 * a file target gets the first page only. Appends {path, doc_id, page, citations} to
 * shown. Returns the number of pages that failed (messages printed). */
static int show_citations(store *s, const answer_result *a, const char *target, int is_dir,
                          json_t *shown) {
    int done[SHOW_MAX] = {0}, failed = 0, written = 0, skipped = 0;
    for (int32_t i = 0; i < a->n_cites && i < SHOW_MAX; i++) {
        if (done[i]) continue;
        const retr_hit *h = &a->hits.hits[a->ev[a->cites[i]].hit];
        float boxes[4 * SHOW_MAX];
        char labels_buf[SHOW_MAX][16];
        const char *labels[SHOW_MAX];
        json_t *nums = json_array();
        int nb = page_boxes(a, i, done, boxes, labels_buf, nums);
        if (written && !is_dir) { skipped++; json_decref(nums); continue; }
        for (int k = 0; k < nb; k++) labels[k] = labels_buf[k];
        char out[4200], err[600];
        if (is_dir) snprintf(out, sizeof out, "%s/doc%lld-p%d.png", target, (long long)h->doc, h->page);
        else snprintf(out, sizeof out, "%s", target);
        store_doc_row d = {0};
        char src[4200];
        if (store_doc_get_id(s, h->doc, &d) != STORE_OK || !d.path) {
            cli_err("ask: --show: document %lld is gone from the collection", (long long)h->doc);
            failed++;
        } else if (render_source_pdf(s, d.path, d.sha256, src, sizeof src, err, sizeof err) ||
                   render_page_png_file(src, h->page, boxes, nb, labels, ASK_SHOW_WIDTH, out,
                                        err, sizeof err)) {
            cli_err("ask: --show: %s, page %d: %s", d.path, h->page, err);
            failed++;
        } else {
            json_array_append_new(shown, json_pack("{s:o,s:I,s:i,s:O}", "path", cli_json_str(out),
                                                   "doc_id", (json_int_t)h->doc, "page", h->page,
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

/* ---- output ------------------------------------------------------------------------------ */
static void print_citations(const answer_result *a, json_t *shown) {
    printf("\n");
    for (int32_t i = 0; i < a->n_cites; i++) {
        const answer_evidence *e = &a->ev[a->cites[i]];
        const retr_hit *h = &a->hits.hits[e->hit];
        printf("[%d] -> %s (doc %lld), page %d, box [%.3f, %.3f, %.3f, %.3f] (%s)\n"
               "    \u201c%s\u201d\n", i + 1, h->title ? h->title : "untitled", (long long)h->doc,
               h->page, e->box.x0, e->box.y0, e->box.x1, e->box.y1,
               e->box_is_line ? "sentence" : "chunk", e->text);
    }
    if (!a->hits.n) printf("(no evidence found in the collection)\n");
    for (size_t i = 0; i < json_array_size(shown); i++) {
        json_t *o = json_array_get(shown, i), *nums = json_object_get(o, "citations");
        printf("shown: %s  (page %d with box", json_string_value(json_object_get(o, "path")),
               (int)json_integer_value(json_object_get(o, "page")));
        for (size_t k = 0; k < json_array_size(nums); k++)
            printf(" [%d]", (int)json_integer_value(json_array_get(nums, k)));
        printf(")\n");
    }
    fflush(stdout);
    int chunk_boxes = 0;
    for (int32_t i = 0; i < a->n_cites; i++) chunk_boxes += !a->ev[a->cites[i]].box_is_line;
    if (chunk_boxes)
        cli_err("ask: %d citation(s) carry their chunk's box: the collection was indexed before "
                "sentence boxes were kept (index the documents again for them)", chunk_boxes);
    fprintf(stderr, "mmrag: %s%s, %d evidence sentences, %d prompt tokens, TTFT %.0f ms, %d tokens\n",
            a->abstained ? "abstained, " : "", answer_mode_name(a->mode_used), a->n_ev,
            a->prompt_tokens, a->ttft_ms, a->completion_tokens);
}

typedef struct {
    const char *db, *models, *model, *show;
    int json, ctx, kv, threads;
} ask_cli;

static int parse(int argc, char **argv, ask_cli *c, answer_request *rq) {
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'},     {"json", no_argument, 0, 'J'},
        {"model", required_argument, 0, 'm'},  {"models", required_argument, 0, 'M'},
        {"max-tokens", required_argument, 0, 'n'}, {"ctx", required_argument, 0, 'c'},
        {"kv", required_argument, 0, 'v'},     {"temp", required_argument, 0, 't'},
        {"seed", required_argument, 0, 's'},   {"threads", required_argument, 0, 'T'},
        {"show", required_argument, 0, 'S'},   {"mode", required_argument, 0, 'o'},
        {"show-unsupported", no_argument, 0, 'U'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    int o, k = rq->k, mt = rq->max_tokens;
    optind = 0;
    while ((o = getopt_long(argc, argv, "d:k:h", opts, NULL)) != -1) {
        switch (o) {
        case 'd': c->db = optarg; break;
        case 'J': c->json = 1; break;
        case 'm': c->model = optarg; break;
        case 'S': c->show = optarg; break;
        case 'M': c->models = optarg; break;
        case 'U': rq->show_unsupported = 1; break;
        case 'o':
            if (answer_mode_parse(optarg, &rq->mode)) {
                cli_err("ask: unknown --mode '%s' (auto, extractive, generative)", optarg);
                return CLI_USAGE;
            }
            break;
        case 'k': if (cli_parse_int("-k", optarg, 1, 100, &k)) return CLI_USAGE; break;
        case 'n': if (cli_parse_int("--max-tokens", optarg, 1, 8192, &mt)) return CLI_USAGE; break;
        case 'c': if (cli_parse_int("--ctx", optarg, 256, 1 << 20, &c->ctx)) return CLI_USAGE; break;
        case 'T': if (cli_parse_int("--threads", optarg, 1, 1024, &c->threads)) return CLI_USAGE; break;
        case 't': rq->temperature = (float)atof(optarg); break;
        case 's': rq->seed = strtoull(optarg, NULL, 10); break;
        case 'v':
            if (!strcmp(optarg, "f32")) c->kv = MMRAG_KV_F32;
            else if (!strcmp(optarg, "f16")) c->kv = MMRAG_KV_F16;
            else if (!strcmp(optarg, "int4")) c->kv = MMRAG_KV_INT4;
            else if (!strcmp(optarg, "int4ch")) c->kv = MMRAG_KV_INT4_CH;
            else return cli_usage_error(usage, "ask: unknown --kv '%s'", optarg);
            break;
        case 'h': fputs(usage, stdout); return -1;
        default: return cli_usage_error(usage, "ask: bad option");
        }
    }
    rq->k = k;
    rq->max_tokens = mt;
    if (optind + 1 != argc) return cli_usage_error(usage, "ask: one question expected");
    rq->question = argv[optind];
    char err[256];
    if (answer_request_check(rq, err, sizeof err)) {
        cli_err("ask: %s", err);
        return CLI_USAGE;
    }
    return CLI_OK;
}

int cli_ask(int argc, char **argv) {
    ask_cli c = {.kv = MMRAG_KV_F32};
    answer_request rq;
    answer_request_default(&rq);
    int prc = parse(argc, argv, &c, &rq);
    if (prc) return prc < 0 ? CLI_OK : prc;
    char mbuf[4200];
    const char *models = embed_models_dir(c.models, mbuf, sizeof mbuf);
    int show_dir = 0, rc = CLI_FAIL;
    if (c.show && show_prepare(c.show, &show_dir)) return CLI_USAGE;
    answer_llm *llm = NULL;
    if (rq.mode != ANSWER_EXTRACTIVE) {   /* cheap checks first: the model loads in seconds */
        if (cli_llm_open(c.model, models, c.ctx, c.kv, c.threads, &llm)) return CLI_FAIL;
        char err[600];
        if (answer_llm_load(llm, err, sizeof err)) { cli_err("ask: %s", err); answer_llm_free(llm); return CLI_FAIL; }
    }
    store *s = cli_store_open(c.db, 0);
    if (!s) { answer_llm_free(llm); return CLI_DBERR; }
    embed_ctx *emb = NULL;
    retriever *r = NULL;
    answer_result a = {0};
    json_t *shown = json_array();
    char err[600];
    if (cli_retriever_open(s, models, c.json, 1, &emb, &r)) goto out;
    rq.on_text = on_text;
    rq.user = &c.json;
    int arc = answer_run(r, emb ? embed_textenc(emb) : NULL, llm, &rq, &a, err, sizeof err);
    if (arc != ANSWER_OK) {
        cli_err("ask: %s", err);
        rc = arc == ANSWER_ERR_ARG || arc == ANSWER_ERR_CONTEXT ? CLI_USAGE : CLI_FAIL;
        goto out;
    }
    if (!c.json) { printf("\n"); fflush(stdout); }
    int show_failed = 0;
    if (c.show) {
        if (a.n_cites) show_failed = show_citations(s, &a, c.show, show_dir, shown);
        else cli_err("ask: --show: the answer cites no evidence; no PNG written");
    }
    if (c.json) {
        json_t *o = answer_json(&a, &rq);
        if (o && c.show) json_object_set(o, "shown", shown);
        cli_json_print(o);
    } else {
        print_citations(&a, shown);
    }
    rc = show_failed ? CLI_FAIL : CLI_OK;
out:
    json_decref(shown);
    answer_result_free(&a);
    answer_llm_free(llm);
    retr_free(r);
    embed_free(emb);
    store_close(s);
    return rc;
}
