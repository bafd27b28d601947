#!/usr/bin/env bash
# Installs what the peer engines of `strata bench` need, then builds the CLI with them.
#
# On a fresh Debian (bookworm) machine, from anywhere in the repository, run:
#
#     bash scripts/install-peer-deps.sh
#
# Afterwards `target/release/strata bench --engines memory,rocksdb,lmdb,redb,fjall,sled ...` works.
#
# What it does (idempotent; safe to re-run):
# 1. apt: librocksdb-dev (RocksDB 7.8.3, linked instead of compiling the bundled C++ for ~30 min),
#    libclang-dev + clang (bindgen generates the RocksDB bindings), fonts-dejavu-core (plot text).
#    Skipped when all are installed. Needs root or sudo.
# 2. `cargo build --release -p strata-cli --features peers` with ROCKSDB_LIB_DIR/ROCKSDB_INCLUDE_DIR
#    pointing at the Debian library. The same two variables are set for every cargo command in
#    .cargo/config.toml (read only by librocksdb-sys), so later `cargo test/run --features peers`
#    link the same library. Building the peers takes about a minute on 2 cores.
#
# Options: --no-build (only install packages), --target-dir DIR (passed to cargo as CARGO_TARGET_DIR).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

build=1
while (($#)); do
    case "$1" in
        --no-build) build=0 ;;
        --target-dir)
            [[ $# -ge 2 ]] || { echo "error: --target-dir needs a directory" >&2; exit 2; }
            export CARGO_TARGET_DIR="$2"
            shift
            ;;
        -h | --help)
            sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *) echo "error: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done

packages=(librocksdb-dev libclang-dev clang fonts-dejavu-core)

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "error: this script installs Debian packages (dpkg/apt not found)." >&2
    echo "       Elsewhere: install RocksDB 7.8.x headers + shared library and libclang, set" >&2
    echo "       ROCKSDB_LIB_DIR and ROCKSDB_INCLUDE_DIR, then run" >&2
    echo "       cargo build --release -p strata-cli --features peers" >&2
    exit 1
fi

missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$package")
    fi
done

if ((${#missing[@]} == 0)); then
    echo "==> apt packages already installed: ${packages[*]}"
else
    sudo=()
    if ((EUID != 0)); then
        command -v sudo >/dev/null 2>&1 || { echo "error: not root and sudo not found; run as root" >&2; exit 1; }
        sudo=(sudo)
    fi
    echo "==> missing apt packages: ${missing[*]}"
    echo "+ ${sudo[*]:+${sudo[*]} }apt-get update"
    "${sudo[@]}" apt-get update
    echo "+ ${sudo[*]:+${sudo[*]} }apt-get install -y ${missing[*]}"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
fi

rocksdb_version="$(dpkg-query -W -f='${Version}' librocksdb-dev)"
case "$rocksdb_version" in
    7.8.*) echo "==> librocksdb-dev $rocksdb_version" ;;
    *) echo "warning: librocksdb-dev is $rocksdb_version; the rocksdb crate =0.20.1 expects 7.8.x" >&2 ;;
esac

multiarch="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
export ROCKSDB_LIB_DIR="${ROCKSDB_LIB_DIR:-/usr/lib/$multiarch}"
export ROCKSDB_INCLUDE_DIR="${ROCKSDB_INCLUDE_DIR:-/usr/include}"
echo "==> ROCKSDB_LIB_DIR=$ROCKSDB_LIB_DIR ROCKSDB_INCLUDE_DIR=$ROCKSDB_INCLUDE_DIR"

if ((build == 0)); then
    echo "==> --no-build: done"
    exit 0
fi

command -v cargo >/dev/null 2>&1 || { echo "error: cargo not found; install Rust from https://rustup.rs" >&2; exit 1; }

build_cmd=(cargo build --release -p strata-cli --features peers)
echo "+ ${build_cmd[*]}"
start_seconds=$SECONDS
"${build_cmd[@]}"
echo "==> built in $((SECONDS - start_seconds)) s"
