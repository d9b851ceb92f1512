#!/usr/bin/env bash
# Starts a throwaway local PostgreSQL for the test suite, idempotently.
# Installs the server from Debian's packages when it is missing, keeps its data
# outside the clone, and prints the connection URL on stdout.
set -euo pipefail

PGPORT="${TARSY_PG_PORT:-55432}"
PGDATA_DIR="${TARSY_PG_DATA:-/var/tmp/tarsy-pgdata}"
URL="postgres://tarsy:tarsy@127.0.0.1:${PGPORT}/tarsy"

pgbin=""
for d in /usr/lib/postgresql/*/bin; do
  [ -x "$d/postgres" ] && pgbin="$d"
done
if [ -z "$pgbin" ]; then
  echo "installing PostgreSQL server from Debian packages" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) >&2
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/postgres" ] && pgbin="$d"
  done
fi
[ -n "$pgbin" ] || { echo "no PostgreSQL server available" >&2; exit 1; }

# The server refuses to run as root: run it as the 'postgres' user when we are root.
as_pg() {
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql postgres
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

if ! "$pgbin/pg_isready" -q -h 127.0.0.1 -p "$PGPORT"; then
  mkdir -p "$PGDATA_DIR"
  [ "$(id -u)" = 0 ] && chown -R postgres "$PGDATA_DIR"
  if [ ! -f "$PGDATA_DIR/PG_VERSION" ]; then
    as_pg "$pgbin/initdb" -D "$PGDATA_DIR" -U postgres --auth=trust -E UTF8 >/dev/null
  fi
  as_pg "$pgbin/pg_ctl" -D "$PGDATA_DIR" -l "$PGDATA_DIR/server.log" -w \
    -o "-p $PGPORT -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300" start >&2
fi

psql_admin() { "$pgbin/psql" -q -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"; }
if ! psql_admin -tAc "SELECT 1 FROM pg_roles WHERE rolname='tarsy'" | grep -q 1; then
  psql_admin -c "CREATE ROLE tarsy LOGIN SUPERUSER PASSWORD 'tarsy'"
fi
if ! psql_admin -tAc "SELECT 1 FROM pg_database WHERE datname='tarsy'" | grep -q 1; then
  psql_admin -c "CREATE DATABASE tarsy OWNER tarsy"
fi
echo "$URL"
