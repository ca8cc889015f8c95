#!/usr/bin/env python3
"""Turns propeller_bench JSON output into the Markdown comparison table (bench/README.md).

usage: compare_results.py RESULTS.json [MEMORY_REPORT.jsonl]

Pairs each Propeller benchmark with its SQLite twin (same name without the system component),
takes the median over repetitions when the run had any (else the single run), and prints one
row per metric with the Propeller/SQLite ratio and, where docs/architecture.md §11 sets one,
the budget.
"""
import json
import sys

TIME_SCALE = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def load_runs(path):
    with open(path) as f:
        doc = json.load(f)
    has_aggregates = any(b.get("run_type") == "aggregate" for b in doc["benchmarks"])
    runs = {}
    for b in doc["benchmarks"]:
        if has_aggregates:
            if b.get("run_type") != "aggregate" or b.get("aggregate_name") != "median":
                continue
        elif b.get("run_type") == "aggregate":
            continue
        parts = [p for p in b["run_name"].split("/") if p != "manual_time"]
        if len(parts) < 3:
            continue
        system = parts.pop(1)
        runs.setdefault("/".join(parts), {})[system] = b
    return doc.get("context", {}), runs


def seconds(b):
    return b["real_time"] * TIME_SCALE[b.get("time_unit", "ns")]


def fmt(v):
    if v is None:
        return "–"
    if v == 0:
        return "0"
    if abs(v) >= 1e6:
        return f"{v / 1e6:.2f} M"
    if abs(v) >= 1e4:
        return f"{v / 1e3:.1f} k"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def ratio(p, s):
    if p is None or s is None or s == 0:
        return "–"
    return f"{p / s:.3g}×"


# (benchmark, metric label, extractor, budget text, budget check(value, files) or None)
def metrics_for(bench):
    if bench == "UpdateLatency":
        return [
            ("median latency µs", lambda b: b.get("p50_us"), "≤ 5 µs (default level)",
             lambda v, n: v <= 5),
            ("p99 latency µs", lambda b: b.get("p99_us"), None, None),
        ]
    if bench == "BatchUpdate":
        # Acknowledged: Apply calls only (Propeller's write cache absorbs up to 1 M updates).
        # Sustained: including the commit of what was still cached at the end of the run.
        return [("acknowledged updates/s (1000 per batch)", lambda b: b.get("items_per_second"),
                 None, None),
                ("sustained updates/s (incl. final commit)", lambda b: b.get("sustained_per_s"),
                 "≥ 500 k/s (default level)", lambda v, n: v >= 500e3)]
    if bench == "SearchBigRecent":
        return [
            ("ms per search", lambda b: seconds(b) * 1e3, "≤ 20 ms at 10 M",
             lambda v, n: v <= 20 if n >= 10_000_000 else None),
            ("hits", lambda b: b.get("hits"), None, None),
            ("disk bytes per file", lambda b: b.get("disk_bytes_per_file"), None, None),
            ("ingest files/s (populate)", lambda b: b.get("populate_files_per_s"), None, None),
        ]
    if bench == "SearchOver16M":
        return [
            ("ms per search", lambda b: seconds(b) * 1e3, None, None),
            ("hits", lambda b: b.get("hits"), None, None),
        ]
    return [("time", lambda b: seconds(b), None, None)]


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    context, runs = load_runs(sys.argv[1])
    print(f"Host: {context.get('host_name', '?')}, {context.get('num_cpus', '?')} CPUs, "
          f"load average {context.get('load_avg', '?')}, date {context.get('date', '?')}")
    print()
    print("| benchmark | level | files | metric | Propeller | SQLite | Propeller/SQLite | "
          "budget (docs/architecture.md §11) |")
    print("|---|---|---|---|---|---|---|---|")
    errors = []
    for key, systems in runs.items():
        parts = key.split("/")
        bench = parts[0]
        files_part = [p for p in parts if p.startswith("files:")]
        files = int(files_part[0].split(":")[1]) if files_part else 0
        level = next((p for p in parts[1:] if not p.startswith("files:")), "–")
        if level == "default":
            level = "default ↔ NORMAL"
        elif level == "sync":
            level = "sync ↔ FULL"
        p, s = systems.get("Propeller"), systems.get("SQLite")
        for b in (p, s):
            if b is not None and b.get("error_occurred"):
                errors.append(f"{b['name']}: {b.get('error_message')}")
        for label, get, budget, check in metrics_for(bench):
            pv = get(p) if p is not None and not p.get("error_occurred") else None
            sv = get(s) if s is not None and not s.get("error_occurred") else None
            verdict = ""
            # The update budgets are for the default level; `sync` waits for the disk.
            if level.startswith("sync"):
                budget = None
            if budget is not None and pv is not None and check is not None:
                ok = check(pv, files)
                verdict = budget + ("" if ok is None else (" ✅" if ok else " ❌"))
            print(f"| {bench} | {level} | {files:,} | {label} | {fmt(pv)} | {fmt(sv)} | "
                  f"{ratio(pv, sv)} | {verdict} |")
    if len(sys.argv) > 2:
        print()
        print("| memory report | files | durability | RSS B/file | RssAnon B/file | "
              "RSS after trim B/file | index memory B/file | disk B/file (engine) | "
              "du B/file | ingest files/s | budget (≤ 200 B resident at 10 M) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        with open(sys.argv[2]) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                m = json.loads(line)
                print(f"| propeller_memory_report | {m['files']:,} | {m['durability']} | "
                      f"{m['vmrss_per_file']:.0f} | {m['rss_anon_per_file']:.0f} | "
                      f"{m['vmrss_per_file_after_trim']:.0f} | "
                      f"{m['index_memory_per_file']:.0f} | {m['disk_bytes_per_file']:.0f} | "
                      f"{m['du_bytes_per_file']:.0f} | {fmt(m['ingest_files_per_s'])} | "
                      f"{'✅' if m['vmrss_per_file_after_trim'] <= 200 else '❌'} |")
    if errors:
        print()
        print("Errors:")
        for e in errors:
            print(f"- {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
