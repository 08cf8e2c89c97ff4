/* api/core/ground — sentences, exact tokens and the support check of grounded answers.
 *
 * Design notes:
 * 1. Everything is byte-level over UTF-8: bytes >= 0x80 count as letters, so words in
 *    other scripts stay whole and are compared exactly (no case folding outside ASCII).
 * 2. A "word" is a run of letters, digits and the joiners _ / . - : @ ~ $ + #, with joiners
 *    trimmed at its end; a leading / - ~ $ . stays (paths, options, variables).
 * 3. Exact tokens are matched as whole tokens: the evidence text must contain them with no
 *    letter or digit right before or after, ignoring ASCII case. */
#include "api/core/ground.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Function words and answer scaffolding: they carry no checkable content. Negations are
 * not here on purpose: "is not supported" must be backed like "is supported". */
static const char *const function_words[] = {
    "a", "an", "the", "and", "or", "but", "if", "of", "at", "by", "for", "with", "to", "from",
    "in", "on", "into", "onto", "is", "are", "was", "were", "be", "been", "being", "do", "does",
    "did", "done", "have", "has", "had", "i", "me", "my", "we", "our", "you", "your", "he",
    "she", "it", "its", "they", "them", "their", "what", "which", "who", "whom", "this",
    "that", "these", "those", "how", "when", "where", "why", "can", "could", "should",
    "would", "will", "shall", "may", "might", "must", "there", "here", "so", "as", "than",
    "then", "just", "also", "any", "some", "such", "about", "all", "each", "both", "more",
    "most", "other", "only", "own", "same", "very", "too", "via", "per", "use", "used",
    "using", "uses", "one", "way", "ways", "following", "follows", "example", "e.g", "i.e",
    "etc", "answer", "evidence", "document", "documents", "according", "based", "provided",
    "given", "mentioned", "states", "stated", "says", "said", "described", "see", "shown",
    "question", "specific", "specifically", "information", "allows", "allow", "let", "lets",
    "able", "need", "needs", "want", "like", "well", "however", "therefore", "thus", "yes",
    "into", "out", "up", "over", "under", "again", "further", "once", "while", "because",
    "after", "before", "between", "through", "during", "without", "within", "along",
    /* how questions are asked, not what they are about */
    "say", "tell", "explain", "describe", "mention", "know", "find", "get", "make", "put",
    "give", "show", "happen", "mean", "means", "please", "thing", "things", NULL};

static int is_function_word(const char *w, size_t n) {
    for (int i = 0; function_words[i]; i++)
        if (strlen(function_words[i]) == n && !strncasecmp(function_words[i], w, n)) return 1;
    return 0;
}

/* Length of a UTF-8 punctuation or space character at s (U+00A0-U+00BF, × ÷,
 * U+2000-U+206F: typographic quotes, dashes, bullets, ellipsis), else 0: manuals quote
 * ”/etc/hosts” with them, and they must not glue onto the word. */
static int utf8_punct(const unsigned char *s) {
    if (s[0] == 0xc2 && s[1] >= 0xa0 && s[1] <= 0xbf) return 2;
    if (s[0] == 0xc3 && (s[1] == 0x97 || s[1] == 0xb7)) return 2;
    if (s[0] == 0xe2 && (s[1] == 0x80 || s[1] == 0x81) && s[2] >= 0x80 && s[2] <= 0xbf) return 3;
    return 0;
}

static int is_letter(unsigned char c) { return isalnum(c) || c >= 0x80; }

/* Is there a letter (not UTF-8 punctuation) at s / just before s (s > start)? */
static int letter_at(const unsigned char *s) { return is_letter(*s) && !utf8_punct(s); }
static int letter_before(const unsigned char *start, const unsigned char *s) {
    const unsigned char *c = s - 1;
    while (c > start && (*c & 0xc0) == 0x80) c--;   /* to the first byte of that character */
    return letter_at(c);
}
static int is_joiner(unsigned char c) { return c && strchr("_/.-:@~$+#", c) != NULL; }

