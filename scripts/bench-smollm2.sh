#!/usr/bin/env bash
# bench-smollm2.sh [BUILD] - SmolLM2-135M's decode and prompt speed under
# llama.cpp's server (tests/llm/smollm2-server.py, from BUILD/venv) with
# OpenMP's threads spinning (OMP_WAIT_POLICY=ACTIVE) and sleeping
# (PASSIVE, what the server script sets), interleaved: two servers per
# policy, two greedy 48-token requests each (BENCHMARKS.md, LLM test
# servers). Loopback only.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
py="$top/$build/venv/bin/python"
[ -x "$py" ] || { echo "no $build/venv: run make test first" >&2; exit 1; }
out=$(mktemp)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -f "$out"' EXIT
for round in 1 2; do
    for pol in ACTIVE PASSIVE; do
        : >"$out"
        OMP_WAIT_POLICY=$pol "$py" "$top/tests/llm/smollm2-server.py" --threads 2 >"$out" 2>/dev/null &
        pid=$!
        for _ in $(seq 240); do [ -s "$out" ] && break; sleep 0.5; done
        url=$(cat "$out")
        case $url in http://127.0.0.1:*) ;; *) echo "the server did not start: $url" >&2; exit 1 ;; esac
        for _ in 1 2; do
            curl -s --noproxy '*' "$url/v1/chat/completions" -d '{"messages":[{"role":"user",
                "content":"Write a CUDA kernel that adds two vectors."}],"max_tokens":48,"temperature":0}' |
            python3 -c "import json, sys; t = json.load(sys.stdin)['timings']; print('$pol round $round: decode %.1f tokens/s, prompt %.1f tokens/s' % (t['predicted_per_second'], t['prompt_per_second']))"
        done
        kill "$pid"; wait "$pid" 2>/dev/null || true
        pid=
    done
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
