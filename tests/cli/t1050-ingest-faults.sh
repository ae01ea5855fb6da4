#!/usr/bin/env bash
# tier: ci
# Inputs found by fault injection and fuzzing (issue 15): each ends in a
# clear result, never a crash or a hang, and loses nothing.
. "$(dirname "$0")/lib.sh"

# a Markdown line holding only a paper date crashed ingest (SIGSEGV), and
# every document after it was skipped
mkdir -p "$KB_TMP/dates"
printf -- '- [12/2023]\n' > "$KB_TMP/dates/a.md"
printf '[0026]\n' > "$KB_TMP/dates/b.md"
printf '# After\n\nThe document after the dates is ingested too.\n' > "$KB_TMP/dates/c.md"
expect_rc 0 kb ingest --no-embed "$KB_TMP/dates"
[ "$(sql "SELECT count(*) FROM documents WHERE key LIKE '$KB_TMP/dates/%'")" = 3 ] ||
    fail "not every document of the folder was stored: $out"
[ "$(sql "SELECT count(*) FROM papers")" = 0 ] || fail "a date alone became a paper"
expect_json 0 kb query --mode lexical --json "12/2023"
[ "$(json_get "$out" "j['results'][0]['path']")" = "$KB_TMP/dates/a.md" ] ||
    fail "the date-only line was not kept as text: $out"

# symlink loops hung a folder ingest, growing without limit (self -> .,
# sub/up -> ..), and one self -> . ingested each file 41 times: every
# folder is read once, for ad-hoc folders and mirror folders alike
loops="$KB_TMP/loops"; mkdir -p "$loops/docs/sub"
printf '# Top\n\nLoop top document about warp votes.\n' > "$loops/docs/top.md"
printf '# Sub\n\nLoop sub document about ballot sync.\n' > "$loops/docs/sub/b.md"
ln -s . "$loops/docs/self"; ln -s .. "$loops/docs/sub/up"; ln -s sub "$loops/docs/again"
out=$(timeout 60 "$KB_BIN" ingest --no-embed "$loops/docs" 2>&1); rc=$?
[ "$rc" -eq 0 ] || fail "a folder with symlink loops: exit $rc: $out"
contains "$out" "a link to a folder already read"
[ "$(sql "SELECT count(*) FROM documents WHERE key LIKE '$loops/docs/%'")" = 2 ] ||
    fail "the looped folder's files were not stored once each: $(sql "SELECT key FROM documents")"
cat > "$loops/m.json" <<JSON
{"sources":[{"id":"loopy","title":"Loopy","url":"https://example.org/loopy","mirror":["docs/"],"format":"markdown"}]}
JSON
out=$(timeout 60 "$KB_BIN" ingest --no-embed --manifest "$loops/m.json" --mirror "$loops" 2>&1); rc=$?
[ "$rc" -eq 0 ] || fail "a mirror folder with symlink loops: exit $rc: $out"
[ "$(sql "SELECT group_concat(key, ' ') FROM (SELECT key FROM documents WHERE source_id = 'loopy' ORDER BY key)")" = "docs/sub/b.md docs/top.md" ] ||
    fail "the looped mirror folder: $(sql "SELECT key FROM documents WHERE source_id = 'loopy'")"

# a damaged vocab.txt sized every chunk wrongly without a word: it is the
# model's own (its pinned SHA-256) or ingest stops, before writing
model=${KB_MODEL_DIR-$HOME/.cache/kb/models/all-MiniLM-L6-v2}
if [ -f "$model/vocab.txt" ]; then
    mkdir -p "$KB_TMP/model"
    head -n 1000 "$model/vocab.txt" > "$KB_TMP/model/vocab.txt"
    printf '# Vocab\n\nChunked by a cut vocabulary.\n' > "$KB_TMP/vocab.md"
    KB_MODEL_DIR="$KB_TMP/model" expect_rc 1 kb ingest --no-embed "$KB_TMP/vocab.md"
    contains "$out" "vocab.txt' is truncated or corrupt; run 'kb model fetch'"
    [ "$(sql "SELECT count(*) FROM documents WHERE key = '$KB_TMP/vocab.md'")" = 0 ] ||
        fail "a document was chunked with a damaged vocabulary"
    # no vocabulary at all: sizes are estimated, as before
    rm "$KB_TMP/model/vocab.txt"
    KB_MODEL_DIR="$KB_TMP/model" expect_rc 0 kb ingest --no-embed "$KB_TMP/vocab.md"
