/* Private to vision/: helpers shared by the module's files. */
#ifndef MMRAG_VISION_INTERNAL_H
#define MMRAG_VISION_INTERNAL_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* printf into the caller's error buffer; no-op when err is NULL or errlen is 0. */
static inline void vision_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void vision_set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* UTF-8 of code point cp into o (room for 4 bytes); returns the byte count. */
static inline int vision_utf8_put(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | ((cp >> 6) & 63));
        o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63)); o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* Decode one code point at s (n >= 1 bytes left) into *cp; returns its length. Invalid,
 * truncated, overlong or surrogate sequences and values past U+10FFFF decode as U+FFFD,
 * length 1. */
static inline int vision_utf8_get(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || (size_t)len > n) { *cp = 0xFFFD; return 1; }
    uint32_t v = len == 1 ? c : len == 2 ? c & 31 : len == 3 ? c & 15 : c & 7;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) { *cp = 0xFFFD; return 1; }
        v = v << 6 | (s[i] & 63);
    }
    static const uint32_t minv[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < minv[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) { *cp = 0xFFFD; return 1; }
    *cp = v;
    return len;
}
#endif
