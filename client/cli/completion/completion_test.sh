#!/bin/bash
# Loads the bash completion of propeller and checks what it offers (CTest: cli_completion_test).
set -u
source "$1" || { echo "cannot load $1"; exit 1; }
fail=0
expect() {  # expect "WORDS..." "wanted reply"
  local line="$1" want="$2"
  read -r -a COMP_WORDS <<< "$line"
  [[ "$line" == *" " ]] && COMP_WORDS+=("")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _propeller
  local got="${COMPREPLY[*]}"
  if [[ "$got" != "$want" ]]; then
    echo "'$line': got '$got', want '$want'"
    fail=1
  fi
}
expect "propeller se" "search"
expect "propeller f" "find"
expect "propeller search x --so" "--sort"
expect "propeller watch x --qu" "--queue"
expect "propeller search x --sort m" "mtime"
expect "propeller --master ipc://x sea" "search"
expect "propeller find . -ina" "-iname"
expect "propeller index create x --type h" "hash"
expect "propeller search x --count --fo" "--format"
exit $fail