/* Next word at or after *p: sets *w and returns its length (0 at the end). */
static size_t next_word(const char **p, const char **w) {
    const unsigned char *s = (const unsigned char *)*p;
    for (;;) {
        while (*s && ((!is_letter(*s) && !is_joiner(*s)) || utf8_punct(s)))
            s += utf8_punct(s) ? utf8_punct(s) : 1;
        if (!*s) { *p = (const char *)s; return 0; }
        const unsigned char *b = s;
        while (*s && (is_letter(*s) || is_joiner(*s)) && !utf8_punct(s)) s++;
        const unsigned char *e = s;
        while (e > b && is_joiner(e[-1])) e--;
        while (b < e && is_joiner(*b) && !strchr("/-~$.", *b)) b++;
        int any = 0;
        for (const unsigned char *q = b; q < e; q++) any |= is_letter(*q);
        if (any) {
            *p = (const char *)s;
            *w = (const char *)b;
            return (size_t)(e - b);
        }
    }
}

/* Numbers, identifiers and names must occur verbatim in the evidence. */
static int is_exact(const char *w, size_t n, int first) {
    int upper_inside = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)w[i];
        if (isdigit(c)) return 1;
        if (i > 0 && i + 1 < n && is_joiner(c)) return 1;
        if (i > 0 && isupper(c)) upper_inside = 1;
    }
    if (n && strchr("/-~$", w[0]) && n > 1) return 1;
    if (upper_inside) return 1;
    return !first && isupper((unsigned char)w[0]) && !is_function_word(w, n);
}

/* Lowercase and light English stemming (plural -s/-es/-ies) into out (>= n+1 bytes). */
static size_t stem(const char *w, size_t n, int exact, char *out) {
    for (size_t i = 0; i < n; i++) out[i] = (char)tolower((unsigned char)w[i]);
    out[n] = 0;
    if (exact || n < 4) return n;
    if (n > 4 && !strcmp(out + n - 3, "ies")) { strcpy(out + n - 3, "y"); return n - 2; }
    if (n > 4 && (!strcmp(out + n - 4, "ches") || !strcmp(out + n - 4, "shes") ||
                  !strcmp(out + n - 3, "xes") || !strcmp(out + n - 3, "ses"))) {
        out[n - 2] = 0;
        return n - 2;
    }
    if (out[n - 1] == 's' && out[n - 2] != 's' && out[n - 2] != 'u' && out[n - 2] != 'i') {
        out[n - 1] = 0;
        return n - 1;
    }
    return n;
}

/* Is the NUL-separated list (n words) holding w? */
static int list_has(const char *list, int32_t n, const char *w) {
    for (int32_t i = 0; i < n; i++, list += strlen(list) + 1)
        if (!strcmp(list, w)) return 1;
    return 0;
}

static char *words_of(const char *text, int32_t *n, uint8_t **exact, int stemming);

char *ground_words(const char *text, int32_t *n, uint8_t **exact) {
    return words_of(text, n, exact, 1);
}

char *ground_words_raw(const char *text, int32_t *n, uint8_t **exact) {
    return words_of(text, n, exact, 0);
}

static char *words_of(const char *text, int32_t *n, uint8_t **exact, int stemming) {
    size_t tl = strlen(text ? text : "");
    char *buf = malloc(tl + 2), *o = buf;
    uint8_t *ex = exact ? malloc(tl / 2 + 2) : NULL;
    *n = 0;
    if (!buf || (exact && !ex)) { free(buf); free(ex); return NULL; }
    const char *p = text ? text : "", *w;
    size_t wl;
    int first = 1;
    char tmp[256];
    while ((wl = next_word(&p, &w)) > 0) {
        int fw = is_function_word(w, wl);
        int x = !fw && wl < sizeof tmp && is_exact(w, wl, first);
        first = 0;
        int digit = 0;
        for (size_t i = 0; i < wl; i++) digit |= isdigit((unsigned char)w[i]);
        if (wl >= sizeof tmp || fw || (!x && !digit && wl < 3)) continue;
        size_t sl = stem(w, wl, x || !stemming, tmp);
        if (list_has(buf, *n, tmp)) continue;
        memcpy(o, tmp, sl + 1);
        o += sl + 1;
        if (ex) ex[*n] = (uint8_t)x;
        (*n)++;
    }
    *o = 0;
    if (exact) *exact = ex;
    return buf;
}

void ground_words_in(const char *need, int32_t n, const char *text, uint8_t *seen) {
    int32_t m = 0;
    char *have = ground_words_raw(text, &m, NULL);
    if (!have) return;
    const char *w = need;
    for (int32_t i = 0; i < n; i++, w += strlen(w) + 1) seen[i] |= (uint8_t)list_has(have, m, w);
    free(have);
}

