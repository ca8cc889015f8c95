#!/usr/bin/env bash
# Installs every build and test dependency of Propeller from Debian's packages.
# Idempotent: re-running it on a machine that has everything does nothing harmful.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  liblmdb-dev lmdb-utils
  libnanoflann-dev
  libmetis-dev
  libzmq3-dev cppzmq-dev
  libmsgpack-cxx-dev
  libfuse3-dev fuse3
  libbenchmark-dev
  libgtest-dev googletest
  libsqlite3-dev sqlite3
  libtomlplusplus-dev  # the daemons' configuration files (common/daemon)
  libsystemd-dev       # sd_notify: Type=notify readiness under systemd
  libcpp-httplib-dev   # the daemons' Prometheus endpoint (--metrics-listen; docs/metrics.md)
  debootstrap          # scripts/package.sh: the fresh Debian root the packages are tested in
  pybind11-dev python3-dev python3-pytest python3-venv  # the Python package (python/) and its tests
  clang-14 libclang-rt-14-dev  # scripts/fuzz.sh: libFuzzer and the sanitizer runtimes (only
                               # recommended by clang-14, so --no-install-recommends skips it)
  python3             # scripts/md2man.py (man pages, at build time)
  groff-base          # the man pages' check (docs/check_man_pages.cmake)
  findutils           # GNU find, the oracle of `propeller find`'s test
  postmark            # the FUSE benchmark (bench/fuse/postmark.sh)
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
