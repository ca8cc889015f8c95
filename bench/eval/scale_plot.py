#!/usr/bin/env python3
"""Plots search time and bytes per file against files indexed, from bench/eval JSON files.

    bench/eval/scale_plot.py OUT_DIR [NAME=]RUN.json [[NAME=]RUN.json ...]

Each RUN.json is one `propeller_eval run` (any system, any --files); runs of one system at
several sizes become one line, named after the system, or NAME when given (for example to draw
compacted stores apart: a run with --reuse=yes cannot tell how its store was made). Writes OUT_DIR/scale-search.svg (one panel per query of
experiments 2 and 4, warm medians, log-log) and OUT_DIR/scale-bytes.svg (disk_bytes / files).
Plain SVG, no plotting library: the machine that runs the evaluation need not have one.
"""
import html
import json
import math
import os
import sys

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]


def load(paths):
    """{system: {files: run}} from the JSON files."""
    runs = {}
    for arg in paths:
        name, sep, p = arg.partition("=")
        if not sep or os.path.exists(arg):  # a file whose name has "=" is a file
            name, p = None, arg
        with open(p) as f:
            r = json.load(f)
        runs.setdefault(name or r["system"], {})[r["files"]] = r
    return runs


def query_times(run):
    """{query: warm median seconds} of one run."""
    out = {}
    for e in run.get("exp2", []):
        out[e["query"]] = e["median_ms"] / 1e3
    for e in run.get("exp4", []):
        out[e["query"]] = e["warm"]["real_s"]
    return out


def ticks(lo, hi, log):
    if log:
        a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        return [10.0 ** k for k in range(a, b + 1)]
    step = 10 ** math.floor(math.log10(max(hi - lo, 1e-9)))
    if (hi - lo) / step < 4:
        step /= 2
    start = math.floor(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 2)]


def label(v):
    if v == 0:
        return "0"
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= div:
            return "%g%s" % (v / div, unit)
    if v >= 1:
        return "%g" % v
    if v >= 1e-3:
        return "%gm" % (v * 1e3)
    return "%gu" % (v * 1e6)


def panel(x0, y0, w, h, title, series, ylog, yunit):
    """SVG of one panel at (x0, y0): series = [(name, color, [(x, y), ...])]."""
    pts = [p for _, _, s in series for p in s if p[1] > 0]
    if not pts:
        return ""
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts]
    xt = ticks(min(xs), max(xs), True)
    if ylog:
        yt = ticks(min(ys), max(ys), True)
    else:
        yt = ticks(0, max(ys) * 1.1, False)
    fx = lambda v: x0 + 50 + (math.log10(v) - math.log10(xt[0])) / max(
        math.log10(xt[-1]) - math.log10(xt[0]), 1e-9) * (w - 70)
    if ylog:
        fy = lambda v: y0 + h - 30 - (math.log10(v) - math.log10(yt[0])) / max(
            math.log10(yt[-1]) - math.log10(yt[0]), 1e-9) * (h - 60)
    else:
        fy = lambda v: y0 + h - 30 - (v - yt[0]) / max(yt[-1] - yt[0], 1e-9) * (h - 60)
    s = ['<text x="%d" y="%d" font-size="13" font-weight="bold">%s</text>'
         % (x0 + 50, y0 + 16, html.escape(title))]
    for t in xt:
        s.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>' % (fx(t), y0 + 30, fx(t), y0 + h - 30))
        s.append('<text x="%.1f" y="%d" font-size="11" text-anchor="middle">%s</text>' % (fx(t), y0 + h - 14, label(t)))
    for t in yt:
        s.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (x0 + 50, fy(t), x0 + w - 20, fy(t)))
        s.append('<text x="%d" y="%.1f" font-size="11" text-anchor="end">%s%s</text>' % (x0 + 46, fy(t) + 4, label(t), yunit))
    for i, (name, color, ser) in enumerate(series):
        ser = [p for p in ser if p[1] > 0]
        if not ser:
            continue
        path = " ".join("%s%.1f,%.1f" % ("M" if j == 0 else "L", fx(x), fy(y)) for j, (x, y) in enumerate(ser))
        s.append('<path d="%s" fill="none" stroke="%s" stroke-width="2"/>' % (path, color))
        for x, y in ser:
            s.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>' % (fx(x), fy(y), color))
        s.append('<text x="%d" y="%d" font-size="11" fill="%s">%s</text>'
                 % (x0 + 60, y0 + 34 + 14 * i, color, html.escape(name)))
    s.append('<text x="%d" y="%d" font-size="11" text-anchor="middle">files indexed</text>' % (x0 + w / 2, y0 + h))
    return "\n".join(s)


def svg(width, height, body):
    return ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
            'font-family="sans-serif">\n<rect width="100%%" height="100%%" fill="white"/>\n%s\n</svg>\n'
            % (width, height, body))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, runs = sys.argv[1], load(sys.argv[2:])
    systems = sorted(runs)
    queries = []
    for sysname in systems:
        for run in runs[sysname].values():
            for q in query_times(run):
                if q not in queries:
                    queries.append(q)
    w, h = 330, 280
    body = []
    for i, q in enumerate(queries):
        series = []
        for j, sysname in enumerate(systems):
            pts = sorted((n, query_times(r).get(q, 0)) for n, r in runs[sysname].items())
            series.append((sysname, COLORS[j % len(COLORS)], pts))
        body.append(panel(i * w, 0, w, h, q + " (warm)", series, True, "s"))
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "scale-search.svg"), "w") as f:
        f.write(svg(w * len(queries), h, "\n".join(body)))
    series = []
    for j, sysname in enumerate(systems):
        pts = sorted((n, r["disk_bytes"] / n) for n, r in runs[sysname].items() if r.get("disk_bytes"))
        series.append((sysname, COLORS[j % len(COLORS)], pts))
    with open(os.path.join(out, "scale-bytes.svg"), "w") as f:
        f.write(svg(w + 40, h, panel(0, 0, w + 40, h, "bytes on disk per file", series, False, "")))


if __name__ == "__main__":
    main()
