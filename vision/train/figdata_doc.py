"""Synthetic figures in the style of printed manuals (TeX, MetaPost, gnuplot): what
figdata.py's matplotlib-style charts miss. Line drawings of geometric shapes and objects,
circuit schematics, trees and box-and-arrow diagrams, code listings and paragraphs, ruled
tables, and boxed print-style line plots. Same contract as figdata: spec(i, seed) decides
everything (descriptions included) before render(s) draws it.

  /usr/bin/python3 vision/train/figdata_doc.py --n 24 --out /tmp/docfigs   (a sample)
"""
import math
import os
import random
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from figdata import CATS, COLOURS, COUNT_WORDS, WORDS, _clist, _plt, sample_main  # noqa: E402

KINDS = ["drawing", "drawing3d", "schematic", "tree", "boxes", "code", "paragraph", "ruled_table",
         "printplot"]
# the figure type each kind is (the zero-shot vocabulary of scripts/eval_figures.py)
TYPE = {"drawing": "drawing", "drawing3d": "drawing", "schematic": "drawing", "tree": "diagram",
        "boxes": "diagram", "code": "text", "paragraph": "text", "ruled_table": "table",
        "printplot": "line"}
SIZES = [(4, 3), (5, 3), (3, 3), (6, 3), (4, 4), (3, 2), (6, 4), (2.5, 2.5)]
SHAPES = ["circle", "triangle", "square", "ellipse", "arc", "polygon", "curve", "spiral", "star"]
CODE_WORDS = ("draw fill path node begin end def let for if else return var int float point "
              "circle label color width scale shift rotate set get new list map value").split()


def _n(k):
    return COUNT_WORDS[k] if 0 <= k < len(COUNT_WORDS) else str(k)


def _plural(word, k):
    return word if k == 1 else ("ellipses" if word == "ellipse" else word + "s")


def spec(i, seed=0):
    r = random.Random(seed * 1_000_003 + i + 7_777_777)
    kind = KINDS[r.randrange(len(KINDS))]
    w, h = r.choice(SIZES)
    s = {"i": i, "seed": seed, "kind": kind, "type": TYPE[kind], "w_in": w, "h_in": h,
         "dpi": r.choice([60, 72, 90, 110]), "rs": r.randrange(1 << 30),
         "colour": r.random() < 0.3, "frame": r.random() < 0.15}
    s["desc"] = DESCRIBE[kind](s, r)
    return s


# ---- descriptions (and the content they promise) ---------------------------------------
def _d_drawing(s, r):
    k = r.randint(1, 5)
    s["shapes"] = [r.choice(SHAPES) for _ in range(k)]
    s["points"] = r.sample("ABCDEFGHPQRS", r.randint(0, 4))
    s["dashed"] = r.random() < 0.4
    s["grey"] = r.random() < 0.35
    names = sorted(set(s["shapes"]))
    what = _clist([f"{_n(s['shapes'].count(x))} {_plural(x, s['shapes'].count(x))}" for x in names])
    out = ["a line drawing of geometric shapes", f"a drawing of {what}",
           "a black and white drawing" if not s["colour"] else "a drawing with coloured shapes"]
    if s["points"]:
        out.append(f"a geometric construction with labelled points {_clist(s['points'])}")
    if s["dashed"]:
        out.append("a drawing with dashed construction lines")
    return out


def _d_drawing3d(s, r):
    s["obj"] = r.choice(["box", "cylinder", "sphere", "cone", "spring", "axes"])
    s["n"] = r.randint(1, 3)
    obj = {"box": "a cube", "cylinder": "a cylinder", "sphere": "a sphere", "cone": "a cone",
           "spring": "a coil spring", "axes": "three coordinate axes x, y and z"}[s["obj"]]
    return ["a line drawing of a three-dimensional object", f"a perspective drawing of {obj}",
            "a technical drawing in black lines", f"a wireframe sketch of {obj}"]


