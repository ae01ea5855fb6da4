#!/usr/bin/env bash
# tier: quick
# kb skill lint: `file:line: error: message (rule)`, exit 1 on errors (0 on
# warnings alone, 1 with --strict), --json; kb's rules beyond the model's
# (tests/unit/test_skill.c has every format case): kb-task, kernel.cu
# compiled with kb-verify --compile-only (a compile error, a refusal),
# evidence.json's form and hash, deep links against a KB of a real guide,
# dominance and near-duplicates across the library.
. "$(dirname "$0")/lib.sh"
cd "$KB_TOP"
L="$KB_TMP/lib"
BP=https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/index.html

skill() {   # NAME TASK [BODY-EXTRA]: a complete skill with the given body text
    mkdir -p "$L/$1"
    cat >"$L/$1/SKILL.md" <<S
---
name: $1
description: A technique. Use when it fits.
metadata:
  kb-status: draft
  kb-task: $2
  kb-bottleneck: memory
---

## When to apply

When it fits.

## Technique

${3:-As the guide says.}

## Pitfalls

Some.

## Evidence

See evidence.json.
S
}
skill good transpose "Coalesced access, [the guide]($BP#coalesced-access-to-global-memory)."
cp corpus/tasks/transpose/candidates/smem_tile.cu "$L/good/kernel.cu"
expect_rc 0 kb skill lint --dir "$L"
contains "$out" "1 skill, 0 errors, 0 warnings"

# the model's findings with their lines, as a CI reads them
skill bad-meta gelu
sed -i 's/^  kb-status: draft/  kb-status: shipped\n  kb-speedup: 1.5/' "$L/bad-meta/SKILL.md"
expect_rc 1 kb skill lint --dir "$L" bad-meta
contains "$out" "$L/bad-meta/SKILL.md:6: error: metadata 'kb-speedup' is read as a number, not a string: quote it ('1.5') (type)"
sed -i "s/kb-speedup: 1.5/kb-speedup: '1.5'/" "$L/bad-meta/SKILL.md"
expect_rc 1 kb skill lint --dir "$L" bad-meta
contains "$out" "$L/bad-meta/SKILL.md:5: error: kb-status 'shipped' is none of draft, verified, approved, retired (status)"
contains "$out" "$L/bad-meta/SKILL.md: warning: no kernel.cu beside SKILL.md (kernel)"
rm -rf "$L/bad-meta"

# kb-task names no task
skill no-task no_such_task
expect_rc 1 kb skill lint --dir "$L" --no-compile no-task
contains "$out" "$L/no-task/SKILL.md:6: error: kb-task 'no_such_task' is no task of 'corpus/tasks'"
rm -rf "$L/no-task"

# warnings alone pass, unless --strict
skill todo-left gelu "TODO: write it."
cp corpus/tasks/gelu/candidates/vec4.cu "$L/todo-left/kernel.cu"
expect_rc 0 kb skill lint --dir "$L" --no-compile todo-left
contains "$out" "$L/todo-left/SKILL.md:14: warning: the section 'Technique' holds a TODO (todo)"
expect_rc 1 kb skill lint --dir "$L" --no-compile --strict todo-left
rm -rf "$L/todo-left"

# kernel.cu compiled for its task (where kb-verify is built)
if [ -x "$KB_BUILD/kb-verify" ]; then
    skill broken-kernel gelu
    printf 'extern "C" __global__ void gelu(const float *x, float *y, int n) { y[0] = x[0] }\n' \
        >"$L/broken-kernel/kernel.cu"
    skill refused-kernel gelu
    printf 'extern "C" __global__ void gelu(const float *x, float *y, int n) { float *p = (float *)malloc(4); y[0] = p[0]; }\n' \
        >"$L/refused-kernel/kernel.cu"
    KB_VERIFY="$KB_BUILD/kb-verify" expect_rc 1 kb skill lint --dir "$L" broken-kernel refused-kernel
    contains "$out" "$L/broken-kernel/kernel.cu: error: kernel.cu does not compile for task 'gelu' (kb-verify --compile-only: compile_error)"
    contains "$out" "expected a \";\""
    contains "$out" "$L/refused-kernel/kernel.cu: error: kernel.cu does not compile for task 'gelu' (kb-verify --compile-only: refused): allocates memory on the device"
    rm -rf "$L/broken-kernel" "$L/refused-kernel"
    KB_VERIFY="$KB_BUILD/kb-verify" expect_rc 0 kb skill lint --dir "$L"
    lacks "$out" "kernels not compiled"
fi
KB_VERIFY=/nonexistent/kb-verify expect_rc 0 kb skill lint --dir "$L"
contains "$out" "kernels not compiled: no kb-verify"

