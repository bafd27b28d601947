#!/usr/bin/env bash
# A prebuilt libduckdb for `strata repro laser`'s DuckDB system (the `duckdb` feature of
# strata-bench and strata-cli): the duckdb crate's bundled build compiles DuckDB's C++ for
# about 40 minutes on 2 cores, while npm's @duckdb/node-bindings package ships the library.
#
#   eval "$(bash scripts/duckdb-lib.sh [DIR])"   # default DIR: target/duckdb-lib
#   cargo build --release -p strata-cli --features rocksdb,postgres,duckdb
#
# Prints the exports that build and run against it (DUCKDB_LIB_DIR, LD_LIBRARY_PATH).
# Idempotent: an existing library is kept.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$repo_root/target/duckdb-lib}"
# The library the duckdb crate =1.10506.1 binds (DuckDB 1.5.6).
package="@duckdb/node-bindings-linux-x64@1.5.6-r.1"
if [[ ! -f "$dir/libduckdb.so" ]]; then
    mkdir -p "$dir"
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    (cd "$work" && npm pack --silent "$package" >/dev/null && tar xzf ./*.tgz)
    cp "$work/package/libduckdb.so" "$dir/"
fi
echo "export DUCKDB_LIB_DIR='$dir'"
echo "export LD_LIBRARY_PATH='$dir'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
