/* api/cli/cli_eval_answers.c — `mmrag eval answers QUESTIONS.json`: answer quality (key in
 * answer, cited page, grounded sentences, abstention) through the answer core; the file
 * format and the metrics are described in api/core/answer_eval.c. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include "api/cli/cli.h"
#include "api/core/answer.h"
#include "api/core/embed.h"
#include "engine/engine.h"

static const char usage[] =
    "usage: mmrag eval answers QUESTIONS.json [--mode auto|extractive|generative] [--json]\n"
    "                          [--db DIR] [--models DIR] [--model GGUF] [--max-tokens N]\n"
    "  Answers every question as `mmrag ask` would and prints per question whether it\n"
    "  abstained, whether a key is in the answer and whether a citation is on an answer\n"
    "  page, then: key in answer, cited page correct, grounded sentences (and the stricter\n"
    "  token-overlap rule), abstention on unanswerable and on answerable questions.\n"
    "  Question file format: tests/data/answer_questions_debian.json, api/core/answer_eval.c.\n";

int cli_eval_answers(int argc, char **argv) {
    static const struct option opts[] = {{"db", required_argument, 0, 'd'},
                                         {"models", required_argument, 0, 'M'},
                                         {"model", required_argument, 0, 'm'},
                                         {"mode", required_argument, 0, 'o'},
                                         {"max-tokens", required_argument, 0, 'n'},
                                         {"json", no_argument, 0, 'J'},
                                         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *db = NULL, *models_opt = NULL, *model = NULL;
    int o, json = 0, mt = 0;
    answer_request rq;
    answer_request_default(&rq);
    optind = 0;
    while ((o = getopt_long(argc, argv, "d:h", opts, NULL)) != -1) {
        switch (o) {
        case 'd': db = optarg; break;
        case 'M': models_opt = optarg; break;
        case 'm': model = optarg; break;
        case 'J': json = 1; break;
        case 'n': if (cli_parse_int("--max-tokens", optarg, 1, 8192, &mt)) return CLI_USAGE; break;
        case 'o':
            if (answer_mode_parse(optarg, &rq.mode))
                return cli_usage_error(usage, "eval answers: unknown --mode '%s'", optarg);
            break;
        case 'h': fputs(usage, stdout); return CLI_OK;
        default: fputs(usage, stderr); return CLI_USAGE;
        }
    }
    if (mt) rq.max_tokens = mt;
    if (optind + 1 != argc) return cli_usage_error(usage, "eval answers: one question file expected");
    char mbuf[4200], err[600];
    const char *models = embed_models_dir(models_opt, mbuf, sizeof mbuf);
    answer_llm *llm = NULL;
    if (rq.mode != ANSWER_EXTRACTIVE && cli_llm_open(model, models, 0, MMRAG_KV_F32, 0, &llm))
        return CLI_FAIL;
    store *s = cli_store_open(db, 0);
    if (!s) { answer_llm_free(llm); return CLI_DBERR; }
    embed_ctx *emb = NULL;
    retriever *r = NULL;
    int rc = CLI_OK;
    if (cli_retriever_open(s, models, json, 1, &emb, &r)) { rc = CLI_DBERR; goto out; }
    int erc = answer_eval_file(r, emb ? embed_textenc(emb) : NULL, llm, argv[optind], &rq, json,
                               stdout, err, sizeof err);
    if (erc != ANSWER_OK) {
        cli_err("eval answers: %s", erc == ANSWER_ERR_ARG ? err : "some questions failed");
        rc = erc == ANSWER_ERR_ARG ? CLI_USAGE : CLI_FAIL;
    }
out:
    retr_free(r);
    embed_free(emb);
    store_close(s);
    answer_llm_free(llm);
    return rc;
}
