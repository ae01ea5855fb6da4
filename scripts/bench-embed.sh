#!/usr/bin/env bash
# Embedding benchmark of the local all-MiniLM-L6-v2 (BENCHMARKS.md, "Embeddings"):
# chunks of 256 tokens per second at 1 and 2 threads and the query-embedding
# latency, for each BLAS (Debian's OpenBLAS and BLIS), best of RUNS runs.
#   scripts/bench-embed.sh [BUILD] [RUNS]    (make bench calls it)
# Prints a Markdown table on stdout. Needs the model (make deps).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
runs=${2:-3}
chunks=${KB_BENCH_CHUNKS:-64}
cd "$top"

make -s --no-print-directory BUILD="$build" "$build/bench/bench_embed" >&2
make -s --no-print-directory BUILD="$build-blis" BLAS=blis FAISS_CAPI="$build/faiss-capi" \
  "$build-blis/bench/bench_embed" >&2

field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p"; }

# best of $runs: the highest throughput, the lowest p50 latency
best() {  # binary threads
  local bin=$1 th=$2 cps=0 p50=1e9 p99=1e9 line
  for _ in $(seq "$runs"); do
    line=$("$bin" "$th" "$chunks")
    c=$(field chunks_per_s <<<"$line"); q=$(field query_p50_ms <<<"$line"); q99=$(field query_p99_ms <<<"$line")
    cps=$(awk -v a="$cps" -v b="$c" 'BEGIN{print (b>a)?b:a}')
    if awk -v a="$q" -v b="$p50" 'BEGIN{exit !(a<b)}'; then p50=$q; p99=$q99; fi
  done
  printf '%s %s %s\n' "$cps" "$p50" "$p99"
}

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n1)
echo "machine: $cpu, $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg); best of $runs runs, $chunks chunks each"
echo
echo "| BLAS | threads | chunks of 256 tokens/s | ms/chunk | query (11 tokens) p50 ms | p99 ms |"
echo "|---|---|---|---|---|---|"
for blas in openblas blis; do
  bin="$build/bench/bench_embed"
  [ "$blas" = blis ] && bin="$build-blis/bench/bench_embed"
  for th in 1 2; do
    read -r cps p50 p99 < <(best "$bin" "$th")
    ms=$(awk -v c="$cps" 'BEGIN{printf "%.1f", 1000/c}')
    echo "| $blas | $th | $cps | $ms | $p50 | $p99 |"
  done
done
