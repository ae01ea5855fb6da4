#!/usr/bin/env bash
# tier: ci
# Ranking defects of issue 22 over a real KB with vectors (the Best
# Practices Guide, the literature list, the skills): --json takes
# --no-rerank; the top 10 does not depend on -k.
. "$(dirname "$0")/lib.sh"
need_mirror
use_kb cbp-survey-skills

ids_json() { python3 -c "import json,sys; print(' '.join(str(r['chunk_id']) for r in json.load(sys.stdin)['results']))"; }
ids_human() { grep -E "^[0-9]+\. " | grep -o "chunk [0-9]*)" | tr -dc "0-9\n" | paste -sd " "; }

# --json --no-rerank: fusion's order, as the human list shows it; the
# reranking stage changes the order of some of these queries
changed=0
for q in "occupancy calculator" "register pressure" "shared memory bank conflicts"; do
    human=$(kb query -k 10 --no-rerank "$q" | ids_human)
    json=$(kb query -k 10 --json --no-rerank "$q" | ids_json)
    [ -n "$json" ] && [ "$json" = "$human" ] ||
        fail "--json --no-rerank is not fusion's order for '$q': json [$json] human [$human]"
    reranked=$(kb query -k 10 --json "$q" | ids_json)
    [ "$reranked" = "$json" ] || changed=$((changed + 1))
done
[ "$changed" -gt 0 ] || fail "the reranking stage changed no order: the test proves nothing"

# the top 10 does not depend on -k: k only cuts the list (two documents
# KB: the per-document cap and its backfill act on most queries)
for mode in hybrid lexical; do
    for q in "why is my kernel slow when each thread reads a column" \
             "occupancy calculator" "pinned memory bandwidth" "register pressure"; do
        top=
        for k in 10 20 50; do
            ids=$(kb query -k "$k" --mode "$mode" --json "$q" | ids_json | cut -d' ' -f1-10)
            [ -n "$ids" ] || fail "no results for '$q'"
            [ -z "$top" ] || [ "$ids" = "$top" ] ||
                fail "$mode top 10 of '$q' at -k $k [$ids] is not -k 10's [$top]"
            top=$ids
        done
    done
done

# at most three of the top 5 from one unit: a document, or a chapter of a
# source that is one document (the guide, the literature list) ...
top5_units() { python3 -c "
import json, sys, collections
r = json.load(sys.stdin)['results'][:5]
c = collections.Counter((x['source'], x['heading_path'][0] if x['heading_path'] else '') for x in r)
print(max(c.values()) if c else 0)"; }
for q in "shared memory bank conflicts" "coalesced access to global memory" \
         "LLM agents that write CUDA kernels" "register pressure"; do
    for mode in hybrid lexical; do
        n=$(kb query -k 10 --mode "$mode" --json "$q" | top5_units)
        [ "$n" -le 3 ] || fail "$mode: $n of the top 5 of '$q' from one chapter"
    done
done
# ... unless the question names the document or chapter
for q in "shared memory bank conflicts memory optimizations" "LLM agents Agent4Kernel"; do
    n=$(kb query -k 10 --json "$q" | top5_units)
    [ "$n" -ge 4 ] || fail "'$q' names its chapter, yet only $n of the top 5 are from it"
done

# the skills block is bounded by -k
for k in 1 2; do
    n=$(kb query -k "$k" --json "shared memory bank conflicts" | python3 -c "import json,sys; print(len(json.load(sys.stdin)['skills']))")
    [ "$n" -eq "$k" ] || fail "-k $k gave $n skills"
done
