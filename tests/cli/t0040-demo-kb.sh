#!/usr/bin/env bash
# tier: quick
# After `make demo` (issue 26 item 1): the demo KB lives beside the
# executable (build/demo-kb); a command that finds no KB where it looks
# names the demo KB and how to use it, instead of only "run 'kb ingest'"
# (minutes of embedding again); with no demo KB the message is as before.
. "$(dirname "$0")/lib.sh"
cd "$KB_TMP"
mkdir -p bin docs
cp "$KB_BIN" bin/kb
printf '# Transpose\n\nCoalesced access makes a transpose fast.\n' >docs/transpose.md
bin=$(cd bin && pwd -P)

# no demo KB yet: the plain message
expect_rc 1 env -u KB_DIR XDG_DATA_HOME="$KB_TMP/data" bin/kb query transpose
contains "$out" "no KB in '$KB_TMP/data/kb'; run 'kb ingest' first"
lacks "$out" "demo KB"

# the demo KB beside the executable: named, with the way to use it
expect_rc 0 bin/kb --kb bin/demo-kb -q ingest --no-embed docs
expect_rc 1 env -u KB_DIR XDG_DATA_HOME="$KB_TMP/data" bin/kb query transpose
contains "$out" "no KB in '$KB_TMP/data/kb'"
contains "$out" "the demo KB is '$bin/demo-kb': kb --kb $bin/demo-kb ..., or export KB_DIR=$bin/demo-kb"
# the same for a KB named by --kb or KB_DIR that does not exist
expect_rc 1 bin/kb --kb "$KB_TMP/nowhere" status
contains "$out" "the demo KB is '$bin/demo-kb'"
# and following the advice answers
expect_rc 0 env KB_DIR="$bin/demo-kb" bin/kb query -q transpose
contains "$out" "Transpose"
echo ok
