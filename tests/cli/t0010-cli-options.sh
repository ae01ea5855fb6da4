#!/usr/bin/env bash
# tier: quick
# The command table: options parsed from it (whole names only, "needs a
# value", "--", --help and --version everywhere, "did you mean"), the shell
# completion and the man page made from it, colour, a failed write.
. "$(dirname "$0")/lib.sh"
docs="$KB_TMP/docs"
mkdir -p "$docs"
printf '# Warp shuffles\n\nUse __shfl_down_sync to reduce within a warp.\n\n## Flags\n\nCompile with -arch=sm_90 for Hopper.\n' >"$docs/notes.md"
printf '# Shared memory\n\nBank conflicts slow shared memory; pad the tile.\n' >"$docs/smem.md"
expect_rc 0 kb -q ingest --no-embed "$docs"

# -k and --k are one option (eval's spelling); --k is not --kind
expect_json 0 kb query --k 1 --mode lexical --json memory warp
[ "$(json_get "$out" 'len(j["results"])')" = 1 ] || fail "--k 1 gave: $out"
expect_json 0 kb query -k1 --mode=lexical --json memory warp
[ "$(json_get "$out" 'len(j["results"])')" = 1 ] || fail "-k1 gave: $out"
expect_rc 2 kb query --kin code warp
contains "$out" "unknown option '--kin' (did you mean '--kind'?)"
expect_rc 2 kb query --mod lexical warp
contains "$out" "unknown option '--mod'"
expect_rc 2 kb query warp -k
contains "$out" "option '-k' needs a value"
expect_rc 2 kb query warp --mode
contains "$out" "option '--mode' needs a value"
expect_rc 2 kb query --json=yes warp
contains "$out" "unknown option"

# a query that starts with '-': an error that says how, and '--' that works
expect_rc 2 kb query --mode lexical -arch=sm_90
contains "$out" "unknown option '-a' in '-arch=sm_90'"
contains "$out" "kb query -- '-arch=sm_90'"
lacks "$out" "unknown option 'query'"
expect_rc 0 kb query --mode lexical -- -arch=sm_90
contains "$out" "notes.md"
expect_rc 0 kb query --mode lexical warp -- --help
contains "$out" "result in"

# --help and --version are every command's and every subcommand's
for c in ingest query get status sources papers eval mcp verify serve completion manpage; do
    expect_rc 0 kb "$c" --version
    contains "$out" "kb "
    expect_rc 0 kb "$c" -h
    contains "$out" "usage: kb $c"
done
for s in lint new verify approve retire list show export search; do
    expect_rc 0 kb skill "$s" --help
    contains "$out" "usage: kb skill $s"
    expect_rc 0 kb skill "$s" --version
    expect_rc 2 kb skill "$s" --frobnicate
    contains "$out" "kb skill $s: unknown option '--frobnicate'"
done
expect_rc 0 kb skill --help
contains "$out" "subcommands:"
expect_rc 0 kb help query
contains "$out" "usage: kb query"
expect_rc 0 kb help skill lint
contains "$out" "usage: kb skill lint"

# did you mean
expect_rc 2 kb qeury warp
contains "$out" "did you mean 'query'?"
expect_rc 2 kb skill lnit
contains "$out" "did you mean 'lint'?"

# completion: bash, from the table; every option --help lists is offered
expect_rc 0 kb completion bash
bash -n <(printf '%s\n' "$out") || fail "the bash completion does not parse"
printf '%s\n' "$out" >"$KB_TMP/kb.bash"
complete_words() {   # the words bash would offer after "$@"
    bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _kb
             printf "%s\n" "${COMPREPLY[@]}"' _ "$KB_TMP/kb.bash" "$@"
}
contains "$(complete_words kb qu)" "query"
contains "$(complete_words kb skill li)" "lint"
contains "$(complete_words kb skill lint --no)" "--no-compile"
contains "$(complete_words kb --color a)" "always"
for c in ingest query get status sources papers eval mcp verify serve; do
    words=$(complete_words kb "$c" -)
    for o in $("$KB_BIN" "$c" --help | sed -n 's/^  \(-., \)\?\(--[a-z-]*\).*/\2/p'); do
        contains "$words" "$o"
    done