fi

# a database that fails PRAGMA quick_check: ingest wrote into it (opening
# probed one SELECT); now it stops before writing and says how to recover
export KB_DIR="$KB_TMP/damaged"
for i in 1 2 3 4 5 6; do
    printf '# Page %s\n\n%s\n' "$i" "$(seq -s ' ' 1 400 | sed "s/[0-9]*/word$i&/g")" > "$KB_TMP/p$i.md"
done
expect_rc 0 kb ingest --no-embed "$KB_TMP"/p*.md
sqlite3 "$KB_DIR/kb.sqlite" "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null
python3 - "$KB_DIR/kb.sqlite" <<'PY' || fail "no table page to damage"
import sys
path = sys.argv[1]
b = bytearray(open(path, 'rb').read())
size = int.from_bytes(b[16:18], 'big') or 65536
# the last table leaf page (type 13) gets an impossible header
pages = [p for p in range(1, len(b) // size) if b[p * size] == 13]
p = pages[-1]
b[p * size:p * size + 8] = b'\x0d\xff\xff\xff\xff\xff\xff\xff'
open(path, 'wb').write(b)
PY
before=$(sha256sum "$KB_DIR/kb.sqlite")
printf '# New\n\nWritten into a damaged database.\n' > "$KB_TMP/new.md"
expect_rc 1 kb ingest --no-embed "$KB_TMP/new.md"
contains "$out" "kb.sqlite' fails SQLite's integrity check (Page "
contains "$out" "nothing was written: move it away and run 'kb ingest'"
contains "$out" ".recover | sqlite3 recovered.sqlite"
[ "$(sha256sum "$KB_DIR/kb.sqlite")" = "$before" ] || fail "the damaged database was written"

# a KB was world-readable (0755 / 0644 under umask 022); a team's private
# notes may be in it (issue 15 item 13): it is made 0700, its files 0600,
# its folders no more open; a folder the user made or opened up keeps its
# mode, and what kb writes there follows it
umask 022
printf '# Private\n\nA private note.\n' > "$KB_TMP/private.md"
mkdir -m 755 "$KB_TMP/pub"
expect_rc 0 kb --kb "$KB_TMP/pub/new/deeper/kb" ingest --no-embed "$KB_TMP/private.md"
[ "$(stat -c %a "$KB_TMP/pub/new/deeper/kb")" = 700 ] || fail "a new KB is $(stat -c %a "$KB_TMP/pub/new/deeper/kb"), not 700"
[ "$(stat -c %a "$KB_TMP/pub/new/deeper")" = 755 ] || fail "a new KB's parent is $(stat -c %a "$KB_TMP/pub/new/deeper")"
for f in kb.sqlite ingest.lock; do
    [ "$(stat -c %a "$KB_TMP/pub/new/deeper/kb/$f")" = 600 ] || fail "$f is $(stat -c %a "$KB_TMP/pub/new/deeper/kb/$f"), not 600"
done
mkdir -m 755 "$KB_TMP/shared"
expect_rc 0 kb --kb "$KB_TMP/shared" ingest --no-embed "$KB_TMP/private.md"
[ "$(stat -c %a "$KB_TMP/shared")" = 755 ] || fail "kb changed the mode of a KB folder the user made"
[ "$(stat -c %a "$KB_TMP/shared/kb.sqlite")" = 644 ] || fail "a shared KB's database is $(stat -c %a "$KB_TMP/shared/kb.sqlite")"

# a URL's secrets were stored whole in sources.last_error and printed
export KB_DIR="$KB_TMP/urls"
expect_rc 1 kb ingest --no-embed 'http://bob:pa55word@127.0.0.1:9/doc.md?token=s3cr3t'
contains "$out" "cannot fetch 'http://...@127.0.0.1:9/doc.md?...'"
lacks "$out" "s3cr3t"
lacks "$out" "pa55word"
e=$(sql "SELECT group_concat(last_error) FROM sources WHERE last_error IS NOT NULL")
contains "$e" "127.0.0.1:9/doc.md?..."
lacks "$e" "s3cr3t"

# file:// and other URLs were read as source ids; a local file's URL kept
# raw spaces and line breaks; a failed embedding after documents were
# stored exited 1, not 3 (issue 15 item 17)
export KB_DIR="$KB_TMP/small"
mkdir -p "$KB_TMP/odd dir"
printf '# Odd\n\nA file named oddly, about named barriers.\n' > "$KB_TMP/odd dir/a b#1?.md"
expect_rc 0 kb ingest --no-embed "file://$KB_TMP/odd%20dir/a%20b%231%3F.md"
[ "$(sql "SELECT url FROM documents WHERE key = '$KB_TMP/odd dir/a b#1?.md'")" = "file://$KB_TMP/odd%20dir/a%20b%231%3F.md" ] ||
    fail "a file:// target: $(sql "SELECT key, url FROM documents")"
printf '# Nl\n\nA name with a line break.\n' > "$KB_TMP/odd dir/new"$'\n'"line.md"
expect_rc 0 kb ingest --no-embed "$KB_TMP/odd dir"
[ "$(sql "SELECT count(*) FROM documents WHERE instr(url, ' ') OR instr(url, char(10))")" = 0 ] ||
    fail "URLs with raw spaces or line breaks: $(sql "SELECT url FROM documents")"
expect_rc 2 kb ingest --no-embed ftp://example.org/doc.md
contains "$out" "cannot ingest 'ftp://example.org/doc.md': kb fetches http:// and https:// URLs"
lacks "$out" "neither a source"
# an embedding endpoint that answers its probe, then fails: the documents
# stay stored, the run is partly done (3); a model that is missing is
# found before anything is written (1)
printf '# Unembedded\n\nStored, then the embedding fails.\n' > "$KB_TMP/unembedded.md"
python3 - "$KB_TMP/port" <<'PY' & server=$!
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    calls = 0
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        H.calls += 1
        if H.calls == 1:   # the probe
            out = json.dumps({"data": [{"index": i, "embedding": [0.5] * 8}
                                       for i, _ in enumerate(body["input"])]}).encode()
            self.send_response(200)
        else:
            out = b'{"error": {"message": "model unloaded"}}'
            self.send_response(400)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(('127.0.0.1', 0), H)
open(sys.argv[1], 'w').write(str(s.server_port))
s.serve_forever()
PY
for _ in $(seq 100); do [ -s "$KB_TMP/port" ] && break; sleep 0.05; done
KB_EMBED_URL="http://127.0.0.1:$(cat "$KB_TMP/port")/v1/embeddings" KB_EMBED_MODEL=test \
    expect_rc 3 kb ingest "$KB_TMP/unembedded.md"
kill $server 2>/dev/null; wait $server 2>/dev/null
contains "$out" "the documents were stored but not embedded: "
contains "$out" "run 'kb ingest' again to embed them"
[ "$(sql "SELECT count(*) FROM documents WHERE key = '$KB_TMP/unembedded.md'")" = 1 ] || fail "the document was not stored"
printf '# Later\n\nNot written: the model is missing.\n' > "$KB_TMP/later.md"
KB_MODEL_DIR="$KB_TMP/no-model" expect_rc 1 kb ingest "$KB_TMP/later.md"
contains "$out" "model directory '$KB_TMP/no-model' not found"
[ "$(sql "SELECT count(*) FROM documents WHERE key = '$KB_TMP/later.md'")" = 0 ] ||
    fail "a document was written though the model was missing"

echo ok
