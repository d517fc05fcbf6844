#!/bin/bash
# Entry point of the postgres-age image: on first start, initdb into $PGDATA with
# shared_preload_libraries=age and a password-protected superuser, create the database and
# the age extension; then exec the server. Environment:
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

if [[ "$1" == "postgres" && ! -s "$PGDATA/PG_VERSION" ]]; then
    initialise
fi
exec "$@"