def _d_schematic(s, r):
    s["parts"] = [r.choice(["resistor", "capacitor", "source", "ground", "diode", "inductor"])
                  for _ in range(r.randint(2, 6))]
    p = sorted(set(s["parts"]))
    return ["a circuit schematic drawing", f"an electrical circuit with {_clist([_plural(x, 2) for x in p])}",
            "a line drawing of electronic symbols connected by wires", "a schematic diagram of a circuit"]


def _d_tree(s, r):
    s["depth"] = r.randint(2, 4)
    s["fan"] = r.randint(2, 3)
    s["node"] = r.choice(["circle", "box", "dot"])
    s["labels"] = r.random() < 0.7
    return ["a tree diagram", f"a tree of {s['node']} nodes connected by lines",
            f"a hierarchy diagram {s['depth']} levels deep", "a diagram of nodes and edges"]


def _d_boxes(s, r):
    s["n"] = r.randint(3, 8)
    s["shape"] = r.choice(["box", "ellipse", "round"])
    s["labels"] = [r.choice(WORDS + CODE_WORDS)[:10] for _ in range(s["n"])]
    s["curved"] = r.random() < 0.4
    return ["a diagram of boxes connected by arrows", f"a flow chart with {_n(s['n'])} nodes",
            "a block diagram with labelled boxes and arrows", "a flowchart of a process"]


def _d_code(s, r):
    s["lines"] = r.randint(3, 22)
    s["shade"] = r.random() < 0.4
    s["numbers"] = r.random() < 0.2
    n = _n(s["lines"]) if s["lines"] <= 12 else "many"
    return ["an image of text: a code listing in a monospace font", f"{n} lines of source code",
            "a program listing", "an image of text, no chart" + (" on a grey background" if s["shade"] else "")]


def _d_paragraph(s, r):
    s["lines"] = r.randint(2, 14)
    s["bold_head"] = r.random() < 0.5
    return ["an image of text", f"a paragraph of {_n(s['lines']) if s['lines'] <= 12 else 'many'} lines of printed text",
            "a block of text in a serif font, no chart", "a text box"]


def _d_table(s, r):
    s["rows"], s["cols"] = r.randint(2, 10), r.randint(2, 6)
    s["rules"] = r.choice(["booktabs", "grid", "header"])
    s["numeric"] = r.random() < 0.6
    s["header"] = r.sample(WORDS, s["cols"])
    return ["a table", f"a table with {_n(s['rows'])} rows and {_n(s['cols'])} columns",
            "a table of numbers with horizontal rules" if s["numeric"] else "a table of words in columns",
            "a grid of cells" if s["rules"] == "grid" else "a typeset table"]


def _d_printplot(s, r):
    s["n"] = r.randint(1, 4)
    s["colours"] = r.sample(list(COLOURS), s["n"]) if s["colour"] else ["black"] * s["n"]
    s["markers"] = r.random() < 0.5
    s["fn"] = [r.choice(["sin", "exp", "poly", "log", "decay", "step"]) for _ in range(s["n"])]
    s["logy"] = r.random() < 0.15
    s["legend"] = s["n"] > 1 and r.random() < 0.7
    lines = "line" if s["n"] == 1 else "lines"
    return ["a line plot", f"a line plot with {_n(s['n'])} {_clist(sorted(set(s['colours'])))} {lines}",
            "a plot of curves on axes with a frame" + (" and markers" if s["markers"] else ""),
            "a function plot" + (" with a legend" if s["legend"] else "")]


DESCRIBE = {"drawing": _d_drawing, "drawing3d": _d_drawing3d, "schematic": _d_schematic,
            "tree": _d_tree, "boxes": _d_boxes, "code": _d_code, "paragraph": _d_paragraph,
            "ruled_table": _d_table, "printplot": _d_printplot}


# ---- drawing -----------------------------------------------------------------------------
def _ink(s, rng):
    if s["colour"] and rng.random() < 0.6:
        return COLOURS[list(COLOURS)[int(rng.integers(len(COLOURS)))]]
    return "black"


