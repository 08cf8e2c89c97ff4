/* api/core/embed_cache — embed each distinct text once: duplicates within a call share one
 * vector, and a bounded table of recent texts (whole-text compare) serves repeats across
 * calls. Thread-safe handle; the encoder runs outside its lock. Used by embed.c. */
#ifndef MMRAG_API_CORE_EMBED_CACHE_H
#define MMRAG_API_CORE_EMBED_CACHE_H
#include <stddef.h>
#include <stdint.h>

typedef struct embed_cache embed_cache;
/* The encoder behind the cache: n texts into out[n][dim]. Returns 0 or -1 + message. */
typedef int (*embed_cache_fn)(void *user, const char *const *texts, int32_t n, float *out,
                              char *err, size_t errlen);

/* dim floats per vector; n_slots recent texts kept (rounded up to a power of two; 0 = no
 * cross-call table, duplicates within a call are still shared). NULL when out of memory. */
embed_cache *embed_cache_create(int32_t dim, int32_t n_slots);
void embed_cache_free(embed_cache *c);

/* out[i] = the vector of texts[i] (NULL = ""), encoding only the distinct texts not in
 * the table. Returns 0, or -1 with a message (the encoder's, or out of memory). */
int embed_cache_run(embed_cache *c, const char *const *texts, int32_t n, float *out,
                    embed_cache_fn encode, void *user, char *err, size_t errlen);
/* Since creation: texts served from the table, duplicates within calls, texts encoded. */
void embed_cache_stats(embed_cache *c, int64_t *hits, int64_t *dups, int64_t *misses);
#endif
