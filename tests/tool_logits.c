/* tool_logits — the engine's prompt logits and greedy continuation for one GGUF, the mmrag
 * side of `make check-llamacpp` (scripts/check-llamacpp.sh; tests/tool_llamacpp_logits.c is
 * the llama.cpp side with the same interface).
 * Usage: tool_logits MODEL.gguf [--text TEXT | --ids 1,2,3] [--gen N] [--out FILE]
 *                   [--threads T] [--bos] [--seq] [--ref FILE [--tol REL]]
 *   --text  tokenized by the engine (special tokens parsed), BOS prepended with --bos
 *   --ids   token ids as given (so both sides see the same tokens)
 *   --gen   greedy tokens after the prompt (default 0)
 *   --seq   evaluates the prompt one token at a time (the decoding path: activations
 *           rounded to q8 before quantized weights) instead of in 512-token chunks (fp32
 *           GEMM on dequantized weights); the two differ by that rounding alone
 *   --out   writes the prompt logits, n_tokens * n_vocab little-endian float32, row-major
 *   --ref   compares the prompt logits with a reference file of the same layout (llama.cpp's)
 *           and prints "compare: ..." (per row: max |Δ| over the vocabulary, relative to
 *           the row's logit range max - min; top-1 agreement; KL(ref || ours) in nats);
 *           with --tol the exit status is 3 when the worst relative difference exceeds REL
 * Prints "desc: ...", "ids: 1,2,3", "gen: 4,5,6" and "text: ..." lines on stdout. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/engine.h"

static int parse_ids(const char *s, int32_t *ids, int32_t max) {
    int32_t n = 0;
    while (*s && n < max) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s) return -1;
        ids[n++] = (int32_t)v;
        s = *end == ',' ? end + 1 : end;
    }
    return n;
}

/* log-sum-exp of a row */
static double lse(const float *x, int32_t nv) {
    double m = x[0], s = 0;
    for (int32_t v = 1; v < nv; v++) m = x[v] > m ? x[v] : m;
    for (int32_t v = 0; v < nv; v++) s += exp(x[v] - m);
    return m + log(s);
}

