#!/usr/bin/env bash
# make demo: ingest the document mirror (or the sources' URLs when there is
# no mirror) into a KB and answer a question from the shell.
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
rc=0
"$kb" ingest --manifest "$top/corpus/sources.json" || rc=$?
docs=$("$kb" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["documents"])')
if [ "$docs" -eq 0 ]; then
    echo "demo: nothing was ingested; set KB_MIRROR to the document mirror (a clone next to shared/ finds ../shared/corpus) or give this machine network access" >&2
    exit 1
fi
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || { echo "demo: kb ingest failed (exit $rc)" >&2; exit "$rc"; }   # 3: some sources failed
echo
"$kb" status
echo
echo '$ kb query -k 5 "why is my transpose slow"'
"$kb" query -k 5 "why is my transpose slow"
echo
echo "demo: the demo KB is $KB_DIR; ask it more with"
echo "  $kb --kb $KB_DIR query \"how do I use the tensor memory accelerator\""
echo "or export KB_DIR=$KB_DIR (kb's own default KB is \$XDG_DATA_HOME/kb, ~/.local/share/kb)"
