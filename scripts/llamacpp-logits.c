/* llamacpp-logits — llama.cpp's side of `make check-llamacpp` (scripts/check-llamacpp.sh):
 * the prompt logits and greedy continuation of one GGUF through libllama, with the same
 * interface and output as tests/tool_logits.c (the engine's side). Not part of the build:
 * the check script compiles it against the static libllama that scripts/build-llamacpp.sh
 * caches, so `make` and `make test` never need llama.cpp.
 * Usage: llamacpp-logits MODEL.gguf [--text TEXT | --ids 1,2,3] [--gen N] [--out FILE]
 *                       [--threads T] [--kv-f16]
 *   --text  tokenized by llama.cpp (special tokens parsed); "ids_text:" is that tokenization
 *           without BOS, "ids:" what is evaluated (BOS prepended when the vocab asks for it)
 *   --out   prompt logits, n_tokens * n_vocab float32, row-major
 *   KV cache F32 unless --kv-f16 (llama.cpp's default), so the comparison sees the weights'
 *   arithmetic rather than the cache's rounding. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static int parse_ids(const char *s, llama_token *ids, int max) {
    int n = 0;
    while (*s && n < max) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s) return -1;
        ids[n++] = (llama_token)v;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: llamacpp-logits MODEL.gguf [--text T|--ids 1,2] [--gen N] [--out F] "
                        "[--threads T] [--kv-f16]\n");
        return 2;
    }
    const char *text = "The capital of France is", *ids_arg = NULL, *out = NULL;
    int gen = 0, threads = 1, kv_f16 = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--text") && i + 1 < argc) text = argv[++i];
        else if (!strcmp(argv[i], "--ids") && i + 1 < argc) ids_arg = argv[++i];
        else if (!strcmp(argv[i], "--gen") && i + 1 < argc) gen = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kv-f16")) kv_f16 = 1;
        else { fprintf(stderr, "llamacpp-logits: unknown argument %s\n", argv[i]); return 2; }
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "llamacpp-logits: cannot load %s\n", argv[1]); return 1; }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int nv = llama_vocab_n_tokens(vocab);
    enum { MAXT = 1024 };
    static llama_token ids[MAXT + 1];
    int n;
    if (ids_arg) {
        n = parse_ids(ids_arg, ids, MAXT);
    } else {
        int off = llama_vocab_get_add_bos(vocab) ? 1 : 0;
        if (off) ids[0] = llama_vocab_bos(vocab);
        n = llama_tokenize(vocab, text, (int32_t)strlen(text), ids + off, MAXT - off, false, true);
        printf("ids_text:");
        for (int i = 0; i < n; i++) printf("%s%d", i ? "," : " ", ids[off + i]);
        putchar('\n');
        if (n >= 0) n += off;
    }
    if (n <= 0) { fprintf(stderr, "llamacpp-logits: no tokens\n"); return 1; }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 2048;
    cp.n_batch = cp.n_ubatch = 512;
    cp.n_threads = cp.n_threads_batch = threads;
    if (!kv_f16) cp.type_k = cp.type_v = GGML_TYPE_F32;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "llamacpp-logits: cannot create a context\n"); return 1; }
    float *all = malloc((size_t)n * (size_t)nv * sizeof *all);
    struct llama_batch b = llama_batch_init(512, 0, 1);
    for (int i0 = 0; i0 < n; i0 += 512) {
        int m = n - i0 < 512 ? n - i0 : 512;
        b.n_tokens = m;
        for (int i = 0; i < m; i++) {
            b.token[i] = ids[i0 + i];
            b.pos[i] = i0 + i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = 0;
            b.logits[i] = 1;
        }
        if (llama_decode(ctx, b)) { fprintf(stderr, "llamacpp-logits: decode failed\n"); return 1; }
        for (int i = 0; i < m; i++)
            memcpy(all + (size_t)(i0 + i) * nv, llama_get_logits_ith(ctx, i), (size_t)nv * sizeof *all);
    }
    llama_batch_free(b);
    char desc[256];
    llama_model_desc(model, desc, sizeof desc);
    printf("desc: %s\nids:", desc);
    for (int i = 0; i < n; i++) printf("%s%d", i ? "," : " ", ids[i]);
    putchar('\n');
    int rc = 0;
    if (out) {
        FILE *f = fopen(out, "wb");
        if (!f || fwrite(all, sizeof *all * (size_t)nv, (size_t)n, f) != (size_t)n) {
            fprintf(stderr, "llamacpp-logits: cannot write %s\n", out);
            rc = 1;
        }
        if (f) fclose(f);
    }
    printf("gen:");
    const float *lg = all + (size_t)(n - 1) * nv;
    char piece[256];
    static char textbuf[16384];
    size_t tl = 0;
    for (int g = 0; g < gen; g++) {
        llama_token best = 0;
        for (int v = 1; v < nv; v++)
            if (lg[v] > lg[best]) best = v;
        printf("%s%d", g ? "," : " ", best);
        int pl = llama_token_to_piece(vocab, best, piece, sizeof piece, 0, true);
        if (pl > 0 && tl + (size_t)pl < sizeof textbuf) { memcpy(textbuf + tl, piece, (size_t)pl); tl += (size_t)pl; }
        if (g + 1 == gen) break;
        if (llama_decode(ctx, llama_batch_get_one(&best, 1))) { rc = 1; break; }
        lg = llama_get_logits_ith(ctx, -1);
    }
    textbuf[tl] = 0;
    printf("\ntext: %s\n", textbuf);
    free(all);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
