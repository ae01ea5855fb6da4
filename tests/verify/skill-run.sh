#!/usr/bin/env bash
# The GPU run behind BENCHMARKS.md's "Five more skills" and "kb skill verify
# --all on the H200", for the device machine: the five new skills'
# candidates with the variants that chose them (made here by sed from the
# committed files) and the candidates they are compared with, the three
# histograms again with the skewed distribution timed, then
# `kb skill verify --all` on a scratch copy of corpus/skills
# (corpus/skills.h200, same depth so the kernel.cu links resolve), tarred.
#   tests/verify/skill-run.sh [OUTDIR]
# Needs build/kb, build/kb-verify and build/verify/harness.fatbin, and kb's
# shared libraries in $KB_LIBS (only kb's processes get them). Exits
# non-zero when any step failed.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/tests/verify/lib.sh"
cd "$top"
out=${1:-${OUT:-/tmp/kb-skill-run}}
mkdir -p "$out"
cuda=${CUDA_HOME:-/usr/local/cuda}
orig=${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH="$top/.vrt:$cuda/lib64:$orig"
export KB_VERIFY_CACHE=/tmp/kb-verify-cache
kv=$top/build/kb-verify
need_device "$kv" "$out/device.json"
cat "$out/device.json"; echo
var=/tmp/kb-variants
rm -rf "$var"; mkdir -p "$var"
T=corpus/tasks
s() { sed -e "$2" "$1"; }
D=$T/scan/candidates/decoupled_lookback.cu
s $D 's/^#define TPB 256 /#define TPB 1024/; s/^#define IPT 16/#define IPT 4 /; s/^#define MINB 8/#define MINB 2/; s/block=256$/block=1024/' >"$var/scan_lb1024x4.cu"
s $D 's/^#define TPB 256 /#define TPB 512 /; s/^#define IPT 16/#define IPT 8 /; s/^#define MINB 8/#define MINB 4/; s/block=256$/block=512/' >"$var/scan_lb512x8.cu"
s $D 's/^#define TPB 256 /#define TPB 512 /; s/^#define MINB 8/#define MINB 2/; s/block=256$/block=512/; s/grid=ceil_div(N,4096)/grid=ceil_div(N,8192)/' >"$var/scan_lb512x16.cu"
H=$T/histogram/candidates/cluster_dsmem.cu
s $H 's/^#define CLUSTER 2/#define CLUSTER 4/; s/grid=2\*min(ceil_div(N,16384),528)/grid=4*min(ceil_div(N,32768),264)/' >"$var/histogram_cluster4.cu"
s $H 's/^#define CLUSTER 2/#define CLUSTER 8/; s/grid=2\*min(ceil_div(N,16384),528)/grid=8*min(ceil_div(N,65536),132)/' >"$var/histogram_cluster8.cu"
# the skewed distribution timed: the histogram task with its two dists swapped
python3 - "$T/histogram" /tmp/histogram_skewed <<'P'
import json, os, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
shutil.rmtree(dst, ignore_errors=True); os.makedirs(dst)
shutil.copy(os.path.join(src, "reference.cu"), dst)
t = json.load(open(os.path.join(src, "task.json")))
t["params"][0]["dist"] = list(reversed(t["params"][0]["dist"]))
json.dump(t, open(os.path.join(dst, "task.json"), "w"), indent=2)
P
run() {   # task-dir candidate label
    r=$(timeout 120 "$kv" --json "$1" "$2") || step_failed "$3 $2"
    printf '%s\n' "$r" | python3 -c "import json,sys; r=json.load(sys.stdin); r['file']='$2'; r['label']='$3'; print(json.dumps(r))" >>"$out/candidates.jsonl" ||
        step_failed "$2: no result"
}
for c in scan/candidates/decoupled_lookback scan/candidates/warp_scan softmax/candidates/online \
         softmax/candidates/block_row histogram/candidates/cluster_dsmem histogram/candidates/warp_aggregated \
         histogram/candidates/smem_private histogram/candidates/smem_private gemm_bias_relu/candidates/tf32x3_fused \
         gemm_bias_relu/candidates/tf32x3_unfused; do
    run "$T/${c%%/*}" "$T/$c.cu" "${c%%/*}"
done
for v in "$var"/*.cu; do b=$(basename "$v"); run "$T/${b%%_*}" "$v" "${b%%_*} (variant)"; done
for c in cluster_dsmem warp_aggregated smem_private; do
    run /tmp/histogram_skewed "$T/histogram/candidates/$c.cu" "histogram skewed-timed"
done
python3 - "$out/candidates.jsonl" <<'P'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    t = (r.get("timings") or [{}])[0]
    c = t.get("candidate_ms", {}).get("median", 0); b = t.get("baseline_ms", {}).get("median", 0)
    print("%-24s %-34s %-9s cand %8.4f  base %8.4f  floor %7.4f  x%7.2f  %s" % (
        r["label"][:24], r["file"].split("/")[-1][:34], r["verdict"], c, b, t.get("floor_ms", 0),
        r.get("speedup_geomean", 0), r["reason"][:60]))
P
[ $? -eq 0 ] || step_failed "candidates: results unreadable"
# KB_SKILLS="a b": verify those skills only (default: --all)
echo "== kb skill verify ${KB_SKILLS:---all} on a scratch copy of corpus/skills"
rm -rf corpus/skills.h200; cp -a corpus/skills corpus/skills.h200
# the device has no xz binary: python's tarfile reads .tar.xz and .tar.gz
libs=/tmp/kb-libs; mkdir -p $libs
python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "${KB_LIBS_TAR:-.vrt/kblib.tar.xz}" "$libs" || step_failed "unpacking kb's libraries"
t0=$(date +%s%N)
LD_LIBRARY_PATH="$libs:$top/.vrt:$cuda/lib64:$orig" KB_VERIFY="$kv" timeout 400 build/kb skill verify ${KB_SKILLS:---all} \
    --dir corpus/skills.h200 --json >"$out/skill-verify.json" 2>"$out/skill-verify.err"
rc=$?
echo "kb skill verify --all: rc=$rc in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
[ "$rc" -eq 0 ] || step_failed "kb skill verify"
cat "$out/skill-verify.err" | tail -20
python3 -c "
import json
for s in json.load(open('$out/skill-verify.json'))['skills']: print(str(s)[:200])" ||
    step_failed "kb skill verify: result unreadable"
LD_LIBRARY_PATH="$libs:$top/.vrt:$cuda/lib64:$orig" build/kb skill list --dir corpus/skills.h200 ||
    step_failed "kb skill list"
tar -C corpus -cf "$out/skills.h200.tar" skills.h200 || step_failed tar
finish skill-run
