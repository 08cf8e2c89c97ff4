/* BERT uncased WordPiece tokenizer (the text encoder's front end).
 *
 * Pipeline, as BERT's Python BertTokenizer does it:
 *  1. clean: drop U+0000, U+FFFD and control/format/unassigned/private code points (C*,
 *     except \t \n \r); whitespace (Zs, \t \n \r, U+2028/9) separates words;
 *  2. every CJK ideograph is a word of its own;
 *  3. per whitespace word: lowercase (with Greek final sigma), NFD, drop Mn marks;
 *  4. split on punctuation (ASCII punctuation and symbols, Unicode P*);
 *  5. greedy longest-match-first WordPiece, "##" on continuation pieces; a word longer
 *     than 100 code points, or one with an unmatched remainder, becomes [UNK].
 * Steps 1, 3 and 4 use vision/wordpiece_tables.h (generated from Python's unicodedata, all
 * planes). Known limits: NFD's canonical reordering of stacked marks is not done (only
 * matters when two marks of which one is kept change order: rare Mc marks); Hangul
 * syllables decompose algorithmically into jamo, as NFD does.
 * Deliberate choice: the order is Python BertTokenizer's (lowercase, then strip accents).
 * Hugging Face's Rust BertNormalizer strips accents first; the two differ only where a
 * lowercase form carries a combining mark (U+0130 'İ' -> "i" here, "i̇" there).
 * Checked against the Python reference on 20,000 random mixed-script strings: identical. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vision/textenc_internal.h"
#include "vision/vision_internal.h"
#include "vision/wordpiece_tables.h"

#define WP_MAX_WORD 100

typedef struct { uint32_t off, len; int32_t id; } wp_slot; /* id -1: empty */

struct vision_wp {
    char *blob;        /* the vocab file, lines NUL-terminated in place */
    uint32_t *off;     /* per id: offset in blob */
    uint32_t *len;
    int32_t n;
    wp_slot *tab;      /* open addressing, power-of-two size */
    uint32_t mask;
    int32_t cls, sep, unk;
};

/* ---- vocabulary ---------------------------------------------------------------- */

static uint32_t fnv_step(uint32_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static uint32_t piece_hash(const char *s, size_t len, int cont) {
    uint32_t h = 2166136261u;
    if (cont) h = fnv_step(h, "##", 2);
    return fnv_step(h, s, len);
}

int32_t vision_wp_find(const vision_wp *v, const char *s, size_t len, int cont) {
    uint32_t i = piece_hash(s, len, cont) & v->mask;
    size_t full = len + (cont ? 2 : 0);
    for (;; i = (i + 1) & v->mask) {
        const wp_slot *e = &v->tab[i];
        if (e->id < 0) return -1;
        if (e->len != full) continue;
        const char *p = v->blob + e->off;
        if (cont && (p[0] != '#' || p[1] != '#')) continue;
        if (memcmp(p + (cont ? 2 : 0), s, len) == 0) return e->id;
    }
}

int vision_wp_load(const char *path, vision_wp **out, char *err, size_t errlen) {
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        vision_set_err(err, errlen, "textenc: %s: %s", path, strerror(errno));
        return -1;
    }
    vision_wp *v = calloc(1, sizeof *v);
    long size = -1;
    if (v && fseek(fp, 0, SEEK_END) == 0) size = ftell(fp);
    if (size < 0 || size > (1L << 30) || fseek(fp, 0, SEEK_SET) != 0) {
        fclose(fp);
        free(v);
        vision_set_err(err, errlen, "textenc: %s: cannot read (or larger than 1 GiB)", path);
        return -1;
    }
    v->blob = malloc((size_t)size + 1);
    if (!v->blob || fread(v->blob, 1, (size_t)size, fp) != (size_t)size) {
        fclose(fp);
        vision_wp_free(v);
        vision_set_err(err, errlen, "textenc: %s: read failed", path);
        return -1;
    }
    fclose(fp);
    v->blob[size] = '\n';
    int32_t lines = 0;
    for (long i = 0; i < size; i++) lines += v->blob[i] == '\n';
    if (size > 0 && v->blob[size - 1] != '\n') lines++; /* last line without newline */
    uint32_t cap = 16;
    while (cap < (uint32_t)lines * 2u) cap <<= 1;
    v->off = malloc(((size_t)lines + 1) * sizeof *v->off);
    v->len = malloc(((size_t)lines + 1) * sizeof *v->len);
    v->tab = malloc(cap * sizeof *v->tab);
    if (!v->off || !v->len || !v->tab) {
        vision_wp_free(v);
        vision_set_err(err, errlen, "textenc: %s: out of memory", path);
        return -1;
    }
    v->mask = cap - 1;
    for (uint32_t i = 0; i < cap; i++) v->tab[i].id = -1;
    long start = 0;
    for (int32_t id = 0; id < lines; id++) {
        long e = start;
        while (v->blob[e] != '\n') e++;
        long l = e - start;
        if (l > 0 && v->blob[start + l - 1] == '\r') l--; /* CRLF reads as LF in Python */
        v->blob[start + l] = 0;
        v->off[id] = (uint32_t)start;
        v->len[id] = (uint32_t)l;
        /* a duplicate line takes the later id, as a Python dict built line by line does */
        uint32_t h = piece_hash(v->blob + start, (size_t)l, 0) & v->mask;
        for (;; h = (h + 1) & v->mask) {
            wp_slot *s = &v->tab[h];
            if (s->id < 0) {
                *s = (wp_slot){(uint32_t)start, (uint32_t)l, id};
                break;
            }
            if (s->len == (uint32_t)l && memcmp(v->blob + s->off, v->blob + start, (size_t)l) == 0) {
                s->id = id;
                break;
            }
        }
        start = e + 1;
    }
    v->n = lines;
    v->cls = vision_wp_find(v, "[CLS]", 5, 0);
    v->sep = vision_wp_find(v, "[SEP]", 5, 0);
    v->unk = vision_wp_find(v, "[UNK]", 5, 0);
    if (v->cls < 0 || v->sep < 0 || v->unk < 0) {
        vision_wp_free(v);
        vision_set_err(err, errlen, "textenc: %s: vocabulary lacks [CLS], [SEP] or [UNK]", path);
        return -1;
    }
    *out = v;
    return 0;
}

