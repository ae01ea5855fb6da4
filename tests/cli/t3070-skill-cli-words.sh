#!/usr/bin/env bash
# tier: quick
# kb skill as a newcomer meets it (issue 26 items 15, 16): kb skill list's
# columns in line however long a name or task is; a kb-speedup that is no
# number flagged, not printed as "fastx"; did-you-mean catches two letters
# swapped (lsit: list, not lint); kb skill new --dir LIB's next step names
# --dir LIB; lint --dir LIB NAME finds NAME's parent in LIB; lint shows
# its progress; and "1 chunk", not "1 chunks" (item 17).
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

# kb skill lint --dir LIB NAME: NAME's parent is looked for in all of LIB,
# not among the skills named alone; a parent LIB lacks is still flagged
cp -RL "$KB_TOP/corpus/skills/decoupled-lookback-scan" "$KB_TOP/corpus/skills/tiled-scan-warp-shuffles" "$L/"
expect_rc 0 kb skill lint --no-compile --dir "$L" decoupled-lookback-scan
lacks "$out" "kb-parent"
contains "$out" "kb skill lint: 1 skill, 0 errors"
rm -r "$L/tiled-scan-warp-shuffles"
expect_rc 0 kb skill lint --no-compile --dir "$L" decoupled-lookback-scan
contains "$out" "kb-parent 'tiled-scan-warp-shuffles' is no skill of the library"

# kb skill lint compiles each kernel (seconds each): a progress line on
# stderr at once (then every 15 s when not a terminal, as ingest's); none
# with --json or -q
cat >"$KB_TMP/kbv" <<'S'
#!/bin/sh
r='{"kb_verify":1,"verdict":"compiled","reason":"compiled with NVRTC"}'
if [ "$1" = --serve ]; then while read -r l; do echo "$r"; done; else echo "$r"; fi
S
chmod +x "$KB_TMP/kbv"
n=$(ls -d "$L"/*/ | wc -l)
KB_VERIFY="$KB_TMP/kbv" expect_rc 1 kb skill lint --dir "$L"    # bad-speedup: errors
contains "$out" "kb skill lint: compiling kernel 1 of $n ("
KB_VERIFY="$KB_TMP/kbv" expect_rc 1 kb skill lint --dir "$L" --json
lacks "$out" "compiling kernel"
KB_VERIFY="$KB_TMP/kbv" expect_rc 1 kb -q skill lint --dir "$L"
lacks "$out" "compiling kernel"

# counts of one in the singular
printf '# One\n\nOne chunk.\n' >"$KB_TMP/one.md"
expect_rc 0 kb -q ingest --no-embed "$KB_TMP/one.md"
expect_rc 0 kb status
contains "$out" ": 1 source, 1 document, 1 chunk, 0 papers"
echo ok
