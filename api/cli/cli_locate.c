/* api/cli/cli_locate.c — `mmrag locate`: find the region a description points at (engine/vpe),
 * with candidates gathered from the store; `mmrag eval vpe TRUTH.json`: hit rate at
 * IoU >= 0.5, mean IoU and false-positive rate over descriptions generated from the
 * corpus ground truth (tests/tool_gencorpus). */
#include <getopt.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "api/cli/cli.h"
#include "api/core/locate.h"
#include "api/core/render.h"
#include "engine/vpe.h"
#include "vision/clip.h"
#include "vision/textenc.h"

/* ---------- shared setup ---------- */

static int open_vpe(const char *models, const char *clip_path, textenc **te, clip_model **cm,
                    vpe **v) {
    char err[512], dir[4096];
    *te = NULL; *cm = NULL; *v = NULL;
    if (models) snprintf(dir, sizeof dir, "%s/minilm", models);
    if (textenc_create(models ? dir : NULL, NULL, te, err, sizeof err)) {
        cli_err("%s (locate needs the text model; see make models)", err);
        return -1;
    }
    if (clip_path && *clip_path && clip_create(clip_path, NULL, cm, err, sizeof err)) {
        cli_err("%s", err);
        textenc_free(*te);
        *te = NULL;
        return -1;
    }
    if (vpe_create(*te, *cm, v, err, sizeof err)) {
        cli_err("%s", err);
        clip_free(*cm);
        textenc_free(*te);
        *te = NULL; *cm = NULL;
        return -1;
    }
    return 0;
}

static void close_vpe(textenc *te, clip_model *cm, vpe *v) {
    vpe_free(v);
    clip_free(cm);
    textenc_free(te);
}

static int parse_threshold(const char *s, float *out) {
    char *end;
    double t = strtod(s, &end);
    if (!*s || *end || !(t >= 0 && t <= 1)) {
        cli_err("--threshold: expected a number in 0..1, got '%s'", s);
        return -1;
    }
    *out = (float)t;
    return 0;
}

/* ---------- mmrag locate ---------- */

/* --show target: an existing folder, or a file whose folder exists (checked up front). */
static int show_check(const char *path, int *is_dir) {
    struct stat st;
    if (!*path) { cli_err("locate: --show needs a file name"); return -1; }
    *is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    if (*is_dir) return 0;
    return cli_show_folder_check("locate", path);
}

/* Writes the located page with its box; returns 0 or -1 (message printed). */
static int show_write(store *s, const store_doc_row *d, const vpe_result *r, const char *target,
                      int is_dir, char *out, size_t outlen) {
    if (is_dir) snprintf(out, outlen, "%s/locate-doc%lld-p%d.png", target, (long long)d->id, r->page);
    else snprintf(out, outlen, "%s", target);
    float b[4];
    for (int i = 0; i < 4; i++) b[i] = r->box[i] > 0 ? (r->box[i] < 1 ? r->box[i] : 1) : 0;
    const char *label = r->found ? "found" : "best guess";
    char err[600], src[4200];
    if (render_source_pdf(s, d->path, d->sha256, src, sizeof src, err, sizeof err) ||
        render_page_png_file(src, r->page, b, 1, &label, 1000, out, err, sizeof err)) {
        cli_err("locate: --show: %s, page %d: %s", d->path ? d->path : "?", r->page, err);
        return -1;
    }
    return 0;
}

static const char locate_usage[] =
    "usage: mmrag locate --doc DOC [--page N] [--threshold T] [--json] [--show FILE.png]\n"
    "                    \"description\"\n"
    "  Finds the region of a page that the description points at, e.g.\n"
    "  \"the bar chart below the revenue heading\", \"the second figure on page 3\", \"Table 2\".\n"
    "  Prints page, normalized box [x0,y0,x1,y1], confidence (0..1) and region kind, or\n"
    "  \"not found\" when the confidence is below the threshold (with the best guess).\n"
    "  --doc DOC        document id, sha256 prefix or path (required)\n"
    "  --page N         only page N (default: all pages, or the page the description names)\n"
    "  --threshold T    confidence needed to answer (default 0.75)\n"
    "  --models DIR     model directory (default $MMRAG_MODELS or ./models)\n"
    "  --clip FILE      CLIP checkpoint for the image term (default $MMRAG_CLIP; none: text only)\n"
    "  --debug          per-candidate scores on stderr\n"
    "  --show FILE.png  write the page with the region's box drawn (also for a best guess);\n"
    "                   an existing folder gets locate-doc<ID>-p<PAGE>.png; prints the path\n"
    "  Exit status 0 whether found or not; 1 when the document is unknown.\n";

