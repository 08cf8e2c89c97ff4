/* Named-colour profiles (vision/colour.c): shares of drawn pixels per hue, paper ignored;
 * the colour words of a description; and how a profile matches them. */
#include "tests/test.h"
#include "vision/vision.h"

/* A white w x h image with rectangles of given colours. */
typedef struct { int x0, y0, x1, y1; float r, g, b; } patch;

static int paint(vision_image *img, int w, int h, const patch *p, int np) {
    img->w = w;
    img->h = h;
    img->rgb = malloc(sizeof *img->rgb * 3 * (size_t)w * (size_t)h);
    if (!img->rgb) return -1;
    for (int i = 0; i < 3 * w * h; i++) img->rgb[i] = 1.0f;
    for (int k = 0; k < np; k++)
        for (int y = p[k].y0; y < p[k].y1; y++)
            for (int x = p[k].x0; x < p[k].x1; x++) {
                float *px = img->rgb + 3 * ((size_t)y * w + x);
                px[0] = p[k].r, px[1] = p[k].g, px[2] = p[k].b;
            }
    return 0;
}

TEST(profile_counts_hues_not_paper) {
    static const patch p[] = {
        {0, 0, 100, 1, 0.9f, 0.1f, 0.1f},     /* a red line: 100 px */
        {0, 10, 20, 20, 0.1f, 0.3f, 0.85f},   /* a blue block: 200 px */
        {0, 30, 10, 40, 0.55f, 0.3f, 0.1f},   /* dark orange reads as brown: 100 px */
        {0, 50, 50, 52, 0.05f, 0.05f, 0.05f}, /* black text: 100 px */
        {0, 60, 25, 64, 0.6f, 0.6f, 0.6f},    /* grey: 100 px */
        {0, 70, 100, 80, 0.97f, 0.96f, 0.93f}, /* off-white paper: not ink */
        {50, 10, 60, 20, 0.85f, 1.0f, 1.0f},  /* a pastel (light cyan) fill: 100 px */
        {0, 90, 10, 100, 0.2f, 0.05f, 0.1f},  /* very dark red: black, not red */
    };
    vision_image img = {0};
    CHECK(paint(&img, 100, 100, p, (int)(sizeof p / sizeof *p)) == 0);
    float pr[VISION_COLOUR_DIM];
    vision_colour_profile(&img, pr);
    vision_image_free(&img);
    CHECK_NEAR(pr[VISION_COLOUR_RED], 0.01, 1e-6);
    CHECK_NEAR(pr[VISION_COLOUR_BLUE], 0.02, 1e-6);
    CHECK_NEAR(pr[VISION_COLOUR_BROWN], 0.01, 1e-6);
    CHECK_NEAR(pr[VISION_COLOUR_ORANGE], 0.0, 1e-6);
    CHECK_NEAR(pr[VISION_COLOUR_BLACK], 0.02, 1e-6);
    CHECK_NEAR(pr[VISION_COLOUR_GREY], 0.01, 1e-6);
    CHECK_NEAR(pr[VISION_COLOUR_CYAN], 0.01, 1e-6);
    CHECK_NEAR(pr[VISION_COLOUR_CHROMA], 0.05, 1e-6);
    CHECK(pr[VISION_COLOUR_GREEN] == 0 && pr[VISION_COLOUR_YELLOW] == 0 && pr[VISION_COLOUR_PINK] == 0);
    /* an empty image: all zeros, no division by zero */
    vision_image none = {0};
    vision_colour_profile(&none, pr);
    for (int k = 0; k < VISION_COLOUR_DIM; k++) CHECK(pr[k] == 0);
}

