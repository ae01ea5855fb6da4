#!/usr/bin/env bash
# make demo: ingest the document mirror (or the sources' URLs when there is
# no mirror) into a KB and answer a question from the shell: lexically as
# soon as the documents are parsed, then again in hybrid once they are
# embedded (on the GPU where there is one).
#   scripts/demo.sh BUILD
# The KB is $KB_DIR, else build/demo-kb; a second run is incremental.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
kb="$top/$build/kb"
export KB_DIR=${KB_DIR:-$top/$build/demo-kb}
if [ -n "${KB_MIRROR:-}" ] && [ -d "$KB_MIRROR" ]; then
    echo "demo: ingesting the mirror $KB_MIRROR into $KB_DIR" >&2
else
    unset KB_MIRROR
    echo "demo: no mirror found (KB_MIRROR); fetching the sources' URLs into $KB_DIR" >&2
fi
t0=$(date +%s.%N)
since() { python3 -c "import sys; print('%.0f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$t0" "$(date +%s.%N)"; }
q="why is my transpose slow"
# first the documents alone (seconds): a lexical answer at once; then
# their vectors (minutes on a CPU, seconds on a GPU: KB_EMBED_DEVICE)
rc=0
"$kb" ingest --no-embed --manifest "$top/corpus/sources.json" || rc=$?
docs=$("$kb" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["documents"])')
if [ "$docs" -eq 0 ]; then
    echo "demo: nothing was ingested; set KB_MIRROR to the document mirror (a clone next to shared/ finds ../shared/corpus) or give this machine network access" >&2
    exit 1
fi
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || { echo "demo: kb ingest failed (exit $rc)" >&2; exit "$rc"; }   # 3: some sources failed
echo
echo "\$ kb query --mode lexical -k 5 \"$q\""
"$kb" query --mode lexical -k 5 "$q"
echo
echo "demo: a first answer $(since) s after the start, by words alone (lexical): the documents are parsed, their vectors not made yet; embedding them now" >&2
rc=0
"$kb" ingest --manifest "$top/corpus/sources.json" || rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || { echo "demo: kb ingest failed (exit $rc)" >&2; exit "$rc"; }
echo
"$kb" status
echo
echo "\$ kb query -k 5 \"$q\""
"$kb" query -k 5 "$q"
echo "demo: the second answer $(since) s after the start, by words and meaning (hybrid)" >&2
echo
echo "demo: the demo KB is $KB_DIR; ask it more with"
echo "  $kb --kb $KB_DIR query \"how do I use the tensor memory accelerator\""
echo "or export KB_DIR=$KB_DIR (kb's own default KB is \$XDG_DATA_HOME/kb, ~/.local/share/kb)"
