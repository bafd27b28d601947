#!/usr/bin/env bash
# The long fuzz runs of docs/testing.md: every target (or the ones named) for SECONDS each
# (default 3600), JOBS at a time (default 1; one core each), at the lowest CPU priority so other
# work on the machine goes first. Prints one row of docs/testing.md's table per target:
#   | `target` | `commit` | wall seconds | CPU seconds | runs | clean |
#   or ... | FAILED: <libFuzzer's summary> |
# CPU seconds (user + system of cargo-fuzz and the target) say how much of the wall time the
# target really ran: at nice 19 other work on the machine takes the core first.
# Installs cargo-fuzz if it is missing (scripts/fuzz_tools.sh).
# Logs: fuzz/hours/<target>.log; a failure's input is under fuzz/artifacts/<target>/.
#   bash scripts/fuzz_hours.sh [SECONDS] [JOBS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${1:-3600}"
jobs="${2:-1}"
shift 2 || shift $#
targets=("$@")
source ../scripts/fuzz_tools.sh
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
fi
cargo +nightly fuzz build -O
mkdir -p hours
commit="$(git rev-parse --short HEAD)"
run_one() {
    local t="$1" seconds="$2" commit="$3"
    mkdir -p "corpus/$t"
    local log="hours/$t.log" cpu_log="hours/$t.cpu" start end result runs cpu
    start=$(date +%s)
    if /usr/bin/time -o "$cpu_log" -f '%U %S' nice -n 19 \
        cargo +nightly fuzz run -O "$t" "corpus/$t" -- -max_total_time="$seconds" >"$log" 2>&1; then
        result="clean"
    else
        result="FAILED: $(grep -m1 -E 'SUMMARY|ERROR' "$log" | tr '|' '/' || echo 'see the log')"
    fi
    end=$(date +%s)
    runs=$(grep -E '^Done [0-9]+ runs' "$log" | tail -1 | awk '{print $2}')
    cpu=$(tail -1 "$cpu_log" | awk '{printf "%d", $1 + $2}')
    echo "| \`$t\` | \`$commit\` | $((end - start)) s | ${cpu:--} s | ${runs:--} | $result |"
}
export -f run_one
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one "$@"' _ {} "$seconds" "$commit"