void vision_wp_free(vision_wp *v) {
    if (!v) return;
    free(v->blob);
    free(v->off);
    free(v->len);
    free(v->tab);
    free(v);
}

int32_t vision_wp_size(const vision_wp *v) { return v ? v->n : 0; }

/* ---- Unicode ------------------------------------------------------------------- */

static int cp_flags(uint32_t cp) {
    size_t lo = 0, hi = sizeof wp_ranges / sizeof wp_ranges[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < wp_ranges[mid].lo) hi = mid;
        else if (cp > wp_ranges[mid].hi) lo = mid + 1;
        else return wp_ranges[mid].flags;
    }
    return 0;
}

/* The fold entry of cp (lowercase + NFD minus marks), or NULL when cp folds to itself. */
static const uint32_t *cp_fold(uint32_t cp) {
    size_t lo = 0, hi = sizeof wp_fold / sizeof wp_fold[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < wp_fold[mid].cp) hi = mid;
        else if (cp > wp_fold[mid].cp) lo = mid + 1;
        else return wp_fold[mid].to;
    }
    return NULL;
}

static int is_cjk(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* ---- tokenizer ------------------------------------------------------------------ */

typedef struct {
    const vision_wp *v;
    int32_t *ids;
    int32_t n, cap;      /* pieces written (after [CLS]) and the room for them */
    uint32_t *word;      /* current whitespace word (original code points) */
    uint32_t *fold;      /* the word folded: up to 3 code points per original */
    size_t word_n, word_cap;
} wp_state;

static int grow(wp_state *st) {
    size_t cap = st->word_cap ? st->word_cap * 2 : 256;
    uint32_t *w = realloc(st->word, cap * sizeof *w);
    if (!w) return -1;
    st->word = w;
    uint32_t *f = realloc(st->fold, 3 * cap * sizeof *f);
    if (!f) return -1;
    st->fold = f;
    st->word_cap = cap;
    return 0;
}

/* Python's Final_Sigma: cased before (skipping case-ignorables), no cased after. */
static int final_sigma(const uint32_t *w, size_t n, size_t i) {
    size_t j = i;
    int before = 0;
    while (j > 0) {
        int f = cp_flags(w[--j]);
        if (f & WP_CASE_IGN) continue;
        before = (f & WP_CASED) != 0;
        break;
    }
    if (!before) return 0;
    for (j = i + 1; j < n; j++) {
        int f = cp_flags(w[j]);
        if (f & WP_CASE_IGN) continue;
        return (f & WP_CASED) == 0;
    }
    return 1;
}

static size_t fold_word(const uint32_t *w, size_t n, uint32_t *out) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = w[i];
        if (cp == 0x03A3) {
            out[k++] = final_sigma(w, n, i) ? 0x03C2 : 0x03C3;
        } else if (cp >= 0xAC00 && cp <= 0xD7A3) { /* Hangul syllable -> L V (T) jamo */
            uint32_t s = cp - 0xAC00;
            out[k++] = 0x1100 + s / 588;
            out[k++] = 0x1161 + (s % 588) / 28;
            if (s % 28) out[k++] = 0x11A7 + s % 28;
        } else if (cp_flags(cp) & WP_MARK) {
            /* a combining mark: stripped */
        } else {
            const uint32_t *f = cp_fold(cp);
            if (!f) out[k++] = cp;
            else for (int t = 0; t < 3 && f[t]; t++) out[k++] = f[t];
        }
    }
    return k;
}

