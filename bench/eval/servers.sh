#!/usr/bin/env bash
# Private MariaDB and PostgreSQL instances for the evaluation harness: their own data
# directories under $EVAL_DIR (default /var/tmp/propeller-eval), their own unix sockets, no TCP
# (MariaDB) / a private port on no address (PostgreSQL), so nothing depends on or disturbs the
# system's services.
#
#   bench/eval/servers.sh init|start|stop|status  mariadb|postgres|all
#
# Configuration (the comparison's durability mapping is in README.md):
#   MariaDB 10.11 InnoDB: innodb_flush_log_at_trx_commit=2 (log written at each commit, flushed
#     to disk about once a second), buffer pool 4 GiB (the docs recommend up to ~70-80% of RAM
#     on a dedicated server; this 24 GiB machine is shared with other workers, and the data set
#     at 1 M files takes < 1 GiB), redo log 1 GiB, O_DIRECT. No buffer-pool dump/reload across
#     restarts (10.11 does both by default), so a cold run after a restart is really cold.
#   PostgreSQL 15: synchronous_commit=off with wal_writer_delay=10ms (commits are flushed by the
#     WAL writer within ~10 ms: the closest to Propeller's 10 ms group commit), shared_buffers
#     4 GiB (docs: ~25% of RAM), effective_cache_size 12 GiB, max_wal_size 4 GiB.
set -euo pipefail

dir="${EVAL_DIR:-/var/tmp/propeller-eval}"
pg_port="${EVAL_PG_PORT:-55432}"
pg_bin=/usr/lib/postgresql/15/bin
my_data="$dir/mariadb"
run="$dir/run"  # sockets, pid files and logs: writable by the mysql and postgres users
my_sock="$run/mariadb.sock"
pg_data="$dir/postgres"

mkdir -p "$dir" "$run"
chmod 755 "$dir"
chmod 1777 "$run"

mariadb_running() { [[ -S "$my_sock" ]] && mariadb-admin --socket="$my_sock" -uroot ping >/dev/null 2>&1; }

mariadb_init() {
  if [[ ! -d "$my_data/mysql" ]]; then
    rm -rf "$my_data"
    mkdir -p "$my_data"
    chown mysql:mysql "$my_data"
    mariadb-install-db --no-defaults --datadir="$my_data" --user=mysql \
      --auth-root-authentication-method=socket >"$dir/mariadb-init.log" 2>&1
  fi
}

mariadb_start() {
  mariadb_init
  mariadb_running && return 0
  # setsid: the server has its own session, so a Ctrl-C of the harness does not reach it
  # before the harness's trap stops it cleanly.
  setsid /usr/sbin/mariadbd --no-defaults --datadir="$my_data" --user=mysql --socket="$my_sock" \
    --pid-file="$run/mariadb.pid" --skip-networking --log-error="$run/mariadb.err" \
    --innodb-buffer-pool-size=4G --innodb-log-file-size=1G \
    --innodb-flush-log-at-trx-commit=2 --innodb-flush-method=O_DIRECT \
    --innodb-buffer-pool-dump-at-shutdown=0 --innodb-buffer-pool-load-at-startup=0 \
    --local-infile=1 --max-connections=200 </dev/null >/dev/null 2>&1 &
  for _ in $(seq 1 300); do
    mariadb_running && return 0
    sleep 0.1
  done
  echo "servers.sh: mariadb did not start; see $run/mariadb.err" >&2
  tail -20 "$run/mariadb.err" >&2 || true
  return 1
}

mariadb_stop() {
  if mariadb_running; then
    mariadb-admin --socket="$my_sock" -uroot shutdown >/dev/null 2>&1 || true
  fi
  for _ in $(seq 1 300); do
    [[ -e "$run/mariadb.pid" ]] || return 0
    kill -0 "$(cat "$run/mariadb.pid" 2>/dev/null)" 2>/dev/null || { rm -f "$run/mariadb.pid"; return 0; }
    sleep 0.1
  done
  echo "servers.sh: mariadb did not stop" >&2
  return 1
}

pg() { runuser -u postgres -- "$@"; }

postgres_init() {
  if [[ ! -f "$pg_data/PG_VERSION" ]]; then
    rm -rf "$pg_data"
    mkdir -p "$pg_data"
    chown postgres:postgres "$pg_data"
    pg "$pg_bin/initdb" -D "$pg_data" -A trust -U postgres >"$dir/postgres-init.log" 2>&1
  fi
}

postgres_start() {
  postgres_init
  if pg "$pg_bin/pg_ctl" -D "$pg_data" status >/dev/null 2>&1; then return 0; fi
  pg "$pg_bin/pg_ctl" -D "$pg_data" -l "$run/postgres.log" -w -t 120 start -o \
    "-c listen_addresses='' -c unix_socket_directories='$run' -p $pg_port \
     -c shared_buffers=4GB -c effective_cache_size=12GB -c maintenance_work_mem=1GB \
     -c work_mem=64MB -c max_wal_size=4GB -c checkpoint_timeout=15min \
     -c synchronous_commit=off -c wal_writer_delay=10ms -c max_connections=200" >/dev/null
}

postgres_stop() {
  if pg "$pg_bin/pg_ctl" -D "$pg_data" status >/dev/null 2>&1; then
    pg "$pg_bin/pg_ctl" -D "$pg_data" -m fast -w -t 120 stop >/dev/null
  fi
}

status() {
  mariadb_running && echo "mariadb: running ($my_sock)" || echo "mariadb: stopped"
  if [[ -f "$pg_data/PG_VERSION" ]] && pg "$pg_bin/pg_ctl" -D "$pg_data" status >/dev/null 2>&1; then
    echo "postgres: running ($run, port $pg_port)"
  else
    echo "postgres: stopped"
  fi
}

cmd="${1:-}"
which="${2:-all}"
case "$which" in
  mariadb) systems=(mariadb) ;;
  postgres) systems=(postgres) ;;
  all) systems=(mariadb postgres) ;;
  *) echo "usage: $0 init|start|stop|status mariadb|postgres|all" >&2; exit 2 ;;
esac
case "$cmd" in
  init|start|stop) for s in "${systems[@]}"; do "${s}_${cmd}"; done ;;
  status) status ;;
  *) echo "usage: $0 init|start|stop|status mariadb|postgres|all" >&2; exit 2 ;;
esac
