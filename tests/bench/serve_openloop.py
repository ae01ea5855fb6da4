#!/usr/bin/env python3
"""Open-loop load on kb serve's POST /v1/search (scripts/bench-serve.sh).

    serve_openloop.py URL BODIES CONNECTIONS RATE SECONDS

CONNECTIONS keep-alive connections (agents), together sending RATE
requests a second at Poisson arrival times, for SECONDS. Unlike wrk's
closed loop, a request's time counts from when it was due, so a server
that falls behind shows it (no coordinated omission). BODIES holds one
request body a line. Prints one line: n, rate, p50_ms, p99_ms, errors.
"""
import asyncio
import random
import sys
import time
from urllib.parse import urlsplit


async def agent(host, port, bodies, rate, until, lat, errs, rng):
    reader, writer = await asyncio.open_connection(host, port)
    due = time.monotonic() + rng.expovariate(rate)
    i = rng.randrange(len(bodies))
    while due < until:
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        body = bodies[i % len(bodies)]
        i += 1
        writer.write(b"POST /v1/search HTTP/1.1\r\nHost: %s:%d\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                     % (host.encode(), port, len(body)) + body)
        head = await reader.readuntil(b"\r\n\r\n")
        n = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                n = int(line.split(b":")[1])
        await reader.readexactly(n)
        lat.append((time.monotonic() - due) * 1000)
        if not head.startswith(b"HTTP/1.1 200"):
            errs.append(head.split(b"\r\n")[0])
        due += rng.expovariate(rate)
    writer.close()


async def main():
    url, bodies_file, conns, rate, secs = sys.argv[1:6]
    u = urlsplit(url)
    bodies = [l.strip().encode() for l in open(bodies_file) if l.strip()]
    conns, rate, secs = int(conns), float(rate), float(secs)
    lat, errs = [], []
    until = time.monotonic() + secs
    rng = random.Random(5100)
    tasks = [agent(u.hostname, u.port, bodies, rate / conns, until, lat, errs,
                   random.Random(rng.random())) for _ in range(conns)]
    results = await asyncio.gather(*tasks, return_exceptions=True)
    errs += [r for r in results if isinstance(r, Exception)]
    lat.sort()
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else 0.0
    print("n=%d rate=%.1f p50_ms=%.1f p99_ms=%.1f errors=%d"
          % (len(lat), len(lat) / secs, pick(0.5), pick(0.99), len(errs)))


asyncio.run(main())
