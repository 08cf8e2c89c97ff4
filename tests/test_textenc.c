/* Text encoder (all-MiniLM-L6-v2) against golden fixtures from an independent reference.
 *
 * Fixture: tests/data/golden/minilm.json, made by
 *     /usr/bin/python3 scripts/golden_minilm.py --models models --out tests/data/golden/minilm.json
 * (Debian's python3-torch 1.13 + numpy; the script has its own BERT tokenizer built on
 * Python's unicodedata and its own torch BERT forward pass reading model.safetensors
 * with json + numpy). Token ids must match exactly; embeddings need cosine >= 0.9999.
 * Tests that need the real weights skip when $MMRAG_MODELS/minilm is absent. */
#include <jansson.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/test.h"
#include "vision/textenc.h"

static textenc *shared_te;
static kern_pool *shared_pool;
static int load_tried;

static textenc *get_te(void) {
    if (!load_tried) {
        load_tried = 1;
        char dir[1024], err[1024] = "";
        snprintf(dir, sizeof dir, "%s/minilm", test_env("MMRAG_MODELS", "models"));
        shared_pool = kern_pool_create(0);
        textenc_opts o = {TEXTENC_FP32}; /* the golden reference is fp32 PyTorch */
        if (textenc_create_opts(dir, shared_pool, &o, &shared_te, err, sizeof err) != 0)
            fprintf(stderr, "  textenc_create: %s\n", err);
    }
    return shared_te;
}

static json_t *golden(void) {
    static json_t *g;
    if (!g) {
        json_error_t je;
        g = json_load_file("tests/data/golden/minilm.json", 0, &je);
        if (!g) fprintf(stderr, "  golden: %s\n", je.text);
    }
    return g;
}

static int models_present(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/minilm/model.safetensors", test_env("MMRAG_MODELS", "models"));
    return access(path, R_OK) == 0;
}

TEST(missing_model_names_path) {
    textenc *te = (textenc *)1;
    char err[1024] = "";
    CHECK(textenc_create("/nonexistent/minilm-dir", NULL, &te, err, sizeof err) != 0);
    CHECK(te == NULL);
    CHECK_MSG(strstr(err, "/nonexistent/minilm-dir/model.safetensors") != NULL, "%s", err);
    textenc_free(NULL);
}

TEST(corrupt_model_is_an_error) {
    char dir[1024], path[1100], err[1024] = "";
    snprintf(dir, sizeof dir, "%s/te_bad_%d", test_env("MMRAG_TMP", "/tmp"), (int)getpid());
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *fp = fopen(path, "wb");
    CHECK(fp);
    fputs("\x10\0\0\0\0\0\0\0{\"a\":1}   garbage", fp);
    fclose(fp);
    textenc *te = NULL;
    CHECK(textenc_create(dir, NULL, &te, err, sizeof err) != 0 && te == NULL);
    CHECK_MSG(strstr(err, path) != NULL, "%s", err);
    /* a valid but empty safetensors file: the message names the missing weights */
    fp = fopen(path, "wb");
    CHECK(fp);
    fwrite("\x02\0\0\0\0\0\0\0{}", 1, 10, fp);
    fclose(fp);
    CHECK(textenc_create(dir, NULL, &te, err, sizeof err) != 0 && te == NULL);
    CHECK_MSG(strstr(err, "word_embeddings") != NULL, "%s", err);
    unlink(path);
    rmdir(dir);
}

TEST(tokenizer_matches_golden) {
    if (!models_present()) SKIP("models/minilm not fetched");
    textenc *te = get_te();
    CHECK(te);
    json_t *g = golden();
    CHECK(g);
    json_t *cases = json_object_get(g, "cases");
    CHECK(json_array_size(cases) >= 10);
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) {
        const char *text = json_string_value(json_object_get(c, "text"));
        json_t *want = json_object_get(c, "ids");
        int32_t ids[TEXTENC_MAX_TOKENS];
        int32_t n = textenc_tokenize(te, text, ids, TEXTENC_MAX_TOKENS);
        CHECK_MSG(n == (int32_t)json_array_size(want), "case %zu: %d tokens, reference %zu", i,
                  n, json_array_size(want));
        for (int32_t k = 0; k < n; k++)
            CHECK_MSG(ids[k] == json_integer_value(json_array_get(want, (size_t)k)),
                      "case %zu token %d: %d vs %lld", i, k, ids[k],
                      (long long)json_integer_value(json_array_get(want, (size_t)k)));
    }
}

