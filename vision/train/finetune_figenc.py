"""Fine-tune mmrag's figure encoder for figures of printed manuals, on a CPU in minutes.

The base model (train_figenc.py, matplotlib-style charts) never saw line drawings, circuit
schematics, trees, code listings or ruled tables, which fill real manuals. This adds them
(figdata_doc.py) and, optionally, real figures harvested from Debian documentation
(harvest_real.py: crop + caption), keeping the base's own charts in the mix so it keeps
them (v2: held-out chart type 98.7% -> 98.0%). The first --freeze blocks stay fixed: their outputs are computed once per figure
and cached, so each step runs only the upper blocks (LiT against the locked MiniLM,
symmetric InfoNCE as in train_figenc.py).

  /usr/bin/python3 vision/train/finetune_figenc.py --base vision/data/figenc \
      --minilm models/minilm --out build/figenc-ft [--real DIR] [--dev DEVJSON --dev-dir DIR]
      [--eval-only]     (report --base on the held-out and dev figures, no training)

Writes OUT/model.safetensors, config.json, metrics.json and train.log, like train_figenc.
"""
import argparse
import json
import math
import multiprocessing as mp
import os
import random
import re
import sys
import tempfile
import time

import blas_core  # noqa: F401 (OpenBLAS's kernels: before numpy and torch load it)
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from figenc_model import FigureViT, MiniLM  # noqa: E402
from figtypes import TYPE_PROMPTS  # noqa: E402
from harvest_real import iou  # noqa: E402
from train_figenc import TYPE_PROMPTS as BASE_PROMPTS, draw, export, loss_fn, open_log, to_grid, to_patches  # noqa: E402

CPU = torch.device("cpu")


def render_one(job):
    """Worker: ('base'|'doc', index, seed, print share) -> (gh, gw, pixels, descriptions, type,
    source) or None."""
    src, i, seed, share = job
    try:
        s, a = draw(src, i, seed, share)
    except Exception:  # a generator bug must not stop a run
        return None
    return to_grid(a) + (s["desc"], s.get("type", s["kind"]), src)


def load_crop(path, min_side=0):
    from PIL import Image
    return to_grid(np.asarray(Image.open(path).convert("RGB")), min_side)


# Real crops in training take the full-budget grid of their aspect ratio, so that figures of
# every size share the few grid shapes of the rendered ones (a batch is one shape) instead
# of sitting in shapes too rare to fill a batch.
SNAP_SIDE = 400


def described(paths):
    """Figures described by eye (real_figures.json, r_more_figures.json; a comma-separated list):
    (doc, page) -> [(box, type, [descriptions])]; type "skip" marks a crop that is not a figure."""
    out = {}
    for f in (f for p in paths.split(",") if p for f in json.load(open(p))["figures"]):
        out.setdefault((f["doc"], int(f["page"])), []).append((f["box"], f["type"], [f["short"], f["long"]]))
    return out


def description_of(seen, doc, page, box):
    """(type, [descriptions]) of the described figure a harvested box is (IoU >= 0.5, the best),
    or (None, []). By overlap, not the exact box: an ingest that boxes a figure a little
    differently, or joins it with a panel beside it, must not train a figure on another's
    words (a joined pair matches neither half) nor drop its description."""
    best, hit = 0.5, (None, [])
    for b, kind, ds in seen.get((doc, int(page)), []):
        o = iou(b, box)
        if o >= best:
            best, hit = o, (kind, ds)
    return hit


def real_items(d, limit, seen):
    """Harvested figures: (gh, gw, pixels, descriptions, type, "real"). The descriptions are
    the caption ("Figure N:" cut) and, for a figure described by eye (seen: described()), its
    two descriptions and its type's prompt; a figure with neither is left out, as is one
    marked skip."""
    out = []
    for line in open(os.path.join(d, "index.jsonl")):
        r = json.loads(line)
        cap = " ".join(r.get("caption", "").split())
        cap = re.sub(r"^(figure|fig\.?|chart|plate|diagram|graph)\s*[\d.]+\s*[:.]?\s*", "", cap, flags=re.I)[:300]
        texts = [cap] if len(cap.split()) >= 3 else []
        kind, ds = description_of(seen, r["doc"], r["page"], r["box"])
        if kind == "skip":
            continue
        texts += ds + ([TYPE_PROMPTS[kind]] if kind in TYPE_PROMPTS else [])
        if not texts:
            continue
        out.append(load_crop(os.path.join(d, r["file"]), SNAP_SIDE) + (texts, kind, "real"))
        if len(out) >= limit:
            break
    return out


