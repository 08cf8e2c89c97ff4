/* tests/test_vpe.c — region localization (engine/vpe): constructed candidate sets for
 * kind words, above/below, ordinals, left/right, top/bottom, labels, pages and
 * "not found"; then end to end on the generated corpus through `mmrag index`,
 * `mmrag locate` and `mmrag eval vpe`. Needs models/minilm: skips when the model file is
 * absent, fails when it is there but does not load. */
#include <jansson.h>
#include <sys/wait.h>
#include "engine/vpe.h"
#include "engine/vpe_internal.h"
#include "test.h"
#include "vision/textenc.h"
#include "vision/colour.h"

#include <sys/stat.h>

static textenc *g_te;
static vpe *g_v;
static char g_load_err[600];   /* why a present model did not load ("" = not tried/ok) */

/* The localizer, or NULL: g_load_err says why when the model is there but broken. */
static vpe *get_vpe(void) {
    if (g_v) return g_v;
    char err[512], dir[1024], file[1100];
    snprintf(dir, sizeof dir, "%s/minilm", test_env("MMRAG_MODELS", "models"));
    snprintf(file, sizeof file, "%s/model.safetensors", dir);
    struct stat st;
    if (stat(file, &st)) return NULL;
    if (textenc_create(dir, NULL, &g_te, err, sizeof err) ||
        vpe_create(g_te, NULL, &g_v, err, sizeof err))
        snprintf(g_load_err, sizeof g_load_err, "%s", err);
    return g_v;
}

#define R(pg, k, x0, y0, x1, y1, t) {.page = pg, .kind = k, .box = {x0, y0, x1, y1}, .text = t}

/* A two-page report: headings, charts, a photo, a table, captions, paragraphs. */
static const vpe_region report[] = {
    R(1, VPE_KIND_HEADING, .1f, .05f, .6f, .08f, "1 Revenue"),
    R(1, VPE_KIND_TEXT, .1f, .09f, .9f, .15f, "Revenue rose in every region this year."),
    R(1, VPE_KIND_FIGURE, .15f, .17f, .7f, .40f, "Figure 1: Revenue by quarter in millions"),
    R(1, VPE_KIND_CAPTION, .15f, .41f, .6f, .43f, "Figure 1: Revenue by quarter in millions"),
    R(1, VPE_KIND_HEADING, .1f, .48f, .6f, .51f, "2 Operating costs"),
    R(1, VPE_KIND_FIGURE, .15f, .53f, .7f, .76f, "Figure 2: Operating costs per site"),
    R(1, VPE_KIND_CAPTION, .15f, .77f, .6f, .79f, "Figure 2: Operating costs per site"),
    R(1, VPE_KIND_TEXT, .1f, .82f, .9f, .9f, "Costs fell at the northern site after the upgrade."),
    R(2, VPE_KIND_HEADING, .1f, .05f, .6f, .08f, "3 Staff"),
    R(2, VPE_KIND_RASTER, .08f, .12f, .45f, .40f, "Figure 3: Photo of the night shift team"),
    R(2, VPE_KIND_FIGURE, .55f, .12f, .92f, .40f, "Figure 4: Headcount per department"),
    R(2, VPE_KIND_TABLE, .1f, .50f, .9f, .70f, "Table 1: Salaries by grade and year"),
    R(2, VPE_KIND_TEXT, .1f, .75f, .9f, .85f, "Salaries follow the national agreement."),
};
#define NREP ((int32_t)(sizeof report / sizeof report[0]))

static int loc(const char *desc, int32_t page, vpe_result *r) {
    vpe_options o;
    vpe_options_default(&o);
    o.page = page;
    char err[256];
    return vpe_locate(get_vpe(), report, NREP, desc, &o, r, err, sizeof err);
}

/* absent model: skip; present but unloadable: fail */
#define NEED_MODEL()                                                                      \
    do {                                                                                  \
        if (!get_vpe()) {                                                                 \
            CHECK_MSG(!g_load_err[0], "models/minilm does not load: %s", g_load_err);     \
            SKIP("no models/minilm");                                                     \
        }                                                                                 \
    } while (0)
