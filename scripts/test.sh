#!/usr/bin/env bash
# The project's test command (README "Quick start", run by .ci/run):
#   1. installs the Debian packages it needs (scripts/install-deps.sh),
#   2. builds everything with warnings as errors, checks the mutex annotations with clang's
#      thread-safety analysis (scripts/thread_safety.sh), and runs the whole CTest suite,
#   3. builds the Debian packages and tests them in a fresh Debian root (scripts/package.sh),
#   4. builds again with AddressSanitizer + UndefinedBehaviorSanitizer and runs the suite there,
#   5. fuzzes every decoder of untrusted bytes for a short while (scripts/fuzz.sh, clang-14).
# Build trees go to build/ and build-asan/ (override with BUILD_DIR / ASAN_BUILD_DIR).
# Set PROPELLER_SKIP_PACKAGE=1 / PROPELLER_SKIP_ASAN=1 / PROPELLER_SKIP_FUZZ=1 to skip step 3 / 4 / 5
# locally (CI sets none).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

JOBS="$(nproc)"
BUILD_DIR="${BUILD_DIR:-build}"
ASAN_BUILD_DIR="${ASAN_BUILD_DIR:-build-asan}"

echo "== build (RelWithDebInfo, -Werror) in $BUILD_DIR"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPROPELLER_WERROR=ON \
      -DCMAKE_INSTALL_PREFIX=/usr  # what the packages of step 3 install into
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "== thread-safety analysis (clang -Wthread-safety over the annotated code)"
bash scripts/thread_safety.sh "$BUILD_DIR"
echo "== tests"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"
if [ "${PROPELLER_SKIP_PACKAGE:-0}" != "1" ]; then
  echo "== Debian packages, installed and tried in a fresh Debian 12 root"
  bash scripts/package.sh "$BUILD_DIR"
fi

if [ "${PROPELLER_SKIP_ASAN:-0}" != "1" ]; then
  echo "== build (ASan + UBSan) in $ASAN_BUILD_DIR"
  cmake -S . -B "$ASAN_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPROPELLER_WERROR=ON \
        -DPROPELLER_SANITIZE=ON -DPROPELLER_BENCH=OFF
  cmake --build "$ASAN_BUILD_DIR" -j "$JOBS"
  echo "== tests under sanitizers"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$ASAN_BUILD_DIR" --output-on-failure -j "$JOBS"
fi
if [ "${PROPELLER_SKIP_FUZZ:-0}" != "1" ]; then
  echo "== fuzzing the decoders (${FUZZ_SECONDS:-15} s per target)"
  FUZZ_SECONDS="${FUZZ_SECONDS:-15}" bash scripts/fuzz.sh
fi
echo "== all tests passed"
