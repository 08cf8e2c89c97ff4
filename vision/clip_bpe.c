/* CLIP's byte-level BPE tokenizer (49,408 tokens, context 77).
 *
 * Pipeline as in OpenAI's simple_tokenizer.py, minus ftfy: HTML entities unescaped twice
 * (amp lt gt quot apos nbsp copy reg, &#N; and &#xH; only), whitespace runs collapsed to
 * one space and trimmed, lower-cased, split by CLIP's pattern
 *   <|startoftext|>|<|endoftext|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+
 * then each piece's UTF-8 bytes go through BPE with the first 48,894 merges.
 *
 * Unicode approximations (no ICU here): \p{L}, \p{N}, \s and lower-casing come from the
 * hand-written ranges below. They are exact for ASCII and Latin-1 and cover Latin
 * Extended A/B/Additional, IPA, Greek, Cyrillic, Armenian, Hebrew, Arabic letters, kana,
 * CJK ideographs, Hangul and fullwidth forms; other scripts' letters (e.g. Indic vowel
 * signs, which are marks) may split differently from the reference. Lower-casing covers
 * Latin-1, Latin Extended-A, Greek, Cyrillic, Armenian, Latin Extended Additional and
 * fullwidth Latin. Single words longer than MAX_WORD bytes are cut into MAX_WORD pieces
 * so that BPE time stays bounded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "vision/clip.h"
#include "vision/vision_internal.h"

#define N_MERGES 48894
#define N_VOCAB 49408
#define MAX_WORD 2048

typedef struct {
    uint64_t *keys; /* 0 = empty; stored as key + 1 */
    int32_t *vals;
    size_t cap;
} u64map;

struct clip_bpe {
    char **tokens;       /* id -> token string (byte-mapped UTF-8), N_VOCAB entries */
    char *arena;         /* storage of all token strings */
    u64map ranks;        /* (left id, right id) -> merge rank */
    int32_t *merged;     /* rank -> id of the merged token */
    int32_t byte_id[256];
};

/* ---- hash maps -------------------------------------------------------------- */
static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static int u64map_init(u64map *m, size_t n) {
    m->cap = 1;
    while (m->cap < n * 2) m->cap <<= 1;
    m->keys = calloc(m->cap, sizeof *m->keys);
    m->vals = calloc(m->cap, sizeof *m->vals);
    return m->keys && m->vals ? 0 : -1;
}

static void u64map_put(u64map *m, uint64_t key, int32_t v) {
    size_t i = mix64(key) & (m->cap - 1);
    while (m->keys[i] && m->keys[i] != key + 1) i = (i + 1) & (m->cap - 1);
    m->keys[i] = key + 1;
    m->vals[i] = v;
}

static int32_t u64map_get(const u64map *m, uint64_t key) {
    size_t i = mix64(key) & (m->cap - 1);
    while (m->keys[i]) {
        if (m->keys[i] == key + 1) return m->vals[i];
        i = (i + 1) & (m->cap - 1);
    }
    return -1;
}

/* String -> id, used while loading only. Later insertions of the same string win, like
 * the reference's dict(zip(vocab, range(len(vocab)))). */
typedef struct { const char **keys; int32_t *vals; size_t cap; } strmap;

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    return h;
}

static void strmap_put(strmap *m, const char *k, int32_t v) {
    size_t i = hash_str(k) & (m->cap - 1);
    while (m->keys[i] && strcmp(m->keys[i], k)) i = (i + 1) & (m->cap - 1);
    m->keys[i] = k;
    m->vals[i] = v;
}

static int32_t strmap_get(const strmap *m, const char *k) {
    size_t i = hash_str(k) & (m->cap - 1);
    while (m->keys[i]) {
        if (!strcmp(m->keys[i], k)) return m->vals[i];
        i = (i + 1) & (m->cap - 1);
    }
    return -1;
}

/* ---- Unicode classes (approximate, see the file comment) ----------------------- */
typedef struct { uint32_t lo, hi; } range;