#define EXPECT(desc, idx)                                                                  \
    do {                                                                                   \
        vpe_result r_;                                                                     \
        CHECK(loc(desc, 0, &r_) == 0);                                                     \
        CHECK_MSG(r_.found && r_.index == (idx), "'%s': found %d index %d conf %.2f (%s)", \
                  desc, r_.found, r_.index, r_.confidence, r_.why);                        \
        CHECK(r_.confidence >= 0.75f && r_.confidence <= 1.0f);                            \
        CHECK(r_.page == report[idx].page && r_.kind == report[idx].kind);                 \
        CHECK(!memcmp(r_.box, report[idx].box, sizeof r_.box));                            \
    } while (0)
#define EXPECT_NONE(desc)                                                                  \
    do {                                                                                   \
        vpe_result r_;                                                                     \
        CHECK(loc(desc, 0, &r_) == 0);                                                     \
        CHECK_MSG(!r_.found, "'%s' should be not found: index %d conf %.2f (%s)", desc,    \
                  r_.index, r_.confidence, r_.why);                                        \
        CHECK(r_.confidence >= 0 && r_.confidence < 0.75f);                                \
    } while (0)

TEST(iou) {
    float a[4] = {0, 0, 1, 1}, b[4] = {0.5f, 0, 1, 1}, c[4] = {2, 2, 3, 3};
    CHECK_NEAR(vpe_iou(a, a), 1.0, 1e-6);
    CHECK_NEAR(vpe_iou(a, b), 0.5, 1e-6);
    CHECK_NEAR(vpe_iou(a, c), 0.0, 1e-6);
}

TEST(kind_words) {
    NEED_MODEL();
    EXPECT("the photo", 9);
    EXPECT("the picture", 9);
    EXPECT("the table", 11);
    EXPECT("the tabular data", 11);
}

TEST(content_and_labels) {
    NEED_MODEL();
    EXPECT("the chart of operating costs", 5);
    EXPECT("the graph of revenue per quarter", 2);
    EXPECT("the picture of the night shift", 9);
    EXPECT("Figure 4", 10);
    EXPECT("fig. 2", 5);
    EXPECT("Table 1", 11);
}

TEST(above_below) {
    NEED_MODEL();
    EXPECT("the bar chart below the revenue heading", 2);
    EXPECT("the chart under the costs heading", 5);
    EXPECT("the chart above the operating costs heading", 2);
    EXPECT("the table below the headcount chart", 11);
}

TEST(ordinals) {
    NEED_MODEL();
    EXPECT("the first chart", 2);
    EXPECT("the second chart on page 1", 5);
    EXPECT("the last figure", 10);
    EXPECT("the second figure on page 2", 10);
    EXPECT("the first figure on page 2", 9);
    EXPECT_NONE("the third chart on page 1");
    EXPECT_NONE("the fifth figure");
}

TEST(left_right_top_bottom) {
    NEED_MODEL();
    EXPECT("the figure on the left of page 2", 9);
    EXPECT("the right figure on page 2", 10);
    EXPECT("the chart at the bottom of page 1", 5);
    EXPECT("the chart at the top of page 1", 2);
    EXPECT("the figure right of the photo", 10);
    EXPECT("the image to the left of the headcount chart", 9);
}

TEST(not_found) {
    NEED_MODEL();
    EXPECT_NONE("the pie chart of fish sales in Norway");
    EXPECT_NONE("a map of the railway network");
    EXPECT_NONE("the chart below the marketing heading");
    EXPECT_NONE("the table on page 1");
    EXPECT_NONE("Figure 7");
    EXPECT_NONE("the photo on page 5");
    /* the threshold is the only thing between a guess and an answer */
    vpe_options o;
    vpe_options_default(&o);
    CHECK_NEAR(o.threshold, 0.75, 1e-6);
    vpe_result r;
    char err[256];
    o.threshold = 0;
    CHECK(vpe_locate(get_vpe(), report, NREP, "the pie chart of fish sales", &o, &r, err, sizeof err) == 0);
    CHECK(r.found && r.index >= 0 && r.confidence < 0.75f);
    o.threshold = 1.0f;
    CHECK(vpe_locate(get_vpe(), report, NREP, "the table", &o, &r, err, sizeof err) == 0);
    CHECK(r.confidence > 0.9f && (r.found == (r.confidence >= 1.0f)));
}

