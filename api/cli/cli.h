/* api/cli/cli.h — private to the `mmrag` CLI: command table types and shared helpers.
 *
 * Adding a command: write api/cli/cli_<name>.c with `int cli_<name>(int argc, char **argv)`
 * (argv[0] is the command name; parse options with getopt_long after `optind = 0`;
 * `--help` prints usage to stdout and returns 0), declare it below, and add ONE line to
 * the table in api/cli/main.c.
 *
 * Exit codes: CLI_OK 0; CLI_FAIL 1 (some input failed: bad file, unknown document);
 * CLI_USAGE 2 (bad command line); CLI_DBERR 3 (the database could not be opened/written).
 * Messages go to stderr as one line "mmrag: ..."; results go to stdout. */
#ifndef MMRAG_API_CLI_H
#define MMRAG_API_CLI_H
#include <jansson.h>
#include <stdio.h>
#include "index/store.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2, CLI_DBERR = 3 };

typedef int (*cli_fn)(int argc, char **argv);
typedef struct {
    const char *name;
    cli_fn fn;
    const char *help;     /* one line for `mmrag --help` */
} cli_command;

/* commands (one file each) */
int cli_models(int argc, char **argv);
int cli_index(int argc, char **argv);   /* api/cli/cli_index.c */
int cli_ls(int argc, char **argv);      /* api/cli/cli_docs.c */
int cli_show(int argc, char **argv);    /* api/cli/cli_docs.c */
int cli_rm(int argc, char **argv);      /* api/cli/cli_docs.c */
int cli_search(int argc, char **argv);  /* api/cli/cli_search.c (fused retrieval) */
int cli_ask(int argc, char **argv);     /* api/cli/cli_ask.c (RAG answer with citations) */
int cli_eval_niah(int argc, char **argv); /* api/cli/cli_niah.c (`eval niah`, hooked from cli_eval) */
int cli_serve(int argc, char **argv);   /* api/cli/cli_serve.c (REST server) */
int cli_compact(int argc, char **argv); /* api/cli/cli_compact.c (vector indexes) */
int cli_worker(int argc, char **argv);  /* api/cli/cli_worker.c (shared ingest queue) */
int cli_eval(int argc, char **argv);    /* api/cli/cli_eval.c (eval retrieval) */
int cli_locate(int argc, char **argv);   /* api/cli/cli_locate.c (VPE region localization) */
int cli_eval_vpe(int argc, char **argv);
int cli_eval_answers(int argc, char **argv); /* api/cli/cli_eval_answers.c (hooked from cli_eval) */
/* The answer core's language model for a command: --model, else $MMRAG_LLM, else the
 * default under models; ctx/kv/threads 0 = defaults (api/cli/cli_common.c). Returns 0 or -1
 * (message printed). */
struct answer_llm;
int cli_llm_open(const char *model, const char *models, int ctx, int kv, int threads,
                 struct answer_llm **out); /* api/cli/cli_locate.c (`eval vpe`, hooked from cli_eval) */
/* Fused retriever over s (api/cli/cli_search.c); embeds chunks lacking vectors first unless
 * need_vectors is 0 (keywords only: no model loaded). *emb is NULL without the text
 * model (BM25 only). Returns 0 or -1 (message printed). */
struct embed_ctx;
struct retriever;
int cli_retriever_open(store *s, const char *models, int quiet, int need_vectors,
                       struct embed_ctx **emb, struct retriever **r);

/* ---- helpers (api/cli/cli_common.c) ---- */
/* "mmrag: <message>\n" on stderr. */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* --db value, else $MMRAG_DB, else "./.mmrag". */
const char *cli_db_dir(const char *opt);
/* Open the store. write=1 creates the database if missing; write=0 requires it to exist.
 * Prints the error and returns NULL on failure. */
store *cli_store_open(const char *db_opt, int write);
/* Resolve DOC (id, sha256 prefix, path); prints the error and returns the store status. */
int cli_doc_resolve(store *s, const char *spec, store_doc_row *out);
/* --show FILE: 0 when the folder that would hold FILE exists, else prints
 * "<cmd>: --show FILE: folder DIR does not exist" and returns -1. */
int cli_show_folder_check(const char *cmd, const char *path);
/* Parse a positive int option; prints an error on failure. */
int cli_parse_int(const char *opt, const char *val, int min, int max, int *out);
/* Print JSON to stdout (reals with 6 significant digits) and free it. */
void cli_json_print(json_t *j);
json_t *cli_json_box(store_box b);
json_t *cli_json_str(const char *t);     /* a JSON string even for invalid UTF-8 */
json_t *cli_json_doc(const store_doc_row *d);
/* Usage text of a command on stdout (for --help) or stderr (for errors, returns CLI_USAGE). */
int cli_usage_error(const char *usage, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#endif
