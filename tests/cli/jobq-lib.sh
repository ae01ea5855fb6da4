# Sourced by the queue tests (t41xx) after lib.sh: a real redis-server on
# a free loopback port (its data in $KB_TMP, appendonly, fsync always),
# stopped at the end with every worker the test started; compile-only
# candidates made from a task's reference (each a job of its own).
REDIS_PID= REDIS_PORT= WORKERS=()
jobq_cleanup() {
    for p in "${WORKERS[@]}"; do kill -9 "$p" 2>/dev/null; done
    [ -n "$REDIS_PID" ] && kill -9 "$REDIS_PID" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$KB_TMP"
}
trap jobq_cleanup EXIT
command -v redis-server >/dev/null || { echo "skipped: no redis-server (make deps)"; exit 0; }
[ -x "$KB_BUILD/kb-verify" ] || { echo "skipped: no kb-verify (no CUDA toolkit)"; exit 0; }
export KB_VERIFY_CACHE="$KB_TMP/cache"
# the tests write their candidates here; tasks are found by directory
export KB_TOP

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# start_redis [PORT]: redis-server on 127.0.0.1 (PORT: the same as before,
# for a restart), data in $KB_TMP/redis; sets REDIS_PID, REDIS_PORT
start_redis() {
    mkdir -p "$KB_TMP/redis"
    local tries
    for tries in 1 2 3 4 5; do
        REDIS_PORT=${1:-$(free_port)}
        redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$KB_TMP/redis" \
            --appendonly yes --appendfsync always --save '' --protected-mode yes \
            >"$KB_TMP/redis/log.$tries" 2>&1 &
        REDIS_PID=$!
        for _ in $(seq 100); do
            if redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; then return 0; fi
            kill -0 "$REDIS_PID" 2>/dev/null || break
            sleep 0.05
        done
        kill -9 "$REDIS_PID" 2>/dev/null; wait "$REDIS_PID" 2>/dev/null
        [ -n "${1:-}" ] && break
    done
    fail "redis-server did not start: $(cat "$KB_TMP"/redis/log.*)"
}

# kill_redis: kill -9, as a crash (what was acknowledged is in the AOF)
kill_redis() {
    kill -9 "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null; REDIS_PID=
}

# make_cands N TASK: N candidates of TASK's reference, each another job
# (a comment line differs); their paths in CANDS
make_cands() {
    CANDS=()
    mkdir -p "$KB_TMP/cands"
    local i
    for i in $(seq "$1"); do
        local c="$KB_TMP/cands/$2-$i.cu"
        { echo "// candidate $i"; cat "$KB_TOP/corpus/tasks/$2/reference.cu"; } >"$c"
        CANDS+=("$c")
    done
}

# submit Q TASK CAND [ARG...]: the job's id in $id (kb verify --no-wait)
submit() {
    local q=$1 t=$2 c=$3; shift 3
    out=$("$KB_BIN" verify --queue "$q" --no-wait --compile-only "$@" "$KB_TOP/corpus/tasks/$t" "$c" 2>&1) ||
        fail "submit $c: $out"
    id=${out%% *}
    [ ${#id} -eq 64 ] || fail "submit $c: no job id: $out"
}

# start_worker LOG ARG...: kb verify worker in the background; WPID
start_worker() {
    local log=$1; shift
    "$KB_BIN" verify worker "$@" >"$log.out" 2>"$log" &
    WPID=$!
    WORKERS+=("$WPID")
}

# wait_for FILE PATTERN [N]: until FILE has N (1) lines matching PATTERN
wait_for() {
    local n=${3:-1}
    for _ in $(seq 600); do
        [ "$(grep -c -- "$2" "$1" 2>/dev/null)" -ge "$n" ] && return 0
        sleep 0.02
    done
    fail "no '$2' in $1 after 12 s: $(cat "$1")"
}

# queue_json Q: kb verify queue --json
queue_json() { "$KB_BIN" verify queue --queue "$1" --json; }
