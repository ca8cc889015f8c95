#!/usr/bin/env bash
# PostMark on three file systems side by side, in ONE invocation (docs/architecture.md §11: FUSE
# capture overhead >= 0.9x the files/s of libfuse's passthrough_ll with writeback cache):
#   ext4            a plain directory on the local ext4 file system
#   passthrough_ll  libfuse's example, -o writeback -o cache=always, over a fresh ext4 directory
#   propeller       the Propeller mount (command from --propeller-cmd; skipped without it)
# Every run gets fresh directories and a fresh mount; with --runs > 1 the systems are
# interleaved (run r starts with system r mod n, so no system always goes first). Writes
# bench/results/postmark-<UTC stamp>.{json,md} and prints the Markdown table. See README.md.
#
# usage: bench/fuse/postmark.sh [options]
#   --files N            PostMark base number of files          (default 50000)
#   --subdirs N          subdirectories                          (default 200)
#   --transactions N     transactions                            (default 50000)
#   --quick              small run: 5000 files, 50 subdirs, 5000 transactions
#   --runs N             runs per system, interleaved            (default 1)
#   --seed N             PostMark random seed, same for all      (default 42)
#   --systems LIST       comma list of ext4,passthrough_ll,propeller (default: all three)
#   --propeller-cmd CMD  mount command template; {backing} {mnt} {data} {ready} are replaced,
#                        e.g. 'build/client/propeller mount {backing} {mnt} --data {data} -f'.
#                        It may stay in the foreground or daemonize; readiness = `mountpoint -q`.
#   --passthrough-ll BIN passthrough_ll binary (default: built by build_passthrough_ll.sh)
#   --work-dir DIR       where the data goes; must be on ext4, never under /work
#                        (default: a fresh directory under ${PROPELLER_FUSE_BENCH_DIR:-/var/tmp})
#   --results DIR        output directory                        (default: <repo>/bench/results)
#   --mount-timeout S    seconds to wait for a mount             (default 30)
#   --nofile N           open-file limit for the daemons (default 1048576; passthrough_ll keeps
#                        an fd per inode it knows, and 50k files exceed a 20k limit)
#   --keep               keep the work directory (logs) after the run
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

files=50000
subdirs=200
transactions=50000
runs=1
seed=42
systems="ext4,passthrough_ll,propeller"
propeller_cmd=""
passthrough_bin=""
work_parent="${PROPELLER_FUSE_BENCH_DIR:-/var/tmp}"
work=""
results="$repo/bench/results"
mount_timeout=30
keep=0
quick=0
nofile=1048576

usage() {
  sed -n '10,32p' "$0" >&2
  exit 2
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --files) files="$2"; shift 2 ;;
    --subdirs) subdirs="$2"; shift 2 ;;
    --transactions) transactions="$2"; shift 2 ;;
    --quick) quick=1; files=5000; subdirs=50; transactions=5000; shift ;;
    --runs) runs="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --systems) systems="$2"; shift 2 ;;
    --propeller-cmd) propeller_cmd="$2"; shift 2 ;;
    --passthrough-ll) passthrough_bin="$2"; shift 2 ;;
    --work-dir) work="$2"; shift 2 ;;
    --results) results="$2"; shift 2 ;;
    --mount-timeout) mount_timeout="$2"; shift 2 ;;
    --nofile) nofile="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) usage ;;
    *) echo "postmark.sh: unknown argument '$1'" >&2; usage ;;
  esac
done

for n in "$files" "$subdirs" "$transactions" "$runs" "$seed" "$mount_timeout" "$nofile"; do
  [[ "$n" =~ ^[0-9]+$ ]] || { echo "postmark.sh: '$n' is not a non-negative integer" >&2; exit 2; }
done
[[ "$runs" -ge 1 ]] || { echo "postmark.sh: --runs must be >= 1" >&2; exit 2; }

log() { echo "postmark.sh: $*" >&2; }

if ! command -v postmark >/dev/null; then
  log "postmark not found; install it (Debian: apt-get install -y postmark, see scripts/install-deps.sh)"
  exit 2
