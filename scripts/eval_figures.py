#!/usr/bin/env python3
"""Figure evaluation on real figures nobody tuned on (issue 13), printed by `make eval`.

tests/data/figures_real.json: 101 figures of octave.pdf (octave-doc) and
reportlab-userguide.pdf (python-reportlab-doc), labelled by a person from the pixels (type,
an appearance description that avoids caption words, the box). These two packages are
reserved for evaluation: nothing was trained or tuned on them.

  /usr/bin/python3 scripts/eval_figures.py BUILD MODELS [--dev | --dev-r | --dev-manuals | --dev-more |
      --dev-captioned] [--quick]
      (fetches the .debs with apt)
  /usr/bin/python3 scripts/eval_figures.py --fetch-r DIR   (only fetch the R vignettes into DIR:
      those of r_figures.json and of r_more_figures.json, for training)

--dev measures the dev set instead (vision/train/dev_figures.json: texlive documents, tuned
on, never trained on; scripts/figenc-real-data.sh fetches them). --dev-r measures the dev
split of vision/train/r_figures.json (R vignettes of the survival and vcd packages, boxed by
eye on the page, captioned or not; the detector was tuned on it, the encoder never trained on
it; the .debs are fetched with apt). --dev-manuals measures vision/train/manual_figures.json
(the Asymptote manual, four Graphviz guides, the GLE and the PyX manuals, boxed by eye; the
detector and locate's vouching were tuned on it, the encoder never trained on it). --dev-more
measures vision/train/more_figures.json (the Gri, PSPP, ngspice manuals and a Maxima book,
boxed by eye in stop 37 by helpers who saw no mmrag output). --dev-captioned measures
vision/train/captioned_figures.json (120 texlive pages picked at random among those holding a
"Figure N" caption line, boxed by eye in stop 39 by helpers who saw no mmrag output: caption-
driven detection; the encoder's fine-tuning read other documents of these packages).
--quick skips the run without the figure encoder.

Prints, with the figure encoder and without it (MMRAG_FIGENC=none):
  - detection: labelled figures whose box mmrag's ingest found (an image with IoU >= 0.5);
  - image-only R@5: `mmrag search --sources image` with the description, hit = one of the
    top 5 images on the right page with IoU >= 0.5 (over all figures, and over detected);
  - VPE hit@IoU>=0.5: `mmrag locate` with the description, with and without the page, and
    the precision and recall of its answers at its default threshold;
  - absent descriptions: each figure's page asked, with the page, for another document's figure
    of another type; every answer "found" is false;
  - zero-shot figure type (figure encoder only, $MMRAG_FIGENC's when set): the labelled box cropped from a 144-dpi
    render, read at config.json's token budget as mmrag does, embedded by the training code's
    forward pass (vision/train/figenc_model.py, equal to the C path: tests/test_figenc.c),
    against one prompt per type.
"""
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "vision", "train"))
import blas_core  # noqa: F401,E402 (OpenBLAS's kernels, before numpy and torch load it)
from figtypes import TYPE_PROMPTS as PROMPTS  # noqa: E402
from harvest_real import iou  # noqa: E402

DEV_LABELS = os.path.join(ROOT, "vision", "train", "dev_figures.json")
R_LABELS = os.path.join(ROOT, "vision", "train", "r_figures.json")
R_MORE = os.path.join(ROOT, "vision", "train", "r_more_figures.json")  # training only
BOXED = {"r": (R_LABELS, "eval-figures-r"),   # dev sets boxed by eye on their pages
         "manuals": (os.path.join(ROOT, "vision", "train", "manual_figures.json"), "eval-figures-manuals"),
         "more": (os.path.join(ROOT, "vision", "train", "more_figures.json"), "eval-figures-more"),
         "captioned": (os.path.join(ROOT, "vision", "train", "captioned_figures.json"), "eval-figures-captioned")}


def fetch(pdfs, cache):
    """{name: path} of the pinned PDFs, each package's .deb downloaded and unpacked once."""
    os.makedirs(cache, exist_ok=True)
    out, unpacked = {}, {}
    try:
        for name, p in pdfs.items():
            dst = os.path.join(cache, name)
            ok = os.path.exists(dst) and hashlib.sha256(open(dst, "rb").read()).hexdigest() == p["sha256"]
            if not ok:
                pin = f"{p['package']}={p['version']}"
                if pin not in unpacked:
                    work = unpacked[pin] = tempfile.mkdtemp(dir=cache)
                    os.chmod(work, 0o755)
                    r = subprocess.run(["apt-get", "download", "-qq", pin], cwd=work, capture_output=True, text=True)
                    if r.returncode:   # (its warnings about apt's sandbox user are noise)
                        sys.exit(f"eval-figures: apt-get download {pin} failed: {r.stderr.strip()[-300:]}")
                    deb = [f for f in os.listdir(work) if f.endswith(".deb")][0]
                    subprocess.run(["dpkg-deb", "-x", deb, "x"], cwd=work, check=True)
                src = os.path.join(unpacked[pin], "x", p["path"])
                if src.endswith(".gz"):   # graphviz-doc ships its guides gzipped
                    subprocess.run(["gunzip", "-f", src], check=True)
                    src = src[:-3]
                os.replace(src, dst)
                if hashlib.sha256(open(dst, "rb").read()).hexdigest() != p["sha256"]:
                    sys.exit(f"eval-figures: {name}: sha256 mismatch")
            out[name] = dst
    finally:
        for work in unpacked.values():
            subprocess.run(["rm", "-rf", work])
    return out


