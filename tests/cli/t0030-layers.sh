#!/usr/bin/env bash
# tier: quick
# The house rules' own checks catch what they are for. scripts/check-layers.sh
# on a small tree of rooms, compiled: clean, it passes; an upward #include,
# an upward call (a kb/ object calling a skills/ function) and a circle (two
# files of one room calling each other) and SQL run by generator/ each fail
# it, named, as does the queue's SQLite backend naming a table of kb's. On a copy of
# the real sources, an upward #include planted in query/similar.c is named.
# scripts/check-sizes.sh: a 100-line function passes, a 101-line one and a
# file over 1,000 lines without its reason fail, named.
. "$(dirname "$0")/lib.sh"
command -v nm >/dev/null && command -v tsort >/dev/null || { echo "skipped: no nm or tsort"; exit 0; }
CC=${CC:-cc}

# tree DIR: scripts/ and a room or two of sources, each compiled to
# DIR/build/obj like the Makefile's
tree() {
    local d=$1 f
    mkdir -p "$d/scripts"
    for f in kb index verify skills ingest query generator api serve cli; do mkdir -p "$d/$f"; done
    cp "$KB_TOP/scripts/check-layers.sh" "$KB_TOP/scripts/check-sizes.sh" "$d/scripts/"
    printf 'int kb_util(void);\n' >"$d/kb/kb.h"
    printf '#include "kb/kb.h"\nint kb_util(void)\n{\n    return 1;\n}\n' >"$d/kb/util.c"
    printf '#include "kb/kb.h"\nint kb_skill_load(void);\nint kb_skill_load(void)\n{\n    return kb_util();\n}\n' >"$d/skills/skill.c"
    printf 'int api_call(void);\n' >"$d/api/api.h"
    printf '#include "api/api.h"\nint kb_skill_load(void);\nint api_call(void)\n{\n    return kb_skill_load();\n}\n' >"$d/api/tools.c"
    printf '#include "kb/kb.h"\nint kb_similar(void);\nint kb_similar(void)\n{\n    return kb_util();\n}\n' >"$d/query/similar.c"
    printf 'int ing_a(void);\nint ing_a(void)\n{\n    return 2;\n}\n' >"$d/ingest/a.c"
    printf 'int ing_a(void);\nint ing_b(void);\nint ing_b(void)\n{\n    return ing_a();\n}\n' >"$d/ingest/b.c"
}
# compile DIR: every .c of DIR to DIR/build/obj
compile() {
    local f
    for f in $(cd "$1" && ls */*.c); do
        mkdir -p "$1/build/obj/$(dirname "$f")"
        "$CC" -c -I"$1" -o "$1/build/obj/${f%.c}.o" "$1/$f" || fail "cc $f"
    done
}
layers() { out=$("$1/scripts/check-layers.sh" build 2>&1); rc=$?; }
sizes() { out=$(cd "$1" && scripts/check-sizes.sh 2>&1); rc=$?; }

T="$KB_TMP/clean"
tree "$T"
compile "$T"
layers "$T"
[ $rc -eq 0 ] || fail "check-layers.sh fails the clean tree: $out"
contains "$out" "layers: ok"
sizes "$T"
[ $rc -eq 0 ] || fail "check-sizes.sh fails the clean tree: $out"

# an upward include: query/ includes api/'s header
P="$KB_TMP/include"
cp -r "$T" "$P"
sed -i '1i #include "api/api.h"' "$P/query/similar.c"
layers "$P"
[ $rc -ne 0 ] || fail "check-layers.sh passed an upward include: $out"
contains "$out" "query/similar.c includes api/api.h (above it)"

# an upward call: a kb/ object calling a skills/ function
P="$KB_TMP/call"
cp -r "$T" "$P"
printf 'int kb_skill_load(void);\nint kb_up(void);\nint kb_up(void)\n{\n    return kb_skill_load();\n}\n' >"$P/kb/up.c"
"$CC" -c -I"$P" -o "$P/build/obj/kb/up.o" "$P/kb/up.c" || fail "cc kb/up.c"
layers "$P"
[ $rc -ne 0 ] || fail "check-layers.sh passed an upward call: $out"
contains "$out" "kb/up.c calls kb_skill_load of skills/skill.c (above it)"
lacks "$out" "includes"

# a circle: two files of one room calling each other
P="$KB_TMP/circle"
cp -r "$T" "$P"
printf 'int ing_b(void);\nint ing_a(void);\nint ing_a(void)\n{\n    return ing_b() + 2;\n}\n' >"$P/ingest/a.c"
"$CC" -c -I"$P" -o "$P/build/obj/ingest/a.o" "$P/ingest/a.c" || fail "cc ingest/a.c"
layers "$P"
[ $rc -ne 0 ] || fail "check-layers.sh passed a circle: $out"
contains "$out" "files in a circle of calls: ingest/a.c ingest/b.c"

# a folder of sources that is no room
P="$KB_TMP/room"
cp -r "$T" "$P"
mkdir -p "$P/extra" && cp "$P/kb/util.c" "$P/extra/x.c"
layers "$P"
[ $rc -ne 0 ] || fail "check-layers.sh passed an unknown room: $out"
contains "$out" "extra/ holds sources but is not a room of the direction"

# SQL outside the rooms that may run it (generator/ asks kb/store.c)
P="$KB_TMP/sql"
cp -r "$T" "$P"
printf 'int kb_store_prepare(void);\nint gen_sql(void);\nint gen_sql(void)\n{\n    return kb_store_prepare();\n}\n' >"$P/generator/sql.c"
layers "$P"
[ $rc -ne 0 ] || fail "check-layers.sh passed SQL in generator/: $out"
contains "$out" "generator/sql.c runs SQL"
# the queue's SQLite backend runs SQL on its own table alone
P="$KB_TMP/jobq"
cp -r "$T" "$P"
printf 'static const char *q = "UPDATE kb_jobs SET state=1";\nconst char *jq(void);\nconst char *jq(void)\n{\n    return q;\n}\n' >"$P/verify/jobq_sqlite.c"
layers "$P"
[ $rc -eq 0 ] || fail "check-layers.sh failed the queue's own SQL: $out"
sed -i 's/UPDATE kb_jobs/DELETE FROM chunks/' "$P/verify/jobq_sqlite.c"
layers "$P"
[ $rc -ne 0 ] || fail "check-layers.sh passed the queue's SQL on kb's tables: $out"
contains "$out" "verify/jobq_sqlite.c runs SQL on chunks"

# the real sources: the same planted include is named (includes only: no
# objects, so no calls are read)
R="$KB_TMP/real"
mkdir -p "$R/build/obj"
(cd "$KB_TOP" && cp -rL scripts kb index verify skills ingest query generator api serve cli "$R/") || fail "copy"
sed -i '1i #include "api/api.h"' "$R/query/similar.c"
layers "$R"
[ $rc -ne 0 ] || fail "check-layers.sh passed an upward include in the real sources: $out"
contains "$out" "query/similar.c includes api/api.h (above it)"

# sizes: a function of 100 lines passes, one of 101 does not
body() {   # NAME LINES: a function whose body is LINES lines
    printf 'int %s(void);\nint %s(void)\n{\n' "$1" "$1"
    printf '    int x = 0;\n'
    for _ in $(seq $(($2 - 2))); do printf '    x++;\n'; done
    printf '    return x;\n}\n'
}
P="$KB_TMP/sizes"
cp -r "$T" "$P"
body kb_hundred 100 >"$P/kb/hundred.c"
sizes "$P"
[ $rc -eq 0 ] || fail "check-sizes.sh fails a 100-line function: $out"
body kb_long 101 >"$P/kb/long.c"
sizes "$P"
[ $rc -ne 0 ] || fail "check-sizes.sh passed a 101-line function: $out"
contains "$out" "sizes: kb/long.c: kb_long has 101 lines"
lacks "$out" "kb_hundred"
rm "$P/kb/long.c"
{ printf '/* big.c - planted */\n'; for i in $(seq 1000); do printf 'int v%d;\n' "$i"; done; } >"$P/kb/big.c"
sizes "$P"
[ $rc -ne 0 ] || fail "check-sizes.sh passed a file over 1,000 lines: $out"
contains "$out" "sizes: kb/big.c has 1001 lines and no ' * Long: ' reason in its opening comment"
{ printf '/* big.c - planted\n * Long: a test of the reason line\n */\n'; for i in $(seq 1000); do printf 'int v%d;\n' "$i"; done; } >"$P/kb/big.c"
sizes "$P"
[ $rc -eq 0 ] || fail "check-sizes.sh fails a long file with its reason: $out"
echo ok
