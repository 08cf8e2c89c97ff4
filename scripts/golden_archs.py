#!/usr/bin/python3
"""Tiny random models of every architecture the engine reads, and their reference logits.

  golden_archs.py gguf OUT_DIR           writes tiny_{llama3,qwen2,qwen3,gemma3}.gguf (numpy only)
  golden_archs.py golden OUT_DIR JSON    the same, then runs the PyTorch reference on each and
                                         writes the logits to JSON (Debian python3-torch)

Each model mixes weight types (K-quants, Q5_0/Q5_1, Q8_0, Q4_0, BF16, F16) written by the
simple quantizers below; the reference reads the GGUF back, dequantizes it with its own
numpy code (the C dequantizers are checked against PyPI gguf separately) and runs the
architecture written out in torch:
  llama3  interleaved RoPE with rope_freqs divisors (Llama 3.1 style)
  qwen2   q/k/v biases, rotate-half RoPE
  qwen3   RMSNorm per q/k head, head_dim (key_length) != n_embd / n_head
  gemma3  embeddings x sqrt(d), q/k head norms, post-attention and post-FFN norms,
          GELU(tanh) FFN, layers 0-4 local (sliding window, RoPE base 10000), layer 5
          global (rope.freq_base), tied output
Activation rounding is emulated as in golden_llama.py: matmuls over fewer rows than the C
kernels' threshold see X quantized (q8_0 for legacy weights, q8_K for K-quants).
The JSON holds, per model, the token ids, the prefill length and the logits of the last
prefill token and of each teacher-forced decode step.
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_llama as gl  # noqa: E402

F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 = 0, 1, 2, 3, 6, 7, 8
Q4_K, Q5_K, Q6_K, BF16 = 12, 13, 14, 30
BLOCK = {Q4_0: (32, 18), Q4_1: (32, 20), Q5_0: (32, 22), Q5_1: (32, 24), Q8_0: (32, 34),
         Q4_K: (256, 144), Q5_K: (256, 176), Q6_K: (256, 210)}


# ---------------------------------------------------------------- quantizers (writer)
def f16b(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def pack_scales_k4(sc, mn):
    """8 six-bit scales and mins per block -> the 12 packed bytes of Q4_K/Q5_K."""
    q = np.zeros((sc.shape[0], 12), dtype=np.uint8)
    for j in range(4):
        q[:, j] = (sc[:, j] & 63) | ((sc[:, j + 4] >> 4) << 6)
        q[:, j + 4] = (mn[:, j] & 63) | ((mn[:, j + 4] >> 4) << 6)
        q[:, j + 8] = (sc[:, j + 4] & 0xF) | ((mn[:, j + 4] & 0xF) << 4)
    return q


def quant_k45(x, bits):
    """Q4_K (bits 4) / Q5_K (bits 5): per 32 an offset scale, 6-bit scales/mins per 256."""
    top = (1 << bits) - 1
    b = x.reshape(-1, 8, 32)
    lo = np.minimum(b.min(2), 0)
    scale = (b.max(2) - lo) / top
    d = f16b(scale.max(1) / 63).astype(np.float32)
    dmin = f16b((-lo).max(1) / 63).astype(np.float32)
    sc = np.clip(np.round(scale / np.where(d > 0, d, 1)[:, None]), 1, 63).astype(np.uint8)
    mn = np.clip(np.round(-lo / np.where(dmin > 0, dmin, 1)[:, None]), 0, 63).astype(np.uint8)
    es = d[:, None] * sc.astype(np.float32)
    em = dmin[:, None] * mn.astype(np.float32)
    q = np.clip(np.round((b + em[..., None]) / es[..., None]), 0, top).astype(np.uint8)
    qs = np.zeros((b.shape[0], 128), dtype=np.uint8)
    qh = np.zeros((b.shape[0], 32), dtype=np.uint8)
    for c in range(4):
        qs[:, 32 * c:32 * c + 32] = (q[:, 2 * c] & 0xF) | ((q[:, 2 * c + 1] & 0xF) << 4)
    for s in range(8):
        qh |= ((q[:, s] >> 4) & 1) << s
    head = np.concatenate([f16b(d).view(np.uint8).reshape(-1, 2), f16b(dmin).view(np.uint8).reshape(-1, 2),
                           pack_scales_k4(sc, mn)], axis=1)
    parts = [head, qh, qs] if bits == 5 else [head, qs]
    return np.concatenate(parts, axis=1).tobytes()


def quant_q6k(x):
    b = x.reshape(-1, 16, 16)
    scale = np.abs(b).max(2) / 31
    d = f16b(np.abs(scale).max(1) / 127).astype(np.float32)
    sc = np.clip(np.round(scale / np.where(d > 0, d, 1)[:, None]), -127, 127).astype(np.int8)
    es = d[:, None] * sc.astype(np.float32)
    q = (np.clip(np.round(b / np.where(es != 0, es, 1)[..., None]), -32, 31) + 32).astype(np.uint8)
    q = q.reshape(-1, 256)
    ql = np.zeros((q.shape[0], 128), dtype=np.uint8)
    qh = np.zeros((q.shape[0], 64), dtype=np.uint8)
    for h in range(2):
        for k in range(4):
            e = q[:, 128 * h + 32 * k:128 * h + 32 * k + 32]
            off = 64 * h + (k & 1) * 32
            ql[:, off:off + 32] |= (e & 0xF) << (4 if k >= 2 else 0)
            qh[:, 32 * h:32 * h + 32] |= (e >> 4) << (2 * k)
    return np.concatenate([ql, qh, sc.view(np.uint8), f16b(d).view(np.uint8).reshape(-1, 2)], axis=1).tobytes()


def quant_q5(x, with_min):
    b = x.reshape(-1, 32)
    if with_min:
        lo, hi = b.min(1), b.max(1)
        d = (hi - lo) / 31
        q = np.clip(np.trunc((b - lo[:, None]) * np.where(d > 0, 1 / np.where(d > 0, d, 1), 0)[:, None] + 0.5), 0, 31)
    else:
        mx = np.take_along_axis(b, np.abs(b).argmax(1)[:, None], 1)[:, 0]
        d = mx / -16
        q = np.clip(np.trunc(b * np.where(d != 0, 1 / np.where(d != 0, d, 1), 0)[:, None] + 16.5), 0, 31)
    q = q.astype(np.uint8)
    qs = (q[:, :16] & 0xF) | ((q[:, 16:] & 0xF) << 4)
    qh = np.packbits((q >> 4).astype(np.uint8), axis=1, bitorder='little')
    head = [f16b(d).view(np.uint8).reshape(-1, 2)]
    if with_min:
        head.append(f16b(lo).view(np.uint8).reshape(-1, 2))
    return np.concatenate(head + [qh, qs], axis=1).tobytes()


def encode(arr, t):
    if t == F32:
        return arr.astype(np.float32).tobytes()
    if t == F16:
        return arr.astype(np.float16).tobytes()
    if t == BF16:
        u = arr.astype(np.float32).view(np.uint32)
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16).tobytes()
    if t in (Q4_K, Q5_K):
        return quant_k45(arr, 4 if t == Q4_K else 5)
    if t == Q6_K:
        return quant_q6k(arr)
    if t in (Q5_0, Q5_1):
        return quant_q5(arr, t == Q5_1)
    return gl.q_blocks(arr, t)


def gguf_write(path, kv, tensors, align=32):
    """golden_llama.gguf_write with any type above; floats in kv lists stay f32."""
    def s(x):
        b = x.encode('utf-8')
        return struct.pack('<Q', len(b)) + b

    def val(v):
        if isinstance(v, bool):
            return struct.pack('<I?', 7, v)
        if isinstance(v, int):
            return struct.pack('<II', 4, v)
        if isinstance(v, float):
            return struct.pack('<If', 6, v)
        if isinstance(v, str):
            return struct.pack('<I', 8) + s(v)
        if all(isinstance(e, str) for e in v):
            return struct.pack('<IIQ', 9, 8, len(v)) + b''.join(s(e) for e in v)
        if all(isinstance(e, float) for e in v):
            return struct.pack('<IIQ', 9, 6, len(v)) + b''.join(struct.pack('<f', e) for e in v)
        return struct.pack('<IIQ', 9, 5, len(v)) + b''.join(struct.pack('<i', e) for e in v)
    head = b'GGUF' + struct.pack('<IQQ', 3, len(tensors), len(kv))
    for k, v in kv.items():
        head += s(k) + val(v)
    data, infos = b'', b''
    for name, arr, t in tensors:
        raw = encode(arr, t)
        ne = list(reversed(arr.shape))
        infos += s(name) + struct.pack('<I', len(ne)) + b''.join(struct.pack('<Q', e) for e in ne)
        infos += struct.pack('<IQ', t, len(data))
        data += raw + b'\0' * ((-len(raw)) % align)
    head += infos
    head += b'\0' * ((-len(head)) % align)
    with open(path, 'wb') as f:
        f.write(head + data)


# ---------------------------------------------------------------- tiny models
def spm_vocab():
    """A SentencePiece vocabulary: specials, 256 byte tokens, then pieces with scores."""
    toks = ['<pad>', '<eos>', '<bos>', '<unk>', '<start_of_turn>', '<end_of_turn>']
    types = [3, 3, 3, 2, 3, 3]
    toks += ['<0x%02X>' % b for b in range(256)]
    types += [6] * 256
    words = ['\u2581the', '\u2581quick', '\u2581brown', '\u2581fox', '\u2581jumps', '\u2581over',
             '\u2581lazy', '\u2581dog', '\u2581hello', '\u2581world', 'user', 'model', '\u2581',
             'th', 'he', 'qu', 'ick', 'ow', 'own', 'er', '\u2581t', '\u2581h', 'll', 'o', 'e', 'l',
             'h', 't', 'q', 'u', 'i', 'c', 'k', 'b', 'r', 'w', 'n', 'f', 'x', 'j', 'm', 'p', 's',
             'v', 'a', 'z', 'y', 'd', 'g', '.', '!', ',', '\n']
    scores = [0.0] * len(toks) + [-float(i) for i in range(len(words))]
    toks += words
    types += [1] * len(words)
    return toks, types, scores


def model_spec(arch):
    """(metadata, tensor list) of one tiny model; numpy RandomState keeps the bytes stable."""
    rs = np.random.RandomState({'llama3': 11, 'qwen2': 12, 'qwen3': 13, 'gemma3': 14}[arch])

    def r(*shape, s=0.08):
        return (rs.standard_normal(shape) * s).astype(np.float32)
    D, FF = 256, 512
    H, HKV, hd, NL = {'llama3': (4, 2, 64, 2), 'qwen2': (4, 2, 64, 2), 'qwen3': (4, 2, 128, 2),
                      'gemma3': (4, 1, 128, 6)}[arch]
    name = 'llama' if arch == 'llama3' else arch
    if arch == 'gemma3':
        toks, types, scores = spm_vocab()
        tok = {'tokenizer.ggml.model': 'llama', 'tokenizer.ggml.tokens': toks,
               'tokenizer.ggml.token_type': types, 'tokenizer.ggml.scores': scores,
               'tokenizer.ggml.bos_token_id': 2, 'tokenizer.ggml.eos_token_id': 1,
               'tokenizer.ggml.add_bos_token': True}
    else:
        toks, types, merges = gl.tiny_vocab(rs)
        tok = {'tokenizer.ggml.model': 'gpt2', 'tokenizer.ggml.pre': 'llama-bpe' if arch == 'llama3' else 'qwen2',
               'tokenizer.ggml.tokens': toks, 'tokenizer.ggml.token_type': types,
               'tokenizer.ggml.merges': merges, 'tokenizer.ggml.bos_token_id': 1,
               'tokenizer.ggml.eos_token_id': 2}
    V = len(toks)
    kv = {'general.architecture': name, 'general.name': 'mmrag tiny random ' + arch, 'general.alignment': 32,
          name + '.block_count': NL, name + '.context_length': 128, name + '.embedding_length': D,
          name + '.feed_forward_length': FF, name + '.attention.head_count': H,
          name + '.attention.head_count_kv': HKV, name + '.attention.key_length': hd,
          name + '.attention.value_length': hd, name + '.rope.freq_base': 10000.0 if arch == 'llama3' else 1e6,
          name + '.attention.layer_norm_rms_epsilon': 1e-6}
    if arch == 'gemma3':
        kv[name + '.attention.sliding_window'] = 8
    kv.update(tok)
    # chat templates: the markers the engine recognizes (qwen3's file has none: fallback)
    tmpl = {'llama3': "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}",
            'qwen2': "{{ '<|im_start|>' + message['role'] + '\\n' }}",
            'gemma3': "{{ bos_token }}{{ '<start_of_turn>' + role + '\\n' }}"}
    if arch in tmpl:
        kv['tokenizer.chat_template'] = tmpl[arch]
    cycle = {'llama3': [Q4_K, Q5_K, Q6_K, Q8_0, Q4_K, Q5_K, Q6_K],
             'qwen2': [Q5_0, Q5_1, BF16, Q4_K, F16, Q5_0, Q6_K],
             'qwen3': [Q6_K, Q5_K, Q8_0, Q4_0, BF16, Q4_K, Q5_1],
             'gemma3': [Q4_K, Q5_0, Q8_0, Q6_K, F16, Q5_K, Q4_K]}[arch]
    tens = [('token_embd.weight', r(V, D, s=0.5 if arch != 'gemma3' else 0.1), Q6_K if arch != 'gemma3' else Q8_0),
            ('output_norm.weight', 1 + r(D, s=0.1), F32)]
    if arch != 'gemma3':
        tens.append(('output.weight', r(V, D, s=0.2), Q8_0 if arch != 'qwen3' else Q6_K))
    if arch == 'llama3':
        tens.append(('rope_freqs.weight', (1 + 7 * rs.random_sample(hd // 2)).astype(np.float32), F32))
    for i in range(NL):
        c = cycle[i % len(cycle):] + cycle[:i % len(cycle)]
        p = 'blk.%d.' % i
        tens += [(p + 'attn_norm.weight', 1 + r(D, s=0.1), F32),
                 (p + 'attn_q.weight', r(H * hd, D), c[0]), (p + 'attn_k.weight', r(HKV * hd, D), c[1]),
                 (p + 'attn_v.weight', r(HKV * hd, D), c[2]), (p + 'attn_output.weight', r(D, H * hd), c[3]),
                 (p + 'ffn_norm.weight', 1 + r(D, s=0.1), F32),
                 (p + 'ffn_gate.weight', r(FF, D), c[4]), (p + 'ffn_up.weight', r(FF, D), c[5]),
                 (p + 'ffn_down.weight', r(D, FF), c[6])]
        if arch == 'qwen2':
            tens += [(p + 'attn_q.bias', r(H * hd, s=0.1), F32), (p + 'attn_k.bias', r(HKV * hd, s=0.1), F32),
                     (p + 'attn_v.bias', r(HKV * hd, s=0.1), F32)]
        if arch in ('qwen3', 'gemma3'):
            tens += [(p + 'attn_q_norm.weight', 1 + r(hd, s=0.1), F32),
                     (p + 'attn_k_norm.weight', 1 + r(hd, s=0.1), F32)]
        if arch == 'gemma3':
            tens += [(p + 'post_attention_norm.weight', 1 + r(D, s=0.1), F32),
                     (p + 'post_ffw_norm.weight', 1 + r(D, s=0.1), F32)]
    return kv, tens, V


ARCHS = ['llama3', 'qwen2', 'qwen3', 'gemma3']


def write_all(out_dir):
    paths = {}
    for a in ARCHS:
        kv, tens, _ = model_spec(a)
        paths[a] = os.path.join(out_dir, 'tiny_%s.gguf' % a)
        gguf_write(paths[a], kv, tens)
    return paths


# ---------------------------------------------------------------- reference (reader)
def dequant(entry):
    ne, t, buf, off = entry
    n = int(np.prod(ne))
    if t in (F32, F16, Q4_0, Q4_1, Q8_0):
        return gl.dequant(entry)
    if t == BF16:
        raw = np.frombuffer(buf, dtype=np.uint16, count=n, offset=off)
        return (raw.astype(np.uint32) << 16).view(np.float32).reshape(list(reversed(ne)))
    be, bb = BLOCK[t]
    blk = np.frombuffer(buf, dtype=np.uint8, count=n // be * bb, offset=off).reshape(-1, bb)
    h = lambda a: a.copy().view(np.float16).astype(np.float32)  # noqa: E731
    e = np.arange(be)
    if t in (Q5_0, Q5_1):
        d = h(blk[:, 0:2])
        base = 4 if t == Q5_1 else 2
        qh = blk[:, base:base + 4].copy().view(np.uint32)
        qs = blk[:, base + 4:]
        lo = np.where(e < 16, qs[:, e % 16] & 0xF, qs[:, e % 16] >> 4)
        q = (lo | (((qh >> e.astype(np.uint32)) & 1) << 4)).astype(np.float32)
        x = d * (q - 16) if t == Q5_0 else d * q + h(blk[:, 2:4])
    elif t in (Q4_K, Q5_K):
        d, dmin, sc = h(blk[:, 0:2]), h(blk[:, 2:4]), blk[:, 4:16]
        s = e // 32
        scv = np.where(s < 4, sc[:, s % 4] & 63, (sc[:, 4 + s % 4 + 4] & 0xF) | ((sc[:, s % 4] >> 6) << 4))
        mnv = np.where(s < 4, sc[:, 4 + s % 4] & 63, (sc[:, 4 + s % 4 + 4] >> 4) | ((sc[:, 4 + s % 4] >> 6) << 4))
        qs = blk[:, 48:] if t == Q5_K else blk[:, 16:]
        v = qs[:, (e // 64) * 32 + e % 32]
        q = np.where(s % 2 == 1, v >> 4, v & 0xF).astype(np.int32)
        if t == Q5_K:
            q |= ((blk[:, 16:48][:, e % 32] >> s) & 1).astype(np.int32) << 4
        x = (d * scv.astype(np.float32)) * q.astype(np.float32) - dmin * mnv.astype(np.float32)
    else:  # Q6_K
        ql, qh, sc, d = blk[:, :128], blk[:, 128:192], blk[:, 192:208].view(np.int8), h(blk[:, 208:210])
        hh, k, l = e // 128, (e % 128) // 32, e % 32
        v = ql[:, hh * 64 + (k & 1) * 32 + l]
        lo = np.where(k >= 2, v >> 4, v & 0xF).astype(np.int32)
        q = (lo | (((qh[:, hh * 32 + l] >> (2 * k)) & 3).astype(np.int32) << 4)) - 32
        x = (d * sc[:, e // 16].astype(np.float32)) * q.astype(np.float32)
    return x.astype(np.float32).reshape(list(reversed(ne)))


# C kern_linear: fewer rows than this -> X quantized (per weight type), else fp32 GEMM
Q8_ROWS = {Q8_0: 32, Q4_0: 16, Q4_1: 16, Q5_0: 16, Q5_1: 16, Q4_K: 16, Q5_K: 16, Q6_K: 16}
K_TYPES = (Q4_K, Q5_K, Q6_K)


def q8k_roundtrip(torch, x):
    b = x.reshape(-1, 256)
    d = b.abs().max(dim=1, keepdim=True).values / 127.0
    inv = torch.where(d > 0, 1.0 / d, torch.zeros_like(d))
    return (torch.round(b * inv) * d).reshape(x.shape)


class Model:
    def __init__(self, torch, path):
        self.t = torch
        kv, T = gl.gguf_read(path)
        self.arch = kv['general.architecture']
        a = self.arch + '.'
        self.D = kv[a + 'embedding_length']
        self.NL = kv[a + 'block_count']
        self.H = kv[a + 'attention.head_count']
        self.HKV = kv[a + 'attention.head_count_kv']
        self.hd = kv[a + 'attention.key_length']
        self.eps = kv[a + 'attention.layer_norm_rms_epsilon']
        self.base = kv[a + 'rope.freq_base']
        self.swa = kv.get(a + 'attention.sliding_window', 0)
        self.neox = self.arch != 'llama'

        def W(name):
            if name not in T:
                return None
            e = T[name]
            return (torch.from_numpy(dequant(e).copy()), Q8_ROWS.get(e[1], 0), e[1] in K_TYPES)
        self.W = W
        self.embd = W('token_embd.weight')
        self.out = W('output.weight') or self.embd
        self.norm = W('output_norm.weight')[0]
        ff = W('rope_freqs.weight')
        self.freqs = ff[0].double() if ff else None

    def lin(self, x, name, i=None):
        w = self.W(name if i is None else 'blk.%d.%s' % (i, name))
        m, rows, k = w
        if x.shape[0] < rows:
            x = q8k_roundtrip(self.t, x) if k else gl.q8_roundtrip(x)
        y = x @ m.t()
        b = self.W('blk.%d.%s' % (i, name.replace('.weight', '.bias'))) if i is not None else None
        return y + b[0] if b is not None else y

    def rms(self, x, w):
        return x * self.t.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * w

    def rope(self, x, pos0, base):
        t = self.t
        n, half = x.shape[0], self.hd // 2
        inv = base ** (-t.arange(0, half, dtype=t.float64) * 2.0 / self.hd)
        if self.freqs is not None:
            inv = inv / self.freqs
        ang = t.arange(pos0, pos0 + n, dtype=t.float64)[:, None] * inv[None, :]
        c, s = t.cos(ang).float()[:, None, :], t.sin(ang).float()[:, None, :]
        if self.neox:
            a, b = x[..., :half], x[..., half:]
            return t.cat([a * c - b * s, a * s + b * c], dim=-1)
        out = x.clone()
        a, b = x[..., 0::2], x[..., 1::2]
        out[..., 0::2] = a * c - b * s
        out[..., 1::2] = a * s + b * c
        return out


    def run(self, chunks):
        """chunks: lists of ids fed one after another; returns the last row's logits of each."""
        t = self.t
        self.K = [[] for _ in range(self.NL)]
        self.V = [[] for _ in range(self.NL)]
        pos, outs = 0, []
        for ids in chunks:
            outs.append(self.chunk(ids, pos))
            pos += len(ids)
        return t.cat(outs, 0)

    def chunk(self, ids, pos):
        t = self.t
        n, g = len(ids), self.H // self.HKV
        gemma = self.arch == 'gemma3'
        x = self.embd[0][t.tensor(ids)]
        if gemma:
            x = x * float(np.sqrt(np.float32(self.D)).astype(np.float32))
        for i in range(self.NL):
            W = lambda nm: self.W('blk.%d.%s' % (i, nm))[0]  # noqa: E731
            local = gemma and i % 6 < 5
            h = self.rms(x, W('attn_norm.weight'))
            q = self.lin(h, 'attn_q.weight', i).view(n, self.H, self.hd)
            k = self.lin(h, 'attn_k.weight', i).view(n, self.HKV, self.hd)
            v = self.lin(h, 'attn_v.weight', i).view(n, self.HKV, self.hd)
            if self.W('blk.%d.attn_q_norm.weight' % i) is not None:
                q = self.rms(q, W('attn_q_norm.weight'))
                k = self.rms(k, W('attn_k_norm.weight'))
            base = 10000.0 if local else self.base
            q, k = self.rope(q, pos, base), self.rope(k, pos, base)
            self.K[i].append(k)
            self.V[i].append(v)
            K = t.cat(self.K[i], 0).repeat_interleave(g, dim=1)
            V = t.cat(self.V[i], 0).repeat_interleave(g, dim=1)
            att = t.einsum('qhd,khd->hqk', q, K) / (self.hd ** 0.5)
            qp = t.arange(pos, pos + n)[:, None]
            kp = t.arange(K.shape[0])[None, :]
            mask = kp > qp
            if local:
                mask = mask | (qp - kp >= self.swa)
            att = t.softmax(att.masked_fill(mask[None], float('-inf')), dim=-1)
            o = t.einsum('hqk,khd->qhd', att, V).reshape(n, self.H * self.hd)
            a = self.lin(o, 'attn_output.weight', i)
            if gemma:
                a = self.rms(a, W('post_attention_norm.weight'))
            x = x + a
            h = self.rms(x, W('ffn_norm.weight'))
            gt, up = self.lin(h, 'ffn_gate.weight', i), self.lin(h, 'ffn_up.weight', i)
            act = t.nn.functional.gelu(gt, approximate='tanh') if gemma else t.nn.functional.silu(gt)
            f = self.lin(act * up, 'ffn_down.weight', i)
            if gemma:
                f = self.rms(f, W('post_ffw_norm.weight'))
            x = x + f
        m, rows, k = self.out
        h = self.rms(x[-1:], self.norm)  # the C engine's eval: the last row's logits only
        if h.shape[0] < rows:
            h = q8k_roundtrip(t, h) if k else gl.q8_roundtrip(h)
        return h @ m.t()


