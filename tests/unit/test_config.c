/* test_config.c - kb_config_load: the defaults, every variable, empty
 * values, bad numbers named in the error, and the --help list. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kb/kb.h"
#include "kb/kb_int.h"

static const char *const names[] = {
    "KB_DIR", "KB_MANIFEST", "KB_MIRROR", "KB_MODEL_DIR", "KB_THREADS",
    "KB_EMBED_URL", "KB_EMBED_MODEL", "KB_EMBED_API_KEY", "KB_EMBED_TIMEOUT_MS", "KB_EMBED_DEVICE",
    "KB_RERANK", "KB_RERANK_TIMEOUT_MS", "KB_VERIFY", "KB_LLM_URL", "KB_LLM_MODEL", "KB_LLM_API_KEY", "KB_LLM_API", "KB_LLM_TIMEOUT_MS",
    "NO_COLOR",
};
static const size_t nnames = sizeof names / sizeof names[0];

/* A clean environment: none of kb's variables, a known home. */
static int clean(void **state)
{
    for (size_t i = 0; i < nnames; i++)
        unsetenv(names[i]);
    unsetenv("XDG_DATA_HOME");
    setenv("HOME", "/home/tester", 1);
    return 0;
}

static void test_defaults(void **state)
{
    kb_config c;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_config_load(&c, &err), KB_OK);
    assert_string_equal(c.kb_dir, "/home/tester/.local/share/kb");
    assert_string_equal(c.model_dir, "/home/tester/.cache/kb/models/all-MiniLM-L6-v2");
    assert_null(c.manifest);
    assert_null(c.mirror);
    assert_int_equal(c.threads, 0);
    assert_null(c.embed_url);
    assert_null(c.embed_model);
    assert_null(c.embed_api_key);
    assert_int_equal(c.embed_timeout_ms, 60000);
    assert_null(c.verify);
    assert_null(c.llm_url);
    assert_null(c.llm_model);
    assert_null(c.llm_api_key);
    assert_null(c.llm_api);
    assert_int_equal(c.llm_timeout_ms, 300000);
    assert_null(c.rerank);
    assert_int_equal(c.rerank_timeout_ms, 30000);
    assert_int_equal(c.no_color, 0);
    kb_config_release(&c);
    assert_null(c.kb_dir);
    assert_null(c.model_dir);

    /* XDG_DATA_HOME moves the KB; kb_store_default_dir follows the rule */
    setenv("XDG_DATA_HOME", "/data", 1);
    assert_int_equal(kb_config_load(&c, &err), KB_OK);
    assert_string_equal(c.kb_dir, "/data/kb");
    char *d = kb_store_default_dir(NULL);
    assert_string_equal(d, "/data/kb");
    free(d);
    d = kb_store_default_dir("/given");
    assert_string_equal(d, "/given");
    free(d);
    kb_config_release(&c);

    /* kb_config_init: the same numbers, no directories, no environment */
    kb_config_init(&c);
    assert_null(c.kb_dir);
    assert_null(c.model_dir);
    assert_int_equal(c.embed_timeout_ms, 60000);
    kb_config_release(&c);
}

