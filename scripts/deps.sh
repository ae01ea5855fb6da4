#!/usr/bin/env bash
# make deps: install what kb needs on a Debian bookworm machine. Idempotent.
#  1. Debian packages (build, libraries, test tools)
#  2. the FAISS C API, built from Debian's own faiss source package into build/faiss-capi
# The embedding model comes after the build: make model (build/kb model fetch,
# HTTPS through libcurl: ca-certificates).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build="$top/build"
say() { printf 'deps: %s\n' "$*" >&2; }

sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"

packages=(
  build-essential pkg-config dpkg-dev
  libsqlite3-dev libcurl4-openssl-dev libcjson-dev libxml2-dev libmd4c-dev
  libyaml-dev libutf8proc-dev libopenblas-dev libblis-openmp-dev liblapack-dev
  libmicrohttpd-dev libfaiss-dev libssl-dev libzip-dev libcmocka-dev libhiredis-dev sqlite3 python3 python3-pip python3-venv
  redis-server redis-tools debhelper fakeroot
  unzip curl ca-certificates time wrk fish
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- FAISS C API -------------------------------------------------------------
# libfaiss-dev ships libfaiss.a and the c_api headers but not the C API objects.
capi="$build/faiss-capi"
# the library is the last thing written: its presence means a finished build;
# the stamp, one built with NDEBUG (without it every FAISS error is also
# printed on stderr by the C API itself, so kb's message came twice)
if [ ! -f "$capi/libfaiss_c.a" ] || [ ! -f "$capi/ndebug.stamp" ]; then
  srclist=/etc/apt/sources.list.d/kb-debian-src.sources
  if [ ! -f "$srclist" ]; then
    say "enabling deb-src for bookworm"
    $sudo_cmd tee "$srclist" >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    $sudo_cmd apt-get update -qq
  fi
  mkdir -p "$capi/src" "$capi/obj"
  if ! ls -d "$capi"/src/faiss-*/c_api >/dev/null 2>&1; then
    say "fetching the faiss source package"
    (cd "$capi/src" && apt-get source -qq faiss >/dev/null) ||
      { say "cannot fetch the faiss source package (deb-src bookworm)"; exit 1; }
  fi
  srcdir=$(ls -d "$capi"/src/faiss-*/ | head -n1)
  say "building the FAISS C API from $srcdir"
  # the C API headers, laid out as <faiss/c_api/...>
  mkdir -p "$capi/include/faiss/c_api"
  (cd "$srcdir/c_api" && find . -name '*.h' ! -path '*gpu*' -exec cp --parents {} "$capi/include/faiss/c_api/" \;)
  # one compiler per CPU; xargs fails if any compile does
  sources=$(cd "$srcdir/c_api" && find . -name '*.cpp' ! -path '*gpu*' | sort)
  printf '%s\n' $sources | xargs -P "$(nproc)" -I{} sh -c \
    'o="$1/obj/$(echo "$2" | sed "s|^\./||; s|/|_|g").o"; g++ -O2 -DNDEBUG -fPIC -std=c++17 -I"$0" -c "$0c_api/$2" -o "$o"' \
    "$srcdir" "$capi" {}
  ar rcs "$capi/libfaiss_c.a.tmp" "$capi"/obj/*.o
  mv "$capi/libfaiss_c.a.tmp" "$capi/libfaiss_c.a"
  touch "$capi/ndebug.stamp"
fi

say "ok"
