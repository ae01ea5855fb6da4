#!/usr/bin/env bash
# tier: quick
# kb skill verify: kb-verify's result (a child that answers as kb-verify
# does, KB_VERIFY) appended to evidence.json, kb-status and kb-speedup set
# from it; a suspicious result and no GPU change nothing; a failed
# re-verification retires; a retired skill is not verified again;
# --from-result imports a result made elsewhere (our H200 run), checking
# its task and kernel hash; --all; a kernel changed since is caught by lint.
. "$(dirname "$0")/lib.sh"
cd "$KB_TOP"
L="$KB_TMP/lib"
c=corpus/tasks/gelu/candidates/vec4.cu
expect_rc 0 kb skill new --dir "$L" gelu-vec4 --task gelu --from "$c" --description "Vectorised GELU."

# a kb-verify that prints the result in $KB_TMP/result.json
cat >"$KB_TMP/fake" <<S
#!/bin/sh
echo "\$*" >>"$KB_TMP/args"
cat "$KB_TMP/result.json"; echo
S
chmod +x "$KB_TMP/fake"
answer() {   # VERDICT SPEEDUP|none [BASELINE]
    if [ "$2" = none ]; then
        echo '{"kb_verify":1,"task":"gelu","candidate":"kernel.cu","device":{"name":"NVIDIA H200","compute_capability":"9.0","sms":132},"verdict":"'"$1"'","reason":"the reason for '"$1"'"}' >"$KB_TMP/result.json"
        return
    fi
    tr -d '\n' >"$KB_TMP/result.json" <<J
{"kb_verify":1,"task":"gelu","candidate":"kernel.cu","device":{"name":"NVIDIA H200","compute_capability":"9.0","sms":132},
 "checks":[{"shape":"target","seed":11,"ok":true},{"shape":"odd","seed":12,"ok":true}],
 "timings":[{"shape":"target","baseline":"${3:-reference}","runs":50,
   "candidate_ms":{"median":0.135,"ci95_lo":0.134,"ci95_hi":0.136,"min":0.133},
   "baseline_ms":{"median":0.218,"ci95_lo":0.217,"ci95_hi":0.219,"min":0.216},"speedup":$2,"floor_ms":0.11}],
 "speedup_geomean":$2,"verdict":"$1","reason":"the reason for $1","wall_ms":300${4:+,$4}}
J
}
V="env KB_VERIFY=$KB_TMP/fake $KB_BIN"
snapshot() { cat "$L/gelu-vec4/SKILL.md" "$L/gelu-vec4/evidence.json" 2>/dev/null; }

expect_rc 2 kb skill verify --dir "$L"
contains "$out" "need NAME... or --all"
expect_rc 2 kb skill verify --dir "$L" gelu-vec4 --device-info x.json
contains "$out" "--device-info goes with --from-result"
expect_rc 1 kb skill verify --dir "$L" nope
contains "$out" "no skill 'nope'"

# no GPU: the real kb-verify says so, and nothing changes
if [ -x "$KB_BUILD/kb-verify" ] && ! "$KB_BUILD/kb-verify" --device-info >/dev/null 2>&1; then
    before=$(snapshot)
    KB_VERIFY="$KB_BUILD/kb-verify" expect_rc 4 kb skill verify --dir "$L" gelu-vec4
    contains "$out" "cannot verify 'gelu-vec4': no GPU"
    contains "$out" "nothing changed"
    [ "$before" = "$(snapshot)" ] || fail "a verification without a GPU changed the skill"
fi

# a suspicious result never verifies: refused, nothing written
answer suspicious 80
before=$(snapshot)
expect_rc 1 $V skill verify --dir "$L" gelu-vec4
contains "$out" "kb-verify found the result for 'gelu-vec4' suspicious (the reason for suspicious)"
[ "$before" = "$(snapshot)" ] || fail "a suspicious result changed the skill"

# faster: verified, with the speedup and the record's hash
answer faster 1.6116
expect_rc 0 $V skill verify --dir "$L" gelu-vec4
contains "$out" "gelu-vec4: draft -> verified: faster, 1.61x reference"
md=$(cat "$L/gelu-vec4/SKILL.md")
contains "$md" "kb-status: verified"
contains "$md" "kb-speedup: '1.61'"
ev=$(cat "$L/gelu-vec4/evidence.json")
[ "$(json_get "$ev" "len(j['records']), j['records'][0]['verdict'], j['records'][0]['how'], j['records'][0]['device']['arch'], j['records'][0]['seeds']")" = \
  "1 faster kb-verify sm_90 [11, 12]" ] || fail "evidence: $ev"
sha=$(sha256sum "$L/gelu-vec4/kernel.cu" | cut -d' ' -f1)
[ "$(json_get "$ev" "j['records'][0]['kernel_sha256']")" = "$sha" ] || fail "the record's kernel hash"
[ "$(json_get "$ev" "[s['name'] for s in j['records'][0]['shapes']]")" = "['target', 'odd', 'tiny']" ] ||
    fail "the task's shapes are not in the record"