int cli_locate(int argc, char **argv) {
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'}, {"doc", required_argument, 0, 'D'},
        {"page", required_argument, 0, 'p'}, {"threshold", required_argument, 0, 't'},
        {"json", no_argument, 0, 'J'}, {"models", required_argument, 0, 'M'},
        {"clip", required_argument, 0, 'C'}, {"debug", no_argument, 0, 'g'},
        {"show", required_argument, 0, 'S'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *db = NULL, *docspec = NULL, *models = NULL, *clip_path = getenv("MMRAG_CLIP");
    const char *show = NULL;
    int o, json = 0, page = 0, show_dir = 0;
    vpe_options vo;
    vpe_options_default(&vo);
    optind = 0;
    while ((o = getopt_long(argc, argv, "d:p:t:h", opts, NULL)) != -1) {
        switch (o) {
        case 'd': db = optarg; break;
        case 'D': docspec = optarg; break;
        case 'p': if (cli_parse_int("--page", optarg, 1, 1000000, &page)) return CLI_USAGE; break;
        case 't': if (parse_threshold(optarg, &vo.threshold)) return CLI_USAGE; break;
        case 'J': json = 1; break;
        case 'M': models = optarg; break;
        case 'C': clip_path = optarg; break;
        case 'g': vo.debug = 1; break;
        case 'S': show = optarg; break;
        case 'h': fputs(locate_usage, stdout); return CLI_OK;
        default: fputs(locate_usage, stderr); return CLI_USAGE;
        }
    }
    if (!docspec) return cli_usage_error(locate_usage, "locate: --doc is required");
    if (optind + 1 != argc) return cli_usage_error(locate_usage, "locate: give one description");
    const char *desc = argv[optind];
    if (!desc[strspn(desc, " \t\r\n")]) return cli_usage_error(locate_usage, "locate: empty description");
    if (show && show_check(show, &show_dir)) return CLI_USAGE;
    vo.page = page;
    store *s = cli_store_open(db, 0);
    if (!s) return CLI_DBERR;
    store_doc_row d = {0};
    int rc = CLI_OK;
    textenc *te = NULL;
    clip_model *cm = NULL;
    vpe *v = NULL;
    locate_result lr;
    char err[512];
    if (cli_doc_resolve(s, docspec, &d) != STORE_OK) { rc = CLI_FAIL; goto out; }
    if (open_vpe(models, clip_path, &te, &cm, &v)) { rc = CLI_FAIL; goto out; }
    int lrc = api_locate(s, v, d.id, desc, &vo, &lr, err, sizeof err);
    if (lrc != LOCATE_OK) {
        cli_err("%s", err);
        rc = lrc == LOCATE_ERR_ARG || lrc == LOCATE_ERR_VPE ? CLI_FAIL : CLI_DBERR;
        goto out;
    }
    const vpe_result *r = &lr.r;
    char shown[4200] = "";
    if (show && r->index >= 0 && show_write(s, &d, r, show, show_dir, shown, sizeof shown)) {
        rc = CLI_FAIL;
        shown[0] = 0;
    }
    if (show && r->index < 0) cli_err("locate: --show: no candidate region; no PNG written");
    if (json) {
        json_t *j = json_pack("{s:b,s:I,s:f}", "found", r->found, "doc", (json_int_t)d.id,
                              "confidence", (double)r->confidence);
        if (r->index >= 0) {
            json_object_set_new(j, "page", json_integer(r->page));
            json_object_set_new(j, "box", json_pack("[f,f,f,f]", (double)r->box[0], (double)r->box[1],
                                                    (double)r->box[2], (double)r->box[3]));
            json_object_set_new(j, "kind", json_string(vpe_kind_name(r->kind)));
            json_object_set_new(j, lr.is_image ? "image_id" : "chunk_id", json_integer(r->ref_id));
        }
        json_object_set_new(j, "threshold", json_real(vo.threshold));
        json_object_set_new(j, "why", cli_json_str(r->why));
        if (shown[0]) json_object_set_new(j, "shown", cli_json_str(shown));
        cli_json_print(j);
    } else if (r->index < 0) {
        printf("not found (no candidate region%s)\n", vo.page || page ? " on that page" : "");
    } else {
        printf("%s page %d  %-7s [%.3f,%.3f,%.3f,%.3f]  confidence %.2f  %s %lld\n",
               r->found ? "found" : "not found; best guess", r->page, vpe_kind_name(r->kind),
               r->box[0], r->box[1], r->box[2], r->box[3], r->confidence,
               lr.is_image ? "image" : "chunk", (long long)r->ref_id);
    }
    if (shown[0] && !json) printf("shown: %s\n", shown);
out:
    close_vpe(te, cm, v);
    store_doc_row_clear(&d);
    store_close(s);
    return rc;
}

/* ---------- mmrag eval vpe ---------- */

typedef struct {
    char text[384];
    int32_t page;        /* expected page; 0 for a negative */
    float box[4];
    const char *type;    /* "caption", "label", "ordinal", "position", "relation", "negative" */
} eval_item;

typedef struct {
    eval_item *it;
    int32_t n, cap;
} eval_set;

static eval_item *eval_add(eval_set *e, const char *type, int32_t page, const float box[4]) {
    if (e->n == e->cap) {
        int32_t nc = e->cap ? 2 * e->cap : 64;
        eval_item *ni = realloc(e->it, sizeof *ni * (size_t)nc);
        if (!ni) return NULL;
        e->it = ni;
        e->cap = nc;
    }
    eval_item *it = &e->it[e->n++];
    memset(it, 0, sizeof *it);
    it->type = type;
    it->page = page;
    if (box) memcpy(it->box, box, sizeof it->box);
    return it;
}

/* Paraphrase a caption: drop the "Figure N:" label, swap common words for synonyms,
 * lower-case, and lead with a kind phrase. Word-level and deterministic. */
static void paraphrase(const char *caption, const char *lead, char *out, size_t len) {
    static const char *const syn[][2] = {
        {"photo", "picture"}, {"photograph", "picture"}, {"aerial", "overhead"},
        {"quarterly", "per-quarter"}, {"output", "production"}, {"efficiency", "performance"},
        {"percent", "percentage"}, {"schedule", "timetable"}, {"maintenance", "servicing"},
        {"over", "across"}, {"dawn", "sunrise"}, {"plant", "facility"}, {"revenue", "income"},
        {"growth", "increase"}, {"sales", "turnover"}, {"shows", "depicts"}, {"of", "of"}};
    const char *p = caption;
    const char *colon = strchr(p, ':');
    if (colon && colon - p < 16) p = colon + 1;
    size_t k = (size_t)snprintf(out, len, "%s", lead);
    while (*p && k + 1 < len) {
        while (*p == ' ') p++;
        size_t l = strcspn(p, " .,;");
        if (!l) { p++; continue; }
        char w[64];
        snprintf(w, sizeof w, "%.*s", (int)(l < 63 ? l : 63), p);
        for (char *c = w; *c; c++) *c = (char)tolower((unsigned char)*c);
        const char *r = w;
        for (size_t i = 0; i < sizeof syn / sizeof syn[0]; i++)
            if (!strcmp(w, syn[i][0])) r = syn[i][1];
        int wr = snprintf(out + k, len - k, " %s", r);
        if (wr < 0 || (size_t)wr >= len - k) break;
        k += (size_t)wr;
        p += l;
    }
}

static const char *const ord_words[] = {"first", "second", "third", "fourth", "fifth", "sixth"};

static int json_box(json_t *j, float b[4]) {
    if (!json_is_array(j) || json_array_size(j) != 4) return -1;
    for (int i = 0; i < 4; i++) b[i] = (float)json_number_value(json_array_get(j, (size_t)i));
    return 0;
}

/* Descriptions for one document's truth (pages[].images[], tables[], headings[]). */
static int eval_generate(json_t *pages, eval_set *e) {
    size_t pi;
    json_t *pg;
    int32_t n_fig_doc = 0, n_pages = 0;
    float first_box[4] = {0}, last_box[4] = {0};
    int32_t first_page = 0, last_page = 0;
    json_array_foreach(pages, pi, pg) {
        int32_t page = (int32_t)json_integer_value(json_object_get(pg, "page"));
        json_t *imgs = json_object_get(pg, "images"), *tabs = json_object_get(pg, "tables");
        json_t *heads = json_object_get(pg, "headings");
        int32_t nimg = (int32_t)json_array_size(imgs), ntab = (int32_t)json_array_size(tabs);
        n_pages++;
        for (int32_t k = 0; k < nimg; k++) {
            json_t *im = json_array_get(imgs, (size_t)k);
            float b[4];
            if (json_box(json_object_get(im, "box"), b)) return -1;
            const char *kind = json_string_value(json_object_get(im, "kind"));
            const char *cap = json_string_value(json_object_get(im, "caption"));
            int raster = kind && !strcmp(kind, "raster");
            const char *noun = raster ? "photo" : "chart";
            eval_item *it;
            if (cap && *cap) {
                if (!(it = eval_add(e, "caption", page, b))) return -1;
                paraphrase(cap, raster ? "the image of" : "the chart showing", it->text, sizeof it->text);
                int num = 0;
                if (sscanf(cap, "Figure %d", &num) == 1 && num > 0) {
                    if (!(it = eval_add(e, "label", page, b))) return -1;
                    snprintf(it->text, sizeof it->text, "Figure %d", num);
                }
            }
            if (!(it = eval_add(e, "ordinal", page, b))) return -1;
            if (nimg == 1) snprintf(it->text, sizeof it->text, "the %s on page %d", noun, page);
            else if (k < 6)
                snprintf(it->text, sizeof it->text, "the %s figure on page %d", ord_words[k], page);
            else snprintf(it->text, sizeof it->text, "the last figure on page %d", page);
            if (nimg >= 2 && (k == 0 || k == nimg - 1)) {
                if (!(it = eval_add(e, "position", page, b))) return -1;
                snprintf(it->text, sizeof it->text, "the %s at the %s of page %d", noun,
                         k == 0 ? "top" : "bottom", page);
            }
            const char *h = json_string_value(json_array_get(heads, 0));
            if (k == 0 && h && *h) {
                while (*h >= '0' && *h <= '9') h++;   /* "2 Output and turbines" -> words */
                while (*h == ' ' || *h == '.') h++;
                if (!(it = eval_add(e, "relation", page, b))) return -1;
                snprintf(it->text, sizeof it->text, "the %s below the %.200s heading", noun, h);
            }
            if (!n_fig_doc) { memcpy(first_box, b, sizeof first_box); first_page = page; }
            memcpy(last_box, b, sizeof last_box);
            last_page = page;
            n_fig_doc++;
        }
        for (int32_t k = 0; k < ntab; k++) {
            json_t *tb = json_array_get(tabs, (size_t)k);
            float b[4];
            if (json_box(json_object_get(tb, "box"), b)) return -1;
            const char *cap = json_string_value(json_object_get(tb, "caption"));
            eval_item *it;
            if (cap && *cap) {
                if (!(it = eval_add(e, "caption", page, b))) return -1;
                paraphrase(cap, "the table of", it->text, sizeof it->text);
                int num = 0;
                if (sscanf(cap, "Table %d", &num) == 1 && num > 0) {
                    if (!(it = eval_add(e, "label", page, b))) return -1;
                    snprintf(it->text, sizeof it->text, "Table %d", num);
                }
            }
            if (!(it = eval_add(e, "ordinal", page, b))) return -1;
            if (ntab == 1) snprintf(it->text, sizeof it->text, "the table on page %d", page);
            else snprintf(it->text, sizeof it->text, "the %s table on page %d", ord_words[k % 6], page);
        }
        /* structural negatives: one more figure than the page has; a table where none is */
        eval_item *it;
        if (nimg > 0 && nimg < 6) {
            if (!(it = eval_add(e, "negative", 0, NULL))) return -1;
            snprintf(it->text, sizeof it->text, "the %s figure on page %d", ord_words[nimg], page);
        }
        if (ntab == 0 && nimg > 0) {
            if (!(it = eval_add(e, "negative", 0, NULL))) return -1;
            snprintf(it->text, sizeof it->text, "the table on page %d", page);
        }
    }
    eval_item *it;
    if (n_fig_doc >= 2) {
        if (!(it = eval_add(e, "ordinal", first_page, first_box))) return -1;
        snprintf(it->text, sizeof it->text, "the first figure");
        if (!(it = eval_add(e, "ordinal", last_page, last_box))) return -1;
        snprintf(it->text, sizeof it->text, "the last figure");
    }
    /* content negatives: things no generated document contains */
    static const char *const neg[] = {
        "the pie chart of fish sales in Norway", "the map of the railway network",
        "a photo of a cat sleeping on a sofa", "the table of football league results",
        "the diagram of the human heart", "the chart below the quarterly revenue heading",
        "Figure 9", "the photo of the wedding guests"};
    for (size_t k = 0; k < sizeof neg / sizeof *neg; k++) {
        if (!(it = eval_add(e, "negative", 0, NULL))) return -1;
        snprintf(it->text, sizeof it->text, "%s", neg[k]);
    }
    (void)n_pages;
    return 0;
}

/* The document a truth entry describes: --doc, else the newest whose path ends in /file. */
static int64_t eval_find_doc(store *s, const char *docspec, const char *file) {
    if (docspec) {
        store_doc_row d = {0};
        if (cli_doc_resolve(s, docspec, &d) != STORE_OK) return -1;
        int64_t id = d.id;
        store_doc_row_clear(&d);
        return id;
    }
    store_doc_row *rows = NULL;
    int32_t n = 0;
    int64_t id = -1;
    if (store_doc_list(s, &rows, &n) != STORE_OK) { cli_err("%s", store_errmsg(s)); return -1; }
    size_t fl = file ? strlen(file) : 0;
    for (int32_t i = 0; i < n; i++) {
        const char *p = rows[i].path ? rows[i].path : "";
        size_t pl = strlen(p);
        if (fl && pl >= fl && !strcmp(p + pl - fl, file) && (pl == fl || p[pl - fl - 1] == '/'))
            id = rows[i].id;
    }
    store_docs_free(rows, n);
    if (id < 0) cli_err("eval vpe: no indexed document for '%s' (index it first, or pass --doc)",
                        file ? file : "?");
    return id;
}

static const char eval_usage[] =
    "usage: mmrag eval vpe TRUTH.json [--doc DOC] [--threshold T] [--json] [--verbose]\n"
    "  Generates region descriptions from the corpus truth (tests/tool_gencorpus corpus DIR):\n"
    "  caption paraphrases, labels (\"Figure 2\"), ordinals (\"the second figure on page 2\"),\n"
    "  positions, \"below the ... heading\" relations, plus negatives that must come back\n"
    "  not found. Prints the hit rate at IoU >= 0.5, the mean IoU over positives (0 when\n"
    "  not found) and the false-positive rate over negatives.\n"
    "  --doc DOC      the indexed document (default: the one whose path ends in docs[].file)\n"
    "  --models DIR, --clip FILE, --threshold T: as for mmrag locate\n";

int cli_eval_vpe(int argc, char **argv) {
    static const struct option opts[] = {
        {"db", required_argument, 0, 'd'}, {"doc", required_argument, 0, 'D'},
        {"threshold", required_argument, 0, 't'}, {"json", no_argument, 0, 'J'},
        {"verbose", no_argument, 0, 'v'}, {"models", required_argument, 0, 'M'},
        {"clip", required_argument, 0, 'C'}, {"debug", no_argument, 0, 'g'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *db = NULL, *docspec = NULL, *models = NULL, *clip_path = getenv("MMRAG_CLIP");
    int o, json = 0, verbose = 0;
    vpe_options vo;
    vpe_options_default(&vo);
    optind = 0;
    while ((o = getopt_long(argc, argv, "d:t:vh", opts, NULL)) != -1) {
        switch (o) {
        case 'd': db = optarg; break;
        case 'D': docspec = optarg; break;
        case 't': if (parse_threshold(optarg, &vo.threshold)) return CLI_USAGE; break;
        case 'J': json = 1; break;
        case 'v': verbose = 1; break;
        case 'M': models = optarg; break;
        case 'C': clip_path = optarg; break;
        case 'g': vo.debug = 1; break;
        case 'h': fputs(eval_usage, stdout); return CLI_OK;
        default: fputs(eval_usage, stderr); return CLI_USAGE;
        }
    }
    if (optind + 1 != argc) return cli_usage_error(eval_usage, "eval vpe: give one truth file");
    json_error_t je;
    json_t *truth = json_load_file(argv[optind], 0, &je);
    json_t *docs = truth ? json_object_get(truth, "docs") : NULL;
    if (!json_is_array(docs)) {
        cli_err("eval vpe: %s: %s", argv[optind], truth ? "no \"docs\" array" : je.text);
        json_decref(truth);
        return CLI_FAIL;
    }
    store *s = cli_store_open(db, 0);
    if (!s) { json_decref(truth); return CLI_DBERR; }
    textenc *te = NULL;
    clip_model *cm = NULL;
    vpe *v = NULL;
    int rc = CLI_OK;
    int32_t pos = 0, hits = 0, nf = 0, neg = 0, fp = 0;
    double iou_sum = 0, ms = 0;
    json_t *rows = json_array();
    if (open_vpe(models, clip_path, &te, &cm, &v)) { rc = CLI_FAIL; goto out; }
    size_t di;
    json_t *dj;
    json_array_foreach(docs, di, dj) {
        const char *file = json_string_value(json_object_get(dj, "file"));
        int64_t doc = eval_find_doc(s, docspec, file);
        if (doc < 0) { rc = CLI_FAIL; goto out; }
        eval_set es = {0};
        locate_cands c = {0};
        if (eval_generate(json_object_get(dj, "pages"), &es)) {
            cli_err("eval vpe: malformed truth for '%s'", file ? file : "?");
            free(es.it);
            rc = CLI_FAIL;
            goto out;
        }
        if (locate_cands_build(s, doc, 0, &c) != STORE_OK) {
            cli_err("%s", store_errmsg(s));
            free(es.it);
            rc = CLI_DBERR;
            goto out;
        }
        for (int32_t i = 0; i < es.n && rc == CLI_OK; i++) {
            const eval_item *it = &es.it[i];
            vpe_result r;
            char err[512];
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            if (vpe_locate(v, c.r, c.n, it->text, &vo, &r, err, sizeof err)) {
                cli_err("%s", err);
                rc = CLI_FAIL;
                break;
            }
            clock_gettime(CLOCK_MONOTONIC, &t1);
            ms += (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
            float iou = 0;
            int ok;
            if (it->page) {
                pos++;
                if (r.found && r.page == it->page) iou = vpe_iou(r.box, it->box);
                ok = iou >= 0.5f;
                hits += ok;
                nf += !r.found;
                iou_sum += iou;
            } else {
                neg++;
                fp += r.found;
                ok = !r.found;
            }
            if (json) {
                json_array_append_new(rows, json_pack("{s:s,s:s,s:b,s:b,s:f,s:f,s:i}", "description",
                    it->text, "type", it->type, "ok", ok, "found", r.found, "confidence",
                    (double)r.confidence, "iou", (double)iou, "page", r.found ? r.page : 0));
            } else if (verbose || !ok) {
                printf("%-4s %-8s conf %.2f iou %.2f  %s%s\n", ok ? "ok" : "MISS", it->type,
                       r.confidence, iou, it->text, r.found ? "" : "  (not found)");
            }
        }
        free(es.it);
        locate_cands_free(&c);
        if (docspec) break;   /* --doc names one document */
    }
    if (rc == CLI_OK) {
        double hr = pos ? (double)hits / pos : 0, miou = pos ? iou_sum / pos : 0;
        double fpr = neg ? (double)fp / neg : 0;
        int32_t nq = pos + neg;
        if (json) {
            json_t *j = json_pack("{s:i,s:f,s:f,s:i,s:i,s:f,s:f,s:f,s:o}", "positives", pos,
                                  "hit_rate_iou50", hr, "mean_iou", miou, "not_found", nf,
                                  "negatives", neg, "false_positive_rate", fpr, "threshold",
                                  (double)vo.threshold, "ms_per_query", nq ? ms / nq : 0,
                                  "items", rows);
            rows = NULL;
            cli_json_print(j);
        } else {
            printf("vpe eval (threshold %.2f): %d positives: hit rate @IoU>=0.5 %.3f (%d/%d), "
                   "mean IoU %.3f, not found %d; %d negatives: false-positive rate %.3f (%d/%d); "
                   "%.1f ms/query\n", vo.threshold, pos, hr, hits, pos, miou, nf, neg, fpr, fp,
                   neg, nq ? ms / nq : 0);
        }
    }
out:
    json_decref(rows);
    close_vpe(te, cm, v);
    store_close(s);
    json_decref(truth);
    return rc;
}
