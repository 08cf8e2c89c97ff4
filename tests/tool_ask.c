/* tool_ask — `mmrag_ask()` from the public library, for the shell tests that compare it
 * with the CLI and the REST server: prints {"answer", "abstained", "mode_used",
 * "citations": [{"document_id", "page", "box", "text"}]} as JSON.
 * Usage: tool_ask DB "question" [MODE] [THREADS]   (MODE 0 auto, 1 extractive, 2 generative) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "mmrag.h"

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: tool_ask DB QUESTION [MODE] [THREADS]\n"); return 2; }
    mmrag_options o;
    mmrag_options_default(&o);
    o.readonly = 1;
    o.threads = argc > 4 ? atoi(argv[4]) : 0;
    mmrag *h;
    char err[512];
    if (mmrag_open(argv[1], &o, &h, err, sizeof err)) { fprintf(stderr, "tool_ask: %s\n", err); return 1; }
    mmrag_ask_opts ao = {0};
    ao.mode = argc > 3 ? atoi(argv[3]) : MMRAG_MODE_AUTO;
    mmrag_answer a;
    int rc = mmrag_ask(h, argv[2], &ao, &a);
    if (rc) { fprintf(stderr, "tool_ask: %s\n", mmrag_errmsg(h)); mmrag_close(h); return 1; }
    json_t *cites = json_array();
    for (int32_t i = 0; i < a.n_citations; i++) {
        const mmrag_hit *c = &a.citations[i];
        json_array_append_new(cites, json_pack("{s:I,s:i,s:[f,f,f,f],s:s}", "document_id",
                                               (json_int_t)c->doc_id, "page", c->page, "box",
                                               (double)c->box.x0, (double)c->box.y0,
                                               (double)c->box.x1, (double)c->box.y1, "text", c->text));
    }
    json_t *j = json_pack("{s:s,s:b,s:s,s:o}", "answer", a.answer, "abstained", a.abstained,
                          "mode_used", a.mode_used, "citations", cites);
    char *s = json_dumps(j, JSON_INDENT(1) | JSON_REAL_PRECISION(6));
    puts(s ? s : "{}");
    free(s);
    json_decref(j);
    mmrag_answer_free(&a);
    mmrag_close(h);
    return 0;
}
