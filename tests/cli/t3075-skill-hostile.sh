#!/usr/bin/env bash
# tier: quick
# A contributed skill folder is untrusted input (issue 28 items 1-3, 6):
# a link out of the repository (a key file), a folder link out of it, a
# link loop are refused with a lint error by every reader - lint, export
# (the skill skipped, exit 3, the others exported), the servers'
# skill:// resources and GET /v1/skills/NAME/files/F, ingest (in a linked
# folder too) - while a link into the repository (the seed skills'
# kernel.cu case) is followed.
# A front matter of 200 KB of '[' (libyaml's scanner is super-linear in
# flow nesting: 37 s before) and one of 16 KB are refused at once; a
# SKILL.md over 1 MiB and a folder over 512 files are skipped with a
# finding by lint, list, export and kb mcp, which still start. An empty
# evidence.json says so (not "near byte 94192946017697"); control bytes
# in SKILL.md are a lint error, and kb skill list and show print them
# escaped.
. "$(dirname "$0")/lib.sh"
cd "$KB_TMP"
TASKS="$KB_TOP/corpus/tasks"
L=repo/corpus/skills
mkdir -p repo/corpus/tasks/t1 "$L" outdir
for s in online-softmax smem-padding-bank-conflicts vectorized-global-access; do
    cp -rL "$KB_TOP/corpus/skills/$s" "$L/"
done
echo "TOPSECRET-KEY-zq9" >secret
echo "# Outside\n\nzq8 outside text" >outdir/o.md
echo '// in the repository: followed' >repo/corpus/tasks/t1/k.cu
ln -s "$KB_TMP/secret" "$L/online-softmax/notes.txt"
ln -s ../../tasks/t1/k.cu "$L/online-softmax/ref.cu"
ln -s "$KB_TMP/outdir" "$L/smem-padding-bank-conflicts/outside"
ln -s . "$L/smem-padding-bank-conflicts/loop"

expect_rc 1 kb skill lint --dir "$L" --tasks "$TASKS" --no-compile
contains "$out" "notes.txt: error: 'notes.txt' is a link that leaves the repository"
contains "$out" "outside: error: 'outside' is a link that leaves the repository"
contains "$out" "loop: error: a folder that holds itself (a link loop)"
lacks "$out" "ref.cu"
expect_rc 3 kb skill export --dir "$L" exp
contains "$out" "2 skills not exported"
[ "$(ls exp)" = vectorized-global-access ] || fail "exported: $(ls exp)"
grep -rq TOPSECRET exp && fail "the key was exported"

# the servers: the key is no resource, the link into the repository is
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
read_uri() { echo "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"resources/read\",\"params\":{\"uri\":\"$2\"}}"; }
mkdir -p "$KB_DIR" && chmod 700 "$KB_DIR"
expect_rc 0 kb ingest --no-embed -q "$KB_TMP/outdir"      # a KB for kb mcp to open
{ echo "$init"; read_uri 2 skill://online-softmax/notes.txt; read_uri 3 skill://online-softmax/ref.cu
  echo '{"jsonrpc":"2.0","id":4,"method":"resources/list"}'; } |
    timeout 20 "$KB_BIN" mcp --skills "$L" >mcp.out 2>mcp.err || fail "kb mcp: $(cat mcp.err)"
grep '"id":2' mcp.out | grep -q '"error"' || fail "the key was served: $(grep '"id":2' mcp.out)"
grep '"id":3' mcp.out | grep -q 'in the repository: followed' || fail "a link into the repository was not served"
grep -q TOPSECRET mcp.out && fail "the key was served"
grep '"id":4' mcp.out | grep -q 'notes.txt' && fail "the key is listed"
grep '"id":4' mcp.out | grep -q 'outside' && fail "an outside folder is listed"

