/* api/core/answer — the one ask core behind `mmrag ask`, POST /v1/ask,
 * /v1/chat/completions and mmrag_ask(): retrieval, sentence-level evidence with boxes,
 * prompt budgeting in tokens, sampling defaults, the grounding check, abstention,
 * citations and the JSON shape of an answer. Front-ends parse their input into an
 * answer_request and print answer_json(); nothing else about answering lives in them.
 *
 *   answer_llm *llm; answer_llm_params lp; answer_llm_params_default(&lp);
 *   lp.path = answer_llm_path(NULL, models_dir, buf, sizeof buf);
 *   answer_llm_create(&lp, &llm, err, n);                 (the model loads on first use)
 *   answer_request rq; answer_request_default(&rq); rq.question = "...";
 *   if (answer_request_check(&rq, err, n)) -> 400 / exit 2
 *   answer_result a; answer_run(retriever, textenc, llm, &rq, &a, err, n);
 *   json_t *j = answer_json(&a); ... answer_result_free(&a);
 *
 * Modes: extractive = the best evidence sentences quoted verbatim; generative = the model
 * writes, each finished sentence is checked (api/core/ground.h) and only supported ones
 * are shown, each citing the evidence sentence(s) that support it; auto (default) =
 * generative, falling back to the quotes when nothing survives. The answer abstains
 * (says the documents do not answer, shows the nearest quotes) when the best evidence
 * sentence scores under ANSWER_ABSTAIN_SCORE.
 *
 * Threads: an answer_llm is shared (a pool of sessions, one per concurrent answer);
 * answer_run may be called from any number of threads with a shared retriever. */
#ifndef MMRAG_API_CORE_ANSWER_H
#define MMRAG_API_CORE_ANSWER_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "api/core/ground.h"
#include "retrieval/retrieval.h"

typedef enum { ANSWER_AUTO = 0, ANSWER_EXTRACTIVE = 1, ANSWER_GENERATIVE = 2 } answer_mode;

typedef enum {
    ANSWER_OK = 0,
    ANSWER_ERR_ARG = -1,        /* bad request: empty/oversized/invalid question, mode */
    ANSWER_ERR_RETRIEVAL = -2,  /* the store or an index failed */
    ANSWER_ERR_MODEL = -3,      /* the language model is missing or failed */
    ANSWER_ERR_NOMEM = -4,
    ANSWER_ERR_CONTEXT = -5,    /* the prompt cannot fit the context window */
    ANSWER_ABORTED = -6,        /* the text callback asked to stop */
} answer_status;

#define ANSWER_MAX_QUESTION 4096      /* bytes */
/* Relevance (answer_evidence.score) under which the documents are taken not to answer.
 * Calibrated on the development questions (tests/data/answer_questions_dev.json): best
 * scores of answerable questions 0.37-0.80, of unanswerable ones 0.28-0.66; 0.43 with the
 * absent-term rule (answer.c) abstained on 11/12 unanswerable and 3/20 answerable. */
#define ANSWER_ABSTAIN_SCORE 0.43f

const char *answer_mode_name(int32_t mode);            /* "auto", "extractive", ... */
int answer_mode_parse(const char *s, int32_t *mode);   /* 0, or -1 for an unknown name */

/* ---- the language model: one path rule, a pool of sessions ----------------------------- */
/* The model file: `given` if set, else $MMRAG_LLM, else
 * <models_dir>/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf. Returns given, the env value or buf. */
const char *answer_llm_path(const char *given, const char *models_dir, char *buf, size_t len);

typedef struct answer_llm_params {
    const char *path;          /* GGUF file (copied) */
    int32_t n_ctx;             /* context window in tokens (2048) */
    int32_t n_threads;         /* 0 = all cores */
    int32_t kv_type;           /* enum mmrag_kv_type (f32) */
    int32_t max_sessions;      /* concurrent generations; 0 = unlimited (others wait) */
} answer_llm_params;
void answer_llm_params_default(answer_llm_params *p);

typedef struct answer_llm answer_llm;
/* Does not load the model: the first answer that needs it does (its error, e.g. a missing
 * file, is then that answer's error and is retried next time). Returns 0 or -1. */
int answer_llm_create(const answer_llm_params *p, answer_llm **out, char *err, size_t errlen);
void answer_llm_free(answer_llm *l);
const char *answer_llm_file(const answer_llm *l);
int32_t answer_llm_ctx(const answer_llm *l);   /* the context window in tokens */
/* Loads the model now. Returns 0, or -1 with the reason (the file, the format). */
int answer_llm_load(answer_llm *l, char *err, size_t errlen);
/* Answers waiting for a free session now (they are served in arrival order). */
int32_t answer_llm_waiting(answer_llm *l);

/* ---- a request ---------------------------------------------------------------------------- */
/* Streamed answer text, as the user will read it (checked sentences only). Nonzero stops. */
typedef int (*answer_text_fn)(void *user, const char *text, size_t len);

typedef struct answer_request {
    const char *question;
    int32_t mode;              /* answer_mode (auto) */
    int32_t k;                 /* evidence chunks retrieved (6) */
    int32_t max_tokens;        /* answer length limit (200) */
    float temperature;         /* 0 = greedy */
    float top_p;               /* nucleus, used when temperature > 0 (0.95) */
    float repeat_penalty;      /* 1.15: a 135M model loops without it */
    uint64_t seed;
    int32_t json_mode;         /* 1: the model writes one JSON object, passed through
                                  unchecked (the caller asked for data, not prose) */
    int32_t show_unsupported;  /* 1: unsupported sentences are shown, marked */
    const char *system;        /* extra instructions from a chat client, or NULL */
    const char *history;       /* earlier chat turns as text, or NULL */
    retr_opts retrieval;       /* filters, weights, sources (k is taken from above) */
    answer_text_fn on_text;
    void *user;
    int (*cancelled)(void *user);  /* or NULL: polled while waiting for a free model session;
                                      nonzero (the client went away) gives up: ANSWER_ABORTED */
} answer_request;
void answer_request_default(answer_request *rq);
/* Rejects an empty, oversized or invalid-UTF-8 question and an unknown mode, with a
 * message for the user. Returns 0 or ANSWER_ERR_ARG. */
