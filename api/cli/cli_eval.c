/* api/cli/cli_eval.c — `mmrag eval retrieval QUESTIONS.json`: recall@1/5/10, MRR, nDCG@5/10
 * per question and overall, with the ablation (BM25 only, text only, image only, fused).
 * Other evaluations (`eval vpe`, `eval niah`) are registered by their owners. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include "api/cli/cli.h"
#include "api/core/embed.h"
#include "retrieval/retrieval.h"

static const char usage[] =
    "usage: mmrag eval retrieval QUESTIONS.json [--json] [--db DIR] [--models DIR]\n"
    "       mmrag eval answers QUESTIONS.json [--mode M] [--json]  (see eval answers --help)\n"
    "  Runs every question four times (bm25 only, text vectors only, image vectors only,\n"
    "  fused) and prints recall@1/5/10, MRR and nDCG@5/10 per question and overall.\n"
    "  Question file format: see tests/data/eval_questions.json and retrieval/eval.c.\n";

int cli_eval(int argc, char **argv) {
    static const struct option opts[] = {{"db", required_argument, 0, 'd'},
                                         {"models", required_argument, 0, 'M'},
                                         {"json", no_argument, 0, 'J'},
                                         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *db = NULL, *models = NULL;
    int o, json = 0;
    if (argc > 1 && !strcmp(argv[1], "vpe")) return cli_eval_vpe(argc - 1, argv + 1);  /* cli_locate.c */
    if (argc > 1 && !strcmp(argv[1], "answers")) return cli_eval_answers(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "niah")) return cli_eval_niah(argc - 1, argv + 1); /* cli_niah.c */
    optind = 0;
    while ((o = getopt_long(argc, argv, "d:h", opts, NULL)) != -1) {
        switch (o) {
        case 'd': db = optarg; break;
        case 'M': models = optarg; break;
        case 'J': json = 1; break;
        case 'h': fputs(usage, stdout); return CLI_OK;
        default: fputs(usage, stderr); return CLI_USAGE;
        }
    }
    if (optind >= argc) return cli_usage_error(usage, "eval: which evaluation? (retrieval, answers, vpe, niah)");
    if (strcmp(argv[optind], "retrieval"))
        return cli_usage_error(usage, "eval: unknown evaluation '%s'", argv[optind]);
    if (optind + 1 >= argc) return cli_usage_error(usage, "eval retrieval: no question file given");
    const char *qpath = argv[optind + 1];
    store *s = cli_store_open(db, 0);
    if (!s) return CLI_DBERR;
    embed_ctx *emb = NULL;
    retriever *r = NULL;
    int rc = CLI_OK;
    if (cli_retriever_open(s, models, json, 1, &emb, &r)) { rc = CLI_DBERR; goto out; }
    char err[512];
    if (retr_eval_file(r, qpath, json, stdout, NULL, err, sizeof err)) {
        cli_err("%s", err);
        rc = CLI_FAIL;
    }
out:
    retr_free(r);
    embed_free(emb);
    store_close(s);
    return rc;
}
