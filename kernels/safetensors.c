/* safetensors reader: the safetensors half of kernels/modelfile.h.
 *
 * Format: 8-byte little-endian header length N, N bytes of JSON
 *   {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"key": "value"}}
 * then the data section; offsets are relative to its start.
 * The file is memory-mapped read-only. Everything the header says is validated against the
 * file size before any tensor pointer is handed out: header length within the file,
 * offsets within the data section, tensors not overlapping, end - begin equal to
 * product(shape) * dtype size, at most MF_MAX_DIMS dimensions.
 * Dtypes: F32, F16 and BF16 map to kern_type. The other dtypes of the format (I64, U8, ...)
 * are accepted when opening (real checkpoints carry e.g. an I64 `position_ids`) with
 * mf_tensor.type = -1; loading one as fp32 is an error. An unknown dtype string is an
 * error at open time. Tensor data pointers may be unaligned (the format does not promise
 * alignment): read them with memcpy, or use mf_safetensors_load_f32. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/kernels.h"

#define ST_MAX_HEADER (100u << 20) /* the format's own limit on the JSON header */

struct mf_safetensors {
    void *map;
    size_t map_size;
    int n;
    mf_tensor *t;          /* sorted by data offset */
    const char **dtype;    /* dtype string of each tensor (static storage) */
};

static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* dtype string -> element size and kern_type (-1: valid in the format, not loadable). */
static const struct { const char *name; int size; int32_t type; } st_dtypes[] = {
    {"F32", 4, KERN_F32}, {"F16", 2, KERN_F16}, {"BF16", 2, KERN_BF16},
    {"F64", 8, -1}, {"I64", 8, -1}, {"U64", 8, -1}, {"I32", 4, -1}, {"U32", 4, -1},
    {"I16", 2, -1}, {"U16", 2, -1}, {"I8", 1, -1}, {"U8", 1, -1}, {"BOOL", 1, -1},
    {"F8_E4M3", 1, -1}, {"F8_E5M2", 1, -1},
};

static int lookup_dtype(const char *s) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(s, st_dtypes[i].name) == 0) return (int)i;
    return -1;
}

/* A JSON integer in [0, INT64_MAX], else -1. */
static int64_t json_nonneg(const json_t *v) {
    if (!json_is_integer(v)) return -1;
    json_int_t x = json_integer_value(v);
    return x < 0 ? -1 : (int64_t)x;
}

/* Parse one tensor entry into *t; data_len is the size of the data section. */
static int parse_entry(const char *name, json_t *e, const uint8_t *data, uint64_t data_len,
                       mf_tensor *t, char *err, size_t errlen) {
    if (!json_is_object(e)) {
        set_err(err, errlen, "tensor '%s': entry is not an object", name);
        return -1;
    }
    json_t *jd = json_object_get(e, "dtype"), *js = json_object_get(e, "shape"),
           *jo = json_object_get(e, "data_offsets");
    if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo)) {
        set_err(err, errlen, "tensor '%s': needs string dtype, array shape, array data_offsets",
                name);
        return -1;
    }
    int di = lookup_dtype(json_string_value(jd));
    if (di < 0) {
        set_err(err, errlen, "tensor '%s': unknown dtype '%.32s'", name, json_string_value(jd));
        return -1;
    }
    size_t nd = json_array_size(js);
    if (nd > MF_MAX_DIMS) {
        set_err(err, errlen, "tensor '%s': %zu dimensions (at most %d supported)", name, nd,
                MF_MAX_DIMS);
        return -1;
    }
    uint64_t count = 1;
    for (size_t i = 0; i < nd; i++) {
        int64_t d = json_nonneg(json_array_get(js, i));
        if (d < 0) {
            set_err(err, errlen, "tensor '%s': shape[%zu] is not a non-negative integer", name, i);
            return -1;
        }
        t->shape[i] = d;
        if (__builtin_mul_overflow(count, (uint64_t)d, &count)) {
            set_err(err, errlen, "tensor '%s': element count overflows", name);
            return -1;
        }
    }
    for (size_t i = nd; i < MF_MAX_DIMS; i++) t->shape[i] = 1;
    int64_t b = -1, en = -1;
    if (json_array_size(jo) == 2) {
        b = json_nonneg(json_array_get(jo, 0));
        en = json_nonneg(json_array_get(jo, 1));
    }
    if (b < 0 || en < 0 || b > en || (uint64_t)en > data_len) {
        set_err(err, errlen, "tensor '%s': data_offsets invalid or past the end of the data "
                "(%llu bytes)", name, (unsigned long long)data_len);
        return -1;
    }
    uint64_t nbytes;
    if (__builtin_mul_overflow(count, (uint64_t)st_dtypes[di].size, &nbytes) ||
        nbytes != (uint64_t)(en - b)) {
        set_err(err, errlen, "tensor '%s': shape says %llu elements of %s but offsets span "
                "%lld bytes", name, (unsigned long long)count, st_dtypes[di].name,
                (long long)(en - b));
        return -1;
    }
    t->type = st_dtypes[di].type;
    t->n_dims = (int32_t)nd;
    t->data = data + b;
    t->nbytes = (size_t)nbytes;
    return 0;
}

