#!/usr/bin/env bash
# tier: ci
# Lexical search over the real corpus: identifiers whole and by parts,
# safe user text, filters, the JSON contract, get, papers.
. "$(dirname "$0")/lib.sh"
need_mirror
expect_rc 0 kb ingest --no-embed -q --manifest "$MANIFEST"

q() { expect_json 0 kb query --mode lexical --json "$@"; }
# top-N headings/paths/texts of the last query, one per line
hits() { json_get "$out" "'\n'.join(' / '.join(r['heading_path']) + ' | ' + r['path'] + ' | ' + r['text'][:2000] for r in j['results'][:$1])"; }

# one document (the PTX ISA) floods this query's candidates: still at most
# 5 results a document, the other places filled from deeper in the lists
q -k 10 "wgmma shared-memory matrix descriptor: leading/stride byte offsets and swizzle layout for A and B"
per_doc=$(json_get "$out" "max(__import__('collections').Counter(r['path'] for r in j['results']).values())")
[ "$per_doc" -le 5 ] || fail "$per_doc results from one document"
[ "$(json_get "$out" "len(j['results'])")" = 10 ] || fail "fewer than 10 results"
# identifiers, whole
q -k 5 "cp.async.bulk.tensor"
contains "$(hits 5)" "cp.async.bulk.tensor"
q -k 5 "__shfl_down_sync"
contains "$(hits 5)" "__shfl_down_sync"
q -k 5 "cudaFuncSetAttribute"
contains "$(hits 5)" "cudaFuncSetAttribute"
q -k 5 "wgmma.mma_async"
contains "$(hits 5)" "wgmma.mma_async"
q -k 5 "ld.global.nc"
contains "$(hits 5)" "ld.global.nc"
# ... and by their parts
q -k 10 "FuncSetAttribute"
contains "$(hits 10)" "cudaFuncSetAttribute"
q -k 10 "shfl down sync"
contains "$(hits 10)" "shfl_down_sync"
q -k 10 "convolutionRowsKernel"
contains "$(hits 10)" "convolutionRowsKernel"

# any user text is safe: no FTS5 syntax errors
for text in '"unbalanced quote' 'a:b' 'x-y-z' '(' ')' '*' 'AND OR NOT' 'NEAR(a b)' \
            'col:umn "x" (y) *z -w' 'ünïcödé 共享内存' '^' '.' '--' "it's" '{}[]' 'a+b=c;'; do
    if printf '%s' "$text" | LC_ALL=C grep -q '[[:alnum:]]\|[^ -~]'; then
        expect_json 0 kb query --mode lexical --json -- "$text"
        json_get "$out" "j['results']" >/dev/null || fail "bad JSON for '$text'"
    else   # punctuation alone: no words to search for (issue 14)
        expect_rc 2 kb query --mode lexical --json -- "$text"
        contains "$out" "has no words to search for"
    fi
done

# the JSON object has exactly docs/design.md's fields, and the budget's
# (truncated, omitted) and each result's source version (README, design
# notes)
q -k 3 "shared memory bank conflicts"
json_get "$out" "sorted(set(j.keys()) - {'skills'})" | grep -q "\['mode', 'omitted', 'query', 'results', 'took_ms', 'truncated'\]" || fail "top-level fields: $out"
# with no filter the skills come apart from the results, one a skill, the
# best chunk of each as a snippet; with a filter, skills rank as the rest
[ "$(json_get "$out" "all(r['source'] != 'skills' for r in j['results'])")" = True ] ||
    fail "a skill among the results: $out"
[ "$(json_get "$out" "len(j['skills']) <= 3 and len({r['path'].rsplit('/', 1)[0] for r in j['skills']}) == len(j['skills']) and [r['rank'] for r in j['skills']] == list(range(1, len(j['skills']) + 1))")" = True ] ||
    fail "the skills apart: $out"
[ "$(json_get "$out" "j['skills'][0]['path']")" = corpus/skills/smem-padding-bank-conflicts/SKILL.md ] ||
    fail "the padding skill is not first for bank conflicts: $out"
