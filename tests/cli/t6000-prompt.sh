#!/usr/bin/env bash
# tier: quick
# kb prompt TASK over a small real KB (the CUDA Best Practices Guide from the
# mirror and the team's skill library): the sections in order with the
# device's profile, the target shape alone, the skill that fits cited with
# its deep link; --json's shape and its hash; the budget; the same prompt
# from two processes; --feedback, --parent, --tasks, --device-info; a bad
# task name, a bad device file, no KB; and the task and prompt endpoints
# of kb serve.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve-lib.sh"
need_mirror
cd "$KB_TOP"
DEV="$KB_TOP/tests/fixtures/skills/h200-device.json"
expect_rc 0 kb ingest -q --no-embed --manifest "$MANIFEST" cuda-best-practices
expect_rc 0 kb ingest -q --no-embed --manifest "$KB_TOP/corpus/sources.json" skills

# the prompt, as an agent reads it: system, then user, clearly apart
expect_json 0 kb prompt --device-info "$DEV" gelu
text=$out
[ "$(printf '%s\n' "$text" | head -n 1)" = "=== system ===" ] || fail "the first line: $(printf '%s\n' "$text" | head -n 1)"
python3 - "$text" <<'PY' || fail "sections"
import sys
t = sys.argv[1]
system, user = t.split("\n=== user ===\n")
assert "CUDA kernel engineer" in system and "## " not in system
order = ["# Task: gelu", "## Hardware profile", "## Task", "## Reference kernel",
         "## Retrieved context", "## Output contract"]
at = [user.find("\n" + h + "\n") if i else user.find(h + "\n") for i, h in enumerate(order)]
assert all(a >= 0 for a in at) and at == sorted(at), list(zip(order, at))
assert "## Last attempts" not in user
# no kernel given: gelu's own skill's kernel is the kernel to refine, after
# the context, and shown once (no exemplar of it as well)
refine = user.split("## Kernel to refine")[1].split("## Output contract")[0]
assert "__global__" in refine and refine.count("__global__ void gelu_vec4") == 1, refine[:300]
assert user.count("__global__ void gelu_vec4") == 1
assert user.find("## Retrieved context") < user.find("## Kernel to refine")
assert "NVIDIA H200: compute capability 9.0 (sm_90), 132 SMs" in user
assert 'extern "C" __global__ void gelu(const float *x, float *y, int n)' in user
assert "Target shape (timed): N = 67108864." in user
assert "1000003" not in user.split("## Retrieved context")[0]   # the odd shape is kept back
assert "N = 7." not in user and "N = 1000003" not in user
# the skill whose ops fit, first, with its deep link; doc passages cited
ctx = user.split("## Retrieved context")[1].split("## Output contract")[0]
assert ctx.startswith("\n\n### [1] skill vectorized-global-access: verified"), ctx[:200]
assert "SKILL.md#vectorized-global-access" in ctx
assert "Source: cuda-best-practices" in ctx and "https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/index.html#" in ctx
assert "exactly one fenced code block" in user.split("## Output contract")[1]
PY

# --json: one object, its hash over system, a NUL, user; the same from
# another process
expect_json 0 kb prompt --json --device-info "$DEV" gelu
j1=$out
python3 - "$j1" <<'PY' || fail "--json: $(printf '%s' "$j1" | cut -c1-300)"
import hashlib, json, sys
j = json.loads(sys.argv[1])
assert sorted(j) == ["cites", "hash", "system", "tokens", "user"], sorted(j)
assert j["hash"] == hashlib.sha256(j["system"].encode() + b"\0" + j["user"].encode()).hexdigest()
assert j["tokens"] == (len((j["system"] + j["user"]).encode()) + 2) // 3 <= 12000
assert j["cites"] and j["cites"][0]["kind"] == "skill" and j["cites"][0]["skill"] == "vectorized-global-access"
for c in j["cites"]:
    assert sorted(c) == ["chunk_id", "heading", "kind", "skill", "source", "title", "url"], sorted(c)
    assert c["chunk_id"] > 0 and c["url"] in j["user"]
    assert (c["kind"] == "skill") == bool(c["skill"])
PY
expect_json 0 kb prompt --json --device-info "$DEV" gelu
[ "$out" = "$j1" ] || fail "two processes, two prompts"
# the text form is the same prompt
[ "$(json_get "$j1" "j['user']")" = "$(printf '%s\n' "$text" | sed '1,/^=== user ===$/d')" ] ||
    fail "the text and --json prompts differ"

