#!/usr/bin/env bash
# Model-checks f2's epoch and page ring with loom (docs/testing.md, "Miri" and "Loom"): builds
# engine-f2 with its `loom` feature (loom's atomics and mutex in place of std's and parking_lot's,
# crates/engine-f2/src/log/sync.rs) and runs only the model tests, `log::model`: with the feature
# nothing else in the crate works outside `loom::model`. Every interleaving up to 2 preemptions
# (LOOM_MAX_PREEMPTIONS=N explores more, and takes much longer).
#   bash scripts/loom.sh [extra cargo test args, e.g. -j 1]
set -euo pipefail
cd "$(dirname "$0")/.."
# The code behind the feature gets the same lints as the rest (CI's clippy runs without it).
cargo clippy -p engine-f2 --features loom --lib --tests "$@" -- -D warnings
# The dev profile (as `cargo test`): only engine-f2 and loom's own dependencies are built anew.
cargo test -p engine-f2 --features loom --lib "$@" -- log::model
