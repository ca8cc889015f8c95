#!/usr/bin/env python3
"""Search latency before and after a change, side by side in one run (docs/security.md).

Runs two builds of Propeller at once — each its own `propeller up` (the embedded default) and
its own `propeller mount` of the same tree — and measures, in interleaved rounds so both see
the same machine:

  lib-up      libpropeller (bench/security/search_latency.cc) searching `up`
  lib-mount   libpropeller searching a scope inside the mount (its query engine)
  cli-up      `propeller --master E search Q` as a process, wall time
  cli-mount   `propeller search Q --scope MNT`, wall time
  qdir        listing the query directory MNT/?Q through FUSE

`up` of a build from before issue 23 listens on loopback TCP (its default then); after it, on
unix sockets. Every row is also measured as an ordinary user (uid 65534) against the build
after, where that user's searches are filtered.

Usage (as root, both builds made with the RelWithDebInfo preset):
  bench/security/search_latency.py --before /tmp/before/build --after build \
      --tree /usr/share --mount-tree /usr/share/doc --rounds 5 --out bench/results/search-latency

The before build needs search_latency compiled against it; the script does that (g++ with the
before tree's headers and static libraries) unless --before-bench names a binary.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

QUERIES = ["size>1m", "keyword=license & mtime<5y", "ext=png & size>100k"]


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def wait_file(path, proc, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if os.path.exists(path):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"process exited ({proc.returncode}) before {path} appeared")
        time.sleep(0.05)
    raise RuntimeError(f"{path} did not appear")


def ready_endpoints(path):
    out = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.strip().partition(" ")
            out[k] = v
    return out


def build_bench_against(tree, build, out):
    """Compiles search_latency.cc against an older tree's headers and static libraries."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "search_latency.cc")
    libs = [os.path.join(build, p) for p in (
        "client/libpropeller_client.a", "schemas/libpropeller_schemas.a",
        "common/libpropeller_common.a")]
    cmd = ["g++", "-std=c++20", "-O2", "-DMSGPACK_NO_BOOST", "-I", tree, src] + libs + [
        "-lzmq", "-pthread", "-o", out]
    subprocess.run(cmd, check=True)
    return out


