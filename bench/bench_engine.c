/* Engine bench on SmolLM2-135M Q4_1: prompt tokens/s and TTFT for a ~2k-token prompt,
 * decode tokens/s with inter-token latency percentiles, KV bytes/token per cache type,
 * and the PyTorch reference (scripts/golden_llama.py --bench) decode speed side by side,
 * same machine, same thread count. */
#include "engine/engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int argmax(const float *x, int32_t n) {
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static const char *PARA =
    "Retrieval-augmented generation combines a search index with a language model: the "
    "question is used to fetch passages, the passages are numbered and placed in the prompt, "
    "and the model answers while citing them. Long prompts make the first token slower, so "
    "prefill speed matters as much as decoding speed. ";

/* llama-bench style pp/tg for scripts/bench-llamacpp.sh (MMRAG_BENCH_PPTG="512,128,THREADS",
 * on MMRAG_BENCH_MODEL when set, else the shipped SmolLM2):
 * pp = N pseudo-random tokens into an empty cache, tg = M single-token evals from an
 * empty cache, each after one warm-up run, like llama-bench; prints "pp_tok_s X" and
 * "tg_tok_s Y". KV type from MMRAG_BENCH_KV as below. */
static int bench_pptg(const char *path, const char *spec, struct mmrag_engine_params p) {
    int npp = 512, ntg = 128, nt = 1;
    if (sscanf(spec, "%d,%d,%d", &npp, &ntg, &nt) < 2 || npp < 1 || ntg < 1 || nt < 0) {
        printf("bench_engine: bad MMRAG_BENCH_PPTG '%s' (want PP,TG[,THREADS])\n", spec);
        return 1;
    }
    char err[512];
    p.n_threads = nt;
    p.n_ctx = npp + ntg + 16;
    struct mmrag_engine *e = mmrag_engine_init_from_file(path, p, err, sizeof err);
    struct mmrag_session *s = e ? mmrag_session_create(e, err, sizeof err) : NULL;
    if (!s) {
        printf("bench_engine: %s\n", err);
        mmrag_engine_free(e);
        return 1;
    }
    int32_t nv = mmrag_engine_n_vocab(e), *ids = malloc(npp * sizeof *ids);
    uint32_t r = 12345;
    for (int i = 0; i < npp; i++) ids[i] = (int32_t)((r = r * 1664525u + 1013904223u) >> 8) % nv;
    double pp = 0, tg = 0;
    for (int pass = 0; pass < 2; pass++) {  /* pass 0 = warm-up */
        mmrag_session_reset(s);
        double t0 = now_ms();
        if (mmrag_session_eval(s, ids, npp)) break;
        pp = npp / ((now_ms() - t0) / 1e3);
        mmrag_session_reset(s);
        int m = pass ? ntg : 1;
        t0 = now_ms();
        for (int i = 0; i < m; i++)
            if (mmrag_session_eval(s, &ids[i % npp], 1)) break;
        tg = m / ((now_ms() - t0) / 1e3);
    }
    int bad = mmrag_session_n_past(s) != ntg;
    if (bad) printf("bench_engine: eval failed: %s\n", mmrag_session_errmsg(s));
    else printf("threads %d\npp_tok_s %.2f\ntg_tok_s %.2f\n", nt, pp, tg);
    free(ids);
    mmrag_session_free(s);
    mmrag_engine_free(e);
    return bad;
}

