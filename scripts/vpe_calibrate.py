#!/usr/bin/env python3
"""Fit locate's picture confidence (engine/vpe.c: CAL_W, CAL_B, CAL_LO, CAL_HI) on the dev sets.

  /usr/bin/python3 scripts/vpe_calibrate.py collect BUILD MODELS OUT.jsonl [SET ...]
      runs `mmrag locate --debug --page` on each dev figure's description and, as a negative,
      on another document's figure of another type described on its page (the absent
      descriptions of scripts/eval_figures.py), and writes the winner's picture features (the
      "vpe: feat" debug line) and whether its box is the labelled one (IoU >= 0.5). SETs:
      manuals, r, more, captioned (the default: all four; never the reserved set).
  /usr/bin/python3 scripts/vpe_calibrate.py fit DATA.jsonl [--threshold T] [--check engine/vpe.c]
      fits a logistic model (L2, standardized features) and prints, leave one set out, the
      precision and recall of the answers at T (default 0.75: vpe's default threshold) and the
      absent descriptions answered, against the rule the data was collected with; then the
      constants for engine/vpe.c, fit on all the sets (--check: exit 1 unless vpe.c has them).

vision/train/vpe_calibration.jsonl is the committed data, collected with the hand-set rules
the model replaced (its "found" and "conf" are theirs: the fit's "as collected" column); the
fit needs numpy.
"""
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "vision", "train"))

NAMES = ["fig", "lead", "alone", "agree", "hub", "colour_named", "colour", "col_unique", "text"]
COL_VOUCH = 0.5    # engine/vpe.c: a picture showing none of the colours named is never answered
LEAD_SCALE = 0.02  # engine/vpe.c: the lead over a rival picture that keeps the confidence
L2 = 1e-2


def x_of(f):
    """The features in CAL_W's order (engine/vpe.c cal_x), before clamping."""
    return [f["fig"], f["lead"], float(f["rivals"] == 0), f["agree"], f["hub"],
            float(f["colour"] >= 0), max(f["colour"], 0.0), f["col_unique"], f["text"]]


def modelled(r):
    """Rows the model scores: a picture won, it has a figure vector, no colour veto."""
    f = r["feat"]
    return bool(f) and f["kind"] in (0, 1) and f["fig"] > -1 and not (0 <= f["colour"] < COL_VOUCH)


def collect(build, models, out, sets):
    import sqlite3
    import eval_figures as ef
    from harvest_real import iou
    env = dict(os.environ, MMRAG_MODELS=models)
    with open(out, "w") as o:
        for dev in sets:
            figs, pdfs, db = ef.load_set(dev)
            if not os.path.exists(os.path.join(db, "mmrag.db")):
                subprocess.run([os.path.join(build, "mmrag"), "index", "--db", db] + sorted(pdfs.values()),
                               env=env, check=True, stdout=subprocess.DEVNULL)
            con = sqlite3.connect(os.path.join(db, "mmrag.db"))
            docid = {os.path.basename(p): i for i, p in con.execute("SELECT id, path FROM documents")}
            described = [f for f in figs if f.get("description")]

            def row(f, desc, q, box):
                r = subprocess.run([os.path.join(build, "mmrag"), "locate", "--db", db, "--doc",
                                    str(docid[f["doc"]]), "--json", "--debug", "--page", str(f["page"]), desc],
                                   capture_output=True, text=True, env=env)
                try:
                    j = json.loads(r.stdout)
                except ValueError:
                    j = {}
                feat = None
                for line in r.stderr.splitlines():
                    if line.startswith("vpe: feat "):
                        a = line[len("vpe: feat "):].split()
                        feat = {a[k]: float(a[k + 1]) for k in range(0, len(a), 2)}
                good = bool(box) and j.get("page") == f["page"] and iou(j.get("box", [0, 0, 0, 0]), box) >= 0.5
                o.write(json.dumps(dict(set=dev, q=q, doc=f["doc"], page=f["page"], good=good,
                                        found=bool(j.get("found")), conf=j.get("confidence"), feat=feat)) + "\n")

            for i, f in enumerate(described):
                row(f, f["description"], "fig", f["box"])
                g = ef.absent_from(described, i)
                if g:
                    row(f, g["description"], "absent", None)
            o.flush()
            print(f"vpe-calibrate: {dev}: {len(described)} figures", file=sys.stderr)


class Model:
    """L2-regularized logistic regression on standardized features, by Newton's method (the
    loss is convex: the same constants on any machine)."""

    def __init__(self, rows):
        import numpy as np
        self.np = np
        X = np.array([x_of(r["feat"]) for r in rows], dtype=np.float64)
        y = np.array([float(r["good"]) for r in rows])
        # features are clamped to the range they were fit on: a cosine far above any real
        # figure's (a test's stand-in vectors) must not extrapolate to certainty
        self.lo, self.hi = X.min(0), X.max(0)
        mu, sd = X.mean(0), X.std(0, ddof=1) + 1e-9
        A = np.hstack([(X - mu) / sd, np.ones((len(X), 1))])
        reg = np.full(A.shape[1], 2 * L2 * len(X))
        reg[-1] = 0   # the bias is not shrunk
        w = np.zeros(A.shape[1])
        for _ in range(50):
            p = 1 / (1 + np.exp(-A @ w))
            g = A.T @ (p - y) + reg * w
            H = (A * (p * (1 - p))[:, None]).T @ A + np.diag(reg)
            step = np.linalg.solve(H, g)
            w -= step
            if np.abs(step).max() < 1e-12:
                break
        self.w = w[:-1] / sd                     # raw-feature weights
        self.b = float(w[-1] - (w[:-1] * mu / sd).sum())

    def prob(self, f):
        np = self.np
        x = np.minimum(np.maximum(np.array(x_of(f), dtype=np.float64), self.lo), self.hi)
        return float(1 / (1 + np.exp(-(x @ self.w + self.b))))


