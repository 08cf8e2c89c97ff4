/* mmrag — command-line entry point. Each command lives in api/cli/cli_<name>.c; to add one,
 * declare it in api/cli/cli.h and add ONE line to the table below. */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "api/cli/cli.h"
#include "api/core/isolate.h"
#include "kernels/kernels.h"

static const cli_command commands[] = {
    {"index", cli_index, "index PDF files and folders into the collection"},
    {"ls", cli_ls, "list indexed documents"},
    {"show", cli_show, "show a document's chunks (kind, page, box, anchored image, text)"},
    {"rm", cli_rm, "delete documents"},
    {"ask", cli_ask, "answer a question from the collection with the local LM, citing [n] -> page, box"},
    {"search", cli_search, "fused search (text vectors + image vectors + BM25) with citations"},
    {"worker", cli_worker, "take ingest jobs from a shared (postgres://) collection's queue"},
    {"compact", cli_compact, "rebuild the vector indexes without deleted entries"},
    {"eval", cli_eval, "evaluate: eval retrieval QUESTIONS.json (recall, MRR, nDCG, ablation)"},
    {"locate", cli_locate, "find the region a description points at (VPE): page, box, confidence"},
    {"models", cli_models, "list the model files each role reads (and whether they load); fetch them"},
    {"serve", cli_serve, "REST API server with the web page (see mmrag serve --help)"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fputs("usage: mmrag [--db DIR] COMMAND [ARGS...]   (mmrag COMMAND --help for details)\n\n"
          "commands:\n", f);
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
    fputs("\n--db DIR (any command) selects the collection directory; default $MMRAG_DB or ./.mmrag\n"
          "exit codes: 0 ok, 1 some input failed, 2 usage error, 3 database error\n", f);
}

/* The allocator policy is the program's, not the library's. glibc raises its mmap
 * threshold to the size of each large block freed, so after the first big encoder batch
 * every later one comes from a thread's arena and stays there when freed: a 64-client soak
 * of the server saw RSS double (1.4 GiB, 750 MiB of it free in malloc's arenas). A fixed
 * threshold sends blocks of 4 MiB and more back to the kernel on free (RSS +11% then). */
static void set_malloc_policy(void) {
#ifdef M_MMAP_THRESHOLD
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
#endif
}

/* OpenBLAS that fell back to its slowest x86-64 kernels on a CPU it does not know (see
 * kern_blas_core_better) can be told better only before it loads: mmrag runs itself again
 * with $OPENBLAS_CORETYPE set (once: the new process finds it set). Where exec fails, it
 * goes on with the kernels it has. */
static void pick_blas_core(char **argv) {
    const char *better = getenv("OPENBLAS_CORETYPE") ? NULL : kern_blas_core_better();
    if (!better || setenv("OPENBLAS_CORETYPE", better, 1) != 0) return;
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE");
}

int main(int argc, char **argv) {
    pick_blas_core(argv);
    set_malloc_policy();
    int i = 1;
    /* global options before the command; --db is passed on through $MMRAG_DB */
    while (i < argc && argv[i][0] == '-') {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) { usage(stdout); return CLI_OK; }
        if (strcmp(argv[i], "--db") == 0 && i + 1 < argc) { setenv("MMRAG_DB", argv[i + 1], 1); i += 2; continue; }
        if (strncmp(argv[i], "--db=", 5) == 0) { setenv("MMRAG_DB", argv[i] + 5, 1); i++; continue; }
        cli_err("unknown option '%s' (see mmrag --help)", argv[i]);
        return CLI_USAGE;
    }
    if (i >= argc) { usage(stderr); return CLI_USAGE; }
    const char *name = argv[i];
    /* hidden: the child process of isolated ingest (api/core/isolate.c starts it) */
    if (strcmp(name, "ingest-worker") == 0) return isolate_worker_main(argc - i, argv + i);
    if (strcmp(name, "help") == 0) {
        if (i + 1 >= argc) { usage(stdout); return CLI_OK; }
        name = argv[i + 1];
        for (size_t c = 0; c < N_COMMANDS; c++)
            if (strcmp(commands[c].name, name) == 0) {
                char *hv[] = {(char *)name, "--help", NULL};
                return commands[c].fn(2, hv);
            }
    }
    for (size_t c = 0; c < N_COMMANDS; c++)
        if (strcmp(commands[c].name, name) == 0) return commands[c].fn(argc - i, argv + i);
    cli_err("unknown command '%s' (see mmrag --help)", name);
    return CLI_USAGE;
}
