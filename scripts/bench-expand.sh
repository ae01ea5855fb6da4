#!/usr/bin/env bash
# bench-expand.sh KB [BUILD] - hybrid without and with --expand on both
# development sets, with SmolLM2-135M under llama.cpp's server
# (tests/llm/smollm2-server.py from BUILD/venv, loopback only). Per set, in
# this order: plain, --expand (fresh LLM requests), --expand again (from
# the cache), plain again; each kb eval's JSON (-v: per query, with the
# expansion) goes to $OUT (default BUILD/bench-expand). The cache rows are
# written into KB: use a copy (BENCHMARKS.md, "Query expansion").
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
kbdir=${1:?usage: bench-expand.sh KB [BUILD]}
build=${2:-build}
py="$top/$build/venv/bin/python"
[ -x "$py" ] || py="${KB_VENV:-}/bin/python"
[ -x "$py" ] || { echo "no $build/venv and no KB_VENV: run make test first" >&2; exit 1; }
out=${OUT:-$top/$build/bench-expand}
mkdir -p "$out"
url=$(mktemp)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -f "$url"' EXIT
"$py" "$top/tests/llm/smollm2-server.py" --threads 2 >"$url" 2>/dev/null &
pid=$!
for _ in $(seq 240); do [ -s "$url" ] && break; sleep 0.5; done
case $(cat "$url") in http://127.0.0.1:*) ;; *) echo "the server did not start" >&2; exit 1 ;; esac
export KB_LLM_URL="$(cat "$url")/v1/chat/completions" KB_LLM_MODEL=SmolLM2-135M-Instruct
kb=("$top/$build/kb" --kb "$kbdir" eval --mode hybrid --json)
for set in dev dev2; do
    f="$top/../shared/eval/retrieval-$set.json"
    echo "$set: load $(cut -d' ' -f1-3 /proc/loadavg)"
    "${kb[@]}" -v "$f" >"$out/$set-plain.json"
    "${kb[@]}" -v --expand "$f" >"$out/$set-expand.json"
    "${kb[@]}" -v --expand "$f" >"$out/$set-expand-cached.json"
    "${kb[@]}" "$f" >"$out/$set-plain2.json"
    python3 - "$out" "$set" <<'PY'
import json, sys
d, s = sys.argv[1:3]
h = {k: json.load(open(f"{d}/{s}-{k}.json"))["modes"]["hybrid"]
     for k in ("plain", "expand", "expand-cached", "plain2")}
for k, m in h.items():
    x = m.get("expansion") or {}
    print(f"  {k:14} nDCG@10 {m['overall']['ndcg']:.3f}  search {m['took_ms_mean']:.0f} ms"
          + (f"  LLM {x['llm_ms_mean']:.0f} ms/request x {x['llm_requests']}, cached {x['cached']}" if x else ""))
PY
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