TEST(pages) {
    NEED_MODEL();
    vpe_result r;
    /* across pages when no page is given */
    CHECK(loc("the table of salaries", 0, &r) == 0);
    CHECK(r.found && r.page == 2 && r.index == 11);
    /* restricted to a page: a table on page 1 does not exist */
    CHECK(loc("the table of salaries", 1, &r) == 0);
    CHECK(!r.found);
    /* the page option narrows an otherwise ambiguous description */
    CHECK(loc("the first chart", 2, &r) == 0);
    CHECK_MSG(r.found && r.index == 10, "index %d found %d (%s)", r.index, r.found, r.why);
    /* a page with no candidates at all */
    CHECK(loc("the chart", 9, &r) == 0);
    CHECK(!r.found && r.index == -1);
}

TEST(bad_input) {
    NEED_MODEL();
    vpe_result r;
    char err[256] = "";
    CHECK(vpe_locate(get_vpe(), report, NREP, NULL, NULL, &r, err, sizeof err) < 0);
    CHECK(strstr(err, "vpe:") == err);
    CHECK(vpe_locate(get_vpe(), report, NREP, "   ", NULL, &r, err, sizeof err) < 0);
    CHECK(vpe_locate(get_vpe(), NULL, 3, "the chart", NULL, &r, err, sizeof err) < 0);
    CHECK(vpe_locate(get_vpe(), report, -1, "the chart", NULL, &r, err, sizeof err) < 0);
    CHECK(vpe_locate(get_vpe(), report, 0, "the chart", NULL, &r, err, sizeof err) == 0);
    CHECK(!r.found && r.index == -1);
    /* broken candidates are skipped, not trusted */
    vpe_region bad[2] = {R(1, VPE_KIND_TABLE, NAN, 0, 1, 1, "Table 1: data"),
                         R(1, 99, 0, 0, 1, 1, NULL)};
    CHECK(vpe_locate(get_vpe(), bad, 2, "the table", NULL, &r, err, sizeof err) == 0);
    CHECK(!r.found);
    CHECK(vpe_create(NULL, NULL, &(vpe *){0}, err, sizeof err) < 0);
    vpe_free(NULL);
}

/* direction words inside a description are not the region's place; a kind word before
 * another one modifies it */
TEST(parse_directions_and_modifiers) {
    vpe_query q;
    vpe_query_parse("two triangle symbols pointing right", &q);
    CHECK(q.pos_h == 0);
    vpe_query_parse("arrows joining boxes from left to right", &q);
    CHECK(q.pos_h == 0);
    vpe_query_parse("a curve rising from bottom to top", &q);
    CHECK(q.pos_v == 0);
    vpe_query_parse("the right figure", &q);
    CHECK(q.pos_h == 1);
    vpe_query_parse("the plot at the top left", &q);
    CHECK(q.pos_v == -1 && q.pos_h == -1);
    /* a place after another noun than the head is a part of the figure, unless the page is
     * named */
    vpe_query_parse("a step plot with a legend at right and labels at the top left", &q);
    CHECK(q.pos_v == 0 && q.pos_h == 0);
    vpe_query_parse("a line chart with red labels at the bottom of the page", &q);
    CHECK(q.pos_v == 1);
    vpe_query_parse("the chart located at the bottom", &q);
    CHECK(q.pos_v == 1);
    vpe_query_parse("a plot of step curves, legend lower left", &q);
    CHECK(q.pos_v == 0 && q.pos_h == 0);
    vpe_query_parse("the second plot from the left", &q);
    CHECK(q.pos_h == -1);
    vpe_query_parse("a block diagram at the top", &q);
    CHECK(q.pos_v == -1);
    vpe_query_parse("a block diagram of five boxes", &q);
    CHECK(q.kind_primary == (1u << VPE_KIND_FIGURE));
    vpe_query_parse("the text block", &q);
    CHECK(q.kind_primary == (1u << VPE_KIND_TEXT));
    /* a relation inside a described picture is weak; one to a named kind of region holds */
    vpe_query_parse("a grid of field boxes under a numbered bit ruler", &q);
    CHECK(q.rel == VPE_REL_BELOW && q.rel_weak);
    vpe_query_parse("the red bar chart below the revenue heading", &q);
    CHECK(q.rel == VPE_REL_BELOW && !q.rel_weak);
    vpe_query_parse("the paragraph under the chart", &q);
    CHECK(q.rel == VPE_REL_BELOW && !q.rel_weak);
}

