/* tests/fuzz/replay.c — the gcc driver of a fuzz target: runs every file named on the
 * command line (directories: every file in them) through LLVMFuzzerTestOneInput, so
 * `make test` replays the seed corpus and every crasher in tests/fuzz/regressions/ under
 * the normal and the sanitizer build. A crash is the failure; the summary line counts one
 * case per directory. */
#include <dirent.h>
#include <sys/stat.h>
#include "tests/fuzz/fuzz.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    return 0;
}

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot read %s\n", path); return -1; }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); return -1; }
            buf = nb;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0) break;
    }
    fclose(f);
    /* a private copy of exactly len bytes, as libFuzzer gives: ASan sees overreads */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) { free(buf); return -1; }
    if (len) memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of dir, in name order; returns the count run or -1. */
static int run_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;   /* no regressions saved yet for this target */
    char **names = NULL;
    int n = 0, cap = 0, rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, (size_t)cap * sizeof *nn);
            if (!nn) { rc = -1; break; }
            names = nn;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (names) qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n && rc == 0; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && run_file(path)) rc = -1;
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc ? -1 : n;
}

int main(int argc, char **argv) {
    LLVMFuzzerInitialize(&argc, &argv);
    int passed = 0, failed = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        int n = stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode) ? run_dir(argv[i])
                                                                : run_file(argv[i]) ? -1 : 1;
        if (n < 0) { printf("FAIL %s\n", argv[i]); failed++; continue; }
        printf("ok   %s (%d inputs)\n", argv[i], n);
        passed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
