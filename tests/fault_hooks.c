/* tests/fault_hooks.c — the fault hook of isolated ingest, linked only into the test binary
 * build/tests/mmrag_faults (the mmrag CLI plus this file): its strong isolate_test_fault
 * replaces libmmrag's empty weak one, so the production binary has no way to trigger it.
 *
 * In the ingest child, a document whose file name contains
 *   fault-crash  dies of SIGSEGV          fault-hang  sleeps forever (wall-clock timeout)
 *   fault-spin   burns CPU forever         fault-oom   allocates until memory runs out
 * and any other name parses normally. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "api/core/isolate.h"

static void exhaust_memory(void) {
    const size_t step = 32u << 20;
    for (;;) {
        char *p = malloc(step);
        if (!p) {   /* what glib and C++ new do when an allocation fails: abort */
            fputs("fault hook: failed to allocate memory\n", stderr);
            abort();
        }
        memset(p, 1, step);   /* touch it: real pages, not just address space */
    }
}

void isolate_test_fault(const char *name) {
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strstr(base, "fault-crash")) raise(SIGSEGV);
    if (strstr(base, "fault-hang")) for (;;) pause();
    if (strstr(base, "fault-spin")) for (volatile unsigned long i = 0;; i++) {}
    if (strstr(base, "fault-oom")) exhaust_memory();
}
