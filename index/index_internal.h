/* Private to index/: helpers shared by the module's files. */
#ifndef MMRAG_INDEX_INTERNAL_H
#define MMRAG_INDEX_INTERNAL_H
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* printf into the caller's error buffer; no-op when err is NULL or errlen is 0. */
static inline void index_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void index_set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
#endif
