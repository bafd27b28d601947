#!/usr/bin/env python3
"""Summarises scripts/server-bench.sh's summary.txt: per engine, mode and test, the median
requests/s over rounds with min-max, and the median of the per-round ratios to redis-server."""
import statistics
import sys
from collections import defaultdict

rows = defaultdict(list)  # (who, mode, test) -> [(round, rps)]
rounds = defaultdict(int)  # (who, mode, test) -> rounds seen
for line in open(sys.argv[1]):
    if line.startswith("#") or not line.strip():
        continue
    words = line.split()
    who, mode, test, value = words[0], words[1], " ".join(words[2:-1]), words[-1]
    try:
        rps = float(value)
    except ValueError:
        continue
    key = (who, mode, test)
    rows[key].append((rounds[key], rps))
    rounds[key] += 1

print("| engine | mode | test | requests/s median (min–max) | × redis-server, median of rounds (min–max) |")
print("|---|---|---|---|---|")
for (who, mode, test), values in sorted(rows.items(), key=lambda kv: (kv[0][0] != "redis", kv[0])):
    rps = [v for _, v in values]
    line = f"| {who} | {mode} | {test} | {statistics.median(rps)/1000:.0f}k ({min(rps)/1000:.0f}–{max(rps)/1000:.0f}k) |"
    peer = dict(rows.get(("redis", mode, test), []))
    ratios = [v / peer[r] for r, v in values if r in peer and peer[r] > 0]
    if who != "redis" and ratios:
        line += f" {statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f}) |"
    else:
        line += " — |"
    print(line)
