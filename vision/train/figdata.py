"""Synthetic figures with their descriptions, for training the figure encoder.

Two steps, both deterministic from (index, seed):
  spec(i, seed)  -> dict: the figure's kind, every parameter the picture shows, pixel size,
                    and several descriptions (type, colours, counts, orientation, title and
                    axis words), decided before anything is drawn;
  render(spec)   -> uint8 RGB array [h][w][3], drawn with matplotlib (Agg) from the spec.
Descriptions therefore never mention what the picture lacks. No downloaded data.

Usage: python3 figdata.py --n 12 --out /tmp/figs   (writes PNGs + specs.jsonl to look at)
"""
import io
import json
import math
import os
import random
import sys

import numpy as np

COLOURS = {
    "red": "#d62728", "blue": "#1f5fbf", "green": "#2ca02c", "orange": "#ff7f0e",
    "purple": "#8e44ad", "black": "#111111", "gray": "#8c8c8c", "brown": "#8c564b",
    "pink": "#e377c2", "yellow": "#e6c619", "cyan": "#17becf", "magenta": "#d4148a",
}
WORDS = ("revenue sales profit cost price income budget temperature pressure voltage current "
         "power energy speed velocity latency throughput bandwidth memory accuracy loss error "
         "frequency amplitude time year month day week hour distance height weight mass density "
         "population growth rate count score load capacity demand supply yield concentration "
         "signal noise depth width length age size users requests errors traffic rainfall "
         "humidity altitude efficiency output input iterations epochs samples").split()
UNITS = ["", " (s)", " (ms)", " (%)", " (kg)", " (V)", " (Hz)", " (m)", " (MB)", " (USD)"]
CATS = ("north south east west alpha beta gamma delta A B C D E F Q1 Q2 Q3 Q4 Mon Tue Wed Thu "
        "Fri red team blue team 2019 2020 2021 2022 2023 apples pears plums cpu gpu disk net").split()
SIZES = [(6, 4), (5, 4), (4, 4), (8, 4), (4, 6), (6, 3), (7, 5), (3, 4)]  # inches, w x h
COUNT_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
               "ten", "eleven", "twelve"]

KINDS = ["bar", "hbar", "grouped_bar", "stacked_bar", "line", "scatter", "pie", "donut",
         "histogram", "box", "area", "heatmap", "contour", "surface", "flow", "table",
         "equation", "photo", "text_page", "step", "errorbar", "polar", "map3"]


def _n(k):
    return COUNT_WORDS[k] if 0 <= k < len(COUNT_WORDS) else str(k)


def _title(r):
    a, b = r.sample(WORDS, 2)
    return r.choice([f"{a.capitalize()} by {b}", f"{a.capitalize()} vs {b}",
                     f"{a.capitalize()} over time", f"{a.capitalize()} and {b}",
                     f"Measured {a}", f"{a.capitalize()} per {b}"])


def _axes(r):
    x, y = r.sample(WORDS, 2)
    return x + r.choice(UNITS), y + r.choice(UNITS), x, y


def _colours(r, k):
    return r.sample(list(COLOURS), k)


def _clist(cs):
    return cs[0] if len(cs) == 1 else ", ".join(cs[:-1]) + " and " + cs[-1]


# Kinds that printed manuals also draw in the print style of gnuplot, GLE, Asymptote or R:
# ticks inside a closed frame, serif labels, hollow or cross markers, wireframe surfaces.
PRINTABLE = ("line", "step", "scatter", "errorbar", "surface", "map3", "histogram", "bar", "hbar")
MARKERS = {"o": "open circles", "s": "open squares", "^": "open triangles", "+": "plus signs",
           "x": "crosses", "D": "open diamonds"}


