#!/usr/bin/env bash
# Quick start: installs dependencies, builds, then indexes a real directory tree with the
# embedded engine and runs a few searches on it. Usage: scripts/quickstart.sh [TREE]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build build -j "$(nproc)" --target propeller-engine
exec build/indexnode/propeller-engine demo "${1:-/usr/share}"
