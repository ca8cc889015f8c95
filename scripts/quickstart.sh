#!/usr/bin/env bash
# Quick start: installs dependencies, builds, starts Propeller's embedded default (`propeller
# up`: master + one index node in one process, on loopback), indexes a real directory tree with
# `propeller import`, runs a few searches and prints them, then stops Propeller.
# Usage: scripts/quickstart.sh [TREE]      (default /usr/share)
set -euo pipefail
cd "$(dirname "$0")/.."
tree="${1:-/usr/share}"
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build build -j "$(nproc)" --target propeller
bin=build/client/propeller

data="$(mktemp -d /tmp/propeller-quickstart.XXXXXX)"
# Free loopback ports, so a Propeller already running on the defaults is left alone.
read -r mport nport < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
export PROPELLER_MASTER="tcp://127.0.0.1:$mport"
"$bin" up --data "$data" --listen "$PROPELLER_MASTER" --node-listen "tcp://127.0.0.1:$nport" \
  --ready-file "$data/ready" --log-level warning &
up_pid=$!
trap 'kill -TERM $up_pid 2>/dev/null; wait $up_pid 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 300); do [ -f "$data/ready" ] && break; sleep 0.1; done
[ -f "$data/ready" ] || { echo "quickstart: propeller up did not start" >&2; exit 1; }

run() { echo; echo "\$ propeller $*"; "$bin" "$@"; }
run import "$tree"
run search 'size>10m' --sort size --desc --limit 10 --long
run search 'ext=png & size>100k' --limit 5 --stats
run search 'keyword=license & mtime<5y' --limit 5
run search 'type=d & name~*doc*' --limit 5
run search 'size>>1m' || true   # a malformed query: the error names the position
run status
