#!/usr/bin/env bash
# tier: quick
# An unreviewed draft (what one kb generate run wrote back) is retrieved
# into its own task's prompt only, after the verified skills, never into
# another task's: a GEMM draft whose kb-ops meet gemv_int4's ("fusion")
# stays out of gemv_int4's prompt, gemv_int4's own draft comes in; a
# retrieved skill's kernel is the kernel to refine or an exemplar, a
# draft's kernel neither where the draft is not retrieved.
. "$(dirname "$0")/lib.sh"
cd "$KB_TOP"
DEV="$KB_TOP/tests/fixtures/skills/h200-device.json"
SK="$KB_TMP/skills"
cp -rL corpus/skills "$SK"
# draft_of SKILL NAME TASK OPS: a draft copied from SKILL, for TASK
draft_of() {
    cp -r "$SK/$1" "$SK/$2"
    rm -f "$SK/$2/evidence.json"
    sed -i -e "s/^name: .*/name: $2/" -e "s/^# $1\$/# $2/" \
        -e "s/kb-status: .*/kb-status: draft/" -e "s/kb-task: .*/kb-task: $3/" \
        -e "s/kb-ops: .*/kb-ops: $4/" -e "/kb-speedup:/d" -e "/kb-evidence:/d" \
        -e "s/kb-author: .*/kb-author: kb generate/" "$SK/$2/SKILL.md"
    sed -i "s/__global__ void \([a-z_0-9]*\)(/__global__ void \1_$(tr - _ <<<"$2")(/" "$SK/$2/kernel.cu"
}
draft_of fused-gemm-epilogue gemm-fusion-draft gemm_bias_gelu "gemm,matmul,epilogue,fusion"
draft_of warp-shuffle-block-reduction gemv-int4-draft gemv_int4 "gemv,reduction,fusion"
expect_rc 0 kb ingest --no-embed -q --source skill-copy "$SK"
expect_json 0 kb query --kind skill --mode lexical --json "gemm fusion draft epilogue"
contains "$out" "gemm-fusion-draft"

expect_json 0 kb prompt --json --device-info "$DEV" gemv_int4
P=$out
python3 - "$P" <<'PY' || fail "gemv_int4's prompt: $(printf '%s' "$P" | head -c 600)"
import json, sys
j = json.loads(sys.argv[1])
skills = [c["skill"] for c in j["cites"] if c["kind"] == "skill"]
# another task's draft: not retrieved, nor its kernel
assert "gemm-fusion-draft" not in skills, skills
assert "gemm_fusion_draft" not in j["user"]
assert not any("/gemm-fusion-draft/" in c["url"] for c in j["cites"])
# its own draft: retrieved (no verified skill fits gemv_int4)
assert skills == ["gemv-int4-draft"], skills
# its kernel is the kernel to refine, shown once
refine = j["user"].split("## Kernel to refine")[1]
assert "_gemv_int4_draft(" in refine and j["user"].count("_gemv_int4_draft(") == 1
PY

# a verified skill is not displaced by a draft of its own task: the
# draft comes after the verified skills, and only while there is room
draft_of block-per-row-normalization layernorm-draft layernorm "layernorm,normalization,reduction"
expect_rc 0 kb ingest --no-embed -q --source skill-copy "$SK"
expect_json 0 kb prompt --json --device-info "$DEV" layernorm
python3 - "$out" <<'PY' || fail "layernorm's prompt: $(printf '%s' "$out" | head -c 600)"
import json, sys
j = json.loads(sys.argv[1])
skills = [c["skill"] for c in j["cites"] if c["kind"] == "skill"]
assert skills[0] == "block-per-row-normalization", skills
assert "layernorm-draft" not in skills[:-1], skills
PY
