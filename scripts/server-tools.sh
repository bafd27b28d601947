#!/usr/bin/env bash
# Installs what the `strata serve` checks need from Debian's packages: redis-tools (redis-cli,
# redis-benchmark), redis-server (the peer of scripts/server-bench.sh), nutcracker (twemproxy, for
# scripts/server-shards.sh) and tcl (tclsh, for Valkey's test suite in scripts/server-suite.sh).
# Idempotent: skips what is installed. Needs root or sudo.
#   bash scripts/server-tools.sh
set -euo pipefail
want=()
command -v redis-cli >/dev/null || want+=(redis-tools)
command -v redis-server >/dev/null || want+=(redis-server)
command -v nutcracker >/dev/null || want+=(nutcracker)
command -v tclsh >/dev/null || want+=(tcl)
if [ ${#want[@]} -eq 0 ]; then
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "server-tools: installing ${want[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null || true
# --no-install-recommends; redis-server's package starts a service where systemd runs: not here.
$sudo apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