int ground_value_kinds(const char *word) {
    return (strpbrk(word, "0123456789") ? GROUND_VALUE_NUMBER : 0) |
           (strchr(word, '/') ? GROUND_VALUE_PATH : 0) |
           (strpbrk(word, "_-.:") ? GROUND_VALUE_IDENT : 0);
}

int ground_keeps_values(const char *evidence, const char *const *texts, int32_t n) {
    int32_t nw = 0;
    uint8_t *exact = NULL;
    char *words = ground_words_raw(evidence, &nw, &exact);
    uint8_t *seen = calloc((size_t)(nw > 0 ? nw : 1), 1);
    int rc = -1;
    if (words && exact && seen) {
        for (int32_t i = 0; i < n; i++) ground_words_in(words, nw, texts[i], seen);
        int any = 0, kept = 0;
        const char *w = words;
        for (int32_t i = 0; i < nw; i++, w += strlen(w) + 1)
            if (exact[i] && ground_value_kinds(w)) {   /* not names: "November" */
                any = 1;
                kept |= seen[i];
            }
        rc = !any || kept;
    }
    free(words);
    free(exact);
    free(seen);
    return rc;
}

/* Endings spelled two ways, each pair tried in both directions. */
static const char *const spelling_pairs[][2] = {
    {"isation", "ization"}, {"ise", "ize"}, {"ised", "ized"}, {"ises", "izes"},
    {"ising", "izing"}, {"iser", "izer"}, {"yse", "yze"}, {"ysed", "yzed"}, {"ysing", "yzing"},
    {"our", "or"}, {"ours", "ors"}, {"oured", "ored"}, {"ouring", "oring"}, {"tre", "ter"},
    {"tres", "ters"}, {"ence", "ense"}, {"ogue", "og"}, {"ogues", "ogs"}, {"elled", "eled"},
    {"elling", "eling"}, {"eller", "eler"}};

static int32_t push_variant(char (*out)[GROUND_VARIANT_LEN], int32_t n, int32_t max, const char *w,
                            size_t keep, const char *end) {
    if (n >= max || keep + strlen(end) >= GROUND_VARIANT_LEN) return n;
    snprintf(out[n], GROUND_VARIANT_LEN, "%.*s%s", (int)keep, w, end);
    return n + 1;
}

int32_t ground_spelling_variants(const char *word, char (*out)[GROUND_VARIANT_LEN], int32_t max) {
    size_t n = strlen(word);
    int32_t k = 0;
    for (size_t i = 0; i < sizeof spelling_pairs / sizeof *spelling_pairs; i++)
        for (int d = 0; d < 2; d++) {
            const char *from = spelling_pairs[i][d], *to = spelling_pairs[i][!d];
            size_t fl = strlen(from);
            if (n >= fl + 3 && !strcmp(word + n - fl, from)) k = push_variant(out, k, max, word, n - fl, to);
        }
    if (n >= 6 && !strcmp(word + n - 4, "iest")) return push_variant(out, k, max, word, n - 4, "y");
    if (n >= 6 && !strcmp(word + n - 3, "est")) {   /* quickest, widest, biggest */
        size_t b = n - 3;
        k = push_variant(out, k, max, word, b, "");
        k = push_variant(out, k, max, word, b, "e");
        if (word[b - 1] == word[b - 2]) k = push_variant(out, k, max, word, b - 1, "");
    }
    return k;
}

float ground_coverage(const char *need, int32_t n, const char *text) {
    if (n <= 0) return 0;
    int32_t m = 0, hit = 0;
    char *have = ground_words(text, &m, NULL);
    if (!have) return 0;
    const char *w = need;
    for (int32_t i = 0; i < n; i++, w += strlen(w) + 1) hit += list_has(have, m, w);
    free(have);
    return (float)hit / (float)n;
}

/* Does hay contain needle as a whole token (no letter/digit around it), ignoring case? */
static int has_token(const char *hay, const char *needle) {
    size_t nl = strlen(needle);
    for (const char *p = hay; nl && (p = strcasestr(p, needle)); p++) {
        const unsigned char *u = (const unsigned char *)p;
        int before = p > hay && letter_before((const unsigned char *)hay, u);
        int after = letter_at(u + nl);
        if (!before && !after) return 1;
    }
    return 0;
}

