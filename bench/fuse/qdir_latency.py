#!/usr/bin/env python3
"""Query-directory listing latency on a Propeller mount (docs/architecture.md §11: a query directory
listing on a 140 k-file namespace, warm, <= 2 ms).

Creates the namespace THROUGH the mount (so Propeller captures it): DIRS directories x
FILES_PER_DIR files of a few bytes each, of which MATCHES (spread evenly) are truncated to
MATCH_SIZE bytes (sparse), the only files of that size. Then lists MNT/?size=MATCH_SIZE: checks
that it has exactly MATCHES entries (and that they resolve to exactly the files made
distinctive), does WARMUP untimed listings, then times ITERATIONS listings in-process
(os.listdir = opendir + readdir + closedir) and reports median / p90 / min / max, plus
scandir + lstat of every entry (what `ls -l` costs) and whole `ls` / `ls -l` processes for
reference. Writes bench/results/qdir-<UTC stamp>.{json,md}. See README.md.

usage:
  qdir_latency.py MNT                       an already mounted Propeller mount
  qdir_latency.py --propeller-cmd CMD       mount a fresh one ({backing} {mnt} {data} {ready}
                                            are replaced) in a work directory, then as above
  qdir_latency.py --plain-test              self-test of the timing path: a plain directory
                                            holding MATCHES files stands in for the query dir
  qdir_latency.py MNT --list-dir PATH --expect N --skip-create
                                            time the listing of any directory
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TARGET_MS = 2.0


def log(msg):
    print("qdir_latency: " + msg, file=sys.stderr, flush=True)


def percentile(sorted_vals, p):
    """Nearest-rank percentile of an already sorted list (p in 0..100)."""
    if not sorted_vals:
        return None
    k = max(0, min(len(sorted_vals) - 1, int(round(p / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[k]


def summary_ms(ns_list):
    s = sorted(v / 1e6 for v in ns_list)
    return {"n": len(s), "median_ms": statistics.median(s), "p90_ms": percentile(s, 90),
            "min_ms": s[0], "max_ms": s[-1], "mean_ms": statistics.fmean(s)}


# ---- namespace --------------------------------------------------------------------------------

def distinctive_indexes(total, matches):
    """Global file indexes made distinctive: evenly spread, all distinct."""
    if matches > total:
        raise ValueError("more matches (%d) than files (%d)" % (matches, total))
    return {i * total // matches for i in range(matches)}


def file_path(root, d, f):
    return os.path.join(root, "d%03d" % d, "f%04d.dat" % f)


def create_namespace(root, dirs, per_dir, matches, match_size, threads):
    """Creates the namespace under root; returns (the distinctive paths, seconds taken)."""
    special = distinctive_indexes(dirs * per_dir, matches)
    t0 = time.monotonic()
    os.makedirs(root, exist_ok=True)

    def make_dir(d):
        os.makedirs(os.path.join(root, "d%03d" % d), exist_ok=True)
        made = []
        for f in range(per_dir):
            path = file_path(root, d, f)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                gi = d * per_dir + f
                if gi in special:
                    os.ftruncate(fd, match_size)
                    made.append(path)
                else:
                    # A few bytes (2..7), never match_size: sizes vary like real small files.
                    os.write(fd, b"%d\n" % gi)
            finally:
                os.close(fd)
        return made

    paths = []
    with ThreadPoolExecutor(max_workers=threads) as pool:
        done = 0
        for made in pool.map(make_dir, range(dirs)):
            paths.extend(made)
            done += 1
            if done % 20 == 0 or done == dirs:
                log("created %d/%d directories (%.1f s)" % (done, dirs, time.monotonic() - t0))
    return sorted(paths), time.monotonic() - t0


def expected_paths(root, dirs, per_dir, matches):
    per = per_dir
    return sorted(file_path(root, gi // per, gi % per)
                  for gi in distinctive_indexes(dirs * per_dir, matches))


# ---- timing -----------------------------------------------------------------------------------

def time_listdir(path, warmup, iterations):
    counts = set()
    for _ in range(warmup):
        counts.add(len(os.listdir(path)))
    samples = []
    for _ in range(iterations):
        t0 = time.perf_counter_ns()
        names = os.listdir(path)
        samples.append(time.perf_counter_ns() - t0)
        counts.add(len(names))
    return samples, counts


def time_scandir_lstat(path, warmup, iterations):
    def once():
        n = 0
        with os.scandir(path) as it:
            for e in it:
                e.stat(follow_symlinks=False)
                n += 1
        return n
    counts = set()
    for _ in range(warmup):
        counts.add(once())
    samples = []
    for _ in range(iterations):
        t0 = time.perf_counter_ns()
        counts.add(once())
        samples.append(time.perf_counter_ns() - t0)
    return samples, counts


def time_process(argv, warmup, iterations):
    """Times whole processes (fork + exec + the listing + output to a pipe)."""
    lines = set()
    for _ in range(warmup):
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
    samples = []
    for _ in range(iterations):
        t0 = time.perf_counter_ns()
        out = subprocess.run(argv, stdout=subprocess.PIPE, check=True).stdout
        samples.append(time.perf_counter_ns() - t0)
        lines.add(len(out.splitlines()))
    return samples, lines


def time_true(iterations):
    """The cost of spawning a trivial process: subtract it mentally from the `ls` figures."""
    samples = []
    for _ in range(iterations):
        t0 = time.perf_counter_ns()
        subprocess.run(["true"], check=True)
        samples.append(time.perf_counter_ns() - t0)
    return samples


def wait_for_count(path, expect, timeout):
    """Lists path until it has expect entries; returns (first count, last count, seconds)."""
    t0 = time.monotonic()
    first = None
    n_failures = 0
    while True:
        try:
            n = len(os.listdir(path))
        except OSError as e:
            if n_failures == 0:
                log("listing %s failed: %s (retrying)" % (path, e))
            n_failures += 1
            n = -1
        if first is None:
            first = n
        if n == expect or time.monotonic() - t0 >= timeout:
            return first, n, time.monotonic() - t0
        time.sleep(0.1)


def resolve_entries(qdir):
    """Real paths of the query directory's entries (symlinks into the mount)."""
    out = []
    for name in os.listdir(qdir):
        out.append(os.path.realpath(os.path.join(qdir, name)))
    return sorted(out)


