#!/usr/bin/env bash
# tier: ci
# Sources fetched over HTTP from a loopback server: parsed by what the body
# is, cached under the KB with Last-Modified, re-fetched conditionally, and
# kept when the server is gone.
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "skipped: no python3 for the test server"; exit 0; }
site="$KB_TMP/site"
mkdir -p "$site/repo"
cat > "$site/page.html" <<'HTML'
<!DOCTYPE html><html><head><title>Page</title></head><body>
<nav>skip this navigation</nav>
<section id="occupancy-tuning"><h1>Occupancy tuning</h1>
<p>Raising occupancy hides latency when warps stall on memory.</p>
<pre>__launch_bounds__(256, 2)</pre></section></body></html>
HTML
# a repository page cited, its raw README fetched (fetch_url)
printf '# Survey\n\n## Tiling\n\nSplit-K with stream scheduling for skinny GEMMs.\n' > "$site/raw-readme.md"
# a "repository" URL whose manifest format is CUDA source, served as a web page
cat > "$site/repo/index.html" <<'HTML'
<!DOCTYPE html><html><body><h1>Repo page</h1><p>Persistent kernels with work stealing.</p></body></html>
HTML
serve_dir "$site"
cat > "$KB_TMP/m.json" <<JSON
{"sources":[{"id":"page","title":"Page","url":"$base/page.html","format":"html"},
            {"id":"repo","title":"Repo","url":"$base/repo/","format":"cuda-source"},
            {"id":"readme","title":"Readme","url":"$base/repo/","fetch_url":"$base/raw-readme.md","format":"markdown"}]}
JSON
unset KB_MIRROR
expect_json 0 kb ingest --no-embed --json --manifest "$KB_TMP/m.json"
[ "$(json_get "$out" "j['documents_changed']")" -eq 3 ] || fail "first fetch: $out"
expect_json 0 kb query --mode lexical --json "occupancy hides latency"
[ "$(json_get "$out" "j['results'][0]['url']")" = "$base/page.html#occupancy-tuning" ] || fail "deep link: $out"
[ "$(json_get "$out" "j['results'][0]['path']")" = "" ] || fail "fetched documents have no path"
lacks "$(json_get "$out" "j['results'][0]['text']")" "navigation"
expect_json 0 kb query --mode lexical --json "persistent kernels work stealing"
[ "$(json_get "$out" "j['results'][0]['heading_path']")" = "['Repo page']" ] || fail "a web page is parsed as HTML: $out"
expect_json 0 kb query --mode lexical --json "split-K stream scheduling skinny"
[ "$(json_get "$out" "j['results'][0]['source']")" = readme ] || fail "fetch_url source: $out"
[ "$(json_get "$out" "j['results'][0]['url']")" = "$base/repo/#tiling" ] || fail "fetch_url cites url: $out"
ls "$KB_DIR"/cache/*.json >/dev/null || fail "no cache"
# the cache of a private KB is private too
[ "$(stat -c %a "$KB_DIR/cache")" = 700 ] || fail "the cache folder is $(stat -c %a "$KB_DIR/cache")"
for c in "$KB_DIR"/cache/*; do
    [ "$(stat -c %a "$c")" = 600 ] || fail "'$c' is $(stat -c %a "$c"), not 600"
done
[ -n "$(sql "SELECT last_modified FROM documents WHERE source_id='page'")" ] || fail "Last-Modified not recorded"

# again: conditional requests (304), nothing re-parsed
expect_json 0 kb ingest --no-embed --json --manifest "$KB_TMP/m.json"
[ "$(json_get "$out" "j['documents_unchanged']")" -eq 3 ] || fail "second fetch: $out"
grep -q '" 304 ' "$KB_TMP/server.log" || fail "no conditional request: $(cat "$KB_TMP/server.log")"

# the server is gone: a clear error, exit status 1 (nothing could be read),
# the documents stay
kill $KB_SERVE_DIR_PID; wait $KB_SERVE_DIR_PID 2>/dev/null
expect_rc 1 kb ingest --no-embed --manifest "$KB_TMP/m.json"
contains "$out" "cannot fetch '$base/page.html'"
expect_json 0 kb query --mode lexical --json "occupancy hides latency"
[ "$(json_get "$out" "len(j['results'])")" -ge 1 ] || fail "document lost when the server went away"
echo ok