# ---------------------------------------------------------------- tokenizer references
def _cls(ch):
    if ch in gl.WHITESPACE:
        return 'S'
    if gl.is_letter(ch):
        return 'L'
    if gl.is_number(ch):
        return 'N'
    return 'O'


def llama3_split(s, maxdig):
    """Llama 3 (maxdig 3) / Qwen2 (maxdig 1) pre-tokenizer, by the regex's alternatives:
    (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|
     ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"""
    out, i, n = [], 0, len(s)
    while i < n:
        m = None
        low = s[i:i + 3].lower()
        for suf in ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d"):
            if low.startswith(suf):
                m = i + len(suf)
                break
        if m is None:
            j = i + 1 if (_cls(s[i]) not in 'LN' and s[i] not in '\r\n') else i
            if j < n and _cls(s[j]) == 'L':
                m = j
                while m < n and _cls(s[m]) == 'L':
                    m += 1
            elif j > i and _cls(s[i]) == 'L':
                pass
        if m is None and _cls(s[i]) == 'L':
            m = i
            while m < n and _cls(s[m]) == 'L':
                m += 1
        if m is None and _cls(s[i]) == 'N':
            m = i
            while m < n and m - i < maxdig and _cls(s[m]) == 'N':
                m += 1
        if m is None:
            j = i + 1 if s[i] == ' ' else i
            if j < n and _cls(s[j]) == 'O':
                m = j
                while m < n and _cls(s[m]) == 'O':
                    m += 1
                while m < n and s[m] in '\r\n':
                    m += 1
        if m is None:  # whitespace alternatives
            k = i
            while k < n and _cls(s[k]) == 'S':
                k += 1
            nl = [q for q in range(i, k) if s[q] in '\r\n']
            if nl:
                m = nl[-1] + 1
            elif k < n and k - i > 1:
                m = k - 1
            else:
                m = max(k, i + 1)
        out.append(s[i:m])
        i = m
    return out


