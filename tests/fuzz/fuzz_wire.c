/* Fuzz target: the isolated-ingest wire decoder (api/core/isolate_wire.c), which reads the
 * records a possibly compromised child sent. Property: a payload decodes into a page whose
 * counts and strings are consistent, or is refused with a reason and leaves the parent's
 * expectations unchanged. */
#include "tests/fuzz/fuzz.h"
#include "api/core/isolate_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wire_expect ex = {1, 0, 0};
    ingest_page *p = NULL;
    char why[200] = "";
    int rc = wire_page_decode(data, size, &ex, &p, why, sizeof why);
    if (rc != 0) {
        FUZZ_ASSERT(!p && why[0], "a refused page needs a reason and no page");
        FUZZ_ASSERT(ex.page == 1 && ex.next_order == 0 && ex.next_image == 0,
                    "a refused page moved the expectations");
        return 0;
    }
    FUZZ_ASSERT(p && p->number == 1 && ex.page == 2, "page %d", p ? p->number : -1);
    for (int32_t i = 0; i < p->n_chunks; i++) {
        FUZZ_ASSERT(p->chunks[i].text != NULL, "chunk %d has no text", i);
        (void)strlen(p->chunks[i].text);
    }
    ingest_page_free(p);
    return 0;
}
