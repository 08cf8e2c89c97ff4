/* GGUF reader (v2/v3): mmap the file, parse header, metadata and tensor infos with every
 * length, count and offset checked against the bytes that remain, so a truncated or
 * corrupt file yields a message instead of an out-of-bounds read. Little-endian hosts. */
#include "kernels/kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAX_NEST 8          /* nested array depth accepted */
#define GGUF_DEFAULT_ALIGN 32

typedef struct {
    char *key;                   /* NUL-terminated copy */
    int32_t type;                /* mf_gguf_vtype */
    const uint8_t *val;          /* scalar bytes in the mapping (not for strings/arrays) */
    char *str;                   /* string value: NUL-terminated copy */
    size_t str_len;
    int32_t arr_type;            /* array element type */
    uint64_t arr_n;
    const uint8_t *arr_data;     /* first element in the mapping */
    char **arr_str;              /* string arrays: NUL-terminated copies */
    size_t *arr_str_len;
} gguf_kv;

struct mf_gguf {
    uint8_t *map;
    size_t size;
    uint32_t version;
    uint64_t n_kv;
    gguf_kv *kv;
    int n_tensors;
    mf_tensor *tensors;
    char **tensor_names;
    size_t alignment;
    size_t data_offset;
    int owns_map;                /* 1: munmap on close; 0: caller's buffer */
};

typedef struct {
    const uint8_t *p;
    size_t pos, size;
    char *err;
    size_t errlen;
} cursor;

static int fail(cursor *c, const char *fmt, ...) {
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->err && c->errlen) snprintf(c->err, c->errlen, "gguf: %s (at byte %zu)", msg, c->pos);
    return -1;
}

static int need(cursor *c, uint64_t n) {
    if (n > c->size - c->pos) return fail(c, "truncated: need %llu bytes, %zu left",
                                          (unsigned long long)n, c->size - c->pos);
    return 0;
}

static int rd_u32(cursor *c, uint32_t *v) {
    if (need(c, 4)) return -1;
    memcpy(v, c->p + c->pos, 4);
    c->pos += 4;
    return 0;
}

static int rd_u64(cursor *c, uint64_t *v) {
    if (need(c, 8)) return -1;
    memcpy(v, c->p + c->pos, 8);
    c->pos += 8;
    return 0;
}

/* Reads a length-prefixed string; returns a malloc'd NUL-terminated copy. */
static int rd_str(cursor *c, char **out, size_t *len) {
    uint64_t n;
    if (rd_u64(c, &n) || need(c, n)) return -1;
    char *s = malloc((size_t)n + 1);
    if (!s) return fail(c, "out of memory");
    memcpy(s, c->p + c->pos, (size_t)n);
    s[n] = 0;
    c->pos += (size_t)n;
    *out = s;
    if (len) *len = (size_t)n;
    return 0;
}

static size_t scalar_size(int32_t t) {
    switch (t) {
    case MF_GGUF_U8: case MF_GGUF_I8: case MF_GGUF_BOOL: return 1;
    case MF_GGUF_U16: case MF_GGUF_I16: return 2;
    case MF_GGUF_U32: case MF_GGUF_I32: case MF_GGUF_F32: return 4;
    case MF_GGUF_U64: case MF_GGUF_I64: case MF_GGUF_F64: return 8;
    default: return 0;
    }
}

