/* test_generate.c - the loop's pieces that need no server (generator/gen.h,
 * "generate.c", "writeback.c"): the feedback made from kb-verify results
 * (a recorded H200 result with its timings and roofline floor, a failing
 * check's first mismatch, a compile error's log trimmed and its path
 * hidden, a reply without a kernel), the strategies' names, and the credit
 * read from runs' summaries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "generator/gen.h"

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

/* The recorded H200 result of task's first candidate in the skills
 * fixture, parsed. */
static void recorded(const char *task, kb_verify_result *r)
{
    char *path = kb_path_join(tu_top(), "tests/fixtures/skills/h200-results.jsonl");
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *line = NULL;
    size_t cap = 0;
    int found = 0;
    while (!found && getline(&line, &cap, f) > 0) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *t = cJSON_GetObjectItem(j, "task");
        found = cJSON_IsString(t) && strcmp(t->valuestring, task) == 0;
        cJSON_Delete(j);
    }
    assert_true(found);
    kb_err err;
    kb_err_clear(&err);
    kb_verify_result_init(r);
    assert_int_equal(kb_verify_result_parse(line, r, &err), KB_OK);
    free(line);
    fclose(f);
    free(path);
}

static char *feedback(const char *label, const kb_extracted *x, const kb_verify_result *r)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    assert_int_equal(kb_gen_feedback(label, x, r, &b), KB_OK);
    return kb_buf_detach(&b);
}

static void test_feedback_timed(void **state)
{
    (void)state;
    kb_verify_result r;
    recorded("transpose", &r);
    kb_extracted x = { .status = KB_EXTRACT_OK };
    char *f = feedback("attempt r0s0 (round 1, sample 1)", &x, &r);
    assert_non_null(strstr(f, "### attempt r0s0 (round 1, sample 1): faster\n"));
    assert_non_null(strstr(f, "reason: correct on every check"));
    assert_non_null(strstr(f, "kernel transpose_tile: "));
    assert_non_null(strstr(f, " registers, "));
    assert_non_null(strstr(f, "spills 0 B stored / 0 B loaded"));
    assert_non_null(strstr(f, "timings:\n  target: candidate 0.1525 ms"));
    assert_non_null(strstr(f, "reference 0.9824 ms: 6.44x"));
    assert_non_null(strstr(f, "roofline floor 0.1115 ms: the candidate is at 73% of the roofline"));
    assert_null(strstr(f, "failing checks"));
    /* a clean compile's ptxas log says what the kernel line says */
    assert_non_null(strstr(r.compile.log, "ptxas info"));
    assert_null(strstr(f, "compile log"));
    assert_null(strstr(f, "ptxas"));
    free(f);
    /* its warnings alone are kept */
    char *log = r.compile.log;
    r.compile.log = "kernel.cu(3): warning #177-D: variable \"v\" was declared but never "
                    "referenced\nptxas info    : Used 12 registers\n";
    f = feedback("attempt r0s1", &x, &r);
    assert_non_null(strstr(f, "compile log (NVRTC):\n  kernel.cu(3): warning #177-D"));
    assert_null(strstr(f, "Used 12 registers"));
    r.compile.log = log;
    free(f);
    kb_verify_result_release(&r);
}

static void test_feedback_incorrect(void **state)
{
    (void)state;
    /* kb-verify's result shape for a failing check (docs/formats.md) */
    const char *line =
        "{\"kb_verify\":1,\"task\":\"gelu\",\"candidate\":\"c.cu\",\"verdict\":\"incorrect\","
        "\"reason\":\"'y' differs from the reference on shape 'odd'\","
        "\"compile\":{\"ok\":true,\"arch\":\"sm_90\",\"log\":\"\",\"kernels\":[{\"name\":\"gelu\","
        "\"registers\":12,\"shared_static_bytes\":0,\"local_bytes\":0}]},"
        "\"checks\":["
        "{\"shape\":\"target\",\"poison\":\"nan\",\"inputs\":\"fresh\",\"outputs\":[{\"name\":\"y\","
        "\"mismatches\":0}],\"ok\":true},"
        "{\"shape\":\"odd\",\"poison\":\"nan\",\"inputs\":\"fresh\",\"outputs\":[{\"name\":\"y\","
        "\"mismatches\":3,\"nonfinite\":3,\"first_bad\":996,\"candidate_at_first_bad\":null,"
        "\"reference_at_first_bad\":0.84}],\"ok\":false},"
        "{\"shape\":\"odd\",\"poison\":\"sentinel\",\"inputs\":\"fresh\",\"outputs\":[{\"name\":\"y\","
        "\"mismatches\":3,\"first_bad\":996}],\"ok\":false},"
        "{\"shape\":\"tiny\",\"poison\":\"primed\",\"inputs\":\"fresh\",\"outputs\":[{\"name\":\"y\","
        "\"mismatches\":1,\"first_bad\":0,\"candidate_at_first_bad\":1.5,"
        "\"reference_at_first_bad\":2.5,\"stale\":true}],\"inputs_unchanged\":false,\"ok\":false}]}";
    kb_verify_result r;
    kb_verify_result_init(&r);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_verify_result_parse(line, &r, &err), KB_OK);
    kb_extracted x = { .status = KB_EXTRACT_OK };
    char *f = feedback("attempt r1s0", &x, &r);
    assert_non_null(strstr(f, "### attempt r1s0: incorrect\n"));
    assert_non_null(strstr(f, "kernel gelu: 12 registers"));
    assert_non_null(strstr(f, "failing checks (first per shape):\n"));
    assert_non_null(strstr(f, "shape 'odd', poison nan, inputs fresh; output 'y': 3 mismatches, "
                               "3 non-finite, first at index 996"));
    assert_non_null(strstr(f, "candidate non-finite, reference 0.84"));
    /* one line per failing shape: the second 'odd' check is not repeated */
    assert_null(strstr(f, "poison sentinel"));
    assert_non_null(strstr(f, "shape 'tiny', poison primed"));
    assert_non_null(strstr(f, "candidate 1.5, reference 2.5 (a stale result)"));
    assert_non_null(strstr(f, "the kernel changed an input"));
    assert_null(strstr(f, "shape 'target'"));
    assert_null(strstr(f, "timings:"));
    free(f);
    kb_verify_result_release(&r);
}

