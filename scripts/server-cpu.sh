#!/usr/bin/env bash
# The server's CPU time per request (user + system, from /proc/<pid>/stat) over one
# redis-benchmark run with `-P 16 -c 50`, for `strata serve` on an engine or for redis-server
# 7.0 (appendonly yes, appendfsync everysec). CPU per request does not drift with the machine's
# noise the way throughput does, so two binaries compare in a few alternating runs
# (docs/benchmarks.md, "One worker per core but one").
#
#   bash scripts/server-cpu.sh [--server memory|f2|...|redis] [--binary PATH] [--test set]
#       [-n 2000000] [--random-keys N] [--threads N] [--budget 16MiB]
#
# The key GET reads is set first, so GET measures hits. --random-keys N spreads the requests
# over N keys (redis-benchmark -r); by default every request names one key.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/scripts/server-lib.sh"
server=memory binary="" test=set requests=2000000 random_keys="" threads=0 budget=16MiB
while (($#)); do
    case "$1" in
        --server) server="$2"; shift ;;
        --binary) binary="$2"; shift ;;
        --test) test="$2"; shift ;;
        -n) requests="$2"; shift ;;
        --random-keys) random_keys="$2"; shift ;;
        --threads) threads="$2"; shift ;;
        --budget) budget="$2"; shift ;;
        *) echo "server-cpu: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
bash "$repo/scripts/server-tools.sh"
if [ -z "$binary" ] && [ "$server" != redis ]; then
    cargo build --release -q -p strata-cli --manifest-path "$repo/Cargo.toml"
    binary="${CARGO_TARGET_DIR:-$repo/target}/release/strata"
fi
work="$(mktemp -d)"
port="" pid=""
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# Starts the server on `port`; sets `pid` (start_on_random_port).
launch() {
    rm -rf "$work/store" "$work/redis"
    if [ "$server" = redis ]; then
        mkdir -p "$work/redis"
        redis-server --port "$port" --bind 127.0.0.1 --dir "$work/redis" --appendonly yes \
            --appendfsync everysec --save "" --daemonize no >"$work/server.log" 2>&1 &
    else
        "$binary" serve "$work/store" --engine "$server" --port "$port" --memory-budget "$budget" \
            --threads "$threads" 2>"$work/server.log" &
    fi
    pid=$!
}

cpu_ticks() {
    awk '{ print $14 + $15 }' "/proc/$pid/stat"
}

start_on_random_port 30000 launch
redis-cli -p "$port" set key:__rand_int__ xxx >/dev/null
spread=()
if [ -n "$random_keys" ]; then spread=(-r "$random_keys"); fi
before=$(cpu_ticks)
rps=$(redis-benchmark -p "$port" -t "$test" -n "$requests" "${spread[@]}" -P 16 -c 50 -q --csv |
    tail -1 | awk -F'","' '{ gsub(/"/, "", $2); print $2 }')
after=$(cpu_ticks)
ticks_per_second=$(getconf CLK_TCK)
python3 - "$server" "$test" "$rps" "$before" "$after" "$ticks_per_second" "$requests" <<'EOF'
import sys
server, test, rps, before, after, hz, n = sys.argv[1:]
us = (float(after) - float(before)) * 1e6 / float(hz) / int(n)
print(f"{server} {test}: {float(rps):,.0f} requests/s, {us:.3f} µs of server CPU per request")
EOF
