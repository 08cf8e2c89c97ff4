/* GGUF reader: the real SmolLM2 file, a GGUF written here (every value type, nested
 * arrays, alignment), truncation at every length and a deterministic mutation fuzz loop:
 * corrupt input must give an error message, never a crash (run under `make SAN=1`). */
#include "kernels/kernels.h"
#include "test.h"

#include <stdint.h>

typedef struct {
    unsigned char *p;
    size_t n, cap;
} wbuf;

static void put(wbuf *b, const void *s, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void put32(wbuf *b, uint32_t v) { put(b, &v, 4); }
static void put64(wbuf *b, uint64_t v) { put(b, &v, 8); }
static void putstr(wbuf *b, const char *s) { put64(b, strlen(s)); put(b, s, strlen(s)); }

/* A small valid GGUF v3: scalar keys of every type, a string array, an int array, a
 * nested array, alignment 64, one F32 and one Q8_0 tensor. */
static wbuf make_gguf(void) {
    wbuf b = {0};
    put(&b, "GGUF", 4);
    put32(&b, 3);
    put64(&b, 2);  /* tensors */
    put64(&b, 10); /* kv */
    putstr(&b, "general.architecture"); put32(&b, MF_GGUF_STRING); putstr(&b, "llama");
    putstr(&b, "general.alignment"); put32(&b, MF_GGUF_U32); put32(&b, 64);
    putstr(&b, "t.u8"); put32(&b, MF_GGUF_U8); put(&b, "\x07", 1);
    putstr(&b, "t.i16"); put32(&b, MF_GGUF_I16); put(&b, "\xfe\xff", 2);
    putstr(&b, "t.f32"); put32(&b, MF_GGUF_F32); { float f = 1.5f; put(&b, &f, 4); }
    putstr(&b, "t.f64"); put32(&b, MF_GGUF_F64); { double d = 2.25; put(&b, &d, 8); }
    putstr(&b, "t.u64"); put32(&b, MF_GGUF_U64); put64(&b, 123456);
    putstr(&b, "t.strs"); put32(&b, MF_GGUF_ARRAY); put32(&b, MF_GGUF_STRING); put64(&b, 3);
    putstr(&b, "a"); putstr(&b, ""); putstr(&b, "héllo");
    putstr(&b, "t.ints"); put32(&b, MF_GGUF_ARRAY); put32(&b, MF_GGUF_I32); put64(&b, 4);
    for (int32_t i = 0; i < 4; i++) put(&b, &i, 4);
    putstr(&b, "t.nested"); put32(&b, MF_GGUF_ARRAY); put32(&b, MF_GGUF_ARRAY); put64(&b, 2);
    for (int k = 0; k < 2; k++) {
        put32(&b, MF_GGUF_U16); put64(&b, 3);
        uint16_t v[3] = {1, 2, 3};
        put(&b, v, 6);
    }
    putstr(&b, "w.f32"); put32(&b, 2); put64(&b, 8); put64(&b, 2); put32(&b, KERN_F32); put64(&b, 0);
    putstr(&b, "w.q8"); put32(&b, 1); put64(&b, 64); put32(&b, KERN_Q8_0); put64(&b, 64);
    while (b.n % 64) put(&b, "", 1);
    for (int i = 0; i < 16; i++) { float f = (float)i; put(&b, &f, 4); }
    while (b.n % 64) put(&b, "", 1);
    for (int blk = 0; blk < 2; blk++) {
        uint16_t d = kern_fp32_to_fp16(0.5f);
        put(&b, &d, 2);
        for (int i = 0; i < 32; i++) { int8_t q = (int8_t)(i - 16); put(&b, &q, 1); }
    }
    return b;
}

TEST(gguf_written_file_parses) {
    wbuf b = make_gguf();
    mf_gguf *f;
    char err[256];
    int rc = mf_gguf_open_buffer(b.p, b.n, &f, err, sizeof err);
    CHECK_MSG(rc == 0, "%s", err);
    CHECK(mf_gguf_version(f) == 3);
    uint32_t u;
    float x;
    const char *s;
    size_t len;
    CHECK(mf_gguf_get_u32(f, "t.u8", &u) == 0 && u == 7);
    CHECK(mf_gguf_get_u32(f, "t.i16", &u) != 0); /* -2 is not a u32 */
    CHECK(mf_gguf_get_u32(f, "t.u64", &u) == 0 && u == 123456);
    CHECK(mf_gguf_get_f32(f, "t.f32", &x) == 0 && x == 1.5f);
    CHECK(mf_gguf_get_f32(f, "t.f64", &x) == 0 && x == 2.25f);
    CHECK(mf_gguf_get_str(f, "general.architecture", &s, &len) == 0 && len == 5 && !strcmp(s, "llama"));
    CHECK(mf_gguf_get_arr_str(f, "t.strs", 2, &s, &len) == 0 && !strcmp(s, "héllo") && len == 6);
    CHECK(mf_gguf_get_arr_str(f, "t.strs", 1, &s, &len) == 0 && len == 0);
    CHECK(mf_gguf_get_arr_str(f, "t.strs", 3, &s, &len) != 0);
    int32_t et;
    uint64_t n;
    const void *data;
    CHECK(mf_gguf_get_arr(f, "t.ints", &et, &n, &data) == 0 && et == MF_GGUF_I32 && n == 4);
    int32_t v3;
    memcpy(&v3, (const char *)data + 12, 4);
    CHECK(v3 == 3);
    CHECK(mf_gguf_get_arr(f, "t.nested", &et, &n, NULL) == 0 && et == MF_GGUF_ARRAY && n == 2);
    CHECK(mf_gguf_get_u32(f, "missing", &u) != 0);
    CHECK(mf_gguf_kv_count(f) == 10);
    CHECK(mf_gguf_tensor_count(f) == 2);
    const mf_tensor *t = mf_gguf_find(f, "w.f32");
    CHECK(t && t->n_dims == 2 && t->shape[0] == 8 && t->shape[1] == 2 && t->nbytes == 64);
    CHECK(((const float *)t->data)[5] == 5.0f);
    CHECK(((uintptr_t)((const unsigned char *)t->data - b.p)) % 64 == 0);
    t = mf_gguf_find(f, "w.q8");
    CHECK(t && t->type == KERN_Q8_0 && t->nbytes == 68);
    float deq[64];
    kern_to_f32(KERN_Q8_0, t->data, deq, 64);
    CHECK(deq[0] == -8.0f && deq[33] == -7.5f);
    mf_gguf_close(f);
    free(b.p);
}

TEST(gguf_truncated_everywhere_fails) {
    wbuf b = make_gguf();
    char err[256];
    for (size_t n = 0; n < b.n; n++) {
        unsigned char *copy = malloc(n ? n : 1); /* exact size so ASan sees overreads */
        memcpy(copy, b.p, n);
        mf_gguf *f = NULL;
        int rc = mf_gguf_open_buffer(copy, n, &f, err, sizeof err);
        CHECK_MSG(rc != 0 && f == NULL, "truncation at %zu accepted", n);
        CHECK(strncmp(err, "gguf: ", 6) == 0);
        free(copy);
    }
    free(b.p);
}

static uint64_t xs(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

TEST(gguf_mutation_fuzz) {
    wbuf b = make_gguf();
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    int accepted = 0, rejected = 0;
    char err[256];
    for (int it = 0; it < 6000; it++) {
        unsigned char *m = malloc(b.n);
        memcpy(m, b.p, b.n);
        int k = 1 + (int)(xs(&seed) % 6);
        for (int j = 0; j < k; j++) {
            size_t at = xs(&seed) % b.n;
            switch (xs(&seed) % 4) {
            case 0: m[at] = (unsigned char)xs(&seed); break;
            case 1: m[at] = 0xff; break;
            case 2: m[at] ^= (unsigned char)(1u << (xs(&seed) % 8)); break;
            default: if (at + 8 <= b.n) memset(m + at, (xs(&seed) & 1) ? 0xff : 0x7f, 8); break;
            }
        }
        size_t n = (xs(&seed) % 8 == 0) ? xs(&seed) % b.n : b.n;
        mf_gguf *f = NULL;
        if (mf_gguf_open_buffer(m, n, &f, err, sizeof err) == 0) {
            accepted++;
            /* everything the reader hands out must be readable */
            unsigned sum = 0;
            for (int i = 0; i < mf_gguf_tensor_count(f); i++) {
                const mf_tensor *t = mf_gguf_tensor_at(f, i);
                for (size_t q = 0; q < t->nbytes; q++) sum += ((const unsigned char *)t->data)[q];
                sum += (unsigned)strlen(t->name);
            }
            for (int i = 0; i < mf_gguf_kv_count(f); i++) {
                const char *key = mf_gguf_kv_key(f, i), *s;
                size_t len;
                uint64_t cnt;
                int32_t et;
                const void *d;
                if (mf_gguf_get_str(f, key, &s, &len) == 0) sum += (unsigned)strlen(s);
                if (mf_gguf_get_arr(f, key, &et, &cnt, &d) == 0 && et == MF_GGUF_STRING)
                    for (uint64_t q = 0; q < cnt; q++)
                        if (mf_gguf_get_arr_str(f, key, q, &s, &len) == 0) sum += (unsigned)len;
            }
            (void)sum;
            mf_gguf_close(f);
        } else {
            rejected++;
            CHECK(err[0] != 0);
        }
        free(m);
    }
    printf("  fuzz: %d accepted, %d rejected\n", accepted, rejected);
    CHECK(rejected > 1000 && accepted > 10);
    free(b.p);
}

TEST(gguf_bad_headers) {
    wbuf b = make_gguf();
    char err[256];
    mf_gguf *f;
    b.p[4] = 1; /* version 1 */
    CHECK(mf_gguf_open_buffer(b.p, b.n, &f, err, sizeof err) != 0 && strstr(err, "version"));
    b.p[4] = 3;
    b.p[0] = 'X';
    CHECK(mf_gguf_open_buffer(b.p, b.n, &f, err, sizeof err) != 0 && strstr(err, "magic"));
    CHECK(mf_gguf_open("/nonexistent/model.gguf", &f, err, sizeof err) != 0 && strstr(err, "cannot open"));
    free(b.p);
}

TEST(gguf_unsupported_tensor_type_named) {
    wbuf b = make_gguf();
    /* find the Q8_0 tensor's type field (after "w.q8", n_dims, ne0) and make it Q8_1 (9,
     * an activation type no weight file uses), then Q6_K (14) on a row of 64 */
    unsigned char *p = memmem(b.p, b.n, "w.q8", 4);
    CHECK(p);
    uint32_t q81 = 9, q6k = 14;
    memcpy(p + 4 + 4 + 8, &q81, 4);
    char err[400];
    mf_gguf *f;
    CHECK(mf_gguf_open_buffer(b.p, b.n, &f, err, sizeof err) != 0);
    CHECK_MSG(strstr(err, "w.q8") && strstr(err, "unsupported type 9") && strstr(err, "q4_K, q5_K, q6_K"),
              "%s", err);
    memcpy(p + 4 + 4 + 8, &q6k, 4);
    CHECK(mf_gguf_open_buffer(b.p, b.n, &f, err, sizeof err) != 0);
    CHECK_MSG(strstr(err, "w.q8") && strstr(err, "q6_K needs rows of a multiple of 256"), "%s", err);
    free(b.p);
}

TEST(gguf_real_smollm2) {
    char path[512];
    snprintf(path, sizeof path, "%s/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
             test_env("MMRAG_MODELS", "models"));
    FILE *fp = fopen(path, "rb");
    if (!fp) SKIP("SmolLM2 GGUF not fetched (make models)");
    fclose(fp);
    mf_gguf *f;
    char err[256];
    CHECK_MSG(mf_gguf_open(path, &f, err, sizeof err) == 0, "%s", err);
    CHECK(mf_gguf_version(f) == 3);
    const char *s;
    uint32_t u;
    float x;
    CHECK(mf_gguf_get_str(f, "general.architecture", &s, NULL) == 0 && !strcmp(s, "llama"));
    CHECK(mf_gguf_get_u32(f, "llama.block_count", &u) == 0 && u == 30);
    CHECK(mf_gguf_get_u32(f, "llama.embedding_length", &u) == 0 && u == 576);
    CHECK(mf_gguf_get_u32(f, "llama.attention.head_count_kv", &u) == 0 && u == 3);
    CHECK(mf_gguf_get_f32(f, "llama.rope.freq_base", &x) == 0 && x == 100000.0f);
    CHECK(mf_gguf_get_str(f, "tokenizer.ggml.pre", &s, NULL) == 0 && !strcmp(s, "smollm"));
    int32_t et;
    uint64_t n;
    CHECK(mf_gguf_get_arr(f, "tokenizer.ggml.tokens", &et, &n, NULL) == 0 && n == 49152);
    CHECK(mf_gguf_get_arr_str(f, "tokenizer.ggml.tokens", 1, &s, NULL) == 0 && !strcmp(s, "<|im_start|>"));
    CHECK(mf_gguf_get_arr(f, "tokenizer.ggml.merges", &et, &n, NULL) == 0 && n == 48900);
    CHECK(mf_gguf_tensor_count(f) == 272);
    const mf_tensor *t = mf_gguf_find(f, "token_embd.weight");
    CHECK(t && t->type == KERN_Q8_0 && t->shape[0] == 576 && t->shape[1] == 49152);
    t = mf_gguf_find(f, "blk.29.ffn_down.weight");
    CHECK(t && t->type == KERN_Q4_1 && t->shape[0] == 1536 && t->shape[1] == 576);
    CHECK(t->nbytes == (size_t)576 * 1536 / 32 * 20);
    mf_gguf_close(f);
}
