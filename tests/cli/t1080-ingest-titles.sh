#!/usr/bin/env bash
# tier: quick
# Titles, labels and headings (issue 14, 11): a one-page source is titled as
# the manifest names it, not by its first section; a small CUDA function is
# code; a heading of hundreds of characters does not flood the terminal.
. "$(dirname "$0")/lib.sh"
mkdir -p "$KB_TMP/m"
cat >"$KB_TMP/m/guide.md" <<'MD'
# 1. Introduction

The guide starts with an introduction to warp scheduling.

# 2. Occupancy

Occupancy is the ratio of active warps to the maximum.
MD
cat >"$KB_TMP/one.json" <<'JSON'
{"sources":[{"id":"guide","title":"The Tuning Guide","url":"https://example.org/guide","mirror":["guide.md"],"format":"markdown"}]}
JSON
expect_rc 0 kb -q ingest --no-embed --manifest "$KB_TMP/one.json" --mirror "$KB_TMP/m"
expect_json 0 kb query --mode lexical --json "occupancy active warps"
[ "$(json_get "$out" "j['results'][0]['title']")" = "The Tuning Guide" ] || fail "title: $out"
[ "$(json_get "$out" "j['results'][0]['heading_path'][0]")" = "2. Occupancy" ] || fail "heading: $out"

# a small function of a CUDA source is code, found by --kind code
cat >"$KB_TMP/small.cu" <<'CU'
// Squares a value.
__device__ float squareit(float x) { return x * x; }

__global__ void squareall(float *v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        v[i] = squareit(v[i]);
}
CU
expect_rc 0 kb -q ingest --no-embed "$KB_TMP/small.cu"
expect_json 0 kb query --mode lexical --kind code --json squareit
[ "$(json_get "$out" "any(r['heading_path'][-1] == 'squareit' for r in j['results'])")" = True ] ||
    fail "the small function is not code: $out $(sql "SELECT kind, heading_path FROM chunks")"
[ "$(sql "SELECT count(*) FROM chunks WHERE kind = 'text' AND text LIKE '%return x * x%'")" = 0 ] ||
    fail "a function labelled text"

# a heading of 400 characters: cut on the result's line, whole in --json
long=$(printf 'Tile%.0s ' $(seq 80))
printf '# %s\n\nCluster launch control schedules blocks.\n' "$long" >"$KB_TMP/long.md"
expect_rc 0 kb -q ingest --no-embed "$KB_TMP/long.md"
expect_json 0 kb query --mode lexical "cluster launch control"
head=$(printf '%s\n' "$out" | grep '^1\. ')
[ "${#head}" -le 200 ] || fail "a result line of ${#head} characters: $head"
contains "$head" "…"
expect_json 0 kb query --mode lexical --json "cluster launch control"
[ "$(json_get "$out" "len(j['results'][0]['heading_path'][0])")" -ge 390 ] || fail "--json cut the heading"
echo ok