# evidence.json: its form, and a verified status it does not back
cp -r "$L/good" "$L/ev-skill" && sed -i 's/name: good/name: ev-skill/' "$L/ev-skill/SKILL.md"
sed -i 's/kb-bottleneck: memory/kb-bottleneck: other/' "$L/ev-skill/SKILL.md"
echo '{"records": [' >"$L/ev-skill/evidence.json"
expect_rc 1 kb skill lint --dir "$L" --no-compile ev-skill
contains "$out" "$L/ev-skill/evidence.json: error: not JSON"
echo '{"kb_evidence":1,"skill":"ev-skill","records":[{"date":"d","task":"transpose","verdict":"faster"}]}' \
    >"$L/ev-skill/evidence.json"
expect_rc 1 kb skill lint --dir "$L" --no-compile ev-skill
contains "$out" "error: record 1 has no \"kernel_sha256\" (evidence)"
rm "$L/ev-skill/evidence.json"
sed -i 's/kb-status: draft/kb-status: verified/' "$L/ev-skill/SKILL.md"
expect_rc 1 kb skill lint --dir "$L" --no-compile ev-skill
contains "$out" "error: kb-status 'verified', but evidence.json holds no verification: run 'kb skill verify ev-skill' (status)"

# dominance and near-duplicates: two verified skills of one task and
# arch, the one slower on every shape warned of, and the same kernel for
# the same task and bottleneck
R=tests/fixtures/skills/h200-results.jsonl
sed -i 's/kb-status: verified/kb-status: draft/' "$L/ev-skill/SKILL.md"
expect_rc 0 kb skill verify --dir "$L" good --from-result "$R"
expect_rc 0 kb skill verify --dir "$L" ev-skill --from-result "$R"
skill dup transpose
sed -i 's/name: dup/name: dup/' "$L/dup/SKILL.md"
cp "$L/good/kernel.cu" "$L/dup/kernel.cu"
expect_rc 0 kb skill lint --dir "$L" --no-compile
contains "$out" "$L/good/SKILL.md: warning: a near-duplicate of 'dup': the same kernel.cu for the same task and kb-bottleneck (duplicate)"
lacks "$out" "dominates"   # equal timings: neither dominates
rm -rf "$L/dup"
# another kernel (one comment more: the same kernel measured twice never
# dominates itself), measured twice as slow
echo '// a slower kernel' >>"$L/ev-skill/kernel.cu"
python3 - "$L/ev-skill/evidence.json" "$L/ev-skill/kernel.cu" <<'P'
import hashlib, json, sys
p = sys.argv[1]; j = json.load(open(p))
r = j["records"][-1]
for k in r["timings"][0]["candidate_ms"]: r["timings"][0]["candidate_ms"][k] *= 2
r["kernel_sha256"] = hashlib.sha256(open(sys.argv[2], "rb").read()).hexdigest()
json.dump(j, open(p, "w"), indent=1)
P
h=$(json_get "$("$KB_BIN" skill show --dir "$L" ev-skill --json)" "j['evidence_sha256'][-1]")
sed -i "s/kb-evidence: .*/kb-evidence: $h/" "$L/ev-skill/SKILL.md"
expect_rc 0 kb skill lint --dir "$L" --no-compile
contains "$out" "$L/ev-skill/SKILL.md: warning: 'good' dominates it on transpose (sm_90): faster on every timed shape"
expect_rc 0 kb skill list --dir "$L"
contains "$out" "dominated by good"
contains "$out" "dominates ev-skill"
expect_json 0 kb skill list --dir "$L" --json
[ "$(json_get "$out" "[(s['name'], s['dominated_by']) for s in j['skills']]")" = "[('ev-skill', ['good']), ('good', [])]" ] ||
    fail "list --json dominance: $out"

# --json
expect_json 0 kb skill lint --dir "$L" --no-compile --json
[ "$(json_get "$out" "j['skills'], j['errors'], j['warnings'], j['findings'][0]['rule'], j['findings'][0]['severity']")" = \
  "2 0 1 dominance warning" ] || fail "lint --json: $out"

# deep links, against a KB holding the Best Practices Guide
need_mirror
expect_rc 0 kb ingest --no-embed -q cuda-best-practices
skill links transpose "[ok]($BP#coalesced-access-to-global-memory), [bad anchor]($BP#no-such-section), [bad]($BP-x#y), [paper](https://arxiv.org/abs/1234.5678).
\`$BP#in-code-is-not-a-link\`"
cp "$L/good/kernel.cu" "$L/links/kernel.cu"
sed -i 's/kb-bottleneck: memory/kb-bottleneck: links/' "$L/links/SKILL.md"
expect_rc 1 kb skill lint --dir "$L" --no-compile links
contains "$out" "$L/links/SKILL.md:16: error: link '$BP#no-such-section': the KB has the document but no section with that anchor (links)"
contains "$out" "$L/links/SKILL.md:16: error: link '$BP-x#y' resolves to no chunk of the KB (links)"
lacks "$out" "coalesced-access-to-global-memory'"
lacks "$out" "arxiv"
lacks "$out" "in-code-is-not-a-link"
[ "$(printf '%s\n' "$out" | grep -c '(links)')" -eq 2 ] || fail "link findings: $out"
