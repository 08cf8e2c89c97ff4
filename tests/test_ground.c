/* Tests for api/core/ground: sentence splitting (abbreviations, numbers, file names, line
 * breaks, long runs), streaming sentence ends, the model's [n] marks, content and exact
 * words, and the support check (exact tokens, coverage by one or two sentences, the
 * stricter all-words rule). Pure text: no model. */
#include "api/core/answer_internal.h"
#include "api/core/ground.h"
#include "tests/test.h"

static int split_eq(const char *text, const char *const *want, int n) {
    ground_span s[32];
    int32_t got = ground_split(text, s, 32);
    if (got != n) { fprintf(stderr, "  got %d sentences, want %d\n", got, n); return 0; }
    for (int i = 0; i < n; i++)
        if (strlen(want[i]) != s[i].len || memcmp(want[i], text + s[i].off, s[i].len)) {
            fprintf(stderr, "  sentence %d: '%.*s' vs '%s'\n", i, (int)s[i].len, text + s[i].off, want[i]);
            return 0;
        }
    return 1;
}

TEST(split_sentences) {
    const char *t = "Use set logscale y. See Fig. 3, e.g. the left plot.\nVersion 5.4 reads "
                    "/etc/gnuplotrc first! J. Smith wrote it? Yes.";
    const char *want[] = {"Use set logscale y.", "See Fig. 3, e.g. the left plot.",
                          "Version 5.4 reads /etc/gnuplotrc first!", "J. Smith wrote it?", "Yes."};
    CHECK(split_eq(t, want, 5));
    const char *none[] = {NULL};
    CHECK(split_eq("  ... --- \n\n", none, 0));
    const char *lower[] = {"a.b is a file. and this continues"};
    CHECK(split_eq("a.b is a file. and this continues", lower, 1));
}

TEST(split_long_runs) {
    char t[2000];
    size_t n = 0;
    for (int i = 0; i < 150; i++) n += (size_t)snprintf(t + n, sizeof t - n, "word%d ", i);
    ground_span s[32];
    int32_t k = ground_split(t, s, 32);
    CHECK(k >= 3);
    for (int i = 0; i < k; i++) CHECK(s[i].len <= 360);
    CHECK(s[k - 1].off + s[k - 1].len == n - 1);   /* the trailing space is trimmed */
}

TEST(sentence_end_streaming) {
    const char *t = "First one. Second on";
    CHECK(ground_sentence_end(t, strlen(t), 0) == 10);
    CHECK(ground_sentence_end("No end yet.", 11, 0) == 0);   /* the next char decides */
    CHECK(ground_sentence_end("No end yet.", 11, 1) == 11);
    CHECK(ground_sentence_end("line one\nline two", 17, 0) == 9);
}

TEST(strip_marks) {
    char a[] = "Use set logscale [1]. It works [2, 3] and [n] too [12].";
    ground_strip_marks(a);
    CHECK_MSG(!strcmp(a, "Use set logscale. It works and too."), "%s", a);
    char b[] = "an array a[i] stays";   /* only digits, commas, spaces and n are marks */
    ground_strip_marks(b);
    CHECK(!strcmp(b, "an array a[i] stays"));
}

TEST(words_and_exact) {
    int32_t n = 0;
    uint8_t *ex = NULL;
    char *w = ground_words("The Debian tools: apt-get installs packages from /etc/apt in 2.5 s", &n, &ex);
    CHECK(w && ex);
    const char *want[] = {"debian", "tool", "apt-get", "install", "package", "/etc/apt", "2.5"};
    const int exact[] = {1, 0, 1, 0, 0, 1, 1};
    CHECK_MSG(n == 7, "%d words", n);
    const char *p = w;
    for (int i = 0; i < n; i++, p += strlen(p) + 1) {
        CHECK_MSG(!strcmp(p, want[i]), "word %d: %s", i, p);
        CHECK_MSG(ex[i] == exact[i], "word %s exact %d", p, ex[i]);
    }
    free(w);
    free(ex);
}

TEST(typographic_quotes_are_not_letters) {
    /* manuals quote paths with U+201D; the quote must not glue onto the token */
    int32_t n = 0;
    uint8_t *ex = NULL;
    char *w = ground_words("edit \xe2\x80\x9d/etc/hosts\xe2\x80\x9d \xc2\xabnow\xc2\xbb", &n, &ex);
    CHECK(w && n == 3 && !strcmp(w, "edit") && !strcmp(w + 5, "/etc/hosts") && ex[1]);
    CHECK(!strcmp(w + 16, "now"));
    free(w);
    free(ex);
    const char *ev[] = {"Its name is in \xe2\x80\x9d/etc/hosts\xe2\x80\x9d."};
    ground_check c;
    CHECK(!ground_check_sentence("The name is in /etc/hosts.", ev, 1, &c));
    CHECK_MSG(c.supported && !c.missing[0], "missing '%s' cov %.2f", c.missing, c.coverage);
    /* raw words keep what was typed: no stemming */
    w = ground_words_raw("Which chooses files?", &n, NULL);
    CHECK(w && n == 2 && !strcmp(w, "chooses") && !strcmp(w + 8, "files"));
    free(w);
    /* which of several words a text holds, in one pass */
    w = ground_words_raw("zpool wireguard files", &n, NULL);
    uint8_t seen[3] = {0};
    ground_words_in(w, n, "Create one with zpool; keep the files.", seen);
    CHECK(n == 3 && seen[0] == 1 && seen[1] == 0 && seen[2] == 1);
    free(w);
}