def _shape(ax, kind, rng, s):
    import matplotlib.patches as mp
    x, y, rad = rng.uniform(.25, .75), rng.uniform(.25, .75), rng.uniform(.08, .25)
    ls = "--" if s["dashed"] and rng.random() < .4 else "-"
    fc = ("0.8" if s["grey"] and rng.random() < .5 else "none")
    kw = dict(ec=_ink(s, rng), fc=fc, lw=rng.uniform(.6, 1.6), ls=ls)
    if kind == "circle":
        ax.add_patch(mp.Circle((x, y), rad, **kw))
    elif kind == "ellipse":
        ax.add_patch(mp.Ellipse((x, y), rad * 2, rad * rng.uniform(.6, 1.4), angle=rng.uniform(0, 180), **kw))
    elif kind in ("triangle", "square", "polygon", "star"):
        n = {"triangle": 3, "square": 4, "polygon": int(rng.integers(5, 9)), "star": 10}[kind]
        a = np.linspace(0, 2 * np.pi, n, endpoint=False) + rng.uniform(0, 6)
        rr = np.where(np.arange(n) % 2, rad * .45, rad) if kind == "star" else rad * rng.uniform(.7, 1, n)
        ax.add_patch(mp.Polygon(np.c_[x + rr * np.cos(a), y + rr * np.sin(a)], **kw))
    elif kind == "arc":
        ax.add_patch(mp.Arc((x, y), rad * 2, rad * 2, theta1=rng.uniform(0, 180), theta2=rng.uniform(200, 350),
                            color=kw["ec"], lw=kw["lw"], ls=ls))
    elif kind == "spiral":
        t = np.linspace(0, rng.uniform(8, 20), 300)
        ax.plot(x + rad * t / t[-1] * np.cos(t), y + rad * t / t[-1] * np.sin(t), color=kw["ec"], lw=kw["lw"])
    else:  # a smooth curve through a few points, sometimes with dots on them
        px = np.sort(rng.uniform(.05, .95, 5))
        py = rng.uniform(.1, .9, 5)
        t = np.linspace(0, 1, 100)
        cx = np.interp(t, np.linspace(0, 1, 5), px)
        cy = np.polyval(np.polyfit(np.linspace(0, 1, 5), py, 3), t)
        ax.plot(cx, cy, color=kw["ec"], lw=kw["lw"], ls=ls)
        if rng.random() < .6:
            ax.plot(px, np.polyval(np.polyfit(np.linspace(0, 1, 5), py, 3), np.linspace(0, 1, 5)), "o",
                    color="black", ms=3)


def _r_drawing(s, ax, rng):
    for k in s["shapes"]:
        _shape(ax, k, rng, s)
    for p in s["points"]:
        x, y = rng.uniform(.1, .9, 2)
        ax.plot([x], [y], "o", color="black", ms=3)
        ax.text(x + .02, y + .02, p, fontsize=int(rng.integers(8, 13)), style="italic", family="serif")
    if s["dashed"]:
        for _ in range(int(rng.integers(1, 3))):
            ax.plot(rng.uniform(0, 1, 2), rng.uniform(0, 1, 2), "--", color="0.4", lw=.7)
    if rng.random() < .3:
        a = rng.uniform(.1, .9, 4)
        ax.annotate("", xy=(a[0], a[1]), xytext=(a[2], a[3]), arrowprops=dict(arrowstyle="->", lw=.8))


def _project(p, az, el):
    ca, sa, ce, se = math.cos(az), math.sin(az), math.cos(el), math.sin(el)
    x, y, z = p[..., 0], p[..., 1], p[..., 2]
    return np.stack([ca * x - sa * y, se * (sa * x + ca * y) + ce * z], -1)


