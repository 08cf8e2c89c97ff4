/* vision — image decode/resize (libvips), padding-free patchifier, CLIP-style dual
 * encoder, and the text encoder for chunk text. Other modules include this header only. */
#ifndef MMRAG_VISION_H
#define MMRAG_VISION_H
#include "vision/textenc.h"
#include "vision/clip.h"
#endif
