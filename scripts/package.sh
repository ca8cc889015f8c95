#!/usr/bin/env bash
# Builds the Debian packages of a build tree (cpack; cmake/PropellerPackaging.cmake) and tests
# them the way an administrator installs them: a fresh Debian 12 root made here with
# debootstrap, `apt-get install ./propeller_*.deb ...` inside it (so the packages' declared
# dependencies must be enough), then scripts/package/smoke.sh runs the documented commands
# there against the installed files only, and programs built against the installed headers
# with pkg-config and with CMake's find_package(Propeller) run inside it. Run by
# scripts/test.sh after the tests; needs root, debootstrap and access to the Debian mirror.
#   usage: scripts/package.sh [BUILD_DIR]     (default: build)
#   env:   PROPELLER_PACKAGE_MIRROR   Debian mirror (default: this machine's, else deb.debian.org)
#          PROPELLER_KEEP_ROOT=1      keep the test root (its path is printed)
# The packages are left in BUILD_DIR/packages. Exit 0 only when every check passed.
set -euo pipefail
cd "$(dirname "$0")/.."
src="$PWD"
build="$(realpath "${1:-build}")"
[ "$(id -u)" -eq 0 ] || { echo "package.sh: needs root (debootstrap, chroot, FUSE)" >&2; exit 2; }
[ -f "$build/CPackConfig.cmake" ] || { echo "package.sh: $build is not a configured build" >&2; exit 2; }

# Packages install under /usr: the build must be configured for that prefix (the pkg-config
# file and the library directory come from it).
prefix="$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")"
if [ "$prefix" != "/usr" ]; then
  echo "== reconfiguring $build with CMAKE_INSTALL_PREFIX=/usr (was $prefix)"
  cmake -S . -B "$build" -DCMAKE_INSTALL_PREFIX=/usr > /dev/null
  cmake --build "$build" -j "$(nproc)"
fi

echo "== packages"
rm -rf "$build/packages"
(cd "$build" && cpack -G DEB -B "$build/packages" > "$build/packages.log" 2>&1) ||
  { cat "$build/packages.log" >&2; exit 1; }
mapfile -t debs < <(ls "$build"/packages/*.deb)
for d in "${debs[@]}"; do
  echo "$(basename "$d"): $(dpkg-deb -f "$d" Depends)"
done
[ "${#debs[@]}" -ge 2 ] || { echo "package.sh: expected at least propeller and libpropeller-dev" >&2; exit 1; }

mirror="${PROPELLER_PACKAGE_MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror="$(sed -n 's/^URIs: *\(http[^ ]*debian\/*\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)"
  mirror="${mirror:-http://deb.debian.org/debian}"
fi
root="$(mktemp -d /var/tmp/propeller-pkgroot.XXXXXX)"
chmod 0755 "$root"  # apt's _apt user reads its lists in there
cleanup() {
  # Nothing started in the root may outlive the test (it would keep its mounts alive).
  for p in /proc/[0-9]*; do
    if [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ]; then kill -KILL "${p#/proc/}" 2>/dev/null || true; fi
  done
  if [ "${PROPELLER_KEEP_ROOT:-0}" = "1" ]; then echo "package.sh: kept $root"; else rm -rf "$root"; fi
}
trap cleanup EXIT
echo "== a fresh Debian 12 root in $root (debootstrap, $mirror)"
debootstrap --variant=minbase bookworm "$root" "$mirror" > "$build/debootstrap.log" 2>&1 ||
  { tail -20 "$build/debootstrap.log" >&2; exit 1; }
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/tmp/debs" "$root/tmp/smoke"
cp "${debs[@]}" "$root/tmp/debs/"
cp scripts/package/smoke.sh "$root/tmp/smoke/"

# Everything below runs in a private mount namespace: /dev, /proc, /sys and the test's FUSE
# mount inside the root disappear with it, whatever happens.
unshare --mount --propagation private bash -euo pipefail -s "$root" "$src" <<'NS'
root="$1"
src="$2"
mount --rbind /dev "$root/dev"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
echo "== apt-get install ./*.deb in the fresh root"
chroot "$root" apt-get update -q > /dev/null
chroot "$root" sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
  --no-install-recommends /tmp/debs/*.deb' > "$root/tmp/apt.log" 2>&1 ||
  { tail -30 "$root/tmp/apt.log" >&2; exit 1; }
grep -E '^(Setting up|Unpacking) (propeller|libpropeller|python3-propeller)' "$root/tmp/apt.log" | sed 's/^/  /'

echo "== programs built against the installed headers and library only"
# The compilers are this machine's (the same Debian 12 toolchain); every header and library
# comes from the root: pkg-config with the root as its sysroot, CMake with the root's package.
export PKG_CONFIG_SYSROOT_DIR="$root"
export PKG_CONFIG_LIBDIR="$root/usr/lib/x86_64-linux-gnu/pkgconfig"
pkg-config --exists propeller || { echo "propeller.pc not installed" >&2; exit 1; }
echo "  pkg-config propeller: $(pkg-config --modversion propeller); $(pkg-config --cflags --libs propeller)"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror "$src/scripts/package/search_c.c" -o "$root/tmp/smoke/search_c" \
   $(pkg-config --cflags --libs propeller)
mkdir -p "$root/tmp/cmake-src" "$root/tmp/cmake-build"
cp "$src/scripts/package/search_cxx.cc" "$src/scripts/package/CMakeLists.txt" "$root/tmp/cmake-src/"
cmake -S "$root/tmp/cmake-src" -B "$root/tmp/cmake-build" \
      -DPropeller_DIR="$root/usr/lib/x86_64-linux-gnu/cmake/Propeller" > "$root/tmp/cmake.log" 2>&1 ||
  { cat "$root/tmp/cmake.log" >&2; exit 1; }
cmake --build "$root/tmp/cmake-build" > "$root/tmp/cmake-build.log" 2>&1 ||
  { cat "$root/tmp/cmake-build.log" >&2; exit 1; }
cp "$root/tmp/cmake-build/search_cxx" "$root/tmp/smoke/"
echo "  built search_c (pkg-config) and search_cxx (find_package(Propeller))"

echo "== smoke test inside the root"
chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root bash /tmp/smoke/smoke.sh
NS
echo "== packages install on a fresh Debian 12 and work: ${debs[*]##*/}"
