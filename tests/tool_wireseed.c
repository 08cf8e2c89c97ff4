/* tool_wireseed PDF OUT: the first page of PDF as the child's encoder sends it (the
 * payload of its WIRE_PAGE record), a seed for tests/fuzz/fuzz_wire.c's corpus. */
#include <stdio.h>
#include "api/core/isolate_wire.h"

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: tool_wireseed PDF OUT\n"); return 2; }
    ingest_options o;
    ingest_options_default(&o);
    ingest_doc *d = NULL;
    ingest_page *p = NULL;
    char err[512];
    if (ingest_doc_open(argv[1], &o, &d, err, sizeof err) ||
        ingest_doc_page(d, 1, &p, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        ingest_doc_free(d);
        return 1;
    }
    wire_buf b = {0};
    wire_page_encode(&b, p);
    FILE *f = fopen(argv[2], "wb");
    int bad = b.oom || b.len < 8 || !f || fwrite(b.p + 8, 1, b.len - 8, f) != b.len - 8;
    if (f && fclose(f)) bad = 1;
    wire_buf_free(&b);
    ingest_page_free(p);
    ingest_doc_free(d);
    if (bad) { fprintf(stderr, "cannot write %s\n", argv[2]); return 1; }
    return 0;
}