/* Random mixed-script strings (controls, marks, CJK, Hangul, emoji, unassigned...).
 * Fixture: /usr/bin/python3 scripts/golden_minilm.py --tokens-out tests/data/golden/minilm_tokens.json
 * ($MMRAG_TOKFUZZ may point at a larger file made with --tokens-n). */
TEST(tokenizer_matches_random_unicode) {
    if (!models_present()) SKIP("models/minilm not fetched");
    textenc *te = get_te();
    CHECK(te);
    json_error_t je;
    json_t *g = json_load_file(test_env("MMRAG_TOKFUZZ", "tests/data/golden/minilm_tokens.json"),
                               0, &je);
    CHECK_MSG(g, "%s", je.text);
    json_t *cases = json_object_get(g, "cases");
    size_t i, bad = 0;
    json_t *c;
    json_array_foreach(cases, i, c) {
        const char *text = json_string_value(json_object_get(c, "text"));
        json_t *want = json_object_get(c, "ids");
        int32_t ids[TEXTENC_MAX_TOKENS];
        int32_t n = textenc_tokenize(te, text, ids, TEXTENC_MAX_TOKENS);
        int same = n == (int32_t)json_array_size(want);
        for (int32_t k = 0; same && k < n; k++)
            same = ids[k] == json_integer_value(json_array_get(want, (size_t)k));
        if (!same && bad++ < 5) {
            fprintf(stderr, "  case %zu differs: '%s'\n   C:  ", i, text);
            for (int32_t k = 0; k < n; k++) fprintf(stderr, " %d", ids[k]);
            fprintf(stderr, "\n   py:");
            for (size_t k = 0; k < json_array_size(want); k++)
                fprintf(stderr, " %lld", (long long)json_integer_value(json_array_get(want, k)));
            fputc('\n', stderr);
        }
    }
    printf("  %zu random texts, %zu differ\n", json_array_size(cases), bad);
    size_t total = json_array_size(cases);
    json_decref(g);
    CHECK(total >= 100 && bad == 0);
}

TEST(tokenize_buffer_contract) {
    if (!models_present()) SKIP("models/minilm not fetched");
    textenc *te = get_te();
    CHECK(te);
    int32_t ids[8];
    int32_t n = textenc_tokenize(te, "hello world", NULL, 0);
    CHECK(n == -4); /* [CLS] hello world [SEP], sized by a NULL call */
    CHECK(textenc_tokenize(te, "hello world", ids, 8) == 4);
    CHECK(textenc_tokenize(te, "hello world", ids, 3) == -4);
    CHECK(textenc_tokenize(te, NULL, ids, 8) == 2);
    CHECK(textenc_tokenize(te, "", ids, 8) == 2 && ids[0] != ids[1]);
    /* invalid UTF-8 is dropped, never a crash: same tokens as the text without it */
    int32_t a[16], b[16];
    int32_t na = textenc_tokenize(te, "ab\xff\xfe" "cd \xe2\x82 x\xf0\x9f", a, 16);
    int32_t nb = textenc_tokenize(te, "abcd  x", b, 16);
    CHECK(na == nb && memcmp(a, b, (size_t)na * sizeof *a) == 0);
    /* a 300 000-byte word and a huge text: bounded output, [UNK] for the long word */
    size_t big = 300000;
    char *s = malloc(big + 1);
    CHECK(s);
    memset(s, 'a', big);
    s[big] = 0;
    int32_t t[TEXTENC_MAX_TOKENS];
    CHECK(textenc_tokenize(te, s, t, TEXTENC_MAX_TOKENS) == 3);
    for (size_t k = 0; k < big; k += 2) s[k] = ' ';
    CHECK(textenc_tokenize(te, s, t, TEXTENC_MAX_TOKENS) == TEXTENC_MAX_TOKENS);
    free(s);
}

