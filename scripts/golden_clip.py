#!/usr/bin/python3
"""Golden fixtures for mmrag's CLIP path (vision/clip*.c, vision/patchify.c).

Run with Debian's /usr/bin/python3 (torch 1.13 CPU + numpy):
    /usr/bin/python3 scripts/golden_clip.py            # writes tests/data/golden/clip_tiny.json
    /usr/bin/python3 scripts/golden_clip.py --bench W.safetensors --images 8 --threads 2

What is independent of the C code:
  * the BPE tokenizer below (exact Unicode classes from unicodedata, str.lower, html.unescape);
  * the model: torch conv2d patch embedding on the whole image, F.interpolate(bicubic,
    align_corners=False, size=...) for the position embeddings, explicit attention with a
    causal mask over the full 77-token padded context, argmax pooling — as in HF's CLIPModel.
What is shared on purpose: the random weights. Nothing big is committed: both sides draw
every tensor from a tiny counter-based PRNG (splitmix64 of name hash + index), following the
tensor list stored in the fixture; the C test writes them as a safetensors file and loads
it through the real loader. `weight_sums` lets the test tell a PRNG mismatch from a model bug.
"""
import argparse
import html
import gzip
import json
import os
import struct
import sys
import time
import unicodedata

import numpy as np

M64 = (1 << 64) - 1
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---- shared PRNG ----------------------------------------------------------------------
def name_seed(name):
    """FNV-1a 64 of the UTF-8 name."""
    h = 1469598103934665603
    for b in name.encode():
        h = ((h ^ b) * 1099511628211) & M64
    return h


def raw64(name, n):
    """splitmix64 finalizer of seed*golden + (i+1)*0xBF58476D1CE4E5B9, i in [0, n)."""
    with np.errstate(over="ignore"):
        s = np.uint64((name_seed(name) * 0x9E3779B97F4A7C15) & M64)
        i = np.arange(1, n + 1, dtype=np.uint64)
        z = s + i * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return z


def uniform(name, n):
    """float32 in [-1, 1): ((z >> 40) * 2^-24) * 2 - 1, exact in float32."""
    u = (raw64(name, n) >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)
    return u * np.float32(2) - np.float32(1)


def gen_tensor(spec):
    n = int(np.prod(spec["shape"]))
    v = np.float32(spec["offset"]) + np.float32(spec["scale"]) * uniform(spec["name"], n)
    return v.astype(np.float32).reshape(spec["shape"])


def gen_image(name, h, w):
    return (raw64(name, h * w * 3) >> np.uint64(56)).astype(np.uint8).reshape(h, w, 3)


# ---- tiny config and its tensor list -----------------------------------------------------
TINY = {
    "vision": {"width": 64, "layers": 2, "heads": 4, "mlp": 256, "patch": 8, "image": 32,
               "act": "quick_gelu"},
    "text": {"width": 48, "layers": 2, "heads": 4, "mlp": 192, "ctx": 77, "vocab": 49408,
             "act": "gelu"},
    "proj": 32,
    "eps": 1e-5,
}


def tensor_specs(cfg):
    v, t, E = cfg["vision"], cfg["text"], cfg["proj"]
    specs = []

    def add(name, shape, scale, offset=0.0):
        specs.append({"name": name, "shape": list(shape), "scale": scale, "offset": offset})

    def lin(name, out, inp, bias=True):
        add(name + ".weight", (out, inp), float(np.float32((3.0 / inp) ** 0.5)))
        if bias:
            add(name + ".bias", (out,), 0.02)

    def ln(name, d):
        add(name + ".weight", (d,), 0.1, 1.0)
        add(name + ".bias", (d,), 0.1)

    def layers(prefix, d, f, n):
        for i in range(n):
            p = "%s.%d." % (prefix, i)
            for q in ("q_proj", "k_proj", "v_proj", "out_proj"):
                lin(p + "self_attn." + q, d, d)
            ln(p + "layer_norm1", d)
            ln(p + "layer_norm2", d)
            lin(p + "mlp.fc1", f, d)
            lin(p + "mlp.fc2", d, f)

    D, p, g = v["width"], v["patch"], v["image"] // v["patch"]
    add("vision_model.embeddings.patch_embedding.weight", (D, 3, p, p),
        float(np.float32((3.0 / (3 * p * p)) ** 0.5)))
    add("vision_model.embeddings.class_embedding", (D,), 0.5)
    add("vision_model.embeddings.position_embedding.weight", (g * g + 1, D), 1.0)
    ln("vision_model.pre_layrnorm", D)
    layers("vision_model.encoder.layers", D, v["mlp"], v["layers"])
    ln("vision_model.post_layernorm", D)
    lin("visual_projection", E, D, bias=False)
    Dt = t["width"]
    add("text_model.embeddings.token_embedding.weight", (t["vocab"], Dt), 0.5)
    add("text_model.embeddings.position_embedding.weight", (t["ctx"], Dt), 0.2)
    layers("text_model.encoder.layers", Dt, t["mlp"], t["layers"])
    ln("text_model.final_layer_norm", Dt)
    lin("text_projection", E, Dt, bias=False)
    return specs