/* In a description of how a picture looks (drawn things, colours), a title, a legend, text
 * or a grid are its parts, not kinds of region; without such cues they still name kinds */
TEST(parse_picture_parts) {
    /* boxes, rectangles, outlines, frames and braces are drawn things; headings, captions
     * and a body can be parts of a drawing; "drawings" is a drawing (captioned dev set) */
    static const struct { const char *desc; uint32_t kind; } cases[] = {
        {"a plot of two curves with a legend and a title", 1u << VPE_KIND_FIGURE},
        {"five groups of bars with a title", 0},
        {"light green disc with black title text", 0},
        {"red text on a grid", 0},
        {"the title", 1u << VPE_KIND_HEADING},
        {"the text under the chart", 1u << VPE_KIND_TEXT},
        {"the last line of text", 1u << VPE_KIND_TEXT},   /* a line of text is no drawn line */
        {"the table with red text", 1u << VPE_KIND_TABLE},
        {"four circles joined by arrows under two short headings", 0},
        {"a tall rectangle with pin stubs, each with a text label", 0},
        {"code lines whose indented body is framed by thin boxes", 0},
        {"two line drawings with arrows and small sub-captions beneath", 1u << VPE_KIND_FIGURE},
        {"the headings of section 2", 1u << VPE_KIND_HEADING},
        {"the captions on page 3", 1u << VPE_KIND_CAPTION},
    };
    vpe_query q;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vpe_query_parse(cases[i].desc, &q);
        CHECK_MSG(q.kind_primary == cases[i].kind, "'%s': kind %u, want %u", cases[i].desc,
                  (unsigned)q.kind_primary, (unsigned)cases[i].kind);
    }
    vpe_query_parse("the legend of figure 2", &q);
    CHECK(q.kind_primary & (1u << VPE_KIND_CAPTION));
}

/* The figure term: an appearance description ranks first the figure whose pixels (its
 * figure vector) match, over a paragraph that names the same things and a figure that
 * looks different. It ranks but does not vouch: with captions that say nothing, the
 * answer stays "not found". A query for text ignores pixels. The figure vectors here are
 * text embeddings standing in for the figure encoder's output (same space). */
/* A page of a paragraph (lead) and two figures captioned only "Figure 5" and "Figure 6",
 * whose figure vectors (in vec, filled here) are those of a resistor drawing and a pie
 * chart. Returns 0, or -1 when the text encoder fails. */
static int two_figures(vpe_region page[3], const char *lead, float vec[2 * 384]) {
    static const char *const looks[2] = {"a zigzag line drawing of three resistors in a row",
                                         "a pie chart with four coloured slices"};
    char err[256];
    if (textenc_dim(g_te) != 384 || textenc_embed(g_te, looks, 2, vec, err, sizeof err)) return -1;
    const vpe_region p[3] = {
        R(1, VPE_KIND_TEXT, .1f, .05f, .9f, .15f, lead),
        R(1, VPE_KIND_FIGURE, .2f, .20f, .8f, .40f, "Figure 5"),
        R(1, VPE_KIND_FIGURE, .2f, .50f, .8f, .70f, "Figure 6"),
    };
    memcpy(page, p, sizeof p);
    page[1].figure_vec = vec;
    page[2].figure_vec = vec + 384;
    return 0;
}

