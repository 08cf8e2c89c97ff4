/* Fuzz target: both tokenizers on any bytes. The first byte picks one:
 *  even: the MiniLM WordPiece tokenizer (vision/wordpiece.c, via textenc_tokenize):
 *        [CLS] first, [SEP] last, ids inside the vocabulary, the sizing call agrees;
 *  odd:  the engine's byte-level BPE (SmolLM2's GGUF vocabulary, engine/tokenizer.c):
 *        ids inside the vocabulary, and detokenize(tokenize(text)) gives the text back
 *        byte for byte (parse_special off), except that a byte the vocabulary has no
 *        token for comes back as U+FFFD (never as a control token).
 * Models come from $MMRAG_MODELS (default "models"), loaded once. */
#include "tests/fuzz/fuzz.h"
#include "engine/engine.h"
#include "vision/textenc.h"

static textenc *te;
static struct mmrag_engine *eng;
static unsigned char has_byte[256];   /* the vocabulary spells this byte on its own */

/* Which single bytes round-trip, asked through the public API once. */
static void probe_bytes(void) {
    for (int b = 1; b < 256; b++) {
        char in[2] = {(char)b, 0}, out[64];
        int32_t ids[8];
        int32_t n = mmrag_engine_tokenize(eng, in, 1, ids, 8, 0);
        int32_t m = n > 0 && n <= 8 ? mmrag_engine_detokenize(eng, ids, n, out, sizeof out) : -1;
        has_byte[b] = m == 1 && (unsigned char)out[0] == b;
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    char dir[1024], err[512];
    const char *models = fuzz_env("MMRAG_MODELS", "models");
    snprintf(dir, sizeof dir, "%s/minilm", models);
    if (textenc_create(dir, NULL, &te, err, sizeof err)) { fprintf(stderr, "%s\n", err); abort(); }
    snprintf(dir, sizeof dir, "%s/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", models);
    struct mmrag_engine_params p = mmrag_engine_default_params();
    p.n_ctx = 64;
    p.n_threads = 1;
    eng = mmrag_engine_init_from_file(dir, p, err, sizeof err);
    if (!eng) { fprintf(stderr, "%s\n", err); abort(); }
    probe_bytes();
    return 0;
}

static void wordpiece(const char *text) {
    int32_t n = textenc_tokenize(te, text, NULL, 0);
    FUZZ_ASSERT(n <= 0, "a sizing call returns -count, got %d", n);
    n = -n;
    FUZZ_ASSERT(n >= 2 && n <= TEXTENC_MAX_TOKENS, "count %d", n);
    int32_t ids[TEXTENC_MAX_TOKENS];
    FUZZ_ASSERT(textenc_tokenize(te, text, ids, n) == n, "second call disagrees");
    FUZZ_ASSERT(ids[0] == 101 && ids[n - 1] == 102, "[CLS] %d ... [SEP] %d", ids[0], ids[n - 1]);
    for (int32_t i = 0; i < n; i++) FUZZ_ASSERT(ids[i] >= 0 && ids[i] < 30522, "id %d", ids[i]);
}

static void bpe(const char *text, size_t len) {
    int32_t cap = 3 * (int32_t)len + 8;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    char *back = malloc(len * 4 + 64), *want = malloc(len * 3 + 1);
    FUZZ_ASSERT(ids && back && want, "alloc");
    size_t wl = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char b = (unsigned char)text[i];
        if (has_byte[b]) want[wl++] = (char)b;
        else { memcpy(want + wl, "\xEF\xBF\xBD", 3); wl += 3; }
    }
    int32_t n = mmrag_engine_tokenize(eng, text, len, ids, cap, 0);
    FUZZ_ASSERT(n >= 0 && n <= (int32_t)wl + 1, "%d tokens for %zu bytes", n, len);
    for (int32_t i = 0; i < n; i++)
        FUZZ_ASSERT(ids[i] >= 0 && ids[i] < mmrag_engine_n_vocab(eng), "id %d", ids[i]);
    int32_t m = mmrag_engine_detokenize(eng, ids, n, back, len * 4 + 64);
    FUZZ_ASSERT(m == (int32_t)wl && !memcmp(back, want, wl),
                "round trip: %zu bytes in, %d out (%zu expected)", len, m, wl);
    free(ids);
    free(back);
    free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!te) LLVMFuzzerInitialize(NULL, NULL);
    if (size < 1 || size > 4096) return 0;
    size_t len = size - 1;
    char *text = malloc(len + 1);
    if (!text) return 0;
    memcpy(text, data + 1, len);
    text[len] = 0;
    if (data[0] % 2 == 0) wordpiece(text);
    else bpe(text, strlen(text));   /* the engine's API takes C text: stop at a NUL */
    free(text);
    return 0;
}