def _r_drawing3d(s, ax, rng):
    az, el = rng.uniform(.3, 1.2), rng.uniform(.2, .6)
    col = _ink(s, rng)

    def line(pts, **kw):
        q = _project(np.asarray(pts, float), az, el)
        ax.plot(q[:, 0], q[:, 1], color=kw.pop("color", col), lw=kw.pop("lw", 1), **kw)
    for j in range(s["n"]):
        o = np.array([j * 2.2, 0, 0])
        t = np.linspace(0, 2 * np.pi, 60)
        if s["obj"] == "box":
            for a in (0, 1):
                for b in (0, 1):
                    line([o + [a, b, 0], o + [a, b, 1]])
                    line([o + [a, 0, b], o + [a, 1, b]])
                    line([o + [0, a, b], o + [1, a, b]])
        elif s["obj"] in ("cylinder", "cone"):
            top = .05 if s["obj"] == "cone" else .5
            line(np.c_[o[0] + .5 * np.cos(t), .5 * np.sin(t), np.zeros_like(t)])
            line(np.c_[o[0] + top * np.cos(t), top * np.sin(t), np.full_like(t, 1.5)])
            for a in (0, np.pi):
                line([o + [.5 * math.cos(a + az), .5 * math.sin(a + az), 0], o + [top * math.cos(a + az), top * math.sin(a + az), 1.5]])
        elif s["obj"] == "sphere":
            for lat in np.linspace(-1.2, 1.2, 7):
                line(np.c_[o[0] + np.cos(lat) * np.cos(t), np.cos(lat) * np.sin(t), np.full_like(t, np.sin(lat))], lw=.6)
            for lon in np.linspace(0, np.pi, 5):
                line(np.c_[o[0] + np.cos(t) * np.cos(lon), np.cos(t) * np.sin(lon), np.sin(t)], lw=.6)
        elif s["obj"] == "spring":
            u = np.linspace(0, 2 * np.pi * int(rng.integers(4, 9)), 400)
            line(np.c_[o[0] + .4 * np.cos(u), .4 * np.sin(u), u / u[-1] * 2], lw=rng.uniform(1, 3),
                 color="0.4" if rng.random() < .5 else col)
        else:
            for e, lab in ((0, "x"), (1, "y"), (2, "z")):
                v = np.zeros(3)
                v[e] = 1.5
                q = _project(np.array([o, o + v]), az, el)
                ax.annotate("", xy=q[1], xytext=q[0], arrowprops=dict(arrowstyle="->"))
                ax.text(*(q[1] + .05), lab, style="italic", family="serif")
            p = rng.uniform(.2, 1.2, 3)
            line([o, o + [p[0], p[1], 0], o + p], ls="--", lw=.7)
    ax.set_aspect("equal")
    ax.autoscale()


def _resistor(x0, y0, x1, y1):
    t = np.linspace(0, 1, 14)
    zz = np.where(np.arange(14) % 2, .04, -.04)
    zz[[0, 1, -2, -1]] = 0
    dx, dy = x1 - x0, y1 - y0
    n = math.hypot(dx, dy)
    return x0 + dx * t - dy / n * zz, y0 + dy * t + dx / n * zz


def _r_schematic(s, ax, rng):
    n = len(s["parts"])
    xs = np.linspace(.1, .9, n + 1)
    ax.plot([.1, .9], [.2, .2], "k", lw=1)
    for j, p in enumerate(s["parts"]):
        x0, x1 = xs[j], xs[j + 1]
        xm = (x0 + x1) / 2
        ax.plot([x0, x0], [.2, .75], "k", lw=1) if j == 0 else None
        if p == "resistor":
            X, Y = _resistor(x0, .75, x1, .75)
            ax.plot(X, Y, "k", lw=1)
        elif p == "inductor":
            t = np.linspace(0, 1, 200)
            ax.plot(x0 + (x1 - x0) * t, .75 + .04 * np.abs(np.sin(t * np.pi * 4)), "k", lw=1)
        else:
            ax.plot([x0, xm - .02], [.75, .75], "k", lw=1)
            ax.plot([xm + .02, x1], [.75, .75], "k", lw=1)
            if p == "capacitor":
                ax.plot([xm - .02] * 2, [.7, .8], "k", [xm + .02] * 2, [.7, .8], "k", lw=1.5)
            elif p == "source":
                import matplotlib.patches as mp
                ax.add_patch(mp.Circle((xm, .75), .04, fc="none", ec="k"))
                ax.text(xm, .75, "~" if rng.random() < .5 else "+", ha="center", va="center", fontsize=7)
            elif p == "diode":
                ax.fill([xm - .02, xm - .02, xm + .02], [.72, .78, .75], "k")
                ax.plot([xm + .02] * 2, [.72, .78], "k")
            else:  # ground branch
                ax.plot([xm, xm], [.75, .45], "k", lw=1)
                for w, yy in ((.04, .45), (.025, .42), (.01, .39)):
                    ax.plot([xm - w, xm + w], [yy, yy], "k", lw=1)
        if rng.random() < .6:
            ax.text(xm, .84, r"$%s_%d$" % (p[0].upper(), j + 1), ha="center", fontsize=8)
    ax.plot([.9, .9], [.2, .75], "k", lw=1)


