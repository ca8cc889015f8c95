#!/usr/bin/env bash
# Runs the pjdfstest POSIX conformance suite (the C/sh one from github.com/pjd/pjdfstest, driven by
# Perl's `prove`) against up to three targets, one after the other, each in a fresh directory:
#   ext4            a plain directory on the local ext4 file system (the baseline)
#   propeller       the Propeller mount (`propeller mount BACKING MNT --data DATA`, embedded
#                   service) over a fresh ext4 BACKING directory
#   passthrough_ll  libfuse's passthrough_ll example, `-o source=BACKING,allow_other,
#                   default_permissions` (the same two options Propeller mounts with), over a
#                   fresh ext4 BACKING directory
# Every BACKING sits at a deliberately long, realistic path (--backing-path) so failures a mount
# has only because it rebuilds absolute backing paths (ENAMETOOLONG near PATH_MAX) show up.
# The suite runs as root from inside the directory under test: `cd DIR && prove -rv TESTS`.
# Mounts are set up and torn down here; an EXIT trap unmounts whatever this script mounted and
# stops the daemons it started (by pid), also on error or Ctrl-C.
#
# usage: bench/posix/run_pjdfstest.sh [options] PROPELLER_BIN PJDFSTEST_DIR
#   PROPELLER_BIN   the propeller client binary (copy build/client/propeller somewhere stable
#                   first if others rebuild the tree while this runs)
#   PJDFSTEST_DIR   a pjdfstest checkout; built in place (autoreconf -ifs && ./configure &&
#                   make pjdfstest) if PJDFSTEST_DIR/pjdfstest is missing. Needs autoconf,
#                   automake, a C compiler, openssl (the tests name files with it) and prove.
# options:
#   --out DIR           logs and summaries (default /tmp/posix/run-<UTC stamp>); per target
#                       OUT/<target>/{prove.log,summary.txt,failures.tsv,daemon.log}, and
#                       OUT/summary.md with the counts and the mount-only failures
#   --work-dir DIR      backing directories, mount points and data dirs (default OUT/work);
#                       must be on ext4 and outside /work
#   --backing-path REL  path below WORK-DIR/<target>/ of the backing (and of the ext4 test)
#                       directory (default srv/projects/storage-team/conformance/posix/backing)
#   --targets LIST      comma list of ext4,propeller,passthrough_ll (default: all three)
#   --tests LIST        comma list of test dirs/files relative to PJDFSTEST_DIR/tests, e.g.
#                       "open,rename/09.t" (default: the whole suite)
#   --tests-for T=LIST  a different --tests list for target T only (repeatable), e.g. to sample
#                       the suite on passthrough_ll: --tests-for passthrough_ll=open,unlink
#   --passthrough-ll BIN  passthrough_ll binary (default: built by bench/fuse/build_passthrough_ll.sh
#                       into WORK-DIR/passthrough_ll-build)
#   --mount-timeout S   seconds to wait for a mount to come up (default 60)
#   --propeller-arg A   extra argument for `propeller mount` (repeatable), e.g. --no-passthrough
#   --keep-work         keep WORK-DIR (the backing trees) after the run
#   --summarize-only OUT  only rewrite the summaries of an earlier run's OUT (no mounts, no tests;
#                       the positional arguments are then not needed)
# Exit status: 0 when every requested target ran (test failures are results, not errors),
# 1 on a setup error, 2 on a usage error.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

out=""
work=""
backing_rel="srv/projects/storage-team/conformance/posix/backing"
targets="ext4,propeller,passthrough_ll"
tests_all=""
declare -A tests_for=()
pt_bin=""
mount_timeout=60
keep_work=0
propeller_args=()

log() { echo "run_pjdfstest: $*" >&2; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2; }

