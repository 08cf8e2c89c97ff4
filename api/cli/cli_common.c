/* api/cli/cli_common.c — helpers shared by the CLI commands. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "api/cli/cli.h"
#include "api/core/answer.h"

static void verr(const char *fmt, va_list ap) {
    fputs("mmrag: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void cli_err(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verr(fmt, ap);
    va_end(ap);
}

int cli_usage_error(const char *usage, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    verr(fmt, ap);
    va_end(ap);
    fputs(usage, stderr);
    return CLI_USAGE;
}

const char *cli_db_dir(const char *opt) {
    if (opt && *opt) return opt;
    const char *e = getenv("MMRAG_DB");
    return e && *e ? e : "./.mmrag";
}

store *cli_store_open(const char *db_opt, int write) {
    const char *dir = cli_db_dir(db_opt);
    store_options o;
    store_options_default(&o);
    o.create = write;
    store *s = NULL;
    char err[512];
    int rc = store_open(dir, &o, &s, err, sizeof err);
    if (rc == STORE_ERR_READONLY && !write) {   /* reading a read-only collection is fine */
        o.readonly = 1;
        rc = store_open(dir, &o, &s, err, sizeof err);
    }
    if (rc != STORE_OK) {
        cli_err("%s", err);
        return NULL;
    }
    return s;
}

int cli_doc_resolve(store *s, const char *spec, store_doc_row *out) {
    int rc = store_doc_get(s, spec, out);
    if (rc != STORE_OK) cli_err("%s", store_errmsg(s));
    return rc;
}

int cli_show_folder_check(const char *cmd, const char *path) {
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", path);
    const char *dir = dirname(parent);
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
        cli_err("%s: --show %s: folder %s does not exist", cmd, path, dir);
        return -1;
    }
    return 0;
}

int cli_parse_int(const char *opt, const char *val, int min, int max, int *out) {
    char *end;
    errno = 0;
    long v = strtol(val ? val : "", &end, 10);
    if (!val || !*val || *end || errno || v < min || v > max) {
        cli_err("%s: expected an integer in %d..%d, got '%s'", opt, min, max, val ? val : "");
        return -1;
    }
    *out = (int)v;
    return 0;
}

void cli_json_print(json_t *j) {
    if (!j) { cli_err("out of memory building JSON"); return; }
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(6) | JSON_ENSURE_ASCII);
    if (s) { fputs(s, stdout); fputc('\n', stdout); free(s); }
    json_decref(j);
}

/* One JSON spelling of boxes and strings for every front-end (api/core/answer.h). */
json_t *cli_json_box(store_box b) { return answer_json_box(b); }
json_t *cli_json_str(const char *t) { return answer_json_str(t); }

json_t *cli_json_doc(const store_doc_row *d) {
    return json_pack("{s:I,s:s,s:o,s:o,s:i,s:I,s:i,s:i,s:s,s:I,s:I}",
                     "id", (json_int_t)d->id, "sha256", d->sha256, "title", cli_json_str(d->title),
                     "path", cli_json_str(d->path), "pages", d->pages, "bytes", (json_int_t)d->bytes,
                     "chunks", d->n_chunks, "images", d->n_images, "status", d->status,
                     "added_at", (json_int_t)d->added_at, "updated_at", (json_int_t)d->updated_at);
}

/* The answer core's model for ask and eval answers (declared in cli.h). */
int cli_llm_open(const char *model, const char *models, int ctx, int kv, int threads,
                 answer_llm **out) {
    char buf[4200], err[600];
    answer_llm_params lp;
    answer_llm_params_default(&lp);
    lp.path = answer_llm_path(model, models, buf, sizeof buf);
    if (ctx) lp.n_ctx = ctx;
    lp.kv_type = kv;
    lp.n_threads = threads;
    if (answer_llm_create(&lp, out, err, sizeof err)) { cli_err("%s", err); return -1; }
    return 0;
}
