#!/usr/bin/env python3
"""Parses PostMark outputs listed by postmark.sh and writes the JSON + Markdown result.

usage: postmark_report.py --manifest M.tsv --json OUT.json --markdown OUT.md [config options]
       postmark_report.py --parse POSTMARK_OUTPUT     (prints the parsed numbers as JSON)

The manifest has one tab-separated line per run:
  system, run, status, wall seconds, load before, load after, path of PostMark's stdout.

Numbers are taken as PostMark prints them (its clock counts whole seconds, so short runs are
coarse; the wall time measured around the process is kept next to them). Per system the median
over its successful runs is reported; ratios are medians divided (docs/architecture.md §11 target:
propeller / passthrough_ll >= 0.9 on files created per second).
"""
import argparse
import json
import os
import platform
import re
import statistics
import sys

TARGET_RATIO = 0.9
SYSTEM_ORDER = ["ext4", "passthrough_ll", "propeller"]

# (metric name, regex) over PostMark's verbose report. The "Creation alone" and "Deletion
# alone" lines are each followed by a "Mixed with transactions" line: the parser tracks which
# block it is in.
_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_TOTAL = re.compile(r"^\s*" + _NUM + r" seconds total\s*$")
_TX = re.compile(r"^\s*" + _NUM + r" seconds of transactions \(" + _NUM + r" per second\)")
_FILES = re.compile(r"^\s*" + _NUM + r" (created|read|appended|deleted) \(" + _NUM + r" per second\)")
_ALONE = re.compile(r"^\s*(Creation|Deletion) alone: " + _NUM + r" files \(" + _NUM + r" per second\)")
_MIXED = re.compile(r"^\s*Mixed with transactions: " + _NUM + r" files \(" + _NUM + r" per second\)")
_DATA = re.compile(r"^\s*" + _NUM + r" (bytes|kilobytes|megabytes|gigabytes) (read|written) \("
                   + _NUM + r" (bytes|kilobytes|megabytes|gigabytes) per second\)")
_UNIT = {"bytes": 1.0, "kilobytes": 1024.0, "megabytes": 1024.0 ** 2, "gigabytes": 1024.0 ** 3}

# Metrics shown in the table (name, label, higher is better).
TABLE_METRICS = [
    ("created_per_s", "files created/s (all)", True),
    ("creation_alone_per_s", "files created/s (creation alone)", True),
    ("created_mixed_per_s", "files created/s (mixed with transactions)", True),
    ("transactions_per_s", "transactions/s", True),
    ("deleted_per_s", "files deleted/s (all)", True),
    ("total_s", "total time (s, PostMark)", False),
    ("wall_s", "wall time (s, measured)", False),
]


def parse_postmark(text):
    """Returns a dict of the numbers in one PostMark verbose report; raises ValueError if the
    report is incomplete (a crashed or interrupted run)."""
    m = {}
    block = None  # "created" or "deleted": which "Mixed with transactions" line comes next
    for line in text.splitlines():
        if (g := _TOTAL.match(line)):
            m["total_s"] = float(g.group(1))
        elif (g := _TX.match(line)):
            m["transactions_s"] = float(g.group(1))
            m["transactions_per_s"] = float(g.group(2))
        elif (g := _FILES.match(line)):
            m[g.group(2)] = int(float(g.group(1)))
            m[g.group(2) + "_per_s"] = float(g.group(3))
            block = g.group(2)
        elif (g := _ALONE.match(line)):
            key = "creation_alone" if g.group(1) == "Creation" else "deletion_alone"
            m[key] = int(float(g.group(2)))
            m[key + "_per_s"] = float(g.group(3))
        elif (g := _MIXED.match(line)):
            if block not in ("created", "deleted"):
                raise ValueError("'Mixed with transactions' outside a created/deleted block")
            m[block + "_mixed"] = int(float(g.group(1)))
            m[block + "_mixed_per_s"] = float(g.group(2))
        elif (g := _DATA.match(line)):
            m["bytes_" + g.group(3)] = float(g.group(1)) * _UNIT[g.group(2)]
            m["bytes_" + g.group(3) + "_per_s"] = float(g.group(4)) * _UNIT[g.group(5)]
    required = ["total_s", "transactions_per_s", "created_per_s", "creation_alone_per_s",
                "created_mixed_per_s", "deleted_per_s"]
    missing = [k for k in required if k not in m]
    if missing:
        raise ValueError("PostMark report lacks " + ", ".join(missing))
    return m