TEST(profile_hue_wheel) {
    static const struct { float r, g, b; int slot; } c[] = {
        {1, 0, 0, VISION_COLOUR_RED},      {1, 0.55f, 0, VISION_COLOUR_ORANGE},
        {0.95f, 0.9f, 0.1f, VISION_COLOUR_YELLOW}, {0.1f, 0.7f, 0.2f, VISION_COLOUR_GREEN},
        {0, 0.8f, 0.8f, VISION_COLOUR_CYAN},  {0.1f, 0.2f, 0.9f, VISION_COLOUR_BLUE},
        {0.5f, 0.1f, 0.8f, VISION_COLOUR_PURPLE}, {0.5f, 0, 0.5f, VISION_COLOUR_PURPLE},
        {0.9f, 0.2f, 0.6f, VISION_COLOUR_PINK},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        patch p = {0, 0, 4, 4, c[i].r, c[i].g, c[i].b};
        vision_image img = {0};
        CHECK(paint(&img, 4, 4, &p, 1) == 0);
        float pr[VISION_COLOUR_DIM];
        vision_colour_profile(&img, pr);
        vision_image_free(&img);
        CHECK_MSG(pr[c[i].slot] == 1.0f, "colour %zu: slot %d share %g", i, c[i].slot, pr[c[i].slot]);
    }
}

TEST(colour_words) {
    CHECK(vision_colour_words("two red curves and a blue one") ==
          ((1u << VISION_COLOUR_RED) | (1u << VISION_COLOUR_BLUE)));
    CHECK(vision_colour_words("Reddish-brown bars on a light-GREEN grid") ==
          ((1u << VISION_COLOUR_RED) | (1u << VISION_COLOUR_BROWN) | (1u << VISION_COLOUR_GREEN)));
    CHECK(vision_colour_words("navy and teal wedges") ==
          ((1u << VISION_COLOUR_BLUE) | (1u << VISION_COLOUR_CYAN)));
    CHECK(vision_colour_words("magenta dots") ==
          ((1u << VISION_COLOUR_PINK) | (1u << VISION_COLOUR_PURPLE)));
    /* whole words only; black, white and grey name nothing */
    CHECK(vision_colour_words("a redundant bluetooth diagram, black text on white, grey boxes") == 0);
    CHECK(vision_colour_words("a black and white photo") == VISION_COLOUR_MONO);
    CHECK(vision_colour_words("a black-and-white photo") == VISION_COLOUR_MONO);
    CHECK(vision_colour_words("a gray scale scan") == VISION_COLOUR_MONO);
    CHECK(vision_colour_words("a monochrome plot with a red marker") ==
          (VISION_COLOUR_MONO | (1u << VISION_COLOUR_RED)));
    CHECK(vision_colour_words("") == 0 && vision_colour_words(NULL) == 0);
}

TEST(colour_match) {
    float pr[VISION_COLOUR_DIM] = {0};
    pr[VISION_COLOUR_RED] = 0.01f;                        /* plenty */
    pr[VISION_COLOUR_BLUE] = VISION_COLOUR_ENOUGH / 2;    /* half of enough */
    pr[VISION_COLOUR_CHROMA] = pr[VISION_COLOUR_RED] + pr[VISION_COLOUR_BLUE];
    uint32_t red = 1u << VISION_COLOUR_RED, blue = 1u << VISION_COLOUR_BLUE;
    uint32_t green = 1u << VISION_COLOUR_GREEN;
    CHECK_NEAR(vision_colour_match(red, pr), 1.0, 1e-6);
    CHECK_NEAR(vision_colour_match(blue, pr), 0.5, 1e-6);
    CHECK_NEAR(vision_colour_match(green, pr), 0.0, 1e-6);
    CHECK_NEAR(vision_colour_match(red | green, pr), 0.5, 1e-6);
    CHECK_NEAR(vision_colour_match_any(red | green, pr), 1.0, 1e-6);
    CHECK_NEAR(vision_colour_match_any(blue | green, pr), 0.5, 1e-6);
    CHECK_NEAR(vision_colour_match_any(green, pr), 0.0, 1e-6);
    CHECK_NEAR(vision_colour_match(VISION_COLOUR_MONO, pr), 0.0, 1e-6);
    CHECK(vision_colour_match(0, pr) == -1.0f && vision_colour_match(red, NULL) == -1.0f);
    float grey[VISION_COLOUR_DIM] = {0};
    grey[VISION_COLOUR_BLACK] = 0.2f;
    CHECK_NEAR(vision_colour_match(VISION_COLOUR_MONO, grey), 1.0, 1e-6);
}