# Summaries: per target summary.txt + failures.tsv, and OUT/summary.md comparing the mounts with
# ext4 (failures keyed by test file and subtest number; a file whose plan differs between two
# targets is flagged, since its subtest numbers need not line up).
summarize() {
  python3 - "$@" <<'PY'
import os, re, sys
from collections import OrderedDict

out, targets = sys.argv[1], sys.argv[2:]
header = re.compile(r"^(/\S+\.t) \.+ ?$")
plan_re = re.compile(r"^1\.\.(\d+)")
res_re = re.compile(r"^(not ok|ok) (\d+)(.*)$")
name_re = re.compile(r"pjdfstest_[0-9a-f]{32}")
long_hex = re.compile(r"[0-9a-f]{40,}(/[0-9a-f]+)*")

def parse(path):
    files = OrderedDict()
    cur = None
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = header.match(line)
            if m:
                cur = m.group(1).split("/tests/", 1)[-1]
                files[cur] = {"plan": None, "ok": set(), "fail": OrderedDict(), "todo": set()}
                continue
            if cur is None:
                continue
            m = plan_re.match(line)
            if m and files[cur]["plan"] is None:
                files[cur]["plan"] = int(m.group(1))
                continue
            m = res_re.match(line)
            if m:
                n, rest = int(m.group(2)), m.group(3)
                if "# TODO" in rest or "# SKIP" in rest:
                    files[cur]["todo"].add(n)
                if m.group(1) == "ok" or "# TODO" in rest:
                    files[cur]["ok"].add(n)
                else:
                    msg = rest.lstrip(" -")
                    msg = name_re.sub("pjdfstest_<name>", msg)
                    msg = long_hex.sub("<long path>", msg)
                    files[cur]["fail"][n] = msg
    for d in files.values():
        seen = d["ok"] | set(d["fail"])
        if d["plan"] is not None:
            for n in range(1, d["plan"] + 1):
                if n not in seen:
                    d["fail"][n] = "(missing: the test script stopped before this subtest)"
        else:
            d["fail"][0] = "(no plan: the test script did not run)"
    return files

def ranges(nums):
    nums = sorted(nums); outl = []; i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        outl.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ",".join(outl)

res = {}
for t in targets:
    log = os.path.join(out, t, "prove.log")
    if not os.path.exists(log):
        continue
    files = parse(log)
    res[t] = files
    info = open(os.path.join(out, t, "run.info")).read().split()
    nsub = sum(d["plan"] or 0 for d in files.values())
    ffiles = [k for k, d in files.items() if d["fail"]]
    nfail = sum(len(d["fail"]) for d in files.values())
    with open(os.path.join(out, t, "failures.tsv"), "w") as f:
        f.write("file\tsubtest\tmessage\n")
        for k, d in files.items():
            for n, msg in d["fail"].items():
                f.write(f"{k}\t{n}\t{msg}\n")
    with open(os.path.join(out, t, "summary.txt"), "w") as f:
        f.write(" ".join(info) + "\n")
        f.write(f"test files: {len(files)}  subtests: {nsub}\n")
        f.write(f"failing files: {len(ffiles)}  failing subtests: {nfail}\n\n")
        for k in ffiles:
            d = files[k]
            f.write(f"{k}  ({len(d['fail'])}/{d['plan']} failed: {ranges(d['fail'])})\n")
            for n, msg in d["fail"].items():
                f.write(f"    not ok {n} {msg}\n")

md = ["# pjdfstest results", "", "| target | test files | subtests | failing files | failing subtests | seconds |",
      "|---|---:|---:|---:|---:|---:|"]
for t, files in res.items():
    info = dict(kv.split("=", 1) for kv in open(os.path.join(out, t, "run.info")).read().split() if "=" in kv)
    md.append(f"| {t} | {len(files)} | {sum(d['plan'] or 0 for d in files.values())} | "
              f"{sum(1 for d in files.values() if d['fail'])} | {sum(len(d['fail']) for d in files.values())} | "
              f"{info.get('seconds', '?')} |")
for t, files in res.items():
    ffiles = [k for k, d in files.items() if d["fail"]]
    md += ["", f"## {t}: failing test files ({len(ffiles)})", ""]
    md += [f"- `{k}` {len(files[k]['fail'])}/{files[k]['plan']}: {ranges(files[k]['fail'])}" for k in ffiles] or ["(none)"]
if "ext4" in res:
    base = res["ext4"]
    for t, files in res.items():
        if t == "ext4":
            continue
        differ = [k for k, d in files.items() if k in base and d["plan"] != base[k]["plan"]]
        if differ:
            md += ["", f"## {t}: test files whose subtest count differs from ext4", "",
                   "(pjdfstest picks subtests by file-system type, from `df -T`: e.g. rename/22.t, "
                   "rename's ctime update, runs only on EXT4/UFS/ZFS and is one `ok` elsewhere)", ""]
            md += [f"- `{k}`: {files[k]['plan']} here, {base[k]['plan']} on ext4" for k in differ]
        md += ["", f"## {t}: failures ext4 does not have", "",
               "(only test files run on both targets; subtests keyed by number)", ""]
        total = 0
        for k, d in files.items():
            if k not in base:
                continue
            extra = [n for n in d["fail"] if n not in base[k]["fail"]]
            if not extra:
                continue
            total += len(extra)
            flag = "" if d["plan"] == base[k]["plan"] else f" (plan {d['plan']} vs ext4 {base[k]['plan']})"
            md.append(f"- `{k}` {len(extra)}/{d['plan']}: {ranges(extra)}{flag}")
            for n in extra:
                md.append(f"    - {n}: {d['fail'][n]}")
        md.append("")
        md.append(f"total: {total} subtests")
with open(os.path.join(out, "summary.md"), "w") as f:
    f.write("\n".join(md) + "\n")
print("\n".join(md[:4 + len(res)]))
PY
}