static const range letter_ranges[] = {
    {'A', 'Z'}, {'a', 'z'}, {0xAA, 0xAA}, {0xB5, 0xB5}, {0xBA, 0xBA}, {0xC0, 0xD6},
    {0xD8, 0xF6}, {0xF8, 0x2C1}, {0x2C6, 0x2D1}, {0x2E0, 0x2E4}, {0x2EC, 0x2EC},
    {0x2EE, 0x2EE}, {0x370, 0x374}, {0x376, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386},
    {0x388, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556}, {0x560, 0x588},
    {0x5D0, 0x5EA}, {0x620, 0x64A}, {0x671, 0x6D3}, {0x1E00, 0x1FBC}, {0x1FC2, 0x1FCC},
    {0x1FD0, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FFC}, {0x2071, 0x2071}, {0x207F, 0x207F},
    {0x3041, 0x3096}, {0x309D, 0x309F}, {0x30A1, 0x30FA}, {0x30FC, 0x30FF}, {0x3400, 0x4DBF},
    {0x4E00, 0x9FFF}, {0xAC00, 0xD7A3}, {0xF900, 0xFAFF}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A},
    {0xFF66, 0xFFDC}, {0x20000, 0x2FFFF},
};
static const range number_ranges[] = {
    {'0', '9'}, {0xB2, 0xB3}, {0xB9, 0xB9}, {0xBC, 0xBE}, {0x660, 0x669}, {0x6F0, 0x6F9},
    {0x966, 0x96F}, {0x2070, 0x2070}, {0x2074, 0x2079}, {0x2080, 0x2089}, {0x2150, 0x2189},
    {0x2460, 0x249B}, {0x3007, 0x3007}, {0x3021, 0x3029}, {0xFF10, 0xFF19},
};

static int in_ranges(uint32_t cp, const range *r, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (cp >= r[i].lo && cp <= r[i].hi) return 1;
    return 0;
}
static int is_letter(uint32_t cp) {
    return in_ranges(cp, letter_ranges, sizeof letter_ranges / sizeof *letter_ranges);
}
static int is_number(uint32_t cp) {
    return in_ranges(cp, number_ranges, sizeof number_ranges / sizeof *number_ranges);
}
static int is_space(uint32_t cp) { /* Python's str.isspace() */
    return (cp >= 9 && cp <= 13) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

static uint32_t to_lower(uint32_t cp) {
    if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 32;
    if ((cp >= 0x100 && cp <= 0x12F) || (cp >= 0x132 && cp <= 0x137) ||
        (cp >= 0x14A && cp <= 0x177))
        return cp | 1;
    if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) return cp & 1 ? cp + 1 : cp;
    if (cp == 0x178) return 0xFF;
    if (cp >= 0x391 && cp <= 0x3AB && cp != 0x3A2) return cp + 32;
    if (cp == 0x386) return 0x3AC;
    if (cp >= 0x388 && cp <= 0x38A) return cp + 37;
    if (cp == 0x38C) return 0x3CC;
    if (cp == 0x38E || cp == 0x38F) return cp + 63;
    if (cp >= 0x410 && cp <= 0x42F) return cp + 32;
    if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
    if ((cp >= 0x460 && cp <= 0x481) || (cp >= 0x48A && cp <= 0x4BF) ||
        (cp >= 0x4D0 && cp <= 0x52F))
        return cp | 1;
    if (cp >= 0x531 && cp <= 0x556) return cp + 48;
    if ((cp >= 0x1E00 && cp <= 0x1E95) || (cp >= 0x1EA0 && cp <= 0x1EFF)) return cp | 1;
    if (cp >= 0xFF21 && cp <= 0xFF3A) return cp + 32;
    return cp;
}

/* ---- text cleaning ----------------------------------------------------------- */
typedef struct { const char *name; uint32_t cp; int legacy; } entity;
static const entity entities[] = {  /* legacy: also accepted without ';' (as in html5) */
    {"amp", '&', 1}, {"lt", '<', 1}, {"gt", '>', 1}, {"quot", '"', 1}, {"nbsp", 0xA0, 1},
    {"copy", 0xA9, 1}, {"reg", 0xAE, 1}, {"apos", '\'', 0},
};

/* One pass of html.unescape for the supported references. out has room for strlen(in)+1
 * (an entity never expands). */
