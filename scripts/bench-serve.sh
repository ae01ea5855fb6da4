#!/usr/bin/env bash
# The serving figures of BENCHMARKS.md ("Serving: kb serve"), as Markdown:
#   scripts/bench-serve.sh BUILD [KB]
# BUILD may be another checkout's build folder (../main/build: the old
# binary, for a comparison in one sitting).
# KB is a KB of the whole test corpus with vectors (default
# BUILD/bench-kb-full, which `make bench` builds; it is only read). Load
# from wrk (make deps) with tests/bench/serve-search.lua; each run lasts
# KB_BENCH_SECONDS (default 20). The search-while-ingesting run ingests a
# copy of the KB and needs the mirror ($KB_MIRROR).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
kbdir=${2:-$top/$build/bench-kb-full}
kb="$top/$build/kb"
secs=${KB_BENCH_SECONDS:-20}
lua="$top/tests/bench/serve-search.lua"
unique_lua="$top/tests/bench/serve-unique.lua"   # never the same body twice
mcp_lua="$top/tests/bench/serve-mcp.lua"   # the same searches as MCP tools/call on /mcp
command -v wrk >/dev/null || { echo "bench-serve: no wrk; run 'make deps'" >&2; exit 1; }
[ -f "$kbdir/kb.sqlite" ] || { echo "bench-serve: no KB at '$kbdir'; run 'make bench' first or name one" >&2; exit 1; }
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT

# request bodies: the 20 short queries and the dev set's 30 long ones,
# hybrid (the default) and lexical, k = 10, whole chunks
python3 - "$top/tests/bench/short-queries.json" "${KB_QRELS:-$top/../shared/eval/retrieval-dev.json}" "$tmp" <<'PY'
import json, sys
short = [q["query"] for q in json.load(open(sys.argv[1]))["queries"]]
long_ = [q["query"] for q in json.load(open(sys.argv[2]))["queries"]]
for name, qs in (("short", short), ("long", long_)):
    for mode in ("hybrid", "lexical"):
        with open("%s/%s-%s.txt" % (sys.argv[3], name, mode), "w") as f:
            for q in qs:
                f.write(json.dumps({"query": q, "k": 10, "mode": mode}) + "\n")
# queries never asked twice (the caches' misses): the short ones and both
# dev sets' questions, each with a case number of its own
dev2 = sys.argv[2].replace("retrieval-dev.json", "retrieval-dev2.json")
more = [q["query"] for q in json.load(open(dev2))["queries"]] if dev2 != sys.argv[2] else []
base = short + long_ + more
with open("%s/unique-hybrid.txt" % sys.argv[3], "w") as f:
    for n in range(40000):
        q = "%s (case %d)" % (base[n % len(base)], n)
        f.write(json.dumps({"query": q, "k": 10, "mode": "hybrid"}) + "\n")
PY

start() {   # KB [serve options]: kb serve on a free port; sets pid, url
    "$kb" --kb "$1" -q serve --listen 127.0.0.1:0 "${@:2}" >"$tmp/out" 2>"$tmp/err" &
    pid=$!
    url=
    for _ in $(seq 200); do
        url=$(sed -n 's/^listening on //p' "$tmp/out")
        [ -n "$url" ] && return 0
        sleep 0.05
    done
    echo "bench-serve: kb serve did not start: $(cat "$tmp/err")" >&2
    exit 1
}
stop() { kill -TERM "$pid"; wait "$pid"; pid=; }
mem() { awk -v k="$1:" '$1 == k { printf "%.0f", $2 / 1024 }' "/proc/$pid/status"; }

# wrk_row LABEL CONNS BODIES|PATH [SECONDS]: one wrk run, one table row
wrk_row() {
    local label=$1 conns=$2 what=$3 d=${4:-$secs} threads=2
    [ "$conns" -lt 2 ] && threads=1
    sleep 2   # what the last run left in flight is dropped (its clients are gone)
    if [ -f "$what" ]; then
        wrk -t$threads -c"$conns" -d"${d}s" --timeout 60s --latency -s "${script:-$lua}" "$url" -- "$what" "$threads" >"$tmp/wrk" 2>&1
    else
        wrk -t$threads -c"$conns" -d"${d}s" --timeout 60s --latency "$url$what" >"$tmp/wrk" 2>&1
    fi
    python3 - "$tmp/wrk" "$label" "$conns" "$(mem VmRSS)" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
def ms(v):
    n, unit = re.match(r"([\d.]+)(us|ms|s|m)", v).groups()
    return float(n) * {"us": 0.001, "ms": 1, "s": 1000, "m": 60000}[unit]
p = {k: ms(v) for k, v in re.findall(r"^\s+(50|99)%\s+(\S+)", text, re.M)}
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
n = int(re.search(r"(\d+) requests in", text).group(1))
errs = sum(int(x) for x in re.findall(r"(?:connect|read|write|timeout) (\d+)", text))
errs += int((re.search(r"Non-2xx or 3xx responses: (\d+)", text) or [0, 0])[1])
print("| %s | %s | %d | %.0f | %.1f | %.1f | %d | %s |" % (
    sys.argv[2], sys.argv[3], n, rps, p["50"], p["99"], errs, sys.argv[4]))
PY
}