TEST(embeddings_match_golden) {
    if (!models_present()) SKIP("models/minilm not fetched");
    textenc *te = get_te();
    CHECK(te);
    CHECK(textenc_dim(te) == 384 && strcmp(textenc_model_id(te), "all-MiniLM-L6-v2") == 0);
    json_t *cases = json_object_get(golden(), "cases");
    int n = (int)json_array_size(cases);
    CHECK(n > 0);
    const char **texts = calloc((size_t)n, sizeof *texts);
    float *out = malloc((size_t)n * 384 * sizeof *out), ref[384];
    CHECK(texts && out);
    for (int i = 0; i < n; i++)
        texts[i] = json_string_value(json_object_get(json_array_get(cases, (size_t)i), "text"));
    char err[512] = "";
    CHECK_MSG(textenc_embed(te, texts, n, out, err, sizeof err) == 0, "%s", err);
    double min_cos = 1, max_diff = 0;
    for (int i = 0; i < n; i++) {
        json_t *e = json_object_get(json_array_get(cases, (size_t)i), "embedding");
        CHECK(json_array_size(e) == 384);
        for (int j = 0; j < 384; j++) {
            ref[j] = (float)json_number_value(json_array_get(e, (size_t)j));
            double d = fabs(ref[j] - out[i * 384 + j]);
            if (d > max_diff) max_diff = d;
        }
        double c = test_cosine(ref, out + i * 384, 384);
        if (c < min_cos) min_cos = c;
        CHECK_MSG(c >= 0.9999, "case %d cosine %.6f", i, c);
    }
    printf("  golden: %d texts, min cosine %.7f, max |diff| %.2e\n", n, min_cos, max_diff);
    CHECK(max_diff < 1e-3);
    free(texts);
    free(out);
}

/* Real text for the int8 check: the README's lines and the eval questions (in the repo,
 * so the test needs nothing fetched besides the model). */
static int real_texts(char ***out) {
    int n = 0, cap = 1024;
    char **t = malloc((size_t)cap * sizeof *t), line[4096];
    FILE *f = fopen("README.md", "r");
    while (f && n < cap && fgets(line, sizeof line, f))
        if (strlen(line) > 3) t[n++] = strdup(line);
    if (f) fclose(f);
    const char *sets[] = {"tests/data/eval_questions.json", "tests/data/eval_questions_debian.json",
                          "tests/data/eval_questions_debian2.json"};
    for (int s = 0; s < 3; s++) {
        json_t *j = json_load_file(sets[s], 0, NULL), *q = json_object_get(j, "questions");
        for (size_t i = 0; i < json_array_size(q) && n < cap; i++) {
            const char *v = json_string_value(json_object_get(json_array_get(q, i), "query"));
            if (v) t[n++] = strdup(v);
        }
        json_decref(j);
    }
    *out = t;
    return n;
}

/* The int8 encoder against fp32 on a few hundred real texts: every cosine >= 0.995, mean
 * >= 0.998 (on 10,296 real PDF chunks: all but 7 dot-leader lines >= 0.995, README "Text
 * encoder precision"); and the golden texts within 0.995 of PyTorch. */
