#!/usr/bin/env bash
# Installs and starts the PostgreSQL that the Temporal-on-PostgreSQL tests use, doing only what is
# missing: Debian's postgresql package, a private cluster (initdb) under a data dir owned by the
# postgres user, listening on 127.0.0.1 only, and a login role that may create databases (Temporal's
# schema set-up creates its own). Run as root. It never touches Debian's own "main" cluster.
#
#   SANDBOXFLOW_PG_PORT      port on 127.0.0.1 (default 5433, beside Debian's 5432)
#   SANDBOXFLOW_PG_DATA      data dir (default /var/lib/sandboxflow-postgres)
#   SANDBOXFLOW_PG_USER      role for Temporal (default temporal)
#   SANDBOXFLOW_PG_PASSWORD  its password (default temporal: loopback-only test cluster)
set -euo pipefail

PORT=${SANDBOXFLOW_PG_PORT:-5433}
DATA=${SANDBOXFLOW_PG_DATA:-/var/lib/sandboxflow-postgres}
ROLE=${SANDBOXFLOW_PG_USER:-temporal}
PASSWORD=${SANDBOXFLOW_PG_PASSWORD:-temporal}

log() { printf 'setup-postgres: %s\n' "$*" >&2; }

if ! ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1; then
  log "installing postgresql"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql >/dev/null
fi
BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
as_pg() { runuser -u postgres -- "$@"; }

if [ ! -s "$DATA/PG_VERSION" ]; then
  log "initdb $DATA"
  mkdir -p "$DATA"
  chown postgres:postgres "$DATA"
  chmod 700 "$DATA"
  as_pg "$BIN/initdb" -D "$DATA" -U postgres --auth-local=peer --auth-host=scram-sha-256 -E UTF8 >/dev/null
  cat >>"$DATA/postgresql.conf" <<CONF
# sandboxflow test cluster: loopback only, sockets in the data dir.
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$DATA'
max_connections = 300
fsync = on
CONF
fi

if ! as_pg "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
  log "starting PostgreSQL on 127.0.0.1:$PORT"
  as_pg "$BIN/pg_ctl" -D "$DATA" -l "$DATA/postgresql.log" -w -t 60 start >/dev/null ||
    { log "PostgreSQL did not start; see $DATA/postgresql.log"; tail -n 30 "$DATA/postgresql.log" >&2; exit 1; }
fi

psql_pg() { as_pg "$BIN/psql" -h "$DATA" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -qtA "$@"; }
if [ "$(psql_pg -c "SELECT 1 FROM pg_roles WHERE rolname = '$ROLE'")" != 1 ]; then
  log "creating role $ROLE"
  psql_pg -c "CREATE ROLE \"$ROLE\" LOGIN CREATEDB PASSWORD '$PASSWORD'"
fi
log "ready: postgres://$ROLE@127.0.0.1:$PORT (Temporal's plugins postgres12_pgx and postgres12)"