/* Skips one value of type t (used for nested arrays, which are validated, not indexed). */
static int skip_value(cursor *c, int32_t t, int depth) {
    size_t sz = scalar_size(t);
    if (sz) {
        if (need(c, sz)) return -1;
        c->pos += sz;
        return 0;
    }
    if (t == MF_GGUF_STRING) {
        uint64_t n;
        if (rd_u64(c, &n) || need(c, n)) return -1;
        c->pos += (size_t)n;
        return 0;
    }
    if (t != MF_GGUF_ARRAY) return fail(c, "unknown value type %d", (int)t);
    if (depth >= GGUF_MAX_NEST) return fail(c, "arrays nested deeper than %d", GGUF_MAX_NEST);
    uint32_t et;
    uint64_t n;
    if (rd_u32(c, &et) || rd_u64(c, &n)) return -1;
    size_t esz = scalar_size((int32_t)et);
    if (esz) {
        if (n > (c->size - c->pos) / esz) return fail(c, "array of %llu elements overruns file",
                                                      (unsigned long long)n);
        c->pos += (size_t)n * esz;
        return 0;
    }
    /* each string/array element takes at least 8 bytes: bound n before looping */
    if (n > (c->size - c->pos) / 8) return fail(c, "array count %llu overruns file",
                                                (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++)
        if (skip_value(c, (int32_t)et, depth + 1)) return -1;
    return 0;
}

static int read_kv(cursor *c, gguf_kv *kv) {
    uint32_t t;
    if (rd_str(c, &kv->key, NULL) || rd_u32(c, &t)) return -1;
    kv->type = (int32_t)t;
    size_t sz = scalar_size(kv->type);
    if (sz) {
        if (need(c, sz)) return -1;
        kv->val = c->p + c->pos;
        c->pos += sz;
        return 0;
    }
    if (kv->type == MF_GGUF_STRING) return rd_str(c, &kv->str, &kv->str_len);
    if (kv->type != MF_GGUF_ARRAY) return fail(c, "key '%s': unknown value type %u", kv->key, t);
    uint32_t et;
    uint64_t n;
    if (rd_u32(c, &et) || rd_u64(c, &n)) return -1;
    kv->arr_type = (int32_t)et;
    kv->arr_n = n;
    kv->arr_data = c->p + c->pos;
    size_t esz = scalar_size(kv->arr_type);
    if (esz) {
        if (n > (c->size - c->pos) / esz)
            return fail(c, "key '%s': array of %llu elements overruns file", kv->key,
                        (unsigned long long)n);
        c->pos += (size_t)n * esz;
        return 0;
    }
    if (n > (c->size - c->pos) / 8)
        return fail(c, "key '%s': array count %llu overruns file", kv->key, (unsigned long long)n);
    if (kv->arr_type == MF_GGUF_STRING) {
        kv->arr_str = calloc(n ? n : 1, sizeof *kv->arr_str);
        kv->arr_str_len = calloc(n ? n : 1, sizeof *kv->arr_str_len);
        if (!kv->arr_str || !kv->arr_str_len) return fail(c, "out of memory");
        for (uint64_t i = 0; i < n; i++)
            if (rd_str(c, &kv->arr_str[i], &kv->arr_str_len[i])) return -1;
        return 0;
    }
    if (kv->arr_type != MF_GGUF_ARRAY)
        return fail(c, "key '%s': unknown array element type %u", kv->key, et);
    for (uint64_t i = 0; i < n; i++)
        if (skip_value(c, MF_GGUF_ARRAY, 1)) return -1;
    return 0;
}

static const gguf_kv *find_kv(const mf_gguf *f, const char *key) {
    if (!f || !key) return NULL;
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (strcmp(f->kv[i].key, key) == 0) return &f->kv[i];
    return NULL;
}

static int read_tensor(cursor *c, mf_gguf *f, int i) {
    mf_tensor *t = &f->tensors[i];
    uint32_t nd, type;
    if (rd_str(c, &f->tensor_names[i], NULL)) return -1;
    t->name = f->tensor_names[i];
    if (rd_u32(c, &nd)) return -1;
    if (nd < 1 || nd > MF_MAX_DIMS)
        return fail(c, "tensor '%s': %u dimensions (1..%d allowed)", t->name, nd, MF_MAX_DIMS);
    t->n_dims = (int32_t)nd;
    int64_t rows = 1;
    for (int d = 0; d < MF_MAX_DIMS; d++) t->shape[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t ne;
        if (rd_u64(c, &ne)) return -1;
        if (ne == 0 || ne > (uint64_t)INT64_MAX)
            return fail(c, "tensor '%s': bad dimension %llu", t->name, (unsigned long long)ne);
        t->shape[d] = (int64_t)ne;
        if (d > 0) {
            if (rows > INT64_MAX / (int64_t)ne)
                return fail(c, "tensor '%s': element count overflows", t->name);
            rows *= (int64_t)ne;
        }
    }
    if (rd_u32(c, &type)) return -1;
    t->type = (int32_t)type;
    uint64_t off;
    if (rd_u64(c, &off)) return -1;
    int64_t blk = type > 1000 || type == KERN_Q8_K ? 0 : kern_type_block_elems((kern_type)type);
    if (blk == 0)
        return fail(c, "tensor '%s': unsupported type %u (supported: %s)", t->name, type,
                    kern_type_supported_list());
    size_t row = kern_type_row_bytes((kern_type)type, t->shape[0]);
    if (row == 0)
        return fail(c, "tensor '%s': type %s needs rows of a multiple of %lld elements, not %lld",
                    t->name, kern_type_name((kern_type)type), (long long)blk, (long long)t->shape[0]);
    if ((uint64_t)rows > SIZE_MAX / row)
        return fail(c, "tensor '%s': byte size overflows", t->name);
    t->nbytes = row * (size_t)rows;
    t->data = (const void *)(uintptr_t)off; /* fixed up once the data offset is known */
    return 0;
}

static void gguf_free_parts(mf_gguf *f) {
    if (f->kv) {
        for (uint64_t i = 0; i < f->n_kv; i++) {
            gguf_kv *kv = &f->kv[i];
            free(kv->key);
            free(kv->str);
            if (kv->arr_str)
                for (uint64_t j = 0; j < kv->arr_n; j++) free(kv->arr_str[j]);
            free(kv->arr_str);
            free(kv->arr_str_len);
        }
        free(f->kv);
    }
    if (f->tensor_names)
        for (int i = 0; i < f->n_tensors; i++) free(f->tensor_names[i]);
    free(f->tensor_names);
    free(f->tensors);
}

/* Parses a GGUF image already in memory (the mapping); f->map/size set by the caller. */
static int gguf_parse(mf_gguf *f, char *err, size_t errlen) {
    cursor c = {f->map, 0, f->size, err, errlen};
    uint32_t magic, ver;
    uint64_t nt, nkv;
    if (rd_u32(&c, &magic)) return -1;
    if (memcmp(&magic, "GGUF", 4) != 0) return fail(&c, "not a GGUF file (bad magic)");
    if (rd_u32(&c, &ver)) return -1;
    if (ver != 2 && ver != 3) return fail(&c, "unsupported GGUF version %u (2 or 3 needed)", ver);
    f->version = ver;
    if (rd_u64(&c, &nt) || rd_u64(&c, &nkv)) return -1;
    /* a kv takes >= 12 bytes, a tensor info >= 24: bound counts before allocating */
    if (nkv > 65536 || nt > 65536)
        return fail(&c, "implausible counts: %llu keys, %llu tensors", (unsigned long long)nkv,
                    (unsigned long long)nt);
    if (nkv > (c.size - c.pos) / 12) return fail(&c, "metadata count %llu overruns file",
                                                 (unsigned long long)nkv);
    if (nt > (c.size - c.pos) / 24 || nt > INT32_MAX)
        return fail(&c, "tensor count %llu overruns file", (unsigned long long)nt);
    f->kv = calloc(nkv ? nkv : 1, sizeof *f->kv);
    if (!f->kv) return fail(&c, "out of memory");
    for (uint64_t i = 0; i < nkv; i++) {
        f->n_kv = i + 1;
        if (read_kv(&c, &f->kv[i])) return -1;
        for (uint64_t j = 0; j < i; j++)
            if (strcmp(f->kv[j].key, f->kv[i].key) == 0)
                return fail(&c, "duplicate key '%s'", f->kv[i].key);
    }
    f->alignment = GGUF_DEFAULT_ALIGN;
    const gguf_kv *al = find_kv(f, "general.alignment");
    if (al) {
        uint32_t a;
        if (mf_gguf_get_u32(f, "general.alignment", &a) || a == 0 || (a & (a - 1)) || a > 65536)
            return fail(&c, "bad general.alignment");
        f->alignment = a;
    }
    f->tensors = calloc(nt ? nt : 1, sizeof *f->tensors);
    f->tensor_names = calloc(nt ? nt : 1, sizeof *f->tensor_names);
    if (!f->tensors || !f->tensor_names) return fail(&c, "out of memory");
    for (uint64_t i = 0; i < nt; i++) {
        f->n_tensors = (int)i + 1;
        if (read_tensor(&c, f, (int)i)) return -1;
    }
    size_t data = (c.pos + f->alignment - 1) / f->alignment * f->alignment;
    if (data > f->size && nt > 0) return fail(&c, "tensor data section missing");
    f->data_offset = data;
    for (int i = 0; i < f->n_tensors; i++) {
        mf_tensor *t = &f->tensors[i];
        uint64_t off = (uint64_t)(uintptr_t)t->data;
        if (off % f->alignment) return fail(&c, "tensor '%s': misaligned offset", t->name);
        if (off > f->size - data || t->nbytes > f->size - data - off)
            return fail(&c, "tensor '%s': data [%llu, +%zu) beyond end of file", t->name,
                        (unsigned long long)off, t->nbytes);
        t->data = f->map + data + off;
        for (int j = 0; j < i; j++)
            if (strcmp(f->tensors[j].name, t->name) == 0)
                return fail(&c, "duplicate tensor '%s'", t->name);
    }
    return 0;
}

int mf_gguf_open(const char *path, mf_gguf **out, char *err, size_t errlen) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "gguf: cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size < 24) {
        snprintf(err, errlen, "gguf: %s: not a regular file of at least 24 bytes", path);
        close(fd);
        return -1;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(err, errlen, "gguf: mmap %s: %s", path, strerror(errno));
        return -1;
    }
    mf_gguf *f = calloc(1, sizeof *f);
    if (!f) {
        munmap(map, (size_t)st.st_size);
        snprintf(err, errlen, "gguf: out of memory");
        return -1;
    }
    f->map = map;
    f->size = (size_t)st.st_size;
    f->owns_map = 1;
    char msg[400];
    if (gguf_parse(f, msg, sizeof msg)) {
        snprintf(err, errlen, "%s: %s", path, msg);
        mf_gguf_close(f);
        return -1;
    }
    *out = f;
    return 0;
}