# ---- mounting (only with --propeller-cmd) -----------------------------------------------------

class Mount:
    """Runs the mount command in its own session and undoes it on close()."""

    def __init__(self, template, work, timeout):
        self.mnt = os.path.join(work, "mnt")
        self.backing = os.path.join(work, "backing")
        self.data = os.path.join(work, "data")
        self.ready = os.path.join(work, "ready")
        for d in (self.mnt, self.backing, self.data):
            os.makedirs(d, exist_ok=True)
        cmd = (template.replace("{backing}", shlex.quote(self.backing))
               .replace("{mnt}", shlex.quote(self.mnt))
               .replace("{data}", shlex.quote(self.data)))
        use_ready = "{ready}" in cmd
        cmd = cmd.replace("{ready}", shlex.quote(self.ready))
        self.command = cmd
        self.log_path = os.path.join(work, "daemon.log")
        self.log_file = open(self.log_path, "w")
        self.proc = subprocess.Popen(["bash", "-c", cmd], stdin=subprocess.DEVNULL,
                                     stdout=self.log_file, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if is_mountpoint(self.mnt) and (not use_ready or os.path.exists(self.ready)):
                return
            rc = self.proc.poll()
            if rc not in (None, 0):
                raise RuntimeError("mount command exited with %d: %s" % (rc, self.tail_log()))
            if time.monotonic() >= deadline:
                raise RuntimeError("timed out after %ds waiting for %s: %s"
                                   % (timeout, self.mnt, self.tail_log()))
            time.sleep(0.05)

    def tail_log(self):
        self.log_file.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()[-2000:]

    def close(self):
        if is_mountpoint(self.mnt):
            for argv in (["fusermount3", "-u", self.mnt], ["umount", self.mnt],
                         ["umount", "-l", self.mnt]):
                if subprocess.run(argv, stderr=subprocess.DEVNULL).returncode == 0:
                    break
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
                    try:
                        os.killpg(self.proc.pid, sig)  # our own session: pgid == pid
                    except ProcessLookupError:
                        break
                    try:
                        self.proc.wait(timeout=wait)
                        break
                    except subprocess.TimeoutExpired:
                        continue
        self.log_file.close()


def is_mountpoint(path):
    return subprocess.run(["mountpoint", "-q", path]).returncode == 0


# ---- report -----------------------------------------------------------------------------------

def markdown(doc):
    lines = ["# Query-directory listing latency", ""]
    c = doc["config"]
    if doc["mode"] == "plain-test":
        ns = "no namespace (plain directory self-test)"
    elif doc["create_s"] is None:
        ns = "existing namespace (--skip-create)"
    else:
        ns = "namespace of %s files (%d dirs x %d) created through the mount in %.1f s" % (
            "{:,}".format(c["dirs"] * c["files_per_dir"]), c["dirs"], c["files_per_dir"],
            doc["create_s"])
    lines.append("%s; mode %s; %s; listed `%s` (expect %d entries); %d warm-up + %d timed "
                 "listings." % (doc["timestamp"], doc["mode"], ns, doc["query_path"],
                                c["matches"], c["warmup"], c["iterations"]))
    lines.append("Host: %s, %s CPUs. Load average before: %s; after: %s." % (
        doc["host"]["kernel"], doc["host"]["cpus"], doc["loadavg_before"], doc["loadavg_after"]))
    lines.append("")
    lines.append("| measurement | n | median ms | p90 ms | min ms | max ms |")
    lines.append("|---|---|---|---|---|---|")
    for key, label in (("listdir", "os.listdir (opendir+readdir), in-process"),
                       ("scandir_lstat", "os.scandir + lstat of each entry (≈ ls -l work)"),
                       ("ls_process", "`ls` process (fork+exec included)"),
                       ("ls_l_process", "`ls -l` process"),
                       ("true_process", "`true` process (spawn cost, for reference)")):
        s = doc["timings"].get(key)
        if s:
            lines.append("| %s | %d | %.3f | %.3f | %.3f | %.3f |" % (
                label, s["n"], s["median_ms"], s["p90_ms"], s["min_ms"], s["max_ms"]))
    lines.append("")
    v = doc["verification"]
    lines.append("Entries: %s (expected %d); first listing after creation had %s; targets %s." % (
        ", ".join(str(x) for x in sorted(v["counts_seen"])), c["matches"], v["first_count"],
        v["targets"]))
    med = doc["timings"]["listdir"]["median_ms"]
    lines.append("")
    lines.append("Target (docs/architecture.md §11) warm listing ≤ %.0f ms: median %.3f ms — "
                 "**%s**%s." % (
        TARGET_MS, med, "met" if doc["target"]["met"] else "NOT met",
        "" if doc["mode"] != "plain-test" else " (plain directory: a self-test, not the budget)"))
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("usage:", 1)[1])
    p.add_argument("mnt", nargs="?", help="a mounted Propeller mount")
    p.add_argument("--propeller-cmd", help="mount command template (mounts a fresh mount)")
    p.add_argument("--plain-test", action="store_true",
                   help="self-test on a plain directory (no mount, no namespace)")
    p.add_argument("--work-dir", help="work directory for --propeller-cmd / --plain-test "
                   "(default: fresh under $PROPELLER_FUSE_BENCH_DIR or /var/tmp)")
    p.add_argument("--mount-timeout", type=int, default=30)
    p.add_argument("--namespace", default="qdir-bench",
                   help="directory under MNT holding the namespace (default qdir-bench)")
    p.add_argument("--dirs", type=int, default=140)
    p.add_argument("--files-per-dir", type=int, default=1000)
    p.add_argument("--matches", type=int, default=100)
    p.add_argument("--match-size", type=int, default=777777)
    p.add_argument("--query", help="query component (default ?size=MATCH_SIZE)")
    p.add_argument("--scope", choices=["mount", "namespace"], default="mount",
                   help="query directory at MNT/?.. (default) or MNT/NAMESPACE/?..")
    p.add_argument("--list-dir", help="time this directory instead of the query directory "
                   "(a relative path is taken under the mount)")
    p.add_argument("--expect", type=int, help="expected entries (default MATCHES)")
    p.add_argument("--skip-create", action="store_true", help="reuse an existing namespace")
    p.add_argument("--no-verify-targets", action="store_true",
                   help="do not check that entries resolve to the distinctive files")
    p.add_argument("--settle-timeout", type=float, default=30.0,
                   help="seconds to wait for the listing to reach the expected count")
    p.add_argument("--threads", type=int, default=4, help="threads creating the namespace")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iterations", type=int, default=50)
    p.add_argument("--process-iterations", type=int, default=10,
                   help="timed `ls` / `ls -l` processes (default 10)")
    p.add_argument("--cleanup", action="store_true",
                   help="delete the namespace afterwards (always done for a mount we made)")
    p.add_argument("--results", default=os.path.join(REPO, "bench", "results"))
    a = p.parse_args()

    modes = sum(bool(x) for x in (a.mnt, a.propeller_cmd, a.plain_test))
    if modes != 1:
        p.error("give exactly one of MNT, --propeller-cmd, --plain-test")
    expect = a.expect if a.expect is not None else a.matches
    query = a.query or "?size=%d" % a.match_size

    mount = None
    work = None
    made_work = False
    interrupted = []

    def on_signal(signum, _frame):
        interrupted.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    try:
        if a.propeller_cmd or a.plain_test:
            if a.work_dir:
                work = os.path.abspath(a.work_dir)
                os.makedirs(work, exist_ok=True)
            else:
                parent = os.environ.get("PROPELLER_FUSE_BENCH_DIR", "/var/tmp")
                work = tempfile.mkdtemp(prefix="propeller-qdir.", dir=parent)
                made_work = True
            if (os.path.realpath(work) + "/").startswith("/work/"):
                p.error("refusing to put benchmark data under /work")
            free = shutil.disk_usage(work).free
            if free < 2 << 30:
                p.error("less than 2 GiB free in %s" % work)

        loadavg_before = open("/proc/loadavg").read().strip()
        create_s = None
        first_count = None
        if a.plain_test:
            mode = "plain-test"
            mnt = work
            qdir = os.path.join(work, "plain")
            os.makedirs(qdir, exist_ok=True)
            for i in range(expect):
                with open(os.path.join(qdir, "m%03d" % i), "wb") as f:
                    f.truncate(a.match_size)
            expected = sorted(os.path.join(qdir, "m%03d" % i) for i in range(expect))
        else:
            if a.propeller_cmd:
                mode = "fresh-mount"
                log("mounting: " + a.propeller_cmd)
                mount = Mount(a.propeller_cmd, work, a.mount_timeout)
                log("mounted " + mount.mnt)
                mnt = mount.mnt
            else:
                mode = "existing-mount"
                mnt = os.path.abspath(a.mnt)
                if not is_mountpoint(mnt):
                    log("warning: %s is not a mount point" % mnt)
            root = os.path.join(mnt, a.namespace)
            if a.skip_create:
                if not os.path.isdir(root) and not a.list_dir:
                    p.error("--skip-create but %s does not exist" % root)
            else:
                if os.path.exists(root):
                    p.error("%s exists; remove it or pass --skip-create" % root)
                log("creating %d x %d files under %s" % (a.dirs, a.files_per_dir, root))
                _, create_s = create_namespace(root, a.dirs, a.files_per_dir, a.matches,
                                               a.match_size, a.threads)
                log("namespace created in %.1f s (%.0f files/s)"
                    % (create_s, a.dirs * a.files_per_dir / create_s))
            expected = expected_paths(os.path.realpath(root), a.dirs, a.files_per_dir, a.matches)
            if a.list_dir:
                qdir = os.path.join(mnt, a.list_dir)  # an absolute --list-dir stays as given
            elif a.scope == "mount":
                qdir = os.path.join(mnt, query)
            else:
                qdir = os.path.join(root, query)

        log("listing %s" % qdir)
        first_count, settled, settle_s = wait_for_count(qdir, expect, a.settle_timeout)
        if settled != expect:
            log("listing has %d entries after %.1f s, expected %d" % (settled, settle_s, expect))
        if a.no_verify_targets or a.list_dir:
            targets = "not checked"
        else:
            got = resolve_entries(qdir)
            targets = ("all %d resolve to the distinctive files" % len(got) if got == expected
                       else "MISMATCH (%d resolved, %d expected, %d in common)"
                       % (len(got), len(expected), len(set(got) & set(expected))))

        timings = {}
        samples, counts = time_listdir(qdir, a.warmup, a.iterations)
        timings["listdir"] = summary_ms(samples)
        timings["listdir"]["samples_us"] = [round(s / 1e3, 1) for s in samples]
        s2, c2 = time_scandir_lstat(qdir, a.warmup, a.iterations)
        timings["scandir_lstat"] = summary_ms(s2)
        counts |= c2
        pi = a.process_iterations
        if pi > 0:
            s3, l3 = time_process(["ls", "-1", "--", qdir], 2, pi)
            timings["ls_process"] = summary_ms(s3)
            s4, l4 = time_process(["ls", "-l", "--", qdir], 2, pi)
            timings["ls_l_process"] = summary_ms(s4)
            timings["true_process"] = summary_ms(time_true(pi))
            counts |= l3
            counts |= {n - 1 for n in l4}  # `ls -l` prints a "total" line first
        loadavg_after = open("/proc/loadavg").read().strip()

        ok_count = counts == {expect}
        ok_targets = targets.startswith("all") or targets == "not checked"
        med = timings["listdir"]["median_ms"]
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        doc = {
            "benchmark": "qdir_latency",
            "timestamp": stamp,
            "mode": mode,
            "host": {"kernel": platform.release(), "cpus": os.cpu_count()},
            "config": {"dirs": a.dirs, "files_per_dir": a.files_per_dir, "matches": expect,
                       "match_size": a.match_size, "warmup": a.warmup,
                       "iterations": a.iterations, "process_iterations": pi,
                       "threads": a.threads, "propeller_cmd": a.propeller_cmd,
                       "mount_command": mount.command if mount else None},
            "mount": mnt,
            "query_path": qdir,
            "create_s": create_s,
            "loadavg_before": loadavg_before,
            "loadavg_after": loadavg_after,
            "verification": {"counts_seen": sorted(counts), "expected": expect,
                             "first_count": first_count, "settled_count": settled,
                             "settle_s": settle_s, "targets": targets,
                             "ok": ok_count and ok_targets},
            "timings": timings,
            "target": {"metric": "listdir median_ms", "max_ms": TARGET_MS, "value": med,
                       "met": med <= TARGET_MS and ok_count and ok_targets},
        }
        os.makedirs(a.results, exist_ok=True)
        prefix = "qdir-selftest-" if mode == "plain-test" else "qdir-"
        jpath = os.path.join(a.results, prefix + stamp + ".json")
        mpath = os.path.join(a.results, prefix + stamp + ".md")
        with open(jpath, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        md = markdown(doc)
        with open(mpath, "w") as f:
            f.write(md)
        print(md, end="")
        log("wrote %s and %s" % (jpath, mpath))
        if not (ok_count and ok_targets):
            log("VERIFICATION FAILED: counts seen %s, expected %d; targets: %s"
                % (sorted(counts), expect, targets))
            return 1
        return 0
    except KeyboardInterrupt:
        log("interrupted")
        return 130 if not interrupted else 143
    finally:
        if mount is not None:
            mount.close()
            # Delete the namespace in the backing directory, not through the mount (140 k
            # unlinks through FUSE take a while); the whole fresh mount is disposable.
            if not is_mountpoint(mount.mnt):
                shutil.rmtree(mount.backing, ignore_errors=True)
                shutil.rmtree(mount.data, ignore_errors=True)
        elif a.cleanup and a.mnt and not a.skip_create:
            shutil.rmtree(os.path.join(os.path.abspath(a.mnt), a.namespace), ignore_errors=True)
        if made_work and work and not is_mountpoint(os.path.join(work, "mnt")):
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