def run(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, env=env).stdout


def load_set(dev):
    """(figures, {pdf name: path}, db dir) of the reserved set, or of a dev set (--dev, --dev-r,
    --dev-manuals, --dev-more, --dev-captioned)."""
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "mmrag")
    if dev in BOXED:
        path, sub = BOXED[dev]
        labels = json.load(open(path))
        figs = [dict(f, description=f["long"]) for f in labels["figures"] if f["split"] == "dev"]
        docs = {f["doc"] for f in figs}
        pdfs = fetch({k: v for k, v in labels["pdfs"].items() if k in docs}, os.path.join(cache, sub))
        return figs, pdfs, os.path.join(cache, sub, "db")
    if not dev:
        labels = json.load(open(os.path.join(ROOT, "tests/data/figures_real.json")))
        pdfs = fetch(labels["pdfs"], os.path.join(cache, "eval-figures"))
        return labels["figures"], pdfs, os.path.join(cache, "eval-figures", "db")
    # the dev set: texlive documents tuned on (scripts/figenc-real-data.sh fetches them)
    root = os.path.join(cache, "figenc-real", "x")
    figs = [dict(f, doc=os.path.basename(f["pdf"])) for f in json.load(open(DEV_LABELS))["figures"]]
    pdfs = {os.path.basename(f["pdf"]): os.path.join(root, f["pdf"]) for f in figs}
    missing = [p for p in pdfs.values() if not os.path.exists(p)]
    if missing:
        sys.exit(f"eval-figures --dev: {missing[0]} missing (run scripts/figenc-real-data.sh BUILD OUT once)")
    return figs, pdfs, os.path.join(cache, "eval-figures-dev", "db")


def pr_line(rows, what):
    """precision and recall of locate's answers at its default threshold, over (good, found) rows"""
    found = sum(f for _, f in rows)
    right = sum(g and f for g, f in rows)
    prec = right / found if found else 0.0
    return f"{what}: precision {prec:.3f} ({right}/{found} answered), recall {right / max(1, len(rows)):.3f}"


def absent_from(figs, i):
    """A description of something not on figs[i]'s page: another document's figure of another
    type (a fixed choice, so runs compare), or None when the set has none. Locate should
    answer "not found"."""
    f, n = figs[i], len(figs)
    for k in range(1, n):
        g = figs[(i * 7 + k * 13) % n]
        if g["doc"] != f["doc"] and g["type"] != f["type"]:
            return g
    return None


