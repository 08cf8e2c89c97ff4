#!/usr/bin/python3
"""Independent PyTorch reference for mmrag's text encoder (all-MiniLM-L6-v2).

Run with Debian's /usr/bin/python3 (torch 1.13 + numpy; no transformers needed):

  /usr/bin/python3 scripts/golden_minilm.py [--models models] [--out tests/data/golden/minilm.json]
      writes the golden fixture: token ids and the 384-d embedding of tricky texts.
  /usr/bin/python3 scripts/golden_minilm.py --bench N --threads T [--texts FILE]
      encodes N texts (one per line of FILE, else generated here) the way
      sentence-transformers does (length-sorted batches of 32, padded, masked) and prints
      "chunks_per_s=X forward_only_per_s=Y threads=T n=N".
  /usr/bin/python3 scripts/golden_minilm.py --export-onnx OUT.onnx [--models models]
      exports this forward pass (ids, mask -> normalized pooled [B][384], dynamic batch
      and length) with torch.onnx, for the ONNX Runtime baseline of bench_textenc.
  /usr/bin/python3 scripts/golden_minilm.py --tokens-out tests/data/golden/minilm_tokens.json
      writes token ids (no torch needed) for 300 random mixed-script strings.
  /usr/bin/python3 scripts/golden_minilm.py --gen-tables vision/wordpiece_tables.h
      writes the Unicode property tables used by vision/wordpiece.c, derived from this
      Python's unicodedata (the same database this reference tokenizes with).

The tokenizer below is BERT's basic tokenizer + WordPiece written from the algorithm's
description (clean text, split CJK ideographs, whitespace split, lowercase, NFD + drop
Mn marks, split on punctuation, greedy longest-match-first WordPiece with "##").
The model reads model.safetensors with json + numpy and runs BERT in torch ops.
"""
import argparse
import json
import math
import os
import struct
import sys
import time
import unicodedata

import numpy as np

MAX_TOKENS = 256
MAX_WORD_CHARS = 100

# ---------------------------------------------------------------- safetensors


def read_safetensors(path):
    dtypes = {"F32": np.float32, "F16": np.float16, "BF16": None, "I64": np.int64}
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen])
    base = 8 + hlen
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, en = e["data_offsets"]
        buf = raw[base + b:base + en]
        if e["dtype"] == "BF16":
            u = np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16
            arr = u.view(np.float32)
        else:
            arr = np.frombuffer(buf, dtype=dtypes[e["dtype"]])
        out[name] = arr.reshape(e["shape"])
    return out

# ---------------------------------------------------------------- tokenizer


def is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F
            or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF
            or 0x2F800 <= cp <= 0x2FA1F)


