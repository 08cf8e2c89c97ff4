/* safetensors reader: a valid file written here, every kind of corruption, and a
 * deterministic mutation fuzz loop (also run under `make SAN=1`: ASan must stay clean). */
#include <stdint.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "tests/test.h"

static char tmp_path[512];

static const char *scratch(void) {
    if (!tmp_path[0])
        snprintf(tmp_path, sizeof tmp_path, "%s/st_%d.safetensors", test_env("MMRAG_TMP", "/tmp"),
                 (int)getpid());
    return tmp_path;
}

static int write_bytes(const char *path, const void *p, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return -1;
    size_t w = n ? fwrite(p, 1, n, fp) : 0;
    return fclose(fp) == 0 && w == n ? 0 : -1;
}

/* header length (LE u64) + header + data into buf; returns the total size. */
static size_t make_file(uint8_t *buf, const char *header, const void *data, size_t dlen) {
    uint64_t h = strlen(header);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(h >> (8 * i));
    memcpy(buf + 8, header, h);
    if (dlen) memcpy(buf + 8 + h, data, dlen);
    return 8 + h + dlen;
}

/* A small valid file: F32 [2,3], F16 [4], BF16 [2], I64 [1], empty F32 [0]. */
static const char *valid_header =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
    "\"h\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[24,32]},"
    "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[32,36]},"
    "\"ids\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[36,44]},"
    "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[44,44]}}";

static size_t valid_data(uint8_t *d) {
    float a[6] = {1, -2, 3.5f, 0.25f, 100, -0.125f};
    uint16_t h[4] = {0x3c00, 0xc000, 0x3800, 0x0000}; /* 1, -2, 0.5, 0 */
    uint16_t b[2] = {0x3f80, 0xc0a0};                 /* 1, -5 */
    int64_t id = 7;
    memcpy(d, a, 24);
    memcpy(d + 24, h, 8);
    memcpy(d + 32, b, 4);
    memcpy(d + 36, &id, 8);
    return 44;
}

static size_t valid_file(uint8_t *buf) {
    uint8_t d[64];
    size_t dl = valid_data(d);
    return make_file(buf, valid_header, d, dl);
}

/* Open path; on success read every byte of every tensor and try loading each as fp32
 * (so ASan sees any out-of-bounds pointer). Returns the open status. */
static int open_and_touch(const char *path, char *err, size_t errlen) {
    mf_safetensors *f = NULL;
    int rc = mf_safetensors_open(path, &f, err, errlen);
    if (rc != 0) return rc;
    unsigned sum = 0;
    for (int i = 0; i < mf_safetensors_count(f); i++) {
        const mf_tensor *t = mf_safetensors_at(f, i);
        for (size_t k = 0; k < t->nbytes; k++) sum += ((const uint8_t *)t->data)[k];
        char e2[256];
        float *x = mf_safetensors_load_f32(f, t->name, -1, e2, sizeof e2);
        free(x);
    }
    (void)sum;
    mf_safetensors_close(f);
    return 0;
}

static int open_bytes(const void *p, size_t n, char *err, size_t errlen) {
    if (write_bytes(scratch(), p, n) != 0) return 99;
    return open_and_touch(scratch(), err, errlen);
}

