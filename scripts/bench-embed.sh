#!/usr/bin/env bash
# Embedding benchmark of the local all-MiniLM-L6-v2 (BENCHMARKS.md, "Embeddings"):
# chunks of 256 tokens per second at 1 and 2 threads and the query-embedding
# latency, for each BLAS (Debian's OpenBLAS and BLIS), best of RUNS rounds.
#   scripts/bench-embed.sh [BUILD] [RUNS]    (make bench calls it)
# Prints a Markdown table on stdout. Needs the model (make model).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
runs=${2:-3}
chunks=${KB_BENCH_CHUNKS:-64}
cd "$top"

for blas in openblas blis; do
  make -s --no-print-directory BUILD="$build-$blas" BLAS=$blas FAISS_CAPI="$build/faiss-capi" \
    "$build-$blas/bench/bench_embed" >&2
done

field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p"; }

declare -A cps p50 p99
configs=("openblas 1" "openblas 2" "blis 1" "blis 2")
# rounds interleave the configurations, so a burst of other load on the
# machine hits all of them alike; each keeps its best round (highest
# throughput, lowest p50)
for _ in $(seq "$runs"); do
  for cfg in "${configs[@]}"; do
    read -r blas th <<<"$cfg"
    bin="$build-$blas/bench/bench_embed"
    line=$("$bin" "$th" "$chunks")
    c=$(field chunks_per_s <<<"$line"); q=$(field query_p50_ms <<<"$line"); q99=$(field query_p99_ms <<<"$line")
    k="$blas $th"
    if awk -v a="$c" -v b="${cps[$k]:-0}" 'BEGIN{exit !(a>b)}'; then cps[$k]=$c; fi
    if awk -v a="$q" -v b="${p50[$k]:-1e9}" 'BEGIN{exit !(a<b)}'; then p50[$k]=$q; p99[$k]=$q99; fi
  done
done

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -n1)
echo "machine: $cpu, $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg); best of $runs interleaved rounds, $chunks chunks each"
echo
echo "| BLAS | threads | chunks of 256 tokens/s | ms/chunk | query (11 tokens) p50 ms | p99 ms |"
echo "|---|---|---|---|---|---|"
for cfg in "${configs[@]}"; do
  read -r blas th <<<"$cfg"
  k="$blas $th"
  ms=$(awk -v c="${cps[$k]}" 'BEGIN{printf "%.1f", 1000/c}')
  echo "| $blas | $th | ${cps[$k]} | $ms | ${p50[$k]} | ${p99[$k]} |"
done