# open_row RATE: 64 agents on keep-alive connections sending RATE
# searches a second in all, at Poisson times (tests/bench/serve_openloop.py)
open_row() {
    sleep 2
    python3 "$top/tests/bench/serve_openloop.py" "$url" "$tmp/short-hybrid.txt" 64 "$1" "$secs" |
        sed -n "s/n=\([0-9]*\) rate=\([0-9.]*\) p50_ms=\([0-9.]*\) p99_ms=\([0-9.]*\) errors=\([0-9]*\)/| $1 | \1 | \2 | \3 | \4 | \5 | $(mem VmRSS) |/p"
}

header() {
    echo "| queries | connections | requests | req/s | p50 ms | p99 ms | errors | server RSS MB |"
    echo "|---|---|---|---|---|---|---|---|"
}

echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -n1), $(nproc) CPUs;" \
     "load average $(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
start "$kbdir"
echo "kb serve, $(nproc) workers (the default), no access log (-q); wrk with 2 threads on the" \
     "same 2 CPUs, each run ${secs} s after a warm-up; POST /v1/search, k = 10, whole chunks"
echo
# warm every worker: its FAISS index and embedder load on its first search
wrk -t2 -c8 -d5s --timeout 60s -s "$lua" "$url" -- "$tmp/short-hybrid.txt" >/dev/null 2>&1
# what HTTP and JSON add: the search's own time (took_ms, in the server)
# against the client's, one request at a time
python3 - "$url" "$tmp/short-hybrid.txt" <<'PY'
import http.client, json, sys, time, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
c = http.client.HTTPConnection(u.hostname, u.port)
bodies = [l.strip() for l in open(sys.argv[2]) if l.strip()]
client, server = [], []
for b in bodies * 3:
    t = time.perf_counter()
    c.request("POST", "/v1/search", b)
    j = json.loads(c.getresponse().read())
    client.append((time.perf_counter() - t) * 1000)
    server.append(j["took_ms"])
med = lambda v: sorted(v)[len(v) // 2]
print("One client, one request at a time (%d searches, short, hybrid): p50 %.1f ms at the"
      " client, of which the search itself (took_ms) %.1f ms\n" % (len(client), med(client), med(server)))
PY
header
for c in 1 8 64; do wrk_row "short, hybrid" "$c" "$tmp/short-hybrid.txt"; done
for c in 1 8 64; do wrk_row "long, hybrid" "$c" "$tmp/long-hybrid.txt"; done
for c in 1 8 64; do wrk_row "short, lexical" "$c" "$tmp/short-lexical.txt"; done
# the rows above cycle through 20 (or 30) queries: after the first round
# each is a hit of the result cache; these never repeat a query (misses of
# both caches: a whole search each). The bodies file lasts 40,000 requests.
for c in 1 8 64; do script=$unique_lua wrk_row "unique, hybrid" "$c" "$tmp/unique-hybrid.txt"; done
wrk_row "short, hybrid" 1000 "$tmp/short-hybrid.txt"
# the same searches through MCP (2026-07-28 tools/call on /mcp, no session;
# the reply carries the results twice, structured and as text, within the
# default budget of 8,000 tokens)
for c in 1 8 64; do script=$mcp_lua wrk_row "/mcp short, hybrid" "$c" "$tmp/short-hybrid.txt"; done
for c in 1 8 64; do script=$mcp_lua wrk_row "/mcp short, lexical" "$c" "$tmp/short-lexical.txt"; done
script=$mcp_lua wrk_row "/mcp short, hybrid" 1000 "$tmp/short-hybrid.txt"
wrk_row "GET /healthz" 64 /healthz
wrk_row "GET /healthz" 1000 /healthz
echo
echo "Open loop: 64 agents on keep-alive connections, searching (short, hybrid)" \
     "at Poisson times, RATE searches a second in all; latency from when each was due:"
echo
echo "| RATE /s | requests | achieved /s | p50 ms | p99 ms | errors | server RSS MB |"
echo "|---|---|---|---|---|---|---|"
for r in 10 20 40; do open_row "$r"; done
echo
echo "peak server memory (VmHWM) over these runs: $(mem VmHWM) MB"
stop
echo

if [ -n "${KB_MIRROR:-}" ] && [ -d "$KB_MIRROR/best-practices" ]; then
    echo "Search while an ingest runs (a copy of the KB; the Best Practices Guide" \
         "ingested again as a new source with embeddings, 8 clients, short hybrid queries):"
    echo
    cp -a "$kbdir" "$tmp/kb"
    start "$tmp/kb"
    wrk -t2 -c8 -d5s --timeout 60s -s "$lua" "$url" -- "$tmp/short-hybrid.txt" >/dev/null 2>&1
    header
    wrk_row "quiet" 8 "$tmp/short-hybrid.txt"
    t0=$(date +%s)
    "$kb" --kb "$tmp/kb" -q ingest --source bench-extra "$KB_MIRROR/best-practices/markdown/" &
    ingest=$!
    wrk_row "during the ingest" 8 "$tmp/short-hybrid.txt"
    running=$(kill -0 "$ingest" 2>/dev/null && echo yes || echo no)
    wait "$ingest"
    echo
    echo "ingest: $(( $(date +%s) - t0 )) s, still running when the measurement ended: $running;" \
         "after it the new source is searchable: $(curl -s --noproxy '*' "$url/v1/search" \
         -d '{"query": "coalesced access to global memory", "k": 50, "sources": ["bench-extra"]}' |
         python3 -c 'import json,sys; print(len(json.load(sys.stdin)["results"]) > 0)')"
    stop
fi
