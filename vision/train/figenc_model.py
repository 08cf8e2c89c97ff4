"""The figure encoder's two towers in plain PyTorch, as mmrag's C code runs them.

- FigureViT: a CLIP-style image tower (patch embedding without bias, class token, position
  embeddings resampled bicubically to the actual grid, pre-LN, pre-norm blocks, post-LN of
  the class token, projection, L2 norm), with Hugging Face CLIP tensor names so that
  vision/clip.c loads the exported file unchanged.
- MiniLM: the locked text tower (all-MiniLM-L6-v2: BERT, mean pooling over all tokens incl.
  [CLS]/[SEP], L2 norm) read from models/minilm, with its WordPiece tokenizer.
- patch_grid(): vision_patch_grid() of vision/patchify.c, line for line.
- read/write safetensors without the safetensors package (Debian has none).
"""
import json
import math
import struct
import unicodedata

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


# ---- safetensors ----------------------------------------------------------------------------
_DT = {"F32": (np.float32, torch.float32), "F16": (np.float16, torch.float16),
       "I64": (np.int64, torch.int64), "BF16": (None, torch.bfloat16)}


def st_read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for k, v in hdr.items():
            if k == "__metadata__":
                continue
            b, e = v["data_offsets"]
            f.seek(base + b)
            raw = f.read(e - b)
            if v["dtype"] == "BF16":
                a = np.frombuffer(raw, np.uint16).astype(np.uint32) << 16
                t = torch.from_numpy(a.view(np.float32).reshape(v["shape"]).copy())
            else:
                t = torch.from_numpy(np.frombuffer(raw, _DT[v["dtype"]][0]).reshape(v["shape"]).copy())
            out[k] = t
    return out


