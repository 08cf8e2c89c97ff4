/* mmrag.h — public C API of mmrag: multimodal retrieval-augmented generation over PDFs.
 *
 *   mmrag *h;
 *   char err[256];
 *   if (mmrag_open("./.mmrag", NULL, &h, err, sizeof err) != MMRAG_OK) { puts(err); return 1; }
 *   int64_t doc;
 *   if (mmrag_index_file(h, "report.pdf", &doc) != MMRAG_OK) puts(mmrag_errmsg(h));
 *   mmrag_hit *hits; int32_t n;
 *   mmrag_search(h, "revenue by quarter", NULL, &hits, &n);   // hits[i].page, .box, .text
 *   mmrag_hits_free(hits, n);
 *   mmrag_answer a;
 *   mmrag_ask(h, "What was Q3 revenue?", NULL, &a);            // a.answer + a.citations
 *   mmrag_answer_free(&a);
 *   mmrag_close(h);
 *
 * A collection is a directory (one SQLite database plus derived vector indexes); the
 * mmrag CLI and `mmrag serve` read and write the same layout.
 * Boxes are normalized to the page: [x0, y0, x1, y1] in 0..1, origin top-left.
 *
 * Threads: a handle is thread-safe; any number of threads may search, ask and index
 * through one handle at once (indexing calls run in parallel; generations use one engine
 * session per concurrent call). There is no global state: handles are independent.
 * Errors: functions return MMRAG_OK (0) or a negative mmrag_status; mmrag_errmsg(h)
 * gives the calling thread's last message on that handle. Everything an output struct
 * points to is owned by it; free it with the matching _free function (NULL-safe).
 * Link: pkg-config --cflags --libs mmrag (static: --static). */
#ifndef MMRAG_H
#define MMRAG_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MMRAG_VERSION "0.1.0"

typedef enum {
    MMRAG_OK = 0,
    MMRAG_ERR_ARG = -1,          /* bad argument (NULL, empty text, out of range) */
    MMRAG_ERR_IO = -2,           /* cannot read/create the file or directory */
    MMRAG_ERR_INPUT = -3,        /* the PDF is unusable: not a PDF, truncated, encrypted, empty */
    MMRAG_ERR_NOTFOUND = -4,     /* no such document */
    MMRAG_ERR_STORE = -5,        /* the database failed (read-only, full, corrupt, busy) */
    MMRAG_ERR_MODEL = -6,        /* a model file is missing or generation failed */
    MMRAG_ERR_UNSUPPORTED = -7,  /* not available in this build (see the function) */
    MMRAG_ERR_NOMEM = -8,
    MMRAG_ERR_CANCELLED = -9,    /* the callback asked to stop */
} mmrag_status;

typedef struct mmrag mmrag;

typedef struct {
    int32_t readonly;            /* 1: never write (index/delete fail with MMRAG_ERR_STORE) */
    int32_t embed;               /* 1 (default): write text vectors when indexing and use them
                                  * in search; 0: keyword (BM25) search only, no model needed */
    const char *models_dir;      /* NULL: $MMRAG_MODELS, else "models" */
    const char *llm_path;        /* GGUF for mmrag_ask; NULL: <models>/smollm2/...Q4_1.gguf */
    int32_t threads;             /* kernel threads per generation; 0 = all CPUs */
    /* Indexing parses each PDF in a child process (a fork of this one, or ingest_worker):
     * a PDF that crashes, hangs or exhausts the parser fails with MMRAG_ERR_INPUT and a
     * message naming the reason, and nothing of it is stored. */
    int32_t ingest_timeout_s;    /* wall clock per document; 0 = 600 s; -1 = none */
    int32_t ingest_mem_mb;       /* the parser's address-space limit; 0 = 4096 MiB; -1 = none */
    int32_t ingest_in_process;   /* 1: parse in this process (no isolation, no limits) */
    const char *ingest_worker;   /* path of an `mmrag` binary to exec as the parser (no fork
                                  * of a multithreaded caller; the string must outlive the
                                  * handle); NULL: fork this process */
} mmrag_options;

typedef struct { float x0, y0, x1, y1; } mmrag_box;

typedef struct {
    int64_t id;
    char sha256[65];
    char *title;
    int32_t pages, chunks, images;
    int64_t bytes;
} mmrag_doc;

typedef struct {
    int64_t chunk_id, doc_id;
    char *title;
    int32_t page;                /* 1-based */
    const char *kind;            /* "text", "caption", "figure", "table", "ocr", "heading" (static) */
    mmrag_box box;
    int64_t image_id;            /* anchored image, 0 = none */
    char *text;
    double score;                /* fused score: higher is better */
} mmrag_hit;

typedef struct {
    int32_t k;                   /* hits wanted; 0 = 5 */
    const int64_t *docs;         /* restrict to these documents; NULL = all */
    int32_t n_docs;
} mmrag_search_opts;

/* Streaming: called with each new piece of answer text; return non-zero to stop. */
typedef int (*mmrag_token_fn)(void *user, const char *piece, size_t len);

typedef struct {
    int32_t k;                   /* evidence chunks retrieved; 0 = 6 */
    int32_t max_tokens;          /* 0 = 200 */
    float temperature;           /* 0 = greedy */
    uint64_t seed;
    int32_t json_mode;           /* 1: the answer is exactly one JSON object */
    mmrag_token_fn on_token;     /* NULL = no streaming (the checked answer text) */
    void *user;
    int32_t mode;                /* MMRAG_MODE_AUTO (0), _EXTRACTIVE, _GENERATIVE */
    int32_t show_unsupported;    /* 1: unsupported sentences shown, marked */
} mmrag_ask_opts;