# the budget: passages are cut, whole, the task never
expect_json 0 kb prompt --json --budget-tokens 2500 --device-info "$DEV" gemm_bf16
small=$out
expect_json 0 kb prompt --json --budget-tokens 200000 --device-info "$DEV" gemm_bf16
python3 - "$small" "$out" <<'PY' || fail "budget"
import json, re, sys
s, b = (json.loads(a) for a in sys.argv[1:3])
assert s["tokens"] <= 2500 and len(s["cites"]) < len(b["cites"]), (s["tokens"], len(s["cites"]), len(b["cites"]))
strip = lambda u: re.split(r"\n### \[\d+\] ", u.split("## Retrieved context")[1].split("\n## ")[0])[1:]
big = set(strip(b["user"]))
assert all(p in big for p in strip(s["user"])), "a passage cut short"
assert s["user"].split("## Retrieved context")[0] == b["user"].split("## Retrieved context")[0]
PY
expect_rc 2 kb prompt --budget-tokens 1000 --device-info "$DEV" gemm_bf16
contains "$out" "a budget of 1000 tokens is too small for task 'gemm_bf16'"
expect_rc 2 kb prompt --budget-tokens 999 gelu
contains "$out" "--budget-tokens wants a whole number from 1000 to 200000, not '999'"

# the last attempts and a kernel to refine, each in its section
printf 'gelu.cu: incorrect: y[1000002] = nan, reference 0.5\n' >"$KB_TMP/feedback.txt"
expect_json 0 kb prompt --device-info "$DEV" --feedback "$KB_TMP/feedback.txt" \
    --parent corpus/tasks/gelu/candidates/vec4.cu gelu
python3 - "$out" <<'PY' || fail "--feedback, --parent"
import sys
u = sys.argv[1]
c, f, k, o = (u.find(h) for h in ("## Retrieved context", "## Last attempts", "## Kernel to refine", "## Output contract"))
assert 0 < c < f < k < o, (c, f, k, o)
assert "y[1000002] = nan" in u[f:k] and "__global__" in u[k:o]
PY

# the device: a file, else kb-verify's (none without a GPU)
printf 'not json\n' >"$KB_TMP/bad.json"
expect_rc 1 kb prompt --device-info "$KB_TMP/bad.json" gelu
contains "$out" "is not a JSON object"
expect_rc 1 kb prompt --device-info "$KB_TMP/none.json" gelu
contains "$out" "none.json"
KB_VERIFY="$KB_TMP/no-kb-verify" expect_json 0 kb prompt gelu
contains "$out" "Unknown device"
if [ -x "$KB_BUILD/kb-verify" ] && "$KB_BUILD/kb-verify" --device-info --json >"$KB_TMP/dev.json" 2>/dev/null; then
    expect_json 0 kb prompt gelu
    contains "$out" "$(json_get "$(cat "$KB_TMP/dev.json")" "j['name']"): compute capability"
fi

# tasks: by name, as kb verify finds them; --tasks DIR; a bad name
expect_rc 1 kb prompt nope
contains "$out" "no task 'nope' (a directory with task.json): looked in"
mkdir -p "$KB_TMP/tasks" && cp -R corpus/tasks/histogram "$KB_TMP/tasks/hist2"
expect_json 0 kb prompt --tasks "$KB_TMP/tasks" --device-info "$DEV" hist2
contains "$out" 'extern "C" __global__ void hist_zero(const unsigned int *x, unsigned int *bins, int n)'
contains "$out" "- histogram: grid (ceil_div(N,256) = "
expect_rc 1 kb prompt --tasks "$KB_TMP/tasks" gelu
contains "$out" "no task"
expect_rc 2 kb prompt
contains "$out" "need TASK"
expect_rc 2 kb prompt gelu softmax
expect_rc 2 kb prompt --bogus gelu
contains "$out" "unknown option '--bogus'"
expect_rc 0 kb prompt --help
contains "$out" "--budget-tokens N"

# no KB: the prompt without retrieval, said on stderr
out=$(KB_DIR="$KB_TMP/none" "$KB_BIN" prompt --device-info "$DEV" gelu 2>"$KB_TMP/n.err") ||
    fail "kb prompt without a KB: $(cat "$KB_TMP/n.err")"
contains "$out" "(nothing retrieved: no KB)"
contains "$(cat "$KB_TMP/n.err")" "no retrieved context"

# kb serve: GET /v1/task and POST /v1/prompt are the tools'
start_server --threads 1
expect_status 200 GET "/v1/task?task=gelu"
python3 - "$body" <<'PY' || fail "/v1/task: $body"
import json, sys
t = json.loads(sys.argv[1])
assert t["name"] == "gelu" and t["kernels"] == ["gelu"] and t["target_shape"] == {"name": "target", "dims": {"N": 67108864}}
assert t["tolerance"]["rtol"] == "1e-05" and "erff" in t["reference"] and "odd" not in json.dumps(t)
PY
expect_status 404 GET "/v1/task?task=nope"
expect_status 404 GET "/v1/task?task=../etc"
expect_status 200 POST /v1/prompt -H 'Content-Type: application/json' -d '{"task":"softmax","budget_tokens":4000}'
python3 - "$body" <<'PY' || fail "/v1/prompt: $(printf '%s' "$body" | cut -c1-300)"
import json, sys
p = json.loads(sys.argv[1])
assert p["tokens"] <= 4000 and "## Task\n" in p["user"] and p["cites"]
PY
stop_server
echo ok
