/* Fuzz target: the GGUF reader (kernels/gguf.c) and the engine's model loader on top of
 * it (architecture, hyper-parameters, tensor shapes, tokenizer metadata). Property: a
 * file either loads or gives a message; every tensor the reader accepts lies inside the
 * input (ASan checks the first and last byte against the exact-size buffer). */
#include "tests/fuzz/fuzz.h"
#include "engine/engine.h"
#include "kernels/kernels.h"

static volatile uint8_t sink;

static void walk(const mf_gguf *f) {
    for (int i = 0; i < mf_gguf_kv_count(f); i++) {
        const char *k = mf_gguf_kv_key(f, i);
        FUZZ_ASSERT(k != NULL, "key %d", i);
        const char *s;
        size_t n;
        uint32_t u;
        float x;
        int32_t et;
        uint64_t cnt;
        const void *arr;
        if (mf_gguf_get_str(f, k, &s, &n) == 0 && n) sink ^= (uint8_t)s[n - 1];
        (void)mf_gguf_get_u32(f, k, &u);
        (void)mf_gguf_get_f32(f, k, &x);
        if (mf_gguf_get_arr(f, k, &et, &cnt, &arr) == 0 && et == MF_GGUF_STRING && cnt)
            if (mf_gguf_get_arr_str(f, k, cnt - 1, &s, &n) == 0 && n) sink ^= (uint8_t)s[n - 1];
    }
    for (int i = 0; i < mf_gguf_tensor_count(f); i++) {
        const mf_tensor *t = mf_gguf_tensor_at(f, i);
        FUZZ_ASSERT(t && t->name, "tensor %d", i);
        if (t->nbytes) sink ^= ((const uint8_t *)t->data)[0] ^ ((const uint8_t *)t->data)[t->nbytes - 1];
        FUZZ_ASSERT(mf_gguf_find(f, t->name) != NULL, "tensor %s not found by name", t->name);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mf_gguf *f = NULL;
    char err[512] = "";
    if (mf_gguf_open_buffer(data, size, &f, err, sizeof err) != 0) {
        FUZZ_ASSERT(f == NULL && err[0], "a refused file needs a message");
        return 0;
    }
    walk(f);
    mf_gguf_close(f);
    /* the loader on the same bytes, as `mmrag ask --model FILE` would read them */
    struct mmrag_engine_params p = mmrag_engine_default_params();
    p.n_ctx = 64;
    p.n_threads = 1;
    struct mmrag_engine *e = mmrag_engine_init_from_file(fuzz_write_file(data, size, ".gguf"), p,
                                                         err, sizeof err);
    FUZZ_ASSERT(e || err[0], "a refused model needs a message");
    mmrag_engine_free(e);
    return 0;
}
