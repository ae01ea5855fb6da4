#!/usr/bin/env bash
# check-sizes.sh - the house rules on size (docs/design.md, Layout):
#  - no function over 100 lines (from its opening "{" in column 0 to its
#    closing "}" in column 0, the way kb's C is laid out);
#  - no source file over 1,000 lines unless its opening comment gives the
#    reason on a line that starts with " * Long: ".
# Prints each offender and exits 1 if there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
rooms="kb index verify skills ingest query generator api serve cli"
for f in $(find $rooms -name '*.[ch]' | sort); do
  n=$(wc -l < "$f")
  if [ "$n" -gt 1000 ] && ! head -n 30 "$f" | grep -q '^ \* Long: '; then
    echo "sizes: $f has $n lines and no ' * Long: ' reason in its opening comment"; fail=1
  fi
  awk -v f="$f" '
    /^[A-Za-z_].*\(/ { name = $0 }
    /^\{/ { start = NR; fn = name }
    /^\}/ && start { len = NR - start - 1
                     if (len > 100) { sub(/\(.*/, "", fn); n = split(fn, w, /[ *]+/)
                                      printf "sizes: %s: %s has %d lines\n", f, w[n], len; bad = 1 }
                     start = 0 }
    END { exit bad }' "$f" || fail=1
done
[ $fail -eq 0 ] && echo "sizes: ok"
exit $fail
