/* ingest — PDF → pages of text blocks, images/figures and image-anchored chunks.
 *
 * Streaming contract: open a document, then pull one page at a time; each page result
 * is self-contained and freed before the next, so memory stays flat for any page count.
 * All boxes are normalized to the page, [x0,y0,x1,y1] in 0..1, origin top-left.
 * Errors: functions return 0 (INGEST_OK) or a negative ingest_status, and write a
 * one-line message naming the file into the caller's buffer. Handles are not shared
 * between threads; different handles may be used from different threads. */
#ifndef MMRAG_INGEST_H
#define MMRAG_INGEST_H
#include <stddef.h>
#include <stdint.h>

typedef enum {
    INGEST_OK = 0,
    INGEST_ERR_IO = -1,        /* unreadable path, not a regular file */
    INGEST_ERR_NOT_PDF = -2,   /* no %PDF header / Poppler cannot parse */
    INGEST_ERR_ENCRYPTED = -3, /* needs a password */
    INGEST_ERR_EMPTY = -4,     /* zero pages */
    INGEST_ERR_OCR = -5,       /* OCR engine could not start (page still returned, no text) */
    INGEST_ERR_NOMEM = -6,
    INGEST_ERR_ARG = -7,
} ingest_status;

typedef struct { float x0, y0, x1, y1; } ingest_box;

typedef enum {
    INGEST_CHUNK_TEXT = 0,
    INGEST_CHUNK_CAPTION = 1, /* "Figure 2: ...", "Fig. 3", "Table 1 ..." */
    INGEST_CHUNK_FIGURE = 2,  /* text found inside a figure region (labels, legend) */
    INGEST_CHUNK_TABLE = 3,
    INGEST_CHUNK_OCR = 4,     /* text from Tesseract on a page with no text layer */
    INGEST_CHUNK_HEADING = 5,
} ingest_chunk_kind;

typedef enum {
    INGEST_IMAGE_RASTER = 0,  /* embedded bitmap listed by poppler_page_get_image_mapping */
    INGEST_IMAGE_VECTOR = 1,  /* vector figure (paths) found on the page render */
} ingest_image_kind;

typedef struct {
    int32_t index;          /* 0-based, unique within the document (across pages) */
    int32_t page;           /* 1-based */
    int32_t kind;           /* ingest_image_kind */
    ingest_box box;
    int32_t width_px, height_px;  /* pixel size of the crop in `png` */
    uint8_t *png;           /* the region rendered at 144 dpi as PNG (owned by the page) */
    size_t png_len;
    uint64_t phash;         /* 64-bit perceptual hash (DCT) of the region */
    int32_t caption_chunk;  /* index into the page's chunks of its caption, or -1 */
} ingest_image;

/* One text line of a chunk (a run of its words on one line of the page, e.g. one line of
 * a paragraph or one row of a table). */
typedef struct {
    uint32_t off, len;      /* bytes [off, off+len) of the chunk's text */
    ingest_box box;         /* the line on the page (normalized, inside the chunk box) */
} ingest_line;

typedef struct {
    int32_t order;          /* 0-based within the document (across pages) */
    int32_t page;           /* 1-based */
    int32_t kind;           /* ingest_chunk_kind */
    ingest_box box;         /* union of the blocks it came from */
    int32_t image_index;    /* ingest_image.index it is anchored to, or -1 */
    char *text;             /* UTF-8, owned by the page */
    /* Lines in text order: ranges ascend, do not overlap, and together hold every
     * non-whitespace byte of text (the separators between lines are whitespace). A chunk
     * that starts or ends inside a line (overlapping windows) still gets that whole line's
     * box. OCR chunks get Tesseract's text lines. Owned by the page; >= 1 per chunk. */
    ingest_line *lines;
    int32_t n_lines;
    /* Heading path of the section the chunk is in ("Commands > Set-show > Logscale"), from
     * the PDF outline, else the last heading chunk before it; "" when none. Owned by the page. */
    char *section;
} ingest_chunk;

typedef struct {
    int32_t number;         /* 1-based */
    float width_pt, height_pt;
    int32_t ocr;            /* 1 if the text came from OCR */
    ingest_image *images;
    int32_t n_images;
    ingest_chunk *chunks;
    int32_t n_chunks;
} ingest_page;

typedef struct {
    int32_t chunk_tokens;   /* token budget per chunk (whitespace words ≈ tokens); default 200 */
    int32_t overlap_tokens; /* overlap between consecutive chunks of one span; default 40 */
    int32_t ocr;            /* 1 = OCR pages without a text layer (default), 0 = skip */
    int32_t render_dpi;     /* for figure detection, OCR and crops; default 144 */
    int32_t strip_furniture; /* 1 = drop running headers/footers and page numbers (default) */
    const char *tessdata;   /* NULL = Tesseract's default */
} ingest_options;

typedef struct ingest_doc ingest_doc;

void ingest_options_default(ingest_options *o);

/* Open PATH (any form: it is canonicalized). On error *out is NULL and err holds
 * "PATH: reason". */
int ingest_doc_open(const char *path, const ingest_options *o, ingest_doc **out,
                    char *err, size_t errlen);
/* Open a PDF held in memory; `name` is used in messages. The buffer must outlive the doc. */
int ingest_doc_open_mem(const void *data, size_t len, const char *name,
                        const ingest_options *o, ingest_doc **out, char *err, size_t errlen);
void ingest_doc_free(ingest_doc *d);

int32_t ingest_doc_page_count(const ingest_doc *d);
const char *ingest_doc_title(const ingest_doc *d);   /* metadata title or file stem */
const char *ingest_doc_path(const ingest_doc *d);    /* canonical path ("" for memory) */
const char *ingest_doc_sha256(const ingest_doc *d);  /* hex of the file bytes */
int64_t ingest_doc_bytes(const ingest_doc *d);

/* Parse page `number` (1-based) into *out (caller frees with ingest_page_free). */
int ingest_doc_page(ingest_doc *d, int32_t number, ingest_page **out, char *err, size_t errlen);
void ingest_page_free(ingest_page *p);

/* Compose the embedding key "<doc>_<chunk>_<img>" (img = -1 → "none"). Returns bytes written. */
int ingest_embedding_key(char *buf, size_t len, int64_t doc_id, int64_t chunk_id, int64_t image_id);

/* Compute the sha256 hex (65 bytes with NUL) of a file. */
int ingest_file_sha256(const char *path, char hex[65], char *err, size_t errlen);
/* The same for bytes in memory. Returns 0 or INGEST_ERR_NOMEM. */
int ingest_mem_sha256(const void *data, size_t len, char hex[65]);

const char *ingest_chunk_kind_name(int32_t kind);
#endif
