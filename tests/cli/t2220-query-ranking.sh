#!/usr/bin/env bash
# tier: ci
# Ranking defects of issue 22 over a real KB with vectors (the Best
# Practices Guide): --json takes --no-rerank; the top 10 does not depend
# on -k.
. "$(dirname "$0")/lib.sh"
need_mirror
use_kb cbp

ids_json() { python3 -c "import json,sys; print(' '.join(str(r['chunk_id']) for r in json.load(sys.stdin)['results']))"; }
ids_human() { grep -o "chunk [0-9]*)" | tr -dc "0-9\n" | paste -sd " "; }

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