def is_control(ch):
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def is_space(ch):
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def is_punct(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def basic_tokens(text):
    cleaned = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or is_control(ch):
            continue
        if is_space(ch):
            cleaned.append(" ")
        elif is_cjk(cp):
            cleaned.append(" " + ch + " ")
        else:
            cleaned.append(ch)
    words = []
    for tok in "".join(cleaned).split():
        tok = tok.lower()
        tok = "".join(c for c in unicodedata.normalize("NFD", tok)
                      if unicodedata.category(c) != "Mn")
        cur = ""
        for c in tok:
            if is_punct(c):
                if cur:
                    words.append(cur)
                words.append(c)
                cur = ""
            else:
                cur += c
        if cur:
            words.append(cur)
    return words


def wordpiece(word, vocab, unk):
    if len(word) > MAX_WORD_CHARS:
        return [unk]
    pieces, start = [], 0
    while start < len(word):
        end, found = len(word), None
        while start < end:
            sub = word[start:end]
            if start > 0:
                sub = "##" + sub
            if sub in vocab:
                found = vocab[sub]
                break
            end -= 1
        if found is None:
            return [unk]
        pieces.append(found)
        start = end
    return pieces


def tokenize(text, vocab):
    ids = [vocab["[CLS]"]]
    for w in basic_tokens(text):
        ids.extend(wordpiece(w, vocab, vocab["[UNK]"]))
        if len(ids) >= MAX_TOKENS - 1:
            break
    ids = ids[:MAX_TOKENS - 1]
    ids.append(vocab["[SEP]"])
    return ids


def load_vocab(path):
    with open(path, encoding="utf-8") as f:
        return {line.rstrip("\n"): i for i, line in enumerate(f)}

# ---------------------------------------------------------------- model


class MiniLM:
    def __init__(self, model_dir):
        import torch
        self.torch = torch
        cfg = json.load(open(os.path.join(model_dir, "config.json")))
        self.h = cfg["hidden_size"]
        self.heads = cfg["num_attention_heads"]
        self.layers = cfg["num_hidden_layers"]
        self.eps = cfg["layer_norm_eps"]
        w = read_safetensors(os.path.join(model_dir, "model.safetensors"))
        self.w = {k: torch.from_numpy(np.array(v, dtype=np.float32))
                  for k, v in w.items() if v.dtype != np.int64}

    def _ln(self, x, pre):
        return self.torch.nn.functional.layer_norm(
            x, (self.h,), self.w[pre + ".weight"], self.w[pre + ".bias"], self.eps)

    def _lin(self, x, pre):
        return x @ self.w[pre + ".weight"].T + self.w[pre + ".bias"]

    def forward(self, ids, mask):
        """ids, mask: [B][L] int64 / float; returns L2-normalized mean-pooled [B][h]."""
        torch, w = self.torch, self.w
        B, L = ids.shape
        pos = torch.arange(L).unsqueeze(0).expand(B, L)
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][pos]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = self._ln(x, "embeddings.LayerNorm")
        hd = self.h // self.heads
        bias = (1.0 - mask)[:, None, None, :] * -1e9
        for i in range(self.layers):
            p = "encoder.layer.%d." % i

            def split(t):
                return t.view(B, L, self.heads, hd).transpose(1, 2)
            q = split(self._lin(x, p + "attention.self.query"))
            k = split(self._lin(x, p + "attention.self.key"))
            v = split(self._lin(x, p + "attention.self.value"))
            s = q @ k.transpose(-1, -2) / math.sqrt(hd) + bias
            a = torch.softmax(s, dim=-1) @ v
            a = a.transpose(1, 2).reshape(B, L, self.h)
            x = self._ln(x + self._lin(a, p + "attention.output.dense"),
                         p + "attention.output.LayerNorm")
            hmid = torch.nn.functional.gelu(self._lin(x, p + "intermediate.dense"))
            x = self._ln(x + self._lin(hmid, p + "output.dense"), p + "output.LayerNorm")
        m = mask.unsqueeze(-1)
        pooled = (x * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2, dim=1)

    def encode(self, id_lists, batch=32):
        torch = self.torch
        order = sorted(range(len(id_lists)), key=lambda i: -len(id_lists[i]))
        out = [None] * len(id_lists)
        with torch.no_grad():
            for b0 in range(0, len(order), batch):
                idx = order[b0:b0 + batch]
                L = max(len(id_lists[i]) for i in idx)
                ids = torch.zeros((len(idx), L), dtype=torch.long)
                mask = torch.zeros((len(idx), L), dtype=torch.float32)
                for r, i in enumerate(idx):
                    ids[r, :len(id_lists[i])] = torch.tensor(id_lists[i])
                    mask[r, :len(id_lists[i])] = 1
                e = self.forward(ids, mask)
                for r, i in enumerate(idx):
                    out[i] = e[r].numpy()
        return out

# ---------------------------------------------------------------- fixture


LONG_PARAGRAPH = ("The quarterly report shows revenue growth of 12.5% across all regions, "
                  "driven by strong demand for cloud services and improved margins. ")

