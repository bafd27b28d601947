#!/usr/bin/env bash
# Sourced by scripts/fuzz.sh and scripts/fuzz_hours.sh: installs what fuzzing needs on a fresh
# machine (the nightly toolchain and cargo-fuzz) when it is missing.
if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