def bpe_encode(tok, text, maxdig):
    ids = []
    for w in llama3_split(text, maxdig):
        ids.extend(tok.bpe(w))
    return ids


def spm_encode(kv, text):
    """SentencePiece by the book: best-scored adjacent merge (leftmost on ties) until none;
    pieces not in the vocabulary become <0xXX> byte tokens. No space prefix (Gemma)."""
    toks, scores, types = kv['tokenizer.ggml.tokens'], kv['tokenizer.ggml.scores'], kv['tokenizer.ggml.token_type']
    ids = {t: i for i, t in enumerate(toks) if types[i] != 3}
    sym = list(text.replace(' ', '\u2581'))
    while True:
        best, at = None, -1
        for i in range(len(sym) - 1):
            c = sym[i] + sym[i + 1]
            if c in ids and (best is None or scores[ids[c]] > best):
                best, at = scores[ids[c]], i
        if at < 0:
            break
        sym[at:at + 2] = [sym[at] + sym[at + 1]]
    out = []
    for p in sym:
        if p in ids:
            out.append(ids[p])
        else:
            out.extend(toks.index('<0x%02X>' % b) for b in p.encode('utf-8'))
    return out


TOK_TEXTS = ["the quick brown fox", "Hello World 12345 and 3.14159!!", "it's THE'S we'LL don't",
             "  multiple   spaces\n\nand newlines\n  end  ", "\u00dcnicode caf\u00e9 \u65e5\u672c\u8a9e",
             "a,b;c...d\r\n\r\ne", "hello world! the lazy dog jumps over the"]


