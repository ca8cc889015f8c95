#!/usr/bin/env bash
# Builds libfuse's `passthrough_ll` example (shipped by libfuse3-dev as documentation) into a
# build directory, so the FUSE benchmarks can compare Propeller's mount against the reference
# low-level passthrough. The source stays where Debian put it: it is never copied into the repo.
#
# usage: bench/fuse/build_passthrough_ll.sh [BUILD_DIR]
#   BUILD_DIR   where the binary goes (default: ${TMPDIR:-/tmp}/propeller-fuse-bench)
# environment:
#   FUSE_EXAMPLES  directory holding passthrough_ll.c[.gz] and passthrough_helpers.h[.gz]
#                  (default: /usr/share/doc/libfuse3-dev/examples)
#   CC             C compiler (default: cc)
# Prints the absolute path of the binary on stdout (diagnostics go to stderr). Idempotent: does
# nothing when the binary is newer than its sources.
set -euo pipefail

build="${1:-${TMPDIR:-/tmp}/propeller-fuse-bench}"
examples="${FUSE_EXAMPLES:-/usr/share/doc/libfuse3-dev/examples}"
cc="${CC:-cc}"

# Returns the path of FILE or FILE.gz in the examples directory (Debian compresses large docs).
find_source() {
  local name="$1"
  if [[ -f "$examples/$name" ]]; then
    echo "$examples/$name"
  elif [[ -f "$examples/$name.gz" ]]; then
    echo "$examples/$name.gz"
  else
    echo "build_passthrough_ll: $examples/$name(.gz) not found; install libfuse3-dev" >&2
    return 1
  fi
}

main_src="$(find_source passthrough_ll.c)"
helpers_src="$(find_source passthrough_helpers.h)"

if ! pkg-config --exists fuse3; then
  echo "build_passthrough_ll: pkg-config does not know fuse3; install libfuse3-dev" >&2
  exit 1
fi

mkdir -p "$build/passthrough_ll-src"
build="$(cd "$build" && pwd)"
bin="$build/passthrough_ll"

if [[ -x "$bin" && "$bin" -nt "$main_src" && "$bin" -nt "$helpers_src" ]]; then
  echo "$bin"
  exit 0
fi

# Unpacks (or copies) one source into the private source directory of the build tree.
stage() {
  local src="$1" dest="$2"
  if [[ "$src" == *.gz ]]; then
    gzip -dc "$src" >"$dest.tmp"
  else
    cp "$src" "$dest.tmp"
  fi
  mv "$dest.tmp" "$dest"
}
stage "$main_src" "$build/passthrough_ll-src/passthrough_ll.c"
stage "$helpers_src" "$build/passthrough_ll-src/passthrough_helpers.h"

# -O2 as libfuse's own meson build compiles its examples; warnings are not ours to fix.
# shellcheck disable=SC2046  # pkg-config output is meant to be word-split
"$cc" -O2 -o "$bin.tmp" "$build/passthrough_ll-src/passthrough_ll.c" \
  $(pkg-config --cflags fuse3) $(pkg-config --libs fuse3) >&2
mv "$bin.tmp" "$bin"
echo "build_passthrough_ll: built $bin from $main_src" >&2
echo "$bin"
