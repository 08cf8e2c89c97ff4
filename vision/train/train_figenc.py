"""Train mmrag's figure encoder: a small CLIP-style ViT image tower, LiT style against the
locked MiniLM text tower (symmetric InfoNCE), on synthetic figures rendered while training.

  /usr/bin/python3 vision/train/train_figenc.py --minilm models/minilm --out build/figenc \
      --seconds 3600            # CPU; on a GPU add --device cuda --workers 15

Figures come from figdata.spec/render (seed 0 = training stream, seed 1 = held-out eval) and,
with --doc-share, figdata_doc's figures in the style of printed manuals (which stage 1 of the
committed encoder never saw: stages 2-3 added them on the CPU);
worker processes render and patchify them (vision_patch_grid, 196-token budget, 16-px
patches; bicubic resize) while the main process trains on a replay buffer of everything
rendered so far. Writes OUT/model.safetensors (fp16, Hugging Face CLIP vision names, read by
vision/clip.c), OUT/config.json, OUT/metrics.json and OUT/train.log.
"""
import argparse
import json
import math
import multiprocessing as mp
import os
import queue
import random
import sys
import threading
import time

import blas_core  # noqa: F401 (OpenBLAS's kernels: before numpy and torch load it)
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figdata  # noqa: E402
import figdata_doc  # noqa: E402
from figenc_model import CLIP_MEAN, CLIP_STD, FigureViT, MiniLM, patch_grid, patches_from_pixels, st_write  # noqa: E402
from figtypes import TYPE_PROMPTS as DOC_PROMPTS  # noqa: E402

MAX_TOKENS, PATCH = 196, 16

# zero-shot prompts for the figure-type eval (one per generator kind)
TYPE_PROMPTS = {
    "bar": "a vertical bar chart", "hbar": "a horizontal bar chart",
    "grouped_bar": "a grouped bar chart", "stacked_bar": "a stacked bar chart",
    "line": "a line plot", "step": "a step plot", "scatter": "a scatter plot",
    "pie": "a pie chart", "donut": "a donut chart", "histogram": "a histogram",
    "box": "a box plot", "area": "an area chart", "heatmap": "a heatmap",
    "contour": "a contour plot", "surface": "a 3D surface plot", "map3": "a 3D scatter plot",
    "flow": "a flow diagram with boxes and arrows", "table": "a table",
    "equation": "a mathematical equation", "photo": "a photograph",
    "text_page": "an image of text", "errorbar": "a plot with error bars",
    "polar": "a polar plot",
}


def to_grid(a, min_side=0, budget=MAX_TOKENS):
    """uint8 [h][w][3] -> (gh, gw, pixels resized bicubically to the patchifier's grid).
    min_side (training only) first scales a smaller image up to it, so that it takes the
    full-budget grid of its aspect ratio. budget: tokens (training's 196; mmrag reads figures
    at config.json's mmrag.max_tokens)."""
    from PIL import Image
    h, w = a.shape[:2]
    k = max(1.0, min_side / min(h, w))
    gh, gw = patch_grid(int(h * k), int(w * k), budget, PATCH)
    im = Image.fromarray(a).resize((gw * PATCH, gh * PATCH), Image.BICUBIC)
    return gh, gw, np.asarray(im, dtype=np.uint8).copy()


def source(i, seed, doc_share):
    """Which generator draws figure (i, seed): a fixed choice, so a run's stream is the
    same whatever the number of workers."""
    return "doc" if doc_share > 0 and random.Random(seed * 7_919 + i).random() < doc_share else "base"


def draw(src, i, seed, print_share=0.0):
    """Figure (i, seed) of generator src ("base": figdata, "doc": figdata_doc): its spec
    and its pixels (render's exceptions pass through)."""
    if src == "doc":
        s = figdata_doc.spec(i, seed)
        return s, figdata_doc.render(s)
    s = figdata.spec(i, seed, print_share=print_share)
    return s, figdata.render(s)


def sample(args):
    """Worker: render figure (index, seed) and cut it to the patchifier's grid. The last
    element of the descriptions is the kind: a figdata kind, or "doc:" + a figtypes type."""
    i, seed, doc_share, print_share = args
    src = source(i, seed, doc_share)
    try:
        s, a = draw(src, i, seed, print_share)
    except Exception as e:  # a generator bug must not stop a run: count and go on
        return i, None, None, None, repr(e)
    return (i,) + to_grid(a) + (s["desc"] + ["doc:" + s["type"] if src == "doc" else s["kind"]],)


def stream(seed, doc_share, print_share, start=0):
    i = start
    while True:
        yield (i, seed, doc_share, print_share)
        i += 1


