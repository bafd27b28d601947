#!/usr/bin/env python3
"""How many interval loads per YCSB E scan an interval cache of C intervals needs at best.

Reproduces `strata bench`'s E key choice: YCSB's ScrambledZipfianGenerator (zipfian over 10^10
items, theta 0.99, folded onto the N keys by a hash), scan lengths uniform 1..100, records in
fixed-size intervals of R records. Counts how often each interval is touched in the second half of
a synthetic trace and reports the loads per scan of the best static cache in hindsight (the C
most-touched intervals). Under independent references no online policy beats the best static
cache in expectation; an offline one (Belady) can, on a given trace.

Usage: python3 interval_cache_optimum.py [N] [R] [C ...]   (needs numpy)
Examples (docs/benchmarks.md, session 8): python3 interval_cache_optimum.py 2000000 22 10578
and python3 interval_cache_optimum.py 2000000 21 10578 12600
"""
import sys

import numpy as np

N = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
R = int(sys.argv[2]) if len(sys.argv) > 2 else 21
CAPACITIES = [int(c) for c in sys.argv[3:]] or [10_000]
OPS = 400_000
THETA, ITEMS = 0.99, 10_000_000_000
ZETAN = 26.46902820178302  # zeta(10^10, 0.99), as YCSB precomputes it

rng = np.random.default_rng(7)
zeta2 = 1 + 0.5**THETA
alpha = 1 / (1 - THETA)
eta = (1 - (2 / ITEMS) ** (1 - THETA)) / (1 - zeta2 / ZETAN)
u = rng.random(OPS)
uz = u * ZETAN
ranks = np.where(uz < 1.0, 0, np.where(uz < zeta2, 1, (ITEMS * (eta * u - eta + 1) ** alpha).astype(np.int64)))


def mix(x):
    """A 64-bit finalizer standing in for YCSB's FNV fold (any good hash gives the same shape)."""
    x = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


starts = (mix(ranks) % np.uint64(N)).astype(np.int64)
lengths = rng.integers(1, 101, size=OPS)
first = starts // R
last = np.minimum((starts + lengths - 1) // R, (N - 1) // R)
half = OPS // 2
touches = np.zeros((N + R - 1) // R)
for step in range(0, 100 // R + 2):
    interval = first[half:] + step
    hit = interval <= last[half:]
    np.add.at(touches, interval[hit], 1)
total = touches.sum()
ranked = np.sort(touches)[::-1]
print(f"intervals touched per scan: {total / (OPS - half):.3f}")
for c in CAPACITIES:
    print(f"cache of {c} intervals: best static loads per scan {(total - ranked[:c].sum()) / (OPS - half):.3f}")