def hf_config(cfg):
    v, t = cfg["vision"], cfg["text"]
    return {
        "vision_config": {"hidden_size": v["width"], "num_hidden_layers": v["layers"],
                          "num_attention_heads": v["heads"], "intermediate_size": v["mlp"],
                          "patch_size": v["patch"], "image_size": v["image"],
                          "hidden_act": v["act"], "layer_norm_eps": cfg["eps"]},
        "text_config": {"hidden_size": t["width"], "num_hidden_layers": t["layers"],
                        "num_attention_heads": t["heads"], "intermediate_size": t["mlp"],
                        "max_position_embeddings": t["ctx"], "vocab_size": t["vocab"],
                        "hidden_act": t["act"], "layer_norm_eps": cfg["eps"]},
        "projection_dim": cfg["proj"],
    }


# ---- safetensors with json + numpy ----------------------------------------------------------
def write_safetensors(path, tensors):
    header, off, blobs = {}, 0, []
    for name, arr in tensors.items():
        b = np.ascontiguousarray(arr, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    dt = {"F32": np.float32, "F16": np.float16}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + a:8 + n + b], dtype=dt[e["dtype"]]).astype(
            np.float32).reshape(e["shape"])
    return out


# ---- reference BPE tokenizer (written from the algorithm, exact Unicode classes) ----------
def byte_chars():
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    rest = [b for b in range(256) if b not in keep]
    order = keep + rest
    chars = {b: chr(b) for b in keep}
    chars.update({b: chr(256 + k) for k, b in enumerate(rest)})
    return order, chars