class Buffer:
    """Rendered figures by grid shape: uint8 pixels, description vectors, kinds."""

    def __init__(self, dev):
        self.dev, self.b = dev, {}

    def add(self, gh, gw, pix, tvecs):
        d = self.b.setdefault((gh, gw), {"pix": [], "txt": []})
        d["pix"].append(torch.from_numpy(pix).to(self.dev))
        d["txt"].append(tvecs)

    def size(self):
        return sum(len(d["pix"]) for d in self.b.values())

    def batch(self, n, rng):
        keys = [k for k, d in self.b.items() if len(d["pix"]) >= n]
        if not keys:
            return None
        wts = [len(self.b[k]["pix"]) for k in keys]
        k = rng.choices(keys, weights=wts)[0]
        d = self.b[k]
        idx = rng.sample(range(len(d["pix"])), n)
        pix = torch.stack([d["pix"][j] for j in idx])
        txt = torch.stack([d["txt"][j][rng.randrange(len(d["txt"][j]))] for j in idx])
        return k, pix, txt


def to_patches(pix, dev):
    mean = torch.tensor(CLIP_MEAN, device=dev).view(1, 3, 1, 1)
    std = torch.tensor(CLIP_STD, device=dev).view(1, 3, 1, 1)
    x = (pix.permute(0, 3, 1, 2).float() / 255.0 - mean) / std
    return patches_from_pixels(x, PATCH)


def shift(pix, rng, most=6):
    """Translate the whole batch by a few pixels, white fill (figures sit on white)."""
    dy, dx = rng.randint(-most, most), rng.randint(-most, most)
    out = torch.roll(pix, (dy, dx), dims=(1, 2))
    if dy > 0:
        out[:, :dy] = 255
    elif dy < 0:
        out[:, dy:] = 255
    if dx > 0:
        out[:, :, :dx] = 255
    elif dx < 0:
        out[:, :, dx:] = 255
    return out


def loss_fn(img, txt, scale):
    """Symmetric InfoNCE; texts that are (near) identical count as positives too."""
    logits = scale * img @ txt.t()
    same = (txt @ txt.t() > 0.985).float()
    tgt = same / same.sum(1, keepdim=True)
    return 0.5 * (torch.sum(-tgt * F.log_softmax(logits, 1), 1).mean()
                  + torch.sum(-tgt * F.log_softmax(logits.t(), 1), 1).mean())


@torch.no_grad()
def evaluate(model, text, evalset, dev):
    """Text->image R@1/R@5 over the held-out figures (every description as a query) and
    zero-shot figure-type accuracy."""
    model.eval()
    embs, kinds, descs = [], [], []
    for gh, gw, pix, ds in evalset:
        x = to_patches(torch.from_numpy(pix[None]).to(dev), dev)
        embs.append(model(x, gh, gw)[0])
        kinds.append(ds[-1])
        descs.append(ds[:-1])
    I = torch.stack(embs)
    qs, owner = [], []
    for j, ds in enumerate(descs):
        for d in ds:
            qs.append(d)
            owner.append(j)
    Q = text.embed(qs)
    rank = (Q @ I.t()).argsort(1, descending=True)
    own = torch.tensor(owner, device=dev)[:, None]
    r1 = (rank[:, :1] == own).any(1).float().mean().item()
    r5 = (rank[:, :5] == own).any(1).float().mean().item()
    m = {"eval_figures": len(evalset), "queries": len(qs), "r_at_1": r1, "r_at_5": r5}
    charts = [j for j, k in enumerate(kinds) if not k.startswith("doc:")]
    docs = [j for j, k in enumerate(kinds) if k.startswith("doc:")]
    # charts over figdata's kinds as stage 1 always measured; manual-style figures over the
    # 11 types of the real evaluation (figtypes)
    m["type_accuracy"] = type_acc(text, I, [kinds[j] for j in charts], charts, TYPE_PROMPTS)
    if docs:
        m["doc_figures"] = len(docs)
        m["doc_type_accuracy"] = type_acc(text, I, [kinds[j][4:] for j in docs], docs, DOC_PROMPTS)
    model.train()
    return m


def type_acc(text, I, kinds, rows, prompts):
    """Zero-shot type accuracy of image vectors I[rows] (true kinds `kinds`), one prompt each."""
    if not rows:
        return None
    names = list(prompts)
    P = text.embed([prompts[k] for k in names])
    pred = (I[rows] @ P.t()).argmax(1).tolist()
    return float(np.mean([names[p] == k for p, k in zip(pred, kinds)]))


def open_log(out):
    """say(...): print a line and append it to OUT/train.log."""
    log = open(os.path.join(out, "train.log"), "a")

    def say(*m):
        line = " ".join(str(x) for x in m)
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()
    return say