def read_manifest(path):
    runs = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            system, run, status, wall, la_before, la_after, out = line.split("\t")
            entry = {"system": system, "run": int(run), "status": status,
                     "loadavg_before": la_before, "loadavg_after": la_after, "output": out}
            if status == "ok":
                try:
                    with open(out) as o:
                        entry["metrics"] = parse_postmark(o.read())
                    entry["metrics"]["wall_s"] = float(wall)
                except (OSError, ValueError) as e:
                    entry["status"] = "unparsable: %s" % e
            runs.append(entry)
    return runs


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def summarize(runs):
    systems = {}
    for r in runs:
        systems.setdefault(r["system"], {"runs": []})["runs"].append(r)
    for s in systems.values():
        ok = [r["metrics"] for r in s["runs"] if "metrics" in r]
        s["ok_runs"] = len(ok)
        s["median"] = {}
        if ok:
            for key in sorted(set().union(*ok)):
                vals = [m[key] for m in ok if key in m]
                s["median"][key] = statistics.median(vals)
    return systems


def ratios(systems, num, den):
    a = systems.get(num, {}).get("median", {})
    b = systems.get(den, {}).get("median", {})
    out = {}
    for key, _, higher in TABLE_METRICS:
        if higher:
            out[key] = ratio(a.get(key), b.get(key))
        else:  # time: report speed ratio (den time / num time) so > 1 means num is faster
            out[key + "_speed"] = ratio(b.get(key), a.get(key))
    return out


def fmt(v, digits=0):
    if v is None:
        return "—"
    if digits == 0:
        return "{:,.0f}".format(v)
    return "{:,.{}f}".format(v, digits)