static void html_unescape(const char *in, char *out) {
    char *o = out;
    while (*in) {
        if (*in != '&') { *o++ = *in++; continue; }
        const char *p = in + 1;
        uint32_t cp = 0;
        int ok = 0;
        if (*p == '#') {
            p++;
            int hex = (*p == 'x' || *p == 'X');
            if (hex) p++;
            const char *d0 = p;
            uint64_t v = 0;
            while ((hex ? (*p >= '0' && *p <= '9') || ((*p | 32) >= 'a' && (*p | 32) <= 'f')
                        : (*p >= '0' && *p <= '9')) && p - d0 < 8) {
                int dv = *p <= '9' ? *p - '0' : (*p | 32) - 'a' + 10;
                v = v * (hex ? 16 : 10) + (uint64_t)dv;
                p++;
            }
            if (p > d0) {
                if (*p == ';') p++;
                ok = 1;
                cp = (v == 0 || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) ? 0xFFFD : (uint32_t)v;
            }
        } else {
            for (size_t i = 0; i < sizeof entities / sizeof *entities && !ok; i++) {
                size_t n = strlen(entities[i].name);
                if (strncmp(p, entities[i].name, n)) continue;
                if (p[n] == ';') { p += n + 1; ok = 1; }
                else if (entities[i].legacy) { p += n; ok = 1; }
                if (ok) cp = entities[i].cp;
            }
        }
        if (!ok) { *o++ = *in++; continue; }
        char buf[4];
        int n = vision_utf8_put(cp, buf);
        if (n > p - in) { *o++ = *in++; continue; } /* cannot happen: refs are >= 4 bytes */
        memcpy(o, buf, (size_t)n);
        o += n;
        in = p;
    }
    *o = 0;
}

/* Collapse whitespace runs to one space, trim, lower-case. Returns a malloc'd string. */
static char *clean_text(const char *text) {
    size_t n = strlen(text);
    char *a = malloc(n + 1), *b = malloc(2 * n + 2); /* lower-casing may grow (İ -> i̇) */
    if (!a || !b) { free(a); free(b); return NULL; }
    html_unescape(text, a);
    html_unescape(a, b);
    strcpy(a, b);
    char *o = b;
    int pending_space = 0;
    const unsigned char *s = (const unsigned char *)a;
    size_t left = strlen(a);
    while (left) {
        uint32_t cp;
        int len = vision_utf8_get(s, left, &cp);
        s += len;
        left -= (size_t)len;
        if (is_space(cp)) { pending_space = o != b; continue; }
        if (pending_space) { *o++ = ' '; pending_space = 0; }
        if (cp == 0x130) { o += vision_utf8_put('i', o); o += vision_utf8_put(0x307, o); continue; }
        o += vision_utf8_put(to_lower(cp), o);
    }
    *o = 0;
    free(a);
    return b;
}

/* ---- loading ----------------------------------------------------------------- */
/* GPT-2 / CLIP byte -> printable code point table: printable Latin-1 bytes map to
 * themselves, the rest to 256, 257, … in byte order. order[i] = byte with vocab id i. */
static void byte_table(uint32_t cp_of[256], int order[256]) {
    int n = 0, k = 0, is_print[256] = {0};
    for (int b = 0; b < 256; b++)
        is_print[b] = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    for (int b = 0; b < 256; b++)
        if (is_print[b]) { cp_of[b] = (uint32_t)b; order[n++] = b; }
    for (int b = 0; b < 256; b++)
        if (!is_print[b]) { cp_of[b] = 256u + (uint32_t)k++; order[n++] = b; }
}

void clip_bpe_free(clip_bpe *t) {
    if (!t) return;
    free(t->tokens);
    free(t->arena);
    free(t->ranks.keys);
    free(t->ranks.vals);
    free(t->merged);
    free(t);
}

