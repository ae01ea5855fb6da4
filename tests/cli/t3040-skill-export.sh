#!/usr/bin/env bash
# tier: quick
# kb skill export: a folder of skills an agent loads as-is, each passing
# the Agent Skills reference validator (skills-ref, `agentskills` in
# $KB_VENV) and read back by it with every metadata value as written;
# --status verified (with approved) or approved; drafts and retired
# skills never; a skill with a format error not exported (exit 3); a
# second export replaces the first whole, other folders untouched.
. "$(dirname "$0")/lib.sh"
cd "$KB_TOP"
AS="${KB_VENV:-}/bin/agentskills"
[ -x "$AS" ] || { echo "skipped: no skills-ref in \$KB_VENV (make test installs it)"; exit 0; }
L="$KB_TMP/lib" X="$KB_TMP/out/.claude/skills"
R=tests/fixtures/skills/h200-results.jsonl
mk() {   # NAME TASK KERNEL
    expect_rc 0 kb skill new --dir "$L" "$1" --task "$2" --from "$3" \
        --description "Tiles: 'quoted', #hash, and a colon: fine." --author "A. Person"
    sed -i 's/TODO[^\n]*/Written./' "$L/$1/SKILL.md"
}
mk tiled-transpose transpose corpus/tasks/transpose/candidates/smem_tile.cu
mk tma-gemm gemm_bf16 corpus/tasks/gemm_bf16/candidates/tma_persistent.cu
mk still-draft transpose corpus/tasks/transpose/candidates/smem_tile.cu
mk gone transpose corpus/tasks/transpose/candidates/smem_tile.cu
expect_rc 0 kb skill verify --dir "$L" tiled-transpose --from-result "$R" \
    --device-info tests/fixtures/skills/h200-device.json
expect_rc 0 kb skill verify --dir "$L" tma-gemm --from-result "$R"
expect_rc 0 kb skill approve --dir "$L" tma-gemm --reviewer "B. Reviewer"
expect_rc 0 kb skill retire --dir "$L" gone --reason "superseded"

expect_rc 2 kb skill export --dir "$L"
contains "$out" "need one DIR"
expect_rc 2 kb skill export --dir "$L" "$X" --status draft
contains "$out" "bad --status 'draft'"

expect_rc 0 kb skill export --dir "$L" "$X"
contains "$out" "2 skills (verified or approved) exported to $X"
[ "$(ls "$X")" = "$(printf 'tiled-transpose\ntma-gemm')" ] || fail "exported: $(ls "$X")"
for s in tiled-transpose tma-gemm; do
    for f in SKILL.md kernel.cu evidence.json; do
        cmp -s "$L/$s/$f" "$X/$s/$f" || fail "$s/$f did not travel"
    done
    "$AS" validate "$X/$s" >"$KB_TMP/v" 2>&1 || fail "skills-ref rejects $s: $(cat "$KB_TMP/v")"
done
# the reference reader sees kb's values as kb wrote them
p=$("$AS" read-properties "$X/tma-gemm")
[ "$(json_get "$p" "j['name'], j['metadata']['kb-status'], j['metadata']['kb-speedup'], j['metadata']['kb-reviewer']")" = \
  "tma-gemm approved 0.98 B. Reviewer" ] || fail "read-properties: $p"
[ "$(json_get "$p" "j['description']")" = "Tiles: 'quoted', #hash, and a colon: fine." ] || fail "description: $p"
[ "$(json_get "$p" "j['metadata']['kb-when-not']")" = "0.98x cublas_bf16 on gemm_bf16 'target' (NVIDIA H200, sm_90)" ] ||
    fail "kb-when-not: $p"

# approved only; the old export replaced whole, other folders kept
mkdir -p "$X/someone-elses"
echo keep >"$X/someone-elses/SKILL.md"
expect_json 0 kb skill export --dir "$L" "$X" --status approved --json
[ "$(json_get "$out" "j['exported'], j['status']")" = "1 approved" ] || fail "export --json: $out"
[ -f "$X/someone-elses/SKILL.md" ] || fail "export removed a folder that is not its own"
ls -a "$X" | grep -q '^\.' && [ -z "$(ls -A "$X" | grep '^\.')" ] || fail "temporary folders left: $(ls -A "$X")"

# a verified skill with a format error is not exported
sed -i 's/^description: .*/description: Uses <b>bold<\/b>./' "$L/tiled-transpose/SKILL.md"
expect_rc 3 kb skill export --dir "$L" "$KB_TMP/out2"
contains "$out" "tiled-transpose/SKILL.md:3: error: the description holds '<' (no '<' or '>')"
contains "$out" "1 skill not exported"
[ -d "$KB_TMP/out2/tma-gemm" ] && [ ! -e "$KB_TMP/out2/tiled-transpose" ] || fail "out2: $(ls "$KB_TMP/out2")"
