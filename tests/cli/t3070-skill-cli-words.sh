#!/usr/bin/env bash
# tier: quick
# kb skill as a newcomer meets it (issue 26 items 15, 16): kb skill list's
# columns in line however long a name or task is; a kb-speedup that is no
# number flagged, not printed as "fastx"; did-you-mean catches two letters
# swapped (lsit: list, not lint); kb skill new --dir LIB's next step names
# --dir LIB; and "1 chunk", not "1 chunks" (item 17).
. "$(dirname "$0")/lib.sh"
L="$KB_TMP/lib"
mkdir -p "$L"
cp -RL "$KB_TOP/corpus/skills/smem-tiled-transpose" "$KB_TOP/corpus/skills/online-softmax" \
    "$KB_TOP/corpus/skills/grid-stride-persistent-reduction" "$L/"
cp -RL "$KB_TOP/corpus/skills/online-softmax" "$L/bad-speedup"
sed -i "s/^name: online-softmax/name: bad-speedup/; s/^  kb-speedup: .*/  kb-speedup: fast/" \
    "$L/bad-speedup/SKILL.md"

expect_json 0 kb skill list --dir "$L"
# every row's status, task and used/won start where the heading's do
printf '%s\n' "$out" | python3 -c '
import sys
lines = [l for l in sys.stdin.read().split("\n") if l]
head = lines[0]
cols = [head.index(w) for w in ("status", "task", "arch")]
for l in lines[1:]:
    for c in cols:
        assert l[c - 1] == " " and l[c] != " ", (c, head, l)
    assert l.rstrip() == l, "a trailing blank: %r" % l
' || fail "columns out of line: $out"
contains "$out" "grid-stride-persistent-reduction"
lacks "$out" "fastx"
contains "$out" "kb-speedup 'fast' is not a number"

# did you mean: a transposition is one edit
expect_rc 2 kb skill lsit
contains "$out" "did you mean 'list'?"
expect_rc 2 kb qeury x
contains "$out" "did you mean 'query'?"

# kb skill new --dir LIB: the next step names LIB
expect_rc 0 kb skill new --dir "$L" --task gelu my-gelu
contains "$out" "'kb skill verify --dir $L my-gelu'"

# counts of one in the singular
printf '# One\n\nOne chunk.\n' >"$KB_TMP/one.md"
expect_rc 0 kb -q ingest --no-embed "$KB_TMP/one.md"
expect_rc 0 kb status
contains "$out" ": 1 source, 1 document, 1 chunk, 0 papers"
echo ok