TEST(pixels) {
    NEED_MODEL();
    float vec[2 * 384];
    char err[256];
    vpe_region page[3];
    CHECK(two_figures(page, "The network below uses three resistors in series; the chart after "
                      "it shows the shares.", vec) == 0);
    vpe_options o;
    vpe_options_default(&o);
    vpe_result r;
    CHECK(vpe_locate(get_vpe(), page, 3, "a zigzag line drawing of three resistors", &o, &r, err,
                     sizeof err) == 0);
    CHECK_MSG(r.index == 1 && !r.found, "index %d found %d conf %.2f (%s)", r.index, r.found,
              r.confidence, r.why);
    CHECK(vpe_locate(get_vpe(), page, 3, "a pie chart with coloured slices", &o, &r, err,
                     sizeof err) == 0);
    CHECK_MSG(r.index == 2 && !r.found, "index %d found %d conf %.2f (%s)", r.index, r.found,
              r.confidence, r.why);
    CHECK(vpe_locate(get_vpe(), page, 3, "the paragraph about resistors in series", &o, &r, err,
                     sizeof err) == 0);
    CHECK_MSG(r.index == 0, "index %d (%s)", r.index, r.why);
}

/* Picture evidence: with the page given, the figure whose pixels match an appearance
 * description, and no other picture of the page does as well, is vouched for although its
 * caption says nothing. Not without the page, not when two pictures of the page look alike,
 * not for a description of something of another type, and not when a stated position is
 * unmet. (Figure vectors: text embeddings standing in for the figure encoder's.) */
/* vpe_locate over the three regions of two_figures, on page pg (0 = any) */
static int on_page(const vpe_region page[3], int32_t pg, const char *desc, vpe_result *r) {
    vpe_options o;
    vpe_options_default(&o);
    o.page = pg;
    char err[256];
    return vpe_locate(get_vpe(), page, 3, desc, &o, r, err, sizeof err);
}

TEST(pixels_vouch_with_page) {
    NEED_MODEL();
    float vec[2 * 384];
    vpe_region page[3];
    CHECK(two_figures(page, "The next two figures belong to section 4.", vec) == 0);
    vpe_result r;
    const char *zigzag = "a zigzag drawing of resistors";
    CHECK(on_page(page, 1, zigzag, &r) == 0);
    CHECK_MSG(r.index == 1 && r.found && r.confidence <= 1.0f, "index %d found %d conf %.2f (%s)",
              r.index, r.found, r.confidence, r.why);
    CHECK(strstr(r.why, "pixels match"));
    CHECK(on_page(page, 1, "the pie chart at the bottom of the page", &r) == 0);
    CHECK_MSG(r.index == 2 && r.found, "index %d found %d (%s)", r.index, r.found, r.why);
    CHECK(on_page(page, 1, "the pie chart at the top of the page", &r) == 0);
    CHECK_MSG(!r.found, "an unmet position: found %d conf %.2f (%s)", r.found, r.confidence, r.why);
    CHECK(on_page(page, 1, "a photograph of a red sports car", &r) == 0);
    CHECK_MSG(!r.found, "absent: found %d index %d conf %.2f (%s)", r.found, r.index,
              r.confidence, r.why);
    CHECK(on_page(page, 0, zigzag, &r) == 0);
    CHECK_MSG(r.index == 1 && !r.found, "no page: found %d (%s)", r.found, r.why);
    page[2].figure_vec = vec;   /* both look alike: neither is vouched for */
    CHECK(on_page(page, 1, zigzag, &r) == 0);
    CHECK_MSG(!r.found, "rivals: found %d index %d (%s)", r.found, r.index, r.why);
}

