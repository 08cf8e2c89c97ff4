"""ONNX Runtime baseline for bench_textenc: all-MiniLM-L6-v2 exported from the same
safetensors (scripts/golden_minilm.py --export-onnx), fp32 and dynamic-quantized int8
(onnxruntime.quantization.quantize_dynamic, QInt8 weights: the documented recipe).

Run with the venv's python (scripts/bench-ort.sh makes it):
  python scripts/bench_ort.py --onnx minilm.onnx --models models --texts FILE --threads T
Encodes the texts like sentence-transformers (length-sorted batches of 32, padded,
masked), tokenization included, best of 3, and prints one line per precision:
  ort_fp32 chunks_per_s=X threads=T n=N
  ort_int8 chunks_per_s=X threads=T n=N min_cos_vs_fp32=C mean_cos_vs_fp32=M
  ort_int8_pc_rr ... (per_channel=True, reduce_range=True)
"""
import argparse
import os
import sys
import time

import numpy as np
import onnxruntime as ort
from onnxruntime.quantization import QuantType, quantize_dynamic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_minilm import load_vocab, tokenize  # noqa: E402  (pure Python + numpy)


def session(path, threads):
    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    o.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])


def encode(sess, texts, vocab, batch=32):
    ids = [tokenize(t, vocab) for t in texts]
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    out = np.zeros((len(ids), 384), dtype=np.float32)
    for b0 in range(0, len(order), batch):
        idx = order[b0:b0 + batch]
        L = max(len(ids[i]) for i in idx)
        a = np.zeros((len(idx), L), dtype=np.int64)
        m = np.zeros((len(idx), L), dtype=np.float32)
        for r, i in enumerate(idx):
            a[r, :len(ids[i])] = ids[i]
            m[r, :len(ids[i])] = 1
        e = sess.run(["emb"], {"ids": a, "mask": m})[0]
        out[idx] = e
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--onnx", required=True)
    ap.add_argument("--models", default="models")
    ap.add_argument("--texts", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    with open(args.texts, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f]
    vocab = load_vocab(os.path.join(args.models, "minilm", "vocab.txt"))
    q8 = args.onnx.replace(".onnx", ".int8.onnx")
    if not os.path.exists(q8):
        quantize_dynamic(args.onnx, q8, weight_type=QuantType.QInt8)
    # the variant ORT's docs advise on AVX2 without VNNI (u8·s8 pairs saturate in int16
    # otherwise): 7-bit weights, per output channel
    q8r = args.onnx.replace(".onnx", ".int8rr.onnx")
    if not os.path.exists(q8r):
        quantize_dynamic(args.onnx, q8r, weight_type=QuantType.QInt8, per_channel=True,
                         reduce_range=True)
    ref = None
    for name, path in (("ort_fp32", args.onnx), ("ort_int8", q8), ("ort_int8_pc_rr", q8r)):
        s = session(path, args.threads)
        encode(s, texts[:8], vocab)  # warm-up
        best = 1e30
        for _ in range(args.reps):
            t0 = time.perf_counter()
            e = encode(s, texts, vocab)
            best = min(best, time.perf_counter() - t0)
        line = "%s chunks_per_s=%.2f threads=%d n=%d" % (name, len(texts) / best, args.threads,
                                                       len(texts))
        if ref is None:
            ref = e
        else:
            c = np.sum(ref * e, axis=1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(e, axis=1))
            line += " min_cos_vs_fp32=%.5f mean_cos_vs_fp32=%.5f" % (c.min(), c.mean())
        print(line, flush=True)


if __name__ == "__main__":
    main()
