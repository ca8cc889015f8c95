#!/usr/bin/env bash
# Quick start: installs dependencies, builds, starts Propeller's embedded default (`propeller
# up`: master + one index node in one process), indexes a real directory tree with
# `propeller import`, runs a few searches and prints them, then stops Propeller. Propeller
# listens on unix sockets only (no network port); other users on this machine would search
# with their own permissions.
# Usage: scripts/quickstart.sh [TREE]      (default /usr/share)
set -euo pipefail
cd "$(dirname "$0")/.."
tree="${1:-/usr/share}"
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build build -j "$(nproc)" --target propeller
bin=build/client/propeller

work="$(mktemp -d /tmp/propeller-quickstart.XXXXXX)"
data="$work/data"
# Its own runtime directory for the unix sockets, so a Propeller already running here is left
# alone; the commands below find this one through the same variable.
export PROPELLER_RUNTIME_DIR="$work/run"
"$bin" up --data "$data" --ready-file "$work/ready" --log-level warning &
up_pid=$!
trap 'kill -TERM $up_pid 2>/dev/null; wait $up_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 300); do [ -f "$work/ready" ] && break; sleep 0.1; done
[ -f "$work/ready" ] || { echo "quickstart: propeller up did not start" >&2; exit 1; }

run() { echo; echo "\$ propeller $*"; "$bin" "$@"; }
run import "$tree"
run search 'size>10m' --sort size --desc --limit 10 --long
run search 'ext=png & size>100k' --limit 5 --stats
run search 'keyword=license & mtime<5y' --limit 5
run search 'type=d & name~*doc*' --limit 5
run search 'size>>1m' || true   # a malformed query: the error names the position
run status