def spec(i, seed=0, print_share=0.0):
    """The figure with index i: all content decided here, descriptions included. A share
    print_share of the PRINTABLE kinds are drawn in the print style (stage 1 drew none)."""
    r = random.Random(seed * 1_000_003 + i)
    kind = KINDS[r.randrange(len(KINDS))]
    w_in, h_in = r.choice(SIZES)
    dpi = r.choice([50, 60, 70, 80])
    s = {"i": i, "seed": seed, "kind": kind, "w_in": w_in, "h_in": h_in, "dpi": dpi,
         "rs": r.randrange(1 << 30), "scan": r.random() < 0.12, "grid": r.random() < 0.3}
    s["has_title"] = r.random() < 0.7 and kind not in ("equation", "photo", "text_page", "table")
    s["title"] = _title(r)
    s["xlabel"], s["ylabel"], xw, yw = _axes(r)
    d = _describe(kind, s, r, xw, yw)
    s["print"] = kind in PRINTABLE and r.random() < print_share
    if s["print"]:
        d = _describe_print(kind, s, r, d, yw, xw)
    s["desc"] = d
    return s


def _describe_print(kind, s, r, d, yw, xw):
    """Print-style parameters of s, and the descriptions they make true or false."""
    s["serif"] = r.random() < 0.6
    s["marker"] = r.choice(list(MARKERS))
    if kind in ("surface", "map3"):
        c = r.choice(["black", "blue", "red", "green", "black"])
        s["colours"] = [c]
        if kind == "map3":
            return [f"a 3D scatter plot of {c} {MARKERS[s['marker']]}", "a three-dimensional scatter plot",
                    f"points in a 3D box of {yw}"]
        s["wire"] = r.choice(["wireframe", "hidden", "wireframe"])
        s["gridn"] = r.randint(6, 25)
        mesh = "wireframe" if s["wire"] == "wireframe" else "mesh"
        return [f"a 3D {mesh} surface plot in {c}", f"a {c} {mesh} surface over a grid",
                "a 3D surface plot drawn with lines", f"3D surface plot of {yw}"]
    if kind == "scatter":
        s["fit"] = r.random() < 0.4
        fit = " and a fitted line" if s["fit"] else ""
        return d + [f"a scatter plot of {MARKERS[s['marker']]}{fit}",
                    f"a scatter plot of {yw} against {xw} with {MARKERS[s['marker']]}"]
    if kind in ("line", "step", "errorbar"):
        return d + [f"a line plot in a closed frame with ticks inside" if kind != "errorbar"
                    else "points with error bars in a closed frame"]
    return d