/* Read the first N_MERGES merge lines ("a b") after the one-line header. */
static int read_merges(const char *path, char **lines_out, size_t *bytes, char *err, size_t errlen) {
    gzFile gz = gzopen(path, "rb");
    if (!gz) {
        vision_set_err(err, errlen, "clip: cannot open BPE merges %s", path);
        return VISION_IO;
    }
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap), line[1024];
    int n = 0, rc = VISION_OK, first = 1;
    while (buf && n < N_MERGES && gzgets(gz, line, sizeof line)) {
        size_t l = strcspn(line, "\r\n");
        line[l] = 0;
        if (first) { first = 0; continue; } /* header ("#version: 0.2"), skipped like the reference */
        char *sp = strchr(line, ' ');
        if (!sp || sp == line || !sp[1] || strchr(sp + 1, ' ')) {
            vision_set_err(err, errlen, "clip: BPE merges line %d is not \"a b\"", n + 2);
            rc = VISION_FORMAT;
            break;
        }
        if (len + l + 1 > cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
        }
        memcpy(buf + len, line, l + 1);
        len += l + 1;
        n++;
    }
    int gzerr = 0;
    const char *gzmsg = gzerror(gz, &gzerr);
    if (!rc && gzerr < 0) {
        vision_set_err(err, errlen, "clip: BPE merges %s: %s", path, gzmsg);
        rc = VISION_FORMAT;
    }
    gzclose(gz);
    if (!buf) {
        vision_set_err(err, errlen, "clip: out of memory reading BPE merges");
        return VISION_NOMEM;
    }
    if (!rc && n < N_MERGES) {
        vision_set_err(err, errlen, "clip: BPE merges %s has %d merges, need %d", path, n, N_MERGES);
        rc = VISION_FORMAT;
    }
    if (rc) { free(buf); return rc; }
    *lines_out = buf;
    *bytes = len;
    return VISION_OK;
}

int clip_bpe_create(const char *merges_gz_path, clip_bpe **out, char *err, size_t errlen) {
    if (!out || !merges_gz_path) return VISION_MISUSE;
    *out = NULL;
    char *lines = NULL;
    size_t lines_len = 0;
    int rc = read_merges(merges_gz_path, &lines, &lines_len, err, errlen);
    if (rc) return rc;

    clip_bpe *t = calloc(1, sizeof *t);
    strmap sm = {0};
    sm.cap = 1 << 17;
    /* arena: 512 byte tokens (<= 2 + 4 bytes each), merges (line bytes), specials */
    size_t arena_cap = 512 * 8 + lines_len + 64;
    if (t) {
        t->tokens = calloc(N_VOCAB, sizeof *t->tokens);
        t->arena = malloc(arena_cap);
        t->merged = malloc(N_MERGES * sizeof *t->merged);
    }
    sm.keys = calloc(sm.cap, sizeof *sm.keys);
    sm.vals = calloc(sm.cap, sizeof *sm.vals);
    if (!t || !t->tokens || !t->arena || !t->merged || !sm.keys || !sm.vals ||
        u64map_init(&t->ranks, N_MERGES)) {
        vision_set_err(err, errlen, "clip: out of memory loading BPE");
        rc = VISION_NOMEM;
        goto done;
    }
    uint32_t cp_of[256];
    int order[256];
    byte_table(cp_of, order);
    char *a = t->arena;
    for (int i = 0; i < 512; i++) {
        int b = order[i % 256];
        t->tokens[i] = a;
        a += vision_utf8_put(cp_of[b], a);
        if (i >= 256) { memcpy(a, "</w>", 4); a += 4; }
        *a++ = 0;
        if (i < 256) t->byte_id[b] = i;
    }
    const char *ln = lines;
    for (int r = 0; r < N_MERGES; r++, ln += strlen(ln) + 1) {
        const char *sp = strchr(ln, ' ');
        t->tokens[512 + r] = a;
        memcpy(a, ln, (size_t)(sp - ln));
        a += sp - ln;
        strcpy(a, sp + 1);
        a += strlen(sp + 1) + 1;
    }
    strcpy(a, "<|startoftext|>");
    t->tokens[CLIP_SOT] = a;
    a += strlen(a) + 1;
    strcpy(a, "<|endoftext|>");
    t->tokens[CLIP_EOT] = a;
    for (int i = 0; i < N_VOCAB; i++) strmap_put(&sm, t->tokens[i], i);
    /* Pair table keyed by the (canonical) ids of both halves; a merge whose halves are
     * not tokens could never fire in the reference either, but means a broken file. */
    ln = lines;
    char left[1024];
    for (int r = 0; r < N_MERGES; r++, ln += strlen(ln) + 1) {
        const char *sp = strchr(ln, ' ');
        memcpy(left, ln, (size_t)(sp - ln));
        left[sp - ln] = 0;
        int32_t ia = strmap_get(&sm, left), ib = strmap_get(&sm, sp + 1);
        if (ia < 0 || ib < 0) {
            vision_set_err(err, errlen, "clip: BPE merge %d (%s) uses an unknown token", r + 1, ln);
            rc = VISION_FORMAT;
            goto done;
        }
        u64map_put(&t->ranks, (uint64_t)ia << 32 | (uint32_t)ib, r);
        t->merged[r] = strmap_get(&sm, t->tokens[512 + r]);
    }
done:
    free(lines);
    free(sm.keys);
    free(sm.vals);
    if (rc) { clip_bpe_free(t); return rc; }
    *out = t;
    return VISION_OK;
}