TEST(check_rules) {
    const char *ev[] = {"The set logscale command makes an axis logarithmic.",
                        "Version 5.4 is the current release.",
                        "Mount points are listed in /etc/fstab."};
    ground_check c;
    CHECK(!ground_check_sentence("To make an axis logarithmic, use the set logscale command.", ev, 3, &c));
    CHECK(c.supported && c.strict && c.n_cite == 1 && c.cite[0] == 0);
    CHECK(!ground_check_sentence("Version 6.0 is the current release.", ev, 3, &c));
    CHECK(!c.supported && !strcmp(c.missing, "6.0") && !strcmp(c.why, "unsupported token"));
    CHECK(!ground_check_sentence("The Debian project was founded in 1993.", ev, 3, &c));
    CHECK(!c.supported);
    CHECK(!ground_check_sentence("Yes.", ev, 3, &c));
    CHECK(!c.supported && !strcmp(c.why, "no content"));
    /* two clauses, each backed by its own sentence: both are cited */
    CHECK(!ground_check_sentence("Version 5.4 is the current release, and mount points are listed in /etc/fstab.",
                                 ev, 3, &c));
    CHECK_MSG(c.supported && c.n_cite == 2, "supported %d n_cite %d cov %.2f", c.supported, c.n_cite, c.coverage);
    /* one clause pooled from two sentences claims what neither says */
    CHECK(!ground_check_sentence("The current release 5.4 lists mount points in /etc/fstab.", ev, 3, &c));
    CHECK_MSG(!c.supported && !strcmp(c.why, "low coverage"), "supported %d why %s", c.supported, c.why);
    /* the negation is content: not covered by a sentence that does not say it */
    CHECK(!ground_check_sentence("The logscale command never makes axes logarithmic quickly.", ev, 3, &c));
    CHECK(c.coverage < 1.0f && !c.strict);
}

TEST(clauses_need_one_source) {
    /* SmolLM2's answer over the R FAQ: every word is in the two cited sentences, the claim
     * in neither (the last version supported 32-bit Windows, and R does run on Windows) */
    const char *ev[] = {"The bin/windows directory of a CRAN site contains binaries to run on 64-bit versions of "
                        "Windows 7 and later on x86 64 chips (R 4.1.3 was the last version of R to support 32-bit Windows).",
                        "R is meant to run on a wide variety of platforms, including Linux and most variants of Unix "
                        "as well as Windows and macOS."};
    ground_check c;
    CHECK(!ground_check_sentence("The last version of R to support 64-bit Windows is available for use with R on "
                                 "Linux and macOS, but it's not available for Windows.", ev, 2, &c));
    CHECK_MSG(!c.supported, "why %s cov %.2f", c.why, c.coverage);
    CHECK(!ground_check_sentence("R 4.1.3 was the last version of R to support 32-bit Windows.", ev, 2, &c));
    CHECK(c.supported && c.n_cite == 1 && c.cite[0] == 0);
    /* a value is cited where it is stated: "4.1.3" is not in the sentence that covers the rest */
    CHECK(!ground_check_sentence("R 4.1.3 runs on Linux, Unix, Windows and macOS.", ev, 2, &c));
    CHECK_MSG(!c.supported, "why %s cov %.2f", c.why, c.coverage);
    /* a parenthetical is a clause of its own: the copied aside does not carry the claim */
    const char *arc[] = {"If you want to draw a circle in plot coordinates (such that it will appear as an "
                         "ellipse if the horizontal and vertical scales are different), use set object ellipse instead."};
    CHECK(!ground_check_sentence("The arc of a circle object in plot coordinates (such that it will appear as an "
                                 "ellipse if the horizontal and vertical scales are different) lies on the x axis.",
                                 arc, 1, &c));
    CHECK_MSG(!c.supported, "why %s cov %.2f", c.why, c.coverage);
    CHECK(!ground_check_sentence("To draw a circle in plot coordinates (such that it will appear as an ellipse if "
                                 "the horizontal and vertical scales are different), use set object ellipse.", arc, 1, &c));
    CHECK_MSG(c.supported, "why %s cov %.2f", c.why, c.coverage);
    /* a number spelled out is a value: "two" must be stated */
    const char *opts[] = {"The set view command has many options available in both 2D and 3D plots."};
    CHECK(!ground_check_sentence("There are only two options available in 3D plots.", opts, 1, &c));
    CHECK_MSG(!c.supported && !strcmp(c.missing, "two"), "why %s missing %s", c.why, c.missing);
    /* compared stemmed, as the evidence's words are: a plural is stated by itself */
    const char *many[] = {"The server handles thousands of requests per second."};
    CHECK(!ground_check_sentence("The server handles thousands of requests per second.", many, 1, &c));
    CHECK_MSG(c.supported, "why %s missing %s", c.why, c.missing);
}