def rival_factor(f):
    """engine/vpe.c: with another picture of the page about as close to the description,
    either may be the one described (a tie halves the confidence) unless it alone shows the
    colours named."""
    if f["rivals"] == 0 or f["col_unique"]:
        return 1.0
    return 1.0 - 0.5 * math.exp(-max(f["lead"], 0.0) / LEAD_SCALE)


def confidence(m, r):
    """engine/vpe.c's confidence for a collected row under model m."""
    f = r["feat"]
    if not f:
        return r["conf"] or 0.0
    if not modelled(r):
        return f["text"]
    return max(f["text"], m.prob(f) * f["cons"] * rival_factor(f))


def check_source(m, path):
    """0 when the constants in engine/vpe.c are this fit's (to the printed precision)."""
    import re
    src = open(path).read()
    bad = []
    for name, want in (("CAL_W", m.w), ("CAL_LO", m.lo), ("CAL_HI", m.hi)):
        got = re.search(r"%s\[CAL_N\] = \{([^}]*)\}" % name, src)
        vals = [float(v.strip().rstrip("f")) for v in got.group(1).split(",")] if got else []
        if len(vals) != len(want) or any(abs(a - b) > 2e-4 for a, b in zip(vals, want)):
            bad.append(f"{name}: {vals} != {[round(float(v), 4) for v in want]}")
    for name, want in (("CAL_B", m.b), ("LEAD_SCALE", LEAD_SCALE), ("COL_VOUCH", COL_VOUCH)):
        got = re.search(r"#define %s \(?([-0-9.]+)f\)?" % name, src)
        if not got or abs(float(got.group(1)) - want) > 2e-4:
            bad.append(f"{name}: {got.group(1) if got else None} != {want:.4f}")
    print("\n".join(bad) if bad else f"{path}: the constants are the fit of the committed data")
    return 1 if bad else 0


def fit(path, t, check=None):
    rows = [json.loads(line) for line in open(path)]
    sets = sorted({r["set"] for r in rows})
    tot, bins = {}, {}
    for hold in sets:
        m = Model([r for r in rows if r["set"] != hold and modelled(r)])
        c = dict.fromkeys(["n", "tops", "ans", "right", "abs", "nabs", "oans", "oright", "oabs"], 0)
        for r in rows:
            if r["set"] != hold:
                continue
            p = confidence(m, r)
            ans = p >= t
            if modelled(r):   # held-out reliability: how often a picture answered at p is right
                k = min(int(p * 10), 9)
                bins.setdefault(k, [0, 0])
                bins[k][0] += r["good"]
                bins[k][1] += 1
            if r["q"] == "fig":
                c["n"] += 1
                c["tops"] += r["good"]
                c["ans"] += ans
                c["right"] += ans and r["good"]
                c["oans"] += r["found"]
                c["oright"] += r["found"] and r["good"]
            else:
                c["nabs"] += 1
                c["abs"] += ans
                c["oabs"] += r["found"]
        print(f"{hold:10s} fit: answered {c['ans']}, right {c['right']} (precision {c['right'] / max(1, c['ans']):.3f}, "
              f"recall {c['right'] / c['n']:.3f}), absent answered {c['abs']}/{c['nabs']} | as collected: answered "
              f"{c['oans']}, right {c['oright']} ({c['oright'] / max(1, c['oans']):.3f}, {c['oright'] / c['n']:.3f}), "
              f"absent {c['oabs']} | right box on top {c['tops']}/{c['n']}")
        for k, v in c.items():
            tot[k] = tot.get(k, 0) + v
    print(f"{'all':10s} fit: precision {tot['right'] / max(1, tot['ans']):.3f} ({tot['right']}/{tot['ans']}), "
          f"recall {tot['right'] / tot['n']:.3f}, absent {tot['abs']}/{tot['nabs']} | as collected: precision "
          f"{tot['oright'] / max(1, tot['oans']):.3f} ({tot['oright']}/{tot['oans']}), recall "
          f"{tot['oright'] / tot['n']:.3f}, absent {tot['oabs']}")
    print("held out, right / asked by confidence: " +
          ", ".join(f"{k / 10:.1f}-{(k + 1) / 10:.1f} {v[0]}/{v[1]}" for k, v in sorted(bins.items())))
    m = Model([r for r in rows if modelled(r)])
    if check:
        return check_source(m, check)
    fmt = lambda v: "{" + ", ".join(f"{float(x):.4f}f" for x in v) + "}"  # noqa: E731
    print(f"/* {', '.join(NAMES)} */")
    print(f"static const float CAL_W[CAL_N] = {fmt(m.w)};")
    print(f"static const float CAL_LO[CAL_N] = {fmt(m.lo)};")
    print(f"static const float CAL_HI[CAL_N] = {fmt(m.hi)};")
    print(f"#define CAL_B ({m.b:.4f}f)")
    return 0


def main():
    a = sys.argv[1:]
    if len(a) >= 4 and a[0] == "collect":
        collect(a[1], a[2], a[3], a[4:] or ["manuals", "r", "more", "captioned"])
    elif len(a) >= 2 and a[0] == "fit":
        sys.exit(fit(a[1], float(a[a.index("--threshold") + 1]) if "--threshold" in a else 0.75,
                     a[a.index("--check") + 1] if "--check" in a else None))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
