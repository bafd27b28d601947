#!/usr/bin/env bash
# Three `strata serve` shards behind twemproxy (Debian's nutcracker: ketama consistent hashing,
# `redis: true`), all on loopback. docs/server.md ("Sharding with twemproxy") says what works
# through the proxy and how to spread the shards over machines.
#
#   bash scripts/server-shards.sh start [--dir D] [--engine K] [--base-port P] [--proxy-port Q]
#        [--durability sync|buffered|none] [--strata BIN]
#   bash scripts/server-shards.sh stop [--dir D]
#   bash scripts/server-shards.sh kill-shard N [--dir D]     # SIGKILL shard N (1..3)
#   bash scripts/server-shards.sh start-shard N [--dir D]    # start it again on its store
#
# Defaults: --dir /tmp/strata-shards, --engine flex, shards on ports 7001-7003, the proxy on
# 22121; then `redis-cli -p 22121` and `redis-benchmark -p 22121 -t set,get` go through the proxy.
# Installs nutcracker and the Redis tools if missing (server-tools.sh); builds the CLI unless
# --strata names a binary.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/scripts/server-lib.sh"
action="${1:-}"
shift || true
shard=""
case "$action" in
    kill-shard | start-shard) shard="${1:?which shard (1-3)?}"; shift ;;
    start | stop) ;;
    *) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
dir=/tmp/strata-shards engine=flex base_port=7001 proxy_port=22121 durability=buffered strata=""
while (($#)); do
    case "$1" in
        --dir) dir="$2"; shift ;;
        --engine) engine="$2"; shift ;;
        --base-port) base_port="$2"; shift ;;
        --proxy-port) proxy_port="$2"; shift ;;
        --durability) durability="$2"; shift ;;
        --strata) strata="$2"; shift ;;
        *) echo "server-shards: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

start_shard() {
    local n="$1"
    local port
    port="$(cat "$dir/shard$n.port")"
    "$(cat "$dir/strata-bin")" serve "$dir/shard$n" --engine "$(cat "$dir/engine")" --port "$port" \
        --durability "$(cat "$dir/durability")" 2>>"$dir/shard$n.log" &
    echo $! >"$dir/shard$n.pid"
    wait_for_port "$port"
}

stop_pid_file() {
    local file="$1" signal="$2"
    [ -f "$file" ] || return 0
    kill "-$signal" "$(cat "$file")" 2>/dev/null || true
    while kill -0 "$(cat "$file")" 2>/dev/null; do sleep 0.05; done
    rm -f "$file"
}

case "$action" in
    start)
        bash "$repo/scripts/server-tools.sh"
        if [ -z "$strata" ]; then
            cargo build --release -q -p strata-cli --manifest-path "$repo/Cargo.toml"
            strata="${CARGO_TARGET_DIR:-$repo/target}/release/strata"
        fi
        mkdir -p "$dir"
        echo "$strata" >"$dir/strata-bin"
        echo "$engine" >"$dir/engine"
        echo "$durability" >"$dir/durability"
        servers=""
        for n in 1 2 3; do
            echo $((base_port + n - 1)) >"$dir/shard$n.port"
            servers+="    - 127.0.0.1:$((base_port + n - 1)):1 shard$n"$'\n'
            start_shard "$n"
        done
        # auto_eject_hosts false: a shard that is down makes its keys fail, never move to another
        # shard (which would split a key's history between two stores).
        cat >"$dir/nutcracker.yml" <<EOF
strata:
  listen: 127.0.0.1:$proxy_port
  hash: fnv1a_64
  distribution: ketama
  redis: true
  auto_eject_hosts: false
  server_retry_timeout: 200
  timeout: 5000
  servers:
$servers
EOF
        nutcracker -t -c "$dir/nutcracker.yml" >/dev/null
        nutcracker -c "$dir/nutcracker.yml" -o "$dir/nutcracker.log" -p "$dir/nutcracker.pid" \
            -s $((proxy_port + 1)) -a 127.0.0.1 -d
        wait_for_port "$proxy_port"
        echo "server-shards: 3 '$engine' shards on ports $base_port-$((base_port + 2)), twemproxy on $proxy_port"
        ;;
    stop)
        stop_pid_file "$dir/nutcracker.pid" TERM
        for n in 1 2 3; do stop_pid_file "$dir/shard$n.pid" TERM; done
        ;;
    kill-shard) stop_pid_file "$dir/shard$shard.pid" KILL ;;
    start-shard) start_shard "$shard" ;;
esac
