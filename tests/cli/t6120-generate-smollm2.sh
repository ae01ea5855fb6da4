#!/usr/bin/env bash
# tier: full
# kb generate against a real model: llama.cpp's server (the xllamacpp CPU
# wheel in build/venv) serving SmolLM2-135M-Instruct, far too small to write
# a good kernel, with kb-verify --compile-only. The run goes through every
# round, both APIs (llama.cpp answers OpenAI's /v1/chat/completions and
# Anthropic's /v1/messages); what each reply came to - no code, no kernel,
# host code, NVRTC's compile error - is fed back for real in the next
# round's prompt; the transcript holds the model's replies; no skill is
# written; the replay reaches the same verdicts with the server gone.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/gen-lib.sh"
need_kb_verify
cd "$KB_TOP"
SK="$KB_TMP/skills"
mkdir -p "$SK"
start_smollm2 --ctx 4096
URL=$SMOL_URL

# the run's rounds, each prompt carrying what the last round's replies came to
check_run() {   # SUMMARY ROUNDS SAMPLES API
    local s=$1 d
    [ "$(json_get "$s" "j['rounds_run'], j['requests'], j['stop'], j['model'], j['skill']")" = \
      "$2 $(($2 * $3)) rounds smollm2 None" ] || fail "$4: $s"
    d=$(run_dir "$s")
    [ "$(events "$d" run "e['api']")" = "$4" ] || fail "$4: the run event"
    # the model answered every request, and its words are in the transcript
    [ "$(events "$d" reply "e['ok'] and len(e['text']) > 0" | sort -u)" = True ] ||
        fail "$4: a request failed: $(events "$d" reply "e['key'], e['error']")"
    [ "$(events "$d" request "e['body']['model']" | sort -u)" = smollm2 ] || fail "$4: request bodies"
    # every attempt of round r is told of in a prompt of round r+1, in the
    # words of its outcome; a compile error with NVRTC's own log
    python3 - "$d" "$2" <<'EOF' || fail "$4: feedback"
import json, sys
d, rounds = sys.argv[1], int(sys.argv[2])
ev = [json.loads(l) for l in open(d + "/transcript.jsonl")]
prompts = [e["user"] for e in ev if e["event"] == "prompt"]
cands = [e for e in ev if e["event"] == "candidate"]
verdicts = {e["key"]: e["verdict"] for e in ev if e["event"] == "verdict"}
later = "\n".join(prompts[1:])
words = {"no_code": "no code", "no_kernel": "no kernel", "host_code": "host code",
         "no_reply": "no reply"}
for c in cands:
    r = int(c["key"][1:].split("s")[0])
    if r == rounds - 1:
        continue
    head = "### attempt %s (round %d, sample %d)" % (c["key"], r + 1, int(c["key"].split("s")[1]) + 1)
    head += (", the same kernel as %s: " % c["duplicate_of"]) if c.get("duplicate_of") else ": "
    if head not in later:
        sys.exit("no feedback on %s" % c["key"])
    tail = later.split(head, 1)[1]
    want = words.get(c["status"]) or verdicts.get(c["key"]) or verdicts.get(c.get("duplicate_of"))
    if not tail.startswith(want):
        sys.exit("%s: fed back as %r, not %r" % (c["key"], tail[:40], want))
    if want == "compile_error" and "compile log (NVRTC):" not in tail.split("###")[0]:
        sys.exit("%s: a compile error without its log" % c["key"])
print("ok")
EOF
}

export KB_LLM_URL="$URL/v1/chat/completions" KB_LLM_MODEL=smollm2 KB_LLM_API=openai
out=$(kb generate gelu --compile-only --samples 2 --rounds 2 --prompt-tokens 2400 --max-tokens 96 \
      --skills "$SK" --json 2>"$KB_TMP/gen.err"); rc=$?
[ $rc -le 1 ] || fail "kb generate exited $rc: $(cat "$KB_TMP/gen.err")"
S1=$out
check_run "$S1" 2 2 openai
export KB_LLM_URL="$URL/v1/messages" KB_LLM_API=anthropic
out=$(kb generate gelu --compile-only --samples 1 --rounds 2 --prompt-tokens 2400 --max-tokens 96 \
      --skills "$SK" --json 2>"$KB_TMP/gen.err"); rc=$?
[ $rc -le 1 ] || fail "kb generate (anthropic) exited $rc: $(cat "$KB_TMP/gen.err")"
check_run "$out" 2 1 anthropic
[ -z "$(ls "$SK")" ] || fail "a skill was written: $(ls "$SK")"

# the replay: the server gone, the same verdicts
kill "$LLM_PID"; wait "$LLM_PID" 2>/dev/null; LLM_PID=
expect_json "$(json_get "$S1" "0 if j['verdicts'].get('compiled') else 1")" \
    kb generate gelu --replay "$(json_get "$S1" "j['id']")" --json
[ "$(json_get "$out" "j['replay']['same_verdicts'], j['requests']")" = "True 4" ] || fail "replay: $out"
