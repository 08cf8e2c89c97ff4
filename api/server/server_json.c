/* api/server/server_json.c — fields of JSON request bodies, each checked with a message
 * ready for a 400 reply, and the box array the routes answer with. */
#include "api/server/server_internal.h"
#include "api/core/answer.h"
#include "index/store.h"

#include <stdio.h>

/* Request field helpers: see server_internal.h. */
int srv_json_int(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out, char *msg,
                 size_t ml) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v)) { snprintf(msg, ml, "\"%s\" must be an integer", key); return -1; }
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) {
        snprintf(msg, ml, "\"%s\" must be in %lld..%lld", key, (long long)lo, (long long)hi);
        return -1;
    }
    *out = x;
    return 0;
}

int srv_json_num(json_t *o, const char *key, double lo, double hi, double *out, char *msg,
                 size_t ml) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) { snprintf(msg, ml, "\"%s\" must be a number", key); return -1; }
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi)) { snprintf(msg, ml, "\"%s\" must be in %g..%g", key, lo, hi); return -1; }
    *out = x;
    return 0;
}

int srv_json_bool(json_t *o, const char *key, int *out, char *msg, size_t ml) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) { snprintf(msg, ml, "\"%s\" must be true or false", key); return -1; }
    *out = json_is_true(v);
    return 0;
}

int srv_json_text(json_t *o, const char *key, const char **out, char *msg, size_t ml) {
    json_t *q = json_object_get(o, key);
    if (!q || !json_is_string(q)) { snprintf(msg, ml, "\"%s\" (a string) is required", key); return -1; }
    size_t n = json_string_length(q);
    if (n == 0 || n > 4096) { snprintf(msg, ml, "\"%s\" must be 1..4096 characters", key); return -1; }
    *out = json_string_value(q);
    return 0;
}

json_t *srv_box_json(const store_box *b) { return answer_json_box(*b); }
