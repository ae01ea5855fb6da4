#!/usr/bin/env bash
# The tuned embedder's figures (kb tune, BENCHMARKS.md "An embedder adapted
# to the KB"), printed as Markdown:
#   scripts/bench-tune.sh BUILD KB
# Tunes the model on KB's pairs into BUILD/bench-tuned-model, re-embeds a
# copy of KB with it (BUILD/bench-kb-tuned) and evaluates both KBs on both
# development sets. Needs a Python with torch, transformers and safetensors
# (KB_TUNE_PYTHON, else python3): without one it says so and stops.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
base_kb=${2:?the KB to tune on}
kb="$top/$build/kb"
py=${KB_TUNE_PYTHON:-python3}
model="$top/$build/bench-tuned-model"
: "${KB_MIRROR:?set KB_MIRROR to the document mirror (the re-embed re-reads the sources)}"
cd "$top"   # the manifest, corpus/sources.json
tuned_kb="$top/$build/bench-kb-tuned"
if ! "$py" -c 'import torch, transformers, safetensors' 2>/dev/null; then
    echo "Not measured here: $py lacks torch, transformers or safetensors (set KB_TUNE_PYTHON)."
    exit 0
fi
"$kb" --kb "$base_kb" -q tune --python "$py" --out "$model" >&2
rm -rf "$tuned_kb"
cp -a "$base_kb" "$tuned_kb"
KB_MODEL_DIR="$model" "$kb" --kb "$tuned_kb" -q ingest --reembed >&2
python3 - "$model/tuned.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
print(f"{m['pairs']} pairs, {m['steps']} steps on {m['device']} in {m['seconds']} s")
PY
echo
echo "| set | base: lexical / vector / hybrid nDCG@10 | tuned: lexical / vector / hybrid nDCG@10 |"
echo "|---|---|---|"
for s in retrieval-dev retrieval-dev2; do
    q="$top/../shared/eval/$s.json"
    [ -f "$q" ] || continue
    b=$("$kb" --kb "$base_kb" eval "$q" | awk '$2 == "all" {printf "%s%s", sep, $4; sep=" / "}')
    t=$(KB_MODEL_DIR="$model" "$kb" --kb "$tuned_kb" eval "$q" | awk '$2 == "all" {printf "%s%s", sep, $4; sep=" / "}')
    echo "| $s | $b | $t |"
done