/* ---- encoding ----------------------------------------------------------------- */
/* BPE on one piece (bytes); appends ids to out[*n] up to cap. */
static void bpe_word(const clip_bpe *t, const unsigned char *s, size_t len, int32_t *w,
                     int32_t *out, int32_t *n, int32_t cap) {
    int32_t m = (int32_t)len;
    for (int32_t i = 0; i < m; i++) w[i] = t->byte_id[s[i]] + (i == m - 1 ? 256 : 0);
    while (m > 1) {
        int32_t best = -1, ba = 0, bb = 0;
        for (int32_t i = 0; i + 1 < m; i++) {
            int32_t r = u64map_get(&t->ranks, (uint64_t)w[i] << 32 | (uint32_t)w[i + 1]);
            if (r >= 0 && (best < 0 || r < best)) { best = r; ba = w[i]; bb = w[i + 1]; }
        }
        if (best < 0) break;
        /* merge every non-overlapping occurrence, left to right, like the reference */
        int32_t k = 0;
        for (int32_t i = 0; i < m;) {
            if (i + 1 < m && w[i] == ba && w[i + 1] == bb) {
                w[k++] = t->merged[best];
                i += 2;
            } else {
                w[k++] = w[i++];
            }
        }
        m = k;
    }
    for (int32_t i = 0; i < m && *n < cap; i++) out[(*n)++] = w[i];
}

static int starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

int clip_bpe_encode(const clip_bpe *t, const char *text, int32_t *ids, int32_t max_len) {
    if (!t || !text || !ids || max_len < 2) return VISION_MISUSE;
    char *s = clean_text(text);
    int32_t *w = malloc(MAX_WORD * sizeof *w);
    if (!s || !w) { free(s); free(w); return VISION_NOMEM; }
    int32_t n = 0, cap = max_len - 1; /* room for the final <|endoftext|> */
    ids[n++] = CLIP_SOT;
    const char *p = s;
    size_t left = strlen(s);
    while (*p && n < cap) {
        uint32_t cp;
        int len = vision_utf8_get((const unsigned char *)p, left, &cp);
        size_t take = 0;
        int32_t special = -1;
        if (cp == ' ') { p++; left--; continue; }
        if (starts(p, "<|startoftext|>")) { special = CLIP_SOT; take = 15; }
        else if (starts(p, "<|endoftext|>")) { special = CLIP_EOT; take = 13; }
        else if (p[0] == '\'' && (starts(p + 1, "re") || starts(p + 1, "ve") || starts(p + 1, "ll"))) take = 3;
        else if (p[0] == '\'' && (p[1] == 's' || p[1] == 't' || p[1] == 'm' || p[1] == 'd')) take = 2;
        else if (is_number(cp)) take = (size_t)len;
        else {
            int letters = is_letter(cp);
            size_t q = 0;
            while (q < left) {
                uint32_t c2;
                int l2 = vision_utf8_get((const unsigned char *)p + q, left - q, &c2);
                if (c2 == ' ' || is_letter(c2) != letters || (!letters && is_number(c2))) break;
                q += (size_t)l2;
            }
            take = q;
        }
        if (special >= 0) {
            ids[n++] = special;
        } else {
            for (size_t off = 0; off < take && n < cap; off += MAX_WORD) {
                size_t l = take - off < MAX_WORD ? take - off : MAX_WORD;
                bpe_word(t, (const unsigned char *)p + off, l, w, ids, &n, cap);
            }
        }
        p += take;
        left -= take;
    }
    ids[n++] = CLIP_EOT;
    free(w);
    free(s);
    return n;
}

const char *clip_bpe_token(const clip_bpe *t, int32_t id) {
    return t && id >= 0 && id < N_VOCAB ? t->tokens[id] : NULL;
}

int32_t clip_bpe_vocab_size(const clip_bpe *t) { return t ? N_VOCAB : 0; }