static void test_each_variable(void **state)
{
    setenv("KB_DIR", "/kb", 1);
    setenv("XDG_DATA_HOME", "/data", 1);       /* KB_DIR wins */
    setenv("KB_MANIFEST", "m.json", 1);
    setenv("KB_MIRROR", "/mirror", 1);
    setenv("KB_MODEL_DIR", "/models/minilm", 1);
    setenv("KB_THREADS", "3", 1);
    setenv("KB_EMBED_URL", "http://127.0.0.1:1/v1/embeddings", 1);
    setenv("KB_EMBED_MODEL", "nomic", 1);
    setenv("KB_EMBED_API_KEY", "embed-key", 1);
    setenv("KB_EMBED_TIMEOUT_MS", "1500", 1);
    setenv("KB_VERIFY", "/opt/kb-verify", 1);
    setenv("KB_LLM_URL", "http://127.0.0.1:2/v1/messages", 1);
    setenv("KB_LLM_MODEL", "claude", 1);
    setenv("KB_LLM_API_KEY", "llm-key", 1);
    setenv("KB_LLM_API", "anthropic", 1);
    setenv("KB_LLM_TIMEOUT_MS", "2500", 1);
    setenv("KB_RERANK", "llm", 1);
    setenv("KB_RERANK_TIMEOUT_MS", "4000", 1);
    setenv("NO_COLOR", "1", 1);
    kb_config c;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_config_load(&c, &err), KB_OK);
    assert_string_equal(c.kb_dir, "/kb");
    assert_string_equal(c.manifest, "m.json");
    assert_string_equal(c.mirror, "/mirror");
    assert_string_equal(c.model_dir, "/models/minilm");
    assert_int_equal(c.threads, 3);
    assert_string_equal(c.embed_url, "http://127.0.0.1:1/v1/embeddings");
    assert_string_equal(c.embed_model, "nomic");
    assert_string_equal(c.embed_api_key, "embed-key");
    assert_int_equal(c.embed_timeout_ms, 1500);
    assert_string_equal(c.verify, "/opt/kb-verify");
    assert_string_equal(c.llm_url, "http://127.0.0.1:2/v1/messages");
    assert_string_equal(c.llm_model, "claude");
    assert_string_equal(c.llm_api_key, "llm-key");
    assert_string_equal(c.llm_api, "anthropic");
    assert_int_equal(c.llm_timeout_ms, 2500);
    assert_string_equal(c.rerank, "llm");
    assert_int_equal(c.rerank_timeout_ms, 4000);
    assert_int_equal(c.no_color, 1);
    char *d = kb_config_env_kb_dir();
    assert_string_equal(d, "/kb");
    free(d);
    kb_config_release(&c);

    /* the ends of the ranges */
    setenv("KB_THREADS", "64", 1);
    setenv("KB_EMBED_TIMEOUT_MS", "86400000", 1);
    assert_int_equal(kb_config_load(&c, &err), KB_OK);
    assert_int_equal(c.threads, 64);
    assert_int_equal(c.embed_timeout_ms, 86400000L);
    kb_config_release(&c);
}

/* Set but empty is unset, except KB_MODEL_DIR: empty means no model. */
static void test_empty_values(void **state)
{
    for (size_t i = 0; i < nnames; i++)
        setenv(names[i], "", 1);
    kb_config c;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_config_load(&c, &err), KB_OK);
    assert_string_equal(c.kb_dir, "/home/tester/.local/share/kb");
    assert_string_equal(c.model_dir, "");
    assert_null(c.manifest);
    assert_null(c.mirror);
    assert_int_equal(c.threads, 0);
    assert_null(c.embed_url);
    assert_null(c.embed_model);
    assert_null(c.embed_api_key);
    assert_int_equal(c.embed_timeout_ms, 60000);
    assert_null(c.verify);
    assert_null(c.llm_api_key);
    assert_int_equal(c.no_color, 0);
    kb_config_release(&c);

    /* without HOME the KB dir is relative to here, as it always was */
    unsetenv("HOME");
    assert_int_equal(kb_config_load(&c, &err), KB_OK);
    assert_string_equal(c.kb_dir, "./.local/share/kb");
    kb_config_release(&c);
}

static void expect_bad(const char *name, const char *value, const char *want)
{
    clean(NULL);
    setenv("KB_MIRROR", "/mirror", 1);   /* loaded before the bad one */
    setenv(name, value, 1);
    kb_config c;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_config_load(&c, &err), KB_ERR_USAGE);
    assert_string_equal(err.msg, want);
    assert_null(c.mirror);               /* nothing left to free */
    assert_null(c.kb_dir);
    kb_config_release(&c);
}

static void test_bad_values(void **state)
{
    expect_bad("KB_THREADS", "many",
               "bad KB_THREADS 'many': expected a whole number from 1 to 64");
    expect_bad("KB_THREADS", "0",
               "bad KB_THREADS '0': expected a whole number from 1 to 64");
    expect_bad("KB_THREADS", "65",
               "bad KB_THREADS '65': expected a whole number from 1 to 64");
    expect_bad("KB_THREADS", "4 ",
               "bad KB_THREADS '4 ': expected a whole number from 1 to 64");
    expect_bad("KB_EMBED_TIMEOUT_MS", "10s",
               "bad KB_EMBED_TIMEOUT_MS '10s': expected a whole number from 1 to 86400000");
    expect_bad("KB_EMBED_TIMEOUT_MS", "-1",
               "bad KB_EMBED_TIMEOUT_MS '-1': expected a whole number from 1 to 86400000");
    expect_bad("KB_EMBED_TIMEOUT_MS", "86400001",
               "bad KB_EMBED_TIMEOUT_MS '86400001': expected a whole number from 1 to 86400000");
    expect_bad("KB_LLM_TIMEOUT_MS", "0",
               "bad KB_LLM_TIMEOUT_MS '0': expected a whole number from 1 to 86400000");
}

