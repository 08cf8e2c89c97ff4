/* api/core/answer_internal — names shared by the answer core's files (not a contract for
 * anyone else): answer.c (the flow), answer_evidence.c (sentence evidence and scores),
 * answer_llm.c (model + sessions), answer_json.c (the JSON shape). */
#ifndef MMRAG_API_CORE_ANSWER_INTERNAL_H
#define MMRAG_API_CORE_ANSWER_INTERNAL_H
#include "api/core/answer.h"

struct mmrag_engine;
struct mmrag_session;
/* A free session of the pool (waits in arrival order when max_sessions are busy), loading
 * the engine first if needed; *eng gets the engine. cancelled (may be NULL) is polled while
 * waiting: nonzero gives up. NULL with a message on failure or when cancelled. */
struct mmrag_session *answer_llm_acquire(answer_llm *l, struct mmrag_engine **eng,
                                         int (*cancelled)(void *), void *user, char *err,
                                         size_t errlen);
void answer_llm_release(answer_llm *l, struct mmrag_session *s);
/* answer_llm_acquire for a request (its cancelled callback): ANSWER_OK with *ss set,
 * ANSWER_ABORTED when the caller gave up while waiting, else ANSWER_ERR_MODEL + message. */
int answer_llm_session(answer_llm *l, const answer_request *rq, struct mmrag_engine **eng,
                       struct mmrag_session **ss, char *err, size_t errlen);
/* The answer status of a failed mmrag_session_generate (grc < 0), with its message. */
int answer_llm_gen_failed(struct mmrag_session *ss, int grc, char *err, size_t errlen);

/* b grows to cover o too. */
void answer_box_union(store_box *b, const store_box *o);

/* The kinds of value (GROUND_VALUE_* bits) a question asks for ("how many", "which file",
 * "what option") and those a text holds; 0: none. */
int answer_wanted_type(const char *question);
int answer_held_types(const char *text);

/* Splits the hits into sentences with boxes (line boxes from the store when the chunk
 * has them), drops repeats (overlapping chunks), scores each against the question and
 * sorts best first into a->ev. Returns 0 or -1 (out of memory / encoder failure). */
int answer_evidence_collect(retriever *r, void *te, const char *question, answer_result *a,
                            char *err, size_t errlen);

/* The text the user reads, built only through answer_emit (it also streams it). */
typedef struct answer_reader {
    answer_result *a;
    const answer_request *rq;
    size_t len, cap;
    int stopped;               /* the caller's callback asked to stop */
    int failed;                /* out of memory */
} answer_reader;
void answer_emit(answer_reader *w, const char *s);
/* s with " [n]" marks (before a final . ! or ?), then sep. */
void answer_emit_cited(answer_reader *w, const char *s, const int32_t *nums, int32_t n,
                       const char *sep);
/* The citation number of evidence sentence ev (assigned in order of first use), 0 when
 * out of memory. */
int32_t answer_cite(answer_result *a, int32_t ev);

/* answer_generate.c: prompt, generation, the per-sentence check. Returns an answer_status. */
int answer_generate(answer_reader *w, answer_llm *llm, char *err, size_t errlen);
#endif
