#!/usr/bin/env bash
# tier: ci
# On a GPU: each adversarial candidate gets the verdict it must get (the
# one-command runner, tests/verify/run-adversarial.sh). Skips without one.
. "$(dirname "$0")/lib.sh"
"$KB_TOP/tests/verify/run-adversarial.sh"