/* Colours the description names: a picture vouched for by its pixels is not once the
 * description asks for colours it lacks; of two pictures whose pixels are alike, the one whose
 * colour profile alone shows them ranks first and is vouched for. */
TEST(colours_rank_and_veto) {
    NEED_MODEL();
    float vec[2 * 384], red[VISION_COLOUR_DIM] = {0}, blue[VISION_COLOUR_DIM] = {0};
    red[VISION_COLOUR_RED] = red[VISION_COLOUR_CHROMA] = 0.03f;
    blue[VISION_COLOUR_BLUE] = blue[VISION_COLOUR_CHROMA] = 0.03f;
    vpe_region page[3];
    CHECK(two_figures(page, "The next two figures belong to section 4.", vec) == 0);
    vpe_result r;
    page[1].colour = red;
    page[2].colour = blue;
    const char *red_zig = "a zigzag drawing of red resistors";
    CHECK(on_page(page, 1, "a zigzag drawing of resistors", &r) == 0);
    CHECK_MSG(r.index == 1 && r.found, "no colour named: index %d found %d (%s)", r.index, r.found, r.why);
    CHECK(on_page(page, 1, red_zig, &r) == 0);
    CHECK_MSG(r.index == 1 && r.found, "red: index %d found %d (%s)", r.index, r.found, r.why);
    page[1].colour = blue;
    CHECK(on_page(page, 1, red_zig, &r) == 0);
    CHECK_MSG(!r.found, "red asked, blue shown: found %d index %d (%s)", r.found, r.index, r.why);
    /* alike pixels: the colour decides, and the one picture of the page that shows it is
     * vouched for; not when both show it */
    page[2].figure_vec = vec;
    page[1].colour = red;
    for (int k = 0; k < 2; k++) {
        const char *d = k ? "a zigzag drawing of blue resistors" : red_zig;
        CHECK(on_page(page, 1, d, &r) == 0);
        CHECK_MSG(r.index == 1 + k && r.found && strstr(r.why, "alone on the page shows the colours"),
                  "'%s': index %d found %d (%s)", d, r.index, r.found, r.why);
    }
    page[2].colour = red;
    CHECK(on_page(page, 1, red_zig, &r) == 0);
    CHECK_MSG(!r.found, "both red: found %d index %d (%s)", r.found, r.index, r.why);
}

/* The picture evidence's type prompts (engine/vpe.c) are the zero-shot type prompts of the
 * figure encoder's evaluation (vision/train/figtypes.py): the same eleven strings. */
TEST(type_prompts_match_figtypes) {
    char *py = test_read_file("vision/train/figtypes.py", NULL);
    char *c = test_read_file("engine/vpe.c", NULL);
    CHECK(py && c);
    int n = 0;
    for (const char *p = py ? strstr(py, "TYPE_PROMPTS") : NULL; p && (p = strstr(p, "\": \""));) {
        p += 4;
        const char *e = strchr(p, '"');
        if (!e) break;
        char want[128];
        snprintf(want, sizeof want, "\"%.*s\"", (int)(e - p), p);
        CHECK_MSG(strstr(c, want), "figtypes.py's prompt %s is not in engine/vpe.c", want);
        n++;
        p = e;
    }
    CHECK_MSG(n == 11, "%d prompts in figtypes.py", n);
    free(py);
    free(c);
}

/* ---- end to end on the generated corpus ---- */

static int run(const char *cmd) {
    int rc = system(cmd);
    if (rc) fprintf(stderr, "  command failed (%d): %s\n", rc, cmd);
    return rc;
}