TEST(keeps_values) {
    const char *ev = "The board approved a dividend of 0.35 euros per share, payable in November.";
    const char *evasive[] = {"The board also approved a dividend for the third quarter, which was paid in November."};
    const char *full[] = {"It was paid in November.", "The dividend is 0.35 euros per share."};
    CHECK(ground_keeps_values(ev, evasive, 1) == 0);     /* "November" is a name, not a value */
    CHECK(ground_keeps_values(ev, full, 2) == 1);
    CHECK(ground_keeps_values(ev, NULL, 0) == 0);
    const char *any[] = {"Anything at all."};
    CHECK(ground_keeps_values("The sky over Hollum is blue.", any, 1) == 1);   /* no value to keep */
    const char *path[] = {"Edit the file /etc/fstab as root."};
    CHECK(ground_keeps_values("Mount points are listed in /etc/fstab.", path, 1) == 1);
}

static int has_variant(const char *w, const char *want) {
    char v[8][GROUND_VARIANT_LEN];
    int32_t n = ground_spelling_variants(w, v, 8);
    for (int32_t i = 0; i < n; i++)
        if (!strcmp(v[i], want)) return 1;
    return 0;
}

TEST(spelling_variants) {
    CHECK(has_variant("customisation", "customization"));
    CHECK(has_variant("optimization", "optimisation"));
    CHECK(has_variant("colour", "color") && has_variant("behavior", "behaviour"));
    CHECK(has_variant("centre", "center") && has_variant("licence", "license"));
    CHECK(has_variant("catalogue", "catalog") && has_variant("modelling", "modeling"));
    CHECK(has_variant("quickest", "quick") && has_variant("widest", "wide"));
    CHECK(has_variant("easiest", "easy") && has_variant("biggest", "big"));
    char v[8][GROUND_VARIANT_LEN];
    CHECK(ground_spelling_variants("dplyr", v, 8) == 0);   /* a name has no other spelling */
    CHECK(ground_spelling_variants("kubernetes", v, 8) == 0);
    CHECK(ground_spelling_variants("best", v, 8) == 0);    /* too short to be a superlative */
    CHECK(ground_spelling_variants("customisation", v, 0) == 0);
}

TEST(clause_edge_cases) {
    const char *ev[] = {"Version 5.4 is the current release."};
    ground_check c;
    /* an empty parenthetical, a join at the start, a lone parenthesis: the rest is still checked */
    CHECK(!ground_check_sentence("Version () 5.4 is the current release.", ev, 1, &c) && c.supported);
    CHECK(!ground_check_sentence("Version 5.4 () is the current release, and 6.0 is next.", ev, 1, &c) && !c.supported);
    CHECK(!ground_check_sentence("; version 5.4 is the current release (", ev, 1, &c) && c.supported);
    CHECK(!ground_check_sentence("(Version 5.4 is the current release.)", ev, 1, &c) && c.supported);
}

/* What a question asks for and what an answer holds: auto mode quotes the evidence when the
 * model's sentences hold none of the kind asked for (api/core/answer.c). */
TEST(wanted_and_held_types) {
    CHECK(answer_wanted_type("How many named colours does R know about?") == GROUND_VALUE_NUMBER);
    CHECK(answer_wanted_type("Which file holds the SASL password?") & GROUND_VALUE_PATH);
    CHECK(answer_wanted_type("Which option exports only the first partition?") == GROUND_VALUE_IDENT);
    CHECK(answer_wanted_type("Why is read.table slow?") == 0);
    /* whole words: "support", "triangle", "conversion" and "profile" ask for nothing */
    CHECK(answer_wanted_type("Does R support a triangle conversion in the profile?") == 0);
    CHECK(answer_wanted_type("Which addresses?") == GROUND_VALUE_NUMBER);
    CHECK(answer_wanted_type("Which ports and file sizes?") == (GROUND_VALUE_NUMBER | GROUND_VALUE_PATH | GROUND_VALUE_IDENT));
    CHECK(answer_held_types("The configuration of postfix with SASL.") == 0);
    CHECK(answer_held_types("R knows 657 colours.") == GROUND_VALUE_NUMBER);
    CHECK(answer_held_types("It reads /etc/postfix/sasl_passwd.") & GROUND_VALUE_PATH);
    CHECK(answer_held_types("Use qemu-nbd -P 1 here.") & GROUND_VALUE_IDENT);
}