int mf_gguf_open_buffer(const void *buf, size_t size, mf_gguf **out, char *err,
                        size_t errlen) {
    *out = NULL;
    mf_gguf *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(err, errlen, "gguf: out of memory");
        return -1;
    }
    f->map = (uint8_t *)(uintptr_t)buf;
    f->size = buf ? size : 0;
    if (f->size < 24) {
        snprintf(err, errlen, "gguf: buffer of %zu bytes is too small", f->size);
        free(f);
        return -1;
    }
    if (gguf_parse(f, err, errlen)) {
        mf_gguf_close(f);
        return -1;
    }
    *out = f;
    return 0;
}

void mf_gguf_close(mf_gguf *f) {
    if (!f) return;
    gguf_free_parts(f);
    if (f->map && f->owns_map) munmap(f->map, f->size);
    free(f);
}

uint32_t mf_gguf_version(const mf_gguf *f) { return f ? f->version : 0; }

static int int_value(int32_t t, const uint8_t *p, int64_t *v) {
    switch (t) {
    case MF_GGUF_U8: case MF_GGUF_BOOL: *v = p[0]; return 0;
    case MF_GGUF_I8: *v = (int8_t)p[0]; return 0;
    case MF_GGUF_U16: { uint16_t x; memcpy(&x, p, 2); *v = x; return 0; }
    case MF_GGUF_I16: { int16_t x; memcpy(&x, p, 2); *v = x; return 0; }
    case MF_GGUF_U32: { uint32_t x; memcpy(&x, p, 4); *v = x; return 0; }
    case MF_GGUF_I32: { int32_t x; memcpy(&x, p, 4); *v = x; return 0; }
    case MF_GGUF_U64: { uint64_t x; memcpy(&x, p, 8); if (x > INT64_MAX) return -1; *v = (int64_t)x; return 0; }
    case MF_GGUF_I64: { int64_t x; memcpy(&x, p, 8); *v = x; return 0; }
    default: return -1;
    }
}

