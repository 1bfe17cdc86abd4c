#!/bin/sh
# First start on an empty PGDATA: initdb with POSTGRES_USER as superuser (password auth over TCP), create
# POSTGRES_DB; then run postgres in the foreground as the postgres user.
set -eu
: "${POSTGRES_USER:=postgres}" "${POSTGRES_DB:=$POSTGRES_USER}" "${PGDATA:=/var/lib/postgresql/data}"
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /run/postgresql
  chown -R postgres:postgres "$PGDATA" /run/postgresql
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  [ -n "${POSTGRES_PASSWORD:-}" ] || { echo "postgres-entrypoint: POSTGRES_PASSWORD is required" >&2; exit 1; }
  pwfile=$(mktemp)
  printf '%s' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  [ "$POSTGRES_DB" = postgres ] || createdb -U "$POSTGRES_USER" "$POSTGRES_DB"
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  echo "postgres-entrypoint: initialized $PGDATA (database $POSTGRES_DB, user $POSTGRES_USER)"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