# ingest: the key and the outside tree are not read; a linked folder in
# a skill folder (into the repository: followed) keeps the skill's rule
# for the links in it, though ingest reads it after the skill's own files
printf '# Leak\n\nTOPSECRET2-KEY-zq7\n' >secret2.md
ln -s "$KB_TMP/secret2.md" repo/corpus/tasks/t1/leak.md
ln -s ../../tasks/t1 "$L/vectorized-global-access/task"
expect_rc 0 kb ingest --no-embed "$L"
contains "$out" "skipping '$KB_TMP/$L/online-softmax/notes.txt': a link that leaves the repository"
contains "$out" "skipping '$KB_TMP/$L/vectorized-global-access/task/leak.md': a link that leaves the repository"
[ "$(sql "SELECT count(*) FROM chunks WHERE text LIKE '%TOPSECRET%'")" = 0 ] || fail "the key was ingested"
[ "$(sql "SELECT count(*) FROM documents WHERE key LIKE '%/outside/%'")" = 0 ] || fail "the outside tree was ingested"
[ "$(sql "SELECT count(*) FROM documents WHERE key LIKE '%vectorized-global-access/task/k.cu'")" = 1 ] ||
    fail "the linked folder's own file was not ingested: $(sql "SELECT key FROM documents")"

# sizes and nesting: refused before libyaml, each skill alone
L2=repo2/corpus/skills
mkdir -p "$L2"
cp -rL "$KB_TOP/corpus/skills/online-softmax" "$L2/"
python3 - "$L2" "$L/vectorized-global-access/SKILL.md" <<'PY'
import os, sys
L, good = sys.argv[1], open(sys.argv[2]).read()
def skill(name, text, **files):
    os.makedirs(f"{L}/{name}")
    open(f"{L}/{name}/SKILL.md", "w").write(text)
    for f, t in files.items():
        open(f"{L}/{name}/{f}", "w").write(t)
named = lambda n: good.replace("name: vectorized-global-access", "name: " + n)
skill("deep", "---\nname: deep\ndescription: " + "[" * 200000 + "\n---\n# x\n")
skill("deep16", "---\nname: deep16\ndescription: " + "[" * 16000 + "\n---\n# x\n")
skill("big", named("big") + "x" * (1 << 20))
skill("many", named("many"), **{f"f{i}.txt": "x" for i in range(520)})
skill("emptyev", named("emptyev"), **{"evidence.json": ""})
skill("ctl", named("ctl").replace("## Pitfalls", "## Pitfalls\n\nRed \x1b[31mtext\x1b[0m.")
      .replace("kb-arch: sm_70+", 'kb-arch: "sm_70\\e[31m"'))   # YAML's escape: a real ESC
PY
start=$(date +%s%N)
expect_rc 1 kb skill lint --dir "$L2" --tasks "$TASKS" --no-compile
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$ms" -lt 3000 ] || fail "lint took $ms ms"
contains "$out" "deep/SKILL.md:2: error: the front matter is 200025 bytes, over the limit of 16384"
contains "$out" "deep16/SKILL.md:3: error: flow style"
contains "$out" "big/SKILL.md: error: SKILL.md is 1051664 bytes, over the limit of 1048576: skipped"
contains "$out" "many: error: the skill is over the Skills extension's limits (512 files"
contains "$out" "emptyev/evidence.json: error: empty: not JSON"
lacks "$out" "near byte"
contains "$out" "ctl/SKILL.md:46: error: a control byte (0x1b) in the text"
contains "$out" "7 skills"
expect_rc 0 kb skill list --dir "$L2"
contains "$out" "online-softmax"
# what a contributor wrote is shown with its control bytes escaped
lacks "$out" $'\e'
contains "$out" 'sm_70\x1b[31m'
expect_rc 0 kb skill show --dir "$L2" ctl
lacks "$out" $'\e'
contains "$out" 'kb-arch         sm_70\x1b[31m'
contains "$out" 'Red \x1b[31mtext'
expect_rc 3 kb skill export --dir "$L2" exp2
[ "$(ls exp2)" = online-softmax ] || fail "exported: $(ls exp2)"
start=$(date +%s%N)
{ echo "$init"; echo '{"jsonrpc":"2.0","id":2,"method":"resources/list"}'; } |
    timeout 20 "$KB_BIN" mcp --skills "$L2" >mcp2.out 2>mcp2.err || fail "kb mcp did not start: $(cat mcp2.err)"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$ms" -lt 3000 ] || fail "kb mcp took $ms ms"
contains "$(cat mcp2.err)" "'$L2/many' is not served"
grep '"id":2' mcp2.out | grep -q 'skill://online-softmax/SKILL.md' || fail "the good skill is not served"
grep '"id":2' mcp2.out | grep -q 'skill://many/' && fail "a skill over the limits is served"
echo ok