TEST(valid_file_reads_back) {
    uint8_t buf[2048];
    size_t n = valid_file(buf);
    CHECK(write_bytes(scratch(), buf, n) == 0);
    char err[256] = "";
    mf_safetensors *f = NULL;
    CHECK_MSG(mf_safetensors_open(scratch(), &f, err, sizeof err) == 0, "%s", err);
    CHECK(mf_safetensors_count(f) == 5);
    const mf_tensor *a = mf_safetensors_find(f, "a");
    CHECK(a && a->type == KERN_F32 && a->n_dims == 2 && a->shape[0] == 2 && a->shape[1] == 3);
    CHECK(a->nbytes == 24);
    CHECK(mf_safetensors_find(f, "nope") == NULL);
    const mf_tensor *ids = mf_safetensors_find(f, "ids");
    CHECK(ids && ids->type == -1 && ids->nbytes == 8);
    int64_t idv;
    memcpy(&idv, ids->data, 8);
    CHECK(idv == 7);
    /* tensors come in data-offset order */
    CHECK(strcmp(mf_safetensors_at(f, 0)->name, "a") == 0);
    CHECK(mf_safetensors_at(f, 5) == NULL && mf_safetensors_at(f, -1) == NULL);

    float *x = mf_safetensors_load_f32(f, "a", 6, err, sizeof err);
    CHECK_MSG(x, "%s", err);
    CHECK(x[0] == 1 && x[1] == -2 && x[2] == 3.5f && x[5] == -0.125f);
    free(x);
    x = mf_safetensors_load_f32(f, "h", -1, err, sizeof err);
    CHECK_MSG(x, "%s", err);
    CHECK(x[0] == 1 && x[1] == -2 && x[2] == 0.5f && x[3] == 0);
    free(x);
    x = mf_safetensors_load_f32(f, "b", 2, err, sizeof err);
    CHECK_MSG(x, "%s", err);
    CHECK(x[0] == 1 && x[1] == -5);
    free(x);
    x = mf_safetensors_load_f32(f, "z", 0, err, sizeof err);
    CHECK_MSG(x, "%s", err);
    free(x);
    /* wrong count, unsupported dtype, absent name: NULL + a message naming the tensor */
    err[0] = 0;
    CHECK(mf_safetensors_load_f32(f, "a", 7, err, sizeof err) == NULL && strstr(err, "'a'"));
    err[0] = 0;
    CHECK(mf_safetensors_load_f32(f, "ids", -1, err, sizeof err) == NULL && strstr(err, "I64"));
    err[0] = 0;
    CHECK(mf_safetensors_load_f32(f, "nope", -1, err, sizeof err) == NULL && strstr(err, "nope"));
    mf_safetensors_close(f);
    mf_safetensors_close(NULL);
}

TEST(missing_file_names_path) {
    char err[512] = "";
    mf_safetensors *f = (mf_safetensors *)&err; /* must be reset to NULL */
    CHECK(mf_safetensors_open("/nonexistent/dir/x.safetensors", &f, err, sizeof err) != 0);
    CHECK(f == NULL);
    CHECK(strstr(err, "/nonexistent/dir/x.safetensors") != NULL);
}

TEST(truncated_at_every_length) {
    uint8_t buf[2048];
    size_t n = valid_file(buf);
    char err[256];
    /* any cut inside the header or the data breaks a length or an offset */
    for (size_t cut = 0; cut < n; cut++) {
        err[0] = 0;
        CHECK_MSG(open_bytes(buf, cut, err, sizeof err) != 0, "cut at %zu opened", cut);
        CHECK(err[0] != 0);
    }
    CHECK(open_bytes(buf, n, err, sizeof err) == 0);
}

TEST(huge_or_zero_header_length) {
    uint8_t buf[2048];
    size_t n = valid_file(buf);
    char err[256];
    uint64_t bad[] = {0, n - 7, UINT64_MAX, (uint64_t)1 << 40, 0x8000000000000000ull};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int k = 0; k < 8; k++) buf[k] = (uint8_t)(bad[i] >> (8 * k));
        CHECK_MSG(open_bytes(buf, n, err, sizeof err) != 0, "header length %llu",
                  (unsigned long long)bad[i]);
    }
}

