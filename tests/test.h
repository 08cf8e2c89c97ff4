/* Minimal test harness: each tests/test_*.c is one binary of TEST() cases.
 * A case fails on the first failed CHECK; the binary prints one line per case and a
 * final "N passed, N failed, N skipped" line that scripts/run-tests.sh adds up.
 * Environment: MMRAG_MODELS (model cache dir), MMRAG_BUILD (build dir), MMRAG_TMP. */
#ifndef MMRAG_TEST_H
#define MMRAG_TEST_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*test_fn)(int *failed);
struct test_case { const char *name; test_fn fn; };
#define TEST_MAX 256
static struct test_case test_cases[TEST_MAX];
static int test_count;

#define TEST(name)                                                        \
    static void test_##name(int *test_failed_);                           \
    __attribute__((constructor)) static void test_reg_##name(void) {      \
        if (test_count < TEST_MAX)                                        \
            test_cases[test_count++] = (struct test_case){#name, test_##name}; \
    }                                                                     \
    static void test_##name(int *test_failed_)

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
            *test_failed_ = 1;                                                 \
            return;                                                            \
        }                                                                      \
    } while (0)

#define CHECK_MSG(cond, ...)                                                   \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            *test_failed_ = 1;                                                 \
            return;                                                            \
        }                                                                      \
    } while (0)

#define CHECK_NEAR(a, b, tol) CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), \
                                        "%g vs %g (tol %g)", (double)(a), (double)(b), (double)(tol))
/* A case that cannot run here (no model, no GPU) says why and counts as skipped, never as
 * passed: main prints "skip NAME: WHY", which scripts/run-tests.sh counts apart. */
static const char *test_skip_why;
#define SKIP(why) do { test_skip_why = (why); *test_failed_ = -1; return; } while (0)

/* Path helpers for tests: env var or default. */
static inline const char *test_env(const char *name, const char *dflt) {
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

/* The whole file at path, NUL-terminated (the NUL not counted in *len; len may be NULL),
 * or NULL. The caller frees it. */
static inline char *test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = NULL;
    long n = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    if (n >= 0 && !fseek(f, 0, SEEK_SET) && (b = malloc((size_t)n + 1)) &&
        fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[n] = 0;
        if (len) *len = (size_t)n;
    }
    return b;
}

/* Cosine similarity in double precision (golden comparisons); 0-vectors give 0. */
static inline double test_cosine(const float *a, const float *b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return ab / (sqrt(aa * bb) + 1e-30);
}

/* A binary that runs in several modes may leave cases out of one (0 = not run, not
 * counted: e.g. the SQLite-file cases of test_store on PostgreSQL). NULL = run all. */
static int (*test_case_filter)(const char *name);

int main(int argc, char **argv) {
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < test_count; i++) {
        if (argc > 1 && !strstr(test_cases[i].name, argv[1])) continue;
        if (test_case_filter && !test_case_filter(test_cases[i].name)) continue;
        int f = 0;
        test_cases[i].fn(&f);
        if (f < 0) printf("skip %s: %s\n", test_cases[i].name, test_skip_why ? test_skip_why : "");
        else printf("%s %s\n", f ? "FAIL" : "ok  ", test_cases[i].name);
        fflush(stdout);
        if (f < 0) skipped++;
        else if (f) failed++;
        else passed++;
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
#endif