int mf_gguf_get_u32(const mf_gguf *f, const char *key, uint32_t *out) {
    const gguf_kv *kv = find_kv(f, key);
    int64_t v;
    if (!kv || !kv->val || int_value(kv->type, kv->val, &v) || v < 0 || v > UINT32_MAX) return -1;
    *out = (uint32_t)v;
    return 0;
}

int mf_gguf_get_f32(const mf_gguf *f, const char *key, float *out) {
    const gguf_kv *kv = find_kv(f, key);
    if (!kv || !kv->val) return -1;
    if (kv->type == MF_GGUF_F32) { memcpy(out, kv->val, 4); return 0; }
    if (kv->type == MF_GGUF_F64) { double d; memcpy(&d, kv->val, 8); *out = (float)d; return 0; }
    return -1;
}

int mf_gguf_get_str(const mf_gguf *f, const char *key, const char **s, size_t *len) {
    const gguf_kv *kv = find_kv(f, key);
    if (!kv || kv->type != MF_GGUF_STRING) return -1;
    *s = kv->str;
    if (len) *len = kv->str_len;
    return 0;
}

int mf_gguf_get_arr(const mf_gguf *f, const char *key, int32_t *elem_type, uint64_t *n,
                    const void **data) {
    const gguf_kv *kv = find_kv(f, key);
    if (!kv || kv->type != MF_GGUF_ARRAY) return -1;
    if (elem_type) *elem_type = kv->arr_type;
    if (n) *n = kv->arr_n;
    if (data) *data = kv->arr_data;
    return 0;
}

