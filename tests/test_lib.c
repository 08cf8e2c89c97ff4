/* Public library (include/mmrag.h): open, index file + memory, list, search, delete, bad
 * input codes, a batch through the shared indexer, per-thread error messages, locate (against the corpus truth boxes, from
 * several threads at once; needs models/minilm), ask with streaming and cancellation (when
 * the language model is present), and the examples/example program built against the
 * library, run end to end. PDFs and truth boxes come from tool_gencorpus. */
#include "mmrag.h"
#include "tests/test.h"

#include <jansson.h>

#include <pthread.h>
#include <sys/stat.h>

static char g_dir[512], g_pdf[1024], g_pdf2[1024];

static int setup(void) {
    static int done = -1;
    if (done >= 0) return done;
    const char *tmp = test_env("MMRAG_TMP", "/tmp");
    const char *b = test_env("MMRAG_BUILD", "build");
    char cmd[4096];
    snprintf(g_dir, sizeof g_dir, "%s/lib-samples", tmp);
    snprintf(cmd, sizeof cmd, "rm -rf %s %s/libdb* && %s/tests/tool_gencorpus samples %s >/dev/null 2>&1",
             g_dir, tmp, b, g_dir);
    done = system(cmd) == 0;
    snprintf(g_pdf, sizeof g_pdf, "%s/helios-inverter-manual.pdf", g_dir);
    snprintf(g_pdf2, sizeof g_pdf2, "%s/northwind-q3-report.pdf", g_dir);
    return done;
}

static void db_path(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/libdb-%s", test_env("MMRAG_TMP", "/tmp"), name);
}

TEST(index_search_list_delete) {
    CHECK_MSG(setup(), "fixture: tool_gencorpus could not write the sample PDFs");
    char db[1100], err[256];
    db_path(db, sizeof db, "a");
    mmrag *h;
    CHECK_MSG(mmrag_open(db, NULL, &h, err, sizeof err) == MMRAG_OK, "%s", err);
    int64_t id1 = 0, id2 = 0, id3 = 0;
    CHECK_MSG(mmrag_index_file(h, g_pdf, &id1) == MMRAG_OK, "%s", mmrag_errmsg(h));
    size_t len;
    char *mem = test_read_file(g_pdf2, &len);
    CHECK(mem);
    int rc = mmrag_index_memory(h, mem, len, "northwind.pdf", &id2);
    CHECK_MSG(rc == MMRAG_OK, "%s", mmrag_errmsg(h));
    CHECK(id1 > 0 && id2 > 0 && id1 != id2);
    /* same bytes again: no-op that returns the existing id */
    CHECK(mmrag_index_memory(h, mem, len, "again.pdf", &id3) == MMRAG_OK && id3 == id2);
    free(mem);
    mmrag_doc *docs;
    int32_t n;
    CHECK(mmrag_list(h, &docs, &n) == MMRAG_OK);
    CHECK(n == 2 && docs[0].pages >= 1 && docs[0].chunks > 0 && strlen(docs[0].sha256) == 64);
    mmrag_docs_free(docs, n);
    mmrag_hit *hits;
    mmrag_search_opts so = {.k = 3};
    CHECK(mmrag_search(h, "inverter rated AC power", &so, &hits, &n) == MMRAG_OK);
    CHECK(n >= 1 && n <= 3);
    CHECK_MSG(hits[0].doc_id == id1, "top hit doc %lld", (long long)hits[0].doc_id);
    CHECK(hits[0].page == 1 && hits[0].box.x1 > hits[0].box.x0 && hits[0].box.x1 <= 1.0f);
    CHECK(hits[0].text && *hits[0].text && hits[0].kind);
    mmrag_hits_free(hits, n);
    /* restricted to the other document: no hit from the first */
    so.docs = &id2;
    so.n_docs = 1;
    CHECK(mmrag_search(h, "inverter rated AC power", &so, &hits, &n) == MMRAG_OK);
    for (int32_t i = 0; i < n; i++) CHECK(hits[i].doc_id == id2);
    mmrag_hits_free(hits, n);
    CHECK(mmrag_delete(h, id1) == MMRAG_OK);
    CHECK(mmrag_delete(h, id1) == MMRAG_ERR_NOTFOUND);
    CHECK(mmrag_search(h, "inverter rated AC power", NULL, &hits, &n) == MMRAG_OK);
    for (int32_t i = 0; i < n; i++) CHECK_MSG(hits[i].doc_id != id1, "ghost hit after delete");
    mmrag_hits_free(hits, n);
    mmrag_close(h);
}

