#!/usr/bin/env bash
# redis-benchmark against `strata serve` on each engine and against redis-server 7.0 (appendonly
# yes, appendfsync everysec: its durable setting closest to strata's default `buffered`), one after
# another on this machine, in alternating rounds. Prints requests per second per test and the
# ratio to redis-server of the same round, and keeps redis-benchmark's CSV under --out.
#
#   bash scripts/server-bench.sh [--engines memory,f2,...] [--rounds 3] [-n 1000000] [--out DIR]
#   bash scripts/server-bench.sh --big [--engines f2,flex,...] [--budget 16MiB] [--keys 2000000]
#
# The first form runs `-t set,get,incr,mset -n N -P 16 -c 50` and `-P 1` (data that fits in
# memory). --big writes `--keys` random keys of 100-byte values through a small memory budget
# (data about ten times the budget), then reads them back; redis-server gets the same
# `maxmemory` with `noeviction` (what a store that must not lose data would set).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/scripts/server-lib.sh"
engines=memory,f2 rounds=3 requests=1000000 out="" big=0 budget=16MiB keys=2000000
while (($#)); do
    case "$1" in
        --engines) engines="$2"; shift ;;
        --rounds) rounds="$2"; shift ;;
        -n) requests="$2"; shift ;;
        --out) out="$2"; shift ;;
        --big) big=1 ;;
        --budget) budget="$2"; shift ;;
        --keys) keys="$2"; shift ;;
        *) echo "server-bench: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
bash "$repo/scripts/server-tools.sh"
cargo build --release -q -p strata-cli --manifest-path "$repo/Cargo.toml"
strata="${CARGO_TARGET_DIR:-$repo/target}/release/strata"
work="$(mktemp -d)"
out="${out:-$work/csv}"
mkdir -p "$out"
pid=""
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$work/store" "$work/redis"
}
trap cleanup EXIT
port=""
budget_bytes=$(python3 -c "import re,sys; t='$budget'.lower().replace('ib','').replace('b',''); m={'k':1<<10,'m':1<<20,'g':1<<30}; print(int(float(t[:-1])*m[t[-1]]) if t[-1] in m else int(t))")

# Starts `$launching` (redis or an engine) on `port`; sets `pid`.
launch() {
    local who="$launching"
    rm -rf "$work/store" "$work/redis"
    if [ "$who" = redis ]; then
        mkdir -p "$work/redis"
        local memory=()
        if [ $big -eq 1 ]; then memory=(--maxmemory "$budget_bytes" --maxmemory-policy noeviction); fi
        redis-server --port "$port" --bind 127.0.0.1 --dir "$work/redis" --appendonly yes \
            --appendfsync everysec --save "" "${memory[@]}" --daemonize no >"$work/redis.log" 2>&1 &
    else
        "$strata" serve "$work/store" --engine "$who" --port "$port" --memory-budget "$budget" \
            2>"$work/serve.log" &
    fi
    pid=$!
}

start() {
    launching="$1"
    start_on_random_port 30000 launch
}

stop() {
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
    pid=""
}

# Runs one redis-benchmark and prints "test rps" lines; if it stops on an error reply (an
# out-of-memory server), prints "test stopped: <error>" instead.
bench() {
    local label="$1"
    shift
    if ! redis-benchmark -p "$port" --csv "$@" >"$out/$label.csv" 2>"$out/$label.err"; then
        echo "stopped: $(grep -m1 -o 'Error.*' "$out/$label.err" "$out/$label.csv" | head -1)"
        return 0
    fi
    tail -n +2 "$out/$label.csv" | awk -F'","' '{ gsub(/"/, "", $1); gsub(/"/, "", $2); print $1, $2 }'
}

run_fits() {
    local who="$1" round="$2"
    start "$who"
    bench "$who-r$round-P16" -t set,get,incr,mset -n "$requests" -P 16 -c 50 | sed "s/^/$who P16 /"
    bench "$who-r$round-P1" -t set,get,incr,mset -n $((requests / 4)) -P 1 -c 50 | sed "s/^/$who P1 /"
    stop
}

run_big() {
    local who="$1" round="$2"
    start "$who"
    bench "$who-r$round-big-set" -t set -n "$keys" -r "$keys" -d 100 -P 16 -c 50 | sed "s/^/$who big /"
    bench "$who-r$round-big-get" -t get -n "$keys" -r "$keys" -d 100 -P 16 -c 50 | sed "s/^/$who big /"
    local stored info
    stored=$(redis-cli -p "$port" dbsize 2>/dev/null || echo "?")
    info=$(redis-cli -p "$port" info all 2>/dev/null | tr -d '\r')
    echo "$who big keys_stored $stored"
    echo "$who big used_memory_rss $(grep -m1 '^used_memory_rss:' <<<"$info" | cut -d: -f2)"
    echo "$who big disk_bytes $(grep -m1 '^strata_disk_bytes:' <<<"$info" | cut -d: -f2)"
    stop
}

IFS=, read -r -a list <<<"$engines"
echo "# machine: $(nproc) cores, $(uname -r); redis-server $(redis-server --version | awk '{print $3}')"
echo "# who mode test requests_per_second"
for round in $(seq "$rounds"); do
    for who in redis "${list[@]}"; do
        if [ $big -eq 1 ]; then run_big "$who" "$round"; else run_fits "$who" "$round"; fi
    done
done | tee "$out/summary.txt"
echo "# CSV files: $out"
