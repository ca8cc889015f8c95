#!/usr/bin/env bash
# The ACG statistics of a real C project built on a Propeller mount (issue 5's report: the
# paper's Table II columns for a causality graph captured from `make`, not a synthetic one).
#
# usage: bench/acg/real_build.sh [--source-package NAME] [--make-args 'ARGS'] [--build DIR]
#   --source-package  a Debian source package with a Makefile build (default lua5.4: 35 C
#                     files -> objects -> liblua.a -> lua, luac); fetched with `apt-get source`
#                     (a deb-src entry for bookworm is added under /etc/apt if none exists)
#   --make-args       what to run in the unpacked tree (default: 'linux -j2', Lua's target)
#   --build DIR       build tree with client/propeller (default: <repo>/build)
# Output: bench/results/acg-<package>-<UTC>.{md,json}: `propeller acg stats` (files, edges,
# total weight, METIS split time, halves, cut weight and %), the make time on the mount, and
# `propeller acg show` of one object file and one binary. Needs root and /dev/fuse.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
package=lua5.4
make_args='linux -j2'
build="$repo/build"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --source-package) package="$2"; shift 2 ;;
    --make-args) make_args="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
P="$build/client/propeller"
[[ -x "$P" ]] || { echo "missing $P: build it first (ninja -C $build propeller)" >&2; exit 2; }

work="$(mktemp -d /var/tmp/propeller-acg-build.XXXXXX)"
mnt="$work/mnt"
cleanup() {
  if mountpoint -q "$mnt" 2>/dev/null; then fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"; fi
  [[ -n "${mount_pid:-}" ]] && wait "$mount_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

if ! grep -rqs '^Types: deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    > /etc/apt/sources.list.d/propeller-bench-src.sources
  apt-get update -qq
fi
mkdir -p "$work/src" "$work/backing" "$mnt"
(cd "$work/src" && apt-get source -qq --download-only "$package" >/dev/null 2>&1)
orig="$(ls "$work"/src/*.orig.tar.* | head -1)"
tar -xf "$orig" -C "$work/backing"
top="$(ls "$work/backing" | head -1)"

"$P" mount "$work/backing" "$mnt" --data "$work/data" --ready-file "$work/ready" \
  > "$work/mount.log" 2>&1 &
mount_pid=$!
for _ in $(seq 150); do [[ -s "$work/ready" ]] && mountpoint -q "$mnt" && break; sleep 0.2; done
mountpoint -q "$mnt" || { cat "$work/mount.log" >&2; exit 1; }
master="$(awk '$1=="master"{print $2}' "$work/ready")"

t0=$(date +%s.%N)
# shellcheck disable=SC2086
(cd "$mnt/$top" && make $make_args) > "$work/make.log" 2>&1 || { tail -20 "$work/make.log" >&2; exit 1; }
t1=$(date +%s.%N)
sleep 4  # edges reach the index when their process exits (checked every 0.5 s), or every 3 s

stamp="$(date -u +%Y%m%dT%H%M%SZ)"
out="$repo/bench/results/acg-$package-$stamp"
obj="$(cd "$mnt/$top" && find . -name '*.o' | sort | head -1)"
bin="$(cd "$mnt/$top" && find . -type f -perm -u+x -newer "$work/ready" ! -name '*.o' ! -name '*.a' | sort | head -1)"
"$P" --master "$master" acg stats --json > "$out.json"
{
  echo "# ACG of \`make $make_args\` of Debian's $package ($(basename "$orig")) on a Propeller mount"
  echo
  echo "$stamp; $(nproc) CPUs; load before the build: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo "make on the mount took $(printf '%.1f' "$(echo "$t1 - $t0" | bc)") s."
  echo "Command: bench/acg/real_build.sh --source-package $package --make-args '$make_args'"
  echo
  echo '```'
  "$P" --master "$master" acg stats
  echo '```'
  echo
  for f in "$obj" "$bin"; do
    [[ -n "$f" ]] || continue
    echo '```'
    "$P" acg show "$mnt/$top/${f#./}" | sed "s|$mnt/||"
    echo '```'
  done
} > "$out.md"
cat "$out.md"
echo "wrote $out.md and $out.json" >&2