def st_write(path, tensors, metadata=None):
    hdr, blobs, off = {}, [], 0
    if metadata:
        hdr["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    for k in sorted(tensors):
        t = tensors[k].detach().cpu().contiguous()
        name = {torch.float32: "F32", torch.float16: "F16"}[t.dtype]
        b = t.numpy().tobytes()
        hdr[k] = {"dtype": name, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


# ---- the patchifier's grid --------------------------------------------------------------------
def _aspect_err(gh, gw, h, w):
    return abs(math.log((gw / gh) / (w / h)))


def patch_grid(h, w, max_tokens, patch, allow_upscale=False):
    s = math.sqrt(h * w / (max_tokens * patch * patch))
    if s < 1.0 and not allow_upscale:
        s = 1.0
    a = max(1, int(math.floor(h / s / patch + 0.5)))  # llround: halves away from zero
    b = max(1, int(math.floor(w / s / patch + 0.5)))
    if a * b > max_tokens:
        hmax = max_tokens if allow_upscale else a
        wmax = max_tokens if allow_upscale else b
        best = -1e300
        for aa in range(1, min(hmax, max_tokens) + 1):
            lim = min(max_tokens // aa, wmax)
            c0 = int(math.floor(aa * w / h))
            for c in (c0, c0 + 1):
                bb = 1 if c < 1 else lim if c > lim else c
                sc = math.log(aa * bb / max_tokens) - 2 * _aspect_err(aa, bb, h, w)
                if sc > best:
                    best, a, b = sc, aa, bb
    return a, b


def patches_from_pixels(x, patch):
    """x: float [B][3][H][W] normalized -> [B][T][3*p*p] in conv weight order (c, ky, kx)."""
    B, C, H, W = x.shape
    gh, gw = H // patch, W // patch
    x = x.reshape(B, C, gh, patch, gw, patch).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, gh * gw, C * patch * patch)


def attend(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d)) v; mask: bool, True = attend. Debian's torch 1.13 lacks SDPA."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    a = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if mask is not None:
        a = a.masked_fill(~mask, float("-inf"))
    return a.softmax(-1) @ v


# ---- image tower ------------------------------------------------------------------------------
class Block(nn.Module):
    def __init__(self, d, heads, mlp):
        super().__init__()
        self.heads = heads
        self.layer_norm1 = nn.LayerNorm(d, eps=1e-5)
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))
        self.layer_norm2 = nn.LayerNorm(d, eps=1e-5)
        self.fc1, self.fc2 = nn.Linear(d, mlp), nn.Linear(mlp, d)

    def forward(self, x):
        B, N, D = x.shape
        h = self.layer_norm1(x)
        sp = lambda t: t.reshape(B, N, self.heads, D // self.heads).transpose(1, 2)
        a = attend(sp(self.q_proj(h)), sp(self.k_proj(h)), sp(self.v_proj(h)))
        x = x + self.out_proj(a.transpose(1, 2).reshape(B, N, D))
        return x + self.fc2(F.gelu(self.fc1(self.layer_norm2(x))))


class FigureViT(nn.Module):
    def __init__(self, width=256, layers=6, heads=4, mlp=1024, patch=16, grid=14, proj=384):
        super().__init__()
        self.cfg = dict(width=width, layers=layers, heads=heads, mlp=mlp, patch=patch, grid=grid, proj=proj)
        self.patch, self.grid = patch, grid
        self.patch_embedding = nn.Linear(3 * patch * patch, width, bias=False)
        self.class_embedding = nn.Parameter(torch.randn(width) * 0.02)
        self.position_embedding = nn.Parameter(torch.randn(grid * grid + 1, width) * 0.02)
        self.pre_layrnorm = nn.LayerNorm(width, eps=1e-5)
        self.layers = nn.ModuleList(Block(width, heads, mlp) for _ in range(layers))
        self.post_layernorm = nn.LayerNorm(width, eps=1e-5)
        self.visual_projection = nn.Linear(width, proj, bias=False)

    def pos_for(self, gh, gw):
        g, D = self.grid, self.position_embedding.shape[1]
        p = self.position_embedding[1:].reshape(1, g, g, D).permute(0, 3, 1, 2)
        p = F.interpolate(p, size=(gh, gw), mode="bicubic", align_corners=False)
        return p.permute(0, 2, 3, 1).reshape(gh * gw, D)

    def forward(self, patches, gh, gw, tokens=False):
        """patches [B][gh*gw][3*p*p] -> L2-normalized [B][proj] (and patch tokens)."""
        B = patches.shape[0]
        x = self.patch_embedding(patches) + self.pos_for(gh, gw)
        cls = (self.class_embedding + self.position_embedding[0]).expand(B, 1, -1)
        x = self.pre_layrnorm(torch.cat([cls, x], dim=1))
        for blk in self.layers:
            x = blk(x)
        if tokens:
            t = self.visual_projection(self.post_layernorm(x))
            t = F.normalize(t.float(), dim=-1)
            return t[:, 0], t[:, 1:]
        return F.normalize(self.visual_projection(self.post_layernorm(x[:, 0])).float(), dim=-1)

    def hf_state(self, dtype=torch.float16):
        """Hugging Face CLIP names, as vision/clip.c reads them."""
        D, p = self.cfg["width"], self.patch
        o = {"vision_model.embeddings.patch_embedding.weight":
             self.patch_embedding.weight.reshape(D, 3, p, p),
             "vision_model.embeddings.class_embedding": self.class_embedding,
             "vision_model.embeddings.position_embedding.weight": self.position_embedding,
             "vision_model.pre_layrnorm.weight": self.pre_layrnorm.weight,
             "vision_model.pre_layrnorm.bias": self.pre_layrnorm.bias,
             "vision_model.post_layernorm.weight": self.post_layernorm.weight,
             "vision_model.post_layernorm.bias": self.post_layernorm.bias,
             "visual_projection.weight": self.visual_projection.weight}
        for i, b in enumerate(self.layers):
            pre = f"vision_model.encoder.layers.{i}."
            for n in ("layer_norm1", "layer_norm2"):
                o[pre + n + ".weight"] = getattr(b, n).weight
                o[pre + n + ".bias"] = getattr(b, n).bias
            for n in ("fc1", "fc2"):
                o[pre + "mlp." + n + ".weight"] = getattr(b, n).weight
                o[pre + "mlp." + n + ".bias"] = getattr(b, n).bias
            for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
                o[pre + "self_attn." + n + ".weight"] = getattr(b, n).weight
                o[pre + "self_attn." + n + ".bias"] = getattr(b, n).bias
        return {k: v.detach().to(dtype) for k, v in o.items()}

    def hf_config(self):
        c = self.cfg
        return {"model_type": "clip_vision_model", "projection_dim": c["proj"],
                "vision_config": {"hidden_size": c["width"], "intermediate_size": c["mlp"],
                                  "num_hidden_layers": c["layers"], "num_attention_heads": c["heads"],
                                  "patch_size": c["patch"], "image_size": c["patch"] * c["grid"],
                                  "hidden_act": "gelu", "layer_norm_eps": 1e-5},
                "mmrag": {"text_encoder": "minilm (all-MiniLM-L6-v2, mean pooling)",
                          "max_tokens": c["grid"] * c["grid"], "image_mean": CLIP_MEAN,
                          "image_std": CLIP_STD}}

    @classmethod
    def from_file(cls, path, config):
        vc = config["vision_config"]
        g = vc["image_size"] // vc["patch_size"]
        m = cls(vc["hidden_size"], vc["num_hidden_layers"], vc["num_attention_heads"],
                vc["intermediate_size"], vc["patch_size"], g, config["projection_dim"])
        sd = st_read(path)
        cur = m.hf_state(torch.float32)
        with torch.no_grad():
            for k in cur:
                t = sd[k].float()
                if k.endswith("patch_embedding.weight"):
                    m.patch_embedding.weight.copy_(t.reshape(t.shape[0], -1))
                else:
                    _param(m, k).copy_(t)
        return m


def _param(m, hf_name):
    n = hf_name.replace("vision_model.embeddings.", "").replace("vision_model.encoder.", "")
    n = n.replace("vision_model.", "").replace("self_attn.", "").replace("mlp.", "")
    n = n.replace("position_embedding.weight", "position_embedding")
    obj = m
    parts = n.split(".")
    for p in parts[:-1]:
        obj = obj[int(p)] if p.isdigit() else getattr(obj, p)
    return getattr(obj, parts[-1])


# ---- locked text tower ------------------------------------------------------------------------
class WordPiece:
    def __init__(self, vocab_path):
        self.vocab = {w.rstrip("\n"): i for i, w in enumerate(open(vocab_path, encoding="utf-8"))}

    @staticmethod
    def _basic(text):
        out, cur = [], []
        text = unicodedata.normalize("NFD", text.lower())
        for ch in text:
            if unicodedata.category(ch) == "Mn":
                continue
            cp = ord(ch)
            if ch not in "\t\n\r " and (cp == 0 or cp == 0xFFFD or unicodedata.category(ch) in ("Cc", "Cf")):
                continue  # control and format characters are dropped
            cjk = (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2FA1F
                   or 0xF900 <= cp <= 0xFAFF)
            punct = cjk or (33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126
                     or unicodedata.category(ch).startswith("P"))
            if ch.isspace() or punct:
                if cur:
                    out.append("".join(cur))
                    cur = []
                if punct:
                    out.append(ch)
            else:
                cur.append(ch)
        if cur:
            out.append("".join(cur))
        return out

    def encode(self, text, max_len=256):
        ids = [self.vocab["[CLS]"]]
        for w in self._basic(text):
            start, pieces = 0, []
            if len(w) > 100:
                ids.append(self.vocab["[UNK]"])
                continue
            while start < len(w):
                end = len(w)
                while end > start:
                    sub = ("##" if start else "") + w[start:end]
                    if sub in self.vocab:
                        pieces.append(self.vocab[sub])
                        break
                    end -= 1
                if end == start:
                    pieces = [self.vocab["[UNK]"]]
                    break
                start = end
            ids.extend(pieces)
        return ids[:max_len - 1] + [self.vocab["[SEP]"]]


class MiniLM(nn.Module):
    def __init__(self, folder):
        super().__init__()
        cfg = json.load(open(folder + "/config.json"))
        self.tok = WordPiece(folder + "/vocab.txt")
        self.heads, self.L, self.eps = cfg["num_attention_heads"], cfg["num_hidden_layers"], cfg["layer_norm_eps"]
        self.w = {k: v.float() for k, v in st_read(folder + "/model.safetensors").items()
                  if v.dtype != torch.int64}

    def to(self, dev):
        self.w = {k: v.to(dev) for k, v in self.w.items()}
        return self

    @torch.no_grad()
    def embed(self, texts, batch=512):
        outs = []
        for i in range(0, len(texts), batch):
            outs.append(self._embed([self.tok.encode(t) for t in texts[i:i + batch]]))
        return torch.cat(outs)

    def _ln(self, x, n):
        return F.layer_norm(x, x.shape[-1:], self.w[n + ".weight"], self.w[n + ".bias"], self.eps)

    def _lin(self, x, n):
        return F.linear(x, self.w[n + ".weight"], self.w[n + ".bias"])

    def _embed(self, seqs):
        w, dev = self.w, self.w["embeddings.word_embeddings.weight"].device
        T = max(len(s) for s in seqs)
        ids = torch.zeros(len(seqs), T, dtype=torch.long, device=dev)
        mask = torch.zeros(len(seqs), T, dtype=torch.bool, device=dev)
        for i, s in enumerate(seqs):
            ids[i, :len(s)] = torch.tensor(s, device=dev)
            mask[i, :len(s)] = True
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:T]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = self._ln(x, "embeddings.LayerNorm")
        B, D, H = x.shape[0], x.shape[2], self.heads
        am = mask[:, None, None, :]
        for l in range(self.L):
            p = f"encoder.layer.{l}."
            sp = lambda t: t.reshape(B, T, H, D // H).transpose(1, 2)
            q, k, v = (sp(self._lin(x, p + "attention.self." + n)) for n in ("query", "key", "value"))
            a = attend(q, k, v, am).transpose(1, 2).reshape(B, T, D)
            x = self._ln(x + self._lin(a, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            h = F.gelu(self._lin(x, p + "intermediate.dense"))
            x = self._ln(x + self._lin(h, p + "output.dense"), p + "output.LayerNorm")
        m = mask[..., None].float()
        return F.normalize((x * m).sum(1) / m.sum(1), dim=-1)
