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