TEST(bad_input_codes) {
    CHECK_MSG(setup(), "fixture: tool_gencorpus could not write the sample PDFs");
    char db[1100], err[256];
    db_path(db, sizeof db, "b");
    mmrag *h;
    CHECK(mmrag_open(NULL, NULL, &h, err, sizeof err) == MMRAG_ERR_ARG && h == NULL);
    mmrag_options o;
    mmrag_options_default(&o);
    o.embed = 0;   /* BM25 only: no model needed */
    CHECK_MSG(mmrag_open(db, &o, &h, err, sizeof err) == MMRAG_OK, "%s", err);
    CHECK(mmrag_index_file(h, "/nonexistent/x.pdf", NULL) == MMRAG_ERR_IO);
    CHECK(strstr(mmrag_errmsg(h), "x.pdf") != NULL);
    CHECK(mmrag_index_memory(h, "hello, not a pdf", 16, "junk.pdf", NULL) == MMRAG_ERR_INPUT);
    CHECK(strlen(mmrag_errmsg(h)) > 0);
    CHECK(mmrag_index_memory(h, NULL, 0, NULL, NULL) == MMRAG_ERR_ARG);
    mmrag_hit *hits;
    int32_t n;
    CHECK(mmrag_search(h, "", NULL, &hits, &n) == MMRAG_ERR_ARG);
    CHECK(mmrag_delete(h, -3) == MMRAG_ERR_ARG);
    mmrag_region reg;
    CHECK(mmrag_locate(h, 1, 1, "  ", &reg) == MMRAG_ERR_ARG && strstr(mmrag_errmsg(h), "description"));
    CHECK(mmrag_locate(h, 1, -1, "the chart", &reg) == MMRAG_ERR_ARG);
    CHECK(mmrag_locate(h, 0, 1, "the chart", &reg) == MMRAG_ERR_ARG);
    CHECK(mmrag_locate(h, 1, 1, "the chart", NULL) == MMRAG_ERR_ARG);
    CHECK(strcmp(mmrag_strerror(MMRAG_ERR_UNSUPPORTED), "unknown error") != 0);
    /* BM25-only handle still searches */
    CHECK(mmrag_index_file(h, g_pdf, NULL) == MMRAG_OK);
    CHECK(mmrag_search(h, "inverter", NULL, &hits, &n) == MMRAG_OK && n > 0);
    mmrag_hits_free(hits, n);
    mmrag_close(h);
    /* read-only open of a missing collection fails cleanly */
    o.readonly = 1;
    db_path(db, sizeof db, "missing");
    CHECK(mmrag_open(db, &o, &h, err, sizeof err) != MMRAG_OK && h == NULL && err[0]);
}

/* the batch indexer: parallel parse, embedding beside, a code per file */
TEST(index_files_batch) {
    CHECK_MSG(setup(), "fixture: tool_gencorpus could not write the sample PDFs");
    char db[1100], err[256];
    db_path(db, sizeof db, "batch");
    mmrag *h;
    CHECK_MSG(mmrag_open(db, NULL, &h, err, sizeof err) == MMRAG_OK, "%s", err);
    const char *paths[] = {g_pdf, "/nonexistent/y.pdf", g_pdf2};
    int32_t st[3] = {-99, -99, -99};
    int64_t ids[3] = {-1, -1, -1};
    CHECK(mmrag_index_files(h, paths, 3, 2, st, ids) == MMRAG_ERR_IO);
    CHECK_MSG(strstr(mmrag_errmsg(h), "y.pdf") != NULL, "%s", mmrag_errmsg(h));
    CHECK(st[0] == MMRAG_OK && st[1] == MMRAG_ERR_IO && st[2] == MMRAG_OK);
    CHECK(ids[0] > 0 && ids[1] == 0 && ids[2] > 0 && ids[0] != ids[2]);
    mmrag_hit *hits;
    int32_t n;
    CHECK(mmrag_search(h, "inverter rated AC power", NULL, &hits, &n) == MMRAG_OK && n > 0);
    CHECK_MSG(hits[0].doc_id == ids[0], "top hit doc %lld", (long long)hits[0].doc_id);
    mmrag_hits_free(hits, n);
    /* again: unchanged files keep their ids; no files is no work */
    int64_t again[2] = {0, 0};
    const char *two[] = {g_pdf, g_pdf2};
    CHECK_MSG(mmrag_index_files(h, two, 2, 0, NULL, again) == MMRAG_OK, "%s", mmrag_errmsg(h));
    CHECK(again[0] == ids[0] && again[1] == ids[2]);
    CHECK(mmrag_index_files(h, NULL, 0, 1, NULL, NULL) == MMRAG_OK);
    CHECK(mmrag_index_files(h, NULL, 2, 1, NULL, NULL) == MMRAG_ERR_ARG);
    const char *empty[] = {""};
    CHECK(mmrag_index_files(h, empty, 1, 1, NULL, NULL) == MMRAG_ERR_ARG);
    mmrag_close(h);
    mmrag_options o;
    mmrag_options_default(&o);
    o.readonly = 1;
    CHECK_MSG(mmrag_open(db, &o, &h, err, sizeof err) == MMRAG_OK, "%s", err);
    CHECK(mmrag_index_files(h, two, 2, 1, NULL, NULL) == MMRAG_ERR_STORE);
    mmrag_close(h);
}