q -k 3 --source skills "shared memory bank conflicts"
[ "$(json_get "$out" "'skills' not in j and len(j['results']) == 3 and {r['source'] for r in j['results']} == {'skills'}")" = True ] ||
    fail "--source skills: skills are the results: $out"
fields=$(json_get "$out" "sorted(j['results'][0].keys())")
[ "$fields" = "['chunk_id', 'heading_path', 'kind', 'lexical_rank', 'path', 'rank', 'score', 'source', 'text', 'title', 'url', 'vector_rank', 'version']" ] ||
    fail "result fields: $fields"
# each result's version is its source's in the manifest (a skill's: "git")
[ "$(python3 -c "import json,sys; j=json.loads(sys.argv[1]); m={s['id']: s.get('version', '') for s in json.load(open(sys.argv[2]))['sources']}
print((j['truncated'], j['omitted'], all(r['version'] == m[r['source']] for r in j['results']), sorted(set(r['version'] for r in j['results'])) != []))" "$out" "$MANIFEST")" = \
  "(False, 0, True, True)" ] || fail "no budget by default, or the version: $out"
# --budget: whole results, best first, the rest counted
q -k 30 "shared memory bank conflicts"
all=$out
q -k 30 --budget 1000 "shared memory bank conflicts"
python3 - "$all" "$out" <<'PY' || fail "--budget 1000"
import json, sys
a, b = (json.loads(x) for x in sys.argv[1:])
assert b['truncated'] and b['omitted'] == len(a['results']) - len(b['results']) > 0, b
assert len(json.dumps(b, separators=(',', ':'), ensure_ascii=False).encode()) <= 3000
assert b['results'] == a['results'][:len(b['results'])]
PY
expect_rc 2 kb query --json --budget 999 x
contains "$out" "kb query: --budget wants a number of tokens from 1000 to 200000, not '999'"
expect_rc 2 kb query --budget 2000 x
contains "$out" "--budget needs --json"
# sub-queries: fused with the query's own list
q -k 3 "zzqxv" --lex "cp.async.bulk.tensor"
contains "$(json_get "$out" "j['results'][0]['text']")" "cp.async.bulk"
[ "$(json_get "$out" "j['mode']")" = lexical ] || fail "mode"
[ "$(json_get "$out" "[r['rank'] for r in j['results']]")" = "[1, 2, 3]" ] || fail "ranks"

# deep links carry the section anchor
q -k 3 --source ptx-isa "cp.async.bulk.tensor"
contains "$(json_get "$out" "j['results'][0]['url']")" "parallel-thread-execution/index.html#"

# filters apply before top-k
q -k 10 --source cuda-samples "transpose coalesced"
[ "$(json_get "$out" "set(r['source'] for r in j['results'])")" = "{'cuda-samples'}" ] || fail "--source filter"
contains "$(json_get "$out" "j['results'][0]['path']")" "transpose"
q -k 10 --kind code "transpose"
[ "$(json_get "$out" "set(r['kind'] for r in j['results'])")" = "{'code'}" ] || fail "--kind filter"
q -k 5 --kind paper "kernel generation reinforcement learning"
[ "$(json_get "$out" "set(r['kind'] for r in j['results'])")" = "{'paper'}" ] || fail "--kind paper"
[ "$(json_get "$out" "len(j['results'])")" -eq 5 ] || fail "papers are searchable"
q -k 5 --source cuda-best-practices --source hopper-tuning-guide "occupancy"
[ "$(json_get "$out" "all(r['source'] in ('cuda-best-practices','hopper-tuning-guide') for r in j['results'])")" = True ] || fail "two sources"

# one section is shown once
q -k 10 "memory coalescing"
[ "$(json_get "$out" "len(set((r['source'], r['path'], tuple(r['heading_path'])) for r in j['results']))")" -eq \
  "$(json_get "$out" "len(j['results'])")" ] || fail "duplicate sections in results"

# bad options: usage errors
expect_rc 2 kb query -k 0 x
expect_rc 2 kb query --kind poem x
contains "$out" "unknown kind 'poem'"
expect_rc 2 kb query --mode fuzzy x
# one -k range for the list and --json (the search tool's), said in the
# CLI's words: the command and its option (issue 26 item 12)
for j in "" --json; do
    expect_rc 2 kb query $j -k 51 x
    contains "$out" "kb query: -k wants a number from 1 to 50, not '51'"
    lacks "$out" "'k' must be"
