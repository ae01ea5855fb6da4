#!/usr/bin/env bash
# tier: quick
# kb skill without a GPU: usage errors, new (a draft with the four
# sections), list and show (text and JSON), approve refused for a draft,
# retire (kept, hidden from list), the refused transitions' messages.
. "$(dirname "$0")/lib.sh"
cd "$KB_TOP"
L="$KB_TMP/lib"

expect_rc 2 kb skill
contains "$out" "need a subcommand"
expect_rc 2 kb skill frob
contains "$out" "'frob' is no subcommand of kb skill"
expect_rc 0 kb skill --help
for s in lint new verify approve retire list show export; do contains "$out" "  $s "; done
expect_rc 2 kb skill list --frob
contains "$out" "list: unknown option '--frob'"
expect_rc 2 kb skill new --dir "$L" x
contains "$out" "need --task TASK"
expect_rc 2 kb skill new --dir "$L" Bad-Name --task gelu
contains "$out" "'Bad-Name' is no skill name"
expect_rc 1 kb skill new --dir "$L" x --task no_such_task
contains "$out" "no task 'no_such_task' in 'corpus/tasks'"
expect_rc 1 kb skill new --dir "$L" x --task gelu --from /nonexistent.cu
contains "$out" "cannot open '/nonexistent.cu'"
[ ! -e "$L/x" ] || fail "a failed new left '$L/x' behind"
expect_rc 1 kb skill list --dir "$KB_TMP/none"
contains "$out" "cannot open the skill library '$KB_TMP/none'"

# new: a draft from a kernel, with the task's ops and dtype
expect_rc 0 kb skill new --dir "$L" gelu-vec4 --task gelu --author alice \
    --from corpus/tasks/gelu/candidates/vec4.cu
contains "$out" "gelu-vec4: a draft in $L/gelu-vec4 for task 'gelu'"
cmp -s "$L/gelu-vec4/kernel.cu" corpus/tasks/gelu/candidates/vec4.cu || fail "kernel.cu not copied"
md=$(cat "$L/gelu-vec4/SKILL.md")
contains "$md" $'---\nname: gelu-vec4\n'
contains "$md" $'  kb-status: draft\n  kb-task: gelu\n  kb-ops: elementwise,gelu\n  kb-dtype: f32\n  kb-author: alice\n'
for s in "When to apply" Technique Pitfalls Evidence; do contains "$md" "## $s"; done
expect_rc 1 kb skill new --dir "$L" gelu-vec4 --task gelu
contains "$out" "'$L/gelu-vec4' already exists"
expect_json 0 kb skill new --dir "$L" scan-draft --task scan --json --description "Scans."
[ "$(json_get "$out" "j['status'], j['kernel']")" = "draft False" ] || fail "new --json: $out"

# list and show
expect_rc 0 kb skill list --dir "$L"
contains "$out" "gelu-vec4"
contains "$out" "draft"
contains "$out" "2 skills"
expect_json 0 kb skill list --dir "$L" --json
[ "$(json_get "$out" "len(j['skills']), j['skills'][0]['name'], j['skills'][0]['dtype']")" = "2 gelu-vec4 f32" ] ||
    fail "list --json: $out"
# nothing measured yet: no speedup, no device; arch is kb-arch (none here)
[ "$(json_get "$out" "[(s['speedup'], s['verified_on'], s['arch']) for s in j['skills']]")" = "[(None, None, None), (None, None, None)]" ] ||
    fail "list --json of drafts: $out"
# the library's verified skills: arch their kb-arch, verified_on the
# evidence's device, speedup a number (one meaning everywhere)
expect_json 0 kb skill list --json
[ "$(json_get "$out" "all(isinstance(s['speedup'], float) and s['verified_on'] and s['arch'] != s['verified_on'] or s['status'] == 'draft' for s in j['skills'] if s['arch'] and s['arch'].endswith('+'))")" = True ] ||
    fail "list --json: arch, verified_on, speedup: $out"
expect_rc 0 kb skill list --dir "$L" --task scan
lacks "$out" "gelu-vec4"
expect_rc 2 kb skill list --dir "$L" --status shipped
contains "$out" "bad --status 'shipped'"
expect_rc 0 kb skill show --dir "$L" gelu-vec4
contains "$out" "gelu-vec4  (draft)"
contains "$out" "evidence (0 records)"
# and the skill itself, SKILL.md's body (query output sends readers here)
contains "$out" "## When to apply"
contains "$out" "## Pitfalls"
expect_json 0 kb skill show --dir "$L" gelu-vec4 --json
[ "$(json_get "$out" "j['metadata']['kb-author'], len(j['sections']), len(j['kernel_sha256'])")" = "alice 4 64" ] ||
    fail "show --json: $out"
[ "$(json_get "$out" "j['arch'], j['verified_on'], j['speedup']")" = "None None None" ] || fail "show --json: $out"
contains "$(json_get "$out" "j['body']")" "## Technique"
expect_rc 0 kb skill show "$L/scan-draft"          # a path does too
expect_rc 1 kb skill show --dir "$L" nope
contains "$out" "no skill 'nope' in '$L'"

# approve: only a verified skill; the reviewer is required
expect_rc 2 kb skill approve --dir "$L" gelu-vec4
contains "$out" "need --reviewer WHO"
before=$(cat "$L/gelu-vec4/SKILL.md")
expect_rc 1 kb skill approve --dir "$L" gelu-vec4 --reviewer bob
contains "$out" "'gelu-vec4' is draft: only a verified skill is approved"
[ "$before" = "$(cat "$L/gelu-vec4/SKILL.md")" ] || fail "a refused approve changed SKILL.md"

# retire: kept, hidden from list unless asked; not twice
expect_rc 2 kb skill retire --dir "$L" scan-draft
contains "$out" "need --reason TEXT"
expect_rc 0 kb skill retire --dir "$L" scan-draft --reason "no kernel came of it"
contains "$out" "scan-draft: retired (no kernel came of it)"
[ -f "$L/scan-draft/SKILL.md" ] || fail "retire deleted the skill"
grep -q "kb-retired: no kernel came of it" "$L/scan-draft/SKILL.md" || fail "no kb-retired"
expect_rc 0 kb skill list --dir "$L"
lacks "$out" "scan-draft"
contains "$out" "1 retired not shown"
expect_rc 0 kb skill list --dir "$L" --all
contains "$out" "retired: no kernel came of it"
expect_rc 0 kb skill list --dir "$L" --status retired
contains "$out" "scan-draft"
expect_rc 1 kb skill retire --dir "$L" scan-draft --reason again
contains "$out" "'scan-draft' is already retired (no kernel came of it)"
# a skill that does not parse is listed as such, and not shown
mkdir -p "$L/broken" && printf -- '---\nname: broken\n' >"$L/broken/SKILL.md"
expect_rc 0 kb skill list --dir "$L" --all
contains "$out" "does not parse: kb skill lint $L/broken"
expect_rc 1 kb skill show --dir "$L" "$L/broken"
contains "$out" "$L/broken/SKILL.md:1: error: the front matter is not closed"