fi
for tool in mountpoint fusermount3 python3; do
  command -v "$tool" >/dev/null || { log "$tool not found"; exit 2; }
done

# Daemons inherit this shell's limit. passthrough_ll holds an O_PATH fd for every inode the
# kernel knows about (cache=always keeps them for a day), so PostMark's 50k files need more than
# the 20k this machine gives by default. Root may raise the hard limit.
if ! ulimit -n "$nofile" 2>/dev/null; then
  ulimit -n "$(ulimit -Hn)"
  log "warning: could not raise the open-file limit to $nofile; using $(ulimit -n)"
fi
nofile="$(ulimit -n)"
# PostMark keeps about --files files alive at once; an fd-per-inode daemon needs that many fds
# plus the directories. Warn now rather than fail half-way with "cannot open ... for writing".
if [[ $(( files + subdirs + 256 )) -gt "$nofile" ]]; then
  log "WARNING: open-file limit $nofile < files + subdirs + 256; passthrough_ll (one O_PATH fd per"
  log "  live inode) will fail with EMFILE around file $(( nofile - subdirs - 30 )). Raising the hard"
  log "  limit needs CAP_SYS_RESOURCE; otherwise use --files $(( (nofile - subdirs - 1000) / 1000 * 1000 ))."
fi

# The systems to run, in the order given; propeller is dropped (with a message) without a command.
IFS=',' read -r -a wanted <<<"$systems"
active=()
skipped=()
for s in "${wanted[@]}"; do
  case "$s" in
    ext4|passthrough_ll) active+=("$s") ;;
    propeller)
      if [[ -n "$propeller_cmd" ]]; then
        active+=("$s")
      else
        log "SKIPPING propeller: no --propeller-cmd given (e.g. --propeller-cmd 'build/client/propeller mount {backing} {mnt} --data {data} -f')"
        skipped+=("propeller")
      fi
      ;;
    *) log "unknown system '$s' (want ext4, passthrough_ll, propeller)"; exit 2 ;;
  esac
