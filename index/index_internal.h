/* Private to index/: helpers shared by the module's files. */
#ifndef MMRAG_INDEX_INTERNAL_H
#define MMRAG_INDEX_INTERNAL_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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
/* vindex.c: an index that lives in the shared store (PostgreSQL + pgvector): searches
 * call store_vectors_knn on s for (space, owner kind, o->model_id); nothing is held,
 * loaded or saved here. vindex_sync.c keeps its vector count for vindex_size(). */
struct store;
struct vindex;
struct vindex_opts;
struct vindex *vindex_create_remote(const struct vindex_opts *o, struct store *s,
                                    const char *space, int32_t owner_kind, char *err,
                                    size_t errlen);
int vindex_is_remote(const struct vindex *v);
void vindex_set_remote_count(struct vindex *v, int64_t n);
#endif