typedef struct { mmrag *h; const char *path; char msg[512]; int rc; } th_arg;
static void *th_index(void *p) {
    th_arg *a = p;
    a->rc = mmrag_index_file(a->h, a->path, NULL);
    snprintf(a->msg, sizeof a->msg, "%s", mmrag_errmsg(a->h));
    return NULL;
}

TEST(threads_have_their_own_errors) {
    CHECK_MSG(setup(), "fixture: tool_gencorpus could not write the sample PDFs");
    char db[1100], err[256];
    db_path(db, sizeof db, "c");
    mmrag_options o;
    mmrag_options_default(&o);
    o.embed = 0;
    mmrag *h;
    CHECK_MSG(mmrag_open(db, &o, &h, err, sizeof err) == MMRAG_OK, "%s", err);
    th_arg a[3] = {{h, "/nonexistent/first.pdf", "", 0}, {h, g_pdf, "", 0}, {h, "/nonexistent/second.pdf", "", 0}};
    pthread_t t[3];
    for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, th_index, &a[i]);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    CHECK(a[0].rc == MMRAG_ERR_IO && strstr(a[0].msg, "first.pdf") && !strstr(a[0].msg, "second"));
    CHECK(a[2].rc == MMRAG_ERR_IO && strstr(a[2].msg, "second.pdf") && !strstr(a[2].msg, "first"));
    CHECK_MSG(a[1].rc == MMRAG_OK && a[1].msg[0] == 0, "%s", a[1].msg);
    mmrag_close(h);
}

/* ---- locate: the corpus (tool_gencorpus corpus) has figures with known boxes ---- */
static float iou(mmrag_box a, const float b[4]) {
    float ix = fminf(a.x1, b[2]) - fmaxf(a.x0, b[0]), iy = fminf(a.y1, b[3]) - fmaxf(a.y0, b[1]);
    if (ix <= 0 || iy <= 0) return 0;
    float in = ix * iy;
    return in / ((a.x1 - a.x0) * (a.y1 - a.y0) + (b[2] - b[0]) * (b[3] - b[1]) - in);
}

/* The truth box of the figure whose caption starts with `label` (its page in *page). */
static int truth_box(const char *truth, const char *label, int32_t *page, float b[4]) {
    json_t *j = json_load_file(truth, 0, NULL);
    size_t pi, ii;
    json_t *pg, *im;
    int found = 0;
    json_array_foreach(json_object_get(json_array_get(json_object_get(j, "docs"), 0), "pages"), pi, pg) {
        json_array_foreach(json_object_get(pg, "images"), ii, im) {
            const char *cap = json_string_value(json_object_get(im, "caption"));
            if (found || !cap || strncmp(cap, label, strlen(label))) continue;
            *page = (int32_t)json_integer_value(json_object_get(pg, "page"));
            for (int k = 0; k < 4; k++)
                b[k] = (float)json_number_value(json_array_get(json_object_get(im, "box"), (size_t)k));
            found = 1;
        }
    }
    json_decref(j);
    return found;
}

typedef struct { mmrag *h; const char *desc; int32_t page; mmrag_region r; int rc; char msg[256]; } loc_arg;
static void *th_locate(void *p) {
    loc_arg *a = p;
    a->rc = mmrag_locate(a->h, 1, a->page, a->desc, &a->r);
    snprintf(a->msg, sizeof a->msg, "%s", mmrag_errmsg(a->h));
    return NULL;
}

