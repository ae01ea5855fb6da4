#!/usr/bin/env bash
# tier: ci
# kb generate's write-back: a kernel verified faster becomes a draft skill
# through the skill library. Without a GPU here, the verdicts are the H200's
# own, replayed by tests/generate/recorded_verify.py (a kb-verify that
# answers a candidate with the recorded result of the same kernel, and
# sends any other to the real kb-verify --compile-only); on the H200,
# tests/generate/device-run.sh does this with the real kb-verify. Asserted:
# early stop at the roofline fraction; the skill's kernel.cu, evidence.json
# (the verification's record), SKILL.md (draft, the LLM's text, the
# prompt's passages, kb-parent, kb-provenance); lint clean; indexed at once;
# credit in kb skill list; --replay writes nothing; a write-up that does
# not come leaves placeholders; a "faster" without its checks writes
# nothing.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gen-lib.sh"
need_kb_verify
cd "$KB_TOP"
SK="$KB_TMP/skills"
cp -rL corpus/skills "$SK"
expect_rc 0 kb ingest --no-embed -q --source skill-copy "$SK"
export KB_VERIFY="$KB_TOP/tests/generate/recorded_verify.py" REAL_KB_VERIFY="$KB_BUILD/kb-verify"
export RECORDED_RESULTS="$KB_TOP/tests/fixtures/skills/h200-results.jsonl" RECORDED_LOG="$KB_TMP/verify.jsonl"

# the prompt kb prompt and --dry-run print is the one round 1 sends: no
# kernel given, the kernel of transpose's own skill is the kernel to refine
expect_json 0 kb prompt --json transpose
P0=$out
contains "$(json_get "$P0" "j['user']")" "## Kernel to refine"
expect_json 0 kb generate transpose --dry-run --json --skills "$SK"
[ "$(json_get "$out" "j['hash']")" = "$(json_get "$P0" "j['hash']")" ] || fail "--dry-run's prompt is not kb prompt's"
start_llm "$FIX/writeback.json"
expect_json 0 kb generate transpose --samples 1 --rounds 3 --floor-fraction 0.7 --skills "$SK" --json
S=$out
[ "$(events "$(run_dir "$S")" prompt "e['hash'], e['parent_skill']" | head -n 1)" = \
  "$(json_get "$P0" "j['hash']") smem-tiled-transpose" ] || fail "round 1 sent another prompt than kb prompt's"
[ "$(request_user 1)" = "$(json_get "$P0" "j['user']")" ] || fail "the request is not kb prompt's user text"
[ "$(json_get "$S" "j['best'], round(j['best_speedup'], 2), j['stop'], j['rounds_run']")" = "r0s0 6.44 floor 1" ] ||
    fail "summary: $S"
NAME=$(json_get "$S" "j['skill']['name']")
[ "$NAME" = transpose-padded-smem-tile ] || fail "skill name: $S"
[ "$(json_get "$S" "j['skill']['dir'], j['skill']['parent'], j['skill']['drafted_by_llm']")" = \
  "$SK/$NAME smem-tiled-transpose True" ] || fail "skill: $S"
ID=$(json_get "$S" "j['id']")
[ "$(requests)" = 2 ] || fail "requests: $(requests)"
# the write-up request: the kernel, its verification, the format
w=$(request_user 2)
contains "$w" "verified by kb-verify: faster, 6.44x"
contains "$w" "__shared__ float tile[32][33];"
contains "$w" "NAME: a short kebab-case name"

# the skill
D="$SK/$NAME"
cmp -s "$D/kernel.cu" corpus/tasks/transpose/candidates/smem_tile.cu || fail "kernel.cu"
[ ! -e "$SK/.$NAME".tmp-* ] 2>/dev/null || fail "a temporary folder was left"
ev=$(cat "$D/evidence.json")
[ "$(json_get "$ev" "len(j['records']), j['skill'], j['records'][0]['verdict'], j['records'][0]['device']['name']")" = \
  "1 $NAME faster NVIDIA H200" ] || fail "evidence: $ev"
[ "$(json_get "$ev" "j['records'][0]['kernel_sha256']")" = "$(sha256sum "$D/kernel.cu" | cut -d' ' -f1)" ] ||
    fail "the evidence is for another kernel"
contains "$(json_get "$ev" "j['records'][0]['how']")" "kb generate run $ID"
# the receipt says which shapes the model never saw: all but the target
[ "$(json_get "$ev" "j['records'][0]['shown_shape'], j['records'][0]['held_back']")" = \
  "target ['odd', 'tiny']" ] || fail "held-back shapes: $ev"