TEST(int8_close_to_fp32) {
    if (!models_present()) SKIP("models/minilm not fetched");
    textenc *fp = get_te(), *q8 = NULL;
    CHECK(fp);
    char dir[1024], err[512] = "";
    snprintf(dir, sizeof dir, "%s/minilm", test_env("MMRAG_MODELS", "models"));
    textenc_opts o = {TEXTENC_INT8};
    CHECK_MSG(textenc_create_opts(dir, shared_pool, &o, &q8, err, sizeof err) == 0, "%s", err);
    CHECK(textenc_precision_of(q8) == TEXTENC_INT8 && textenc_precision_of(fp) == TEXTENC_FP32);
    CHECK(strcmp(textenc_model_id(q8), textenc_model_id(fp)) == 0);
    char **t;
    int n = real_texts(&t);
    CHECK(n >= 200);
    float *a = malloc((size_t)n * 384 * sizeof *a), *b = malloc((size_t)n * 384 * sizeof *b);
    CHECK(textenc_embed(fp, (const char *const *)t, n, a, err, sizeof err) == 0);
    CHECK(textenc_embed(q8, (const char *const *)t, n, b, err, sizeof err) == 0);
    double mn = 1, sum = 0;
    for (int i = 0; i < n; i++) {
        double c = test_cosine(a + i * 384, b + i * 384, 384);
        mn = c < mn ? c : mn;
        sum += c;
    }
    printf("  int8 vs fp32: %d texts, min cosine %.5f, mean %.5f\n", n, mn, sum / n);
    CHECK(mn >= 0.995 && sum / n >= 0.998);
    json_t *cases = json_object_get(golden(), "cases");
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const char *tx = json_string_value(json_object_get(json_array_get(cases, i), "text"));
        json_t *e = json_object_get(json_array_get(cases, i), "embedding");
        float ref[384];
        for (int j = 0; j < 384; j++) ref[j] = (float)json_number_value(json_array_get(e, (size_t)j));
        CHECK(textenc_embed(q8, &tx, 1, b, err, sizeof err) == 0);
        CHECK_MSG(test_cosine(ref, b, 384) >= 0.995, "golden case %zu: %.5f", i, test_cosine(ref, b, 384));
    }
    for (int i = 0; i < n; i++) free(t[i]);
    free(t); free(a); free(b);
    textenc_free(q8);
}

/* Dot-leader lines (te_repetitive: one word piece fills half the text) run int8 with the
 * weights' residuals in the first layers, made on the first such text, and with fp32
 * attention in the first layer. They
 * stay within 0.995 of fp32 alone and in a batch with prose (their passes are their own). */
TEST(int8_dot_leaders) {
    if (!models_present()) SKIP("models/minilm not fetched");
    textenc *fp = get_te(), *q8 = NULL;
    char dir[1024], err[512] = "";
    snprintf(dir, sizeof dir, "%s/minilm", test_env("MMRAG_MODELS", "models"));
    textenc_opts o = {TEXTENC_INT8};
    CHECK_MSG(textenc_create_opts(dir, shared_pool, &o, &q8, err, sizeof err) == 0, "%s", err);
    const char *t[] = {"Introduction . . . . . . . . . . . . . . . . . . . . . . . . . . . 1",
                       "The quarterly revenue grew by 12% in the cloud services region.",
                       "Position . . . . . . . . 190 Positional arguments . . . . . . . . 23",
                       "- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -",
                       "Appendix A . . . . . . . . . . . . . . . . . . . . . . . . . . . 87"};
    float a[5 * 384], b[5 * 384], one[384];
    CHECK(textenc_embed(fp, t, 5, a, err, sizeof err) == 0);
    CHECK_MSG(textenc_embed(q8, t, 5, b, err, sizeof err) == 0, "%s", err);
    for (int i = 0; i < 5; i++) {
        CHECK_MSG(test_cosine(a + i * 384, b + i * 384, 384) >= 0.995, "text %d: %.5f", i,
                  test_cosine(a + i * 384, b + i * 384, 384));
        CHECK(textenc_embed(q8, &t[i], 1, one, err, sizeof err) == 0);
        CHECK_MSG(memcmp(one, b + i * 384, sizeof one) == 0, "text %d depends on its batch", i);
    }
    textenc_free(q8);
}