class System:
    def __init__(self, label, build, bench, tree, mount_tree, work, legacy_tcp):
        self.label, self.build, self.bench = label, build, bench
        self.cli = os.path.join(build, "client/propeller")
        self.work = work
        self.env = dict(os.environ)
        self.env["PROPELLER_RUNTIME_DIR"] = os.path.join(work, "run")
        self.env["HOME"] = work
        os.makedirs(os.path.join(work, "run"), mode=0o755, exist_ok=True)
        os.chmod(work, 0o755)
        argv = [self.cli, "up", "--data", os.path.join(work, "data"), "--ready-file",
                os.path.join(work, "up.ready"), "--log-level", "warning"]
        if legacy_tcp:
            p = free_ports(2)
            argv += ["--listen", f"tcp://127.0.0.1:{p[0]}", "--node-listen",
                     f"tcp://127.0.0.1:{p[1]}"]
        self.up = subprocess.Popen(argv, env=self.env, stderr=open(os.path.join(work, "up.log"), "w"))
        wait_file(os.path.join(work, "up.ready"), self.up)
        self.master = ready_endpoints(os.path.join(work, "up.ready"))["master"]
        subprocess.run([self.cli, "--master", self.master, "import", tree], env=self.env,
                       check=True, stdout=subprocess.DEVNULL)
        self.mnt = os.path.join(work, "mnt")
        os.makedirs(self.mnt)
        os.chmod(self.mnt, 0o755)
        self.mount = subprocess.Popen(
            [self.cli, "mount", mount_tree, self.mnt, "--data", os.path.join(work, "mdata"),
             "--ready-file", os.path.join(work, "mount.ready"), "--log-level", "warning"],
            env=self.env, stderr=open(os.path.join(work, "mount.log"), "w"))
        wait_file(os.path.join(work, "mount.ready"), self.mount)

    def stop(self):
        subprocess.run(["fusermount3", "-u", self.mnt], stderr=subprocess.DEVNULL)
        for p in (self.mount, self.up):
            p.terminate()
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()

    def as_user(self, argv, user):
        if user is None:
            return argv
        return ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups"] + argv

    def lib(self, query, scope=None, user=None, runs=100):
        argv = [self.bench, query, "--runs", str(runs), "--warmup", "10"]
        argv += ["--scope", scope] if scope else ["--master", self.master]
        out = subprocess.run(self.as_user(argv, user), env=self.env, check=True,
                             capture_output=True, text=True).stdout
        return json.loads(out)["p50_us"]

    def cli_ms(self, query, scope=None, user=None, runs=10):
        argv = [self.cli] + ([] if scope else ["--master", self.master]) + ["search", query]
        argv += ["--scope", scope] if scope else []
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run(self.as_user(argv, user), env=self.env, check=True,
                           stdout=subprocess.DEVNULL)
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)

    def qdir_ms(self, query, runs=10):
        path = os.path.join(self.mnt, "?" + query.replace(" ", ""))
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            os.listdir(path)
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--after", required=True, help="build directory of the change")
    ap.add_argument("--before", help="build directory from before it")
    ap.add_argument("--before-tree", help="its source tree (default: BEFORE/..)")
    ap.add_argument("--before-bench", help="search_latency built against it")
    ap.add_argument("--before-legacy-tcp", action="store_true", default=True,
                    help="the before build's up listens on TCP (its default before issue 23)")
    ap.add_argument("--tree", default="/usr/share")
    ap.add_argument("--mount-tree", default="/usr/share/doc")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default="bench/results/search-latency")
    a = ap.parse_args()

    top = tempfile.mkdtemp(prefix="propeller-search-latency-")
    os.chmod(top, 0o755)
    systems = []
    try:
        after_bench = os.path.join(a.after, "bench/propeller_search_latency")
        systems.append(System("after", a.after, after_bench, a.tree, a.mount_tree,
                              os.path.join(top, "after"), legacy_tcp=False))
        if a.before:
            tree = a.before_tree or os.path.dirname(os.path.abspath(a.before))
            bench = a.before_bench or build_bench_against(
                tree, a.before, os.path.join(top, "search_latency_before"))
            systems.append(System("before", a.before, bench, a.tree, a.mount_tree,
                                  os.path.join(top, "before"), legacy_tcp=a.before_legacy_tcp))
        rows = {}  # (measure, query, label) -> [per-round medians]

        def add(key, v):
            rows.setdefault(key, []).append(v)

        for r in range(a.rounds):
            order = systems if r % 2 == 0 else list(reversed(systems))
            for s in order:
                for q in QUERIES:
                    add(("lib-up", q, s.label), s.lib(q))
                    add(("lib-mount", q, s.label), s.lib(q, scope=s.mnt))
                    add(("cli-up", q, s.label), s.cli_ms(q))
                    add(("cli-mount", q, s.label), s.cli_ms(q, scope=s.mnt))
                    add(("qdir", q, s.label), s.qdir_ms(q))
                    if s.label == "after":
                        add(("lib-up", q, "after-user"), s.lib(q, user=65534))
                        add(("lib-mount", q, "after-user"), s.lib(q, scope=s.mnt, user=65534))
                        add(("cli-up", q, "after-user"), s.cli_ms(q, user=65534))
            print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    finally:
        for s in systems:
            s.stop()
        shutil.rmtree(top, ignore_errors=True)

    result = {"queries": QUERIES, "rounds": a.rounds, "tree": a.tree,
              "mount_tree": a.mount_tree, "rows": []}
    units = {"lib-up": "us", "lib-mount": "us", "cli-up": "ms", "cli-mount": "ms", "qdir": "ms"}
    lines = ["# Search latency before and after issue 23 (same run, interleaved rounds)", "",
             f"Tree `{a.tree}` in `up`, `{a.mount_tree}` in the mount; {a.rounds} rounds; each "
             "cell is the median over rounds of the round's median (library: 100 searches per "
             "round; CLI and query directory: 10). `before` is the build before issue 23 (its "
             "`up` on loopback TCP), `after` the change (unix sockets), both as root; the last "
             "column is `after` as uid 65534, whose searches are filtered, started through "
             "setpriv (one more exec in the CLI rows).", "",
             "| measure | query | before | after | after/before | after, uid 65534 |",
             "|---|---|---|---|---|---|"]
    for measure in ["lib-up", "lib-mount", "cli-up", "cli-mount", "qdir"]:
        for q in QUERIES:
            med = {lab: statistics.median(v) for (m, qq, lab), v in rows.items()
                   if m == measure and qq == q}
            row = {"measure": measure, "query": q, "unit": units[measure], **med}
            result["rows"].append(row)
            b, af, u = med.get("before"), med.get("after"), med.get("after-user")
            ratio = f"{af / b:.2f}" if b and af else ""
            fmt = (lambda x: f"{x:.0f} {units[measure]}" if x is not None else "") \
                if units[measure] == "us" else (lambda x: f"{x:.2f} {units[measure]}"
                                                if x is not None else "")
            lines.append(f"| {measure} | `{q}` | {fmt(b)} | {fmt(af)} | {ratio} | {fmt(u)} |")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "report.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
