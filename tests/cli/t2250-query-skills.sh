#!/usr/bin/env bash
# tier: ci
# The skills block of kb query (issue 22): one entry a skill, titled by
# its name, status and speedup, verified skills before drafts, retired
# skills left out unless a filter asks for skills, at most -k.
. "$(dirname "$0")/lib.sh"
need_mirror
use_kb cbp-survey-skills

# block QUERY [ARGS]: each skill entry's first heading, one a line
block() { local q=$1; shift; kb query --json "$@" "$q" | python3 -c "
import json, sys
for s in json.load(sys.stdin).get('skills', []): print(s['heading_path'][0])"; }

for q in "TMA load of a tile into shared memory" "warp shuffle reduction" \
         "why is my transpose slow" "online softmax"; do
    titles=$(block "$q")
    [ -n "$titles" ] || fail "no skills for '$q'"
    # titled by the skill: "NAME (STATUS, SPEEDUPx)", never "kernel.cu"
    bad=$(echo "$titles" | grep -vE '^[a-z0-9-]+ \((verified|approved|draft)(, [0-9.]+x)?\)$' || true)
    [ -z "$bad" ] || fail "skills of '$q' not titled by their skill: $bad"
    names=$(echo "$titles" | sed 's/ (.*//')
    [ "$(echo "$names" | sort -u | wc -l)" -eq "$(echo "$names" | wc -l)" ] ||
        fail "a skill twice in the block of '$q': $titles"
    # the human list says the same
    human=$(kb query -k 10 "$q" | grep -E '^skill [0-9]+\. ')
    first=$(echo "$titles" | head -n 1)
    contains "$human" "[skills] $first"
done

# retired skills: not in the block; a filter for skills ranks them
retired=$(grep -l '^  kb-status: retired' "$KB_TOP"/corpus/skills/*/SKILL.md | head -n 1)
[ -n "$retired" ] || fail "the seed library has no retired skill to test with"
name=$(basename "$(dirname "$retired")")
q=$(echo "$name" | tr '-' ' ')
lacks "$(block "$q")" "$name ("
contains "$(kb query -k 10 --kind skill "$q")" "$name (retired"

# verified before drafts: a draft that matches the question better still
# comes after the verified skills
mkdir -p "$KB_TMP/drafts/transpose-draft"
sed -e 's/^name: smem-tiled-transpose/name: transpose-draft/' \
    -e 's/^  kb-status: verified/  kb-status: draft/' \
    -e 's/^# smem-tiled-transpose/# transpose-draft/' \
    -e 's/^description: \(.\)/description: \1why is my transpose slow? A slow transpose, transposed. /' \
    "$KB_TOP/corpus/skills/smem-tiled-transpose/SKILL.md" >"$KB_TMP/drafts/transpose-draft/SKILL.md"
grep -q 'kb-status: draft' "$KB_TMP/drafts/transpose-draft/SKILL.md" || fail "no draft made"
expect_rc 0 kb ingest -q "$KB_TMP/drafts"
contains "$(kb query --json --kind skill -k 10 "why is my transpose slow")" "transpose-draft (draft"
titles=$(block "why is my transpose slow" -k 10)
echo "$titles" | head -n 1 | grep -q '(verified' || fail "a draft before the verified skills: $titles"
seen_draft=0
while read -r t; do
    case $t in *"(draft"*) seen_draft=1 ;; *) [ "$seen_draft" -eq 0 ] || fail "verified after a draft: $titles" ;; esac
done <<<"$titles"

# at most -k
for k in 1 2; do
    n=$(block "why is my transpose slow" -k "$k" | wc -l)
    [ "$n" -le "$k" ] || fail "-k $k gave $n skills"
done
echo ok