/* Each header is wrong in one way; data is the valid 44 bytes. */
TEST(bad_headers_rejected) {
    static const char *bad[] = {
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}",      /* bad JSON */
        "[1,2,3]",                                                                /* not object */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}} x",  /* trailing */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[40,64]}}",   /* past end */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[24,0]}}",    /* reversed */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[-4,20]}}",   /* negative */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,4],\"data_offsets\":[0,24]}}",    /* size */
        "{\"a\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[0,24]}}",    /* size */
        "{\"a\":{\"dtype\":\"Q4\",\"shape\":[2,3],\"data_offsets\":[0,24]}}",     /* dtype */
        "{\"a\":{\"dtype\":7,\"shape\":[2,3],\"data_offsets\":[0,24]}}",          /* dtype type */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,2,3],\"data_offsets\":[0,24]}}", /* 5 dims */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3.5],\"data_offsets\":[0,24]}}",  /* real dim */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,-3],\"data_offsets\":[0,24]}}",   /* neg dim */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
        "\"data_offsets\":[0,24]}}",                                              /* overflow */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0]}}",       /* 1 offset */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3]}}",                           /* no offsets */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[20,28]}}",      /* overlap */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]}}",      /* duplicate */
        "{\"a\":5}",                                                              /* entry */
        "{\"__metadata__\":[1]}",                                                 /* metadata */
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,99999999999999999999]}}",
    };
    uint8_t buf[4096], d[64];
    size_t dl = valid_data(d);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t n = make_file(buf, bad[i], d, dl);
        char err[256] = "";
        CHECK_MSG(open_bytes(buf, n, err, sizeof err) != 0, "header %zu accepted: %s", i, bad[i]);
        CHECK_MSG(strstr(err, "safetensors:") != NULL, "header %zu: message '%s'", i, err);
    }
    /* control: an empty table and a header with padding spaces are fine */
    size_t n = make_file(buf, "{}  ", NULL, 0);
    char err[256] = "";
    CHECK_MSG(open_bytes(buf, n, err, sizeof err) == 0, "%s", err);
}

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A few thousand random mutations of the valid file (flips, byte sets, digit swaps,
 * truncations, insertions): each must open cleanly or fail with a message. */
TEST(fuzz_mutations) {
    uint8_t base[2048], buf[4096];
    size_t n0 = valid_file(base);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    int opened = 0, failed = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(buf, base, n0);
        size_t n = n0;
        int muts = 1 + (int)(rng_next(&s) % 4);
        for (int m = 0; m < muts; m++) {
            size_t pos = (size_t)(rng_next(&s) % n);
            switch (rng_next(&s) % 6) {
            case 0: buf[pos] ^= (uint8_t)(1u << (rng_next(&s) % 8)); break;
            case 1: buf[pos] = (uint8_t)rng_next(&s); break;
            case 2: buf[pos] = (uint8_t)("0123456789[]{},:\"-"[rng_next(&s) % 18]); break;
            case 3: n = pos + 1; break;
            case 4: /* insert a byte (keeps the length prefix, so offsets drift) */
                if (n + 1 < sizeof buf) {
                    memmove(buf + pos + 1, buf + pos, n - pos);
                    buf[pos] = (uint8_t)rng_next(&s);
                    n++;
                }
                break;
            case 5: /* change a length-prefix byte */
                buf[rng_next(&s) % 8] = (uint8_t)rng_next(&s);
                break;
            }
        }
        char err[256] = "";
        int rc = open_bytes(buf, n, err, sizeof err);
        CHECK(rc != 99);
        if (rc == 0) opened++;
        else {
            failed++;
            CHECK_MSG(err[0] != 0, "iteration %d failed without a message", it);
        }
    }
    printf("  fuzz: %d opened, %d rejected\n", opened, failed);
    CHECK(failed > 0);
}

/* The real MiniLM checkpoint, when fetched: names, shapes and an I64 extra tensor. */
TEST(real_minilm_file) {
    char path[1024];
    snprintf(path, sizeof path, "%s/minilm/model.safetensors", test_env("MMRAG_MODELS", "models"));
    if (access(path, R_OK) != 0) SKIP("models/minilm not fetched");
    char err[512] = "";
    mf_safetensors *f = NULL;
    CHECK_MSG(mf_safetensors_open(path, &f, err, sizeof err) == 0, "%s", err);
    const mf_tensor *w = mf_safetensors_find(f, "embeddings.word_embeddings.weight");
    CHECK(w && w->type == KERN_F32 && w->n_dims == 2 && w->shape[0] == 30522 &&
          w->shape[1] == 384);
    CHECK(mf_safetensors_find(f, "encoder.layer.5.output.LayerNorm.weight") != NULL);
    float *g = mf_safetensors_load_f32(f, "embeddings.LayerNorm.weight", 384, err, sizeof err);
    CHECK_MSG(g, "%s", err);
    free(g);
    mf_safetensors_close(f);
}
