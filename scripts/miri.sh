#!/usr/bin/env bash
# Runs the tests that exercise unsafe code under miri (undefined behaviour, use-after-free, data
# races): f2's epoch-protected page ring and the epoch itself, and strata-io's aligned buffers.
# Installs the miri component of the nightly toolchain if it is missing.
#   bash scripts/miri.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo +nightly miri --version >/dev/null 2>&1; then
    rustup component add miri rust-src --toolchain nightly
fi
# Permissive provenance (the default): parking_lot_core casts integers to pointers internally.
cargo +nightly miri test -p engine-f2 --lib -- log::ring log::epoch
cargo +nightly miri test -p strata-io --lib -- file::aligned