static void test_feedback_compile_error(void **state)
{
    (void)state;
    /* a long log: its error lines kept, the candidate's path hidden */
    kb_buf log;
    kb_buf_init(&log, 0);
    for (int i = 0; i < 60; i++)
        assert_int_equal(kb_buf_printf(&log, "/tmp/run/kernels/r0s0.cu(%d): warning #177-D: "
                                       "variable \"v%d\" was declared but never referenced\n",
                                       i + 1, i), KB_OK);
    assert_int_equal(kb_buf_puts(&log, "/tmp/run/kernels/r0s0.cu(70): error: identifier "
                                 "\"tid\" is undefined\n1 error detected in the compilation "
                                 "of \"/tmp/run/kernels/r0s0.cu\".\n"), KB_OK);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "task", "gelu");
    cJSON_AddStringToObject(j, "candidate", "/tmp/run/kernels/r0s0.cu");
    cJSON_AddStringToObject(j, "verdict", "compile_error");
    cJSON_AddStringToObject(j, "reason", "NVRTC could not compile the candidate");
    cJSON *c = cJSON_AddObjectToObject(j, "compile");
    cJSON_AddBoolToObject(c, "ok", 0);
    cJSON_AddStringToObject(c, "log", log.data);
    char *text = cJSON_PrintUnformatted(j);
    kb_verify_result r;
    kb_verify_result_init(&r);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_verify_result_parse(text, &r, &err), KB_OK);
    kb_extracted x = { .status = KB_EXTRACT_OK };
    char *f = feedback("attempt r0s0", &x, &r);
    assert_non_null(strstr(f, ": compile_error\n"));
    assert_non_null(strstr(f, "compile log (NVRTC):\n  kernel.cu(70): error: identifier \"tid\" "
                               "is undefined\n"));
    assert_non_null(strstr(f, "of \"kernel.cu\"."));
    assert_null(strstr(f, "/tmp/run"));
    assert_null(strstr(f, "warning #177-D"));   /* cut to the errors */
    assert_true(strlen(f) < 3000);
    free(f);
    kb_verify_result_release(&r);
    free(text);
    cJSON_Delete(j);
    kb_buf_release(&log);
}

static void test_feedback_no_kernel(void **state)
{
    (void)state;
    kb_extracted x;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_gen_extract("I cannot help with that.", "gelu", &x, &err), KB_OK);
    char *f = feedback("attempt r2s1", &x, NULL);
    assert_non_null(strstr(f, "### attempt r2s1: no code\nyour reply holds no code"));
    free(f);
    kb_extracted_release(&x);
}

static void test_strategy(void **state)
{
    (void)state;
    kb_gen_strategy s;
    assert_int_equal(kb_gen_strategy_parse("population", &s), 0);
    assert_int_equal(s, KB_GEN_POPULATION);
    assert_string_equal(kb_gen_strategy_name(s), "population");
    assert_int_equal(kb_gen_strategy_parse("refine", &s), 0);
    assert_int_equal(s, KB_GEN_REFINE);
    assert_int_equal(kb_gen_strategy_parse("greedy", &s), -1);
    assert_int_equal(kb_gen_strategy_parse(NULL, &s), -1);
    kb_gen_opts o;
    kb_gen_opts_init(&o);
    assert_int_equal(o.samples, 4);
    assert_int_equal(o.rounds, 3);
    assert_int_equal(o.strategy, KB_GEN_REFINE);
}

static void write_summary(const char *runs, const char *id, const char *json)
{
    char *d = kb_path_join(runs, id);
    assert_int_equal(mkdir(d, 0755), 0);
    char *p = kb_path_join(d, "summary.json");
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(json, f);
    fclose(f);
    free(p);
    free(d);
}