/* ---- sentences ------------------------------------------------------------------------ */
static const char *const abbrevs[] = {"e.g", "i.e", "etc", "fig", "figs", "no", "vs", "cf",
                                      "dr", "mr", "mrs", "ms", "al", "sec", "eq", "vol", "pp",
                                      "ch", "approx", "resp", "ref", "nr", "st", NULL};

/* Is the '.' at text[i] the end of an abbreviation or an initial? */
static int abbreviation_before(const char *text, size_t i) {
    size_t b = i;
    while (b > 0 && (isalpha((unsigned char)text[b - 1]) || text[b - 1] == '.')) b--;
    size_t n = i - b;
    if (n == 1 && isupper((unsigned char)text[b])) return 1;   /* "J. Smith" */
    for (int k = 0; abbrevs[k]; k++)
        if (strlen(abbrevs[k]) == n && !strncasecmp(abbrevs[k], text + b, n)) return 1;
    return 0;
}

/* Does a sentence end right after text[i] (an end mark followed by the start of another)? */
static int ends_at(const char *text, size_t len, size_t i) {
    char c = text[i];
    if (c == '\n') return 1;
    if (c != '.' && c != '!' && c != '?') return 0;
    size_t j = i + 1;
    while (j < len && (text[j] == '"' || text[j] == '\'' || text[j] == ')')) j++;
    if (j >= len || (text[j] != ' ' && text[j] != '\t' && text[j] != '\n')) return 0;
    while (j < len && (text[j] == ' ' || text[j] == '\t')) j++;
    if (j >= len) return 0;
    unsigned char nx = (unsigned char)text[j];
    if (!(isupper(nx) || isdigit(nx) || nx == '"' || nx == '(' || nx == '[' || nx == '\n' ||
          nx >= 0x80))
        return 0;
    return c != '.' || !abbreviation_before(text, i);
}

size_t ground_sentence_end(const char *text, size_t len, int final) {
    for (size_t i = 0; i < len; i++)
        if (ends_at(text, len, i)) return i + 1;
    return final ? len : 0;
}

#define GROUND_LONG 300

static int32_t push_span(const char *t, size_t b, size_t e, ground_span *out, int32_t n,
                         int32_t max) {
    while (b < e && isspace((unsigned char)t[b])) b++;
    while (e > b && isspace((unsigned char)t[e - 1])) e--;
    int any = 0;
    for (size_t i = b; i < e && !any; i++) any = is_letter((unsigned char)t[i]);
    if (!any) return n;
    while (e - b > GROUND_LONG + 60) {   /* cut long runs (tables, synopses) near 300 bytes */
        size_t cut = b + GROUND_LONG, k;
        for (k = cut; k > b + GROUND_LONG / 2; k--)
            if (t[k] == ';' || (t[k] == ' ' && t[k - 1] == ':')) break;
        if (k == b + GROUND_LONG / 2)
            for (k = cut; k < e && t[k] != ' '; k++) {}
        if (k >= e) break;
        if (n < max) out[n] = (ground_span){(uint32_t)b, (uint32_t)(k + 1 - b)};
        n++;
        b = k + 1;
        while (b < e && isspace((unsigned char)t[b])) b++;
    }
    if (e > b) {
        if (n < max) out[n] = (ground_span){(uint32_t)b, (uint32_t)(e - b)};
        n++;
    }
    return n;
}

int32_t ground_split(const char *text, ground_span *out, int32_t max) {
    if (!text) return 0;
    size_t len = strlen(text), b = 0;
    int32_t n = 0;
    for (size_t i = 0; i < len; i++)
        if (ends_at(text, len, i)) {
            n = push_span(text, b, i + 1, out, n, max);
            b = i + 1;
        }
    n = push_span(text, b, len, out, n, max);
    return n < max ? n : max;
}

size_t ground_strip_marks(char *t) {
    char *o = t;
    for (char *p = t; *p;) {
        if (*p == '[') {
            char *q = p + 1;
            while (*q && (isdigit((unsigned char)*q) || *q == ',' || *q == ' ' || *q == '-' ||
                          *q == 'n'))
                q++;
            if (*q == ']' && q > p + 1) {
                p = q + 1;
                while (o > t && o[-1] == ' ' && (*p == ' ' || *p == '.' || *p == ',')) o--;
                continue;
            }
        }
        *o++ = *p++;
    }
    *o = 0;
    return (size_t)(o - t);
}

