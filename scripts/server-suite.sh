#!/usr/bin/env bash
# Runs Valkey's own TCL tests (third_party/valkey-tests, BSD-3) against `strata serve` and prints
# the pass count of each file. Installs tclsh and the Redis tools if missing (server-tools.sh),
# builds the CLI, starts one server per file on a fresh store and stops it afterwards.
#
#   bash scripts/server-suite.sh [--engine K] [--whole-only] [--debug] [FILE ...]
#
# FILE is a unit name such as unit/type/string (default: the issue's list). With --whole-only,
# only the files docs/server.md lists as passing whole run, and any failure is an error (CI).
# --debug uses the debug build (what `cargo test` has already built) instead of a release one.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/scripts/server-lib.sh"
engine=memory
whole_only=0
profile=release
files=()
while (($#)); do
    case "$1" in
        --engine) engine="$2"; shift ;;
        --whole-only) whole_only=1 ;;
        --debug) profile=debug ;;
        *) files+=("$1") ;;
    esac
    shift
done
# The files that pass whole (docs/server.md, "Valkey's test suite"); CI runs these.
passing_whole=(unit/protocol unit/auth unit/type/incr unit/type/string unit/expire unit/info-command)
if [ ${#files[@]} -eq 0 ]; then
    if [ $whole_only -eq 1 ]; then
        files=("${passing_whole[@]}")
    else
        files=(unit/type/string unit/type/incr unit/keyspace unit/expire unit/protocol unit/auth
            unit/info-command unit/type/hash)
    fi
fi
bash "$repo/scripts/server-tools.sh"
suite_src="$repo/third_party/valkey-tests"
if [ "$profile" = release ]; then
    cargo build --release -q -p strata-cli --manifest-path "$repo/Cargo.toml"
else
    cargo build -q -p strata-cli --manifest-path "$repo/Cargo.toml"
fi
strata="${CARGO_TARGET_DIR:-$repo/target}/$profile/strata"
work="$(mktemp -d)"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
# The suite writes under its own tests/tmp: run a copy.
cp -r "$suite_src" "$work/suite"
port="" pid=""
# Starts `strata serve` on a fresh store on `port`; sets `pid` (start_on_random_port).
launch() {
    rm -rf "$work/store"
    "$strata" serve "$work/store" --engine "$engine" --port "$port" 2>"$work/server.log" &
    pid=$!
}
failed_whole=0
printf '%-22s %6s %6s %8s\n' file passed failed skipped
for file in "${files[@]}"; do
    start_on_random_port 21000 launch
    server_pid=$pid
    log="$work/$(echo "$file" | tr / _).log"
    (cd "$work/suite" && timeout 900 ./runtest --host 127.0.0.1 --port "$port" --singledb \
        --ignore-encoding --ignore-digest --tags -needs:debug --tags -needs:repl --durable \
        --single "$file") >"$log" 2>&1 || true
    plain="$(sed 's/\x1b\[[0-9;]*m//g' "$log")"
    passed=$(grep -c '^\[ok\]' <<<"$plain" || true)
    failed=$(grep -c '^\[err\]\|^\[exception\]' <<<"$plain" || true)
    skipped=$(grep -c '^\[ignore\]\|^\[skip\]' <<<"$plain" || true)
    printf '%-22s %6s %6s %8s\n' "$file" "$passed" "$failed" "$skipped"
    if [ "$failed" -gt 0 ] || ! grep -q 'All tests passed\|The End' <<<"$plain"; then
        if [ $whole_only -eq 1 ]; then
            grep -A3 '^\[err\]\|^\[exception\]' <<<"$plain" >&2 || tail -20 <<<"$plain" >&2
            failed_whole=1
        elif [ -n "${SUITE_VERBOSE:-}" ]; then
            grep -A3 "^\[err\]\|^\[exception\]" <<<"$plain" | cut -c1-300 >&2 || true
        fi
    fi
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
done
exit $failed_whole
