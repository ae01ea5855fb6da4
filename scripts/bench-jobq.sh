#!/usr/bin/env bash
# bench-jobq.sh [BUILD] [MODE] - the verification queue's figures
# (BENCHMARKS.md, "verification queue"):
#  1. its own cost per job (bench_jobq: submit, claim, complete, result)
#     on SQLite and on a redis-server on loopback;
#  2. candidates per minute against the number of worker slots, through
#     the queue, against the same candidates through one kb-verify --serve
#     without a queue. MODE compile (default): compile-only jobs, no GPU;
#     MODE gpu: full verifications on GPU 0, slots 1, 2 and 4 on it, the
#     GPU's busy share sampled by nvidia-smi.
# FSYNC: redis-server's appendfsync (always, the default, or everysec).
# Every worker and redis-server started here is stopped at the end.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}; mode=${2:-compile}
case $build in /*) ;; *) build="$top/$build" ;; esac
kb="$build/kb"
tmp=$(mktemp -d)
rpid=
cleanup() { [ -n "$rpid" ] && kill -9 "$rpid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
export KB_VERIFY_CACHE="$tmp/cache"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
if command -v redis-server >/dev/null; then
    redis-server --bind 127.0.0.1 --port "$port" --dir "$tmp" --appendonly yes \
        --appendfsync "${FSYNC:-always}" --save '' >"$tmp/redis.log" 2>&1 &
    rpid=$!
    for _ in $(seq 100); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
else
    BACKENDS=sqlite
fi
echo "machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%FT%TZ); redis appendfsync ${FSYNC:-always}"

# 1. the queue alone
if [ -x "$build/bench/bench_jobq" ]; then
    "$build/bench/bench_jobq" "sqlite:$tmp/bench.sqlite" 500
    [ -n "$rpid" ] && "$build/bench/bench_jobq" "redis://127.0.0.1:$port/bench" 500
fi

# 2. candidates per minute: every level-1 task's reference and committed
# candidates, each made a job of its own (a comment line), R times
tasks="gelu softmax layernorm reduce_sum transpose gemm_f32 histogram"
R=${R:-3}
mkdir -p "$tmp/c"
list=()
for r in $(seq "$R"); do
    for t in $tasks; do
        for f in "$top/corpus/tasks/$t/reference.cu" "$top"/corpus/tasks/$t/candidates/*.cu; do
            [ -f "$f" ] || continue
            c="$tmp/c/$t-$r-$(basename "$f")"
            { echo "// bench $r"; cat "$f"; } >"$c"
            list+=("$t $c")
        done
    done
done
n=${#list[@]}
if [ "$mode" = gpu ]; then flag=; co=false; gpu_args=(--gpu 0 --slots); else flag=--compile-only; co=true; gpu_args=(--compile-threads); fi
echo "$n candidates ($mode), $R rounds of the level-1 tasks' references and candidates"
# without a queue: one kb-verify --serve fed every candidate in turn
for x in "${list[@]}"; do
    set -- $x
    printf '{"task":"%s","candidate":"%s","compile_only":%s}\n' "$top/corpus/tasks/$1" "$2" "$co"
done >"$tmp/requests"
"$build/kb-verify" --compile-only "$top/corpus/tasks/gelu" >/dev/null 2>&1 || true   # the reference cache
t0=$(date +%s.%N)
"$build/kb-verify" --serve <"$tmp/requests" >"$tmp/serve.out" 2>/dev/null || true
t1=$(date +%s.%N)
echo "  no queue, one kb-verify --serve: $(python3 -c "print(f'{$n*60/($t1-$t0):.1f}')") candidates/min ($(grep -c verdict "$tmp/serve.out") results)"
for q in ${BACKENDS:-sqlite redis}; do
    case $q in sqlite) q="sqlite:$tmp/run.sqlite" ;; redis) q="redis://127.0.0.1:$port/run" ;; esac
    for w in ${SLOTS:-1 2 4}; do
        key="$q-$w"
        qq="$q"; case $q in redis*) qq="$q$w" ;; sqlite*) qq="sqlite:$tmp/run$w.sqlite" ;; esac
        for x in "${list[@]}"; do
            set -- $x
            "$kb" verify --queue "$qq" --no-wait $flag "$top/corpus/tasks/$1" "$2" >/dev/null
        done
        smi=
        if [ "$mode" = gpu ]; then
            nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 >"$tmp/util.$w" 2>/dev/null &
            smi=$!
        fi
        t0=$(date +%s.%N)
        "$kb" verify worker -q --queue "$qq" "${gpu_args[@]}" "$w" --drain --json >"$tmp/w.json"
        t1=$(date +%s.%N)
        busy=
        if [ -n "$smi" ]; then
            kill "$smi"; wait "$smi" 2>/dev/null || true
            busy=", GPU busy $(awk '{s+=$1; n++} END {if (n) printf "%.0f%%", s/n; else print "n/a"}' "$tmp/util.$w") (nvidia-smi utilization, mean of 100 ms samples)"
        fi
        echo "  ${q%%:*}, $w slot(s): $(python3 -c "print(f'{$n*60/($t1-$t0):.1f}')") candidates/min, $(cat "$tmp/w.json")$busy"
    done
done
