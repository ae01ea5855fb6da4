#!/usr/bin/env bash
# tier: quick
# kb doctor: each check ok, warn or FAIL with what to do; kb config: the
# config file's settings, the environment winning, keys never shown; one
# setting alone, and all as JSON.
. "$(dirname "$0")/lib.sh"
mkdir -p "$KB_TMP/docs"
printf '# Warps\n\nA warp is 32 threads.\n' >"$KB_TMP/docs/w.md"
printf '# Shuffles\n\nShuffles move values across lanes.\n' >"$KB_TMP/docs/s.md"
expect_rc 0 kb -q ingest "$KB_TMP/docs"

# a sound KB: the model verified, every vector, the index current
expect_rc 0 kb doctor
contains "$out" "ok    model: all-MiniLM-L6-v2"
contains "$out" "weights verified"
contains "$out" "ok    vectors: every chunk"
contains "$out" "ok    index Flat: the file is whole and current"
contains "$out" "ok    manifest"
contains "$out" "GPU for kb verify"
lacks "$out" "FAIL"

# what is wrong, and what to do
sqlite3 "$KB_DIR/kb.sqlite" "DELETE FROM embeddings WHERE chunk_id = (SELECT max(chunk_id) FROM embeddings)"
expect_rc 1 kb doctor
contains "$out" "FAIL  vectors: 1 of 2 chunks: partly embedded; run 'kb ingest'"
contains "$out" "warn  index Flat:"
contains "$out" "something to fix"
expect_rc 1 env KB_MODEL_DIR="$KB_TMP/no-model" "$KB_BIN" doctor
contains "$out" "FAIL  model:"
contains "$out" "kb model fetch"
lacks "$out" "make deps"
expect_rc 1 env KB_MIRROR="$KB_TMP/no-mirror" "$KB_BIN" doctor
contains "$out" "FAIL  mirror $KB_TMP/no-mirror:"
expect_rc 1 env KB_DIR="$KB_TMP/none" "$KB_BIN" doctor
contains "$out" "FAIL  KB: no KB in '$KB_TMP/none'"

# the config file: KEY = value, the environment wins, keys never printed
mkdir -p "$XDG_CONFIG_HOME/kb"
cat >"$XDG_CONFIG_HOME/kb/config" <<CONF
# kb's settings
KB_DIR = $KB_TMP/from-config
KB_THREADS = 2
KB_LLM_API_KEY = "sk-never-shown"
CONF
expect_rc 0 env -u KB_DIR "$KB_BIN" config
contains "$out" "config file: $XDG_CONFIG_HOME/kb/config"
contains "$out" "KB_DIR               $KB_TMP/from-config  (config file, line 2)"
contains "$out" "KB_THREADS           2  (config file, line 3)"
contains "$out" "KB_LLM_API_KEY       (set, not shown)"
lacks "$out" "sk-never-shown"
expect_rc 0 kb config
contains "$out" "KB_DIR               $KB_DIR  (environment)"
expect_rc 0 env -u KB_DIR "$KB_BIN" -q ingest --no-embed "$KB_TMP/docs"
[ -f "$KB_TMP/from-config/kb.sqlite" ] || fail "KB_DIR of the config file not used"
expect_rc 0 env KB_THREADS=3 "$KB_BIN" config
contains "$out" "KB_THREADS           3  (environment)"
# kb config NAME: the value alone for a script; 1 unset, 2 no such setting;
# a key never; --json: each setting as data, numbers as numbers
expect_json 0 env KB_THREADS=3 "$KB_BIN" config KB_THREADS
[ "$out" = 3 ] || fail "kb config KB_THREADS: '$out'"
expect_json 0 env -u KB_DIR "$KB_BIN" config KB_DIR
[ "$out" = "$KB_TMP/from-config" ] || fail "kb config KB_DIR: '$out'"
expect_rc 1 env -u KB_LLM_URL "$KB_BIN" config KB_LLM_URL
contains "$out" "kb config: KB_LLM_URL is not set (default: none)"
expect_rc 2 kb config KB_THREDS
contains "$out" "kb config: no setting 'KB_THREDS'; did you mean 'KB_THREADS'?"
expect_json 0 kb config KB_LLM_API_KEY
[ -z "$out" ] || fail "kb config printed a key: '$out'"
expect_rc 0 kb config KB_LLM_API_KEY
contains "$out" "KB_LLM_API_KEY is set (kb never prints a key)"
expect_json 0 env -u KB_DIR KB_THREADS=3 "$KB_BIN" config --json
lacks "$out" "sk-never-shown"
[ "$(json_get "$out" "j['file_found']")" = True ] || fail "config --json: $out"
[ "$(json_get "$out" "[s['value'] for s in j['settings'] if s['name'] == 'KB_THREADS'][0]")" = 3 ] ||
    fail "KB_THREADS not the number 3: $out"
[ "$(json_get "$out" "[(s['from'], s['line']) for s in j['settings'] if s['name'] == 'KB_DIR'][0]")" = "('config file', 2)" ] ||
    fail "KB_DIR not from the file's line 2: $out"
[ "$(json_get "$out" "[(s['value'], s['set'], s['key']) for s in j['settings'] if s['name'] == 'KB_LLM_API_KEY'][0]")" = "(None, True, True)" ] ||
    fail "the key in config --json: $out"
[ "$(json_get "$out" "[s['default'] for s in j['settings'] if s['name'] == 'KB_EMBED_TIMEOUT_MS'][0]")" = 60000 ] ||
    fail "a default in config --json: $out"
expect_rc 2 kb config --json KB_DIR
expect_rc 2 kb config KB_DIR KB_THREADS
printf 'KB_THREDS = 4\n' >>"$XDG_CONFIG_HOME/kb/config"
expect_rc 2 kb status
contains "$out" "$XDG_CONFIG_HOME/kb/config:5: unknown setting 'KB_THREDS'"
printf 'KB_THREADS = 4\nKB_EMBED_TIMEOUT_MS = soon\n' >"$XDG_CONFIG_HOME/kb/config"
expect_rc 2 kb status
contains "$out" "config:2: bad KB_EMBED_TIMEOUT_MS 'soon'"
echo ok
