#!/usr/bin/env bash
# Make sure the PostgreSQL the tests use answers: REGISTRY_TEST_DATABASE_URL, by default
# postgres://postgres@127.0.0.1:5432/test. Starts the local cluster when it does not answer
# (pg_ctlcluster, else `service postgresql start`) and creates the database when it is missing.
set -euo pipefail

url="${REGISTRY_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}"
server_url="${url%/*}/postgres"
database="${url##*/}"
database="${database%%\?*}"

for tool in pg_isready psql; do
    command -v "$tool" >/dev/null || { echo "ensure-postgres: needs $tool" >&2; exit 1; }
done

if ! pg_isready -q -d "$server_url"; then
    echo "ensure-postgres: PostgreSQL does not answer; starting the local server"
    started=no
    if command -v pg_ctlcluster >/dev/null; then
        for cluster in /etc/postgresql/*/*/; do
            [[ -d "$cluster" ]] || continue
            version="$(basename "$(dirname "$cluster")")"
            name="$(basename "$cluster")"
            pg_ctlcluster "$version" "$name" start && started=yes
        done
    fi
    if [[ "$started" == no ]] && command -v service >/dev/null; then
        service postgresql start && started=yes
    fi
    for _ in $(seq 60); do
        pg_isready -q -d "$server_url" && break
        sleep 0.5
    done
    pg_isready -q -d "$server_url" || {
        echo "ensure-postgres: PostgreSQL at $server_url still does not answer" >&2
        exit 1
    }
fi

exists="$(psql "$server_url" -Atc "SELECT 1 FROM pg_database WHERE datname = '$database'")"
if [[ "$exists" != 1 ]]; then
    echo "ensure-postgres: creating database $database"
    psql "$server_url" -qc "CREATE DATABASE \"$database\""
fi
echo "ensure-postgres: PostgreSQL is up, database $database exists"