def boxed_items(path, pdf_dir, split):
    """Figures boxed by eye on the page (r_figures.json) of one split, cropped from a 144-dpi
    render: (gh, gw, pixels, descriptions, type, kind). Training ones ("real") learn their two
    descriptions and their type's prompt; dev ones are checked on the long description."""
    from harvest_real import crop
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for f in json.load(open(path))["figures"]:
            if f["split"] != split:
                continue
            a = np.asarray(crop(os.path.join(pdf_dir, f["doc"]), f["page"], f["box"], tmp))
            if split == "dev":
                out.append(to_grid(a) + ([f["long"]], f["type"], "dev"))
            else:
                texts = [f["short"], f["long"]] + ([TYPE_PROMPTS[f["type"]]] if f["type"] in TYPE_PROMPTS else [])
                out.append(to_grid(a, SNAP_SIDE) + (texts, f["type"], "real"))
    return out


def stem(model, pix, gh, gw, freeze):
    """The frozen part: patch embedding, position, class token, pre-LN, first blocks."""
    x = model.patch_embedding(to_patches(pix, CPU)) + model.pos_for(gh, gw)
    cls = (model.class_embedding + model.position_embedding[0]).expand(x.shape[0], 1, -1)
    x = model.pre_layrnorm(torch.cat([cls, x], dim=1))
    for blk in model.layers[:freeze]:
        x = blk(x)
    return x


def head(model, x, freeze):
    for blk in model.layers[freeze:]:
        x = blk(x)
    return F.normalize(model.visual_projection(model.post_layernorm(x[:, 0])), dim=-1)


@torch.no_grad()
def embed_items(model, items, bs=32):
    """Full forward of (gh, gw, pix, ...) items, one grid shape per batch."""
    out = [None] * len(items)
    by = {}
    for j, it in enumerate(items):
        by.setdefault((it[0], it[1]), []).append(j)
    for (gh, gw), js in by.items():
        for k in range(0, len(js), bs):
            b = js[k:k + bs]
            e = model(to_patches(torch.from_numpy(np.stack([items[j][2] for j in b])), CPU), gh, gw)
            for j, v in zip(b, e):
                out[j] = v
    return torch.stack(out)


@torch.no_grad()
def type_accuracy(model, text, items, prompts):
    """Zero-shot: each item's type (its 5th field) against one prompt per type."""
    items = [it for it in items if it[4] in prompts]
    if not items:
        return 0.0, {}
    kinds = sorted(prompts)
    P = text.embed([prompts[k] for k in kinds])
    pred = (embed_items(model, items) @ P.t()).argmax(1).tolist()
    per = {}
    for it, p in zip(items, pred):
        c = per.setdefault(it[4], [0, 0])
        c[0] += kinds[p] == it[4]
        c[1] += 1
    return sum(c[0] for c in per.values()) / len(items), per


@torch.no_grad()
def retrieval(model, text, items):
    """Text->image R@1/R@5, every description a query."""
    I = embed_items(model, items)
    qs, own = [], []
    for j, it in enumerate(items):
        for d in it[3]:
            qs.append(d)
            own.append(j)
    rank = (text.embed(qs) @ I.t()).argsort(1, descending=True)
    o = torch.tensor(own)[:, None]
    return (rank[:, :1] == o).any(1).float().mean().item(), (rank[:, :5] == o).any(1).float().mean().item()


def dev_items(path, d):
    """The labelled dev figures: (gh, gw, pix, [description], type, "dev")."""
    out = []
    for f in json.load(open(path))["figures"]:
        out.append(load_crop(os.path.join(d, f["file"])) + ([f["description"]], f["type"], "dev"))
    return out


def report(model, text, held, dev):
    m = {}
    # by generator, not by type name: "line" and "table" are types of both
    base = [it for it in held if it[5] == "base"]
    doc = [it for it in held if it[5] == "doc"]
    m["base_type_accuracy"] = type_accuracy(model, text, base, BASE_PROMPTS)[0]
    m["base_r_at_1"], m["base_r_at_5"] = retrieval(model, text, base)
    m["doc_type_accuracy"], _ = type_accuracy(model, text, doc, TYPE_PROMPTS)
    m["doc_r_at_1"], m["doc_r_at_5"] = retrieval(model, text, doc)
    if dev:
        m["dev_type_accuracy"], per = type_accuracy(model, text, dev, TYPE_PROMPTS)
        m["dev_per_type"] = {k: f"{v[0]}/{v[1]}" for k, v in sorted(per.items())}
        m["dev_r_at_1"], m["dev_r_at_5"] = retrieval(model, text, dev)
    return m


