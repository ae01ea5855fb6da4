#!/usr/bin/env bash
# tier: ci
# The worker recipes of docs/verify.md are files a user submits as they
# are: the Slurm job array passes bash -n, its #SBATCH lines are all read
# by sbatch (before the first command) and ask for an array and a GPU; the
# Kubernetes Job is valid YAML of a batch/v1 Job with a GPU limit; the
# systemd unit passes systemd-analyze verify. Each one's own command then
# drains a real queue of compile-only jobs here.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jobq-lib.sh"
R="$KB_TOP/docs/queue"
# --- Slurm
sb="$R/kb-verify-workers.sbatch"
bash -n "$sb" || fail "bash -n $sb"
# sbatch reads #SBATCH lines up to the first line that is not a comment
head_lines=$(awk 'NR > 1 && !/^#/ && !/^[[:space:]]*$/ {exit} {print}' "$sb" | grep '^#SBATCH' || true)
all_lines=$(grep '^#SBATCH' "$sb")
[ "$head_lines" = "$all_lines" ] || fail "an #SBATCH line after the first command: $all_lines"
while read -r _ opt; do
    [[ $opt =~ ^--[a-z][a-z-]*=[^[:space:]]+$ ]] || fail "not an sbatch option: '$opt'"
done <<<"$all_lines"
contains "$all_lines" "--array=0-"
contains "$all_lines" "--gres=gpu:1"
make_cands 2 gelu
Q="sqlite:$KB_TMP/slurm.sqlite"
for c in "${CANDS[@]}"; do submit "$Q" gelu "$c"; done
KB="$KB_BIN" KB_QUEUE="$Q" SLURM_ARRAY_JOB_ID=7 SLURM_ARRAY_TASK_ID=0 \
    expect_rc 0 bash "$sb"
[ "$(grep -c ' done ' <<<"$out")" -eq 2 ] || fail "the sbatch script drained: $out"
j=$("$KB_BIN" verify queue --queue "$Q" --json "$id")
[ "$(json_get "$j" "j['jobs'][0]['result']['queue']['worker']")" = slurm-7-0 ] || fail "$j"
# --- Kubernetes
py="${KB_VENV:-}/bin/python"
[ -x "$py" ] || py=python3
"$py" -c 'import yaml' 2>/dev/null || skip_rest "no PyYAML (the test virtualenv: make test)"
cmd=$("$py" - "$R/kb-verify-workers.yaml" <<'PY'
import sys, yaml
docs = list(yaml.safe_load_all(open(sys.argv[1])))
assert len(docs) == 1, "one document"
job = docs[0]
assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job", job.get("kind")
spec = job["spec"]
assert isinstance(spec["parallelism"], int) and isinstance(spec["completions"], int)
pod = spec["template"]["spec"]
assert pod["restartPolicy"] in ("OnFailure", "Never"), pod["restartPolicy"]
(c,) = pod["containers"]
assert c["command"][:3] == ["kb", "verify", "worker"], c["command"]
assert "--drain" in c["command"]
assert any(e["name"] == "KB_QUEUE" for e in c["env"])
assert int(c["resources"]["limits"]["nvidia.com/gpu"]) == 1
print("\n".join(c["command"][1:]))
PY
) || fail "the Kubernetes Job: $cmd"
mapfile -t args <<<"$cmd"
make_cands 2 softmax
start_redis
Q="redis://127.0.0.1:$REDIS_PORT/k8s"
for c in "${CANDS[@]}"; do submit "$Q" softmax "$c"; done
KB_QUEUE="$Q" expect_rc 0 "$KB_BIN" "${args[@]}"
[ "$(grep -c ' done ' <<<"$out")" -eq 2 ] || fail "the Job's command drained: $out"
# --- systemd
unit="$R/kb-verify-worker@.service"
exec_line=$(sed -n 's/^ExecStart=//p' "$unit")
case $exec_line in "/usr/local/bin/kb verify worker --gpu %i "*) ;; *) fail "ExecStart: $exec_line" ;; esac
if command -v systemd-analyze >/dev/null; then
    mkdir -p "$KB_TMP/unit"
    sed "s|^ExecStart=/usr/local/bin/kb |ExecStart=$KB_BIN |" "$unit" >"$KB_TMP/unit/kb-verify-worker@.service"
    v=$(cd "$KB_TMP/unit" && SYSTEMD_LOG_LEVEL=warning systemd-analyze verify "kb-verify-worker@0.service" 2>&1) ||
        fail "systemd-analyze verify: $v"
    lacks "$v" "kb-verify-worker@"
fi
# its command, as systemd runs it (instance 0), until SIGTERM
make_cands 1 transpose
Q=$(sed -n 's/^Environment=KB_QUEUE=redis:\/\/127.0.0.1:6379\/\(.*\)$/redis:\/\/127.0.0.1:'"$REDIS_PORT"'\/\1/p' "$unit")
[ -n "$Q" ] || fail "the unit sets no KB_QUEUE"
submit "$Q" transpose "${CANDS[0]}"
read -r -a args <<<"${exec_line#/usr/local/bin/kb }"
args=("${args[@]//%i/0}")
KB_QUEUE="$Q" start_worker "$KB_TMP/unit.log" "${args[@]:2}"
wait_for "$KB_TMP/unit.log" ' done '
kill -TERM "$WPID"; wait "$WPID" || fail "the unit's worker on SIGTERM: $(cat "$KB_TMP/unit.log")"
echo ok
