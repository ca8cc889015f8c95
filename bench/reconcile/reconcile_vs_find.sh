#!/usr/bin/env bash
# Reconcile time against `find` on the same tree (docs/reconcile.md).
#   usage: bench/reconcile/reconcile_vs_find.sh PROPELLER_BIN [FILES] [WORKDIR]
# Builds a tree of FILES files (default 100000) in 100-file directories, imports it into a
# fresh `propeller up`, changes 1% of the files (a third rewritten, a third deleted, a third
# new), then times, each three times with a warm cache, alternating: `find TREE` (names only),
# `find TREE -printf '%s %T@\n'` (an lstat per entry, as reconcile needs), and
# `propeller import TREE` of the already imported tree (a reconcile; the first run after the
# change sends the differences, later ones find nothing to send). Prints medians, and the peak
# memory (maximum resident set) of one more reconcile when GNU time is installed.
set -euo pipefail
bin="$(realpath "$1")"; files="${2:-100000}"; work="${3:-/tmp/propeller-reconcile-bench}"
rm -rf "$work"; mkdir -p "$work/tree"
cleanup() { [ -n "${up_pid:-}" ] && kill "$up_pid" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT
python3 - "$work/tree" "$files" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, "d%04d" % (i // 100))
    if i % 100 == 0: os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%d.dat" % i), "wb") as f: f.write(b"x" * (i % 4096))
PY
m="ipc://$work/master.sock"
"$bin" up --data "$work/data" --listen "$m" --node-listen "ipc://$work/node.sock" \
    --ready-file "$work/ready" --log-level warning > "$work/up.log" 2>&1 &
up_pid=$!
for _ in $(seq 300); do [ -e "$work/ready" ] && break; sleep 0.1; done
"$bin" --master "$m" import "$work/tree" --quiet > /dev/null
python3 - "$work/tree" "$files" <<'PY'
import os, sys, random
root, n = sys.argv[1], int(sys.argv[2])
random.seed(7)
for k, i in enumerate(random.sample(range(n), n // 100)):
    p = os.path.join(root, "d%04d" % (i // 100), "f%d.dat" % i)
    if k % 3 == 0: open(p, "ab").write(b"more")
    elif k % 3 == 1: os.unlink(p)
    else: open(os.path.join(root, "d%04d" % (i // 100), "new%d" % i), "wb").write(b"n")
PY
timeit() { local s e; s=$(date +%s.%N); "$@" > /dev/null; e=$(date +%s.%N); echo "$e - $s" | bc; }
median() { sort -n | sed -n 2p; }
find "$work/tree" > /dev/null  # warm
first=$(timeit "$bin" --master "$m" import "$work/tree")
"$bin" --master "$m" import "$work/tree" | tail -1
f=(); fp=(); r=()
for _ in 1 2 3; do
  f+=("$(timeit find "$work/tree")")
  fp+=("$(timeit find "$work/tree" -printf '%s %T@\n')")
  r+=("$(timeit "$bin" --master "$m" import "$work/tree")")
done
fm=$(printf '%s\n' "${f[@]}" | median); fpm=$(printf '%s\n' "${fp[@]}" | median)
rm_=$(printf '%s\n' "${r[@]}" | median)
echo "files=$files  reconcile after a 1% change: ${first}s"
echo "median of 3: find ${fm}s  find -printf(size,mtime) ${fpm}s  reconcile (nothing changed) ${rm_}s"
if [ -x /usr/bin/time ]; then
  /usr/bin/time -f "reconcile peak memory: %M KB" "$bin" --master "$m" import "$work/tree" > /dev/null
fi