def batch_pick(rng, a, keys, wts, rkeys, rwts, groups, reals):
    """One grid shape's batch: either drawn from all its figures, or (a --real-frac share of
    steps) up to half real figures, filled with rendered ones of the same shape."""
    if rkeys and rng.random() < a.real_frac:
        key = rng.choices(rkeys, weights=rwts)[0]
        r = reals[key]
        pick = rng.sample(r, min(a.batch // 2, len(r)))
        rs = set(r)
        rest = [i for i in range(len(groups[key])) if i not in rs]
        pick += rng.sample(rest, min(a.batch - len(pick), len(rest)))
        return pick, key
    key = rng.choices(keys, weights=wts)[0]
    return rng.sample(range(len(groups[key])), min(a.batch, len(groups[key]))), key


def dev_check(model, text, dev, steps, scale_log, best, best_state, say):
    """Dev type accuracy + R@5 (tuned on, never trained on); keeps the best state."""
    model.eval()
    acc, _ = type_accuracy(model, text, dev, TYPE_PROMPTS)
    r1, r5 = retrieval(model, text, dev)
    model.train()
    say(f"dev at step {steps}: type {acc:.3f} R@1 {r1:.3f} R@5 {r5:.3f}")
    if best is None or acc + r5 > best[0]:
        best = (acc + r5, steps)
        best_state = ({k: v.detach().clone() for k, v in model.state_dict().items()}, scale_log.item())
    return best, best_state


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="vision/data/figenc")
    ap.add_argument("--minilm", default="models/minilm")
    ap.add_argument("--out", required=True)
    ap.add_argument("--n-base", type=int, default=3000)
    ap.add_argument("--n-doc", type=int, default=3000)
    ap.add_argument("--print-share", type=float, default=0.0,
                    help="share of the --n-base charts of PRINTABLE kinds drawn in the print style")
    ap.add_argument("--n-held", type=int, default=300)
    ap.add_argument("--real", default="", help="harvested figures (harvest_real.py OUT): comma-separated dirs")
    ap.add_argument("--n-real", type=int, default=2000)
    ap.add_argument("--described", default="", help="real_figures.json,...: real figures described by eye")
    ap.add_argument("--real-frac", type=float, default=0.5, help="share of batches built around real figures")
    ap.add_argument("--eval-every", type=int, default=0, help="dev check every N steps; the best is kept")
    ap.add_argument("--boxed", default="", help="r_figures.json: figures boxed by eye on their pages")
    ap.add_argument("--boxed-dir", default="", help="the PDFs of --boxed")
    ap.add_argument("--dev", default="")
    ap.add_argument("--dev-dir", default="")
    ap.add_argument("--freeze", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=1200)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--eval-only", action="store_true", help="report --base on the held-out and dev figures")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(os.cpu_count() or 2)
    say = open_log(a.out)
    t0 = time.time()
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    cfg = json.load(open(os.path.join(a.base, "config.json")))
    model = FigureViT.from_file(os.path.join(a.base, "model.safetensors"), cfg).float()
    text = MiniLM(a.minilm)
    # training figures: base charts from index 10,000,000 on (the base run drew from 0), new
    # document-style figures from 0; held-out ones from seed 1 of both
    jobs = [] if a.eval_only else \
        [("base", 10_000_000 + i, 0, a.print_share) for i in range(a.n_base)] + \
        [("doc", i, 0, 0.0) for i in range(a.n_doc)]
    held_jobs = [("base", i, 1, 0.0) for i in range(a.n_held)] + [("doc", i, 1, 0.0) for i in range(a.n_held)]
    with mp.get_context("fork").Pool(a.workers) as pool:
        train = [r for r in pool.imap(render_one, jobs, chunksize=16) if r]
        held = [r for r in pool.imap(render_one, held_jobs, chunksize=16) if r]
    seen = described(a.described) if a.described else {}   # read once for every --real dir
    for d in a.real.split(",") if a.real and not a.eval_only else []:
        train += real_items(d, a.n_real, seen)
    if a.boxed and not a.eval_only:
        train += boxed_items(a.boxed, a.boxed_dir, "train")
    dev = dev_items(a.dev, a.dev_dir) if a.dev else []
    if a.boxed:
        dev += boxed_items(a.boxed, a.boxed_dir, "dev")
    say(f"figenc fine-tune: {len(train)} training figures, {len(held)} held out, {len(dev)} dev, "
        f"rendered in {time.time() - t0:.0f} s; freeze {a.freeze} of {len(model.layers)} blocks")
    model.eval()
    before = report(model, text, held, dev)
    say("before:", json.dumps(before))
    if a.eval_only:
        return

    # cache the frozen stem's outputs (fp16) and every description's vector
    with torch.no_grad():
        by = {}
        for j, it in enumerate(train):
            by.setdefault((it[0], it[1]), []).append(j)
        feats, groups = {}, {}
        for (gh, gw), js in by.items():
            xs = [stem(model, torch.from_numpy(np.stack([train[j][2] for j in js[k:k + 64]])), gh, gw,
                       a.freeze).half() for k in range(0, len(js), 64)]
            feats[(gh, gw)] = torch.cat(xs)
            groups[(gh, gw)] = js
        descs = [d for it in train for d in it[3]]
        dv = text.embed(descs)
        tv, k = [], 0
        for it in train:
            tv.append(dv[k:k + len(it[3])])
            k += len(it[3])
    say(f"cached {len(train)} stems and {len(descs)} descriptions after {time.time() - t0:.0f} s")

    for p in model.parameters():
        p.requires_grad_(False)
    params = [p for blk in model.layers[a.freeze:] for p in blk.parameters()]
    params += list(model.post_layernorm.parameters()) + list(model.visual_projection.parameters())
    for p in params:
        p.requires_grad_(True)
    scale_log = torch.nn.Parameter(torch.tensor(math.log(cfg["mmrag"]["logit_scale"])))
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.05},
                             {"params": [p for p in params if p.dim() < 2] + [scale_log], "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.98))
    keys = [k for k, js in groups.items() if len(js) >= 16]
    wts = [len(groups[k]) for k in keys]
    reals = {k: [i for i, j in enumerate(groups[k]) if train[j][5] == "real"] for k in keys}
    rkeys = [k for k in keys if reals[k]]
    rwts = [len(reals[k]) for k in rkeys]
    best, best_state = None, None
    model.train()
    steps, train_t0 = 0, time.time()
    budget = a.seconds - (train_t0 - t0)
    while True:
        frac = (time.time() - train_t0) / max(budget, 1)
        if frac >= 1:
            break
        lr = a.lr * min(1.0, (steps + 1) / 50) * 0.5 * (1 + math.cos(math.pi * frac))
        for g in opt.param_groups:
            g["lr"] = lr
        pick, key = batch_pick(rng, a, keys, wts, rkeys, rwts, groups, reals)
        js = groups[key]
        x = feats[key][pick].float()
        txt = torch.stack([tv[js[p]][rng.randrange(len(tv[js[p]]))] for p in pick])
        loss = loss_fn(head(model, x, a.freeze), txt, scale_log.exp().clamp(max=100))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params + [scale_log], 1.0)
        opt.step()
        steps += 1
        if steps % 25 == 0:
            say(f"step {steps} t={time.time() - t0:.0f}s loss {loss.item():.3f} lr {lr:.2e} "
                f"scale {scale_log.exp().item():.1f}")
        if dev and a.eval_every and steps % a.eval_every == 0:
            best, best_state = dev_check(model, text, dev, steps, scale_log, best, best_state, say)
    if best_state is not None:
        if steps % a.eval_every:   # the last steps are not checked yet
            best, best_state = dev_check(model, text, dev, steps, scale_log, best, best_state, say)
        model.load_state_dict(best_state[0])
        scale_log.data.fill_(best_state[1])
        say(f"kept the dev-best state of step {best[1]}")
    model.eval()
    after = report(model, text, held, dev)
    say("after:", json.dumps(after))
    m = {"before": before, "after": after, "steps": steps, "training_figures": len(train),
         "freeze": a.freeze, "batch": a.batch, "lr": a.lr, "seed": a.seed,
         "seconds": round(time.time() - t0), "base": a.base, "real": bool(a.real)}
    export(a.out, model, scale_log.exp().item(), m, "finetune_figenc.py", say)


if __name__ == "__main__":
    main()
