#!/usr/bin/env python3
"""The evaluation harness of issue 6: the Propeller paper's experiments on this machine, side by
side with MariaDB, PostgreSQL, SQLite, find and plocate, in one run. See README.md here.

    sudo bench/eval/run.py            # 138k/487k/1M files (~45 min on 2 shared cores)
    sudo bench/eval/run.py --quick    # 20k-100k files, a few minutes
    sudo bench/eval/run.py --experiments 2,4 --build-dir build

Writes bench/results/eval-<UTC>/ (raw/*.json per run, exp<N>.json per experiment, report.md,
*.png) and bench/results/summary.json. Exits 1 when a system failed, 3 when any search returned
a wrong hit count (the driver checks every search against the data set's brute-force count).
"""
import argparse
import atexit
import datetime
import glob
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
EVAL_DIR = os.environ.get("EVAL_DIR", "/var/tmp/propeller-eval")
RUN_DIR = os.path.join(EVAL_DIR, "run")
PG_PORT = int(os.environ.get("EVAL_PG_PORT", "55432"))
SERVERS = os.path.join(HERE, "servers.sh")
SYSTEMS = ["propeller-cluster", "propeller-engine", "mariadb", "postgres", "sqlite"]

# Sizes and counts of the two modes. Full: the paper's namespace sizes that fit this machine's
# time budget (10 M only with --with-10m: ~20 min more here, loading takes 1-5 min per system).
MODES = {
    "quick": dict(search_sizes=["20k", "50k", "100k"], big_sizes=["100k"], static_sizes=["20k", "50k"],
                  writers="1,4,16", index_updates=1000, mixed_updates=10000, runs=5,
                  dyn_seconds=5, dyn_cap=2000, dyn_preexisting=2000, postmark=["--quick"]),
    "full": dict(search_sizes=["1m"], big_sizes=["1m"], static_sizes=["138k", "487k"],
                 writers="1,2,4,8,16", index_updates=10000, mixed_updates=10000, runs=11,
                 dyn_seconds=60, dyn_cap=15000, dyn_preexisting=10000,
                 postmark=["--files", "18000", "--runs", "3"]),
}
RATES = [1, 10, 100, 1000]

log_file = None


def log(msg):
    line = time.strftime("%H:%M:%S ") + msg
    print(line, flush=True)
    if log_file:
        log_file.write(line + "\n")
        log_file.flush()


def sh(cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, **kw)


def count(s):
    s = s.lower()
    mult = {"k": 1000, "m": 1000000}.get(s[-1], 1)
    return int(float(s.rstrip("km")) * mult)


def drop_caches():
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
        return True
    except OSError:
        return False