positional=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --work-dir) work="$2"; shift 2 ;;
    --backing-path) backing_rel="${2#/}"; shift 2 ;;
    --targets) targets="$2"; shift 2 ;;
    --tests) tests_all="$2"; shift 2 ;;
    --tests-for) tests_for["${2%%=*}"]="${2#*=}"; shift 2 ;;
    --passthrough-ll) pt_bin="$2"; shift 2 ;;
    --mount-timeout) mount_timeout="$2"; shift 2 ;;
    --propeller-arg) propeller_args+=("$2"); shift 2 ;;
    --keep-work) keep_work=1; shift ;;
    --summarize-only)
      # Re-summarize the logs of an earlier run: OUT/<target>/{prove.log,run.info}.
      mapfile -t done_targets < <(cd "$2" && for t in ext4 propeller passthrough_ll; do [[ -f $t/prove.log ]] && echo "$t"; done)
      summarize "$(realpath "$2")" "${done_targets[@]}"
      exit 0 ;;
    -h|--help) usage ;;
    -*) log "unknown option $1"; usage ;;
    *) positional+=("$1"); shift ;;
  esac
done
[[ ${#positional[@]} -eq 2 ]] || usage
propeller="$(realpath "${positional[0]}")"
pjd="$(realpath "${positional[1]}")"

[[ "$(id -u)" -eq 0 ]] || { log "must run as root (pjdfstest switches users; the mounts use allow_other)"; exit 1; }
for t in ${targets//,/ }; do
  case "$t" in ext4|propeller|passthrough_ll) ;; *) log "unknown target '$t'"; exit 2 ;; esac
done
for tool in prove openssl fusermount3 mountpoint python3; do
  command -v "$tool" >/dev/null || { log "$tool not found"; exit 1; }
done
[[ -d "$pjd/tests" ]] || { log "$pjd/tests not found: not a pjdfstest checkout"; exit 1; }
if [[ ",$targets," == *,propeller,* && ! -x "$propeller" ]]; then
  log "$propeller is not executable"; exit 1
fi

if [[ ! -x "$pjd/pjdfstest" ]]; then
  log "building pjdfstest in $pjd"
  (cd "$pjd" && autoreconf -ifs && ./configure && make pjdfstest) >&2
fi

stamp="$(date -u +%Y%m%dT%H%M%SZ)"
out="${out:-/tmp/posix/run-$stamp}"
mkdir -p "$out"
out="$(realpath "$out")"
work="${work:-$out/work}"
mkdir -p "$work"
work="$(realpath "$work")"
[[ "$work" != /work && "$work" != /work/* ]] || { log "--work-dir must be outside /work"; exit 1; }
fstype="$(df -PT "$work" | awk 'NR==2 {print $2}')"
[[ "$fstype" == ext4 ]] || { log "$work is on $fstype, not ext4"; exit 1; }

if [[ ",$targets," == *,passthrough_ll,* && -z "$pt_bin" ]]; then
  pt_bin="$("$repo/bench/fuse/build_passthrough_ll.sh" "$work/passthrough_ll-build")"
fi

# State of the mount currently up, for the EXIT trap.
cur_mnt=""
cur_pid=""
suite_pid=""  # the running prove's session

# Unmounts MNT (if mounted) and waits for daemon PID to exit; kills that pid if it lingers.
teardown() {
  local mnt="$1" pid="$2" i
  if [[ -n "$mnt" ]] && mountpoint -q "$mnt"; then
    fusermount3 -u "$mnt" || fusermount3 -uz "$mnt" || true
  fi
  if [[ -n "$pid" ]]; then
    for ((i = 0; i < 300; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "daemon $pid still running 30 s after unmount; sending SIGTERM"
      kill "$pid" 2>/dev/null || true
      sleep 2
      kill -9 "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  fi
}

cleanup() {
  local rc=$?
  if [[ -n "$suite_pid" ]]; then
    kill -TERM -- "-$suite_pid" 2>/dev/null || true
    sleep 1
    kill -KILL -- "-$suite_pid" 2>/dev/null || true
    wait "$suite_pid" 2>/dev/null || true
  fi
  teardown "$cur_mnt" "$cur_pid"
  cur_mnt=""; cur_pid=""
  if [[ $keep_work -eq 0 && -d "$work" ]]; then
    # Only ever remove trees this script created, and never through a live mount.
    if ! mount | grep -q " on $work/"; then
      rm -rf "$work"
    else
      log "not removing $work: something is still mounted below it"
    fi
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Waits until MNT is a mount point, or fails when daemon PID dies or the timeout passes.
wait_mount() {
  local mnt="$1" pid="$2" i
  for ((i = 0; i < mount_timeout * 10; i++)); do
    mountpoint -q "$mnt" && return 0
    kill -0 "$pid" 2>/dev/null || { log "daemon $pid exited before $mnt came up"; return 1; }
    sleep 0.1
  done
  log "$mnt not mounted after ${mount_timeout}s"
  return 1
}

# Prints the absolute test paths for target T (prove recurses into directories).
test_paths() {
  local list="${tests_for[$1]:-$tests_all}" t
  if [[ -z "$list" ]]; then
    echo "$pjd/tests"
    return
  fi
  for t in ${list//,/ }; do
    [[ -e "$pjd/tests/$t" ]] || { log "no test $pjd/tests/$t"; return 1; }
    echo "$pjd/tests/$t"
  done
}

# Runs the suite in DIR for target T, writing OUT/T/prove.log and the timing.
run_suite() {
  local t="$1" dir="$2" rc=0 start end
  local -a paths
  mapfile -t paths < <(test_paths "$t")
  log "$t: prove -rv over ${#paths[@]} path(s) in $dir"
  start=$(date +%s)
  # prove and its test scripts get their own session (pid = process group id), so that a signal
  # to this script ends them too (cleanup) instead of waiting for the suite to finish.
  setsid bash -c 'cd "$1" && shift && exec prove -rv "$@"' prove "$dir" "${paths[@]}" \
    >"$out/$t/prove.log" 2>&1 &
  suite_pid=$!
  wait "$suite_pid" || rc=$?
  suite_pid=""
  end=$(date +%s)
  printf 'target=%s dir=%s prove_rc=%s seconds=%s tests=%s\n' "$t" "$dir" "$rc" \
    "$((end - start))" "${tests_for[$t]:-${tests_all:-all}}" >"$out/$t/run.info"
  log "$t: done in $((end - start)) s (prove exit $rc)"
}

for t in ${targets//,/ }; do
  mkdir -p "$out/$t"
  base="$work/$t"
  backing="$base/$backing_rel"
  rm -rf "$base"
  mkdir -p "$backing"
  case "$t" in
    ext4)
      run_suite ext4 "$backing"
      ;;
    propeller)
      mnt="$base/mnt"; data="$base/data"
      mkdir -p "$mnt" "$data"; chmod 700 "$data"
      "$propeller" mount "$backing" "$mnt" --data "$data" --ready-file "$base/ready" \
        "${propeller_args[@]}" >"$out/$t/daemon.log" 2>&1 &
      cur_pid=$!; cur_mnt="$mnt"
      wait_mount "$mnt" "$cur_pid"
      for ((i = 0; i < mount_timeout * 10; i++)); do [[ -s "$base/ready" ]] && break; sleep 0.1; done
      run_suite propeller "$mnt"
      teardown "$cur_mnt" "$cur_pid"; cur_mnt=""; cur_pid=""
      ;;
    passthrough_ll)
      mnt="$base/mnt"
      mkdir -p "$mnt"
      "$pt_bin" -f -o source="$backing" -o allow_other -o default_permissions "$mnt" \
        >"$out/$t/daemon.log" 2>&1 &
      cur_pid=$!; cur_mnt="$mnt"
      wait_mount "$mnt" "$cur_pid"
      run_suite passthrough_ll "$mnt"
      teardown "$cur_mnt" "$cur_pid"; cur_mnt=""; cur_pid=""
      ;;
  esac
  printf 'backing=%s\n' "$backing" >>"$out/$t/run.info"
done

summarize "$out" ${targets//,/ }
log "summaries in $out (summary.md, <target>/summary.txt, <target>/failures.tsv)"