TEST(locate_regions) {
    char model[1100], dir[1100], cmd[4096], truth[1200], pdf[1200], db[1100], err[256];
    snprintf(model, sizeof model, "%s/minilm/model.safetensors", test_env("MMRAG_MODELS", "models"));
    struct stat st;
    if (stat(model, &st)) SKIP("no models/minilm");
    const char *tmp = test_env("MMRAG_TMP", "/tmp");
    snprintf(dir, sizeof dir, "%s/lib-corpus", tmp);
    snprintf(cmd, sizeof cmd, "rm -rf %s && %s/tests/tool_gencorpus corpus %s >/dev/null 2>&1", dir,
             test_env("MMRAG_BUILD", "build"), dir);
    CHECK_MSG(system(cmd) == 0, "fixture: tool_gencorpus could not write the corpus");
    snprintf(truth, sizeof truth, "%s/truth.json", dir);
    snprintf(pdf, sizeof pdf, "%s/corpus.pdf", dir);
    float b2[4], b3[4];
    int32_t p2 = 0, p3 = 0;
    CHECK(truth_box(truth, "Figure 2", &p2, b2) && truth_box(truth, "Figure 3", &p3, b3));
    mmrag_options o;
    mmrag_options_default(&o);
    o.embed = 0;   /* locate loads the text model itself */
    db_path(db, sizeof db, "loc");
    mmrag *h;
    CHECK_MSG(mmrag_open(db, &o, &h, err, sizeof err) == MMRAG_OK, "%s", err);
    int64_t doc = 0;
    CHECK_MSG(mmrag_index_file(h, pdf, &doc) == MMRAG_OK && doc == 1, "%s", mmrag_errmsg(h));
    /* four threads on one handle: two descriptions of each truth figure */
    loc_arg a[4] = {{.h = h, .desc = "Figure 2"},
                    {.h = h, .desc = "the efficiency chart over six months", .page = p3},
                    {.h = h, .desc = "the chart of quarterly reactor output"},
                    {.h = h, .desc = "Figure 3"}};
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, th_locate, &a[i]);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++) {
        const float *tb = i == 0 || i == 2 ? b2 : b3;
        int32_t tp = i == 0 || i == 2 ? p2 : p3;
        CHECK_MSG(a[i].rc == MMRAG_OK && a[i].msg[0] == 0, "'%s': rc %d %s", a[i].desc, a[i].rc, a[i].msg);
        CHECK_MSG(a[i].r.page == tp && iou(a[i].r.box, tb) >= 0.5f && a[i].r.confidence >= 0.75f,
                  "'%s': page %d (want %d) iou %.2f conf %.2f", a[i].desc, a[i].r.page, tp,
                  iou(a[i].r.box, tb), a[i].r.confidence);
        CHECK(a[i].r.doc_id == 1 && (!strcmp(a[i].r.kind, "figure") || !strcmp(a[i].r.kind, "raster")));
    }
    /* nothing like it in the document: success, not found */
    mmrag_region r;
    CHECK(mmrag_locate(h, doc, 0, "the org chart of the board of directors", &r) == MMRAG_OK);
    CHECK_MSG(r.page == 0 && r.kind[0] == 0 && r.confidence < 0.75f, "page %d kind %s conf %.2f",
              r.page, r.kind, r.confidence);
    /* the right figure asked on the wrong page: not found either */
    CHECK(mmrag_locate(h, doc, p2 == 1 ? 3 : 1, "Figure 2", &r) == MMRAG_OK && r.page == 0);
    CHECK(mmrag_locate(h, doc, 99, "Figure 2", &r) == MMRAG_ERR_ARG && strstr(mmrag_errmsg(h), "pages"));
    CHECK(mmrag_locate(h, 42, 0, "Figure 2", &r) == MMRAG_ERR_NOTFOUND);
    mmrag_close(h);
}

typedef struct { int pieces; size_t bytes; int stop_after; } stream_state;
static int on_token(void *user, const char *piece, size_t len) {
    stream_state *s = user;
    s->pieces++;
    s->bytes += len;
    return s->stop_after && s->pieces >= s->stop_after;
}