# kb-evidence names the record: SHA-256 of its compact JSON as cJSON prints it
rec_hash=$(json_get "$("$KB_BIN" skill show --dir "$L" gelu-vec4 --json)" "j['evidence_sha256'][0]")
[ ${#rec_hash} -eq 64 ] || fail "no record hash: $rec_hash"
contains "$md" "kb-evidence: $rec_hash"
expect_rc 0 kb skill lint --dir "$L" --no-compile gelu-vec4
contains "$out" "0 errors"
expect_json 0 $V skill verify --dir "$L" gelu-vec4 --json
[ "$(json_get "$out" "j['skills'][0]['status'], j['skills'][0]['verdict'], j['skills'][0]['speedup']")" = "verified faster 1.61" ] ||
    fail "verify --json: $out"
# kb-verify was asked for the baseline's spread across three processes
contains "$(cat "$KB_TMP/args")" "--spread 3 "
# a re-verification whose interval (the runs' ratios, widened by the
# baseline's spread across processes) holds the bar 1.03 retires nothing:
# 1.01x by its point, [0.99, 1.04] x (1 +- 0.01)
answer correct 1.01 reference '"speedup_ci95":[0.99,1.04],"baseline_spread":{"processes":4,"spread":0.01}'
expect_rc 0 $V skill verify --dir "$L" gelu-vec4
contains "$out" "verified -> verified: correct, 1.01x reference (the speedup's interval [0.980, 1.050] holds the bar 1.03: a difference inside it retires nothing)"
ev=$(cat "$L/gelu-vec4/evidence.json")
[ "$(json_get "$ev" "j['records'][-1]['within_interval'], j['records'][-1]['baseline_spread'], j['records'][-1]['speedup_ci95']")" = \
  "kept 0.01 [0.99, 1.04]" ] || fail "the interval's record: $ev"

# approve, then a failed re-verification retires it with the reason
expect_rc 0 kb skill approve --dir "$L" gelu-vec4 --reviewer alice
answer incorrect none
expect_rc 1 $V skill verify --dir "$L" gelu-vec4
contains "$out" "approved -> retired: verification on NVIDIA H200: incorrect"
md=$(cat "$L/gelu-vec4/SKILL.md")
contains "$md" "kb-status: retired"
contains "$md" "kb-retired: 'verification on NVIDIA H200: incorrect (the reason for incorrect)'"
contains "$md" "kb-when-not: 'incorrect on gelu (NVIDIA H200, sm_90): the reason for incorrect'"
[ "$(json_get "$(cat "$L/gelu-vec4/evidence.json")" "len(j['records'])")" = 4 ] || fail "the failed record is not kept"
# a retired skill is not verified again
answer faster 2
before=$(snapshot)
expect_rc 1 $V skill verify --dir "$L" gelu-vec4
contains "$out" "'gelu-vec4' is retired: a retired skill is not verified again"
[ "$before" = "$(snapshot)" ] || fail "verifying a retired skill changed it"

# --from-result: our H200 run's result lines, the one for this task and
# kernel taken (its candidate's hash checked), the file's date kept
expect_rc 0 kb skill new --dir "$L" tiled-transpose --task transpose --description "Tiles." \
    --from corpus/tasks/transpose/candidates/smem_tile.cu
R=tests/fixtures/skills/h200-results.jsonl
expect_rc 0 kb skill verify --dir "$L" tiled-transpose --from-result "$R" \
    --device-info tests/fixtures/skills/h200-device.json
contains "$out" "tiled-transpose: draft -> verified: faster, 6.44x reference"
ev=$(cat "$L/tiled-transpose/evidence.json")
[ "$(json_get "$ev" "j['records'][0]['how'], j['records'][0]['device']['driver_version']")" = \
  "kb-verify, imported from 'h200-results.jsonl' 580.159.04" ] || fail "import: $ev"
# a kernel that is not the one verified there: refused, nothing written
printf '\n// changed\n' >>"$L/tiled-transpose/kernel.cu"
before=$(cat "$L/tiled-transpose/evidence.json")
expect_rc 1 kb skill verify --dir "$L" tiled-transpose --from-result "$R"
contains "$out" "holds no kb-verify result for task 'transpose' and this kernel.cu"
[ "$before" = "$(cat "$L/tiled-transpose/evidence.json")" ] || fail "a refused import changed the evidence"
# ... and lint says the evidence is stale
expect_rc 1 kb skill lint --dir "$L" --no-compile tiled-transpose
contains "$out" "kb-status 'verified', but the latest evidence is for another kernel.cu"
cp corpus/tasks/transpose/candidates/smem_tile.cu "$L/tiled-transpose/kernel.cu"

# --all: every skill that is not retired
answer faster 1.9
expect_rc 0 kb skill new --dir "$L" gelu-two --task gelu --from "$c" --description "Two."
expect_rc 3 $V skill verify --dir "$L" --all
contains "$out" "gelu-two: draft -> verified: faster, 1.90x reference"
lacks "$out" "gelu-vec4"
# kb-verify answers for gelu, not transpose: refused for that one
contains "$out" "the result is for task 'gelu', not 'tiled-transpose''s kb-task 'transpose'"

# a speedup well above the best verified skill's for the task (1.25 times
# gelu-two's 1.90x) is flagged for review: the verdict stands, the record
# and the line say so; one of the same kernel is no comparison
sed 's|^// GELU|// GELU (a copy)|' "$c" >"$KB_TMP/copy.cu"
expect_rc 0 kb skill new --dir "$L" gelu-three --task gelu --from "$KB_TMP/copy.cu" --description "Three."
answer faster 3.0
expect_rc 0 $V skill verify --dir "$L" gelu-three
contains "$out" "gelu-three: draft -> verified: faster, 3.00x reference; review: 3.00x is 1.6 times the best verified skill's 1.90x for gelu: review the kernel before trusting it"
[ "$(json_get "$(cat "$L/gelu-three/evidence.json")" "j['records'][-1]['review'][:18]")" = "3.00x is 1.6 times" ] || fail "no review in the record"
answer faster 2.2
expect_rc 0 $V skill verify --dir "$L" gelu-two
lacks "$out" "review"