def _describe(kind, s, r, xw, yw):
    """Fill kind-specific parameters into s; return a list of descriptions."""
    t = s["title"] if s["has_title"] else None
    tt = f' titled "{t}"' if t else ""
    ax = f" with {yw} against {xw}"
    out = []
    if kind in ("bar", "hbar"):
        k = r.randint(2, 9)
        s["n"] = k
        s["colours"] = _colours(r, 1 if r.random() < 0.7 else k if k <= 6 else 1)
        s["cats"] = r.sample(CATS, k)
        orient = "horizontal" if kind == "hbar" else "vertical"
        c = _clist(s["colours"]) if len(s["colours"]) <= 3 else "multicoloured"
        out = [f"a {orient} bar chart with {_n(k)} {c} bars{tt}",
               f"{orient} bar chart of {yw} for {_n(k)} categories",
               f"a bar chart{ax}, {c} bars"]
    elif kind in ("grouped_bar", "stacked_bar"):
        g, k = r.randint(2, 4), r.randint(2, 6)
        s["groups"], s["n"] = g, k
        s["colours"] = _colours(r, g)
        s["cats"] = r.sample(CATS, k)
        s["horizontal"] = r.random() < 0.25
        how = "grouped" if kind == "grouped_bar" else "stacked"
        o = "horizontal " if s["horizontal"] else ""
        out = [f"a {how} {o}bar chart with {_n(g)} series in {_clist(s['colours'])}{tt}",
               f"{how} bars comparing {_n(g)} groups across {_n(k)} categories",
               f"a {how} bar chart of {yw} with a legend"]
    elif kind in ("line", "step"):
        k = r.randint(1, 5)
        s["n"] = k
        s["colours"] = _colours(r, k)
        s["styles"] = [r.choice(["-", "--", ":", "-."]) for _ in range(k)]
        s["markers"] = r.random() < 0.3
        s["shape"] = r.choice(["rising", "falling", "oscillating", "noisy", "exponential"])
        lines = "line" if k == 1 else "lines"
        st = "a step plot" if kind == "step" else "a line plot"
        out = [f"{st} with {_n(k)} {_clist(s['colours'])} {lines}{tt}",
               f"{st} of {yw} over {xw}, {s['shape']} curves" if k > 1 else
               f"{st} of {yw} over {xw}, a {s['shape']} curve",
               f"a line chart with {_n(k)} {lines}" + (" and markers" if s["markers"] else "")]
    elif kind == "scatter":
        k = r.randint(1, 3)
        s["n"] = k
        s["colours"] = _colours(r, k)
        s["pts"] = r.choice([30, 80, 200])
        s["trend"] = r.choice(["positive", "negative", "no", "clustered"])
        out = [f"a scatter plot with {_clist(s['colours'])} points{tt}",
               f"scatter plot of {yw} against {xw} showing {s['trend']} correlation"
               if s["trend"] != "clustered" else f"scatter plot with {_n(k)} clusters of points",
               f"a scatter diagram with {'many' if s['pts'] > 100 else 'some'} dots"]
    elif kind in ("pie", "donut"):
        k = r.randint(2, 7)
        s["n"] = k
        s["colours"] = _colours(r, k)
        s["cats"] = r.sample(CATS, k)
        s["pct"] = r.random() < 0.5
        name = "pie chart" if kind == "pie" else "donut chart"
        out = [f"a {name} with {_n(k)} slices{tt}",
               f"{name} in {_clist(s['colours'])}" + (" with percentages" if s["pct"] else ""),
               f"a {name} showing shares of {yw}"]
    elif kind == "histogram":
        s["colours"] = _colours(r, 1)
        s["bins"] = r.choice([10, 20, 40])
        s["dist"] = r.choice(["normal", "skewed", "bimodal", "uniform"])
        out = [f"a {s['colours'][0]} histogram of {xw}{tt}",
               f"histogram showing a {s['dist']} distribution",
               f"a histogram with {s['bins']} bins"]
    elif kind == "box":
        k = r.randint(2, 7)
        s["n"] = k
        s["colours"] = _colours(r, 1)
        s["cats"] = r.sample(CATS, k)
        out = [f"a box plot with {_n(k)} boxes{tt}", f"box and whisker plot of {yw}",
               f"{s['colours'][0]} box plots comparing {_n(k)} groups"]
    elif kind == "area":
        k = r.randint(1, 4)
        s["n"] = k
        s["colours"] = _colours(r, k)
        out = [f"a stacked area chart with {_n(k)} layers{tt}" if k > 1 else
               f"a filled area chart{tt}",
               f"area plot of {yw} over {xw} in {_clist(s['colours'])}",
               "a chart with shaded regions under the curves"]
    elif kind in ("heatmap", "contour", "surface", "map3"):
        s["cmap"] = r.choice(["viridis", "hot", "coolwarm", "gray", "jet", "Blues"])
        s["gridn"] = r.randint(4, 14)
        s["colorbar"] = r.random() < 0.6
        cm = {"viridis": "purple to yellow", "hot": "black red and yellow", "jet": "rainbow",
              "coolwarm": "blue to red", "gray": "grayscale", "Blues": "blue"}[s["cmap"]]
        names = {"heatmap": "heatmap", "contour": "contour plot", "surface": "3D surface plot",
                 "map3": "3D scatter plot"}
        nm = names[kind]
        out = [f"a {nm} in {cm} colours{tt}",
               f"{nm} of {yw}" + (" with a colour bar" if s["colorbar"] else ""),
               f"a {cm} {nm}" if kind != "heatmap" else
               f"a {s['gridn']} by {s['gridn']} heatmap matrix"]
    elif kind == "flow":
        k = r.randint(2, 7)
        s["n"] = k
        s["layout"] = r.choice(["horizontal", "vertical", "grid"])
        s["colours"] = _colours(r, 1)
        s["labels"] = [w.capitalize() for w in r.sample(WORDS, k)]
        s["shape"] = r.choice(["box", "round", "circle"])
        nm = r.choice(["flow diagram", "block diagram", "flowchart"])
        out = [f"a {nm} with {_n(k)} boxes connected by arrows",
               f"a {s['layout']} {nm} in {s['colours'][0]}",
               f"a diagram of {_n(k)} stages: " + ", ".join(s["labels"]).lower()]
    elif kind == "table":
        rows, cols = r.randint(2, 10), r.randint(2, 6)
        s["rows"], s["cols"] = rows, cols
        s["header"] = r.sample(WORDS, cols)
        out = [f"a table with {_n(rows)} rows and {_n(cols)} columns",
               "a table of numbers with column headers " + ", ".join(s["header"][:3]),
               "a data table rendered as an image"]
    elif kind == "equation":
        s["eq"] = r.choice([r"$E = mc^2$", r"$\int_0^\infty e^{-x^2}\,dx = \frac{\sqrt{\pi}}{2}$",
                            r"$\sum_{i=1}^{n} x_i^2$", r"$f(x) = \frac{1}{\sigma\sqrt{2\pi}}e^{-\frac{(x-\mu)^2}{2\sigma^2}}$",
                            r"$\nabla \cdot \mathbf{E} = \rho / \epsilon_0$", r"$a^2 + b^2 = c^2$",
                            r"$\mathrm{softmax}(z)_i = \frac{e^{z_i}}{\sum_j e^{z_j}}$",
                            r"$A = \begin{pmatrix} a & b \\ c & d \end{pmatrix}$"
                            if False else r"$\det(A - \lambda I) = 0$",
                            r"$\lim_{n\to\infty} (1 + 1/n)^n = e$", r"$y = ax^2 + bx + c$"])
        s["lines"] = r.randint(1, 3)
        out = ["a mathematical equation", "a formula typeset in mathematical notation",
               f"{_n(s['lines'])} lines of equations" if s["lines"] > 1 else "a single equation"]
    elif kind == "photo":
        s["scene"] = r.choice(["landscape", "sunset", "night", "ocean", "forest", "abstract"])
        s["sun"] = r.random() < 0.5
        scene = {"landscape": "a landscape with blue sky and green hills",
                 "sunset": "a sunset with an orange sky", "night": "a dark night sky with stars",
                 "ocean": "the sea under a blue sky", "forest": "green trees in a forest",
                 "abstract": "an abstract colourful photograph"}[s["scene"]]
        out = [f"a photograph of {scene}", "a photo, not a chart",
               f"a picture of {s['scene']}" + (" with the sun" if s["sun"] else "")]
    elif kind == "text_page":
        s["lines"] = r.randint(5, 25)
        s["code"] = r.random() < 0.4
        s["words"] = [r.choice(WORDS) for _ in range(40)]
        out = ["a screenshot of a code listing" if s["code"] else "a scanned page of text",
               f"{_n(s['lines']) if s['lines'] <= 12 else 'many'} lines of "
               + ("source code in a monospace font" if s["code"] else "text"),
               "an image of text, no chart"]
    elif kind == "errorbar":
        k = r.randint(1, 3)
        s["n"] = k
        s["colours"] = _colours(r, k)
        out = [f"a plot with error bars in {_clist(s['colours'])}{tt}",
               f"{yw} with error bars against {xw}", f"{_n(k)} series of points with error bars"]
    elif kind == "polar":
        s["colours"] = _colours(r, 1)
        s["rose"] = r.random() < 0.5
        out = [f"a polar plot in {s['colours'][0]}" if not s["rose"] else "a polar bar chart",
               "a circular radar style chart", f"a polar chart of {yw}"]
    if t:
        out.append(f'the figure titled "{t}"')
        out.append(f"a {kind.replace('_', ' ').replace('hbar', 'horizontal bar')} chart about {t.lower()}")
    if s["scan"]:
        out.append(out[0] + ", scanned in grayscale")
    return out