def timed(cmd, **kw):
    """Runs cmd; returns (stdout, real_s, user_s, sys_s) of the child (as time(1) would)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, **kw).stdout
    real = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return out, real, r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime


class Harness:
    def __init__(self, args):
        self.args = args
        self.mode = MODES["quick" if args.quick else "full"]
        if args.with_10m and not args.quick:
            self.mode["search_sizes"] = self.mode["search_sizes"] + ["10m"]
            self.mode["big_sizes"] = self.mode["big_sizes"] + ["10m"]
        self.build = os.path.abspath(args.build_dir)
        self.driver = os.path.join(self.build, "bench", "eval", "propeller_eval")
        self.cli = os.path.join(self.build, "client", "propeller")
        stamp = datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
        self.out = args.out or os.path.join(REPO, "bench", "results", "eval-" + stamp)
        self.raw = os.path.join(self.out, "raw")
        os.makedirs(self.raw, exist_ok=True)
        self.failed = []  # this invocation's failures
        self.wrong = False
        self.servers_up = False
        self.mounts = []  # (proc, mnt) to undo at exit

    # ---- set-up and tear-down ---------------------------------------------------------------
    def ensure_built(self):
        if os.path.exists(self.driver) and os.path.exists(self.cli) and not self.args.rebuild:
            return
        log("building propeller_eval and propeller in " + self.build)
        sh(["cmake", "-S", REPO, "-B", self.build, "-G", "Ninja", "-DPROPELLER_BENCH=ON"],
           stdout=subprocess.DEVNULL)
        sh(["ninja", "-C", self.build, "-j2", "propeller_eval", "propeller"])

    def start_servers(self):
        log("starting private MariaDB and PostgreSQL instances under " + EVAL_DIR)
        sh([SERVERS, "start", "all"])
        self.servers_up = True

    def cleanup(self):
        for proc, mnt in self.mounts:
            self.unmount(proc, mnt)
        self.mounts = []
        if self.servers_up:
            subprocess.run([SERVERS, "stop", "all"], check=False)
            self.servers_up = False

    # ---- experiments 1-4 through the C++ driver ---------------------------------------------
    def driver_run(self, system, size, experiments, tag):
        out = os.path.join(self.raw, "%s-%s-%s.json" % (tag, system, size))
        cmd = [self.driver, "run", "--system=" + system, "--files=" + size,
               "--experiments=" + experiments, "--writers=" + self.mode["writers"],
               "--runs=%d" % self.mode["runs"], "--work=" + os.path.join(EVAL_DIR, "work"),
               "--servers-sh=" + SERVERS, "--mariadb-socket=" + os.path.join(RUN_DIR, "mariadb.sock"),
               "--pg-dir=" + RUN_DIR, "--pg-port=%d" % PG_PORT, "--out=" + out,
               "--cluster-transport=" + self.args.cluster_transport]
        updates = self.mode["index_updates"]
        if experiments == "3":
            updates = self.mode["mixed_updates"]
        cmd.append("--updates=%d" % updates)
        log("%s %s: experiments %s" % (system, size, experiments))
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        with open(out + ".log", "w") as f:
            f.write(r.stdout)
        if r.returncode != 0:
            log("FAILED (%d): %s %s\n%s" % (r.returncode, system, size, r.stdout[-2000:]))
            self.failed.append("%s %s exp %s" % (system, size, experiments))
            self.wrong = self.wrong or r.returncode == 3
            return None
        with open(out) as f:
            return json.load(f)

    def exp123(self):
        results = []
        for size in self.mode["search_sizes"]:
            for system in SYSTEMS:
                # Exp 1 and 3 need their own update counts: exp 3 runs in its own pass when the
                # counts differ, on a fresh load (so exp 2's and 3's states are pristine).
                exps = "2"
                if size in self.mode["big_sizes"]:
                    exps = "2,3,1" if self.mode["index_updates"] == self.mode["mixed_updates"] else "2,1"
                doc = self.driver_run(system, size, exps, "exp123")
                if doc:
                    results.append(doc)
                if size in self.mode["big_sizes"] and "3" not in exps:
                    doc = self.driver_run(system, size, "3", "exp3")
                    if doc:
                        results.append(doc)
        return results

    # ---- experiment 4: static namespace -------------------------------------------------------
    def exp4(self):
        rows = []
        for size in self.mode["static_sizes"]:
            n = count(size)
            root = os.path.join(EVAL_DIR, "tree-%s" % size)
            shutil.rmtree(root, ignore_errors=True)
            log("exp4 %s: creating the tree (sparse files) under %s" % (size, root))
            truth_file = os.path.join(self.raw, "exp4-truth-%s.json" % size)
            t0 = time.time()
            sh([self.driver, "mktree", "--files=" + size, "--root=" + root, "--out=" + truth_file])
            log("exp4 %s: tree created in %.0f s" % (size, time.time() - t0))
            with open(truth_file) as f:
                truth = json.load(f)["truth"]
            rows += self.exp4_find(size, n, root, truth)
            rows += self.exp4_plocate(size, n, root, truth)
            shutil.rmtree(root, ignore_errors=True)
            for system in SYSTEMS:
                doc = self.driver_run(system, size, "4", "exp4")
                if not doc:
                    continue
                for q in doc["exp4"]:
                    rows.append(dict(system=system, files=n, query=q["query"], hits=q["hits"],
                                     expected=q["expected"], recall=q["hits"] / max(1, q["expected"]),
                                     cold=q["cold"], warm=q["warm"],
                                     note="driver process CPU only (server CPU not counted)"
                                     if system in ("mariadb", "postgres", "propeller-cluster") else ""))
        return rows

    def exp4_find(self, size, n, root, truth):
        rows = []
        for query, args in (("size>16m", ["-type", "f", "-size", "+16M"]),
                            ("path~firefox", ["-type", "f", "-path", "*firefox*"])):
            cmd = ["find", root] + args
            dropped = drop_caches()
            out, real, user, system = timed(cmd)
            hits = len(out.splitlines())
            warm = [timed(cmd)[1:] for _ in range(3)]
            med = lambda i: statistics.median(w[i] for w in warm)
            rows.append(dict(system="find", files=n, query=query, hits=hits, expected=truth[query],
                             recall=min(hits, truth[query]) / max(1, truth[query]),
                             cold=dict(real_s=real, user_s=user, sys_s=system, caches_dropped=dropped),
                             warm=dict(real_s=med(0), user_s=med(1), sys_s=med(2), runs=3),
                             note=" ".join(["find"] + args)))
            if hits != truth[query]:
                log("WRONG RESULT: find %s: %d hits, brute force %d" % (query, hits, truth[query]))
                self.wrong = True
        return rows

    def exp4_plocate(self, size, n, root, truth):
        db = os.path.join(EVAL_DIR, "plocate-%s.db" % size)
        # The database covers only this tree, every path visible (no per-user check).
        _, build_s, _, _ = timed(["updatedb", "-U", root, "-o", db, "-l", "no", "--prunepaths", "",
                                  "--prunefs", "", "--prunenames", ""])
        cmd = ["plocate", "-d", db, "firefox"]
        dropped = drop_caches()
        out, real, user, system = timed(cmd)
        warm = [timed(cmd)[1:] for _ in range(3)]
        med = lambda i: statistics.median(w[i] for w in warm)
        paths = out.decode().splitlines()
        files = sum(1 for p in paths if os.path.isfile(p))  # plocate lists directories too
        os.unlink(db)
        return [dict(system="plocate", files=n, query="path~firefox", hits=files,
                     expected=truth["path~firefox"],
                     recall=min(files, truth["path~firefox"]) / max(1, truth["path~firefox"]),
                     cold=dict(real_s=real, user_s=user, sys_s=system, caches_dropped=dropped),
                     warm=dict(real_s=med(0), user_s=med(1), sys_s=med(2), runs=3),
                     note="plocate firefox: %d paths of which %d files; index built by updatedb "
                          "in %.2f s beforehand (a crawl: stale until the next one)"
                          % (len(paths), files, build_s)),
                dict(system="plocate", files=n, query="size>16m", hits=None,
                     expected=truth["size>16m"], recall=None, cold=None, warm=None,
                     note="cannot answer: plocate indexes names only")]

    # ---- experiments 5 and 6: the FUSE mount -------------------------------------------------
    def mount(self, backing, mnt, data):
        ready = os.path.join(os.path.dirname(data), "ready")
        if os.path.exists(ready):
            os.unlink(ready)
        logf = open(os.path.join(self.raw, "exp5-mount.log"), "a")
        proc = subprocess.Popen([self.cli, "mount", backing, mnt, "--data", data, "--ready-file",
                                 ready, "--cache-timeout", "1"], stdout=logf, stderr=logf,
                                start_new_session=True)
        self.mounts.append((proc, mnt))
        deadline = time.time() + 120
        while time.time() < deadline:
            if os.path.exists(ready) and subprocess.run(["mountpoint", "-q", mnt]).returncode == 0:
                return proc
            if proc.poll() is not None:
                raise RuntimeError("propeller mount exited with %s" % proc.returncode)
            time.sleep(0.1)
        raise RuntimeError("propeller mount not ready after 120 s")

    def unmount(self, proc, mnt):
        subprocess.run(["fusermount3", "-u", mnt], check=False, stderr=subprocess.DEVNULL)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            subprocess.run(["umount", "-l", mnt], check=False)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        self.mounts = [(p, m) for p, m in self.mounts if p is not proc]

    def exp5(self):
        base = os.path.join(EVAL_DIR, "exp5")
        shutil.rmtree(base, ignore_errors=True)
        backing, mnt, data, src = (os.path.join(base, d) for d in ("backing", "mnt", "data", "src"))
        for d in (backing, mnt, src):
            os.makedirs(d)
        pre = self.mode["dyn_preexisting"]
        log("exp5: %d pre-existing files in the backing tree (imported at the first mount)" % pre)
        sh([self.driver, "mktree", "--files=%d" % pre, "--root=" + backing,
            "--out=" + os.path.join(self.raw, "exp5-tree.json")], stdout=subprocess.DEVNULL)
        with open(os.path.join(src, "payload"), "wb") as f:
            f.write(os.urandom(4096))
        os.makedirs(os.path.join(backing, "incoming"))
        rows = []
        for rate in RATES:
            seconds = self.mode["dyn_seconds"]
            files = min(rate * seconds, self.mode["dyn_cap"])
            duration = files / rate
            # A fresh mount per rate: the mount keeps an fd per inode the kernel knows, and this
            # machine's hard limit is 20,000 fds (bench/fuse/README.md).
            proc = self.mount(backing, mnt, data)
            try:
                rows.append(self.exp5_rate(mnt, src, rate, files, duration))
            finally:
                self.unmount(proc, mnt)
            r = rows[-1]
            log("exp5 rate %d/s: %d files in %.1f s, %d queries, min recall %.4f, median %.2f ms"
                % (rate, r["copied"], r["copy_s"], r["queries"], r["min_recall"], r["latency_ms_p50"]))
        shutil.rmtree(base, ignore_errors=True)
        return rows

    def exp5_rate(self, mnt, src, rate, files, duration):
        prefix = "evalcopy-r%d_" % rate
        # The copier logs to a file: thousands of lines through a pipe nobody reads until it
        # exits would fill the pipe and block it.
        copy_log = os.path.join(src, "copied-%d.txt" % rate)
        copier = subprocess.Popen(
            [sys.executable, "-c", COPIER, os.path.join(src, "payload"),
             os.path.join(mnt, "incoming"), prefix, str(rate), str(files), copy_log])
        qdir = os.path.join(mnt, "?name~" + prefix)
        queries = []
        pattern = re.compile(re.escape(prefix) + r"(\d+)\.dat")
        while copier.poll() is None:
            t0 = time.monotonic()
            names = os.listdir(qdir)
            t1 = time.monotonic()
            got = set()
            for name in names:
                m = pattern.search(name)
                if m:
                    got.add(int(m.group(1)))
            queries.append((t0, t1, got))
        if copier.wait() != 0:
            raise RuntimeError("copier failed")
        with open(copy_log) as f:
            out = f.read()
        closed = {}
        for line in out.splitlines():
            k, t = line.split()
            closed[int(k)] = float(t)
        times = sorted(closed.values())
        recalls, missing_total, lat = [], 0, []
        for t0, t1, got in queries:
            expected = {k for k, t in closed.items() if t < t0}
            lat.append((t1 - t0) * 1e3)
            if not expected:
                continue
            missing = expected - got
            missing_total += len(missing)
            recalls.append(1 - len(missing) / len(expected))
        # One last query after the copier finished: every file must be there.
        final = {int(m.group(1)) for m in map(pattern.search, os.listdir(qdir)) if m}
        final_recall = len(final & set(closed)) / max(1, len(closed))
        return dict(rate=rate, target_files=files, copied=len(closed),
                    copy_s=(times[-1] - times[0]) if times else 0,
                    achieved_rate=(len(times) - 1) / max(1e-9, times[-1] - times[0]) if len(times) > 1 else 0,
                    queries=len(queries), queries_with_expectation=len(recalls),
                    min_recall=min(recalls) if recalls else 1.0,
                    mean_recall=statistics.mean(recalls) if recalls else 1.0,
                    missing_total=missing_total, final_recall=final_recall,
                    latency_ms_p50=statistics.median(lat) if lat else 0,
                    latency_ms_p90=sorted(lat)[int(0.9 * (len(lat) - 1))] if lat else 0,
                    latency_ms_max=max(lat) if lat else 0)

    def exp6(self):
        # The mount's default I/O mode, kernel passthrough (not --writeback, which turns it
        # off and measured 0.76x of passthrough_ll against 0.90x: bench/fuse/README.md).
        cmd_tmpl = (self.cli + " mount {backing} {mnt} --data {data} --ready-file {ready} "
                    "--cache-timeout 86400")
        before = set(glob.glob(os.path.join(self.raw, "postmark-*.json")))
        cmd = [os.path.join(REPO, "bench", "fuse", "postmark.sh")] + self.mode["postmark"] + [
            "--systems", "ext4,passthrough_ll,propeller", "--propeller-cmd", cmd_tmpl,
            "--results", self.raw]
        log("exp6: " + " ".join(cmd))
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        with open(os.path.join(self.raw, "exp6-postmark.log"), "w") as f:
            f.write(r.stdout)
        new = sorted(set(glob.glob(os.path.join(self.raw, "postmark-*.json"))) - before)
        if r.returncode != 0 or not new:
            log("FAILED: postmark.sh (%d)\n%s" % (r.returncode, r.stdout[-2000:]))
            self.failed.append("exp6 postmark")
            if not new:
                return None
        with open(new[-1]) as f:
            return json.load(f)

    # ---- the whole run ---------------------------------------------------------------------------
    def run(self):
        exps = [int(e) for e in self.args.experiments.split(",")]
        meta = dict(mode="quick" if self.args.quick else "full", started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    experiments=exps, mode_config=self.mode, host=os.uname().nodename,
                    kernel=os.uname().release, cpus=os.cpu_count(),
                    cluster_transport=self.args.cluster_transport,
                    loadavg_start=open("/proc/loadavg").read().strip())
        self.ensure_built()
        if any(e in exps for e in (1, 2, 3, 4)):
            self.start_servers()
        if any(e in exps for e in (1, 2, 3)):
            docs = self.exp123()
            write_json(os.path.join(self.out, "exp123.json"), docs)
        if 4 in exps:
            write_json(os.path.join(self.out, "exp4.json"), self.exp4())
        self.cleanup()
        if 5 in exps:
            try:
                write_json(os.path.join(self.out, "exp5.json"), self.exp5())
            except Exception as e:  # noqa: BLE001 - reported, the other experiments go on
                log("FAILED: exp5: %s" % e)
                self.failed.append("exp5: %s" % e)
            self.cleanup()
        if 6 in exps:
            doc = self.exp6()
            if doc:
                write_json(os.path.join(self.out, "exp6.json"), doc)
        meta.update(finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    loadavg_end=open("/proc/loadavg").read().strip(), failures=self.failed,
                    wrong_results=self.wrong)
        # Re-running some experiments into an existing run directory (--out) keeps the earlier
        # invocations' record; the report lists every invocation.
        meta_path = os.path.join(self.out, "meta.json")
        old = load_json(meta_path)
        if old:
            invocations = old.get("invocations") or [dict(old)]
            meta = dict(old, invocations=invocations + [meta], finished=meta["finished"],
                        loadavg_end=meta["loadavg_end"])
            rerun = set(exps)
            keep = [f for f in old.get("failures", []) if not any(
                f.startswith(p) for e in rerun for p in EXP_PREFIXES.get(e, ()))]
            meta["failures"] = keep + self.failed
            meta["experiments"] = sorted(set(old.get("experiments", [])) | rerun)
            meta["wrong_results"] = old.get("wrong_results", False) or self.wrong
        else:
            meta["invocations"] = [dict(meta)]
        write_json(meta_path, meta)
        # Debian's python3 has python3-matplotlib (install.sh); a pyenv python may not.
        py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        sh([py, os.path.join(HERE, "report.py"), self.out,
            "--summary", os.path.join(REPO, "bench", "results", "summary.json")])
        log("results: " + self.out)
        if self.wrong:
            return 3
        return 1 if self.failed else 0


# The background copier of experiment 5 (a separate process, as in the paper): copies the
# payload to DIR/PREFIX<k>.dat at RATE files/s and writes "k <CLOCK_MONOTONIC after close>" lines
# to LOG at the end.
COPIER = r"""
import os, sys, time
src, dst, prefix, rate, n, log = sys.argv[1:4] + [float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]]
payload = open(src, 'rb').read()
t0 = time.monotonic() + 0.2
out = []
for k in range(n):
    wait = t0 + k / rate - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    with open(os.path.join(dst, '%s%d.dat' % (prefix, k)), 'wb') as f:
        f.write(payload)
    out.append('%d %.9f' % (k, time.monotonic()))