TEST(corpus_end_to_end) {
    NEED_MODEL();
    const char *build = test_env("MMRAG_BUILD", "build"), *tmp = test_env("MMRAG_TMP", "/tmp");
    char dir[512], cmd[8192], out[600];
    snprintf(dir, sizeof dir, "%s/vpe-e2e", tmp);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && '%s/tests/tool_gencorpus' corpus '%s/c' "
             ">/dev/null && '%s/mmrag' --db '%s/db' index '%s/c/corpus.pdf' >/dev/null",
             dir, dir, build, dir, build, dir, dir);
    CHECK(run(cmd) == 0);
    /* eval vpe: hit rate at IoU >= 0.5 and false positives over generated descriptions */
    snprintf(out, sizeof out, "%s/eval.json", dir);
    snprintf(cmd, sizeof cmd, "'%s/mmrag' --db '%s/db' eval vpe --json '%s/c/truth.json' > '%s'",
             build, dir, dir, out);
    CHECK(run(cmd) == 0);
    json_error_t je;
    json_t *j = json_load_file(out, 0, &je);
    CHECK_MSG(j, "%s", je.text);
    int pos = (int)json_integer_value(json_object_get(j, "positives"));
    int neg = (int)json_integer_value(json_object_get(j, "negatives"));
    double hr = json_number_value(json_object_get(j, "hit_rate_iou50"));
    double miou = json_number_value(json_object_get(j, "mean_iou"));
    double fpr = json_number_value(json_object_get(j, "false_positive_rate"));
    json_decref(j);
    printf("  corpus: %d positives hit@0.5 %.3f mean IoU %.3f; %d negatives FP rate %.3f\n",
           pos, hr, miou, neg, fpr);
    CHECK(pos >= 15 && neg >= 8);
    CHECK_MSG(hr >= 0.85, "hit rate %.3f < 0.85", hr);
    CHECK_MSG(miou >= 0.7, "mean IoU %.3f", miou);
    CHECK_MSG(fpr <= 0.15, "false-positive rate %.3f", fpr);
    /* locate --json against a truth box read from truth.json */
    snprintf(out, sizeof out, "%s/c/truth.json", dir);
    j = json_load_file(out, 0, &je);
    CHECK(j);
    json_t *img = json_array_get(json_object_get(json_array_get(json_object_get(
                                     json_array_get(json_object_get(j, "docs"), 0), "pages"), 1),
                                     "images"), 1);   /* page 2, second chart */
    float tb[4];
    for (int i = 0; i < 4; i++) tb[i] = (float)json_number_value(json_array_get(json_object_get(img, "box"), (size_t)i));
    json_decref(j);
    snprintf(out, sizeof out, "%s/locate.json", dir);
    snprintf(cmd, sizeof cmd, "'%s/mmrag' --db '%s/db' locate --doc 1 --json "
             "\"the line chart at the bottom of page 2\" > '%s'", build, dir, out);
    CHECK(run(cmd) == 0);
    j = json_load_file(out, 0, &je);
    CHECK(j);
    float b[4];
    for (int i = 0; i < 4; i++) b[i] = (float)json_number_value(json_array_get(json_object_get(j, "box"), (size_t)i));
    int found = json_is_true(json_object_get(j, "found"));
    int page = (int)json_integer_value(json_object_get(j, "page"));
    json_decref(j);
    CHECK_MSG(found && page == 2 && vpe_iou(b, tb) >= 0.5f, "found %d page %d iou %.2f", found, page,
              vpe_iou(b, tb));
    /* a description of nothing in the document exits 0 and says not found */
    snprintf(cmd, sizeof cmd, "'%s/mmrag' --db '%s/db' locate --doc 1 --json "
             "\"the org chart of the board of directors\" > '%s'", build, dir, out);
    CHECK(run(cmd) == 0);
    j = json_load_file(out, 0, &je);
    CHECK(j && json_is_false(json_object_get(j, "found")));
    json_decref(j);
    /* usage errors */
    snprintf(cmd, sizeof cmd, "'%s/mmrag' --db '%s/db' locate \"x\" 2>/dev/null", build, dir);
    CHECK(WEXITSTATUS(system(cmd)) == 2);
    snprintf(cmd, sizeof cmd, "'%s/mmrag' --db '%s/db' locate --doc 99 \"x\" 2>/dev/null", build, dir);
    CHECK(WEXITSTATUS(system(cmd)) == 1);
}