int answer_request_check(const answer_request *rq, char *err, size_t errlen);

/* ---- the result --------------------------------------------------------------------------- */
typedef struct answer_evidence {   /* one evidence sentence */
    int32_t hit;               /* index into hits.hits */
    char *text;
    store_box box;             /* the sentence's lines, or the chunk's box (box_is_line 0:
                                  a collection indexed before line boxes were kept) */
    int32_t box_is_line;
    float score;               /* relevance to the question (cosine + term overlap) */
    char *next;                /* the sentence after it in its chunk (NULL: none, or too
                                  long), which an extractive answer quotes along */
    store_box next_box;
    char *prev;                /* the sentence before it, when it refers back ("this
                                  entry"), quoted along too; NULL: none */
    store_box prev_box;
} answer_evidence;

typedef struct answer_sentence {   /* one sentence the model wrote */
    char *text;                /* without the model's own [n] marks */
    int32_t shown;
    ground_check check;        /* check.cite[] index ev[] */
    int32_t cite_n[2];         /* the [n] numbers it carries (0 = none) */
} answer_sentence;

typedef struct answer_result {
    char *text;                /* what the user reads */
    int32_t mode_used;         /* ANSWER_EXTRACTIVE or ANSWER_GENERATIVE */
    int32_t abstained;
    const char *abstain_reason;   /* static text or abstain_note, NULL when answered */
    char abstain_note[200];
    retr_result hits;          /* the retrieved chunks */
    answer_evidence *ev;       /* evidence sentences, best first */
    int32_t n_ev, n_prompt_ev; /* all of them; the first n_prompt_ev went to the model */
    int32_t *cites;            /* citation [i+1] -> ev index */
    int32_t n_cites;
    answer_sentence *sents;    /* generative: every sentence written, shown or not */
    int32_t n_sents;
    int32_t stop_reason;       /* enum mmrag_stop_reason (generative) */
    const char *stop_check;    /* static: "unsupported" (the model wrote sentences the check
                                  rejected, ANSWER_MAX_REJECTED in a row) or "enough"
                                  (ANSWER_MAX_SENTENCES supported ones); NULL otherwise */
    int32_t prompt_tokens, completion_tokens;
    double retrieval_ms, ttft_ms, total_ms;
} answer_result;
void answer_result_free(answer_result *a);
/* Why the answer ended: "extractive" (no model ran), stop_check, else the engine's reason
 * ("end_turn", "max_tokens", "repetition", ...). Static text. */
const char *answer_stop_name(const answer_result *a);

/* Generation stops early once the answer is long enough or clearly unsupported: a model
 * that wrote three sentences the evidence does not back in a row will not be trusted for
 * a fourth, and the reader waits for the fallback quotes meanwhile. */
#define ANSWER_MAX_SENTENCES 4
#define ANSWER_MAX_REJECTED 3

/* Answers rq from the retriever's collection. te (a textenc *, may be NULL: lexical
 * scoring only) scores evidence sentences; llm may be NULL for extractive answers and
 * abstentions (generative and auto then fail with ANSWER_ERR_MODEL). Returns an
 * answer_status; on error err holds a message and *out is empty. */
int answer_run(retriever *r, void *te, answer_llm *llm, const answer_request *rq,
               answer_result *out, char *err, size_t errlen);

/* ---- the JSON shape (CLI --json, POST /v1/ask, the chat extension field) --------------- */
/* {question, mode, mode_used, answer, abstained, abstain_reason, sentences[], citations[],
 *  evidence[], stop_reason, timings{}}; a citation is {n, document_id, title, page, kind,
 *  box, box_source: "sentence"|"chunk", chunk_id, image_id, text (the evidence sentence),
 *  score (its relevance), fused (its chunk's retrieval score)}. Caller decrefs. */
json_t *answer_json(const answer_result *a, const answer_request *rq);
json_t *answer_citations_json(const answer_result *a);
/* A retrieval hit as JSON {n?, chunk_id, document_id, title, page, kind, box, image_id,
 * text, snippet, scores{}, ranks{}, fused} (n omitted when 0): the shape of /v1/search
 * hits and of an answer's evidence. */
json_t *answer_hit_json(const retr_hit *h, int32_t n);
/* A JSON string even for invalid UTF-8 (replaced by U+FFFD); a box as [x0, y0, x1, y1]. */
json_t *answer_json_str(const char *s);
json_t *answer_json_box(store_box b);

/* ---- `mmrag eval answers` (api/core/answer_eval.c: file format and metrics) ------------ */
/* Runs every question of the file through answer_run with base's settings and prints
 * per-question lines and the summary table (or one JSON object) to out. Returns
 * ANSWER_OK, ANSWER_ERR_ARG (unreadable file) or ANSWER_ERR_MODEL (some answers failed). */
int answer_eval_file(retriever *r, void *te, answer_llm *llm, const char *path,
                     const answer_request *base, int json, FILE *out, char *err,
                     size_t errlen);
#endif
