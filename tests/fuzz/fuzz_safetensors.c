/* Fuzz target: the safetensors reader (kernels/safetensors.c): JSON header, dtypes,
 * shapes, offsets. Property: a file opens or gives a message; every accepted tensor lies
 * inside the file and its fp32 load has exactly its element count. */
#include "tests/fuzz/fuzz.h"
#include "kernels/kernels.h"

static volatile float sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mf_safetensors *f = NULL;
    char err[512] = "";
    if (mf_safetensors_open(fuzz_write_file(data, size, ".safetensors"), &f, err, sizeof err)) {
        FUZZ_ASSERT(f == NULL && err[0], "a refused file needs a message");
        return 0;
    }
    for (int i = 0; i < mf_safetensors_count(f); i++) {
        const mf_tensor *t = mf_safetensors_at(f, i);
        FUZZ_ASSERT(t && t->name && mf_safetensors_find(f, t->name), "tensor %d", i);
        int64_t n = 1;
        for (int d = 0; d < t->n_dims; d++) n *= t->shape[d];
        if (n > (1 << 22)) continue;   /* a 16 MiB fp32 copy is enough to check */
        float *x = mf_safetensors_load_f32(f, t->name, n, err, sizeof err);
        if (x && n) sink += x[0] + x[n - 1];
        free(x);
    }
    mf_safetensors_close(f);
    return 0;
}