TEST(precision_option) {
    textenc_precision p = TEXTENC_PRECISION_DEFAULT;
    CHECK(textenc_precision_parse("int8", &p) == 0 && p == TEXTENC_INT8);
    CHECK(textenc_precision_parse("fp32", &p) == 0 && p == TEXTENC_FP32);
    CHECK(textenc_precision_parse("fp16", &p) != 0 && p == TEXTENC_FP32);
    CHECK(strcmp(textenc_precision_name(TEXTENC_INT8), "int8") == 0);
    CHECK(textenc_default_opts().precision == TEXTENC_PRECISION_DEFAULT);
    if (!models_present()) SKIP("models/minilm not fetched");
    char dir[1024], err[512] = "";
    snprintf(dir, sizeof dir, "%s/minilm", test_env("MMRAG_MODELS", "models"));
    const char *old = getenv("MMRAG_PRECISION");
    char *saved = old ? strdup(old) : NULL;
    textenc *te = NULL;
    setenv("MMRAG_PRECISION", "bogus", 1);
    CHECK(textenc_create(dir, shared_pool, &te, err, sizeof err) != 0 && strstr(err, "MMRAG_PRECISION"));
    setenv("MMRAG_PRECISION", "int8", 1);
    CHECK(textenc_create(dir, shared_pool, &te, err, sizeof err) == 0);
    CHECK(textenc_precision_of(te) == TEXTENC_INT8);
    textenc_free(te);
    unsetenv("MMRAG_PRECISION");
    CHECK(textenc_create(dir, shared_pool, &te, err, sizeof err) == 0);
    /* the default: int8 where the int8 tile has VNNI, fp32 elsewhere and with a GPU */
    CHECK(textenc_precision_of(te) ==
          (!kern_cuda_available() && strstr(kern_cpu_path(), "vnni") ? TEXTENC_INT8 : TEXTENC_FP32));
    CHECK(textenc_precision_auto() == textenc_precision_of(te));
    textenc_free(te);
    if (saved) setenv("MMRAG_PRECISION", saved, 1);
    free(saved);
}

TEST(batch_equals_single) {
    if (!models_present()) SKIP("models/minilm not fetched");
    textenc *te = get_te();
    CHECK(te);
    const char *texts[5] = {"short", "", "A somewhat longer sentence about revenue charts.",
                            NULL, "Café Déjà vu"};
    float batch[5 * 384], one[384];
    char err[256];
    CHECK(textenc_embed(te, texts, 5, batch, err, sizeof err) == 0);
    for (int i = 0; i < 5; i++) {
        CHECK(textenc_embed(te, texts + i, 1, one, err, sizeof err) == 0);
        for (int j = 0; j < 384; j++) CHECK_NEAR(one[j], batch[i * 384 + j], 1e-5);
    }
    CHECK(textenc_embed(te, texts, 0, batch, err, sizeof err) == 0);
    CHECK(textenc_embed(te, NULL, 2, batch, err, sizeof err) != 0);
}

/* Late chunking: the text's own vector is textenc_embed's (tokenizing piece by piece at
 * word boundaries gives the same tokens); a span's vector is its tokens pooled in context,
 * close to (not equal to) the sentence encoded alone; a span past the 256-token window is
 * a zero row. */
