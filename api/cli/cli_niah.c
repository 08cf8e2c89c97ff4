/* api/cli/cli_niah.c — `mmrag eval niah`: needle in a haystack. A planted fact (a vault code)
 * sits at depths 0..100% of filler contexts of several lengths; the model is asked for it
 * (greedy). Accuracy grid per attention/KV configuration (full fp32 KV, int4 KV, sliding
 * window), printed and written as a PNG heatmap (cairo). */
#include <cairo.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include "api/cli/cli.h"
#include "engine/engine.h"

static const char usage[] =
    "usage: mmrag eval niah [--lengths 512,1024,2048] [--depths 5] [--trials N] [--png FILE]\n"
    "                       [--model GGUF] [--window W] [--json]\n"
    "  Plants \"The secret vault code is NNNN.\" at depths 0..100%% of filler text of each\n"
    "  length (tokens) and asks for the code; a trial passes when the answer contains it.\n"
    "  Configurations: full attention with fp32 KV, int4 KV (per block and head), int4-ch KV\n"
    "  (per channel / per token), sliding window (--window, default 256), and sparse: the\n"
    "  first 64 tokens + the window (attention sinks keep the model coherent).\n"
    "  --png FILE   heatmap (rows: configuration x length, columns: depth); default niah.png\n";

static const char *FILLER[] = {
    "The river bends twice before it reaches the old mill.",
    "Farmers in the valley plant barley in early spring.",
    "A quiet library keeps its rare maps in a cool room.",
    "The committee met on Tuesday to review the budget.",
    "Trains to the coast leave every hour from platform four.",
    "Bees return to the hive when the afternoon turns cold.",
    "The museum added a new wing for modern sculpture.",
    "Fresh bread is sold at the corner bakery each morning.",
    "Engineers tested the bridge with heavy trucks last year.",
    "The lighthouse keeper writes the weather in a logbook.",
};

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Filler of about `tokens` tokens with the needle inserted at fraction depth. */
static char *haystack(struct mmrag_engine *e, int tokens, double depth, const char *needle,
                      uint64_t seed) {
    size_t cap = (size_t)tokens * 8 + 4096, len = 0;
    char *t = malloc(cap);
    if (!t) return NULL;
    t[0] = 0;
    /* sentences average ~11 tokens */
    int n_sent = tokens / 11 + 1, at = (int)(depth * n_sent + 0.5);
    for (int i = 0; i <= n_sent; i++) {
        const char *s = i == at ? needle : i == n_sent ? "" : FILLER[rng_next(&seed) % 10];
        size_t l = strlen(s);
        if (len + l + 2 >= cap) break;
        memcpy(t + len, s, l);
        len += l;
        if (l) t[len++] = ' ';
        t[len] = 0;
    }
    (void)e;
    return t;
}

static void write_png(const char *path, double *acc, const char *const *rows, int nrows,
                      const int *depth_pct, int ndepth) {
    int cw = 70, ch = 28, lw = 190, th = 40;
    cairo_surface_t *sf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, lw + cw * ndepth + 10,
                                                     th + ch * nrows + 10);
    cairo_t *cr = cairo_create(sf);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, 12);
    char lab[64];
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, 8, 18);
    cairo_show_text(cr, "NIAH accuracy (depth %)");
    for (int d = 0; d < ndepth; d++) {
        snprintf(lab, sizeof lab, "%d%%", depth_pct[d]);
        cairo_move_to(cr, lw + d * cw + 22, th - 6);
        cairo_show_text(cr, lab);
    }
    for (int r = 0; r < nrows; r++) {
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_move_to(cr, 8, th + r * ch + 18);
        cairo_show_text(cr, rows[r]);
        for (int d = 0; d < ndepth; d++) {
            double a = acc[r * ndepth + d];
            cairo_set_source_rgb(cr, 1 - a, 0.25 + 0.6 * a, 0.25);
            cairo_rectangle(cr, lw + d * cw, th + r * ch, cw - 2, ch - 2);
            cairo_fill(cr);
            cairo_set_source_rgb(cr, 1, 1, 1);
            snprintf(lab, sizeof lab, "%.0f%%", 100 * a);
            cairo_move_to(cr, lw + d * cw + 20, th + r * ch + 18);
            cairo_show_text(cr, lab);
        }
    }
    cairo_surface_write_to_png(sf, path);
    cairo_destroy(cr);
    cairo_surface_destroy(sf);
}