static void test_credit(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/kb-test-credit-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    kb_gen_credit *c = NULL;
    size_t n = 9;
    kb_err err;
    kb_err_clear(&err);
    char *none = kb_path_join(tmpl, "none");
    assert_int_equal(kb_gen_credit_load(none, &c, &n, &err), KB_OK);
    assert_int_equal(n, 0);
    write_summary(tmpl, "a", "{\"credit\":{\"winner\":\"r0s1\",\"used\":[\"x\",\"y\"],"
                             "\"won\":[\"x\"]}}");
    write_summary(tmpl, "b", "{\"credit\":{\"winner\":null,\"used\":[\"x\"],\"won\":[]}}");
    /* a replay's credit is its run's: not counted again */
    write_summary(tmpl, "c", "{\"credit\":{\"used\":[\"x\"],\"won\":[\"x\"]},"
                             "\"replay\":{\"of\":\"a\"}}");
    write_summary(tmpl, "d", "not json");
    assert_int_equal(kb_gen_credit_load(tmpl, &c, &n, &err), KB_OK);
    assert_int_equal(n, 2);
    long xu = -1, xw = -1, yu = -1, yw = -1;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(c[i].skill, "x") == 0)
            xu = c[i].used, xw = c[i].won;
        if (strcmp(c[i].skill, "y") == 0)
            yu = c[i].used, yw = c[i].won;
    }
    assert_int_equal(xu, 2);
    assert_int_equal(xw, 1);
    assert_int_equal(yu, 1);
    assert_int_equal(yw, 0);
    kb_gen_credit_free(c, n);
    tu_rmtree(tmpl);
    free(none);
}

/* Write-backs racing for one name (issue 28 item 5): two processes write
 * the same win back ten times each into one library; the name each picks
 * is free when picked and taken by the other before its rename. Every
 * write-back succeeds under a name of its own: 20 folders, whole. And an
 * LLM's control bytes reach SKILL.md escaped. */
static void test_writeback_race(void **state)
{
    (void)state;
    kb_verify_result r;
    recorded("transpose", &r);
    char *lib = tu_tmpdir("race");
    char *task = kb_path_join(tu_top(), "corpus/tasks/transpose");
    kb_buf src;
    kb_buf_init(&src, 0);
    char *cu = kb_path_join(tu_top(), "corpus/tasks/transpose/candidates/smem_tile.cu");
    tu_read_file(cu, 0, &src);
    kb_gen_writeback w = {
        .skills_dir = lib, .task_dir = task, .source = src.data, .result = &r,
        .run_id = "race", .model = "test",
        .writeup = "NAME: padded tile\nDESCRIPTION: pads the \x1b[31mtile\nRED\n"
                   "## When to apply\nA transpose \x1b]0;owned\x07 of any size.\n"
                   "## Technique\nPad.\r\nThen store.\n## Pitfalls\nNone.\n",
    };
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        if ((kids[k] = fork()) == 0) {
            int failed = 0;
            for (int i = 0; i < 10; i++) {
                char *name = NULL, *dir = NULL;
                kb_err err;
                kb_err_clear(&err);
                if (kb_gen_write_skill(&w, &name, &dir, &err) != KB_OK) {
                    fprintf(stderr, "write-back: %s\n", err.msg);
                    failed++;
                }
                free(name);
                free(dir);
            }
            _exit(failed);
        }
        assert_true(kids[k] > 0);
    }
    for (int k = 0; k < 2; k++) {
        int status = 0;
        assert_int_equal(waitpid(kids[k], &status, 0), kids[k]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    DIR *d = opendir(lib);
    assert_non_null(d);
    int folders = 0, hidden = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') {
            hidden += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
            continue;
        }
        folders++;
        char *p = kb_path_join(lib, e->d_name);
        char *f = kb_path_join(p, "SKILL.md");
        kb_buf b;
        kb_buf_init(&b, 0);
        tu_read_file(f, 0, &b);
        assert_null(strchr(b.data, 0x1b));            /* escaped, not raw */
        assert_null(strchr(b.data, '\r'));
        assert_non_null(strstr(b.data, "\\x1b]0;owned\\x07"));
        kb_buf_release(&b);
        free(f);
        free(p);
    }
    closedir(d);
    assert_int_equal(folders, 20);
    assert_int_equal(hidden, 0);                      /* no temp folder left */
    tu_rmtree(lib);
    free(lib);
    free(task);
    free(cu);
    kb_buf_release(&src);
    kb_verify_result_release(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_feedback_timed),
        cmocka_unit_test(test_feedback_incorrect),
        cmocka_unit_test(test_feedback_compile_error),
        cmocka_unit_test(test_feedback_no_kernel),
        cmocka_unit_test(test_strategy),
        cmocka_unit_test(test_credit),
        cmocka_unit_test(test_writeback_race),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
