#!/usr/bin/env bash
# Clang's thread-safety analysis over every translation unit that uses the annotated mutexes
# of common/mutex.h (a member's PROPELLER_GUARDED_BY, a function's PROPELLER_REQUIRES): an
# access without the lock that guards it is an error. Run by scripts/test.sh after the main
# build, whose compile_commands.json gives each file's flags; only parses (-fsyntax-only), so
# it takes seconds.
#   usage: scripts/thread_safety.sh [BUILD_DIR]     (default: build)
# Exit codes: 0 clean; 1 a warning (printed); 2 no clang or no compile_commands.json.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
clang="$(command -v clang++-14 || command -v clang++ || true)"
[ -n "$clang" ] || { echo "thread_safety.sh: clang++ not found" >&2; exit 2; }
[ -f "$build/compile_commands.json" ] || {
  echo "thread_safety.sh: $build/compile_commands.json missing (configure first)" >&2; exit 2; }
mapfile -t files < <(grep -rl --include='*.cc' --include='*.h' 'common/mutex.h' \
                     common indexnode master client partitioner schemas | grep '\.cc$' | sort)
# The files that include a header that includes common/mutex.h.
mapfile -t headers < <(grep -rl --include='*.h' 'common/mutex.h' common indexnode master client \
                       partitioner schemas | grep -v '^common/mutex.h$' || true)
for h in "${headers[@]}"; do
  mapfile -t -O "${#files[@]}" files < <(grep -rl --include='*.cc' "\"$h\"" \
      common indexnode master client partitioner schemas || true)
done
mapfile -t files < <(printf '%s\n' "${files[@]}" | sort -u)
python3 - "$build/compile_commands.json" "$clang" "${files[@]}" <<'PY'
import json, os, shlex, subprocess, sys
db, clang, files = sys.argv[1], sys.argv[2], sys.argv[3:]
cmds = {os.path.realpath(e["file"]): e for e in json.load(open(db))}
bad = 0
for f in files:
    e = cmds.get(os.path.realpath(f))
    if e is None:
        continue  # not built in this configuration (a test or bench target that is off)
    args = shlex.split(e["command"])[1:]
    out = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT"):
            skip = True
            continue
        if a in ("-c", "-MD") or a == e["file"]:
            continue
        out.append(a)
    r = subprocess.run([clang] + out + ["-fsyntax-only", "-Wthread-safety",
                        "-Werror=thread-safety", "-Wno-unknown-warning-option", e["file"]],
                       cwd=e["directory"], capture_output=True, text=True)
    if r.returncode != 0:
        bad += 1
        sys.stderr.write(r.stderr)
print("thread-safety analysis: %d file(s), %d with errors" % (len(files), bad))
sys.exit(1 if bad else 0)
PY