def export(out, model, scale, metrics, producer, say):
    """OUT/model.safetensors (fp16, Hugging Face CLIP names), config.json, metrics.json."""
    model = model.float().cpu()
    st_write(os.path.join(out, "model.safetensors"), model.hf_state(torch.float16),
             {"format": "pt", "producer": f"mmrag vision/train/{producer}"})
    cfg = model.hf_config()
    cfg["mmrag"]["logit_scale"] = float(scale)
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    json.dump(metrics, open(os.path.join(out, "metrics.json"), "w"), indent=1)
    say(f"wrote {out}/model.safetensors")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minilm", default="models/minilm")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=3600)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--eval-n", type=int, default=1000)
    ap.add_argument("--min-buffer", type=int, default=4000)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--doc-share", type=float, default=0.0,
                    help="share of figures drawn by figdata_doc (manual style); the committed stage 1: 0")
    ap.add_argument("--print-share", type=float, default=0.0,
                    help="share of figdata's printable kinds in the print style; the committed stage 1: 0")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    say = open_log(a.out)
    t0 = time.time()
    pool = mp.get_context("fork").Pool(a.workers)  # before CUDA is touched in this process
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    dev = torch.device(a.device)
    text = MiniLM(a.minilm).to(dev)
    model = FigureViT(width=a.width, layers=a.layers, heads=a.width // 64, mlp=4 * a.width,
                      patch=PATCH, grid=14, proj=384).to(dev)
    scale_log = torch.nn.Parameter(torch.tensor(math.log(1 / 0.07), device=dev))
    params = [p for p in model.parameters()] + [scale_log]
    decay = [p for p in model.parameters() if p.dim() >= 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2] + [scale_log]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": nodecay, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.98))
    say(f"figenc: {sum(p.numel() for p in model.parameters())} parameters, device {dev}, "
        f"{a.workers} render workers, {a.seconds:.0f} s budget")
    evalset = [(gh, gw, pix, ds) for _, gh, gw, pix, ds in
               pool.imap(sample, [(i, 1, a.doc_share, a.print_share) for i in range(a.eval_n)],
                         chunksize=8) if gh]
    say(f"eval set: {len(evalset)} figures rendered in {time.time() - t0:.0f} s")
    q = queue.Queue(maxsize=4096)  # a thread moves rendered figures off the pool's pipe

    def reader():
        for r in pool.imap_unordered(sample, stream(0, a.doc_share, a.print_share), chunksize=4):
            q.put(r)
    threading.Thread(target=reader, daemon=True).start()
    buf = Buffer(dev)
    failures, steps, seen = 0, 0, 0
    first_error = []
    start = time.time()
    pending = []

    def drain(max_items):
        nonlocal failures
        got = 0
        while got < max_items:
            try:
                r = q.get(timeout=0.001 if buf.size() >= a.min_buffer else 1.0)
            except queue.Empty:
                break
            got += 1
            if r[1] is None:
                failures += 1
                if not first_error:   # the first one is enough to say what broke
                    first_error.append(r[4])
                continue
            pending.append(r)
        if pending:
            texts = [d for r in pending for d in r[4][:-1]]
            vec = text.embed(texts)
            k = 0
            for _, gh, gw, pix, ds in pending:
                n = len(ds) - 1
                buf.add(gh, gw, pix, vec[k:k + n])
                k += n
            pending.clear()

    while buf.size() < a.min_buffer:
        drain(256)
    say(f"buffer warm: {buf.size()} figures after {time.time() - t0:.0f} s, {failures} failed to render")
    if failures > 0.05 * buf.size():  # a generator broken by another matplotlib: stop before the
        pool.terminate()              # budget (a lent GPU's minutes) goes on half the data
        raise SystemExit(f"train_figenc: {failures} renders failed, first: {first_error[0]}")
    train_t0 = time.time()
    budget = a.seconds - (train_t0 - t0) - 30  # leave time for eval and export
    use_amp = dev.type == "cuda"
    while True:
        frac = (time.time() - train_t0) / max(budget, 1)
        if frac >= 1:
            break
        drain(64)
        lr = a.lr * min(1.0, steps / 300) * 0.5 * (1 + math.cos(math.pi * min(frac, 1)))
        for g in opt.param_groups:
            g["lr"] = lr
        bt = buf.batch(a.batch, rng)
        if bt is None:
            drain(256)
            continue
        (gh, gw), pix, txt = bt
        pix = shift(pix, rng)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=use_amp):
            img = model(to_patches(pix, dev), gh, gw)
        loss = loss_fn(img.float(), txt, scale_log.exp().clamp(max=100))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        steps += 1
        seen += a.batch
        if steps % 200 == 0:
            say(f"step {steps} t={time.time() - t0:.0f}s loss {loss.item():.3f} lr {lr:.2e} "
                f"scale {scale_log.exp().item():.1f} buffer {buf.size()} failures {failures}")
    pool.terminate()
    m = evaluate(model, text, evalset, dev)
    m.update({"steps": steps, "samples_seen": seen, "unique_figures": buf.size(),
              "render_failures": failures, "seconds": round(time.time() - t0),
              "device": str(dev), "batch": a.batch, "lr": a.lr, "seed": a.seed,
              "width": a.width, "layers": a.layers, "doc_share": a.doc_share,
              "print_share": a.print_share})
    say("eval:", json.dumps(m))
    export(a.out, model, scale_log.exp().item(), m, "train_figenc.py", say)


if __name__ == "__main__":
    main()