def tokenizer_golden():
    res = {}
    for a in ('llama3', 'qwen2', 'gemma3'):
        kv, _, _ = model_spec(a)
        if a == 'gemma3':
            res[a] = [{'text': t, 'ids': spm_encode(kv, t)} for t in TOK_TEXTS]
        else:
            tok = gl.Tokenizer(kv)
            res[a] = [{'text': t, 'ids': bpe_encode(tok, t, 3 if a == 'llama3' else 1)} for t in TOK_TEXTS]
    return res


N_PREFILL, N_DECODE = 24, 8


def golden(out_dir, json_path):
    import torch
    paths = write_all(out_dir)
    res = {}
    for a in ARCHS:
        _, _, V = model_spec(a)
        rs = np.random.RandomState(99)
        ids = [int(i) for i in rs.randint(0, V, size=N_PREFILL + N_DECODE)]
        m = Model(torch, paths[a])
        with torch.no_grad():
            chunks = [ids[:N_PREFILL]] + [[i] for i in ids[N_PREFILL:]]
            lg = m.run(chunks)
        rows = [lg[j] for j in range(1 + N_DECODE)]
        res[a] = {'model': 'tiny_%s.gguf' % a, 'ids': ids, 'n_prefill': N_PREFILL,
                  'logits': [[round(float(v), 6) for v in r] for r in rows]}
        print(a, 'logit range %.3f..%.3f' % (float(lg.min()), float(lg.max())))
    res['tokenizer'] = tokenizer_golden()
    with open(json_path, 'w') as f:
        json.dump(res, f)
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == 'gguf':
        for p in write_all(argv[2]).values():
            print('wrote', p)
        return 0
    if len(argv) == 4 and argv[1] == 'golden':
        return golden(argv[2], argv[3])
    print(__doc__)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