done
expect_rc 1 kb --kb "$KB_TMP/none" query x
contains "$out" "kb query: no KB in"
expect_rc 2 kb query

# human output: rank, source, heading path, link; no colour when not a terminal
# (a skill's link is its file://, the guides' https://)
expect_rc 0 kb query --mode lexical -k 4 --explain "shared memory bank conflicts"
contains "$out" "1. ["
contains "$out" "https://"
contains "$out" "file://"
contains "$out" "lexical #"
# colour only on a terminal, and never with NO_COLOR (lib.sh sets it)
out=$(env -u NO_COLOR "$KB_BIN" query --mode lexical -k 2 "shared memory bank conflicts")
lacks "$out" $'\033['
out=$(env -u NO_COLOR script -qec "'$KB_BIN' query --mode lexical -k 2 'shared memory bank conflicts'" /dev/null)
contains "$out" $'\033['
out=$(script -qec "'$KB_BIN' query --mode lexical -k 2 'shared memory bank conflicts'" /dev/null)
lacks "$out" $'\033['
# query text past 64 KiB is refused, not cut
expect_rc 2 kb query --mode lexical "$(head -c 70000 /dev/zero | tr '\0' 'a')"
contains "$out" "the query text is longer than 65536 bytes"

# kb get prints the chunk; --section the whole section
top=$(kb query --mode lexical --json -k 1 'cp.async.bulk.tensor')
id=$(json_get "$top" "j['results'][0]['chunk_id']")
expect_rc 0 kb get "$id"
contains "$out" "cp.async.bulk.tensor"
expect_json 0 kb get --json --section "$id"
[ "$(json_get "$out" "len(j['chunks'])")" -ge 1 ] || fail "get --section"
# kb get --json has its own shape: the chunk, its section, its document
[ "$(json_get "$out" "sorted(j)")" = "['chunk_id', 'chunks', 'document', 'omitted', 'section', 'truncated']" ] ||
    fail "kb get --json shape: $out"
[ "$(json_get "$out" "j['document']['source']")" = "$(json_get "$top" "j['results'][0]['source']")" ] ||
    fail "get --json document: $out"
contains "$(json_get "$out" "j['section']['url']")" "#"
expect_rc 1 kb get 999999999
contains "$out" "no chunk 999999999"
expect_rc 2 kb get abc

# the variants of one generated libcu++ wrapper are near-identical: the
# first shown stands for the others, listed with it and reachable by id;
# no two results shown have the same text
q -k 5 "cp.reduce.async.bulk.tensor add"
[ "$(json_get "$out" "len(j['results'][0].get('similar', []))")" -ge 2 ] ||
    fail "no near-identical variants listed: $out"
contains "$(json_get "$out" "' '.join(s['heading_path'][-1] for s in j['results'][0]['similar'])")" \
    "cp.reduce.async.bulk.tensor.2d"
[ "$(json_get "$out" "len({r['text'] for r in j['results']}) == len(j['results'])")" = True ] ||
    fail "the same text shown twice: $out"
sim=$(json_get "$out" "j['results'][0]['similar'][0]['chunk_id']")
expect_rc 0 kb get "$sim"
contains "$out" "cp.reduce.async.bulk.tensor"
expect_rc 0 kb query --mode lexical -k 5 "cp.reduce.async.bulk.tensor add"
contains "$out" "also, near-identical: cp.reduce.async.bulk.tensor."
contains "$out" "(chunk $sim)"

# papers, filterable by section
expect_json 0 kb papers --json
n=$(json_get "$out" "len(j['papers'])")
[ "$n" -ge 130 ] || fail "papers: $n"
sec=$(json_get "$out" "j['papers'][0]['section'].split(' > ')[-1]")
expect_json 0 kb papers --json --section "$sec"
m=$(json_get "$out" "len(j['papers'])")
[ "$m" -ge 1 ] && [ "$m" -lt "$n" ] || fail "papers --section '$sec': $m of $n"
echo "ok"