/* ---- the check ------------------------------------------------------------------------ */
/* Where a sentence joins clauses that each state something of their own. */
static const char *const clause_joins[] = {"; ", ", and ", ", but ", " but ", ", which ",
                                           ", while ", ", whereas ", ", so ", ", or ", NULL};

/* The clauses of a sentence as one buffer of NUL-separated strings, ended by an empty one
 * (caller frees): a parenthetical set off by a space is a clause of its own, the rest is
 * cut at the joins. NULL when out of memory. */
static char *split_clauses(const char *s) {
    size_t n = strlen(s);
    char *rest = malloc(n + 1), *out = malloc(2 * n + 4), *o = out;
    if (!rest || !out) { free(rest); free(out); return NULL; }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        size_t close = 0;   /* " (...)" at the top level: out as a clause */
        if (s[i] == '(' && (i == 0 || s[i - 1] == ' '))
            for (size_t j = i + 1, depth = 1; j < n && !close; j++)
                depth += (s[j] == '(') - (s[j] == ')'), close = depth == 0 ? j : 0;
        if (!close) { rest[m++] = s[i]; continue; }
        if (close > i + 1) {   /* (an empty one would end the list) */
            memcpy(o, s + i + 1, close - i - 1);
            o += close - i - 1;
            *o++ = 0;
        }
        i = close;
    }
    rest[m] = 0;
    for (const char *p = rest; *p;) {
        size_t len = strlen(p), skip = 0;
        for (int k = 0; clause_joins[k]; k++) {
            const char *q = strstr(p, clause_joins[k]);
            if (q && q > p && (size_t)(q - p) < len) len = (size_t)(q - p), skip = strlen(clause_joins[k]);
        }
        memcpy(o, p, len);
        o += len;
        *o++ = 0;
        p += len + skip;
    }
    *o = 0;
    free(rest);
    return out;
}

/* Numbers spelled out are values like digits: "only two options" must be stated so. */
static int number_word(const char *w) {
    static const char *const nums[] = {"two", "three", "four", "five", "six", "seven", "eight",
                                       "nine", "ten", "eleven", "twelve", "twenty", "hundred",
                                       "thousand", "million", "billion", "twice", "half", NULL};
    for (int i = 0; nums[i]; i++)
        if (!strcmp(nums[i], w)) return 1;
    return 0;
}

/* Does one evidence sentence state w as a value or name must be stated? An exact token as a
 * whole token of its text; a number spelled out among its words (both stemmed alike:
 * "thousands"). Other words need not be: 1 for them. */
static int stated_in(const char *w, int exact, const char *evidence, const char *ev_words, int32_t ev_n) {
    if (exact) return has_token(evidence ? evidence : "", w);
    return !number_word(w) || list_has(ev_words, ev_n, w);
}

/* The index of the evidence sentence that covers most of the n words (ties: the earlier,
 * better ranked one) and how many it covers. */
static int32_t best_cover(const char *words, int32_t nw, char *const *ev_words,
                          const int32_t *ev_n, int32_t n, int32_t *covered) {
    int32_t best = -1;
    *covered = 0;
    for (int32_t j = 0; j < n; j++) {
        int32_t hit = 0;
        const char *w = words;
        for (int32_t i = 0; i < nw; i++, w += strlen(w) + 1) hit += list_has(ev_words[j], ev_n[j], w);
        if (hit > *covered) { *covered = hit; best = j; }
    }
    return best;
}

/* Is every clause of the sentence backed by one evidence sentence (GROUND_MIN_COVERAGE of
 * its content words, all of its exact tokens), with at most two sentences cited in all?
 * Words pooled from two sentences can assemble a claim that neither makes ("the last
 * version to support 64-bit Windows" from "runs on 64-bit Windows" and "the last version
 * to support 32-bit Windows"). Fills cite and coverage (the clauses' covered share);
 * returns 1 / 0, -1 out of memory. */
