/* tests/fuzz/fuzz.h — shared by the fuzz targets. Each target defines
 * LLVMFuzzerTestOneInput (and may define LLVMFuzzerInitialize); it is linked either with
 * libFuzzer (clang, `make fuzz`) or with tests/fuzz/replay.c (gcc, `make test` replays the
 * seed corpus and every saved crasher). A target reports a broken property with abort(),
 * so both drivers see it as a crash. */
#ifndef MMRAG_TESTS_FUZZ_H
#define MMRAG_TESTS_FUZZ_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static inline const char *fuzz_env(const char *name, const char *dflt) {
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

/* Readers that take a path get the input through one scratch file per process. */
static inline const char *fuzz_write_file(const uint8_t *data, size_t size, const char *ext) {
    static char path[512];
    if (!path[0])
        snprintf(path, sizeof path, "%s/mmrag-fuzz-%ld%s", fuzz_env("TMPDIR", "/tmp"),
                 (long)getpid(), ext);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f)) abort();
    return path;
}

/* A property failed: say which, then crash so the driver keeps the input. */
#define FUZZ_ASSERT(cond, ...)                                       \
    do {                                                             \
        if (!(cond)) {                                               \
            fprintf(stderr, "fuzz property failed: %s: ", #cond);    \
            fprintf(stderr, __VA_ARGS__);                            \
            fputc('\n', stderr);                                     \
            abort();                                                 \
        }                                                            \
    } while (0)
#endif
