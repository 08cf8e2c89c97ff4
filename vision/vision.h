/* vision — image decode/resize (libvips), padding-free patchifier, CLIP-style dual
 * encoder, the text encoder for chunk text, and named-colour profiles. Other modules
 * include this header only. */
#ifndef MMRAG_VISION_H
#define MMRAG_VISION_H
#include "vision/textenc.h"
#include "vision/clip.h"
#include "vision/colour.h"
#endif
