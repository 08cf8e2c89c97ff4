/* api/core/embed_cache: every text gets exactly the vector the encoder gives it alone,
 * while the encoder sees each distinct text once per call and not at all when the table
 * still holds it. The encoder here is a stand-in that derives a vector from the text's
 * bytes and records what it was asked (the real one is covered by tests/test_textenc.c). */
#include "test.h"
#include "api/core/embed_cache.h"

enum { DIM = 8 };

typedef struct { int calls, texts; int fail; } spy;

static void vec_of(const char *t, float *v) {
    for (int d = 0; d < DIM; d++) v[d] = 0.5f + (float)d;
    for (int i = 0; t[i]; i++) v[i % DIM] += (float)(unsigned char)t[i] * (float)(i + 1);
}

static int spy_encode(void *user, const char *const *texts, int32_t n, float *out, char *err,
                      size_t errlen) {
    spy *s = user;
    if (s->fail) { snprintf(err, errlen, "encoder failed"); return -1; }
    s->calls++;
    s->texts += n;
    for (int32_t i = 0; i < n; i++) vec_of(texts[i], out + (size_t)i * DIM);
    return 0;
}

static int rows_match(const char *const *texts, int n, const float *out) {
    for (int i = 0; i < n; i++) {
        float want[DIM];
        vec_of(texts[i] ? texts[i] : "", want);
        if (memcmp(want, out + (size_t)i * DIM, sizeof want)) return 0;
    }
    return 1;
}

TEST(duplicates_in_a_call_encoded_once) {
    embed_cache *c = embed_cache_create(DIM, 0);   /* no table: only within a call */
    CHECK(c);
    const char *t[] = {"alpha", "beta", "alpha", NULL, "", "beta", "gamma"};
    float out[7 * DIM];
    spy s = {0};
    char err[64];
    CHECK(embed_cache_run(c, t, 7, out, spy_encode, &s, err, sizeof err) == 0);
    CHECK_MSG(s.texts == 4, "encoded %d texts, want 4 (alpha beta \"\" gamma)", s.texts);
    CHECK(rows_match(t, 7, out));
    CHECK(embed_cache_run(c, t, 7, out, spy_encode, &s, err, sizeof err) == 0);
    CHECK_MSG(s.texts == 8, "without a table the next call encodes again (%d)", s.texts);
    embed_cache_free(c);
}

TEST(table_serves_repeats_across_calls) {
    embed_cache *c = embed_cache_create(DIM, 64);
    CHECK(c);
    const char *a[] = {"running head", "first sentence"};
    const char *b[] = {"second sentence", "running head"};
    float out[2 * DIM];
    spy s = {0};
    char err[64];
    CHECK(embed_cache_run(c, a, 2, out, spy_encode, &s, err, sizeof err) == 0);
    CHECK(embed_cache_run(c, b, 2, out, spy_encode, &s, err, sizeof err) == 0);
    CHECK_MSG(s.texts == 3, "encoded %d, want 3", s.texts);
    CHECK(rows_match(b, 2, out));
    int64_t hits, dups, misses;
    embed_cache_stats(c, &hits, &dups, &misses);
    CHECK(hits == 1 && dups == 0 && misses == 3);
    embed_cache_free(c);
}

TEST(colliding_slot_keeps_texts_apart) {
    /* one slot: every text maps to it, so a hit must come from comparing the text */
    embed_cache *c = embed_cache_create(DIM, 1);
    CHECK(c);
    const char *a[] = {"one"}, *b[] = {"two"};
    float out[DIM];
    spy s = {0};
    char err[64];
    CHECK(embed_cache_run(c, a, 1, out, spy_encode, &s, err, sizeof err) == 0);
    CHECK(embed_cache_run(c, b, 1, out, spy_encode, &s, err, sizeof err) == 0);
    CHECK(rows_match(b, 1, out) && s.texts == 2);
    CHECK(embed_cache_run(c, b, 1, out, spy_encode, &s, err, sizeof err) == 0);
    CHECK(rows_match(b, 1, out) && s.texts == 2);
    embed_cache_free(c);
}

TEST(encoder_error_is_returned) {
    embed_cache *c = embed_cache_create(DIM, 16);
    CHECK(c);
    const char *t[] = {"x"};
    float out[DIM];
    spy s = {.fail = 1};
    char err[64] = "";
    CHECK(embed_cache_run(c, t, 1, out, spy_encode, &s, err, sizeof err) == -1);
    CHECK(strcmp(err, "encoder failed") == 0);
    s.fail = 0;   /* nothing was kept from the failed call */
    CHECK(embed_cache_run(c, t, 1, out, spy_encode, &s, err, sizeof err) == 0 && s.texts == 1);
    embed_cache_free(c);
}