int cli_eval_niah(int argc, char **argv) {
    static const struct option opts[] = {
        {"lengths", required_argument, 0, 'L'}, {"depths", required_argument, 0, 'D'},
        {"trials", required_argument, 0, 'T'},  {"png", required_argument, 0, 'P'},
        {"model", required_argument, 0, 'm'},   {"window", required_argument, 0, 'W'},
        {"json", no_argument, 0, 'J'},          {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *png = "niah.png", *model = NULL;
    char lengths_s[256] = "512,1024,2048";
    int ndepth = 5, trials = 1, window = 256, json = 0, o;
    optind = 0;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case 'L': snprintf(lengths_s, sizeof lengths_s, "%s", optarg); break;
        case 'D': if (cli_parse_int("--depths", optarg, 2, 11, &ndepth)) return CLI_USAGE; break;
        case 'T': if (cli_parse_int("--trials", optarg, 1, 20, &trials)) return CLI_USAGE; break;
        case 'W': if (cli_parse_int("--window", optarg, 16, 1 << 20, &window)) return CLI_USAGE; break;
        case 'P': png = optarg; break;
        case 'm': model = optarg; break;
        case 'J': json = 1; break;
        case 'h': fputs(usage, stdout); return CLI_OK;
        default: return cli_usage_error(usage, "eval niah: bad option");
        }
    }
    int lens[16], nlen = 0;
    for (char *save = NULL, *t = strtok_r(lengths_s, ",", &save); t && nlen < 16; t = strtok_r(NULL, ",", &save)) {
        int v = atoi(t);
        if (v < 64 || v > 1 << 20) return cli_usage_error(usage, "eval niah: bad length '%s'", t);
        lens[nlen++] = v;
    }
    if (!nlen) return cli_usage_error(usage, "eval niah: no lengths");
    int maxlen = 0;
    for (int i = 0; i < nlen; i++) maxlen = lens[i] > maxlen ? lens[i] : maxlen;
    char mpath[1024];
    if (!model) {
        const char *md = getenv("MMRAG_MODELS") && *getenv("MMRAG_MODELS") ? getenv("MMRAG_MODELS") : "models";
        snprintf(mpath, sizeof mpath, "%s/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", md);
        model = mpath;
    }
    static const char *cfg_name[] = {"full fp32-KV", "full int4-KV", "full int4ch-KV", "sliding",
                                     "sparse 64+window"};
    enum { NCFG = 5 };
    int depth_pct[11];
    for (int d = 0; d < ndepth; d++) depth_pct[d] = 100 * d / (ndepth - 1);
    double *acc = calloc((size_t)NCFG * nlen * ndepth, sizeof *acc);
    char **rows = calloc((size_t)NCFG * nlen, sizeof *rows);
    json_t *jout = json_array();
    for (int c = 0; c < NCFG; c++) {
        struct mmrag_engine_params p = mmrag_engine_default_params();
        p.n_ctx = maxlen + 256;
        p.kv_type = c == 1 ? MMRAG_KV_INT4 : c == 2 ? MMRAG_KV_INT4_CH : MMRAG_KV_F32;
        if (c == 3) { p.attn_mode = MMRAG_ATTN_SLIDING; p.window = window; }
        if (c == 4) { p.attn_mode = MMRAG_ATTN_SPARSE; p.window = window; p.n_global = 64; }
        char err[512];
        struct mmrag_engine *e = mmrag_engine_init_from_file(model, p, err, sizeof err);
        if (!e) { cli_err("eval niah: %s", err); free(acc); free(rows); json_decref(jout); return CLI_FAIL; }
        struct mmrag_session *s = mmrag_session_create(e, err, sizeof err);
        for (int li = 0; li < nlen; li++) {
            int row = c * nlen + li;
            rows[row] = malloc(64);
            snprintf(rows[row], 64, "%s %d", cfg_name[c], lens[li]);
            if (!json) { printf("%-22s", rows[row]); fflush(stdout); }
            for (int d = 0; d < ndepth; d++) {
                int ok = 0;
                for (int t = 0; t < trials; t++) {
                    uint64_t seed = (uint64_t)(li * 131 + d * 17 + t) + 1;
                    int code = 1000 + (int)(rng_next(&seed) % 9000);
                    char needle[96], codes[16];
                    snprintf(needle, sizeof needle, "The secret vault code is %d.", code);
                    snprintf(codes, sizeof codes, "%d", code);
                    char *hay = haystack(e, lens[li], depth_pct[d] / 100.0, needle, seed);
                    size_t ul = strlen(hay) + 256;
                    char *user = malloc(ul), *prompt = malloc(ul + 512);
                    snprintf(user, ul, "%s\n\nWhat is the secret vault code? Answer with the number only.", hay);
                    mmrag_engine_chat_prompt(e, NULL, user, prompt, ul + 512);
                    struct mmrag_gen_params g = mmrag_gen_default_params();
                    g.max_tokens = 12;
                    struct mmrag_gen_result r;
                    if (mmrag_session_generate(s, prompt, &g, &r) == 0 && strstr(r.text, codes)) ok++;
                    mmrag_gen_result_free(&r);
                    free(hay); free(user); free(prompt);
                }
                acc[row * ndepth + d] = (double)ok / trials;
                if (!json) { printf(" %4.0f%%", 100.0 * ok / trials); fflush(stdout); }
                json_array_append_new(jout, json_pack("{s:s,s:i,s:i,s:f}", "config", cfg_name[c], "length",
                                                      lens[li], "depth", depth_pct[d], "accuracy",
                                                      (double)ok / trials));
            }
            if (!json) printf("\n");
        }
        mmrag_session_free(s);
        mmrag_engine_free(e);
    }
    write_png(png, acc, (const char *const *)rows, NCFG * nlen, depth_pct, ndepth);
    if (json) cli_json_print(json_pack("{s:o,s:s}", "grid", jout, "png", png));
    else {
        printf("depths:");
        for (int d = 0; d < ndepth; d++) printf(" %d%%", depth_pct[d]);
        printf("\nheatmap written to %s\n", png);
        json_decref(jout);
    }
    for (int i = 0; i < NCFG * nlen; i++) free(rows[i]);
    free(rows);
    free(acc);
    return CLI_OK;
}