def main():
    if sys.argv[1:2] == ["--fetch-r"]:  # the R vignettes of every split and more, for training
        out = sys.argv[2]
        fetch({**json.load(open(R_LABELS))["pdfs"], **json.load(open(R_MORE))["pdfs"]}, out)
        print(out)
        return
    build, models = sys.argv[1], sys.argv[2]
    opts = sys.argv[3:]
    dev = next((k for k in BOXED if f"--dev-{k}" in opts), "--dev" in opts)
    mm = os.path.join(build, "mmrag")
    figs, pdfs, db = load_set(dev)
    env = dict(os.environ, MMRAG_MODELS=models)
    if not os.path.exists(os.path.join(db, "mmrag.db")):
        print(f"(indexing {len(pdfs)} PDFs with embeddings once; cached in", db + ")", flush=True)
        subprocess.run([mm, "index", "--db", db] + sorted(pdfs.values()), env=env, check=True,
                       stdout=subprocess.DEVNULL)
    con = sqlite3.connect(os.path.join(db, "mmrag.db"))
    docid = {os.path.basename(p): i for i, p in con.execute("SELECT id, path FROM documents")}
    images = {}  # id -> (doc name, page, box)
    names = {v: k for k, v in docid.items()}
    for i, d, pg, x0, y0, x1, y1 in con.execute("SELECT id, doc, page, x0, y0, x1, y1 FROM images"):
        images[i] = (names.get(d), pg, [x0, y0, x1, y1])

    def matches(f, image_id):
        im = images.get(image_id)
        return im and im[0] == f["doc"] and im[1] == f["page"] and iou(im[2], f["box"]) >= 0.5

    def located(f, page, fenv):
        cmd = [mm, "locate", "--db", db, "--doc", str(docid[f["doc"]]), "--json"]
        try:
            r = json.loads(run(cmd + (["--page", str(page)] if page else []) + [f["description"]], fenv))
        except ValueError:
            return False, False
        good = r.get("page") == f["page"] and iou(r.get("box", [0, 0, 0, 0]), f["box"]) >= 0.5
        return good, bool(r.get("found"))

    detected = [f for f in figs if any(matches(f, i) for i in images)]
    print(f"figures: {len(figs)} labelled, {len(detected)} detected by ingest (an image with IoU >= 0.5)")
    described = [f for f in figs if f.get("description")]
    modes = [("with the figure encoder", env)]
    if "--quick" not in sys.argv[3:]:
        modes.append(("without (MMRAG_FIGENC=none)", dict(env, MMRAG_FIGENC="none")))
    for label, fenv in modes:
        r5 = r5d = 0
        nopage, withpage, absent = [], [], []
        for i, f in enumerate(described):
            out = run([mm, "search", "--db", db, "--sources", "image", "-k", "5", "--json", f["description"]], fenv)
            try:
                hits = json.loads(out)["hits"]
            except (ValueError, KeyError):
                hits = []
            hit = any(matches(f, h.get("image_id")) for h in hits)
            r5 += hit
            r5d += hit and f in detected
            nopage.append(located(f, 0, fenv))
            withpage.append(located(f, f["page"], fenv))
            g = absent_from(described, i)
            if g:
                absent.append(located(dict(f, description=g["description"]), f["page"], fenv)[1])
        n, nd = max(1, len(described)), max(1, len([f for f in described if f in detected]))
        print(f"{label}: image-only R@5 {r5 / n:.3f} (detected only {r5d / nd:.3f}); "
              f"VPE hit@IoU>=0.5 {sum(g for g, _ in nopage) / n:.3f} without the page, "
              f"{sum(g for g, _ in withpage) / n:.3f} with it")
        print("  locate at its default threshold: " + pr_line(withpage, "with the page") + "; " +
              pr_line(nopage, "without"))
        print(f"  absent descriptions (another document's figure of another type, asked on this page): "
              f"answered {sum(absent)}/{len(absent)}")
    type_accuracy(figs, pdfs, models)


def type_accuracy(figs, pdfs, models):
    try:
        import torch
        import PIL  # noqa: F401 (the crop and the grid resize need it)
    except ImportError:
        print("figure type: skipped (needs /usr/bin/python3 with torch and PIL: make deps-dev)")
        return
    sys.path.insert(0, os.path.join(ROOT, "vision", "train"))
    import numpy as np
    from figenc_model import FigureViT, MiniLM
    from harvest_real import crop  # the 144-dpi page crop the training data uses
    from train_figenc import to_grid, to_patches
    f = os.environ.get("MMRAG_FIGENC") or os.path.join(ROOT, "vision", "data", "figenc", "model.safetensors")
    if f == "none":
        return
    cfg = json.load(open(os.path.join(os.path.dirname(f), "config.json")))
    m = FigureViT.from_file(f, cfg).eval()
    # config.json's budget as vision/clip.c reads it: 1 to CLIP_MAX_BUDGET (4096), else the
    # training grid's
    vc = cfg["vision_config"]
    budget = cfg.get("mmrag", {}).get("max_tokens")
    if type(budget) is not int or not 0 < budget <= 4096:   # (a JSON true is no budget)
        budget = (vc["image_size"] // vc["patch_size"]) ** 2
    text = MiniLM(os.path.join(models, "minilm"))
    kinds = sorted(PROMPTS)
    P = text.embed([PROMPTS[k] for k in kinds])
    right = total = 0
    per = {}
    with tempfile.TemporaryDirectory() as tmp:
        for f in figs:
            if f["type"] not in PROMPTS:
                continue
            gh, gw, pix = to_grid(np.asarray(crop(pdfs[f["doc"]], f["page"], f["box"], tmp)), budget=budget)
            with torch.no_grad():
                e = m(to_patches(torch.from_numpy(pix[None]), torch.device("cpu")), gh, gw)[0]
            pred = kinds[int((P @ e).argmax())]
            ok = pred == f["type"]
            right += ok
            total += 1
            c = per.setdefault(f["type"], [0, 0])
            c[0] += ok
            c[1] += 1
    print(f"figure type, zero-shot over {len(kinds)} types: {right}/{total} = {right / max(1, total):.3f} "
          "(" + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted(per.items())) + ")")


if __name__ == "__main__":
    main()