static int cmp_by_offset(const void *a, const void *b) {
    const mf_tensor *x = a, *y = b;
    const uint8_t *px = x->data, *py = y->data;
    if (px != py) return px < py ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* Build the tensor table from the parsed header; 0 or -1 + message. */
static int parse_header(mf_safetensors *f, json_t *root, const uint8_t *data,
                        uint64_t data_len, char *err, size_t errlen) {
    if (!json_is_object(root)) {
        set_err(err, errlen, "header is not a JSON object");
        return -1;
    }
    size_t cap = json_object_size(root);
    f->t = calloc(cap ? cap : 1, sizeof *f->t);
    f->dtype = calloc(cap ? cap : 1, sizeof *f->dtype);
    if (!f->t || !f->dtype) {
        set_err(err, errlen, "out of memory");
        return -1;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(val)) {
                set_err(err, errlen, "__metadata__ is not an object");
                return -1;
            }
            continue;
        }
        mf_tensor *t = &f->t[f->n];
        if (parse_entry(key, val, data, data_len, t, err, errlen) != 0) return -1;
        t->name = strdup(key);
        if (!t->name) {
            set_err(err, errlen, "out of memory");
            return -1;
        }
        f->n++;
    }
    /* sort by offset, then check that no two tensors share bytes */
    qsort(f->t, (size_t)f->n, sizeof *f->t, cmp_by_offset);
    const uint8_t *end = data;
    int last = -1;
    for (int i = 0; i < f->n; i++) {
        const uint8_t *b = f->t[i].data;
        if (f->t[i].nbytes == 0) continue; /* an empty tensor shares no bytes */
        if (b < end) {
            set_err(err, errlen, "tensors '%s' and '%s' overlap", f->t[last].name, f->t[i].name);
            return -1;
        }
        end = b + f->t[i].nbytes;
        last = i;
    }
    /* dtype strings in table order (after the sort) */
    for (int i = 0; i < f->n; i++) {
        json_t *e = json_object_get(root, f->t[i].name);
        f->dtype[i] = st_dtypes[lookup_dtype(json_string_value(json_object_get(e, "dtype")))].name;
    }
    return 0;
}

int mf_safetensors_open(const char *path, mf_safetensors **out, char *err, size_t errlen) {
    char msg[384] = "";
    *out = NULL;
    mf_safetensors *f = calloc(1, sizeof *f);
    if (!f) {
        set_err(err, errlen, "safetensors: out of memory");
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block us */
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(msg, sizeof msg, "cannot open: %s", strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode) || st.st_size < 8) {
        snprintf(msg, sizeof msg, "not a safetensors file (%lld bytes, need at least 8)",
                 (long long)st.st_size);
        goto fail;
    }
    f->map_size = (size_t)st.st_size;
    f->map = mmap(NULL, f->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        snprintf(msg, sizeof msg, "mmap failed: %s", strerror(errno));
        goto fail;
    }
    close(fd);
    fd = -1;
    const uint8_t *p = f->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | p[i];
    if (hlen == 0 || hlen > f->map_size - 8 || hlen > ST_MAX_HEADER) {
        snprintf(msg, sizeof msg, "header length %llu does not fit the file (%zu bytes)",
                 (unsigned long long)hlen, f->map_size);
        goto fail;
    }
    json_error_t jerr;
    json_t *root = json_loadb((const char *)p + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        snprintf(msg, sizeof msg, "header JSON: %s (at byte %d)", jerr.text, jerr.position);
        goto fail;
    }
    int rc = parse_header(f, root, p + 8 + hlen, f->map_size - 8 - hlen, msg, sizeof msg);
    json_decref(root);
    if (rc != 0) goto fail;
    *out = f;
    return 0;
fail:
    if (fd >= 0) close(fd);
    set_err(err, errlen, "safetensors: %s: %s", path, msg);
    mf_safetensors_close(f);
    return -1;
}

void mf_safetensors_close(mf_safetensors *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) free((char *)f->t[i].name);
    free(f->t);
    free(f->dtype);
    if (f->map) munmap(f->map, f->map_size);
    free(f);
}

int mf_safetensors_count(const mf_safetensors *f) { return f ? f->n : 0; }

const mf_tensor *mf_safetensors_at(const mf_safetensors *f, int i) {
    return f && i >= 0 && i < f->n ? &f->t[i] : NULL;
}

const mf_tensor *mf_safetensors_find(const mf_safetensors *f, const char *name) {
    if (!f || !name) return NULL;
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

float *mf_safetensors_load_f32(const mf_safetensors *f, const char *name, int64_t expect,
                               char *err, size_t errlen) {
    const mf_tensor *t = mf_safetensors_find(f, name);
    if (!t) {
        set_err(err, errlen, "safetensors: tensor '%s' not found", name ? name : "(null)");
        return NULL;
    }
    const char *dt = f->dtype[t - f->t];
    if (t->type != KERN_F32 && t->type != KERN_F16 && t->type != KERN_BF16) {
        set_err(err, errlen, "safetensors: tensor '%s' has dtype %s; only F32, F16 and BF16 "
                "can be loaded", name, dt);
        return NULL;
    }
    size_t esz = t->type == KERN_F32 ? 4 : 2;
    int64_t n = (int64_t)(t->nbytes / esz);
    if (expect >= 0 && n != expect) {
        set_err(err, errlen, "safetensors: tensor '%s' has %lld elements, expected %lld", name,
                (long long)n, (long long)expect);
        return NULL;
    }
    float *dst = malloc(n ? (size_t)n * sizeof(float) : 1);
    if (!dst) {
        set_err(err, errlen, "safetensors: out of memory loading '%s'", name);
        return NULL;
    }
    const uint8_t *src = t->data;
    if (t->type == KERN_F32) {
        memcpy(dst, src, (size_t)n * 4); /* source may be unaligned */
    } else {
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = t->type == KERN_F16 ? kern_fp16_to_fp32(h) : kern_bf16_to_fp32(h);
        }
    }
    return dst;
}