with open(log, 'w') as f:
    f.write('\n'.join(out) + '\n')
"""


# The prefixes of the failure messages of each experiment (for merging re-runs).
EXP_PREFIXES = {5: ("exp5",), 6: ("exp6",)}


def load_json(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small data, minutes")
    p.add_argument("--with-10m", action="store_true", help="also 10 M files (experiments 1-3)")
    p.add_argument("--experiments", default="1,2,3,4,5,6")
    p.add_argument("--cluster-transport", choices=["ipc", "tcp"], default="ipc",
                   help="how the cluster's client and daemons talk: unix sockets (default, as the "
                        "databases are reached) or loopback TCP")
    p.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    p.add_argument("--rebuild", action="store_true", help="run ninja even if the binaries exist")
    p.add_argument("--out", help="results directory (default bench/results/eval-<UTC>)")
    p.add_argument("--install", action="store_true", help="run install.sh first")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("run.py: needs root (drop_caches, private database servers, FUSE mounts)")
    if args.install:
        sh([os.path.join(HERE, "install.sh")])
    h = Harness(args)
    global log_file
    log_file = open(os.path.join(h.out, "run.log"), "a")
    atexit.register(h.cleanup)

    def on_signal(signum, _frame):
        h.cleanup()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sys.exit(h.run())


if __name__ == "__main__":
    main()
