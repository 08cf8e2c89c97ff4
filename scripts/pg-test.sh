#!/usr/bin/env bash
# A throwaway PostgreSQL (Debian's server binaries + pgvector) for tests and benches:
#   scripts/pg-test.sh start DIR            initdb DIR/data, start on a free loopback port,
#                                           database "mmrag", print + write DIR/url
#   scripts/pg-test.sh replica DIR RDIR     a hot standby of DIR's server (pg_basebackup -R)
#   scripts/pg-test.sh down DIR | up DIR    stop the server (a database that is down) and
#                                           start it again on the same port
#   scripts/pg-test.sh stop DIR             stop at once and remove DIR
# initdb refuses root: as root the server runs as the `postgres` system user.
set -euo pipefail
bin=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)}
[ -x "$bin/initdb" ] || { echo "pg-test: no PostgreSQL server binaries (apt install postgresql)" >&2; exit 1; }
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
owner() { [ "$(id -u)" -eq 0 ] && chown -R postgres "$1" || true; }

start_server() {   # DATA PORT SOCKDIR LOG
  as_pg "$bin/pg_ctl" -D "$1" -l "$4" -w -t 60 -o "-p $2 -k $3 -c listen_addresses=127.0.0.1" start >/dev/null \
    || { echo "pg-test: the server did not start:" >&2; tail -n 20 "$4" >&2; exit 1; }
}

case ${1:-} in
start)
  dir=${2:?DIR}; mkdir -p "$dir"; dir=$(cd "$dir" && pwd); owner "$dir"
  as_pg "$bin/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || as_pg "$bin/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 >"$dir/initdb.log" 2>&1 \
    || { echo "pg-test: initdb failed:" >&2; tail -n 20 "$dir/initdb.log" >&2; exit 1; }
  cat >>"$dir/data/postgresql.conf" <<CONF
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 128MB
max_connections = 200
wal_level = replica
max_wal_senders = 4
hot_standby = on
CONF
  echo "host replication all 127.0.0.1/32 trust" >>"$dir/data/pg_hba.conf"
  port=$(free_port)
  start_server "$dir/data" "$port" "$dir" "$dir/server.log"
  url="postgres://postgres@127.0.0.1:$port/mmrag"
  "$bin/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c "CREATE DATABASE mmrag" >/dev/null
  "$bin/psql" -q "$url" -c "CREATE EXTENSION IF NOT EXISTS vector" >/dev/null \
    || { echo "pg-test: pgvector is not installed (make deps builds it)" >&2; as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null; exit 1; }
  echo "$port" >"$dir/port"; echo "$url" >"$dir/url"; echo "$url"
  ;;
replica)
  dir=${2:?DIR}; rdir=${3:?REPLICA_DIR}; port=$(cat "$dir/port")
  mkdir -p "$rdir"; rdir=$(cd "$rdir" && pwd); owner "$rdir"
  as_pg "$bin/pg_basebackup" -h 127.0.0.1 -p "$port" -U postgres -D "$rdir/data" -R -X stream -c fast >/dev/null 2>"$rdir/basebackup.log" \
    || { echo "pg-test: pg_basebackup failed:" >&2; cat "$rdir/basebackup.log" >&2; exit 1; }
  rport=$(free_port)
  start_server "$rdir/data" "$rport" "$rdir" "$rdir/server.log"
  url="postgres://postgres@127.0.0.1:$rport/mmrag"
  echo "$rport" >"$rdir/port"; echo "$url" >"$rdir/url"; echo "$url"
  ;;
down)
  as_pg "$bin/pg_ctl" -D "${2:?DIR}/data" -m fast -w stop >/dev/null
  ;;
up)
  dir=${2:?DIR}
  start_server "$dir/data" "$(cat "$dir/port")" "$dir" "$dir/server.log"
  ;;
stop)
  dir=${2:?DIR}
  [ -d "$dir/data" ] && as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
  ;;
*) echo "usage: scripts/pg-test.sh start DIR | replica DIR REPLICA_DIR | down DIR | up DIR | stop DIR" >&2; exit 2 ;;
esac