GOLDEN_TEXTS = [
    "Hello, world! This is a simple sentence.",
    "Café Déjà vu — naïve façade, coöperate; ÀÉÎÕÜ ñ ß ø Łódź Ştefan ǅemal Ǻngström ȘȚ",
    "東京タワーは日本の首都にあります。中文字符测试，한국어 텍스트",
    "Emoji 😀🚀 and symbols ™ © ® € £ ¥ ½ → ∞ ≠ ∑",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism "
    "pneumonoultramicroscopicsilicovolcanoconiosis " + "x" * 101 + " " + "ab" * 50 + " tail",
    "Wait... what?!? (yes) [no] {maybe} <tag> \"quoted\" 'single' a-b_c/d\\e@f#g$h%i^j&k*l+m=n|o~p`q"
    " ¿¡ «guillemets» „low“ – — … ‰ § ¶ •",
    LONG_PARAGRAPH * 12,
    "",
    "  tabs\tand\nnewlines\r\n  zero\u200bwidth soft\u00adhyphen \x07bell \u2028line sep"
    " nbsp\u00a0here \ufffdreplacement  ",
    "ΟΔΟΣ Σίσυφος ΣΟΦΙΑ Ἀθῆναι Москва Ёлка İstanbul ǈ",
    "e\u0301cole cafe\u0301 n\u0303 a\u0308\u0301 مرحبا नमस्ते",
    "In 2023, 3.14159 × 10^5 = 314,159 units; call +1-800-555-0199 or mail a.b@example.com.",
]


def write_golden(args):
    vocab = load_vocab(os.path.join(args.models, "minilm", "vocab.txt"))
    model = MiniLM(os.path.join(args.models, "minilm"))
    ids = [tokenize(t, vocab) for t in GOLDEN_TEXTS]
    embs = model.encode(ids, batch=1)  # one text per forward: no padding involved
    # a related / unrelated triple for the semantic sanity test, scored here as well
    cases = [{"text": t, "ids": i, "embedding": [float("%.8g" % x) for x in e]}
             for t, i, e in zip(GOLDEN_TEXTS, ids, embs)]
    doc = {"model": "all-MiniLM-L6-v2",
           "generator": "scripts/golden_minilm.py (torch %s, unicodedata %s)"
                        % (model.torch.__version__, unicodedata.unidata_version),
           "cases": cases}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=True, indent=0)
        f.write("\n")
    print("wrote %s: %d cases, token counts %s" % (args.out, len(cases), [len(i) for i in ids]))

# ---------------------------------------------------------------- tokenizer fuzz


FUZZ_RANGES = [  # (lo, hi, weight): scripts and classes the tokenizer treats differently
    (0x20, 0x7E, 30), (0x09, 0x0D, 2), (0x00, 0x1F, 1), (0xA0, 0xFF, 8), (0x100, 0x24F, 8),
    (0x250, 0x2FF, 2), (0x300, 0x36F, 4), (0x370, 0x3FF, 4), (0x1F00, 0x1FFF, 3),
    (0x400, 0x4FF, 4), (0x590, 0x6FF, 2), (0x900, 0x97F, 2), (0x1E00, 0x1EFF, 4),
    (0x2000, 0x206F, 3), (0x20A0, 0x20CF, 1), (0x2100, 0x22FF, 2), (0x3000, 0x30FF, 3),
    (0x4E00, 0x9FFF, 3), (0xAC00, 0xD7A3, 2), (0xF900, 0xFAFF, 1), (0xFB00, 0xFB4F, 1),
    (0xFE00, 0xFFFF, 2), (0x1F300, 0x1FAFF, 3), (0x10000, 0x10FFFF, 1), (0x20000, 0x2A6DF, 1),
]


def fuzz_texts(n, seed):
    import random
    rnd = random.Random(seed)
    total = sum(w for _, _, w in FUZZ_RANGES)
    out = []
    while len(out) < n:
        chars = []
        for _ in range(rnd.randint(1, 40)):
            r = rnd.uniform(0, total)
            for lo, hi, w in FUZZ_RANGES:
                r -= w
                if r <= 0:
                    break
            cp = rnd.randint(lo, hi)
            if 0xD800 <= cp <= 0xDFFF or cp == 0:  # C strings end at NUL
                continue
            chars.append(chr(cp))
        if rnd.random() < 0.3:  # some real words between the noise
            chars.insert(rnd.randint(0, len(chars)), rnd.choice(
                [" Ünïcödé ", " STRASSE ", " ΟΔΟΣ ", " İstanbul ", " naïve ", " hello ", "ǅ"]))
        out.append("".join(chars))
    return out


