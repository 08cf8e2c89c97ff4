/* Model files: memory-mapped, validated readers for safetensors and GGUF (v2/v3).
 * Part of the kernels module (included by kernels/kernels.h; include that instead).
 * Every offset, size, dtype and shape is checked against the file size before use:
 * a truncated or corrupt file gives an error message, never an out-of-bounds read. */
#ifndef MMRAG_KERNELS_MODELFILE_H
#define MMRAG_KERNELS_MODELFILE_H
#include <stddef.h>
#include <stdint.h>

#define MF_MAX_DIMS 4

typedef struct {
    const char *name;
    int32_t type;           /* kern_type */
    int32_t n_dims;
    int64_t shape[MF_MAX_DIMS]; /* safetensors: as in the file (row-major, outermost first);
                                   GGUF: ne[] as in the file (innermost first) */
    const void *data;       /* points into the mapping */
    size_t nbytes;
} mf_tensor;

/* ---- safetensors ------------------------------------------------------------ */
typedef struct mf_safetensors mf_safetensors;
int mf_safetensors_open(const char *path, mf_safetensors **out, char *err, size_t errlen);
void mf_safetensors_close(mf_safetensors *f);
int mf_safetensors_count(const mf_safetensors *f);
const mf_tensor *mf_safetensors_at(const mf_safetensors *f, int i);
const mf_tensor *mf_safetensors_find(const mf_safetensors *f, const char *name); /* NULL if absent */
/* Copy tensor `name` converted to fp32 into a malloc'd buffer after checking its element
 * count equals `expect` (or any count if expect < 0). NULL + message on failure. */
float *mf_safetensors_load_f32(const mf_safetensors *f, const char *name, int64_t expect,
                               char *err, size_t errlen);

/* ---- GGUF ------------------------------------------------------------------- */
typedef enum {
    MF_GGUF_U8 = 0, MF_GGUF_I8, MF_GGUF_U16, MF_GGUF_I16, MF_GGUF_U32, MF_GGUF_I32,
    MF_GGUF_F32, MF_GGUF_BOOL, MF_GGUF_STRING, MF_GGUF_ARRAY, MF_GGUF_U64, MF_GGUF_I64,
    MF_GGUF_F64,
} mf_gguf_vtype;

typedef struct mf_gguf mf_gguf;
int mf_gguf_open(const char *path, mf_gguf **out, char *err, size_t errlen);
void mf_gguf_close(mf_gguf *f);
uint32_t mf_gguf_version(const mf_gguf *f);
/* metadata lookup: return 0 and fill *out when key exists with a compatible type */
int mf_gguf_get_u32(const mf_gguf *f, const char *key, uint32_t *out); /* any int type */
int mf_gguf_get_f32(const mf_gguf *f, const char *key, float *out);    /* f32/f64 */
int mf_gguf_get_str(const mf_gguf *f, const char *key, const char **s, size_t *len);
/* arrays: element type and count; strings are read by index */
int mf_gguf_get_arr(const mf_gguf *f, const char *key, int32_t *elem_type, uint64_t *n,
                    const void **data);
int mf_gguf_get_arr_str(const mf_gguf *f, const char *key, uint64_t i, const char **s,
                        size_t *len);
int mf_gguf_tensor_count(const mf_gguf *f);
const mf_tensor *mf_gguf_tensor_at(const mf_gguf *f, int i);
const mf_tensor *mf_gguf_find(const mf_gguf *f, const char *name);
/* Parse a GGUF image held in memory (not copied: buf must outlive the handle). */
int mf_gguf_open_buffer(const void *buf, size_t size, mf_gguf **out, char *err, size_t errlen);
/* Metadata enumeration: key count, i-th key (owned by f), value type of a key (-1 absent). */
int mf_gguf_kv_count(const mf_gguf *f);
const char *mf_gguf_kv_key(const mf_gguf *f, int i);
int32_t mf_gguf_kv_type(const mf_gguf *f, const char *key);
#endif
