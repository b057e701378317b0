#!/usr/bin/env bash
# Starts or stops a throwaway PostgreSQL cluster for the native anchor rows.
#   native-pg.sh start        -> prints PGWASM_NATIVE_DIR=<dir> and PGWASM_NATIVE_URL=<url>
#   native-pg.sh stop <dir>   -> stops that cluster and removes its directory
# The cluster lives in a mktemp directory under /tmp, listens on 127.0.0.1
# only (a free port; its unix socket stays inside the directory) and trusts
# local connections, so nothing outside this machine can reach it.
set -euo pipefail

log() { echo "native-pg: $*" >&2; }

find_bindir() {
  if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
    dirname "$(readlink -f "$(command -v pg_ctl)")"
    return 0
  fi
  # Debian keeps the server binaries off PATH, one directory per major version.
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$d" ] && [ -x "$d/pg_ctl" ]; then
    echo "$d"
    return 0
  fi
  return 1
}

ensure_installed() {
  if find_bindir >/dev/null; then return 0; fi
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "PostgreSQL is not installed and cannot be installed here (needs root and apt-get)"
    exit 2
  fi
  log "installing Debian's postgresql (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
  find_bindir >/dev/null || { log "postgresql installed but pg_ctl not found"; exit 2; }
}

# initdb and postgres refuse to run as root: run them as the postgres user.
as_owner() {
  if [ "$(id -u)" = 0 ]; then
    if ! id postgres >/dev/null 2>&1; then useradd --system --no-create-home postgres; fi
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

free_port() {
  node -e "const s=require('net').createServer();s.listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"
}

start() {
  ensure_installed
  local bindir dir port
  bindir=$(find_bindir)
  dir=$(mktemp -d /tmp/pgwasm-native-pg.XXXXXX)
  chmod 755 "$dir"
  if [ "$(id -u)" = 0 ]; then chown postgres "$dir" 2>/dev/null || { id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres; chown postgres "$dir"; }; fi
  as_owner "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 ||
    { log "initdb failed:"; cat "$dir/initdb.log" >&2; exit 1; }
  port=$(free_port)
  as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir" start >&2 ||
    { log "server did not start:"; cat "$dir/server.log" >&2; exit 1; }
  echo "PGWASM_NATIVE_DIR=$dir"
  echo "PGWASM_NATIVE_URL=postgres://postgres@127.0.0.1:$port/postgres"
}

stop() {
  local dir=${1:?usage: native-pg.sh stop <dir>}
  case "$dir" in /tmp/pgwasm-native-pg.*) ;; *) log "refusing to remove $dir"; exit 1 ;; esac
  local bindir
  bindir=$(find_bindir)
  if [ -f "$dir/data/postmaster.pid" ]; then as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true; fi
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) shift; stop "$@" ;;
  *) echo "usage: native-pg.sh start | stop <dir>" >&2; exit 64 ;;
esac
