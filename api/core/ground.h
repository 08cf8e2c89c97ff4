/* api/core/ground — the text side of grounded answers: sentences, the words that must be
 * backed by evidence, and the support check. Pure functions over UTF-8 text: no model,
 * no store, thread-safe.
 *
 *   ground_span s[64]; int32_t n = ground_split(text, s, 64);     // sentences of a chunk
 *   ground_check c; ground_check_sentence(answer_sentence, ev, n_ev, &c);
 *   if (c.supported) cite ev[c.cite[0]] (and ev[c.cite[1]] when c.n_cite == 2)
 *
 * The check (a measurable rule, no second model):
 *   1. exact tokens: every number, identifier (a word with a digit, '_', '/', '.', '-' or
 *      an inner capital: /etc/fstab, apt-get, x11, setTitle) and proper name (a capitalized
 *      word that does not start the sentence), and every number spelled out ("two",
 *      "hundred", "half"), of the sentence occurs in the evidence as a whole token,
 *      ignoring case;
 *   2. coverage: each clause of the sentence (parts joined by "; ", ", and ", ", but ",
 *      ", which" ..., and each parenthetical) is backed by one evidence sentence: at least
 *      GROUND_MIN_COVERAGE of its content words (not function words, >= 3 characters or
 *      with a digit; light stemming) and all of its exact tokens are in it; at most two
 *      sentences are cited in all. Words pooled from two sentences can assemble a claim
 *      neither makes;
 *   3. the sentence has a content word with a letter (a bare "Yes." or a list number "2."
 *      asserts nothing we can check) and does not end in ':' (it announces content that
 *      may not follow).
 * The stricter rule reported beside it by `mmrag eval answers`: every content word occurs
 * in the evidence given to the model (coverage 1 over all of it). */
#ifndef MMRAG_API_CORE_GROUND_H
#define MMRAG_API_CORE_GROUND_H
#include <stddef.h>
#include <stdint.h>

/* Calibrated on the development questions (tests/data/answer_questions_dev.json, `mmrag
 * eval answers --mode auto`): 0.6 kept 10 model sentences of which 1 passed the strict
 * rule, key in answer 30%, cited page 35%; 0.75 kept 3, key 35%, cited page 53%. */
#define GROUND_MIN_COVERAGE 0.75f

typedef struct { uint32_t off, len; } ground_span;   /* byte range of a text */

/* Splits text into sentences: at line breaks (block boundaries) and at ., ! or ? followed
 * by a space and a capital, digit, quote or bracket (not after common abbreviations, an
 * initial or inside a number or file name); over-long sentences are cut at "; " or at a
 * space near 300 bytes. Spans are trimmed and skip pieces with no letter or digit.
 * Returns the number of sentences (writes at most max). */
int32_t ground_split(const char *text, ground_span *out, int32_t max);

/* Index one past the end of the first complete sentence of a growing text, or 0 when no
 * sentence is complete yet (streaming: a sentence is complete once the character after
 * its end mark has arrived). `final` = the text is complete (its rest is a sentence). */
size_t ground_sentence_end(const char *text, size_t len, int final);

/* Removes the model's own citation marks ("[2]", "[1, 3]", "[n]") and collapses the
 * spaces they leave, in place. Returns the new length. */
size_t ground_strip_marks(char *text);

/* Word classes of a token. */
enum { GROUND_CONTENT = 1, GROUND_EXACT = 2 };

/* The content words of text, lowercased and lightly stemmed, as one buffer of
 * NUL-separated words (caller frees); *n gets the count. Exact tokens (numbers,
 * identifiers, names) are included and flagged through `exact` when not NULL (one flag
 * per word, caller frees). Returns NULL on allocation failure. */
char *ground_words(const char *text, int32_t *n, uint8_t **exact);

/* The same words lowercased but not stemmed (what a user typed: for lookups elsewhere). */
char *ground_words_raw(const char *text, int32_t *n, uint8_t **exact);

/* Marks seen[i] = 1 for each of the n words of `need` (a ground_words_raw buffer) that
 * text holds, unstemmed: one pass over text for all the words. */
void ground_words_in(const char *need, int32_t n, const char *text, uint8_t *seen);

/* The kinds of value an exact token is (bits; 0: none, e.g. a name like "November"): a
 * number (a digit), a path ('/'), an identifier (a joiner: _ - . :). */
enum { GROUND_VALUE_NUMBER = 1, GROUND_VALUE_PATH = 2, GROUND_VALUE_IDENT = 4 };
int ground_value_kinds(const char *word);

/* Does any of the n texts keep a value of `evidence` (a number, a path, an identifier: an
 * exact token of some ground_value_kinds; names do not count)? 1 also when the evidence
 * holds no value, 0 when every value is left out; -1 out of memory. */
int ground_keeps_values(const char *evidence, const char *const *texts, int32_t n);

/* Other spellings of a lowercase word that a manual may use instead of the one typed:
 * British and American endings (customisation / customization, colour / color, centre /
 * center, licence / license, catalogue / catalog, modelling / modeling) and a superlative's
 * base (quickest -> quick, easiest -> easy, biggest -> big). Writes up to max variants, each
 * NUL-terminated and shorter than GROUND_VARIANT_LEN, to out; returns how many. */
#define GROUND_VARIANT_LEN 64
int32_t ground_spelling_variants(const char *word, char (*out)[GROUND_VARIANT_LEN], int32_t max);

/* Share of the words of `need` (a ground_words buffer, n words) found in text's words. */
float ground_coverage(const char *need, int32_t n, const char *text);

typedef struct ground_check {
    int32_t supported;        /* 1: passed every rule */
    int32_t strict;           /* 1: also passes the stricter all-words rule */
    float coverage;           /* content words covered, each clause by its sentence, 0..1 */
    int32_t n_cite;           /* 0..2 */
    int32_t cite[2];          /* indexes into the evidence array */
    char missing[96];         /* first exact token not found in the evidence, "" if none */
    const char *why;          /* static: "ok", "unsupported token", "low coverage",
                                 "no content" */
} ground_check;

/* Checks one answer sentence against n evidence sentences. Returns 0, -1 on allocation
 * failure. */
int ground_check_sentence(const char *sentence, const char *const *evidence, int32_t n,
                          ground_check *out);
#endif
