#!/usr/bin/env bash
# tier: ci
# The seed library (corpus/skills) as committed: at least 15 skills, each
# kernel.cu one of corpus/tasks' optimised candidates for its kb-task, each
# verified by kb-verify's evidence on the H200 for that kernel (lint checks
# hash, status, speedup), each citing the guides with deep links, at least
# one saying where it does not pay; each passes the reference validator.
. "$(dirname "$0")/lib.sh"
cd "$KB_TOP"
n=$(ls -d corpus/skills/*/ | wc -l)
[ "$n" -ge 15 ] || fail "only $n seed skills"
expect_rc 0 kb skill lint --no-compile --strict
contains "$out" "$n skills, 0 errors, 0 warnings"
if [ -x "$KB_BUILD/kb-verify" ]; then   # every kernel compiles for its task
    KB_VERIFY="$KB_BUILD/kb-verify" expect_rc 0 kb skill lint
    lacks "$out" "kernels not compiled"
fi
# every skill verified, except those retired because another dominates
# them (kept, with the reason): at least 15 live ones
nret=$(grep -l '^  kb-status: retired' corpus/skills/*/SKILL.md | wc -l)
for f in $(grep -l '^  kb-status: retired' corpus/skills/*/SKILL.md); do
    grep -q "^  kb-retired: .*dominated by" "$f" || fail "$f: retired without a dominance reason"
done
expect_json 0 kb skill list --json
[ "$(json_get "$out" "len(j['skills']), set(s['status'] for s in j['skills'])")" = "$((n - nret)) {'verified'}" ] ||
    fail "not every live seed skill is verified: $out"
[ $((n - nret)) -ge 15 ] || fail "only $((n - nret)) live seed skills"
[ "$(json_get "$out" "sum(1 for s in j['skills'] if s['when_not'])")" -ge 1 ] || fail "no kb-when-not"
# the techniques issue 10 names each have a skill (live or retired)
for s in cluster-dsmem-histogram decoupled-lookback-scan warp-aggregated-atomics online-softmax \
         fused-gemm-epilogue; do
    [ -f "corpus/skills/$s/SKILL.md" ] || fail "no skill $s"
done
expect_json 0 kb skill list --all --json
[ "$(json_get "$out" "len(j['skills'])")" = "$n" ] || fail "list --all: $out"
for d in corpus/skills/*/; do
    s=$(basename "$d")
    task=$(sed -n 's/^  kb-task: //p' "$d/SKILL.md")
    found=0
    for c in corpus/tasks/$task/candidates/*.cu; do cmp -s "$c" "$d/kernel.cu" && found=1; done
    [ $found = 1 ] || fail "$s: kernel.cu is no candidate of corpus/tasks/$task"
    ev=$(cat "$d/evidence.json")
    # imported records carry the driver's version from --device-info; those
    # of 'kb skill verify' run on the device, the CUDA driver API's
    [ "$(json_get "$ev" "set((r['device']['name'], r['device']['arch'], r['device']['driver_version'] or r['device']['cuda_driver_version']) for r in j['records']) <= {('NVIDIA H200', 'sm_90', '580.159.04'), ('NVIDIA H200', 'sm_90', '13.0')}")" = True ] ||
        fail "$s: the evidence's device"
    [ "$(json_get "$ev" "all(r['timings'] and r['timings'][0]['candidate_ms']['ci95_lo'] <= r['timings'][0]['candidate_ms']['median'] <= r['timings'][0]['candidate_ms']['ci95_hi'] and len(r['seeds']) >= 3 and r['checks']['run'] == r['checks']['passed'] for r in j['records'])")" = True ] ||
        fail "$s: a record without timings, interval, seeds or passing checks"
    links=$(grep -o '](https://[^)]*#[^)]*)' "$d/SKILL.md" | wc -l)
    [ "$links" -ge 2 ] || fail "$s: $links deep links"
    if [ -x "${KB_VENV:-}/bin/agentskills" ]; then
        "$KB_VENV/bin/agentskills" validate "$d" >/dev/null 2>&1 || fail "$s: skills-ref rejects it"
    fi
done
# the where-it-does-not-pay skill: parity with cuBLAS, said so
expect_rc 0 kb skill show tma-mbarrier-pipeline
contains "$out" "kb-when-not     0.98x cublas_bf16 on gemm_bf16 'target' (NVIDIA H200, sm_90)"
