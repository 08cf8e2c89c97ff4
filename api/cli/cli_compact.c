/* api/cli/cli_compact.c — `mmrag compact`: rebuild the vector indexes without the ids of
 * deleted chunks/images (searches already skip them; this reclaims the space), and delete
 * the figure vectors of replaced figure encoders. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include "api/cli/cli.h"
#include "api/core/embed.h"
#include "retrieval/retrieval.h"

static const char usage[] =
    "usage: mmrag compact [--db DIR] [--models DIR]\n"
    "  Rebuild the FAISS text (HNSW) and image (LSH) indexes from the vectors table,\n"
    "  dropping deleted entries, and save them beside the database; delete the figure\n"
    "  vectors of figure encoders replaced since (the images have the new one's).\n";

int cli_compact(int argc, char **argv) {
    static const struct option opts[] = {{"db", required_argument, 0, 'd'},
                                         {"models", required_argument, 0, 'M'},
                                         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *db = NULL, *models = NULL;
    int o;
    optind = 0;
    while ((o = getopt_long(argc, argv, "d:h", opts, NULL)) != -1) {
        switch (o) {
        case 'd': db = optarg; break;
        case 'M': models = optarg; break;
        case 'h': fputs(usage, stdout); return CLI_OK;
        default: fputs(usage, stderr); return CLI_USAGE;
        }
    }
    if (optind < argc) return cli_usage_error(usage, "compact: unexpected argument '%s'", argv[optind]);
    store *s = cli_store_open(db, 0);
    if (!s) return CLI_DBERR;
    embed_ctx *emb = NULL;
    retriever *r = NULL;
    int rc = CLI_OK;
    if (cli_retriever_open(s, models, 0, 1, &emb, &r)) { rc = CLI_DBERR; goto out; }
    retr_stats before, after;
    retr_get_stats(r, &before);
    char err[512];
    if (retr_compact(r, err, sizeof err)) {
        cli_err("%s", err);
        rc = CLI_DBERR;
        goto out;
    }
    retr_get_stats(r, &after);
    int64_t dropped = 0;
    if (embed_figure_drop_stale(s, &dropped, err, sizeof err)) {
        cli_err("%s", err);
        rc = CLI_DBERR;
        goto out;
    }
    if (dropped) printf("figure vectors of replaced encoders: %lld deleted\n", (long long)dropped);
    printf("text index: %lld vectors (%lld dead) -> %lld\n", (long long)before.text_vectors,
           (long long)before.text_dead, (long long)after.text_vectors);
    printf("image index: %lld vectors (%lld dead) -> %lld\n", (long long)before.image_vectors,
           (long long)before.image_dead, (long long)after.image_vectors);
out:
    retr_free(r);
    embed_free(emb);
    store_close(s);
    return rc;
}
