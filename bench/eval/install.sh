#!/usr/bin/env bash
# Installs what the evaluation harness needs (Debian 12 packages), idempotently: the database
# servers and their client libraries, plocate, PostMark and matplotlib. The servers are never
# started as system services by the harness: bench/eval/servers.sh runs private instances.
#   sudo bench/eval/install.sh
set -euo pipefail

pkgs=(mariadb-server libmariadb-dev postgresql libpq-dev plocate postmark python3-matplotlib
      sqlite3 libsqlite3-dev fuse3 libfuse3-dev pkg-config)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install.sh: everything is installed"
  exit 0
fi
echo "install.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# policy-rc.d 101: the packages' post-install scripts must not start system-wide servers (the
# harness runs its own instances on private ports and sockets). Removed again on exit.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [[ ! -e "$policy" ]]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod +x "$policy"
  created_policy=1
fi
cleanup() { if [[ $created_policy -eq 1 ]]; then rm -f "$policy"; fi; }
trap cleanup EXIT
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
