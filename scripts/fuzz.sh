#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for SECONDS each (default 15; CI's smoke uses less, the
# hour-long run in docs/testing.md uses 3600). Installs cargo-fuzz if it is missing; needs the
# nightly toolchain. A crash stops the run with libFuzzer's report and the reproducer's path.
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${1:-15}"
shift || true
source ../scripts/fuzz_tools.sh
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cargo +nightly fuzz list)
    # The harness's lints (the fuzz crate is its own workspace: CI's clippy does not reach it)
    # and its own tests (reseal per format, seed files, the treeline checkpoint bit-flip sweep,
    # inputs a model target once failed on),
    # before any target runs.
    cargo +nightly clippy --all-targets -- -D warnings
    cargo +nightly test --release
fi
cargo +nightly fuzz build -O
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    echo "fuzz: $t for ${seconds}s"
    if ! cargo +nightly fuzz run -O "$t" "corpus/$t" -- -max_total_time="$seconds" >"$log" 2>&1; then
        # The whole log: the panic message stands before the stack trace, far from the end.
        cat "$log" >&2
        echo "fuzz: target $t failed; reproducer under fuzz/artifacts/$t/" >&2
        exit 1
    fi
    grep -E '^Done' "$log" || true
done
echo "fuzz: ${#targets[@]} targets clean for ${seconds}s each"
