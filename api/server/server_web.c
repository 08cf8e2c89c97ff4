/* api/server/server_web.c — the web page and the OpenAPI document, embedded from
 * api/server/web/ at build time with the assembler's .incbin (the Makefile makes this
 * object depend on the files in api/server/web; the compiler runs from the repository
 * root). Each blob ends with a NUL. */
#include "api/server/server_internal.h"

#define EMBED(sym, file)                                                     \
    __asm__(".section .rodata\n"                                             \
            ".globl " #sym "_start\n.hidden " #sym "_start\n"               \
            ".globl " #sym "_end\n.hidden " #sym "_end\n"                   \
            ".balign 16\n" #sym "_start:\n"                                  \
            ".incbin \"" file "\"\n" #sym "_end:\n.byte 0\n.previous\n");   \
    extern const char sym##_start[], sym##_end[]

EMBED(mmrag_web_index, "api/server/web/index.html");
EMBED(mmrag_web_openapi, "api/server/web/openapi.json");

const char *srv_web_index(size_t *len) {
    *len = (size_t)(mmrag_web_index_end - mmrag_web_index_start);
    return mmrag_web_index_start;
}

const char *srv_web_openapi(size_t *len) {
    *len = (size_t)(mmrag_web_openapi_end - mmrag_web_openapi_start);
    return mmrag_web_openapi_start;
}