# ---- rendering -----------------------------------------------------------------------------
def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _series(rng, shape, n=50):
    x = np.linspace(0, 10, n)
    if shape == "rising":
        y = x * rng.uniform(0.5, 2) + rng.normal(0, 0.5, n)
    elif shape == "falling":
        y = 20 - x * rng.uniform(0.5, 2) + rng.normal(0, 0.5, n)
    elif shape == "oscillating":
        y = np.sin(x * rng.uniform(0.5, 2) + rng.uniform(0, 6)) * rng.uniform(1, 5)
    elif shape == "exponential":
        y = np.exp(x * rng.uniform(0.1, 0.4))
    else:
        y = np.cumsum(rng.normal(0, 1, n))
    return x, y


def _draw(s, fig, rng):
    k = s["kind"]
    C = [COLOURS[c] for c in s.get("colours", [])]
    pr = s.get("print")
    if k in ("surface", "map3"):
        ax = fig.add_subplot(111, projection="3d")
    elif k == "polar":
        ax = fig.add_subplot(111, projection="polar")
    else:
        ax = fig.add_subplot(111)
    if k in ("bar", "hbar"):
        v = rng.uniform(1, 10, s["n"])
        cols = C if len(C) == s["n"] else C[0]
        (ax.barh if k == "hbar" else ax.bar)(s["cats"], v, color=cols)
    elif k in ("grouped_bar", "stacked_bar"):
        x = np.arange(s["n"])
        w = 0.8 / s["groups"]
        base = np.zeros(s["n"])
        for g in range(s["groups"]):
            v = rng.uniform(1, 10, s["n"])
            f = ax.barh if s["horizontal"] else ax.bar
            if k == "grouped_bar":
                f(x + g * w, v, w, color=C[g], label=f"S{g + 1}")
            elif s["horizontal"]:
                f(x, v, left=base, color=C[g], label=f"S{g + 1}")
            else:
                f(x, v, bottom=base, color=C[g], label=f"S{g + 1}")
            base += v
        (ax.set_yticks if s["horizontal"] else ax.set_xticks)(x)
        (ax.set_yticklabels if s["horizontal"] else ax.set_xticklabels)(s["cats"])
        ax.legend(fontsize=7)
    elif k in ("line", "step"):
        for j in range(s["n"]):
            x, y = _series(rng, s["shape"])
            kw = dict(color=C[j], linestyle=s["styles"][j], marker="o" if s["markers"] else None,
                      markersize=3)
            if pr:
                kw.update(marker=s["marker"] if s["markers"] else None, mfc="none", linewidth=0.8)
            (ax.step if k == "step" else ax.plot)(x, y, **kw)
    elif k == "scatter":
        for j in range(s["n"]):
            m = s["pts"] // s["n"]
            x = rng.normal(rng.uniform(0, 10), 1.5 if s["trend"] == "clustered" else 3, m)
            sl = {"positive": 1, "negative": -1}.get(s["trend"], 0)
            y = (sl * x + rng.normal(0, 2, m)) if s["trend"] != "clustered" else rng.normal(rng.uniform(0, 10), 1.5, m)
            if pr:
                ax.scatter(x, y, s=18, marker=s["marker"], linewidths=0.8, **_mark(s, C[j]))
                if s["fit"]:
                    q = np.polyfit(x, y, 1)
                    ax.plot(np.sort(x), np.polyval(q, np.sort(x)), color="black", linewidth=0.8)
            else:
                ax.scatter(x, y, s=8, color=C[j])
    elif k in ("pie", "donut"):
        v = rng.uniform(1, 10, s["n"])
        kw = dict(colors=C, labels=s["cats"], textprops={"fontsize": 7})
        if s["pct"]:
            kw["autopct"] = "%1.0f%%"
        if k == "donut":
            kw["wedgeprops"] = {"width": 0.4}
        ax.pie(v, **kw)
        ax.axis("equal")
    elif k == "histogram":
        d = s["dist"]
        v = (rng.normal(0, 1, 2000) if d == "normal" else rng.gamma(2, 1, 2000) if d == "skewed"
             else np.concatenate([rng.normal(-2, .7, 1000), rng.normal(2, .7, 1000)]) if d == "bimodal"
             else rng.uniform(0, 1, 2000))
        ax.hist(v, bins=s["bins"], color=C[0], edgecolor="white")
    elif k == "box":
        ax.boxplot([rng.normal(rng.uniform(0, 5), rng.uniform(.5, 2), 50) for _ in range(s["n"])],
                   patch_artist=True, boxprops={"facecolor": C[0]})
        ax.set_xticks(range(1, s["n"] + 1))
        ax.set_xticklabels(s["cats"])
    elif k == "area":
        x = np.linspace(0, 10, 40)
        ys = [np.abs(_series(rng, "noisy", 40)[1]) + 1 for _ in range(s["n"])]
        ax.stackplot(x, *ys, colors=C)
    elif k in ("heatmap", "contour"):
        n = s["gridn"]
        if k == "heatmap":
            im = ax.imshow(rng.uniform(0, 1, (n, n)), cmap=s["cmap"])
        else:
            X, Y = np.meshgrid(np.linspace(-3, 3, 60), np.linspace(-3, 3, 60))
            Z = np.exp(-(X - rng.uniform(-1, 1)) ** 2 - Y ** 2) + 0.5 * np.sin(X * Y * rng.uniform(.3, 1))
            im = ax.contourf(X, Y, Z, levels=n, cmap=s["cmap"])
        if s["colorbar"]:
            fig.colorbar(im, ax=ax)
    elif k == "surface" and pr:
        n = s["gridn"]
        X, Y = np.meshgrid(np.linspace(-3, 3, n), np.linspace(-3, 3, n))
        Z = np.sin(np.sqrt(X ** 2 + Y ** 2) * rng.uniform(.5, 2)) if rng.random() < 0.5 else \
            np.exp(-(X - rng.uniform(-1, 1)) ** 2 - Y ** 2) + 0.2 * X
        if s["wire"] == "wireframe":
            ax.plot_wireframe(X, Y, Z, color=C[0], linewidth=0.6)
        else:
            ax.plot_surface(X, Y, Z, color="white", edgecolor=C[0], linewidth=0.5, shade=False)
        _plain_panes(ax, rng)
    elif k == "surface":
        X, Y = np.meshgrid(np.linspace(-3, 3, 30), np.linspace(-3, 3, 30))
        ax.plot_surface(X, Y, np.sin(np.sqrt(X ** 2 + Y ** 2) * rng.uniform(.5, 2)), cmap=s["cmap"])
    elif k == "map3":
        p = rng.normal(0, 1, (3, 150))
        if pr:
            ax.scatter(p[0], p[1], p[2], marker=s["marker"], s=14, linewidths=0.8, **_mark(s, C[0]))
            _plain_panes(ax, rng)
        else:
            ax.scatter(p[0], p[1], p[2], c=p[2], cmap=s["cmap"], s=6)
    elif k == "polar":
        th = np.linspace(0, 2 * np.pi, 12 if s["rose"] else 200)
        if s["rose"]:
            ax.bar(th, rng.uniform(1, 5, 12), width=0.5, color=C[0])
        else:
            ax.plot(th, 1 + 0.5 * np.sin(th * rng.integers(2, 6)), color=C[0])
    elif k == "errorbar":
        for j in range(s["n"]):
            x = np.arange(8) + j * 0.1
            ax.errorbar(x, rng.uniform(2, 8, 8), yerr=rng.uniform(.3, 1.5, 8), color=C[j],
                        fmt="o", capsize=3)
    elif k == "flow":
        _flow(s, ax)
    elif k == "table":
        ax.axis("off")
        cells = [[f"{rng.uniform(0, 1000):.1f}" for _ in range(s["cols"])] for _ in range(s["rows"])]
        tb = ax.table(cellText=cells, colLabels=s["header"], loc="center")
        tb.auto_set_font_size(False)
        tb.set_fontsize(7)
    elif k == "equation":
        ax.axis("off")
        for j in range(s["lines"]):
            ax.text(0.5, 0.8 - j * 0.3, s["eq"], ha="center", va="center", fontsize=16)
    elif k == "photo":
        _photo(s, ax, rng)
    elif k == "text_page":
        ax.axis("off")
        for j in range(s["lines"]):
            words = " ".join(rng.choice(s["words"], rng.integers(3, 10)))
            if s["code"]:
                words = "    " * int(rng.integers(0, 3)) + words.replace(" ", "_", 1) + "();"
            ax.text(0.02, 1 - (j + 1) / (s["lines"] + 1), words, fontsize=8,
                    family="monospace" if s["code"] else "serif", transform=ax.transAxes)
    if k not in ("pie", "donut", "flow", "table", "equation", "photo", "text_page", "polar", "surface", "map3"):
        ax.set_xlabel(s["xlabel"], fontsize=8)
        ax.set_ylabel(s["ylabel"], fontsize=8)
        ax.tick_params(labelsize=7)
        if s["grid"]:
            ax.grid(True, alpha=0.4)
    if s["has_title"]:
        ax.set_title(s["title"], fontsize=9)
    if pr and k not in ("surface", "map3"):
        ax.tick_params(direction="in", top=True, right=True)
        if k in ("bar", "hbar", "histogram"):
            for p in ax.patches:
                p.set_edgecolor("black")
                p.set_linewidth(0.6)


