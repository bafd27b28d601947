#!/usr/bin/env bash
# A private PostgreSQL 15 cluster for `strata repro laser`'s HTAP comparison (issue 33), on a
# local port with its socket in the cluster's own directory, started and stopped by the
# benchmark. Installs Debian's postgresql-15 if it is missing (root or sudo).
#
#   bash scripts/postgres.sh start DIR PORT SHARED_BUFFERS   # e.g. start /tmp/pg 54329 64MB
#   bash scripts/postgres.sh stop DIR
#
# `start` prints the connection string (`host=DIR port=PORT user=postgres dbname=postgres`).
# The server runs as user `postgres` when started by root (initdb refuses root). Durability to
# match Strata's default (`Durability::Buffered`: the WAL handed to the OS, not fsynced per
# commit): synchronous_commit=off; fsync stays on, so checkpoints are durable.
set -euo pipefail

bin=/usr/lib/postgresql/15/bin
install_if_missing() {
    [[ -x "$bin/initdb" ]] && return
    local sudo=""
    [[ $(id -u) -eq 0 ]] || sudo=sudo
    $sudo apt-get install -y postgresql-15 >/dev/null
}

as_owner() {
    if [[ $(id -u) -eq 0 ]]; then
        su postgres -s /bin/bash -c "$*"
    else
        bash -c "$*"
    fi
}

case "${1:-}" in
    start)
        dir="$2" port="$3" buffers="$4"
        install_if_missing
        mkdir -p "$dir"
        [[ $(id -u) -eq 0 ]] && chown postgres "$dir"
        as_owner "$bin/initdb -D '$dir/data' -U postgres -A trust --no-sync" >/dev/null
        as_owner "$bin/pg_ctl -D '$dir/data' -l '$dir/log' -w -o \"-p $port -k $dir -c listen_addresses='' \
            -c shared_buffers=$buffers -c synchronous_commit=off -c max_wal_size=4GB \
            -c checkpoint_timeout=30min\" start" >/dev/null
        echo "host=$dir port=$port user=postgres dbname=postgres"
        ;;
    stop)
        dir="$2"
        as_owner "$bin/pg_ctl -D '$dir/data' -m fast -w stop" >/dev/null || true
        ;;
    *)
        sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
esac