class RefBPE:
    def __init__(self, path):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            lines = f.read().split("\n")[1:49152 - 256 - 2 + 1]
        merges = [tuple(l.split()) for l in lines]
        order, self.chars = byte_chars()
        vocab = [self.chars[b] for b in order]
        vocab += [v + "</w>" for v in vocab]
        vocab += ["".join(m) for m in merges]
        vocab += ["<|startoftext|>", "<|endoftext|>"]
        self.ids = {tok: i for i, tok in enumerate(vocab)}
        self.rank = {m: i for i, m in enumerate(merges)}

    @staticmethod
    def cls(ch):
        cat = unicodedata.category(ch)
        return "L" if cat[0] == "L" else "N" if cat[0] == "N" else "S" if ch.isspace() else "O"

    def pieces(self, text):
        i, out = 0, []
        while i < len(text):
            c = self.cls(text[i])
            if c == "S":
                i += 1
                continue
            for sp in ("<|startoftext|>", "<|endoftext|>", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d"):
                if text.startswith(sp, i):
                    out.append(sp)
                    i += len(sp)
                    break
            else:
                j = i + 1
                if c == "L":
                    while j < len(text) and self.cls(text[j]) == "L":
                        j += 1
                elif c == "O":
                    while j < len(text) and self.cls(text[j]) == "O":
                        j += 1
                out.append(text[i:j])
                i = j
        return out

    def bpe(self, piece):
        word = [self.chars[b] for b in piece.encode("utf-8")]
        word[-1] += "</w>"
        while len(word) > 1:
            pairs = [(self.rank.get((a, b), 1 << 30), k) for k, (a, b) in enumerate(zip(word, word[1:]))]
            best = min(pairs)[0]
            if best == 1 << 30:
                break
            first, second = self.pair_of(best)
            new, k = [], 0
            while k < len(word):
                if k + 1 < len(word) and word[k] == first and word[k + 1] == second:
                    new.append(first + second)
                    k += 2
                else:
                    new.append(word[k])
                    k += 1
            word = new
        return word

    def pair_of(self, r):
        if not hasattr(self, "_by_rank"):
            self._by_rank = {v: k for k, v in self.rank.items()}
        return self._by_rank[r]

    def encode(self, text, ctx=77):
        text = html.unescape(html.unescape(text)).strip()
        text = " ".join(text.split()).lower()
        ids = [49406]
        for p in self.pieces(text):
            if p in ("<|startoftext|>", "<|endoftext|>"):
                ids.append(self.ids[p])
            else:
                ids += [self.ids[t] for t in self.bpe(p)]
        ids.append(49407)
        if len(ids) > ctx:
            ids = ids[:ctx]
            ids[-1] = 49407
        return ids


# ---- reference model (torch) ---------------------------------------------------------------
MEAN = (0.48145466, 0.4578275, 0.40821073)
STD = (0.26862954, 0.26130258, 0.27577711)


def torch_model(W, cfg):
    import torch
    import torch.nn.functional as F

    T = {k: torch.from_numpy(np.array(v)) for k, v in W.items()}
    eps = cfg["eps"]

    def act(x, kind):
        return x * torch.sigmoid(1.702 * x) if kind == "quick_gelu" else F.gelu(x)

    def block(x, p, heads, kind, mask):
        n, d = x.shape[1], x.shape[2]
        hd = d // heads
        h = F.layer_norm(x, (d,), T[p + "layer_norm1.weight"], T[p + "layer_norm1.bias"], eps)
        q = F.linear(h, T[p + "self_attn.q_proj.weight"], T[p + "self_attn.q_proj.bias"]) * hd ** -0.5
        k = F.linear(h, T[p + "self_attn.k_proj.weight"], T[p + "self_attn.k_proj.bias"])
        v = F.linear(h, T[p + "self_attn.v_proj.weight"], T[p + "self_attn.v_proj.bias"])
        split = lambda t: t.view(1, n, heads, hd).transpose(1, 2)
        s = split(q) @ split(k).transpose(-1, -2)
        if mask is not None:
            s = s + mask
        a = (s.softmax(-1) @ split(v)).transpose(1, 2).reshape(1, n, d)
        x = x + F.linear(a, T[p + "self_attn.out_proj.weight"], T[p + "self_attn.out_proj.bias"])
        h = F.layer_norm(x, (d,), T[p + "layer_norm2.weight"], T[p + "layer_norm2.bias"], eps)
        h = act(F.linear(h, T[p + "mlp.fc1.weight"], T[p + "mlp.fc1.bias"]), kind)
        return x + F.linear(h, T[p + "mlp.fc2.weight"], T[p + "mlp.fc2.bias"])

    def image(img_u8):
        """img_u8: (H, W, 3) uint8 with H, W multiples of the patch: no resize here."""
        v = cfg["vision"]
        D, p = v["width"], v["patch"]
        x = torch.from_numpy(img_u8.astype(np.float32) / 255.0).permute(2, 0, 1)[None]
        x = (x - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)
        e = F.conv2d(x, T["vision_model.embeddings.patch_embedding.weight"], stride=p)
        gh, gw = e.shape[2], e.shape[3]
        e = e.flatten(2).transpose(1, 2)
        pos = T["vision_model.embeddings.position_embedding.weight"]
        g = int(round((pos.shape[0] - 1) ** 0.5))
        grid = pos[1:].reshape(1, g, g, D).permute(0, 3, 1, 2)
        grid = F.interpolate(grid, size=(gh, gw), mode="bicubic", align_corners=False)
        grid = grid.permute(0, 2, 3, 1).reshape(1, gh * gw, D)
        cls = (T["vision_model.embeddings.class_embedding"] + pos[0]).view(1, 1, D)
        x = torch.cat([cls, e + grid], dim=1)
        x = F.layer_norm(x, (D,), T["vision_model.pre_layrnorm.weight"], T["vision_model.pre_layrnorm.bias"], eps)
        for i in range(v["layers"]):
            x = block(x, "vision_model.encoder.layers.%d." % i, v["heads"], v["act"], None)
        x = F.layer_norm(x, (D,), T["vision_model.post_layernorm.weight"], T["vision_model.post_layernorm.bias"], eps)
        y = F.linear(x[0], T["visual_projection.weight"])
        y = y / y.norm(dim=-1, keepdim=True)
        return y[0].numpy(), y[1:].numpy(), (gh, gw)

    def text(ids):
        t = cfg["text"]
        d = t["width"]
        full = torch.zeros(t["ctx"], dtype=torch.long)
        full[:len(ids)] = torch.tensor(ids)
        x = T["text_model.embeddings.token_embedding.weight"][full] + T["text_model.embeddings.position_embedding.weight"]
        x = x[None]
        mask = torch.full((t["ctx"], t["ctx"]), float("-inf")).triu(1)
        for i in range(t["layers"]):
            x = block(x, "text_model.encoder.layers.%d." % i, t["heads"], t["act"], mask)
        x = F.layer_norm(x, (d,), T["text_model.final_layer_norm.weight"], T["text_model.final_layer_norm.bias"], eps)
        y = F.linear(x[0, int(full.argmax())], T["text_projection.weight"])
        return (y / y.norm()).numpy()

    return image, text


# ---- fixtures ------------------------------------------------------------------------------
TOKENIZER_CASES = [
    "Hello World!", "", "   ", "a photo of a cat", "Café naïve résumé façade",
    "ΑΒΓ Ελληνικά γράμματα", "Привет, мир!", "東京タワーと富士山", "emoji 😀👍 ok",
    "it's we're they'll I'd you've I'm don't", "don''t stop'S", "3.14159 and 42nd, x²+y³",
    "tab\tand\nnewline    spaces\u00a0nbsp", "&amp;amp; &lt;tag&gt; &#39;q&#39; &#x263A;",
    "supercalifragilisticexpialidocious " * 3, "<|endoftext|> inside <|startoftext|>text",
    "ŁÓDŹ İstanbul ÆØÅ", "e\u0301 combining", "C++/C# a-b_c (x) [y] {z} @home #tag $5 100%",
    "word " * 100, "HTTPS://Example.COM/path?q=1&x=2",
]
TEXT_CASES = ["a photo of a cat", "Hello World!", "a bar chart of revenue by year", "",
              "the chart of X " * 30]
IMAGE_CASES = [  # h, w, max_tokens: all already multiples of the patch within budget
    (32, 32, 16), (24, 40, 16), (16, 48, 16), (40, 24, 16),
]
POSEMB_CASES = [(7, 7, 6, 8), (7, 7, 5, 9), (7, 7, 3, 3), (7, 7, 12, 12), (7, 7, 1, 20),
                (4, 4, 3, 5), (14, 14, 18, 24)]


def posemb_cases():
    import torch
    import torch.nn.functional as F
    out = []
    for sh, sw, dh, dw in POSEMB_CASES:
        dim = 3
        src = uniform("posemb", sh * sw * dim).reshape(1, sh, sw, dim)
        t = torch.from_numpy(src).permute(0, 3, 1, 2)
        r = F.interpolate(t, size=(dh, dw), mode="bicubic", align_corners=False)
        r = r.permute(0, 2, 3, 1).reshape(-1).numpy()
        out.append({"sh": sh, "sw": sw, "dh": dh, "dw": dw, "dim": dim, "src": "posemb",
                    "expected": [float(x) for x in r]})
    return out


def rounded(a, nd=7):
    return [float("%.*g" % (nd, x)) for x in np.asarray(a).reshape(-1)]


def make_fixture(out_path, merges):
    import torch
    torch.set_num_threads(1)
    cfg = TINY
    specs = tensor_specs(cfg)
    W = {s["name"]: gen_tensor(s) for s in specs}
    image, text = torch_model(W, cfg)
    bpe = RefBPE(merges)
    fx = {
        "generator": "scripts/golden_clip.py (torch %s, numpy %s)" % (torch.__version__, np.__version__),
        "prng": "splitmix64(fnv1a64(name)*0x9E3779B97F4A7C15 + (i+1)*0xBF58476D1CE4E5B9); "
                "value = offset + scale*((z>>40)*2^-24*2-1) in float32; image byte = z>>56",
        "config": cfg, "config_json": hf_config(cfg), "tensors": specs,
        "weight_sums": {n: float(np.sum(a, dtype=np.float64)) for n, a in W.items()},
        "tokenizer": [{"text": s, "ids": bpe.encode(s)} for s in TOKENIZER_CASES],
        "texts": [], "images": [], "posemb": posemb_cases(),
    }
    for s in TEXT_CASES:
        ids = bpe.encode(s)
        fx["texts"].append({"text": s, "ids": ids, "embedding": rounded(text(ids))})
    for k, (h, w, mt) in enumerate(IMAGE_CASES):
        name = "image%d" % k
        emb, toks, (gh, gw) = image(gen_image(name, h, w))
        e = {"name": name, "h": h, "w": w, "max_tokens": mt, "grid": [gh, gw],
             "embedding": rounded(emb)}
        if k == 1:
            e["patch_tokens"] = rounded(toks)
        fx["images"].append(e)
    with open(out_path, "w") as f:
        json.dump(fx, f, indent=0, ensure_ascii=False)
        f.write("\n")
    print("wrote %s (%d bytes)" % (out_path, os.path.getsize(out_path)))


def bench(path, n_images, h, w, threads):
    """Image-tower images/s of the torch reference on the weights at `path` (HF names)."""
    import torch
    torch.set_num_threads(threads)
    W = read_safetensors(path)
    with open(os.path.join(os.path.dirname(path), "config.json")) as f:
        hc = json.load(f)["vision_config"]
    D = W["vision_model.embeddings.class_embedding"].shape[0]
    layers = len([k for k in W if k.startswith("vision_model.encoder.layers.") and k.endswith("layer_norm1.weight")])
    cfg = {"vision": {"width": D, "layers": layers, "heads": hc["num_attention_heads"],
                      "patch": W["vision_model.embeddings.patch_embedding.weight"].shape[2],
                      "act": hc.get("hidden_act", "quick_gelu")},
           "eps": hc.get("layer_norm_eps", 1e-5)}
    image, _ = torch_model(W, cfg)
    imgs = [gen_image("bench%d" % k, h, w) for k in range(n_images)]
    # Also one thread: on a loaded machine torch's OpenMP elementwise ops can be far
    # slower with several threads than with one; report both, the caller picks.
    for th, key in ((threads, "torch_images_per_s"), (1, "torch_images_per_s_1t")):
        if th == 1 and threads == 1 and key.endswith("_1t"):
            break
        torch.set_num_threads(th)
        with torch.no_grad():
            image(imgs[0])  # warm-up
            t0 = time.perf_counter()
            for im in imgs:
                image(im)
            dt = time.perf_counter() - t0
        print("%s %.3f" % (key, n_images / dt), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/data/golden/clip_tiny.json"))
    ap.add_argument("--merges", default=os.path.join(ROOT, "vision/data/bpe_simple_vocab_16e6.txt.gz"))
    ap.add_argument("--write-weights", metavar="DIR", help="also write the tiny model + config.json")
    ap.add_argument("--bench", metavar="SAFETENSORS")
    ap.add_argument("--images", type=int, default=8)
    ap.add_argument("--size", default="224x224", help="HxW, multiples of the patch")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    if a.bench:
        h, w = (int(x) for x in a.size.split("x"))
        bench(a.bench, a.images, h, w, a.threads)
        return
    if a.write_weights:
        os.makedirs(a.write_weights, exist_ok=True)
        write_safetensors(os.path.join(a.write_weights, "model.safetensors"),
                          {s["name"]: gen_tensor(s) for s in tensor_specs(TINY)})
        with open(os.path.join(a.write_weights, "config.json"), "w") as f:
            json.dump(hf_config(TINY), f, indent=1)
    make_fixture(a.out, a.merges)


if __name__ == "__main__":
    sys.exit(main())
