#!/usr/bin/env bash
# tier: quick
# The command line itself: --help generated from the command table, usage
# errors, an installed kb finds its manifest.
. "$(dirname "$0")/lib.sh"
expect_rc 0 kb --help
contains "$out" "usage: kb"
cmds=$(printf '%s\n' "$out" | sed -n 's/^  \([a-z]\+\)  .*/\1/p')
[ "$(echo "$cmds" | wc -l)" -ge 7 ] || fail "too few commands in --help: $cmds"
for c in $cmds; do
    expect_rc 0 kb "$c" --help
    contains "$out" "usage: kb $c"
done
expect_rc 2 kb
expect_rc 2 kb frobnicate
contains "$out" "'frobnicate' is not a kb command"
expect_rc 2 kb query --bogus x
contains "$out" "unknown option"
expect_rc 2 kb --kb
expect_rc 0 kb --version

# the environment: kb config and the man page list every variable of
# docs/configuration.md's table (one table in kb/config.c), each with what
# it does; --help stays short and points at kb config; a bad number is
# named, a key is never printed
expect_rc 0 env KB_EMBED_API_KEY=sk-never-shown "$KB_BIN" --help
lacks "$out" "sk-never-shown"
[ "$(printf '%s\n' "$out" | wc -l)" -le 45 ] || fail "kb --help is long: $(printf '%s\n' "$out" | wc -l) lines"
contains "$out" "'kb config' shows each"
lacks "$out" "KB_EMBED_TIMEOUT_MS"
expect_rc 0 env KB_EMBED_API_KEY=sk-never-shown "$KB_BIN" config
lacks "$out" "sk-never-shown"
config=$out
man=$("$KB_BIN" manpage)
vars=$(sed -n '/^## The environment/,/^## /s/^| `\([A-Z_]*\)`.*/\1/p' "$KB_TOP/docs/configuration.md")
[ "$(echo "$vars" | wc -l)" -ge 14 ] || fail "too few variables in docs/configuration.md: $vars"
for v in $vars; do
    printf '%s\n' "$config" | grep -q "^$v " || fail "kb config does not list $v: $config"
    contains "$man" "$v"
done
contains "$config" "KB_EMBED_TIMEOUT_MS  60000  (default)
                       time limit of one embedding request, in ms"
expect_rc 2 env KB_THREADS=lots "$KB_BIN" status
contains "$out" "bad KB_THREADS 'lots': expected a whole number from 1 to 64"
expect_rc 2 env KB_EMBED_TIMEOUT_MS=0 "$KB_BIN" query x
contains "$out" "bad KB_EMBED_TIMEOUT_MS '0'"

# the Makefile honours CPPFLAGS (dpkg-buildflags' -D_FORTIFY_SOURCE=2 for
# the package build comes that way)
b=$(basename "$KB_BUILD")
make -s -C "$KB_TOP" -n -B V=1 BUILD="$b" CPPFLAGS="-D_FORTIFY_SOURCE=2 -DKB_T0000_CPPFLAGS" \
    "$b/obj/kb/util.o" | grep -q -- "-D_FORTIFY_SOURCE=2 -DKB_T0000_CPPFLAGS" ||
    fail "make does not pass CPPFLAGS to the compiler"

# make install: the binary and the manifest it reads when run elsewhere
dest="$KB_TMP/dest"
make -s -C "$KB_TOP" install PREFIX=/usr/local DESTDIR="$dest" BUILD="$(basename "$KB_BUILD")" >/dev/null ||
    fail "make install"
[ -x "$dest/usr/local/bin/kb" ] || fail "kb not installed"
out=$(cd "$KB_TMP" && "$dest/usr/local/bin/kb" sources --json) || fail "installed kb sources"
contains "$out" '"id":"ptx-isa"'
# ... the completion and the man page, made from the command table
for f in share/bash-completion/completions/kb share/zsh/site-functions/_kb \
         share/fish/vendor_completions.d/kb.fish share/man/man1/kb.1; do
    [ -s "$dest/usr/local/$f" ] || fail "make install did not install $f"
done
contains "$(man -l "$dest/usr/local/share/man/man1/kb.1" 2>/dev/null)" "kb query"
# ... and kb ingest and kb verify find the manifest and the tasks from anywhere
if [ -n "${KB_MIRROR:-}" ] && [ -f "$KB_MIRROR/MANIFEST.json" ]; then
    out=$(cd "$KB_TMP" && "$dest/usr/local/bin/kb" ingest --no-embed --json cuda-best-practices) ||
        fail "installed kb ingest: $out"
    [ "$(json_get "$out" "j['documents_changed']")" = 1 ] || fail "installed kb ingest: $out"
fi
if [ -x "$dest/usr/local/bin/kb-verify" ]; then
    out=$(cd "$KB_TMP" && "$dest/usr/local/bin/kb" verify --compile-only --json gelu \
          "$KB_TOP/corpus/tasks/gelu/candidates/vec4.cu") || fail "installed kb verify: $out"
    contains "$out" '"verdict":"compiled"'
fi
echo ok
