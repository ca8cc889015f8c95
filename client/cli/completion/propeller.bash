# bash completion for propeller (installed as share/bash-completion/completions/propeller).
# Commands, their subcommands and options as `propeller COMMAND --help` lists them; paths
# where a command takes one.
_propeller() {
  local cur prev words cword
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  local global="--master --timeout-ms --cluster-key --curve-key --server-key --insecure --help
                --version"
  local commands="up mount import search find watch index attr status volume acg config"
  # The command: the first word after the program that is not an option or its value.
  local i cmd=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "${COMP_WORDS[i]}" in
      --master|--timeout-ms|--cluster-key|--curve-key|--server-key) ((i++)) ;;
      -*) ;;
      *) cmd="${COMP_WORDS[i]}"; break ;;
    esac
  done
  case "$prev" in
    --master|--timeout-ms|--limit|--format|--app|--batch|--acg-threshold|--index-timeout|\
    --search-wait|--cache-timeout|--threads|--poll-us|--listen|--node-listen)
      return 0 ;;
    --cluster-key|--curve-key|--server-key|--data|--scope|--state|--ready-file)
      COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
    --sort) COMPREPLY=($(compgen -W "size mtime ctime atime uid gid path name" -- "$cur"))
      return 0 ;;
    --type) COMPREPLY=($(compgen -W "btree hash" -- "$cur")); return 0 ;;
    --durability) COMPREPLY=($(compgen -W "default sync" -- "$cur")); return 0 ;;
    --log-level) COMPREPLY=($(compgen -W "debug info warning error" -- "$cur")); return 0 ;;
  esac
  local opts=""
  case "$cmd" in
    "") COMPREPLY=($(compgen -W "$commands $global" -- "$cur")); return 0 ;;
    search) opts="--scope --limit --sort --desc --count --long --format --json -0 --stats" ;;
    watch) opts="--scope --json -0 --queue" ;;
    find)
      opts="-name -iname -path -ipath -wholename -iwholename -regex -iregex -type -size -empty
            -mtime -mmin -atime -amin -ctime -cmin -newer -anewer -cnewer -user -group -uid
            -gid -nouser -nogroup -perm -links -inum -true -false -maxdepth -mindepth
            -regextype -not -a -and -o -or -print -print0 -printf -quit"
      [[ "$cur" == -* ]] || { COMPREPLY=($(compgen -d -- "$cur")); return 0; } ;;
    import) opts="--app --batch --state --restart --quiet"
      [[ "$cur" == -* ]] || { COMPREPLY=($(compgen -d -- "$cur")); return 0; } ;;
    mount) opts="--config --data --index-timeout --search-wait --durability --writeback
                 --no-passthrough --cache-timeout --threads --poll-us"
      [[ "$cur" == -* ]] || { COMPREPLY=($(compgen -d -- "$cur")); return 0; } ;;
    up) opts="--data --listen --node-listen --cluster-key --insecure --durability
              --acg-threshold --ready-file --log-level" ;;
    index) opts="create list drop --type --json" ;;
    attr) opts="set get rm --index-only --string --json"
      [[ "$cur" == -* || "$prev" == attr ]] || { COMPREPLY=($(compgen -f -- "$cur")); return 0; } ;;
    status) opts="--json" ;;
    volume) opts="list remove --json" ;;
    config) opts="check --for"
      [[ "$cur" == -* ]] || { COMPREPLY=($(compgen -W "check" -f -- "$cur")); return 0; } ;;
    acg) opts="stats show export move --json --dot"
      [[ "$prev" == show ]] && { COMPREPLY=($(compgen -f -- "$cur")); return 0; } ;;
  esac
  COMPREPLY=($(compgen -W "$opts --help" -- "$cur"))
}
complete -F _propeller propeller