static int check_clauses(const char *sentence, const char *const *evidence, char *const *ev_words,
                         const int32_t *ev_n, int32_t n, ground_check *out) {
    char *clauses = split_clauses(sentence);
    if (!clauses) return -1;
    int ok = 1;
    int32_t words_in = 0, covered_in = 0;
    for (const char *cl = clauses; *cl; cl += strlen(cl) + 1) {
        int32_t nw = 0, covered = 0;
        uint8_t *ex = NULL;
        char *words = ground_words(cl, &nw, &ex);
        if (!words) { free(clauses); return -1; }
        int32_t j = nw ? best_cover(words, nw, ev_words, ev_n, n, &covered) : -1;
        int stated = 1;   /* its values and names are cited where they are stated */
        const char *w = words;
        for (int32_t i = 0; j >= 0 && i < nw; i++, w += strlen(w) + 1)
            stated &= stated_in(w, ex[i], evidence[j], ev_words[j], ev_n[j]);
        if (nw && (j < 0 || !stated || covered < GROUND_MIN_COVERAGE * (float)nw)) ok = 0;
        if (j >= 0 && !(out->n_cite > 0 && out->cite[0] == j) && !(out->n_cite > 1 && out->cite[1] == j)) {
            if (out->n_cite < 2) out->cite[out->n_cite++] = j;
            else ok = 0;   /* a third source: too composite to check */
        }
        words_in += nw;
        covered_in += covered;
        free(words);
        free(ex);
    }
    free(clauses);
    out->coverage = words_in ? (float)covered_in / (float)words_in : 0;
    return ok;
}

int ground_check_sentence(const char *sentence, const char *const *evidence, int32_t n,
                          ground_check *out) {
    memset(out, 0, sizeof *out);
    out->why = "no content";
    int32_t nw = 0;
    uint8_t *ex = NULL;
    char *words = ground_words(sentence, &nw, &ex);
    if (!words) return -1;
    int rc = 0;
    char **ev_words = calloc((size_t)(n > 0 ? n : 1), sizeof *ev_words);
    int32_t *ev_n = calloc((size_t)(n > 0 ? n : 1), sizeof *ev_n);
    if (!ev_words || !ev_n) { rc = -1; goto out; }
    int letters = 0;   /* "2." or "1)" alone is a list marker, not a claim */
    const char *lw = words;
    for (int32_t i = 0; i < nw && !letters; i++, lw += strlen(lw) + 1)
        for (const char *p = lw; *p && !letters; p++)
            letters = isalpha((unsigned char)*p) || (unsigned char)*p >= 0x80;
    if (nw == 0 || !letters) goto out;
    for (int32_t j = 0; j < n; j++)
        if (!(ev_words[j] = ground_words(evidence[j], &ev_n[j], NULL))) { rc = -1; goto out; }
    /* 1. exact tokens (and numbers spelled out) anywhere in the evidence */
    const char *w = words;
    for (int32_t i = 0; i < nw; i++, w += strlen(w) + 1) {
        int ok = 0;
        for (int32_t j = 0; j < n && !ok; j++) ok = stated_in(w, ex[i], evidence[j], ev_words[j], ev_n[j]);
        if (!ok) {
            snprintf(out->missing, sizeof out->missing, "%s", w);
            out->why = "unsupported token";
            break;
        }
    }
    /* 2. each clause covered by one evidence sentence, at most two for the sentence */
    int32_t all = 0;
    w = words;
    for (int32_t i = 0; i < nw; i++, w += strlen(w) + 1) {
        int any = 0;
        for (int32_t j = 0; j < n && !any; j++) any = list_has(ev_words[j], ev_n[j], w);
        all += any;
    }
    out->strict = all == nw && !out->missing[0];
    int32_t clause_ok = check_clauses(sentence, evidence, ev_words, ev_n, n, out);
    if (clause_ok < 0) { rc = -1; goto out; }
    size_t sl = strlen(sentence);
    while (sl && strchr(" \t\r\n", sentence[sl - 1])) sl--;
    if (sl && sentence[sl - 1] == ':') {   /* "Here is how:" promises what may not follow */
        out->why = "no content";
    } else if (!out->missing[0]) {
        out->supported = clause_ok && out->n_cite > 0;
        out->why = out->supported ? "ok" : "low coverage";
    }
out:
    for (int32_t j = 0; ev_words && j < n; j++) free(ev_words[j]);
    free(ev_words);
    free(ev_n);
    free(words);
    free(ex);
    return rc;
}