def markdown(doc):
    systems = doc["systems"]
    names = [s for s in SYSTEM_ORDER if s in systems]
    cfg = doc["config"]
    lines = []
    lines.append("# PostMark: ext4 vs passthrough_ll (writeback, cache=always) vs Propeller")
    lines.append("")
    lines.append("%s; %s files, %s subdirectories, %s transactions, seed %s, sizes 500 B–9.77 KB "
                 "(PostMark defaults), %s run(s) per system, interleaved%s." % (
                     doc["timestamp"], fmt(cfg["files"]), fmt(cfg["subdirs"]),
                     fmt(cfg["transactions"]), cfg["seed"], cfg["runs"],
                     " (--quick)" if cfg["quick"] else ""))
    lines.append("Host: %s, %s CPUs; data on %s (%s). Load average before: %s; after: %s." % (
        doc["host"]["kernel"], doc["host"]["cpus"], doc["work_dir"], doc["fstype"],
        doc["loadavg_before"], doc["loadavg_after"]))
    if doc["skipped"]:
        lines.append("Skipped: %s (no --propeller-cmd)." % ", ".join(doc["skipped"]))
    lines.append("")
    header = "| metric (median) | " + " | ".join(names)
    header += " | propeller / passthrough_ll | passthrough_ll / ext4 |"
    lines.append(header)
    lines.append("|---" * (len(names) + 3) + "|")
    r_pp = doc["ratios"]["propeller_over_passthrough_ll"]
    r_pe = doc["ratios"]["passthrough_ll_over_ext4"]
    for key, label, higher in TABLE_METRICS:
        digits = 1 if key.endswith("_s") and not key.endswith("per_s") else 0
        row = "| %s | " % label
        row += " | ".join(fmt(systems[s]["median"].get(key), digits) for s in names)
        rk = key if higher else key + "_speed"
        row += " | %s | %s |" % (fmt(r_pp.get(rk), 2), fmt(r_pe.get(rk), 2))
        lines.append(row)
    lines.append("")
    lines.append("Ratios of times are speed ratios (the denominator's time / the numerator's), so "
                 "> 1 always means the numerator is faster. PostMark's clock counts whole seconds.")
    lines.append("")
    t = doc["target"]
    if t["ratio"] is None:
        lines.append("Target (docs/architecture.md §11) propeller / passthrough_ll ≥ %.1f "
                     "on files created/s: not measured." % TARGET_RATIO)
    else:
        lines.append("Target (docs/architecture.md §11) propeller / passthrough_ll ≥ %.1f "
                     "on files created/s: %.2f — **%s**."
                     % (TARGET_RATIO, t["ratio"], "met" if t["met"] else "NOT met"))
    lines.append("")
    lines.append("| system | run | status | created/s | creation alone/s | mixed/s | tx/s | "
                 "total s | wall s | load before → after |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for r in sorted(doc["runs"], key=lambda r: (r["run"], SYSTEM_ORDER.index(r["system"]))):
        m = r.get("metrics", {})
        lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s → %s |" % (
            r["system"], r["run"], r["status"], fmt(m.get("created_per_s")),
            fmt(m.get("creation_alone_per_s")), fmt(m.get("created_mixed_per_s")),
            fmt(m.get("transactions_per_s")), fmt(m.get("total_s")), fmt(m.get("wall_s"), 2),
            r["loadavg_before"], r["loadavg_after"]))
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parse", help="parse one PostMark output file and print its numbers")
    p.add_argument("--manifest")
    p.add_argument("--json")
    p.add_argument("--markdown")
    p.add_argument("--files", type=int, default=0)
    p.add_argument("--subdirs", type=int, default=0)
    p.add_argument("--transactions", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--runs", type=int, default=0)
    p.add_argument("--quick", type=int, default=0)
    p.add_argument("--nofile", type=int, default=0)
    p.add_argument("--work-dir", default="")
    p.add_argument("--fstype", default="")
    p.add_argument("--load-before", default="")
    p.add_argument("--load-after", default="")
    p.add_argument("--passthrough-ll", default="")
    p.add_argument("--propeller-cmd", default="")
    p.add_argument("--skipped", default="")
    a = p.parse_args()

    if a.parse:
        with open(a.parse) as f:
            json.dump(parse_postmark(f.read()), sys.stdout, indent=2, sort_keys=True)
        print()
        return 0
    if not (a.manifest and a.json and a.markdown):
        p.error("--manifest, --json and --markdown are required")

    runs = read_manifest(a.manifest)
    systems = summarize(runs)
    r_pp = ratios(systems, "propeller", "passthrough_ll")
    target_ratio = r_pp.get("created_per_s")
    doc = {
        "benchmark": "postmark",
        "timestamp": os.path.basename(a.json)[len("postmark-"):-len(".json")],
        "host": {"kernel": platform.release(), "machine": platform.machine(),
                 "cpus": os.cpu_count(), "postmark": "1.5x (Debian package)"},
        "config": {"files": a.files, "subdirs": a.subdirs, "transactions": a.transactions,
                   "seed": a.seed, "runs": a.runs, "quick": bool(a.quick),
                   "daemon_open_file_limit": a.nofile,
                   "passthrough_ll": a.passthrough_ll,
                   "passthrough_ll_options": "-o writeback -o cache=always",
                   "propeller_cmd": a.propeller_cmd},
        "work_dir": a.work_dir,
        "fstype": a.fstype,
        "loadavg_before": a.load_before,
        "loadavg_after": a.load_after,
        "skipped": [s for s in a.skipped.split(",") if s],
        "runs": runs,
        "systems": {k: {"ok_runs": v["ok_runs"], "median": v["median"]} for k, v in systems.items()},
        "ratios": {
            "propeller_over_passthrough_ll": r_pp,
            "passthrough_ll_over_ext4": ratios(systems, "passthrough_ll", "ext4"),
        },
        "target": {"metric": "created_per_s", "min_ratio": TARGET_RATIO, "ratio": target_ratio,
                   "met": None if target_ratio is None else target_ratio >= TARGET_RATIO},
    }
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    with open(a.markdown, "w") as f:
        f.write(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