/* Answer modes: extractive quotes the best evidence sentences; generative lets the model
 * write and keeps only the sentences the evidence supports; auto is generative, falling
 * back to the quotes when nothing survives. Every mode abstains when the documents do
 * not answer the question. */
enum { MMRAG_MODE_AUTO = 0, MMRAG_MODE_EXTRACTIVE = 1, MMRAG_MODE_GENERATIVE = 2 };

typedef struct {
    char *answer;
    mmrag_hit *citations;        /* citations[i] is [i+1] in the answer: the evidence
                                    sentence (text) and its box on the page */
    int32_t n_citations;
    const char *stop_reason;     /* "end_turn", "max_tokens", "stop_sequence", "aborted",
                                    "repetition" (the model began to loop), "extractive" (no
                                    model ran), "unsupported" (stopped: 3 sentences in a row
                                    failed the check), "enough" (4 supported sentences) */
    double ttft_ms;              /* time to first token */
    int32_t prompt_tokens, completion_tokens;
    int32_t abstained;           /* 1: the documents do not answer; answer says so and
                                    citations are the nearest passages */
    const char *mode_used;       /* "extractive" or "generative" (static text) */
} mmrag_answer;

typedef struct {
    int64_t doc_id;
    int32_t page;                /* 1-based; 0 = not found */
    mmrag_box box;
    float confidence;            /* 0..1; found when >= 0.75 (also set when not found) */
    char kind[16];               /* "raster" (photo), "figure" (chart, diagram), "caption",
                                  * "table", "text", "heading"; "" when not found */
} mmrag_region;

void mmrag_options_default(mmrag_options *o);

/* Open (creating when missing, unless readonly) the collection in `dir`. o may be NULL.
 * On failure *out is NULL and err (may be NULL) holds a one-line message. */
int mmrag_open(const char *dir, const mmrag_options *o, mmrag **out, char *err, size_t errlen);
void mmrag_close(mmrag *h);

/* The calling thread's last error message on h ("" if none); valid until that thread's
 * next call on h. */
const char *mmrag_errmsg(mmrag *h);
const char *mmrag_strerror(int status);          /* static text for a status */

/* OpenBLAS picks its kernels by CPU model when it loads and falls back to its slowest ones
 * (SSE3, "Prescott") on a model it does not know: sgemm ~2.4x slow. Only $OPENBLAS_CORETYPE
 * set before it loads changes that, which a library cannot do for its host. This returns
 * what to set it to (static text: "SkylakeX", "Haswell") when OpenBLAS fell back on a CPU with
 * AVX2 and FMA, NULL otherwise; the mmrag CLI re-runs itself with it, the Python package asks
 * it in a child process before it loads the library. */
const char *mmrag_blas_kernels_better(void);

/* Index a PDF file / a PDF held in memory (`name` is shown in messages and titles).
 * Unchanged content (same sha256) is a no-op that returns the existing id. A document is
 * written whole or not at all. doc_id may be NULL. */
int mmrag_index_file(mmrag *h, const char *path, int64_t *doc_id);
int mmrag_index_memory(mmrag *h, const void *data, size_t len, const char *name, int64_t *doc_id);
/* Index n PDF files the way `mmrag index` does: `jobs` parsed in parallel (0: the CPUs, at
 * most 8), each written whole or not at all, and embedded by a thread beside the parsers
 * as they are written (so the encoder works while the next files are parsed). status and
 * doc_ids (each may be NULL) get n entries: a code per file, its document id (0 when it
 * failed). Returns MMRAG_OK when every file was indexed or unchanged, else the first
 * failure's code, mmrag_errmsg naming its file; after a database error later files are not
 * started (MMRAG_ERR_STORE). */
int mmrag_index_files(mmrag *h, const char *const *paths, int32_t n, int32_t jobs,
                      int32_t *status, int64_t *doc_ids);

int mmrag_list(mmrag *h, mmrag_doc **docs, int32_t *n);
void mmrag_docs_free(mmrag_doc *docs, int32_t n);
int mmrag_delete(mmrag *h, int64_t doc_id);      /* MMRAG_ERR_NOTFOUND if absent */

/* Hybrid search (text vectors + image space + BM25, fused); o may be NULL. */
int mmrag_search(mmrag *h, const char *query, const mmrag_search_opts *o, mmrag_hit **hits,
                 int32_t *n);
void mmrag_hits_free(mmrag_hit *hits, int32_t n);

/* Retrieve evidence, generate an answer citing it as [n]; o may be NULL. */
int mmrag_ask(mmrag *h, const char *question, const mmrag_ask_opts *o, mmrag_answer *out);
void mmrag_answer_free(mmrag_answer *a);

/* Find the region of document doc_id that a description refers to ("the bar chart below
 * the revenue heading", "Figure 2", "the second table on page 3"); page 0 = any page (or
 * the page the description names), else only that page. Candidates are the document's
 * images, figure areas, captions, tables, headings and text blocks; the best one is
 * returned when its confidence reaches 0.75. Below that the call still succeeds and
 * says "not found": out->page == 0 (out->confidence is the best guess's). Needs the
 * text model (loaded on first use when the handle was opened with embed = 0).
 * Returns MMRAG_OK, MMRAG_ERR_ARG (empty description, page beyond the document),
 * MMRAG_ERR_NOTFOUND (no such document), MMRAG_ERR_MODEL, MMRAG_ERR_STORE, MMRAG_ERR_NOMEM. */
int mmrag_locate(mmrag *h, int64_t doc_id, int32_t page, const char *description,
                 mmrag_region *out);

#ifdef __cplusplus
}
#endif
#endif
