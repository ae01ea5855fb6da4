#!/usr/bin/env bash
# tier: ci
# A query that is code (issue 22): kb query --file kernel.cu, the same
# from standard input and pasted as the argument search the code's
# identifiers, not its licence comment; text with a licence comment
# searches the rest.
. "$(dirname "$0")/lib.sh"
need_mirror
use_kb cbp-survey-skills

src="$KB_TOP/tests/fixtures/code/streams_licence.cu"
head -n 3 "$src" | grep -q Copyright || fail "the fixture lost its licence"
top() { python3 -c "
import json, sys
for r in json.load(sys.stdin)['results'][:int(sys.argv[1])]: print(' > '.join(r['heading_path']))" "$1"; }

for mode in hybrid lexical; do
    for how in file stdin arg; do
        case $how in
        file) expect_json 0 kb query --json --mode "$mode" -k 5 --file "$src" ;;
        stdin) expect_json 0 kb query --json --mode "$mode" -k 5 - <"$src" ;;
        arg) expect_json 0 kb query --json --mode "$mode" -k 5 "$(cat "$src")" ;;
        esac
        five=$(echo "$out" | top 5)
        # the streams and copies the code makes, first; no legal text
        echo "$five" | head -n 3 | grep -q "Asynchronous and Overlapping Transfers with Computation" ||
            fail "$mode, $how: the code's subject is not in the top 3: $five"
        lacks "$five" "Notices"
        lacks "$five" "Redistribution"
    done
done

# prose with a licence comment: the rest is the question
q="/* Copyright (c) 2024 Someone. Licensed under the Apache License. */ pinned memory bandwidth"
expect_json 0 kb query --json -k 5 "$q"
five=$(echo "$out" | top 5)
lacks "$five" "Notices"
contains "$five" "Pinned Memory"
echo ok