int mf_gguf_get_arr_str(const mf_gguf *f, const char *key, uint64_t i, const char **s,
                        size_t *len) {
    const gguf_kv *kv = find_kv(f, key);
    if (!kv || kv->type != MF_GGUF_ARRAY || kv->arr_type != MF_GGUF_STRING || i >= kv->arr_n)
        return -1;
    *s = kv->arr_str[i];
    if (len) *len = kv->arr_str_len[i];
    return 0;
}

int mf_gguf_tensor_count(const mf_gguf *f) { return f ? f->n_tensors : 0; }

const mf_tensor *mf_gguf_tensor_at(const mf_gguf *f, int i) {
    return f && i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}

const mf_tensor *mf_gguf_find(const mf_gguf *f, const char *name) {
    if (!f || !name) return NULL;
    for (int i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

/* Extra (GGUF section additions): key count / key names for tools. */
int mf_gguf_kv_count(const mf_gguf *f) { return f ? (int)f->n_kv : 0; }
const char *mf_gguf_kv_key(const mf_gguf *f, int i) {
    return f && i >= 0 && (uint64_t)i < f->n_kv ? f->kv[i].key : NULL;
}
int32_t mf_gguf_kv_type(const mf_gguf *f, const char *key) {
    const gguf_kv *kv = find_kv(f, key);
    return kv ? kv->type : -1;
}
