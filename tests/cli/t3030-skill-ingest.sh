#!/usr/bin/env bash
# tier: quick
# The seed library in a KB of the real mirror, by a plain 'kb ingest'
# (corpus/skills is a source of the manifest): ingested as kind skill
# (kernel.cu as code), found by kb query --kind skill among the guides with
# status and speedup in every result, filtered by kb skill search; and its
# deep links all resolve to chunks of that KB (kb skill lint --strict).
. "$(dirname "$0")/lib.sh"
need_mirror
cd "$KB_TOP"
expect_rc 0 kb ingest --no-embed -q   # the manifest's skills source is the library
n=$(ls -d corpus/skills/*/ | wc -l)
[ "$(sql "SELECT count(*) FROM documents d WHERE d.source_id = 'skills' AND d.path LIKE '%/SKILL.md'")" -eq "$n" ] ||
    fail "not every SKILL.md became a document"
[ "$(sql "SELECT count(DISTINCT kind) FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.path LIKE '%/SKILL.md'")" = 1 ] ||
    fail "a SKILL.md chunk is not of kind skill"
[ "$(sql "SELECT kind FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.path LIKE '%/SKILL.md' LIMIT 1")" = skill ] ||
    fail "SKILL.md chunks are not of kind skill"
[ "$(sql "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.path LIKE '%/kernel.cu' AND c.kind = 'code'")" -gt 0 ] ||
    fail "no kernel.cu as code"
# the description and "When to apply" come first in each skill
first=$(sql "SELECT text FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.path LIKE '%smem-padding-bank-conflicts/SKILL.md' ORDER BY ord LIMIT 2")
contains "$first" "kb-status: verified"
contains "$first" "Pad a shared-memory tile by one element per row"

# the links of every seed skill resolve in this KB; no warning either
expect_rc 0 kb skill lint --strict --no-compile
contains "$out" "$n skills, 0 errors, 0 warnings"
lacks "$out" "links not checked"

# found among the guides, with status and speedup in the result
expect_json 0 kb query --kind skill --json -k 5 "shared memory bank conflicts padding a tile"
[ "$(json_get "$out" "j['results'][0]['heading_path'][0].split(' ')[0]")" = smem-padding-bank-conflicts ] ||
    fail "query --kind skill: $out"
contains "$(json_get "$out" "j['results'][0]['heading_path'][0]")" "(verified, "
[ "$(json_get "$out" "set(r['kind'] for r in j['results'])")" = "{'skill'}" ] || fail "kinds: $out"
expect_rc 0 kb query -k 10 "warp shuffle reduction of a row"
lacks "$out" "(retired"   # not in the skills block unless asked for (issue 22)
contains "$out" "[cuda-programming-guide]"
expect_rc 0 kb query -k 10 --kind skill "warp shuffle reduction of a row"
contains "$out" "[skills] warp-shuffle-block-reduction (retired"   # kept, found, said so

# kb skill search: one hit per skill, filtered by the metadata
expect_json 0 kb skill search --json --k 20 gemm tensor cores
names=$(json_get "$out" "' '.join(sorted(r['name'] for r in j['results']))")
contains "$names" "mma-sync-3xtf32-gemm"
contains "$names" "wgmma-warp-specialization"
# the skill_search tool's shape (api/): uri and path, speedup a number
# (or null), arch the skill's kb-arch
[ "$(json_get "$out" "sorted(j['results'][0])")" = "['arch', 'chunk_id', 'dtype', 'heading_path', 'name', 'ops', 'path', 'rank', 'score', 'speedup', 'status', 'task', 'text', 'uri', 'url']" ] ||
    fail "search --json keys: $out"
[ "$(json_get "$out" "all(r['speedup'] is None or isinstance(r['speedup'], (int, float)) for r in j['results'])")" = True ] ||
    fail "search --json speedup: $out"
# an empty filter is no filter (agents under strict function calling send
# every field, "" for the ones they do not mean)
all_names=$names
expect_json 0 kb skill search --json --k 20 --arch "" --dtype "" --ops "" gemm tensor cores
[ "$(json_get "$out" "' '.join(sorted(r['name'] for r in j['results']))")" = "$all_names" ] ||
    fail "empty filters: $out"
expect_json 0 kb skill search --json --k 20 --dtype bf16 gemm tensor cores
[ "$(json_get "$out" "sorted(set(r['task'] for r in j['results']))")" = "['gemm_bf16']" ] || fail "--dtype bf16: $out"
expect_json 0 kb skill search --json --k 20 --arch sm_80 gemm tensor cores
lacks "$(json_get "$out" "[r['name'] for r in j['results']]")" "wgmma"   # sm_90a only
contains "$(json_get "$out" "[r['name'] for r in j['results']]")" "cp-async-multistage-pipeline"   # sm_80+
expect_json 0 kb skill search --json --ops histogram atomics
[ "$(json_get "$out" "[(r['name'], r['status'], r['speedup']) for r in j['results']][0][:2]")" = "('cluster-dsmem-histogram', 'verified')" ] ||
    fail "--ops: $out"
expect_rc 0 kb skill search --status retired transpose
contains "$out" "no skills for 'transpose'"
expect_rc 2 kb skill search --k 0 x