def write_token_fuzz(args):
    vocab = load_vocab(os.path.join(args.models, "minilm", "vocab.txt"))
    texts = fuzz_texts(args.tokens_n, 20240501)
    cases = [{"text": t, "ids": tokenize(t, vocab)} for t in texts]
    with open(args.tokens_out, "w", encoding="utf-8") as f:
        json.dump({"generator": "scripts/golden_minilm.py --tokens-out (unicodedata %s)"
                   % unicodedata.unidata_version, "cases": cases}, f, ensure_ascii=True)
        f.write("\n")
    print("wrote %s: %d random texts" % (args.tokens_out, len(cases)))

# ---------------------------------------------------------------- bench


WORDS = ("the of and to in a is that for it as was with be by on not he this are or his "
         "from at which but have an they you were her she there been one all we their has "
         "would when if so no will more can out other into its time only new some could "
         "these two may first then do any like my now over such our man me even most made "
         "after also did many before must through back years where much your way well down "
         "should because each just those people how too little state good very make world "
         "still own see men work long get here between both life being under never day "
         "same another know while last might us great old year off come since against go "
         "came right used take three revenue chart figure table model encoder vector index "
         "retrieval document page image caption quarterly growth region cloud service").split()


def gen_texts(n):
    """Deterministic chunk-like texts of 60..200 words (when no --texts file is given)."""
    s = 12345
    out = []
    for _ in range(n):
        s = (s * 1103515245 + 12345) & 0x7FFFFFFF
        nw = 60 + s % 141
        ws = []
        for _ in range(nw):
            s = (s * 1103515245 + 12345) & 0x7FFFFFFF
            ws.append(WORDS[s % len(WORDS)])
        out.append(" ".join(ws) + ".")
    return out


def bench(args):
    import torch
    torch.set_num_threads(args.threads)
    if args.texts:
        with open(args.texts, encoding="utf-8") as f:
            texts = [line.rstrip("\n") for line in f][:args.bench]
    else:
        texts = gen_texts(args.bench)
    vocab = load_vocab(os.path.join(args.models, "minilm", "vocab.txt"))
    model = MiniLM(os.path.join(args.models, "minilm"))
    model.encode([tokenize(t, vocab) for t in texts[:8]])  # warm-up
    t0 = time.perf_counter()
    ids = [tokenize(t, vocab) for t in texts]
    t1 = time.perf_counter()
    model.encode(ids)
    t2 = time.perf_counter()
    print("chunks_per_s=%.2f forward_only_per_s=%.2f threads=%d n=%d tokens=%d"
          % (len(texts) / (t2 - t0), len(texts) / (t2 - t1), args.threads, len(texts),
             sum(len(i) for i in ids)))

def export_onnx(args):
    import torch
    model = MiniLM(os.path.join(args.models, "minilm"))

    class Wrap(torch.nn.Module):
        """weights as parameters, so the export stores them as initializers (what
        quantize_dynamic looks for), not as Constant nodes"""
        def __init__(self):
            super().__init__()
            for i, (k, v) in enumerate(model.w.items()):
                p = torch.nn.Parameter(v, requires_grad=False)
                self.register_parameter("w%d" % i, p)
                model.w[k] = p

        def forward(self, ids, mask):
            return model.forward(ids, mask)

    ids = torch.ones((2, 16), dtype=torch.long)
    mask = torch.ones((2, 16), dtype=torch.float32)
    with torch.no_grad():
        torch.onnx.export(Wrap(), (ids, mask), args.export_onnx, input_names=["ids", "mask"],
                          output_names=["emb"], opset_version=14,
                          dynamic_axes={"ids": {0: "B", 1: "L"}, "mask": {0: "B", 1: "L"},
                                        "emb": {0: "B"}})

# ---------------------------------------------------------------- C tables