int main(void) {
    const char *models = getenv("MMRAG_MODELS") ? getenv("MMRAG_MODELS") : "models";
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", models);
    struct mmrag_engine_params p = mmrag_engine_default_params();
    p.n_ctx = 4096;
    /* MMRAG_BENCH_KV=f16|int4|int4ch: cache type for the runs (default fp32) */
    const char *kvs = getenv("MMRAG_BENCH_KV");
    if (kvs) p.kv_type = !strcmp(kvs, "f16") ? 1 : !strcmp(kvs, "int4") ? 2 : !strcmp(kvs, "int4ch") ? 3 : 0;
    if (getenv("MMRAG_BENCH_PPTG"))
        return bench_pptg(getenv("MMRAG_BENCH_MODEL") ? getenv("MMRAG_BENCH_MODEL") : path,
                          getenv("MMRAG_BENCH_PPTG"), p);
    struct mmrag_engine *e = mmrag_engine_init_from_file(path, p, err, sizeof err);
    if (!e) {
        printf("bench_engine: skipped (%s)\n", err);
        return 0;
    }
    struct mmrag_session *s = mmrag_session_create(e, err, sizeof err);
    int32_t nv = mmrag_engine_n_vocab(e);
    printf("model: %s\n", mmrag_engine_desc(e));
    /* ~2k-token prompt */
    size_t cap = 64 * 1024;
    char *text = malloc(cap), *prompt = malloc(cap + 1024);
    text[0] = 0;
    int32_t *ids = malloc(8192 * sizeof *ids);
    int32_t n = 0;
    while (n < 2000) {
        strcat(text, PARA);
        n = mmrag_engine_tokenize(e, text, strlen(text), NULL, 0, 1);
        n = n < 0 ? -n : n;
    }
    mmrag_engine_chat_prompt(e, NULL, text, prompt, cap + 1024);
    n = mmrag_engine_tokenize(e, prompt, strlen(prompt), ids, 8192, 1);
    double t0 = now_ms();
    if (mmrag_session_eval(s, ids, n)) {
        printf("eval failed: %s\n", mmrag_session_errmsg(s));
        return 1;
    }
    int32_t tok = argmax(mmrag_session_logits(s), nv);
    double ttft = now_ms() - t0;
    /* decode at the end of the 2k context */
    enum { ND = 48 };
    double itl[ND];
    double d0 = now_ms(), last = d0;
    for (int i = 0; i < ND; i++) {
        mmrag_session_eval(s, &tok, 1);
        tok = argmax(mmrag_session_logits(s), nv);
        double t = now_ms();
        itl[i] = t - last;
        last = t;
    }
    double dec_long = ND / ((last - d0) / 1e3);
    /* decode with a short context (what the reference bench measures) */
    struct mmrag_gen_params g = mmrag_gen_default_params();
    g.max_tokens = 64;
    const char *stops[1] = {"\x01never"};
    g.stop = stops;
    g.n_stop = 1;
    struct mmrag_gen_result r;
    mmrag_engine_chat_prompt(e, NULL, "Write a short story about a robot.", prompt, cap);
    mmrag_session_generate(s, prompt, &g, &r);
    double dec_short = r.n_gen > 1 ? (r.n_gen - 1) / ((r.decode_ms) / 1e3) : 0;
    printf("threads: %s, KV cache %s\n", getenv("MMRAG_THREADS") ? getenv("MMRAG_THREADS") : "all",
           kvs ? kvs : "fp32");
    printf("prompt: %d tokens, TTFT %.0f ms, prompt %.1f tokens/s\n", n, ttft, n / (ttft / 1e3));
    printf("decode at 2k context: %.1f tokens/s (ITL p50 %.1f p90 %.1f p99 %.1f ms)\n", dec_long,
           mmrag_percentile(itl, ND, 50), mmrag_percentile(itl, ND, 90), mmrag_percentile(itl, ND, 99));
    printf("decode short context: %.1f tokens/s over %d tokens (TTFT %.1f ms, ITL p50 %.1f p99 %.1f ms)\n",
           dec_short, r.n_gen, r.ttft_ms, mmrag_percentile(r.itl_ms, r.n_gen - 1, 50),
           mmrag_percentile(r.itl_ms, r.n_gen - 1, 99));
    mmrag_gen_result_free(&r);
    static const char *kvn[] = {"fp32", "fp16", "int4", "int4-ch"};
    printf("KV bytes/token:");
    for (int t = 0; t < 4; t++) printf(" %s %.0f", kvn[t], mmrag_engine_kv_bytes_per_token(e, t));
    printf("\n");
    /* PyTorch reference decode, same model file, same threads */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 scripts/golden_llama.py --bench '%s' 16 2>&1", path);
    /* MMRAG_BENCH_REF=0 skips it (quick A/B runs of the engine alone) */
    const char *want_ref = getenv("MMRAG_BENCH_REF");
    FILE *pp = want_ref && strcmp(want_ref, "0") == 0 ? NULL : popen(cmd, "r");
    double ref = 0;
    char line[512];
    while (pp && fgets(line, sizeof line, pp))
        if (sscanf(line, "decode_tok_s %lf", &ref) == 1) break;
    if (pp) pclose(pp);
    if (ref > 0)
        printf("decode tokens/s: mmrag %.1f vs PyTorch reference %.1f (x%.1f)\n", dec_short, ref,
               dec_short / ref);
    else
        printf("decode tokens/s: mmrag %.1f vs PyTorch reference n/a\n", dec_short);
    free(text);
    free(prompt);
    free(ids);
    mmrag_session_free(s);
    mmrag_engine_free(e);
    return 0;
}