done
expect_rc 0 kb completion zsh
contains "$out" "#compdef kb"
contains "$out" "_kb_skill_lint()"
if command -v zsh >/dev/null; then
    zsh -n <(printf '%s\n' "$out") || fail "the zsh completion does not parse"
fi
# fish: from the same table; run by fish itself where it is installed
expect_json 0 kb completion fish
mkdir -p "$KB_TMP/fish"
printf '%s\n' "$out" >"$KB_TMP/fish/kb.fish"
contains "$out" "complete -c kb -n '__kb_is skill lint' -l no-compile"
if command -v fish >/dev/null; then
    fish -n "$KB_TMP/fish/kb.fish" || fail "the fish completion does not parse"
    # what fish offers for the command line "$1", kb.fish found first in
    # its path as an installed one is (fish ships a kb.fish of its own, for
    # another program called kb, behind the vendor files)
    fish_words() {
        PATH="$(dirname "$KB_BIN"):$PATH" fish -c 'set -p fish_complete_path $argv[1]
                                                   complete -C $argv[2]' "$KB_TMP/fish" "$1" | cut -f1
    }
    contains "$(fish_words 'kb qu')" "query"
    contains "$(fish_words 'kb skill li')" "lint"
    contains "$(fish_words 'kb skill lint --no')" "--no-compile"
    lacks "$(fish_words 'kb query --no')" "--no-compile"
    contains "$(fish_words 'kb --kb /tmp skill li')" "lint"
    contains "$(fish_words 'kb --color a')" "always"
    lacks "$(fish_words 'kb ')" "template"   # not the other kb's words
    contains "$(fish_words 'kb ingest ptx')" "ptx-isa"   # kb sources' ids
    for c in ingest query get status sources papers eval mcp verify serve; do
        words=$(fish_words "kb $c -")
        for o in $("$KB_BIN" "$c" --help | sed -n 's/^  \(-., \)\?\(--[a-z-]*\).*/\2/p'); do
            contains "$words" "$o"
        done
    done
else
    echo "skip: running the fish completion (no fish)"
fi
expect_rc 2 kb completion tcsh
contains "$out" "no completion for 'tcsh' (bash, zsh or fish)"

# the man page: every command, and groff has nothing to say about it
expect_json 0 kb manpage
printf '%s\n' "$out" >"$KB_TMP/kb.1"
warn=$(groff -man -Tutf8 -ww -z "$KB_TMP/kb.1" 2>&1)
[ -z "$warn" ] || fail "groff warns: $warn"
page=$(MANWIDTH=100 man -l "$KB_TMP/kb.1" 2>/dev/null)
for c in ingest query get status sources papers eval mcp verify serve "skill lint"; do
    contains "$page" "kb $c"
done
contains "$page" "--mode MODE"

# colour: auto is off for TERM=dumb and with NO_COLOR, --color decides
esc=$(printf '\033[')
expect_json 0 kb --color=always query --mode lexical warp
contains "$out" "$esc"
expect_json 0 kb query --color always --mode lexical warp
contains "$out" "$esc"
expect_json 0 kb --color=never query --mode lexical warp
lacks "$out" "$esc"
expect_rc 2 kb --color=sometimes status
contains "$out" "--color wants auto, always or never"
out=$(env -u NO_COLOR TERM=xterm script -qec "$KB_BIN query --mode lexical warp" /dev/null)
contains "$out" "${esc}1m"
out=$(env -u NO_COLOR TERM=dumb script -qec "$KB_BIN query --mode lexical warp" /dev/null)
lacks "$out" "${esc}1m"
out=$(env NO_COLOR=1 TERM=xterm script -qec "$KB_BIN query --mode lexical warp" /dev/null)
lacks "$out" "${esc}1m"

# a write that fails is a failure
"$KB_BIN" --help >/dev/full 2>"$KB_TMP/err" && fail "kb --help > /dev/full exited 0"
contains "$(cat "$KB_TMP/err")" "cannot write to standard output"
"$KB_BIN" query --mode lexical warp >/dev/full 2>"$KB_TMP/err" && fail "kb query > /dev/full exited 0"
contains "$(cat "$KB_TMP/err")" "No space left on device"
echo ok