def gen_tables(path):
    """Unicode properties for vision/wordpiece.c as sorted range / mapping tables."""
    DROP, SPACE, PUNCT, MARK, CASED, CASE_IGN = 1, 2, 4, 8, 16, 32
    flags = [0] * 0x110000
    fold = []
    for cp in range(0x110000):
        ch = chr(cp)
        f = 0
        if cp == 0 or cp == 0xFFFD or is_control(ch):
            f |= DROP
        elif is_space(ch) or ch.isspace():  # isspace: U+2028/2029 split words in str.split
            f |= SPACE
        if is_punct(ch):
            f |= PUNCT
        if unicodedata.category(ch) == "Mn":
            f |= MARK
        # Final_Sigma properties, measured on str.lower itself
        if (ch + "\u03a3").lower()[-1] == "\u03c2":
            f |= CASED
        elif ("A" + ch + "\u03a3").lower()[-1] == "\u03c2":
            f |= CASE_IGN
        flags[cp] = f
        if f & (DROP | MARK) or 0xAC00 <= cp <= 0xD7A3:
            continue  # dropped chars never reach folding; Hangul is algorithmic in C
        folded = "".join(c for c in unicodedata.normalize("NFD", ch.lower())
                         if unicodedata.category(c) != "Mn")
        if folded != ch:
            assert 1 <= len(folded) <= 3, (hex(cp), folded)
            fold.append((cp, [ord(c) for c in folded]))
    ranges = []
    lo = 0
    for cp in range(1, 0x110001):
        if cp == 0x110000 or flags[cp] != flags[lo]:
            if flags[lo]:
                ranges.append((lo, cp - 1, flags[lo]))
            lo = cp
    with open(path, "w") as f:
        f.write("/* Generated by scripts/golden_minilm.py --gen-tables from Python %s's\n"
                " * unicodedata (Unicode %s). Do not edit.\n"
                " * wp_ranges: runs of code points with the same WP_* flags (others: none).\n"
                " * wp_fold: code point -> lowercase + NFD with Mn marks removed, for every code\n"
                " * point where that differs from itself (all planes; Hangul syllables are\n"
                " * decomposed in code). %d ranges, %d fold entries. */\n"
                % (sys.version.split()[0], unicodedata.unidata_version, len(ranges), len(fold)))
        f.write("enum { WP_DROP = 1, WP_SPACE = 2, WP_PUNCT = 4, WP_MARK = 8, WP_CASED = 16,"
                " WP_CASE_IGN = 32 };\n")
        f.write("static const struct { uint32_t lo, hi; uint8_t flags; } wp_ranges[] = {\n")
        for i in range(0, len(ranges), 4):
            f.write("   " + "".join(" {0x%X, 0x%X, %d}," % r for r in ranges[i:i + 4]) + "\n")
        f.write("};\n")
        f.write("static const struct { uint32_t cp, to[3]; } wp_fold[] = {\n")
        for i in range(0, len(fold), 3):
            f.write("   " + "".join(" {0x%X, {%s}}," % (cp, ", ".join("0x%X" % x for x in (t + [0, 0])[:3]))
                                    for cp, t in fold[i:i + 3]) + "\n")
        f.write("};\n")
    print("wrote %s: %d ranges, %d fold entries" % (path, len(ranges), len(fold)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=os.environ.get("MMRAG_MODELS", "models"))
    ap.add_argument("--out", default="tests/data/golden/minilm.json")
    ap.add_argument("--bench", type=int, default=0)
    ap.add_argument("--export-onnx", default="")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--texts", default=None)
    ap.add_argument("--gen-tables", default=None)
    ap.add_argument("--tokens-out", default=None)
    ap.add_argument("--tokens-n", type=int, default=300)
    args = ap.parse_args()
    if args.tokens_out:
        write_token_fuzz(args)
    elif args.gen_tables:
        gen_tables(args.gen_tables)
    elif args.export_onnx:
        export_onnx(args)
    elif args.bench:
        bench(args)
    else:
        write_golden(args)


if __name__ == "__main__":
    main()
