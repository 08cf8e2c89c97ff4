/* vision/colour — named-colour profiles of images and the colours a description names
 * (see colour.h). */
#include "vision/colour.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

#include "vision/clip.h"

/* Paper: bright and nearly unsaturated. Chromatic ink: saturated enough and not too dark
 * to tell its hue (dark saturated pixels read as black); pastel fills ("light cyan boxes",
 * saturation 0.1-0.15) count. */
#define PAPER_V 0.9f
#define PAPER_S 0.1f
#define CHROMA_S 0.1f
#define CHROMA_V 0.25f
#define BLACK_V 0.3f
#define BROWN_V 0.7f   /* orange hues darker than this read as brown */

/* The hue slot of a chromatic pixel (hue in degrees, value v). */
static int hue_slot(float h, float v) {
    if (h < 15 || h >= 345) return VISION_COLOUR_RED;
    if (h < 40) return v < BROWN_V ? VISION_COLOUR_BROWN : VISION_COLOUR_ORANGE;
    if (h < 70) return VISION_COLOUR_YELLOW;
    if (h < 165) return VISION_COLOUR_GREEN;
    if (h < 200) return VISION_COLOUR_CYAN;
    if (h < 255) return VISION_COLOUR_BLUE;
    if (h < 310) return VISION_COLOUR_PURPLE;   /* purple itself, #800080, is at 300 */
    return VISION_COLOUR_PINK;
}

void vision_colour_profile(const vision_image *img, float *out) {
    double n[VISION_COLOUR_DIM] = {0};
    size_t total = img && img->rgb && img->w > 0 && img->h > 0 ? (size_t)img->w * (size_t)img->h : 0;
    for (size_t i = 0; i < total; i++) {
        const float *p = img->rgb + 3 * i;
        float mx = fmaxf(p[0], fmaxf(p[1], p[2])), mn = fminf(p[0], fminf(p[1], p[2]));
        float s = mx > 0 ? (mx - mn) / mx : 0, d = mx - mn > 1e-6f ? mx - mn : 1e-6f;
        if (mx > PAPER_V && s < PAPER_S) continue;
        if (s < CHROMA_S || mx < CHROMA_V) {
            n[mx < BLACK_V ? VISION_COLOUR_BLACK : VISION_COLOUR_GREY]++;
            continue;
        }
        float h = mx == p[0] ? fmodf((p[1] - p[2]) / d + 6.0f, 6.0f)
                : mx == p[1] ? (p[2] - p[0]) / d + 2.0f : (p[0] - p[1]) / d + 4.0f;
        n[hue_slot(h * 60.0f, mx)]++;
        n[VISION_COLOUR_CHROMA]++;
    }
    for (int k = 0; k < VISION_COLOUR_DIM; k++) out[k] = total ? (float)(n[k] / (double)total) : 0.0f;
}

/* Words for each chromatic slot, whole words only ("redundant" is not red). */
static const struct { const char *word; int slot; } names[] = {
    {"red", VISION_COLOUR_RED}, {"reddish", VISION_COLOUR_RED}, {"crimson", VISION_COLOUR_RED},
    {"scarlet", VISION_COLOUR_RED}, {"maroon", VISION_COLOUR_RED},
    {"orange", VISION_COLOUR_ORANGE}, {"orangish", VISION_COLOUR_ORANGE},
    {"yellow", VISION_COLOUR_YELLOW}, {"yellowish", VISION_COLOUR_YELLOW},
    {"gold", VISION_COLOUR_YELLOW}, {"golden", VISION_COLOUR_YELLOW},
    {"green", VISION_COLOUR_GREEN}, {"greenish", VISION_COLOUR_GREEN},
    {"olive", VISION_COLOUR_GREEN}, {"lime", VISION_COLOUR_GREEN},
    {"cyan", VISION_COLOUR_CYAN}, {"teal", VISION_COLOUR_CYAN},
    {"turquoise", VISION_COLOUR_CYAN}, {"aqua", VISION_COLOUR_CYAN},
    {"blue", VISION_COLOUR_BLUE}, {"bluish", VISION_COLOUR_BLUE}, {"navy", VISION_COLOUR_BLUE},
    {"purple", VISION_COLOUR_PURPLE}, {"purplish", VISION_COLOUR_PURPLE},
    {"violet", VISION_COLOUR_PURPLE}, {"lilac", VISION_COLOUR_PURPLE},
    {"lavender", VISION_COLOUR_PURPLE}, {"mauve", VISION_COLOUR_PURPLE},
    {"pink", VISION_COLOUR_PINK}, {"pinkish", VISION_COLOUR_PINK},
    {"magenta", VISION_COLOUR_PINK}, {"magenta", VISION_COLOUR_PURPLE},   /* at 300, between */
    {"salmon", VISION_COLOUR_PINK},
    {"brown", VISION_COLOUR_BROWN}, {"brownish", VISION_COLOUR_BROWN},
    {"beige", VISION_COLOUR_BROWN},
};
static const char *const mono_words[] = {"grayscale", "greyscale", "monochrome", "monochromatic", NULL};

/* The next lowercase word of *p (letters only) into w; 0 at the end. */
static size_t next_word(const char **p, char *w, size_t cap) {
    const char *s = *p;
    while (*s && !isalpha((unsigned char)*s)) s++;
    size_t n = 0;
    while (isalpha((unsigned char)*s)) {
        if (n + 1 < cap) w[n++] = (char)tolower((unsigned char)*s);
        s++;
    }
    w[n] = 0;
    *p = s;
    return n;
}

uint32_t vision_colour_words(const char *text) {
    uint32_t bits = 0;
    char w[32], prev[32] = "", prev2[32] = "";
    for (const char *p = text ? text : ""; next_word(&p, w, sizeof w);) {
        for (size_t i = 0; i < sizeof names / sizeof *names; i++)
            if (!strcmp(w, names[i].word)) bits |= 1u << names[i].slot;
        for (int i = 0; mono_words[i]; i++)
            if (!strcmp(w, mono_words[i])) bits |= VISION_COLOUR_MONO;
        /* "black and white", "black-and-white", "gray scale" */
        if (!strcmp(w, "white") && !strcmp(prev, "and") && !strcmp(prev2, "black")) bits |= VISION_COLOUR_MONO;
        if (!strcmp(w, "scale") && (!strcmp(prev, "grey") || !strcmp(prev, "gray"))) bits |= VISION_COLOUR_MONO;
        memcpy(prev2, prev, sizeof prev);
        memcpy(prev, w, sizeof w);
    }
    return bits;
}

static float enough(float share) {
    return share >= VISION_COLOUR_ENOUGH ? 1.0f : share / VISION_COLOUR_ENOUGH;
}

/* The mean (any = 0) or the best (any = 1) of the named colours' saturated shares. */
static float match(uint32_t want, const float *profile, int any) {
    if (!want || !profile) return -1.0f;
    float sum = 0, best = 0;
    int n = 0;
    for (int k = 0; k < VISION_COLOUR_BLACK; k++)
        if (want & (1u << k)) {
            float e = enough(profile[k]);
            sum += e;
            best = fmaxf(best, e);
            n++;
        }
    if (n) return any ? best : sum / (float)n;
    return 1.0f - enough(profile[VISION_COLOUR_CHROMA]);   /* MONO alone */
}

float vision_colour_match(uint32_t want, const float *profile) { return match(want, profile, 0); }
float vision_colour_match_any(uint32_t want, const float *profile) { return match(want, profile, 1); }