m=$(cat "$D/SKILL.md")
contains "$m" "name: $NAME"
contains "$m" "description: Transpose through a 32x33 shared-memory tile"
contains "$m" "kb-status: draft"
contains "$m" "kb-task: transpose"
contains "$m" "kb-parent: smem-tiled-transpose"
contains "$m" "kb-provenance: kb generate run=$ID model=scripted prompt=sha256:"
contains "$m" "kb-speedup:"
contains "$m" "kb-evidence:"
contains "$m" "kb-author: kb generate"
contains "$m" "## Technique"
contains "$m" "Each block of 32x8 threads loads a 32x32 tile"
contains "$m" "## Pitfalls"
contains "$m" "## Evidence"
# it cites the passages that helped (the skill it refines; those naming
# what it does beyond the reference), not every passage of the prompt,
# and by links that hold no machine's path (issue 26 item 19)
contains "$m" "The passages of its prompt that it draws on"
contains "$m" "](skill://smem-tiled-transpose/SKILL.md"
lacks "$m" "file:"
lacks "$m" "$KB_TOP"
lacks "$m" "$KB_TMP"
lacks "$w" "file:"
ncites=$(json_get "$P0" "len({(c['url'], c['heading']) for c in j['cites'] if c['url']})")
nlisted=$(sed -n '/^## Evidence/,$p' "$D/SKILL.md" | grep -c '^- ')
[ "$nlisted" -ge 1 ] && [ "$nlisted" -lt "$ncites" ] || fail "$nlisted of $ncites passages cited"
contains "$m" "$((ncites - nlisted)) other passage"
expect_json 0 kb skill lint --dir "$SK" --no-compile --json "$D"
[ "$(json_get "$out" "j['errors']")" = 0 ] || fail "lint: $out"
expect_json 0 kb skill show --dir "$SK" --json "$NAME"
[ "$(json_get "$out" "j['status'], j['task'], j['evidence_records']")" = "draft transpose 1" ] || fail "show: $out"
# indexed at once
expect_json 0 kb query --kind skill --mode lexical --json "padded smem tile transpose coalesced"
contains "$(json_get "$out" "[r['heading_path'][0] for r in j['results']]")" "$NAME"
# credit: the seed skill was in the winner's prompt
expect_json 0 kb skill list --dir "$SK" --json
[ "$(json_get "$out" "[(s['used'], s['won']) for s in j['skills'] if s['name'] == 'smem-tiled-transpose'][0]")" = "(1, 1)" ] ||
    fail "credit: $out"
[ "$(json_get "$out" "[(s['used'], s['won']) for s in j['skills'] if s['name'] == '$NAME'][0]")" = "(0, 0)" ] ||
    fail "credit of the new skill: $out"
expect_rc 0 kb skill list --dir "$SK"
contains "$out" "used/won"
contains "$(grep '^smem-tiled-transpose ' <<<"$out")" " 1/1"

# --replay: the same verdicts, no request, no second skill
n=$(ls "$SK" | wc -l)
expect_json 0 kb generate transpose --replay "$ID" --skills "$SK" --json
[ "$(json_get "$out" "j['replay']['same_verdicts'], j['skill']")" = "True None" ] || fail "replay: $out"
[ "$(ls "$SK" | wc -l)" = "$n" ] || fail "the replay wrote a skill"
[ "$(requests)" = 2 ] || fail "the replay sent a request"
# a replay's credit is its run's, counted once
expect_json 0 kb skill list --dir "$SK" --json
[ "$(json_get "$out" "[(s['used'], s['won']) for s in j['skills'] if s['name'] == 'smem-tiled-transpose'][0]")" = "(1, 1)" ] ||
    fail "credit after the replay: $out"

# the write-up does not come (no reply left: a 400): placeholders, a
# unique name
start_llm "$FIX/writeback.json"
python3 - "$FIX/writeback.json" "$KB_TMP/one.json" <<'EOF'
import json, os, sys
s = json.load(open(sys.argv[1]))
for r in s["replies"]:
    for p in r["parts"]:
        p["file"] = os.path.join(os.path.dirname(sys.argv[1]), p["file"])
json.dump({"replies": s["replies"][:1]}, open(sys.argv[2], "w"))
EOF
start_llm "$KB_TMP/one.json"
expect_json 0 kb generate transpose --samples 1 --rounds 1 --skills "$SK" --json
[ "$(json_get "$out" "j['skill']['drafted_by_llm']")" = False ] || fail "write-up: $out"
N2=$(json_get "$out" "j['skill']['name']")
case $N2 in transpose-gen-*) ;; *) fail "a name without a write-up: $N2" ;; esac
contains "$(cat "$SK/$N2/SKILL.md")" "TODO (the write-up did not say)"
expect_json 0 kb skill lint --dir "$SK" --no-compile --json "$SK/$N2"
[ "$(json_get "$out" "j['errors']")" = 0 ] || fail "lint of a placeholder draft: $out"

# a "faster" that does not show its checks passing is not written back
export RECORDED_RESULTS="$KB_TOP/tests/fixtures/verify/h200-results.jsonl"
start_llm "$LLMFIX/good.json"
n=$(ls "$SK" | wc -l)
expect_json 1 kb generate gelu --samples 1 --rounds 1 --skills "$SK" --json
[ "$(json_get "$out" "j['candidates'][0]['verdict'], j['best'], j['skill']")" = "faster None None" ] ||
    fail "a faster without checks: $out"
[ "$(ls "$SK" | wc -l)" = "$n" ] || fail "a skill was written"

# a win that cannot be written back fails the run (issue 28 item 5): every
# name the write-back could take is taken; the summary says why, exit 1
export RECORDED_RESULTS="$KB_TOP/tests/fixtures/skills/h200-results.jsonl"
SK2="$KB_TMP/skills-full"
cp -rL corpus/skills "$SK2"
mkdir "$SK2/transpose-padded-smem-tile"
for k in $(seq 2 999); do mkdir "$SK2/transpose-padded-smem-tile-$k"; done
start_llm "$FIX/writeback.json"
expect_json 1 kb generate transpose --samples 1 --rounds 3 --floor-fraction 0.7 --skills "$SK2" --json
contains "$(json_get "$out" "j['skill']['error']")" "no free skill name"
[ "$(json_get "$out" "j['best']")" = r0s0 ] || fail "the run's summary: $out"
echo ok
