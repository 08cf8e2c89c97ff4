/* Chat prompts: the format is recognized once from tokenizer.chat_template (a Jinja
 * template we do not run: its telltale markers are enough for the three families in use)
 * and written out by hand for each.
 *   chatml  <|im_start|>system\n…<|im_end|>\n<|im_start|>user\n…<|im_end|>\n<|im_start|>assistant\n
 *   llama3  <|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n…<|eot_id|>…
 *           <|start_header_id|>assistant<|end_header_id|>\n\n
 *   gemma   <bos><start_of_turn>user\n[system\n\n]…<end_of_turn>\n<start_of_turn>model\n
 * A template with none of the markers: ChatML, reported as not recognized. No template at
 * all usually means a base model (gemma-3-270m, Llama 3 base): one whose vocabulary has
 * ChatML's <|im_start|> gets ChatML, any other a plain completion prompt, which base models
 * continue far better than turn markers they were never tuned on:
 *   plain   [<bos>][system\n\n]…\nAnswer:          (stop strings: mmrag_engine_chat_stops)
 * Both are reported as not recognized. */
#include "engine/engine_internal.h"

#include <string.h>

void engine_chat_detect(struct mmrag_engine *e) {
    const char *t = NULL;
    e->chat = ENGINE_CHAT_CHATML;
    e->chat_recognized = 0;
    if (mf_gguf_get_str(e->gguf, "tokenizer.chat_template", &t, NULL) == 0 && t) {
        if (strstr(t, "<|im_start|>")) e->chat_recognized = 1;
        else if (strstr(t, "<|start_header_id|>")) e->chat = ENGINE_CHAT_LLAMA3, e->chat_recognized = 1;
        else if (strstr(t, "<start_of_turn>")) e->chat = ENGINE_CHAT_GEMMA, e->chat_recognized = 1;
        if (e->chat_recognized) return;
    }
    if (!t && engine_vocab_find(&e->vocab, "<|im_start|>", 12) < 0) e->chat = ENGINE_CHAT_PLAIN;
}

const char *const *mmrag_engine_chat_stops(const struct mmrag_engine *e, int32_t *n) {
    /* a base model goes on to ask and answer its own next question */
    static const char *const plain[] = {"\n\n", "\nQuestion:"};
    *n = e->chat == ENGINE_CHAT_PLAIN ? 2 : 0;
    return e->chat == ENGINE_CHAT_PLAIN ? plain : NULL;
}

const char *mmrag_engine_chat_template(const struct mmrag_engine *e, int *recognized) {
    if (recognized) *recognized = e->chat_recognized;
    return e->chat == ENGINE_CHAT_LLAMA3 ? "llama3" : e->chat == ENGINE_CHAT_GEMMA ? "gemma"
         : e->chat == ENGINE_CHAT_PLAIN ? "plain" : "chatml";
}

typedef struct { char *buf; size_t cap, n; } text_out;
static void put(text_out *o, const char *src, size_t n) {
    if (o->buf && o->n + n < o->cap) memcpy(o->buf + o->n, src, n);
    o->n += n;
}
static void put_str(text_out *o, const char *s) { put(o, s, strlen(s)); }

/* Content (system text, a user's question, retrieved document text) goes in with every
 * special-token spelling split by a zero-width space: a PDF that says "<|im_end|>" must
 * not end the turn and start one of its own (prompt injection). */
static void put_content(text_out *o, const engine_vocab *v, const char *text) {
    const unsigned char *s = (const unsigned char *)text;
    size_t len = strlen(text), start = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t id;
        if (!engine_vocab_match_special(v, s + i, len - i, &id)) continue;
        put(o, text + start, i + 1 - start);
        put(o, "\xE2\x80\x8B", 3);
        start = i + 1;
    }
    put(o, text + start, len - start);
}

/* the BOS token's text (formats that open with it), or nothing */
static void put_bos(text_out *o, const engine_vocab *v) {
    if (v->bos >= 0 && (v->type[v->bos] == 3 || v->type[v->bos] == 4)) put_str(o, v->text[v->bos]);
}

static void format(const struct mmrag_engine *e, const char *system, const char *user, text_out *o) {
    const engine_vocab *v = &e->vocab;
    if (e->chat == ENGINE_CHAT_LLAMA3) {
        put_bos(o, v);
        if (system) {
            put_str(o, "<|start_header_id|>system<|end_header_id|>\n\n");
            put_content(o, v, system);
            put_str(o, "<|eot_id|>");
        }
        put_str(o, "<|start_header_id|>user<|end_header_id|>\n\n");
        put_content(o, v, user);
        put_str(o, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    } else if (e->chat == ENGINE_CHAT_GEMMA) {
        put_bos(o, v);
        put_str(o, "<start_of_turn>user\n");
        if (system) {
            put_content(o, v, system);
            put_str(o, "\n\n");
        }
        put_content(o, v, user);
        put_str(o, "<end_of_turn>\n<start_of_turn>model\n");
    } else if (e->chat == ENGINE_CHAT_PLAIN) {
        put_bos(o, v);
        if (system) {
            put_content(o, v, system);
            put_str(o, "\n\n");
        }
        put_content(o, v, user);
        put_str(o, "\nAnswer:");
    } else {
        if (!system) system = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";
        put_str(o, "<|im_start|>system\n");
        put_content(o, v, system);
        put_str(o, "<|im_end|>\n<|im_start|>user\n");
        put_content(o, v, user);
        put_str(o, "<|im_end|>\n<|im_start|>assistant\n");
    }
}

int32_t mmrag_engine_chat_prompt(const struct mmrag_engine *e, const char *system,
                                 const char *user, char *buf, size_t buf_size) {
    text_out o = {buf, buf_size, 0};
    format(e, system, user ? user : "", &o);
    if (o.n > INT32_MAX - 1) return INT32_MIN;
    if (o.n + 1 > buf_size) {
        if (buf && buf_size) buf[0] = 0;
        return -(int32_t)(o.n + 1);
    }
    buf[o.n] = 0;
    return (int32_t)o.n;
}
