/* SentencePiece tokenizer from GGUF metadata (tokenizer.ggml.model = "llama": Gemma,
 * Llama 2, Mistral): spaces become "▁" (U+2581), the text starts as one symbol per UTF-8
 * character, and the adjacent pair whose concatenation is a vocabulary piece with the
 * highest score is merged (ties: leftmost) until no pair is; a symbol that is not a piece
 * is emitted as its <0xXX> byte tokens. The same algorithm as llama.cpp's llm_tokenizer_spm
 * and SentencePiece's BPE mode, with a binary heap of candidate pairs: O(n log n). */
#include "engine/engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPM_SPACE "\xE2\x96\x81" /* ▁ */

/* byte value of a "<0xXX>" piece, or -1 */
static int byte_piece(const char *t) {
    unsigned v;
    char end;
    if (strlen(t) != 6 || sscanf(t, "<0x%2X%c", &v, &end) != 2 || end != '>') return -1;
    return (int)v;
}

int engine_spm_load(engine_vocab *v, const mf_gguf *f, char *err, size_t errlen) {
    int32_t et;
    uint64_t n;
    const void *sc = NULL;
    v->scores = calloc((size_t)v->n_vocab, sizeof *v->scores);
    size_t total = 0;
    for (int32_t i = 0; i < v->n_vocab; i++) total += strlen(v->text[i]);
    v->bytes = malloc(total + 1);
    if (!v->scores || !v->bytes) {
        snprintf(err, errlen, "engine: out of memory loading the vocabulary");
        return -1;
    }
    if (mf_gguf_get_arr(f, "tokenizer.ggml.scores", &et, &n, &sc) == 0 && et == MF_GGUF_F32 &&
        n == (uint64_t)v->n_vocab)
        memcpy(v->scores, sc, (size_t)n * sizeof *v->scores);
    for (int b = 0; b < 256; b++) v->byte_tok[b] = -1;
    int64_t pos = 0;
    for (int32_t i = 0; i < v->n_vocab; i++) {
        const char *t = v->text[i];
        v->bytes_off[i] = pos;
        int b = v->type[i] == 6 ? byte_piece(t) : -1;
        if (b >= 0) {
            v->bytes[pos++] = (char)b;
            if (v->byte_tok[b] < 0) v->byte_tok[b] = i;
            continue;
        }
        for (size_t k = 0; t[k];) { /* ▁ reads back as a space */
            if (v->type[i] != 3 && strncmp(t + k, SPM_SPACE, 3) == 0) {
                v->bytes[pos++] = ' ';
                k += 3;
            } else {
                v->bytes[pos++] = t[k++];
            }
        }
    }
    v->bytes_off[v->n_vocab] = pos;
    const char *arch = "";
    mf_gguf_get_str(f, "general.architecture", &arch, NULL);
    v->add_space_prefix = strncmp(arch, "gemma", 5) != 0; /* Gemma's files say false */
    uint32_t flag;
    if (mf_gguf_get_u32(f, "tokenizer.ggml.add_space_prefix", &flag) == 0) v->add_space_prefix = flag != 0;
    return 0;
}

/* ---- encoding ------------------------------------------------------------------ */
typedef struct { int32_t prev, next, off, len; } spm_sym;
typedef struct { int32_t left, right, len; float score; } spm_pair;

typedef struct {
    const engine_vocab *v;
    const char *text;
    spm_sym *sym;
    spm_pair *heap;
    int32_t n_heap;
} spm_state;

/* heap order: higher score first, then the leftmost pair */
static int pair_before(const spm_pair *a, const spm_pair *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(spm_state *st, spm_pair p) {
    int32_t i = st->n_heap++;
    st->heap[i] = p;
    while (i > 0 && pair_before(&st->heap[i], &st->heap[(i - 1) / 2])) {
        spm_pair t = st->heap[i];
        st->heap[i] = st->heap[(i - 1) / 2];
        st->heap[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static spm_pair heap_pop(spm_state *st) {
    spm_pair top = st->heap[0];
    st->heap[0] = st->heap[--st->n_heap];
    for (int32_t i = 0;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < st->n_heap && pair_before(&st->heap[l], &st->heap[m])) m = l;
        if (r < st->n_heap && pair_before(&st->heap[r], &st->heap[m])) m = r;
        if (m == i) break;
        spm_pair t = st->heap[i];
        st->heap[i] = st->heap[m];
        st->heap[m] = t;
        i = m;
    }
    return top;
}

/* queue the pair (left, right) when their concatenation is a piece */
static void try_pair(spm_state *st, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    int32_t len = st->sym[left].len + st->sym[right].len;
    int32_t id = engine_vocab_find(st->v, st->text + st->sym[left].off, (size_t)len);
    if (id < 0 || st->v->type[id] == 3) return;
    heap_push(st, (spm_pair){left, right, len, st->v->scores[id]});
}

static void emit(int32_t *ids, int32_t *n, int32_t max, int32_t id) {
    if (*n < max && ids) ids[*n] = id;
    (*n)++;
}

/* Whitespace escaped text (with the optional leading ▁) in a malloc'd buffer */
static char *escape(const unsigned char *s, size_t len, int prefix, size_t *out_len) {
    size_t n = 0;
    char *t = malloc(3 * (len + 1) + 1);
    if (!t) return NULL;
    if (prefix) { memcpy(t, SPM_SPACE, 3); n = 3; }
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ') { memcpy(t + n, SPM_SPACE, 3); n += 3; }
        else t[n++] = (char)s[i];
    }
    *out_len = n;
    return t;
}

int engine_spm_encode(const engine_vocab *v, const unsigned char *s, size_t len, int at_start,
                      int32_t *ids, int32_t *n, int32_t max) {
    if (len == 0) return 0;
    size_t tl = 0;
    char *text = escape(s, len, at_start && v->add_space_prefix, &tl);
    spm_sym *sym = malloc(tl * sizeof *sym);
    spm_pair *heap = malloc(3 * tl * sizeof *heap);
    if (!text || !sym || !heap) { free(text); free(sym); free(heap); return -1; }
    int32_t ns = 0;
    for (size_t k = 0; k < tl; ns++) { /* one symbol per UTF-8 character */
        unsigned c = (unsigned char)text[k];
        size_t cl = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
        if (k + cl > tl) cl = tl - k;
        sym[ns] = (spm_sym){ns - 1, -1, (int32_t)k, (int32_t)cl};
        if (ns > 0) sym[ns - 1].next = ns;
        k += cl;
    }
    spm_state st = {v, text, sym, heap, 0};
    for (int32_t i = 1; i < ns; i++) try_pair(&st, i - 1, i);
    while (st.n_heap > 0) {
        spm_pair p = heap_pop(&st);
        spm_sym *l = &sym[p.left], *r = &sym[p.right];
        if (l->len == 0 || r->len == 0 || l->next != p.right || l->len + r->len != p.len) continue;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = p.left;
        try_pair(&st, l->prev, p.left);
        try_pair(&st, p.left, l->next);
    }
    for (int32_t i = 0; i >= 0 && ns > 0; i = sym[i].next) {
        int32_t id = engine_vocab_find(v, text + sym[i].off, (size_t)sym[i].len);
        if (id >= 0 && v->type[id] != 3) {
            emit(ids, n, max, id);
            continue;
        }
        for (int32_t k = 0; k < sym[i].len; k++) { /* byte fallback (unk if no byte token) */
            int32_t b = v->byte_tok[(unsigned char)text[sym[i].off + k]];
            emit(ids, n, max, b >= 0 ? b : 0);
        }
    }
    free(text);
    free(sym);
    free(heap);
    return 0;
}
