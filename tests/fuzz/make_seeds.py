#!/usr/bin/env python3
"""Writes the committed seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/).
Deterministic; run from the repository root: python3 tests/fuzz/make_seeds.py
The wire seeds (real pages encoded by the child's encoder) are written by
build/tests/fuzz_wire --write-seeds DIR PDF (see tests/fuzz/fuzz_wire.c); scripts/fuzz.sh
adds the generated sample PDFs and the tiny GGUF models of the golden tests at run time."""
import json, os, struct

ROOT = "tests/fuzz/corpus"

def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())

def safetensors(tensors):
    header, blob = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + blob

def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b

def gguf(kv, tensors):
    """A GGUF v3 file: kv = [(key, type, packed value)], tensors = [(name, dims, type, raw)]."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for key, t, val in kv:
        out += gguf_string(key) + struct.pack("<I", t) + val
    off, data = 0, b""
    for name, dims, t, raw in tensors:
        out += gguf_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", t, off)
        pad = (-len(raw)) % 32
        data += raw + b"\0" * pad
        off += len(raw) + pad
    out += b"\0" * ((-len(out)) % 32)
    return out + data

def main():
    f32 = lambda n: struct.pack("<%df" % n, *[(i % 7) * 0.25 - 0.5 for i in range(n)])
    put("safetensors", "two-tensors", safetensors({"w": ("F32", [2, 3], f32(6)), "b": ("F16", [4], b"\0<" * 4)}))
    put("safetensors", "bf16", safetensors({"x": ("BF16", [2, 2], b"\x80?" * 4)}))
    s = lambda v: struct.pack("<I", 8) + gguf_string(v)
    arr = lambda items: struct.pack("<IQ", 8, len(items)) + b"".join(gguf_string(i) for i in items)
    put("gguf", "llama-meta", gguf(
        [("general.architecture", 8, gguf_string("llama")),
         ("llama.block_count", 4, struct.pack("<I", 1)),
         ("llama.embedding_length", 4, struct.pack("<I", 32)),
         ("llama.attention.head_count", 4, struct.pack("<I", 2)),
         ("llama.rope.freq_base", 6, struct.pack("<f", 10000.0)),
         ("tokenizer.ggml.model", 8, gguf_string("gpt2")),
         ("tokenizer.ggml.tokens", 9, arr(["a", "b", "ab", "<s>"]))],
        [("token_embd.weight", [32, 4], 0, f32(128)),
         ("output_norm.weight", [32], 1, b"\0<" * 32)]))
    for i, q in enumerate(["how do I change the range of the horizontal axis",
                           '"exact phrase" AND OR NOT near(x y) col:term * ^',
                           "who is it?", "C++ -- x:y {a b} (unbalanced \"quote",
                           "Größe naïve café 日本語 emoji \U0001F600"]):
        put("fts", "q%d" % i, q)
    for i, t in enumerate(["The Northwind board approved a dividend of $0.42 per share.",
                           "  spaces\tand\nnewlines  ", "naïve café — «quotes» 日本語 \U0001F600",
                           "<|im_start|>user\nhi<|im_end|>", "x" * 300]):
        put("tokenizers", "wp%d" % i, b"\0" + t.encode())
        put("tokenizers", "bpe%d" % i, b"\1" + t.encode())
    bodies = [(0, {"query": "dividend per share", "k": 3}),
              (0, {"query": "inverter", "k": 2, "kind": "text", "weights": {"dense": 1, "bm25": 0.5}}),
              (1, {"question": "What was approved?", "k": 2, "max_tokens": 4}),
              (2, {"model": "mmrag", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}),
              (3, {"document": 1, "query": "chart", "page": 1})]
    for i, (r, b) in enumerate(bodies):
        put("server", "json%d" % i, bytes([r]) + json.dumps(b).encode())
    pdf = minimal_pdf()
    put("server", "upload-raw", bytes([4]) + pdf)
    mp = (b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.pdf\"\r\n"
          b"Content-Type: application/pdf\r\n\r\n" + pdf + b"\r\n--XyZ--\r\n")
    put("server", "upload-multipart", bytes([5]) + mp)
    for i, tail in enumerate([b"1", b"999", b"1/pages/1.png", b"abc"]):
        put("server", "get%d" % i, bytes([6 + i % 4]) + tail)
    put("pdf", "minimal", pdf)

def minimal_pdf():
    """One page with one line of text, offsets computed (a valid xref table)."""
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 200] /Contents 4 0 R"
            b" /Resources << /Font << /F1 5 0 R >> >> >>",
            None,
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    text = b"BT /F1 12 Tf 20 150 Td (Quarterly dividend of 0.42 per share.) Tj ET"
    objs[3] = b"<< /Length %d >>\nstream\n" % len(text) + text + b"\nendstream"
    out, offs = b"%PDF-1.4\n", []
    for i, o in enumerate(objs):
        offs.append(len(out))
        out += b"%d 0 obj\n" % (i + 1) + o + b"\nendobj\n"
    x = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offs)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, x)
    return out

if __name__ == "__main__":
    main()
