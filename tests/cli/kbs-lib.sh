# kbs-lib.sh - the KBs that several CLI tests only read, each built once
# into $KB_BUILD/test-kbs/NAME and kept while its inputs are unchanged: the
# kb binary, the recipe below, the mirror's files (names, sizes, times),
# corpus/sources.json, corpus/skills and KB_MODEL_DIR. Embedding is what
# costs: a copy (cp -r) is far cheaper than ingesting again.
# Sourced by lib.sh (use_kb, which gives the test its own copy) and by
# tests/run.sh (which builds the ones its tests use first: kbs_ensure).
# A test that tests ingest itself does its own.
#   small              hopper-tuning-guide and survey-literature (some 175
#                      chunks), with vectors: serve-lib.sh's ingest_small
#   small-skills       small, then the skill library (corpus/skills)
#   cbp                cuda-best-practices, with vectors
#   cbp-survey-skills  cbp, then survey-literature, then the skill library
# Each is what the same 'kb ingest -q --manifest corpus/sources.json ...'
# commands leave in a fresh KB (cbp-survey-skills: the content of one
# ingest of cuda-best-practices and survey-literature; only the times and
# the vector index's generation differ).

# kbs_base NAME: the KB that NAME starts from (a copy), or nothing
kbs_base() {
    case $1 in
    small-skills) echo small ;;
    cbp-survey-skills) echo cbp ;;
    esac
}

# kbs_steps NAME: the ingests (source ids after --manifest), one a line
kbs_steps() {
    case $1 in
    small) echo "hopper-tuning-guide survey-literature" ;;
    small-skills) echo "skills" ;;
    cbp) echo "cuda-best-practices" ;;
    cbp-survey-skills) echo "survey-literature"; echo "skills" ;;
    *) return 1 ;;
    esac
}

# kbs_key NAME: what NAME is built from, hashed
kbs_key() {
    local base
    base=$(kbs_base "$1")
    {
        echo "$1"
        kbs_steps "$1"
        [ -z "$base" ] || kbs_key "$base"
        sha256sum <"$KB_BIN"
        echo "model ${KB_MODEL_DIR-unset}"
        (cd "$KB_MIRROR" && find . -type f -printf '%P %s %T@\n' | LC_ALL=C sort)
        sha256sum <"$KB_TOP/corpus/sources.json"
        (cd "$KB_TOP/corpus/skills" && find -L . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    } | sha256sum | cut -d' ' -f1
}

# kbs_ensure NAME [DEST]: builds NAME unless it is there from the same
# inputs, and copies it to DEST; one builder at a time (flock), the others
# wait for it
kbs_ensure() {
    local name=$1 dest=${2:-} root="$KB_BUILD/test-kbs" base key fd tmp rc=0 ids
    kbs_steps "$name" >/dev/null || { echo "no shared KB '$name' (tests/cli/kbs-lib.sh)" >&2; return 1; }
    [ -f "${KB_MIRROR:-}/MANIFEST.json" ] || { echo "no document mirror (KB_MIRROR)" >&2; return 1; }
    mkdir -p "$root" || return 1
    base=$(kbs_base "$name")
    [ -z "$base" ] || kbs_ensure "$base" || return 1
    key=$(kbs_key "$name")
    exec {fd}>"$root/$name.lock"
    flock "$fd"
    if [ ! -d "$root/$name" ] || [ "$(cat "$root/$name.key" 2>/dev/null)" != "$key" ]; then
        echo "building the shared KB $name" >&2
        tmp="$root/$name.tmp.$$"
        rm -rf "$tmp" "$root/$name" "$root/$name.key"
        if [ -n "$base" ]; then cp -r "$root/$base" "$tmp" || rc=1; fi
        while [ $rc -eq 0 ] && read -r ids; do
            # as lib.sh runs kb: no config or state of the user
            env KB_DIR="$tmp" NO_COLOR=1 XDG_CONFIG_HOME="$tmp.cfg/config" XDG_STATE_HOME="$tmp.cfg/state" \
                "$KB_BIN" ingest -q --manifest "$KB_TOP/corpus/sources.json" $ids >&2 </dev/null || rc=1
        done < <(kbs_steps "$name")
        rm -rf "$tmp.cfg"
        if [ $rc -eq 0 ] && mv "$tmp" "$root/$name"; then
            echo "$key" >"$root/$name.key"
        else
            rm -rf "$tmp"; rc=1
        fi
    fi
    if [ $rc -eq 0 ] && [ -n "$dest" ]; then
        rm -rf "$dest" && cp -r "$root/$name" "$dest" || rc=1
    fi
    exec {fd}>&-
    return $rc
}