def _r_tree(s, ax, rng):
    import matplotlib.patches as mp
    levels = [[(.5, .9)]]
    for d in range(1, s["depth"]):
        prev = levels[-1]
        m = min(len(prev) * s["fan"], 12)
        xs = np.linspace(.05, .95, m) if m > 1 else [.5]
        levels.append([(x, .9 - d * .8 / (s["depth"] - 1)) for x in xs])
        for j, (x, y) in enumerate(levels[-1]):
            px, py = prev[min(j * len(prev) // m, len(prev) - 1)]
            ax.plot([px, x], [py, y], color=_ink(s, rng), lw=.8, zorder=1)
    k = 0
    for lv in levels:
        for x, y in lv:
            if s["node"] == "circle":
                ax.add_patch(mp.Circle((x, y), .03, fc="white", ec="black", zorder=2))
            elif s["node"] == "box":
                ax.add_patch(mp.Rectangle((x - .035, y - .025), .07, .05, fc="white", ec="black", zorder=2))
            else:
                ax.plot([x], [y], "ko", ms=3, zorder=2)
            if s["labels"]:
                ax.text(x, y, str(k) if rng.random() < .5 else "abcdefghijklmnopqrstuvwxyz"[k % 26],
                        ha="center", va="center", fontsize=6, zorder=3)
            k += 1


def _r_boxes(s, ax, rng):
    import matplotlib.patches as mp
    n = s["n"]
    cols = int(rng.integers(2, 4))
    pos = [((j % cols + .5) / cols + rng.uniform(-.05, .05), 1 - (j // cols + .5) / math.ceil(n / cols)) for j in range(n)]
    for j, (x, y) in enumerate(pos):
        if s["shape"] == "ellipse":
            ax.add_patch(mp.Ellipse((x, y), .22, .1, fc="white", ec="black"))
        else:
            st = "round,pad=0.01" if s["shape"] == "round" else "square,pad=0.01"
            ax.add_patch(mp.FancyBboxPatch((x - .1, y - .04), .2, .08, boxstyle=st,
                                           fc="0.92" if rng.random() < .3 else "white", ec="black"))
        ax.text(x, y, s["labels"][j], ha="center", va="center", fontsize=7,
                family="monospace" if rng.random() < .4 else "serif")
    for j in range(n - 1):
        a, b = pos[j], pos[j + 1 if rng.random() < .8 else int(rng.integers(0, n))]
        if a == b:
            continue
        ax.annotate("", xy=b, xytext=a, arrowprops=dict(
            arrowstyle="->", shrinkA=12, shrinkB=12, lw=.8,
            connectionstyle="arc3,rad=.3" if s["curved"] else "arc3"))


def _r_code(s, ax, rng):
    import matplotlib.patches as mp
    if s["shade"]:
        ax.add_patch(mp.Rectangle((0, 0), 1, 1, fc="0.93", ec="0.6" if s["frame"] else "none"))
    for j in range(s["lines"]):
        toks = [str(rng.choice(CODE_WORDS)) for _ in range(int(rng.integers(1, 6)))]
        line = "  " * int(rng.integers(0, 4)) + rng.choice(["", "\\", "$"]) + " ".join(toks)
        line += str(rng.choice([";", "(1,2);", " {", "}", "", " = 0;", "--(0,0);"]))
        if s["numbers"]:
            line = f"{j + 1:2d}  " + line
        ax.text(.02, 1 - (j + .8) / (s["lines"] + .5), line, fontsize=7, family="monospace",
                transform=ax.transAxes)


def _r_paragraph(s, ax, rng):
    y = .95
    if s["bold_head"]:
        ax.text(.02, y, " ".join(rng.choice(WORDS, 3)).capitalize(), fontsize=9, weight="bold",
                family="serif", va="top")
        y -= .12
    for j in range(s["lines"]):
        k = int(rng.integers(6, 12)) if j < s["lines"] - 1 else int(rng.integers(2, 6))
        ax.text(.02, y, " ".join(rng.choice(WORDS, k)), fontsize=8, family="serif", va="top")
        y -= .85 / max(s["lines"], 6)


def _r_table(s, ax, rng):
    R, C = s["rows"], s["cols"]
    h = .9 / (R + 1)
    for c in range(C):
        x = .03 + c * .94 / C
        ax.text(x, .95 - h * .5, s["header"][c], fontsize=7, weight="bold", va="center", family="serif")
        for rr in range(R):
            v = f"{rng.uniform(0, 999):.{int(rng.integers(0, 3))}f}" if s["numeric"] and c else str(rng.choice(WORDS + CATS))
            ax.text(x, .95 - h * (rr + 1.5), v, fontsize=7, va="center", family="serif")
    ys = [.95, .95 - h, .95 - h * (R + 1)] if s["rules"] != "grid" else [.95 - h * j for j in range(R + 2)]
    for j, y in enumerate(ys):
        ax.plot([.01, .99], [y, y], "k", lw=1.2 if (s["rules"] == "booktabs" and j != 1) else .6)
    if s["rules"] == "grid":
        for c in range(C + 1):
            x = .01 + c * .98 / C
            ax.plot([x, x], [ys[0], ys[-1]], "k", lw=.6)


def _r_printplot(s, fig, rng):
    ax = fig.add_subplot(111)
    x = np.linspace(rng.uniform(-5, 0), rng.uniform(1, 10), 60)
    for j, f in enumerate(s["fn"]):
        a = rng.uniform(.5, 2)
        y = {"sin": np.sin(a * x) * rng.uniform(1, 5), "exp": np.exp(a * x / 5), "poly": a * x ** 2 - x,
             "log": np.log(np.abs(x) + 1) * a, "decay": np.exp(-a * np.abs(x)) * 5,
             "step": np.floor(x * a)}[f]
        ax.plot(x, np.abs(y) + 1e-3 if s["logy"] else y, color=COLOURS.get(s["colours"][j], "black"),
                lw=rng.uniform(.6, 1.5), ls=["-", "--", ":", "-."][j % 4] if not s["colour"] else "-",
                marker=["+", "x", "*", "s", "o"][j % 5] if s["markers"] else None, ms=3,
                markevery=5, label=f"$f_{j + 1}(x)$")
    if s["logy"]:
        ax.set_yscale("log")
    ax.tick_params(direction="in", top=True, right=True, labelsize=7)
    ax.set_xlabel("$x$", fontsize=8)
    if s["legend"]:
        ax.legend(fontsize=6, loc="best", frameon=True, fancybox=False, edgecolor="black")
    return ax


RENDER = {"drawing": _r_drawing, "drawing3d": _r_drawing3d, "schematic": _r_schematic,
          "tree": _r_tree, "boxes": _r_boxes, "code": _r_code, "paragraph": _r_paragraph,
          "ruled_table": _r_table}


def render(s):
    """The spec's figure as uint8 RGB [h][w][3]."""
    plt = _plt()
    rng = np.random.default_rng(s["rs"])
    fig = plt.figure(figsize=(s["w_in"], s["h_in"]), dpi=s["dpi"])
    try:
        if s["kind"] == "printplot":
            _r_printplot(s, fig, rng)
        else:
            ax = fig.add_axes([0.02, 0.02, 0.96, 0.96])
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
            RENDER[s["kind"]](s, ax, rng)
            if s["frame"]:
                ax.set_xticks([])
                ax.set_yticks([])
            else:
                ax.axis("off")
        if s["kind"] == "printplot":
            fig.tight_layout()
        fig.canvas.draw()
        a = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    finally:
        plt.close(fig)
    return a


def main():
    sample_main(spec, render)


if __name__ == "__main__":
    sys.exit(main())