/* --help lists every variable with its default, and never a value. */
static void test_help(void **state)
{
    setenv("KB_EMBED_API_KEY", "topsecret-embed", 1);
    setenv("KB_LLM_API_KEY", "topsecret-llm", 1);
    setenv("KB_DIR", "/my/kb/dir", 1);
    kb_buf b;
    kb_buf_init(&b, 0);
    assert_int_equal(kb_config_help(&b), KB_OK);
    for (size_t i = 0; i < nnames; i++) {
        char line[64];
        snprintf(line, sizeof line, "  %s ", names[i]);
        assert_non_null(strstr(b.data, line));
    }
    assert_non_null(strstr(b.data, "default: 60000"));
    assert_non_null(strstr(b.data, "openai or anthropic"));
    assert_non_null(strstr(b.data, "default: ~/.cache/kb/models/all-MiniLM-L6-v2"));
    assert_null(strstr(b.data, "topsecret"));
    assert_null(strstr(b.data, "/my/kb/dir"));
    kb_buf_release(&b);
}

/* Writes text as the config file under a fresh XDG_CONFIG_HOME. */
static void write_config(const char *text)
{
    char dir[] = "/tmp/kb-test-config-XXXXXX";
    assert_non_null(mkdtemp(dir));
    setenv("XDG_CONFIG_HOME", dir, 1);
    char path[128];
    snprintf(path, sizeof path, "%s/kb", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/kb/config", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The config file: KEY = value, comments, quotes; the environment wins;
 * a bad line or key named with the file and line; kb config's view. */
static void test_file(void **state)
{
    write_config("# kb's settings\n\nKB_THREADS = 3\n  KB_MIRROR=\"/srv/mirror\"\n"
                 "KB_LLM_API_KEY = sk-file-secret\nKB_EMBED_TIMEOUT_MS = 1500\n");
    setenv("KB_EMBED_TIMEOUT_MS", "2500", 1);
    kb_config c;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_config_load(&c, &err), KB_OK);
    assert_int_equal(c.file_found, 1);
    assert_int_equal(c.threads, 3);
    assert_string_equal(c.mirror, "/srv/mirror");
    assert_string_equal(c.llm_api_key, "sk-file-secret");
    assert_int_equal(c.embed_timeout_ms, 2500);      /* the environment's */
    kb_buf b;
    kb_buf_init(&b, 0);
    assert_int_equal(kb_config_show(&c, &b), KB_OK);
    assert_non_null(strstr(b.data, "KB_THREADS           3  (config file, line 3)"));
    assert_non_null(strstr(b.data, "KB_EMBED_TIMEOUT_MS  2500  (environment)"));
    assert_non_null(strstr(b.data, "KB_LLM_API_KEY       (set, not shown)"));
    assert_null(strstr(b.data, "sk-file-secret"));
    kb_buf_release(&b);
    kb_config_release(&c);
    unsetenv("KB_EMBED_TIMEOUT_MS");

    write_config("KB_THREADS = 2\nKB_THREAD = 4\n");
    kb_err_clear(&err);
    assert_int_equal(kb_config_load(&c, &err), KB_ERR_USAGE);
    assert_non_null(strstr(err.msg, "/kb/config:2: unknown setting 'KB_THREAD'"));
    write_config("KB_THREADS = many\n");
    kb_err_clear(&err);
    assert_int_equal(kb_config_load(&c, &err), KB_ERR_USAGE);
    if (!strstr(err.msg, "/kb/config:1: bad KB_THREADS 'many'"))
        fail_msg("%s", err.msg);
    write_config("just words\n");
    kb_err_clear(&err);
    assert_int_equal(kb_config_load(&c, &err), KB_ERR_USAGE);
    assert_non_null(strstr(err.msg, "/kb/config:1: expected 'KEY = value'"));
    unsetenv("XDG_CONFIG_HOME");
}

/* The default thread counts (KB_THREADS unset, kb serve's workers) follow
 * the CPUs kb may run on: pinned to one CPU (taskset -c N), one. */
static void test_cpu_count(void **state)
{
    (void)state;
    cpu_set_t all, one;
    assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
    assert_int_equal(kb_cpu_count(), CPU_COUNT(&all));
    int first = 0;
    while (!CPU_ISSET(first, &all))
        first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    assert_int_equal(kb_cpu_count(), 1);
    assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
    assert_int_equal(kb_cpu_count(), CPU_COUNT(&all));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_count),
        cmocka_unit_test_setup(test_defaults, clean),
        cmocka_unit_test_setup(test_each_variable, clean),
        cmocka_unit_test_setup(test_empty_values, clean),
        cmocka_unit_test_setup(test_bad_values, clean),
        cmocka_unit_test_setup(test_help, clean),
        cmocka_unit_test_setup(test_file, clean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
