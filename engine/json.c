/* JSON state machine for constrained decoding: a byte-at-a-time pushdown automaton that
 * accepts exactly one JSON object (RFC 8259 grammar, UTF-8 checked, whitespace runs
 * limited so a model cannot pad forever), plus the shortest closing suffix of any
 * accepted prefix. */
#include "engine/engine_internal.h"

#include <stdio.h>
#include <string.h>

enum {
    S_START, S_VALUE, S_ARR_FIRST, S_OBJ_FIRST, S_OBJ_KEY, S_COLON, S_AFTER, S_STR, S_ESC,
    S_UHEX, S_LIT, S_NMINUS, S_NZERO, S_NINT, S_NDOT, S_NFRAC, S_NE, S_NESIGN, S_NEXP, S_DONE,
};
#define WS_MAX 24

void engine_json_init(engine_json *j) {
    memset(j, 0, sizeof *j);
    j->st = S_START;
}

static int is_ws(unsigned char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static int is_hex(unsigned char c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static void value_done(engine_json *j) {
    if (j->depth == 0) j->done = 1, j->st = S_DONE;
    else j->st = S_AFTER;
}

static int begin_value(engine_json *j, unsigned char c) {
    switch (c) {
    case '{': case '[':
        if (j->depth >= ENGINE_JSON_DEPTH) return -1;
        j->stack[j->depth++] = c;
        j->st = c == '{' ? S_OBJ_FIRST : S_ARR_FIRST;
        return 0;
    case '"': j->st = S_STR; j->is_key = 0; j->utf8_left = 0; return 0;
    case '-': j->st = S_NMINUS; return 0;
    case '0': j->st = S_NZERO; return 0;
    case 't': j->lit = "true"; break;
    case 'f': j->lit = "false"; break;
    case 'n': j->lit = "null"; break;
    default:
        if (c >= '1' && c <= '9') { j->st = S_NINT; return 0; }
        return -1;
    }
    j->st = S_LIT;
    j->lit_pos = 1;
    return 0;
}

/* string bytes: UTF-8 checked with the exact ranges of RFC 3629 (no overlongs, no
 * surrogates); lit_pos holds the allowed range of the next continuation byte */
static int string_byte(engine_json *j, unsigned char c) {
    if (j->utf8_left) {
        unsigned char lo = 0x80, hi = 0xBF;
        if (j->lit_pos == 1) lo = 0xA0;        /* after E0 */
        else if (j->lit_pos == 2) hi = 0x9F;   /* after ED */
        else if (j->lit_pos == 3) lo = 0x90;   /* after F0 */
        else if (j->lit_pos == 4) hi = 0x8F;   /* after F4 */
        if (c < lo || c > hi) return -1;
        j->lit_pos = 0;
        j->utf8_left--;
        return 0;
    }
    if (c == '"') {
        if (j->is_key) j->st = S_COLON;
        else value_done(j);
        return 0;
    }
    if (c == '\\') { j->st = S_ESC; return 0; }
    if (c < 0x20) return -1;
    if (c < 0x80) return 0;
    j->lit_pos = 0;
    if (c >= 0xC2 && c <= 0xDF) j->utf8_left = 1;
    else if (c >= 0xE0 && c <= 0xEF) j->utf8_left = 2, j->lit_pos = c == 0xE0 ? 1 : c == 0xED ? 2 : 0;
    else if (c >= 0xF0 && c <= 0xF4) j->utf8_left = 3, j->lit_pos = c == 0xF0 ? 3 : c == 0xF4 ? 4 : 0;
    else return -1;
    return 0;
}

static int number_end(engine_json *j, unsigned char c) {
    int terminal = j->st == S_NZERO || j->st == S_NINT || j->st == S_NFRAC || j->st == S_NEXP;
    if (!terminal) return -1;
    value_done(j);
    return engine_json_feed(j, c);
}

int engine_json_feed(engine_json *j, unsigned char c) {
    if (j->st != S_STR && j->st != S_ESC && j->st != S_UHEX && j->st != S_LIT && j->st < S_NMINUS) {
        if (is_ws(c)) {
            if (++j->ws_run > WS_MAX) return -1;
            return 0;
        }
        j->ws_run = 0;
    }
    switch (j->st) {
    case S_START:
        if (c != '{') return -1;
        j->started = 1;
        return begin_value(j, c);
    case S_VALUE: return begin_value(j, c);
    case S_ARR_FIRST:
        if (c == ']') { j->depth--; value_done(j); return 0; }
        return begin_value(j, c);
    case S_OBJ_FIRST:
        if (c == '}') { j->depth--; value_done(j); return 0; }
        /* fall through */
    case S_OBJ_KEY:
        if (c != '"') return -1;
        j->st = S_STR;
        j->is_key = 1;
        j->utf8_left = 0;
        return 0;
    case S_COLON:
        if (c != ':') return -1;
        j->st = S_VALUE;
        return 0;
    case S_AFTER: {
        unsigned char top = j->stack[j->depth - 1];
        if (c == ',') { j->st = top == '{' ? S_OBJ_KEY : S_VALUE; return 0; }
        if ((top == '{' && c == '}') || (top == '[' && c == ']')) {
            j->depth--;
            value_done(j);
            return 0;
        }
        return -1;
    }
    case S_STR: return string_byte(j, c);
    case S_ESC:
        if (c == 'u') { j->st = S_UHEX; j->lit_pos = 0; return 0; }
        if (!strchr("\"\\/bfnrt", c) || !c) return -1;
        j->st = S_STR;
        return 0;
    case S_UHEX:
        /* no surrogate escapes (a lone one is invalid) and no \u0000 */
        if (!is_hex(c) || (j->lit_pos == 0 && (c == 'd' || c == 'D'))) return -1;
        if (j->lit_pos == 3 && c == '0' && j->ws_run == 3) return -1;
        if (c == '0') j->ws_run++; /* ws_run counts zero digits while in an escape */
        if (++j->lit_pos == 4) { j->st = S_STR; j->ws_run = 0; }
        return 0;
    case S_LIT:
        if (c != (unsigned char)j->lit[j->lit_pos]) return -1;
        if (j->lit[++j->lit_pos] == 0) value_done(j);
        return 0;
    case S_NMINUS:
        if (c == '0') { j->st = S_NZERO; return 0; }
        if (is_digit(c)) { j->st = S_NINT; return 0; }
        return -1;
    case S_NZERO: case S_NINT:
        if (is_digit(c) && j->st == S_NINT) return 0;
        if (c == '.') { j->st = S_NDOT; return 0; }
        if (c == 'e' || c == 'E') { j->st = S_NE; return 0; }
        return number_end(j, c);
    case S_NDOT:
        if (!is_digit(c)) return -1;
        j->st = S_NFRAC;
        return 0;
    case S_NFRAC:
        if (is_digit(c)) return 0;
        if (c == 'e' || c == 'E') { j->st = S_NE; return 0; }
        return number_end(j, c);
    case S_NE:
        if (c == '+' || c == '-') { j->st = S_NESIGN; return 0; }
        /* fall through */
    case S_NESIGN:
        if (!is_digit(c)) return -1;
        j->st = S_NEXP;
        return 0;
    case S_NEXP:
        if (is_digit(c)) return 0;
        return number_end(j, c);
    default: return -1; /* S_DONE: nothing may follow */
    }
}

size_t engine_json_close(const engine_json *j, char *buf, size_t size) {
    char tmp[8 + 2 * ENGINE_JSON_DEPTH + 32];
    size_t n = 0;
    engine_json c = *j;
    switch (c.st) {
    case S_START: n += (size_t)snprintf(tmp + n, sizeof tmp - n, "{"); c.depth = 1; c.stack[0] = '{'; break;
    case S_STR:
        while (c.utf8_left) { tmp[n++] = (char)(c.lit_pos == 3 ? 0x90 : c.lit_pos == 1 ? 0xA0 : 0x80); c.lit_pos = 0; c.utf8_left--; }
        tmp[n++] = '"';
        if (c.is_key) n += (size_t)snprintf(tmp + n, sizeof tmp - n, ":null");
        break;
    case S_ESC: tmp[n++] = 'n'; tmp[n++] = '"'; if (c.is_key) n += (size_t)snprintf(tmp + n, sizeof tmp - n, ":null"); break;
    case S_UHEX:
        while (c.lit_pos++ < 4) tmp[n++] = '1';
        tmp[n++] = '"';
        if (c.is_key) n += (size_t)snprintf(tmp + n, sizeof tmp - n, ":null");
        break;
    case S_LIT: n += (size_t)snprintf(tmp + n, sizeof tmp - n, "%s", c.lit + c.lit_pos); break;
    case S_NMINUS: case S_NDOT: case S_NE: case S_NESIGN: tmp[n++] = '0'; break;
    case S_VALUE: n += (size_t)snprintf(tmp + n, sizeof tmp - n, "null"); break;
    case S_OBJ_KEY: n += (size_t)snprintf(tmp + n, sizeof tmp - n, "\"_\":null"); break;
    case S_COLON: n += (size_t)snprintf(tmp + n, sizeof tmp - n, ":null"); break;
    default: break;
    }
    for (int d = c.depth - 1; d >= 0; d--) tmp[n++] = c.stack[d] == '{' ? '}' : ']';
    tmp[n] = 0;
    if (size) {
        size_t k = n < size - 1 ? n : size - 1;
        memcpy(buf, tmp, k);
        buf[k] = 0;
    }
    return n;
}

int mmrag_json_is_object(const char *text, size_t len) {
    engine_json j;
    engine_json_init(&j);
    size_t i = 0;
    for (; i < len && !j.done; i++)
        if (engine_json_feed(&j, (unsigned char)text[i])) return 0;
    if (!j.done) return 0;
    for (; i < len; i++)
        if (!is_ws((unsigned char)text[i])) return 0;
    return 1;
}
