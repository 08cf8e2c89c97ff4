"""Harvest real figures for the figure encoder: the images mmrag's own ingest found in
Debian documentation PDFs, cropped from a 144-dpi render, with their caption (or the
text nearest them) as the description.

  /usr/bin/python3 vision/train/harvest_real.py DB OUT [--captioned] [--exclude=SUBSTR,...]   (DB: `mmrag index --no-embed`)

Writes OUT/NNNNN.png and OUT/index.jsonl (doc, page, box, kind, caption).

  /usr/bin/python3 vision/train/harvest_real.py --dev vision/train/dev_figures.json ROOT OUT

crops the labelled dev figures (each entry's pdf under ROOT, its page and box) as OUT/<file>.
The PDFs of
octave-doc and python-reportlab-doc are refused: they are reserved for evaluation
(tests/data/figures_real.json).
"""
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

RESERVED = ("octave", "liboctave", "refcard-", "reportlab")
DPI = 144
MIN_PX = 48  # smaller crops are icons and rules, not figures


def caption_of(con, cap_chunk):
    if cap_chunk:
        r = con.execute("SELECT text FROM chunks WHERE id=?", (cap_chunk,)).fetchone()
        if r and r[0]:
            return r[0]
    return ""


def iou(a, b):
    """Intersection over union of two boxes [x0, y0, x1, y1] (0 when apart)."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    u = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - ix * iy
    return ix * iy / u if u > 0 else 0.0


def crop(path, page, box, tmp):
    from PIL import Image
    base = os.path.join(tmp, "p")
    subprocess.run(["pdftoppm", "-r", str(DPI), "-png", "-f", str(page), "-l", str(page),
                    "-singlefile", path, base], check=True)
    im = Image.open(base + ".png").convert("RGB")
    W, H = im.size
    x0, y0, x1, y1 = box
    return im.crop((int(x0 * W), int(y0 * H), int(x1 * W) + 1, int(y1 * H) + 1))


def dev_crops(labels, root, out):
    os.makedirs(out, exist_ok=True)
    figs = json.load(open(labels))["figures"]
    with tempfile.TemporaryDirectory() as tmp:
        for f in figs:
            crop(os.path.join(root, f["pdf"]), f["page"], f["box"], tmp).save(os.path.join(out, f["file"]))
    print(f"harvest: {len(figs)} dev figures")


def main():
    if sys.argv[1] == "--dev":
        return dev_crops(sys.argv[2], sys.argv[3], sys.argv[4])
    db, out = sys.argv[1], sys.argv[2]
    captioned = "--captioned" in sys.argv[3:]  # only figures with a caption (training pairs)
    # --exclude=a,b: skip PDFs whose path holds one of these (the dev set's packages)
    exclude = [x for o in sys.argv[3:] if o.startswith("--exclude=") for x in o[10:].split(",") if x]
    os.makedirs(out, exist_ok=True)
    con = sqlite3.connect(os.path.join(db, "mmrag.db"))
    docs = dict(con.execute("SELECT id, path FROM documents"))
    rows = con.execute("SELECT id, doc, page, kind, x0, y0, x1, y1, caption_chunk FROM images "
                       + ("WHERE caption_chunk IS NOT NULL " if captioned else "")
                       + "ORDER BY doc, page, id").fetchall()
    index = open(os.path.join(out, "index.jsonl"), "w")
    n = 0
    with tempfile.TemporaryDirectory() as tmp:
        for iid, doc, page, kind, x0, y0, x1, y1, cap in rows:
            path = docs[doc]
            name = os.path.basename(path)
            if any(name.startswith(r) for r in RESERVED):
                sys.exit(f"harvest: {name} is reserved for evaluation")
            if any(x in path for x in exclude):
                continue
            im = crop(path, page, (x0, y0, x1, y1), tmp)
            if min(im.size) < MIN_PX:
                continue
            f = f"{n:05d}.png"
            im.save(os.path.join(out, f))
            index.write(json.dumps({"file": f, "doc": name, "path": path, "page": page, "kind": kind,
                                    "box": [x0, y0, x1, y1],
                                    "caption": caption_of(con, cap)}) + "\n")
            n += 1
    print(f"harvest: {n} figures of {len(rows)} images")


if __name__ == "__main__":
    main()
