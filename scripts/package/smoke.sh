#!/usr/bin/env bash
# Runs inside the fresh Debian root of scripts/package.sh, after `apt-get install` of the
# packages: the documented commands against the installed files only (docs/install.md,
# README). Every result is checked against find(1) over the same tree.
set -euo pipefail
work=/tmp/smoke
fail() { echo "smoke: FAILED: $*" >&2; exit 1; }
# Whatever fails, the service and the mount started below stop with the script.
pids=()
stop_all() {
  if mountpoint -q "$work/mnt" 2>/dev/null; then fusermount3 -u "$work/mnt" || true; fi
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop_all EXIT
step() { echo "-- $*"; }

step "the installed files"
for p in propeller propeller-master propeller-indexnode propeller-engine; do
  path="$(command -v "$p")" || fail "$p is not on PATH"
  [ "$path" = "/usr/bin/$p" ] || fail "$p is $path, not /usr/bin/$p"
  if ldd "$path" | grep -q 'not found'; then fail "$p misses libraries: $(ldd "$path" | grep 'not found')"; fi
  "$p" --help > /dev/null || fail "$p --help failed"
done
propeller --version
for f in /usr/share/man/man1/propeller.1 /usr/share/man/man7/propeller-query.7 \
         /usr/share/bash-completion/completions/propeller /usr/share/doc/propeller/README.md \
         /usr/share/doc/propeller/query.md; do
  [ -s "$f" ] || fail "$f is missing or empty"
done

step "systemd units and configuration files (docs/install.md, \"Running under systemd\")"
units=/lib/systemd/system
for u in propeller-master.service propeller-indexnode@.service propeller-mount@.service; do
  [ -s "$units/$u" ] || fail "unit $units/$u is missing"
done
examples=/usr/share/doc/propeller/examples
for f in master indexnode mount; do
  propeller config check "$examples/$f.toml" --for "$f" > /dev/null ||
    fail "the example $f.toml does not pass propeller config check"
done
# The documented set-up, with the units' own ExecStart lines (systemd is not running here):
# a master and index node "a" from /etc/propeller, then a search through them.
install -d -m 0700 /etc/propeller
install -d -m 0755 /var/lib/propeller  # systemd's StateDirectory= makes it for the units
cp "$examples/master.toml" /etc/propeller/master.toml
sed 's/NAME/a/; s|^# listen = .*|listen = "tcp://127.0.0.1:7471"|' "$examples/indexnode.toml" \
  > /etc/propeller/indexnode-a.toml
propeller config check /etc/propeller/indexnode-a.toml > /dev/null || fail "indexnode-a.toml"
exec_start() { sed -n "s/^ExecStart=//p" "$units/$1" | sed "s/%i/${2:-}/g"; }
# shellcheck disable=SC2046
$(exec_start propeller-master.service) &
pids+=($!)
for _ in $(seq 100); do [ -s /etc/propeller/cluster.key ] && break; sleep 0.1; done
# shellcheck disable=SC2046
$(exec_start propeller-indexnode@.service a) &
pids+=($!)
deadline=$((SECONDS + 30))  # each `status` may wait for its timeout while the master starts
while [ "$SECONDS" -lt "$deadline" ]; do
  propeller status 2>/dev/null | grep -q ' up ' && break
  sleep 0.2
done
propeller status | grep -q ' up ' || fail "the index node of the unit did not come up: $(propeller status 2>&1)"
propeller import /usr/share/doc/propeller > /dev/null
got="$(propeller search 'ext=md' | sort)"
[ "$got" = "$(find /usr/share/doc/propeller -name '*.md' | sort)" ] ||
  fail "search through the units' master and node differs from find"
echo "   master and index node from their units' ExecStart: status up, search agrees with find"
for p in "${pids[@]}"; do kill -TERM "$p"; done
for p in "${pids[@]}"; do wait "$p" || fail "a unit's program did not stop cleanly (exit $?)"; done
pids=()

step "propeller up, import, search (the embedded service)"
tree="$work/tree"
mkdir -p "$tree/src/lib" "$tree/docs" "$tree/data"
for i in $(seq 1 60); do
  head -c $((i * 97)) /dev/zero > "$tree/src/lib/f$i.c"
  head -c $((i * 31)) /dev/zero > "$tree/docs/note$i.txt"
done
head -c 3000000 /dev/zero > "$tree/data/big.bin"
propeller up --data /var/lib/propeller-smoke --ready-file "$work/ready" --log-level warning &
up=$!
pids+=("$up")
for _ in $(seq 300); do [ -f "$work/ready" ] && break; sleep 0.1; done
[ -f "$work/ready" ] || fail "propeller up did not start"
propeller import "$tree" > /dev/null
expect="$(find "$tree" -type f -size +999c | sort)"
[ "$(wc -l <<<"$expect")" -gt 50 ] || fail "the test tree is too small"
got="$(propeller search 'size>=1000 & type=f' | sort)"
[ "$got" = "$expect" ] || fail "propeller search differs from find: $(diff <(echo "$expect") <(echo "$got") | head)"
got="$("$work/search_c" 'size>=1000 & type=f' | sort)"
[ "$got" = "$expect" ] || fail "the C program (pkg-config) differs from find"
got="$("$work/search_cxx" 'size>=1000 & type=f' | sort)"
[ "$got" = "$expect" ] || fail "the C++ program (find_package) differs from find"
echo "   $(wc -l <<<"$expect") files over 999 bytes: propeller search, C and C++ programs agree with find"
if dpkg-query -W python3-propeller > /dev/null 2>&1; then
  got="$(python3 - <<'PY' | sort
import propeller
with propeller.connect() as client:
    for record in client.search("size>=1000 & type=f"):
        print(record.path)
PY
)"
  [ "$got" = "$expect" ] || fail "the Python package differs from find"
  echo "   python3-propeller agrees too"
fi
propeller status > /dev/null || fail "propeller status failed"
kill -TERM "$up"
wait "$up" || fail "propeller up did not stop cleanly (exit $?)"

step "propeller mount (FUSE), a query directory and a search through it"
mkdir -p "$work/backing/sub" "$work/mnt"
echo old > "$work/backing/sub/old.txt"
propeller mount "$work/backing" "$work/mnt" --data /var/lib/propeller-mount &
mnt=$!
pids+=("$mnt")
for _ in $(seq 300); do mountpoint -q "$work/mnt" && break; sleep 0.1; done
mountpoint -q "$work/mnt" || fail "propeller mount did not mount"
for _ in $(seq 300); do [ -n "$(propeller search 'name=old.txt' --scope "$work/mnt" 2>/dev/null)" ] && break; sleep 0.1; done
echo hello > "$work/mnt/sub/hello.txt"
got="$(propeller search 'name~*.txt' --scope "$work/mnt" | sort)"
[ "$got" = "$(printf '%s\n' "$work/mnt/sub/hello.txt" "$work/mnt/sub/old.txt")" ] ||
  fail "search through the mount: got '$got'"
ls "$work/mnt/?name=hello.txt" | grep -q 'hello.txt' || fail "the query directory lists nothing"
fusermount3 -u "$work/mnt"
wait "$mnt" || fail "propeller mount did not stop cleanly (exit $?)"
[ "$(cat "$work/backing/sub/hello.txt")" = hello ] || fail "the file did not reach the backing tree"
echo "smoke: all checks passed"