static int compare(const char *path, const float *all, int32_t n, int32_t nv, double tol) {
    FILE *f = fopen(path, "rb");
    float *r = malloc((size_t)nv * sizeof *r);
    if (!f || !r) { fprintf(stderr, "tool_logits: cannot read %s\n", path); free(r); if (f) fclose(f); return 1; }
    double worst_abs = 0, worst_rel = 0, worst_kl = 0, sum_rel = 0;
    int top1 = 0, worst_row = 0;
    for (int32_t i = 0; i < n; i++) {
        if (fread(r, sizeof *r, (size_t)nv, f) != (size_t)nv) {
            fprintf(stderr, "tool_logits: %s has fewer than %d rows of %d\n", path, n, nv);
            fclose(f); free(r);
            return 1;
        }
        const float *a = all + (size_t)i * nv;
        double d = 0, lo = r[0], hi = r[0];
        int32_t ba = 0, br = 0;
        for (int32_t v = 0; v < nv; v++) {
            double x = fabs((double)a[v] - r[v]);
            d = x > d ? x : d;
            lo = r[v] < lo ? r[v] : lo;
            hi = r[v] > hi ? r[v] : hi;
            if (a[v] > a[ba]) ba = v;
            if (r[v] > r[br]) br = v;
        }
        double la = lse(a, nv), lr = lse(r, nv), kl = 0;
        for (int32_t v = 0; v < nv; v++) {
            double pr = exp(r[v] - lr);
            kl += pr * ((r[v] - lr) - (a[v] - la));
        }
        double rel = d / (hi - lo > 0 ? hi - lo : 1);
        top1 += ba == br;
        sum_rel += rel;
        if (d > worst_abs) worst_abs = d;
        if (rel > worst_rel) worst_rel = rel, worst_row = i;
        if (kl > worst_kl) worst_kl = kl;
    }
    fclose(f);
    free(r);
    printf("compare: rows %d max_abs %.4g max_rel %.4g (row %d) mean_rel %.4g top1 %d/%d max_kl %.3g\n",
           n, worst_abs, worst_rel, worst_row, sum_rel / n, top1, n, worst_kl);
    return tol > 0 && worst_rel > tol ? 3 : 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: tool_logits MODEL.gguf [--text T|--ids 1,2] [--gen N] [--out F] "
                        "[--threads T] [--bos]\n");
        return 2;
    }
    const char *text = "The capital of France is", *ids_arg = NULL, *out = NULL;
    const char *ref = NULL;
    double tol = 0;
    int gen = 0, bos = 0, seq = 0;
    struct mmrag_engine_params p = mmrag_engine_default_params();
    p.n_ctx = 2048;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--text") && i + 1 < argc) text = argv[++i];
        else if (!strcmp(argv[i], "--ids") && i + 1 < argc) ids_arg = argv[++i];
        else if (!strcmp(argv[i], "--gen") && i + 1 < argc) gen = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) p.n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bos")) bos = 1;
        else if (!strcmp(argv[i], "--seq")) seq = 1;
        else if (!strcmp(argv[i], "--ref") && i + 1 < argc) ref = argv[++i];
        else if (!strcmp(argv[i], "--tol") && i + 1 < argc) tol = atof(argv[++i]);
        else { fprintf(stderr, "tool_logits: unknown argument %s\n", argv[i]); return 2; }
    }
    char err[512];
    struct mmrag_engine *e = mmrag_engine_init_from_file(argv[1], p, err, sizeof err);
    if (!e) { fprintf(stderr, "tool_logits: %s\n", err); return 1; }
    enum { MAXT = 1024 };
    static int32_t ids[MAXT + 1];
    int32_t n;
    if (ids_arg) {
        n = parse_ids(ids_arg, ids, MAXT);
    } else {
        int32_t off = 0;
        if (bos) {
            /* the BOS id: tokenizer.ggml.bos_token_id is not exported; <bos> / <s> texts */
            const char *cands[] = {"<bos>", "<s>", "<|begin_of_text|>", "<|endoftext|>"};
            for (size_t c = 0; c < sizeof cands / sizeof *cands && !off; c++)
                if (mmrag_engine_tokenize(e, cands[c], strlen(cands[c]), ids, 1, 1) == 1) off = 1;
        }
        n = mmrag_engine_tokenize(e, text, strlen(text), ids + off, MAXT - off, 1);
        if (n >= 0) n += off;
    }
    if (n <= 0) { fprintf(stderr, "tool_logits: no tokens\n"); mmrag_engine_free(e); return 1; }
    struct mmrag_session *s = mmrag_session_create(e, err, sizeof err);
    if (!s) { fprintf(stderr, "tool_logits: %s\n", err); mmrag_engine_free(e); return 1; }
    int32_t nv = mmrag_engine_n_vocab(e);
    float *all = malloc((size_t)n * (size_t)nv * sizeof *all);
    int rc = all ? 0 : -1;
    for (int32_t i = 0; seq && !rc && i < n; i++) {
        rc = mmrag_session_eval(s, ids + i, 1);
        if (!rc) memcpy(all + (size_t)i * nv, mmrag_session_logits(s), (size_t)nv * sizeof *all);
    }
    if (!seq && !rc) rc = mmrag_session_eval_all(s, ids, n, all);
    if (rc) {
        fprintf(stderr, "tool_logits: eval: %s\n", mmrag_session_errmsg(s));
        free(all); mmrag_session_free(s); mmrag_engine_free(e);
        return 1;
    }
    printf("desc: %s\nids:", mmrag_engine_desc(e));
    for (int32_t i = 0; i < n; i++) printf("%s%d", i ? "," : " ", ids[i]);
    putchar('\n');
    if (out) {
        FILE *f = fopen(out, "wb");
        if (!f || fwrite(all, sizeof *all * (size_t)nv, (size_t)n, f) != (size_t)n) {
            fprintf(stderr, "tool_logits: cannot write %s\n", out);
            rc = 1;
        }
        if (f) fclose(f);
    }
    int cmp = ref && !rc ? compare(ref, all, n, nv, tol) : 0;
    if (cmp == 1) rc = 1;
    printf("gen:");
    const float *lg = all + (size_t)(n - 1) * (size_t)nv;
    char piece[256];
    static char textbuf[16384];
    size_t tl = 0;
    for (int g = 0; g < gen && !rc; g++) {
        int32_t best = 0;
        for (int32_t v = 1; v < nv; v++)
            if (lg[v] > lg[best]) best = v;
        printf("%s%d", g ? "," : " ", best);
        int32_t pl = mmrag_engine_token_piece(e, best, piece, sizeof piece);
        if (pl > 0 && tl + (size_t)pl < sizeof textbuf) { memcpy(textbuf + tl, piece, (size_t)pl); tl += (size_t)pl; }
        if (g + 1 == gen) break;
        if (mmrag_session_eval(s, &best, 1)) { rc = 1; break; }
        lg = mmrag_session_logits(s);
    }
    textbuf[tl] = 0;
    printf("\ntext: %s\n", textbuf);
    free(all);
    mmrag_session_free(s);
    mmrag_engine_free(e);
    return rc ? rc : cmp;
}