TEST(ask_streams_and_cancels) {
    CHECK_MSG(setup(), "fixture: tool_gencorpus could not write the sample PDFs");
    char llm[1100];
    snprintf(llm, sizeof llm, "%s/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", test_env("MMRAG_MODELS", "models"));
    struct stat st;
    if (stat(llm, &st)) SKIP("no language model");
    char db[1100], err[256];
    db_path(db, sizeof db, "a");   /* reuses the first test's collection when it ran */
    mmrag *h;
    CHECK_MSG(mmrag_open(db, NULL, &h, err, sizeof err) == MMRAG_OK, "%s", err);
    CHECK(mmrag_index_file(h, g_pdf2, NULL) == MMRAG_OK);
    stream_state ss = {0, 0, 0};
    /* generative with unsupported sentences shown (marked): every sentence the model
     * writes is streamed, so the stream is deterministic in shape */
    mmrag_ask_opts ao = {.k = 1, .max_tokens = 40, .on_token = on_token, .user = &ss,
                         .mode = MMRAG_MODE_GENERATIVE, .show_unsupported = 1};
    mmrag_answer a;
    int rc = mmrag_ask(h, "What was the revenue in the third quarter?", &ao, &a);
    CHECK_MSG(rc == MMRAG_OK, "%s", mmrag_errmsg(h));
    CHECK(a.answer && ss.pieces > 0 && ss.bytes == strlen(a.answer));   /* stream == answer */
    CHECK(a.completion_tokens > 0 && a.mode_used && !strcmp(a.mode_used, "generative"));
    for (int32_t i = 0; i < a.n_citations; i++) CHECK(a.citations[i].page >= 1 && a.citations[i].text[0]);
    mmrag_answer_free(&a);
    stream_state s2 = {0, 0, 1};
    ao.user = &s2;
    rc = mmrag_ask(h, "What was the revenue in the third quarter?", &ao, &a);
    CHECK_MSG(rc == MMRAG_ERR_CANCELLED && s2.pieces == 1, "rc %d pieces %d", rc, s2.pieces);
    mmrag_answer_free(&a);
    /* extractive: quotes, no model run; bad input: a clear error */
    mmrag_ask_opts ex = {.k = 3, .mode = MMRAG_MODE_EXTRACTIVE};
    rc = mmrag_ask(h, "What was the revenue in the third quarter?", &ex, &a);
    CHECK_MSG(rc == MMRAG_OK, "%s", mmrag_errmsg(h));
    CHECK(!strcmp(a.mode_used, "extractive") && a.completion_tokens == 0);
    CHECK(a.abstained || (a.n_citations >= 1 && strstr(a.answer, a.citations[0].text)));
    mmrag_answer_free(&a);
    ex.mode = 7;
    CHECK(mmrag_ask(h, "revenue?", &ex, &a) == MMRAG_ERR_ARG && strstr(mmrag_errmsg(h), "mode"));
    ex.mode = MMRAG_MODE_EXTRACTIVE;
    CHECK(mmrag_ask(h, "bad \xff utf-8", &ex, &a) == MMRAG_ERR_ARG);
    CHECK(mmrag_ask(h, "", &ex, &a) == MMRAG_ERR_ARG);
    mmrag_answer_free(&a);
    mmrag_close(h);
}

TEST(example_program_runs) {
    CHECK_MSG(setup(), "fixture: tool_gencorpus could not write the sample PDFs");
    char cmd[4096], db[1100];
    db_path(db, sizeof db, "example");
    const char *b = test_env("MMRAG_BUILD", "build");
    snprintf(cmd, sizeof cmd, "%s/examples/example", b);
    struct stat st;
    CHECK_MSG(stat(cmd, &st) == 0, "%s not built", cmd);
    snprintf(cmd, sizeof cmd, "%s/examples/example %s 'rated AC power of the inverter' %s 2>&1",
             b, db, g_pdf);
    FILE *p = popen(cmd, "r");
    CHECK(p);
    char out[8192];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int status = pclose(p);
    CHECK_MSG(strstr(out, "indexed ") && strstr(out, "hit 1: doc 1 page 1"), "%s", out);
    /* without the language model the program reports the ask error and exits 1 */
    char llm[1100];
    snprintf(llm, sizeof llm, "%s/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", test_env("MMRAG_MODELS", "models"));
    if (stat(llm, &st) == 0) CHECK_MSG(status == 0 && strstr(out, "[1] "), "%s", out);
}