TEST(spans_pool_in_context) {
    if (!models_present()) SKIP("models/minilm not fetched");
    textenc *te = get_te();
    CHECK(te);
    const char *t0 = "Installing R. The sources are unpacked with tar. Run configure, then make.";
    static char longt[4000];
    longt[0] = 0;
    for (int i = 0; i < 60; i++) strcat(longt, "Words fill the window here. ");
    strcat(longt, "The last sentence.");
    const char *texts[2] = {t0, longt};
    textenc_span sp[3] = {{14, 34}, {49, 25}, {(uint32_t)(strlen(longt) - 18), 18}};
    int32_t ns[2] = {2, 1};
    float whole[2 * 384], spans[3 * 384], ref[2 * 384], alone[384];
    char err[256];
    CHECK_MSG(textenc_embed_spans(te, texts, 2, sp, ns, whole, spans, err, sizeof err) == 0, "%s", err);
    CHECK(textenc_embed(te, texts, 2, ref, err, sizeof err) == 0);
    for (int j = 0; j < 2 * 384; j++) CHECK_MSG(fabs(whole[j] - ref[j]) < 1e-5, "text %d dim %d", j / 384, j % 384);
    const char *s1 = "The sources are unpacked with tar.";
    CHECK(strncmp(t0 + 14, s1, 34) == 0);
    CHECK(textenc_embed(te, &s1, 1, alone, err, sizeof err) == 0);
    double c = test_cosine(spans, alone, 384);
    CHECK_MSG(c > 0.6 && c < 0.9999, "span in context vs alone: cosine %.4f", c);
    double c12 = test_cosine(spans, spans + 384, 384);
    CHECK_MSG(c12 < 0.9999, "two spans pooled the same tokens (%.4f)", c12);
    double norm = 0;
    for (int j = 0; j < 384; j++) norm += (double)spans[2 * 384 + j] * spans[2 * 384 + j];
    CHECK_MSG(norm == 0, "a span past the window has norm %g", norm);
}

TEST(semantic_sanity) {
    if (!models_present()) SKIP("models/minilm not fetched");
    textenc *te = get_te();
    CHECK(te);
    const char *t[6] = {
        "The cat sits on the mat.", "A kitten is resting on a rug.",
        "Quarterly revenue grew by twelve percent.", "Sales increased 12% this quarter.",
        "How do I bake sourdough bread?", "The stock market fell sharply today.",
    };
    float v[6 * 384];
    char err[256];
    CHECK(textenc_embed(te, t, 6, v, err, sizeof err) == 0);
    for (int i = 0; i < 6; i++) CHECK_NEAR(test_cosine(v + i * 384, v + i * 384, 384), 1.0, 1e-5);
    double cat = test_cosine(v, v + 384, 384), rev = test_cosine(v + 2 * 384, v + 3 * 384, 384);
    printf("  related: %.3f %.3f; unrelated: %.3f %.3f\n", cat, rev, test_cosine(v, v + 2 * 384, 384),
           test_cosine(v + 4 * 384, v + 3 * 384, 384));
    for (int u = 2; u < 6; u++) CHECK(cat > test_cosine(v, v + u * 384, 384) + 0.2);
    CHECK(rev > test_cosine(v + 2 * 384, v + 4 * 384, 384) + 0.2);
    CHECK(rev > test_cosine(v + 3 * 384, v + 0 * 384, 384) + 0.2);
}

typedef struct { textenc *te; const char *const *t; float *out; int rc; } thr_arg;
static void *embed_thread(void *a_) {
    thr_arg *a = a_;
    for (int r = 0; r < 3 && a->rc == 0; r++) a->rc = textenc_embed(a->te, a->t, 4, a->out, NULL, 0);
    return NULL;
}

TEST(concurrent_calls_agree) {
    if (!models_present()) SKIP("models/minilm not fetched");
    textenc *te = get_te();
    CHECK(te);
    const char *t[4] = {"one text", "another text here", "third", "fourth text of four"};
    float ref[4 * 384], a[4 * 384], b[4 * 384];
    CHECK(textenc_embed(te, t, 4, ref, NULL, 0) == 0);
    thr_arg x = {te, t, a, 0}, y = {te, t, b, 0};
    pthread_t tx, ty;
    CHECK(pthread_create(&tx, NULL, embed_thread, &x) == 0);
    CHECK(pthread_create(&ty, NULL, embed_thread, &y) == 0);
    pthread_join(tx, NULL);
    pthread_join(ty, NULL);
    CHECK(x.rc == 0 && y.rc == 0);
    for (int j = 0; j < 4 * 384; j++) CHECK(a[j] == ref[j] && b[j] == ref[j]);
}

TEST(zz_cleanup) {
    textenc_free(shared_te);
    kern_pool_free(shared_pool);
    shared_te = NULL;
    shared_pool = NULL;
    json_decref(golden());
}
