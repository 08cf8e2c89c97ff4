/* vision/colour.h — which named colours a figure shows, and which a description asks for.
 *
 * Half of the appearance descriptions people wrote for real figures name a colour ("two
 * red curves", "blue bars"), and our figure encoder, trained mostly on synthetic charts,
 * hardly separates real figures by it. A colour profile is cheap and exact: the share of
 * the figure's box in each named hue, from its pixels.
 *
 *   float p[VISION_COLOUR_DIM]; vision_colour_profile(&img, p);   (stored with the image)
 *   uint32_t want = vision_colour_words("a plot with a red curve");
 *   float m = vision_colour_match(want, p);   (-1: the text names no colour)
 *
 * Pure functions, reentrant. */
#ifndef MMRAG_VISION_COLOUR_H
#define MMRAG_VISION_COLOUR_H
#include <stdint.h>

struct vision_image;

/* Profile slots: the share of the image's pixels (0..1) of each chromatic hue, then black,
 * grey (unsaturated ink, not paper) and all chromatic pixels together. */
enum {
    VISION_COLOUR_RED, VISION_COLOUR_ORANGE, VISION_COLOUR_YELLOW, VISION_COLOUR_GREEN,
    VISION_COLOUR_CYAN, VISION_COLOUR_BLUE, VISION_COLOUR_PURPLE, VISION_COLOUR_PINK,
    VISION_COLOUR_BROWN, VISION_COLOUR_BLACK, VISION_COLOUR_GREY, VISION_COLOUR_CHROMA,
    VISION_COLOUR_DIM
};
/* The profile's id where it is stored (the store's image space, as a VISION_COLOUR_DIM vector):
 * bump when the profile's definition changes. */
#define VISION_COLOUR_MODEL "mmrag-colour-v1"
/* A description's bit for "black and white", "grayscale", "monochrome" (no chromatic ink). */
#define VISION_COLOUR_MONO (1u << 31)

/* The profile of img (RGB in 0..1) into out[VISION_COLOUR_DIM]; all zeros for an empty image. */
void vision_colour_profile(const struct vision_image *img, float *out);
/* Bits (1 << VISION_COLOUR_*) of the chromatic colours the text names ("red", "reddish",
 * "navy", "teal"...), plus VISION_COLOUR_MONO; black, white and grey are not counted: nearly
 * every figure has them. 0 for none or NULL. */
uint32_t vision_colour_words(const char *text);
/* How well a profile shows the colours asked for: the mean, over the named colours, of the
 * colour's share saturated at VISION_COLOUR_ENOUGH (a thin curve across the box is enough);
 * for MONO alone, 1 minus the saturated chromatic share. -1 when want is 0. */
float vision_colour_match(uint32_t want, const float *profile);
/* The same for the best-shown of the named colours: 0 when the image shows none of them. A
 * description listing four colours of a figure often names one the pixels render otherwise
 * (a "muted purple" drawn pinkish, a dotted teal line too thin for the preview). */
float vision_colour_match_any(uint32_t want, const float *profile);
/* The share of the box at which a colour counts as fully present: 0.2 %, a one-pixel line
 * across a 500-pixel preview (set on the dev figure sets, scripts/eval_figures.py). */
#define VISION_COLOUR_ENOUGH 0.002f
#endif