done
[[ ${#active[@]} -gt 0 ]] || { log "nothing to run"; exit 2; }

if [[ " ${active[*]} " == *" passthrough_ll "* && -z "$passthrough_bin" ]]; then
  passthrough_bin="$("$here/build_passthrough_ll.sh")"
fi

# ---- work directory: on ext4, outside /work, with enough space --------------------------------
if [[ -z "$work" ]]; then
  mkdir -p "$work_parent"
  work="$(mktemp -d "$work_parent/propeller-postmark.XXXXXX")"
else
  mkdir -p "$work"
fi
work="$(cd "$work" && pwd -P)"
case "$work/" in
  /work/*) log "refusing to put benchmark data under /work ($work)"; exit 2 ;;
esac
fstype="$(findmnt -n -o FSTYPE --target "$work" 2>/dev/null || stat -f -c %T "$work")"
if [[ "$fstype" != "ext4" ]]; then
  log "warning: $work is on '$fstype', not ext4; the 'ext4' row is then mislabelled"
fi
# PostMark's files average ~5 KB (500 B..9.77 KB) and at most ~files*1.5 exist at once;
# ask for 4x that plus 512 MiB headroom (propeller's index, logs).
need_kb=$(( files * 15 / 10 * 5 * 4 + 512 * 1024 ))
avail_kb="$(df -Pk "$work" | awk 'NR==2 {print $4}')"
if [[ "$avail_kb" -lt "$need_kb" ]]; then
  log "not enough free space in $work: ${avail_kb} KiB available, ${need_kb} KiB wanted"
  exit 2
fi

# ---- mounts and cleanup -----------------------------------------------------------------------
mounted=()     # mount points we mounted and have not unmounted yet
daemon_pids=() # processes we started (each its own session, so its pid is its process group)
postmark_pid=""

unmount_one() {
  local mnt="$1"
  if mountpoint -q "$mnt" 2>/dev/null; then
    fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
  fi
}

stop_pid() {
  local pid="$1" i
  kill -0 "$pid" 2>/dev/null || return 0
  # Unmounting normally ends a FUSE daemon; give it a moment before signalling.
  for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$? m p
  trap - EXIT INT TERM
  if [[ -n "$postmark_pid" ]] && kill -0 "$postmark_pid" 2>/dev/null; then
    kill -TERM "$postmark_pid" 2>/dev/null || true
    wait "$postmark_pid" 2>/dev/null || true
  fi
  for m in "${mounted[@]}"; do unmount_one "$m"; done
  for p in "${daemon_pids[@]}"; do stop_pid "$p"; wait "$p" 2>/dev/null || true; done
  if [[ "$keep" == 1 ]]; then
    log "kept work directory $work"
  elif [[ -n "$work" && -d "$work" ]]; then
    # Never delete through a mount that refused to go away.
    if grep -q " $work/" /proc/self/mounts; then
      log "a mount under $work is still present; leaving the directory in place"
    elif [[ "$rc" != 0 && -d "$work/logs" ]]; then
      find "$work" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} +
      log "failed (status $rc): logs kept in $work/logs"
    else
      rm -rf "$work"
    fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Waits until MNT is a mount point (and READY exists, if given) while PID lives (if it must).
# A command that daemonizes exits with 0 before or after mounting: that is fine.
wait_mounted() {
  local mnt="$1" pid="$2" ready="$3" deadline
  deadline=$(( $(date +%s) + mount_timeout ))
  while true; do
    if mountpoint -q "$mnt" && [[ -z "$ready" || -e "$ready" ]]; then
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      local st=0
      wait "$pid" 2>/dev/null || st=$?
      if [[ "$st" != 0 ]]; then
        log "mount command for $mnt exited with status $st before the mount was ready"
        return 1
      fi
    fi
    if [[ $(date +%s) -ge $deadline ]]; then
      log "timed out after ${mount_timeout}s waiting for $mnt"
      return 1
    fi
    sleep 0.05
  done
}

# Starts "$@" in its own session with output to LOG; sets started_pid.
start_daemon() {
  local log_file="$1"
  shift
  setsid "$@" </dev/null >"$log_file" 2>&1 &
  started_pid=$!
  daemon_pids+=("$started_pid")
}

# Prepares SYSTEM for run RUN; sets target (the directory PostMark works in).
setup_system() {
  local system="$1" run="$2" base="$work/run$2/$1"
  mkdir -p "$base"
  case "$system" in
    ext4)
      target="$base/dir"
      mkdir -p "$target"
      ;;
    passthrough_ll)
      mkdir -p "$base/source" "$base/mnt"
      start_daemon "$work/logs/$system-run$run.daemon.log" "$passthrough_bin" -f \
        -o source="$base/source" -o writeback -o cache=always "$base/mnt"
      mounted+=("$base/mnt")
      wait_mounted "$base/mnt" "$started_pid" "" || { cat "$work/logs/$system-run$run.daemon.log" >&2; return 1; }
      target="$base/mnt"
      ;;
    propeller)
      mkdir -p "$base/backing" "$base/mnt" "$base/data"
      local cmd="$propeller_cmd" ready=""
      cmd="${cmd//\{backing\}/$base/backing}"
      cmd="${cmd//\{mnt\}/$base/mnt}"
      cmd="${cmd//\{data\}/$base/data}"
      if [[ "$cmd" == *"{ready}"* ]]; then
        ready="$base/ready"
        cmd="${cmd//\{ready\}/$ready}"
      fi
      echo "$cmd" >"$work/logs/$system-run$run.command"
      start_daemon "$work/logs/$system-run$run.daemon.log" bash -c "$cmd"
      mounted+=("$base/mnt")
      wait_mounted "$base/mnt" "$started_pid" "$ready" || { cat "$work/logs/$system-run$run.daemon.log" >&2; return 1; }
      target="$base/mnt"
      ;;
  esac
}

teardown_system() {
  local system="$1" run="$2" base="$work/run$2/$1" m kept=()
  if [[ "$system" != ext4 ]]; then
    unmount_one "$base/mnt"
    for m in "${mounted[@]}"; do [[ "$m" == "$base/mnt" ]] || kept+=("$m"); done
    mounted=("${kept[@]+"${kept[@]}"}")
    for m in "${daemon_pids[@]}"; do stop_pid "$m"; wait "$m" 2>/dev/null || true; done
    daemon_pids=()
  fi
  # Free the space before the next system runs (PostMark deletes its files itself; this removes
  # what a failed run or the daemon left behind). Logs stay in $work/logs.
  rm -rf "${base:?}/dir" "$base/source" "$base/backing" "$base/data"
}

# ---- the runs ---------------------------------------------------------------------------------
mkdir -p "$work/logs" "$results"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
manifest="$work/logs/manifest.tsv"
: >"$manifest"
load_before="$(cat /proc/loadavg)"
log "work directory $work ($fstype); systems: ${active[*]}; runs: $runs"
log "config: files=$files subdirs=$subdirs transactions=$transactions seed=$seed nofile=$nofile"
log "load average before: $load_before"

n=${#active[@]}
for (( r = 1; r <= runs; r++ )); do
  for (( k = 0; k < n; k++ )); do
    system="${active[$(( (r - 1 + k) % n ))]}"
    out="$work/logs/$system-run$r.out"
    err="$work/logs/$system-run$r.err"
    status=ok
    la_before="$(cut -d' ' -f1-3 /proc/loadavg)"
    if setup_system "$system" "$r"; then
      mkdir -p "$target/postmark"
      cat >"$work/logs/$system-run$r.cfg" <<CFG
set location $target/postmark
set number $files
set subdirectories $subdirs
set transactions $transactions
set seed $seed
set report verbose
run
quit
CFG
      sync
      log "run $r/$runs: $system in $target"
      t0="$(date +%s.%N)"
      # In the background so that a signal runs the cleanup trap at once (bash defers traps
      # while a foreground child runs); cleanup ends it.
      postmark "$work/logs/$system-run$r.cfg" >"$out" 2>"$err" &
      postmark_pid=$!
      wait "$postmark_pid" || status="exit-$?"
      postmark_pid=""
      t1="$(date +%s.%N)"
      wall="$(python3 -c "print(f'{$t1 - $t0:.3f}')")"
      # PostMark exits 0 even when every operation failed: its errors go to stderr.
      if grep -q '^Error' "$err"; then
        status="postmark-errors:$(grep -c '^Error' "$err")"
        head -5 "$err" >&2
      fi
    else
      status="mount-failed"
      wall=""
      : >"$out"
    fi
    la_after="$(cut -d' ' -f1-3 /proc/loadavg)"
    teardown_system "$system" "$r"
    log "run $r/$runs: $system $status wall=${wall}s load ${la_before} -> ${la_after}"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$system" "$r" "$status" "$wall" \
      "$la_before" "$la_after" "$out" >>"$manifest"
  done
done
load_after="$(cat /proc/loadavg)"
log "load average after: $load_after"

json="$results/postmark-$stamp.json"
table="$results/postmark-$stamp.md"
python3 "$here/postmark_report.py" \
  --manifest "$manifest" --json "$json" --markdown "$table" \
  --files "$files" --subdirs "$subdirs" --transactions "$transactions" --seed "$seed" \
  --runs "$runs" --quick "$quick" --nofile "$nofile" --work-dir "$work" --fstype "$fstype" \
  --load-before "$load_before" --load-after "$load_after" \
  --passthrough-ll "${passthrough_bin:-}" --propeller-cmd "$propeller_cmd" \
  --skipped "$(IFS=,; echo "${skipped[*]+"${skipped[*]}"}")"
cat "$table"
log "wrote $json and $table"
if grep -qv "	ok	" "$manifest"; then
  log "some runs failed (see the table and $work/logs; rerun with --keep to keep them)"
  exit 1
fi
