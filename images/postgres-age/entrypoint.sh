#!/bin/bash
# Entry point of the postgres-age image: on first start, initdb into $PGDATA with
# shared_preload_libraries=age and a password-protected superuser, create the database and
# the age extension; on every later start, set the superuser's password to the one given (the
# credentials Secret is the source of truth: a data volume kept from a deleted cortex, or a
# password changed in the Secret, must not lock the server and the migrations out); then exec
# the server. Environment:
#   POSTGRES_PASSWORD or POSTGRES_PASSWORD_FILE  superuser password (required on first start)
#   POSTGRES_USER (default postgres), POSTGRES_DB (default cortex)
set -euo pipefail

POSTGRES_USER="${POSTGRES_USER:-postgres}"
POSTGRES_DB="${POSTGRES_DB:-cortex}"

password() {
    if [[ -n "${POSTGRES_PASSWORD_FILE:-}" ]]; then
        cat "$POSTGRES_PASSWORD_FILE"
    elif [[ -n "${POSTGRES_PASSWORD:-}" ]]; then
        printf '%s' "$POSTGRES_PASSWORD"
    else
        echo "entrypoint: set POSTGRES_PASSWORD or POSTGRES_PASSWORD_FILE" >&2
        exit 64
    fi
}

initialise() {
    local pwfile
    pwfile="$(mktemp)"
    password >"$pwfile"
    initdb --username="$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust \
        --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 -D "$PGDATA"
    rm -f "$pwfile"
    {
        echo "listen_addresses = '*'"
        echo "shared_preload_libraries = 'age'"
        echo "password_encryption = 'scram-sha-256'"
    } >>"$PGDATA/postgresql.conf"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start
    if [[ "$POSTGRES_DB" != postgres ]]; then
        psql -v ON_ERROR_STOP=1 --username="$POSTGRES_USER" --dbname=postgres \
            -c "CREATE DATABASE \"$POSTGRES_DB\""
    fi
    psql -v ON_ERROR_STOP=1 --username="$POSTGRES_USER" --dbname="$POSTGRES_DB" \
        -c "CREATE EXTENSION IF NOT EXISTS age"
    pg_ctl -D "$PGDATA" -m fast -w stop
}

sync_password() {
    # Local socket only (listen_addresses=''), trust auth on it (initdb --auth-local=trust);
    # the password reaches psql through its environment, never a command line or a log.
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w -t 300 start
    CORTEX_SUPERUSER_PASSWORD="$(password)" psql -v ON_ERROR_STOP=1 -q \
        --username="$POSTGRES_USER" --dbname=postgres -v user="$POSTGRES_USER" <<'SQL'
\getenv pw CORTEX_SUPERUSER_PASSWORD
ALTER ROLE :"user" PASSWORD :'pw';
SQL
    pg_ctl -D "$PGDATA" -m fast -w stop
}

if [[ "$1" == "postgres" ]]; then
    if [[ -s "$PGDATA/PG_VERSION" ]]; then
        sync_password
    else
        initialise
    fi
fi
exec "$@"