static void emit(wp_state *st, int32_t id) {
    if (st->n < st->cap) st->ids[1 + st->n] = id;
    st->n++;
}

/* WordPiece on one punctuation-free piece of n code points. */
static void wordpiece(wp_state *st, const uint32_t *cp, size_t n) {
    if (n > WP_MAX_WORD) {
        emit(st, st->v->unk);
        return;
    }
    char buf[WP_MAX_WORD * 4];
    size_t off[WP_MAX_WORD + 1];
    off[0] = 0;
    for (size_t i = 0; i < n; i++) off[i + 1] = off[i] + (size_t)vision_utf8_put(cp[i], buf + off[i]);
    int32_t found[WP_MAX_WORD];
    int nf = 0;
    size_t start = 0;
    while (start < n) {
        size_t end = n;
        int32_t id = -1;
        for (; end > start; end--) {
            id = vision_wp_find(st->v, buf + off[start], off[end] - off[start], start > 0);
            if (id >= 0) break;
        }
        if (id < 0) {
            emit(st, st->v->unk);
            return;
        }
        found[nf++] = id;
        start = end;
    }
    for (int i = 0; i < nf; i++) emit(st, found[i]);
}

/* Fold the current whitespace word, split it on punctuation, WordPiece the parts. */
static void finish_word(wp_state *st) {
    if (st->word_n == 0) return;
    size_t k = fold_word(st->word, st->word_n, st->fold);
    size_t s = 0;
    for (size_t i = 0; i <= k && st->n < st->cap; i++) {
        if (i < k && !(cp_flags(st->fold[i]) & WP_PUNCT)) continue;
        if (i > s) wordpiece(st, st->fold + s, i - s);
        if (i < k && st->n < st->cap) wordpiece(st, st->fold + i, 1);
        s = i + 1;
    }
    st->word_n = 0;
}

int32_t vision_wp_tokenize(const vision_wp *v, const char *text, int32_t *ids,
                           int32_t max_total) {
    if (max_total < 2) return 0;
    wp_state st = {v, ids, 0, max_total - 2, NULL, NULL, 0, 0};
    ids[0] = v->cls;
    const uint8_t *s = (const uint8_t *)(text ? text : "");
    size_t n = strlen((const char *)s), i = 0;
    int oom = 0;
    while (i < n && st.n < st.cap && !oom) {
        uint32_t cp;   /* invalid or truncated UTF-8 reads as U+FFFD (one byte) */
        i += (size_t)vision_utf8_get(s + i, n - i, &cp);
        int f = cp_flags(cp);
        if (f & WP_DROP) continue;
        if (f & WP_SPACE) {
            finish_word(&st);
            continue;
        }
        if (is_cjk(cp)) {
            finish_word(&st);
            if (st.n >= st.cap) break;
        }
        if (st.word_n == st.word_cap && grow(&st) != 0) {
            oom = 1; /* out of memory: keep the pieces found so far */
            break;
        }
        st.word[st.word_n++] = cp;
        if (is_cjk(cp)) finish_word(&st);
    }
    if (!oom) finish_word(&st);
    free(st.word);
    free(st.fold);
    int32_t m = st.n < st.cap ? st.n : st.cap;
    ids[1 + m] = v->sep;
    return m + 2;
}