def _mark(s, c):
    """Colours of a print-style marker: hollow shapes, or line-only crosses."""
    return {"color": c} if s["marker"] in "+x" else {"facecolors": "none", "edgecolors": c}


def _plain_panes(ax, rng):
    """The 3D box of a printed plot: white panes, often without the grid."""
    for a in (ax.xaxis, ax.yaxis, ax.zaxis):
        a.pane.fill = False
        a.pane.set_edgecolor("black")
    if rng.random() < 0.6:
        ax.grid(False)


def _flow(s, ax):
    import matplotlib.patches as mp
    ax.axis("off")
    n = s["n"]
    if s["layout"] == "horizontal":
        pos = [((i + .5) / n, .5) for i in range(n)]
    elif s["layout"] == "vertical":
        pos = [(.5, 1 - (i + .5) / n) for i in range(n)]
    else:
        c = math.ceil(math.sqrt(n))
        pos = [((i % c + .5) / c, 1 - (i // c + .5) / c) for i in range(n)]
    w, h = min(.8 / max(n, 1) * (n if s["layout"] != "horizontal" else 1), .25), .1
    w = .18 if s["layout"] != "horizontal" else .8 / n
    for i, (x, y) in enumerate(pos):
        if s["shape"] == "circle":
            ax.add_patch(mp.Ellipse((x, y), w, h * 1.4, fc=COLOURS[s["colours"][0]], alpha=.35, ec="black"))
        else:
            st = "round,pad=0.01" if s["shape"] == "round" else "square,pad=0.01"
            ax.add_patch(mp.FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle=st,
                                           fc=COLOURS[s["colours"][0]], alpha=.35, ec="black"))
        ax.text(x, y, s["labels"][i], ha="center", va="center", fontsize=7)
        if i + 1 < n:
            x2, y2 = pos[i + 1]
            ax.annotate("", xy=(x2, y2), xytext=(x, y),
                        arrowprops=dict(arrowstyle="->", shrinkA=14, shrinkB=14))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)


def _photo(s, ax, rng):
    ax.axis("off")
    H, W = 120, 160
    yy = np.linspace(0, 1, H)[:, None, None]
    top, bot = {"landscape": ([.35, .6, .95], [.2, .55, .2]), "sunset": ([.95, .5, .15], [.3, .15, .2]),
                "night": ([.02, .02, .1], [.05, .05, .08]), "ocean": ([.4, .7, 1], [.0, .25, .55]),
                "forest": ([.5, .7, .5], [.05, .3, .05]), "abstract": (rng.uniform(0, 1, 3), rng.uniform(0, 1, 3))}[s["scene"]]
    img = np.array(top)[None, None] * (1 - yy) + np.array(bot)[None, None] * yy
    img = np.broadcast_to(img, (H, W, 3)).copy()
    hz = int(H * rng.uniform(.45, .7))
    ridge = hz + (np.sin(np.linspace(0, rng.uniform(3, 9), W)) * 8).astype(int)
    for x in range(W):
        img[ridge[x]:, x] = np.array(bot) * rng.uniform(.8, 1.1)
    if s["scene"] == "night":
        for _ in range(60):
            img[rng.integers(0, hz), rng.integers(0, W)] = 1
    if s["sun"]:
        cy, cx = rng.integers(10, hz - 10 if hz > 20 else 11), rng.integers(10, W - 10)
        m = (np.arange(H)[:, None] - cy) ** 2 + (np.arange(W)[None] - cx) ** 2 < 64
        img[m] = [1, .9, .4]
    img += rng.normal(0, .04, img.shape)
    ax.imshow(np.clip(img, 0, 1), aspect="auto")


def render(s):
    """The spec's figure as uint8 RGB [h][w][3]."""
    plt = _plt()
    rng = np.random.default_rng(s["rs"])
    style = {"font.family": "serif", "mathtext.fontset": "cm"} if s.get("serif") else {}
    with plt.rc_context(style):
        return _render_in(s, plt, rng)


def _render_in(s, plt, rng):
    fig = plt.figure(figsize=(s["w_in"], s["h_in"]), dpi=s["dpi"])
    try:
        _draw(s, fig, rng)
        fig.tight_layout()
        fig.canvas.draw()
        a = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
    finally:
        plt.close(fig)
    if s["scan"]:
        g = a.astype(np.float32).mean(axis=2, keepdims=True)
        g = g * rng.uniform(.8, .95) + rng.uniform(10, 30) + rng.normal(0, 8, g.shape)
        a = np.clip(np.repeat(g, 3, axis=2), 0, 255).astype(np.uint8)
    return a


def sample_main(spec_fn, render_fn):
    """--n figures of --seed drawn to --out as PNGs with their specs (a look at a generator)."""
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=12)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.add_argument("--print-share", type=float, help="figdata only: share drawn in the print style")
    a = p.parse_args()
    kw = {} if a.print_share is None else {"print_share": a.print_share}
    os.makedirs(a.out, exist_ok=True)
    from PIL import Image
    with open(os.path.join(a.out, "specs.jsonl"), "w") as f:
        for i in range(a.n):
            s = spec_fn(i, a.seed, **kw)
            Image.fromarray(render_fn(s)).save(os.path.join(a.out, f"{i:05d}-{s['kind']}.png"))
            f.write(json.dumps(s) + "\n")


def main():
    sample_main(spec, render)


if __name__ == "__main__":
    sys.exit(main())
