#!/usr/bin/env bash
# The ACG a real `make` of git leaves, measured on a Propeller mount (docs/capture.md): how
# many edges, how many producers `git-http-backend` gets, how many edges come from make's own
# reads (Makefile, config.mak.uname), whether command-list.txt -> command-list.h (a
# grandchild's read) is there, and how many vertices are directories or deleted files.
#
# usage: bench/acg/git_build_acg.sh PROPELLER_BIN GIT_REPO [LABEL]
#   PROPELLER_BIN  the propeller binary to mount with (compare two builds: run twice)
#   GIT_REPO       a git repository of git's sources (a bare one is fine: `git archive HEAD`)
#   LABEL          a name for the output (default: the binary's directory name)
# Builds with `make -j2 NO_CURL=1 NO_GETTEXT=1 NO_TCLTK=1 NO_PERL=1 NO_PYTHON=1 all` (needs
# gcc, make, zlib1g-dev, libssl-dev, libexpat1-dev). Prints one line of JSON with the counts and
# keeps `acg export --json` in /tmp/propeller-git-acg-LABEL.json. Needs root and /dev/fuse.
set -euo pipefail
bin="$(realpath "$1")"; repo="$2"; label="${3:-$(basename "$(dirname "$bin")")}"
work="$(mktemp -d /var/tmp/propeller-git-acg.XXXXXX)"
mnt="$work/mnt"
cleanup() {
  if mountpoint -q "$mnt" 2>/dev/null; then fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"; fi
  [[ -n "${mount_pid:-}" ]] && wait "$mount_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/backing/git" "$mnt"
git --git-dir="$repo" archive HEAD | tar -x -C "$work/backing/git"
"$bin" mount "$work/backing" "$mnt" --data "$work/data" --ready-file "$work/ready" \
  > "$work/mount.log" 2>&1 &
mount_pid=$!
for _ in $(seq 300); do [[ -s "$work/ready" ]] && mountpoint -q "$mnt" && break; sleep 0.2; done
mountpoint -q "$mnt" || { cat "$work/mount.log" >&2; exit 1; }
t0=$(date +%s)
(cd "$mnt/git" && make -j2 NO_CURL=1 NO_GETTEXT=1 NO_TCLTK=1 NO_PERL=1 NO_PYTHON=1 all) \
  > "$work/make.log" 2>&1 || { tail -30 "$work/make.log" >&2; exit 1; }
t1=$(date +%s)
sleep 5  # edges of exited processes are sent within a flush interval
out="/tmp/propeller-git-acg-$label.json"
(cd "$mnt/git" && "$bin" acg export --json) > "$out"
python3 - "$out" "$mnt" "$work/backing" "$label" "$((t1 - t0))" <<'PY'
import json, os, sys
path, mnt, backing, label, secs = sys.argv[1:]
g = json.load(open(path))
edges = [(e["src"], e["dst"], e["weight"]) for a in g["acgs"] for e in a["edges"]]
def backing_of(p):
    return backing + p[len(mnt):] if p.startswith(mnt) else None
def is_dir(p):
    b = backing_of(p)
    return b is not None and os.path.isdir(b)
dangling = sum(1 for s, d, _ in edges if s.startswith("(volume") or d.startswith("(volume"))
dirs = {v for s, d, _ in edges for v in (s, d) if is_dir(v)}
dir_edges = sum(1 for s, d, _ in edges if s in dirs or d in dirs)
make_reads = sum(1 for s, d, _ in edges if s.endswith("/Makefile") or s.endswith("/config.mak.uname"))
backend = sum(1 for s, d, _ in edges if d.endswith("/git/git-http-backend"))
cmdlist = any(s.endswith("/command-list.txt") and d.endswith("/command-list.h") for s, d, _ in edges)
print(json.dumps({"label": label, "make_seconds": int(secs), "edges": len(edges),
                  "git_http_backend_producers": backend,
                  "edges_from_make_own_reads": make_reads,
                  "command_list_txt_to_h": cmdlist,
                  "directory_vertices": len(dirs), "edges_touching_directories": dir_edges,
                  "edges_with_deleted_vertices": dangling}))
PY
