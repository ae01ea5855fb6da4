#!/usr/bin/env python3
"""bench_cold.py - fresh `kb query` processes, two builds alternating (A/B in one run).
    KB_DIR=KB python3 tests/bench/bench_cold.py OLD_KB_BIN NEW_KB_BIN [N]
N rounds (default 20); each round runs both binaries in both modes (lexical, hybrid),
the order flipped every round, five queries in turn. Prints p50 and p95 wall ms
per binary and mode, and the load average at the end."""
import os, statistics, subprocess, sys, time
bins = {'old': sys.argv[1], 'new': sys.argv[2]}
n = int(sys.argv[3]) if len(sys.argv) > 3 else 20
qs = ["shared memory bank conflicts", "why is my transpose slow", "cp.async.bulk tensor map", "warp shuffle reduction", "pinned host memory copies"]
res = {(b, m): [] for b in bins for m in ('lexical', 'hybrid')}
for i in range(n):
    for m in ('lexical', 'hybrid'):
        for b in (('old', 'new') if i % 2 == 0 else ('new', 'old')):
            t = time.perf_counter()
            subprocess.run([bins[b], 'query', '--mode', m, '--json', '-k', '10', qs[i % 5]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            res[(b, m)].append((time.perf_counter() - t) * 1000)
for (b, m), v in sorted(res.items()):
    v.sort()
    print(f"{b} {m}: p50 {statistics.median(v):.0f} ms, p95 {v[int(0.95 * (len(v) - 1))]:.0f} ms (n={len(v)})")
print("load", os.getloadavg())
