#!/usr/bin/env bash
# make bench: the figures of BENCHMARKS.md, printed as Markdown.
#   scripts/bench.sh BUILD
# Needs the mirror ($KB_MIRROR) and the model (make model). Builds its KBs
# under BUILD/bench-kb-*; set KB_BENCH_SKIP_EMBED=1 to skip the full
# ingest with embeddings (several minutes on 2 cores), KB_BENCH_SKIP_SERVE=1
# to skip the serving figures (scripts/bench-serve.sh, a few minutes).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
kb="$top/$build/kb"
qrels=${KB_QRELS:-$top/../shared/eval/retrieval-dev.json}
manifest="$top/corpus/sources.json"
lex="$top/$build/bench-kb-lexical"
full="$top/$build/bench-kb-full"
: "${KB_MIRROR:?set KB_MIRROR to the document mirror}"
cd "$top"
make -s --no-print-directory BUILD="$build" "$build/bench/bench_query" >&2

secs() { python3 -c "import sys,time; print('%.2f' % (time.time() - float(sys.argv[1])))" "$1"; }
now() { python3 -c 'import time; print(time.time())'; }
size_mb() { du -sm "$1" | cut -f1; }

echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -n1), $(nproc) CPUs;" \
     "load average $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%Y-%m-%d)"
echo

echo "## Ingest (lexical only)"
rm -rf "$lex"
t=$(now); "$kb" --kb "$lex" -q ingest --no-embed --manifest "$manifest"; full_s=$(secs "$t")
t=$(now); "$kb" --kb "$lex" -q ingest --no-embed --manifest "$manifest"; re_s=$(secs "$t")
chunks=$(sqlite3 "$lex/kb.sqlite" "SELECT count(*) FROM chunks")
echo "| what | value |"
echo "|---|---|"
echo "| full ingest of the test corpus, no embeddings | ${full_s} s ($chunks chunks) |"
echo "| re-ingest of the unchanged corpus (budget 5 s) | ${re_s} s |"
echo "| KB size on disk | $(size_mb "$lex") MB |"
echo

if [ -z "${KB_BENCH_SKIP_EMBED:-}" ]; then
    echo "## Ingest with embeddings"
    rm -rf "$full"
    t=$(now)
    /usr/bin/time -f '%M' -o "$top/$build/bench-maxrss" \
        "$kb" --kb "$full" -q ingest --manifest "$manifest"
    emb_s=$(secs "$t")
    t=$(now); "$kb" --kb "$full" -q ingest --manifest "$manifest"; re2_s=$(secs "$t")
    echo "| what | value |"
    echo "|---|---|"
    echo "| full ingest with embeddings | ${emb_s} s ($chunks chunks) |"
    echo "| peak memory of that ingest | $(( $(cat "$top/$build/bench-maxrss") / 1024 )) MB |"
    echo "| re-ingest of the unchanged corpus | ${re2_s} s |"
    echo "| KB size on disk (SQLite + FAISS) | $(size_mb "$full") MB, index file $(du -k "$full"/vectors.*.faiss | cut -f1) KB |"
    echo
fi
qkb=$full
[ -d "$full" ] || qkb=$lex

echo "## Query latency"
echo
echo "In-process, warm, the dev set's 30 queries x 5 rounds ($(basename "$qkb")):"
echo
echo "| mode | p50 ms | p99 ms | mean: lexical search | query embedding (beside it) | vector search | fusion + results |"
echo "|---|---|---|---|---|---|---|"
"$top/$build/bench/bench_query" "$qkb" "$qrels" 5 |
    sed -n 's/mode=\([a-z]*\) n=[0-9]* p50_ms=\([0-9.]*\) p99_ms=\([0-9.]*\) mean_lexical_ms=\([0-9.]*\) mean_embed_ms=\([0-9.]*\) mean_vector_ms=\([0-9.]*\) mean_results_ms=\([0-9.]*\)/| \1 | \2 | \3 | \4 | \5 | \6 | \7 |/p'
echo
echo "The same for 20 short queries as typed at a shell (tests/bench/short-queries.json):"
echo
echo "| mode | p50 ms | p99 ms | mean: lexical search | query embedding (beside it) | vector search | fusion + results |"
echo "|---|---|---|---|---|---|---|"
"$top/$build/bench/bench_query" "$qkb" "$top/tests/bench/short-queries.json" 5 |
    sed -n 's/mode=\([a-z]*\) n=[0-9]* p50_ms=\([0-9.]*\) p99_ms=\([0-9.]*\) mean_lexical_ms=\([0-9.]*\) mean_embed_ms=\([0-9.]*\) mean_vector_ms=\([0-9.]*\) mean_results_ms=\([0-9.]*\)/| \1 | \2 | \3 | \4 | \5 | \6 | \7 |/p'
echo
echo "As a fresh process (\`kb query\`, 20 runs each):"
echo
echo "| mode | p50 ms | p99 ms |"
echo "|---|---|---|"
for mode in lexical hybrid; do
    python3 - "$kb" "$qkb" "$mode" <<'PY'
import subprocess, sys, time
kb, kbdir, mode = sys.argv[1:4]
qs = ["why is my transpose slow", "cp.async.bulk.tensor", "shared memory bank conflicts",
      "how many registers per thread", "warp shuffle reduction"]
t = []
for i in range(20):
    s = time.time()
    subprocess.run([kb, "--kb", kbdir, "query", "--mode", mode, "--json", qs[i % len(qs)]],
                   check=True, stdout=subprocess.DEVNULL)
    t.append((time.time() - s) * 1000)
t.sort()
print("| %s | %.1f | %.1f |" % (mode, t[len(t) // 2], t[min(len(t) - 1, int(len(t) * 0.99))]))
PY
done
echo

echo "## kb mcp over stdio"
echo
echo "tests/bench/bench_mcp.py, the short queries, 5 rounds ($(basename "$qkb")):"
echo
python3 "$top/tests/bench/bench_mcp.py" "$kb" "$qkb" "$top/tests/bench/short-queries.json" 5
echo

echo "## Retrieval quality (dev set, k = 10)"
echo
echo '```'
"$kb" --kb "$qkb" eval "$qrels" | sed -n '/^mode/,$p'
echo '```'
echo
qrels2=${KB_QRELS2:-$top/../shared/eval/retrieval-dev2.json}
if [ -f "$qrels2" ]; then
    echo "## Retrieval quality (dev2 set, k = 10)"
    echo
    echo '```'
    "$kb" --kb "$qkb" eval "$qrels2" | sed -n '/^mode/,$p'
    echo '```'
    echo
fi

if [ -d "$full" ]; then
    echo "## An embedder adapted to the KB (kb tune)"
    echo
    scripts/bench-tune.sh "$build" "$full"
    echo
fi

if [ -x scripts/bench-embed.sh ]; then
    echo "## Embeddings"
    echo
    scripts/bench-embed.sh "$build" 3
fi

if [ -z "${KB_BENCH_SKIP_SERVE:-}" ] && [ -d "$full" ]; then
    echo "## Serving (kb serve)"
    echo
    scripts/bench-serve.sh "$build" "$full"
fi
