#!/usr/bin/env python3
"""bench_cold.py - fresh `kb query` processes, two builds alternating (A/B in one run).
    KB_DIR=KB python3 tests/bench/bench_cold.py OLD_KB_BIN NEW_KB_BIN [N]
N rounds (default 20); each round runs both binaries in both modes (lexical, hybrid),
the order flipped every round, five queries in turn. KB_OLD and KB_NEW give each build
a KB of its own (a copy of one KB: each keeps its vector file in its own format);
CPUS=0,1 pins every process to those CPUs (taskset), as a machine of that many would
run it. Prints p50 and p95 wall ms and the median CPU ms (user + system) per binary
and mode, and the load average at the end."""
import os, resource, statistics, subprocess, sys, time
bins = {'old': sys.argv[1], 'new': sys.argv[2]}
n = int(sys.argv[3]) if len(sys.argv) > 3 else 20
kbs = {b: os.environ.get('KB_' + b.upper(), os.environ.get('KB_DIR', '')) for b in bins}
pin = ['taskset', '-c', os.environ['CPUS']] if os.environ.get('CPUS') else []
qs = ["shared memory bank conflicts", "why is my transpose slow", "cp.async.bulk tensor map", "warp shuffle reduction", "pinned host memory copies"]
res = {(b, m): [] for b in bins for m in ('lexical', 'hybrid')}
for i in range(n):
    for m in ('lexical', 'hybrid'):
        for b in (('old', 'new') if i % 2 == 0 else ('new', 'old')):
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            subprocess.run(pin + [bins[b], 'query', '--mode', m, '--json', '-k', '10', qs[i % 5]], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=dict(os.environ, KB_DIR=kbs[b]))
            wall = (time.perf_counter() - t) * 1000
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            res[(b, m)].append((wall, (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000))
for (b, m), v in sorted(res.items()):
    w = sorted(x[0] for x in v)
    print(f"{b} {m}: p50 {statistics.median(w):.0f} ms, p95 {w[int(0.95 * (len(w) - 1))]:.0f} ms, cpu p50 {statistics.median(x[1] for x in v):.0f} ms (n={len(v)})")
print("load", os.getloadavg())
