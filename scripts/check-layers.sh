#!/usr/bin/env bash
# check-layers.sh [BUILD] - fails when an include or a call runs against the
# dependency direction of docs/design.md's Layout (top down):
#
#   cli/ -> serve/ -> api/ -> generator/ -> query/, ingest/ -> skills/
#     -> verify/, index/ -> kb/
#
# - a room calls and includes only its own files and the rooms below;
#   rooms side by side (query/ and ingest/, verify/ and index/) use
#   neither the other;
# - cli/, the command layer, is called by nobody but itself;
# - kb-verify (verify/kb-verify/, a program of its own) uses only the task
#   model (verify/task.c and task_*.c, through verify/verify.h) and kb/;
#   nothing else uses kb-verify's files;
# - every room is a known one: a new folder of sources must be placed here;
# - SQL only in kb/, index/, ingest/ and query/ (the others ask kb/store.c);
#   verify/jobq_sqlite.c runs SQL on the queue's own database, on its one
#   table kb_jobs alone, never through kb/store.c.
# - no circle between files: when a.c calls b.c, nothing b.c calls (or what
#   that calls) calls a.c again (a file that is both the steps and the
#   helpers the steps call back is two files).
# Includes are read from the sources; calls from the objects' symbols (nm),
# so a call through a declaration that hides its origin is caught too.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build="$top/$build" ;; esac
cd "$top"

ROOMS="kb index verify skills ingest query generator api serve cli"
height() {   # a room's place in the direction
  case $1 in
    kb) echo 0 ;; index|verify) echo 1 ;; skills) echo 2 ;; ingest|query) echo 3 ;;
    generator) echo 4 ;; api) echo 5 ;; serve) echo 6 ;; cli) echo 7 ;; *) echo 99 ;;
  esac
}
is_command() { case $1 in cli/*) return 0 ;; esac; return 1; }

# may FROM (a source or header) use TO? Prints the reason when not.
why_not() {
  local from=$1 to=$2 fm tm
  fm=$(dirname "$from"); tm=$(dirname "$to")
  if is_command "$to"; then
    is_command "$from" || { echo "the command layer"; return; }
    return 0
  fi
  case $from in
    verify/kb-verify/*)
      case $to in kb/*|verify/kb-verify/*|verify/task.c|verify/task_*.c|verify/verify.h) return 0 ;; esac
      echo "not the task model or kb/"; return ;;
  esac
  case $to in verify/kb-verify/*) echo "kb-verify's own"; return ;; esac
  [ "$fm" = "$tm" ] && return 0
  local fh th
  fh=$(height "$fm"); th=$(height "$tm")
  if [ "$th" -gt "$fh" ]; then echo "above it"
  elif [ "$th" -eq "$fh" ]; then echo "a neighbour, not below it"
  fi
}


fail=0
complain() { echo "layers: $*" >&2; fail=1; }

# 0. every folder of sources is a room of the direction
for d in $(find . -path ./tests -prune -o -path ./corpus -prune -o -path './build*' -prune \
             -o -path ./.git -prune -o -name '*.c' -print | sed 's|^\./||; s|/[^/]*$||' | sort -u); do
  case $d in verify/kb-verify) continue ;; esac
  [ "$(height "${d%%/*}")" != 99 ] && [ "$d" = "${d%%/*}" ] ||
    complain "$d/ holds sources but is not a room of the direction"
done

# 1. includes of the project's own headers
for f in $(find $ROOMS -name '*.[ch]' 2>/dev/null | sort); do
  while read -r inc; do
    [ -n "$inc" ] || continue
    w=$(why_not "$f" "$inc")
    [ -z "$w" ] || complain "$f includes $inc ($w)"
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done

# 2. calls: each object's undefined symbols, resolved to the object that
# defines them
[ -d "$build/obj" ] || { echo "layers: no objects under $build/obj; run make first" >&2; exit 2; }
objs=$( (cd "$build/obj" && find . -name '*.o') | sed 's|^\./||' | sort |
       while read -r o; do if [ -f "${o%.o}.c" ]; then echo "$o"; fi; done)   # not stale ones
edges=$(mktemp); trap 'rm -f "$edges"' EXIT
declare -A def
for o in $objs; do
  while read -r s; do def[$s]=${o%.o}.c; done < <(nm --defined-only -g "$build/obj/$o" |
                                                   awk '$2 ~ /^[TDBRCV]$/ {print $3}')
done
for o in $objs; do
  src=${o%.o}.c
  while read -r s; do
    d=${def[$s]:-}
    [ -n "$d" ] && [ "$d" != "$src" ] || continue
    echo "$src $d" >> "$edges"
    w=$(why_not "$src" "$d")
    [ -z "$w" ] || complain "$src calls $s of $d ($w)"
  done < <(nm -u "$build/obj/$o" | awk '{print $2}')
done

# 4. SQL on kb's tables: in kb/store.c, index/ and the rooms that own
# tables (ingest/ writes documents and chunks, query/ reads them and keeps
# its caches); every other room asks kb/store.c
# (verify/jobq_sqlite.c is the verification queue's own database, a file
# of its own that workers on other hosts may share, not kb's: a backend of
# kb_jobq beside the Redis one, as DESIGN.md places both in verify/; its
# statements may name no table but its own)
for f in $(find generator api serve cli skills verify -name '*.c' 2>/dev/null | sort); do
  if [ "$f" = verify/jobq_sqlite.c ]; then
    ! grep -q 'kb_store_' "$f" || complain "$f uses kb/store.c (the queue has a database of its own)"
    other=$(grep -oE '\b(FROM|INTO|UPDATE|JOIN|TABLE( IF NOT EXISTS)?|INDEX( IF NOT EXISTS)? [A-Za-z_]+ ON)[[:space:]]+[A-Za-z_]+' "$f" |
            awk '{print $NF}' | sort -u | grep -vx kb_jobs || true)
    [ -z "$other" ] || complain "$f runs SQL on $(echo $other) (the queue's own table is kb_jobs)"
    continue
  fi
  if grep -q 'kb_store_prepare\|sqlite3_prepare\|sqlite3_exec' "$f"; then
    complain "$f runs SQL (kb/store.c holds SQL on kb's tables)"
  fi
done

# 3. circles between files: tsort names the files of each loop
loops=$(sort -u "$edges" | tsort 2>&1 >/dev/null | grep -v 'input contains a loop' | sed 's/^tsort: //' | sort -u || true)
[ -z "$loops" ] || complain "files in a circle of calls: $(echo $loops)"
[ $fail -eq 0 ] && echo "layers: ok ($(echo "$objs" | wc -w) objects)"
exit $fail
