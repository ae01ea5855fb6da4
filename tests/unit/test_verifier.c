/* test_verifier.c - the verifier library (verify/verify.h): the real
 * build/kb-verify as its child where no GPU is needed (compile-only,
 * compile errors, refused candidates, a missing task, one-shot and
 * --serve), fake children for the paths a GPU run rarely shows (killed at
 * the deadline, no result line, a crash, a sticky error's restart), a
 * missing kb-verify, and the parsing of result lines (parity with a
 * library included). Without
 * build/kb-verify (no CUDA toolkit) the real-child cases are skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "verify/verify.h"

static char top[2048], kv[4096], tmp[256];   /* top and tmp: room for what is appended */
static int have_kv;

/* top/rel into a static buffer of n (one of a few in turn) */
static const char *at(const char *rel)
{
    static char bufs[4][4096];
    static int k;
    char *b = bufs[k++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", top, rel);
    return b;
}

/* Writes an executable script tmp/name; returns its path (static). */
static const char *script(const char *name, const char *body)
{
    static char bufs[4][512];
    static int k;
    char *p = bufs[k++ % 4];
    snprintf(p, sizeof bufs[0], "%s/%s", tmp, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\n%s\n", body);
    fclose(f);
    assert_int_equal(chmod(p, 0755), 0);
    return p;
}

static kb_verifier *open_with(const char *path, int serve, int compile_only,
                              double timeout_s)
{
    kb_verifier_opts o;
    kb_verifier_opts_init(&o);
    o.kb_verify = path;
    o.serve = serve;
    o.compile_only = compile_only;
    if (timeout_s > 0)
        o.timeout_s = timeout_s;
    kb_verifier *v = NULL;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_verifier_open(&o, &v, &err), KB_OK);
    assert_non_null(v);
    return v;
}

/* Runs one candidate and checks the verdict and a piece of the reason. */
static void run_expect(kb_verifier *v, const char *task, const char *cand,
                       kb_verify_verdict want, const char *reason_part,
                       kb_verify_result *r)
{
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_verifier_run(v, task, cand, r, &err), KB_OK);
    assert_non_null(r->json);
    if (r->verdict != want || !strstr(r->reason, reason_part))
        fail_msg("%s: got %s (%s), wanted %s with '%s'", cand, r->verdict_name,
                 r->reason, kb_verify_verdict_name(want), reason_part);
    assert_string_equal(r->verdict_name, kb_verify_verdict_name(want));
}

/* ------------------------------------------------------------------ real child */

static void test_compile_only(void **state)
{
    (void)state;
    if (!have_kv)
        skip();
    kb_verify_result r;
    kb_verify_result_init(&r);
    /* one-shot, and through one --serve child (compile_only per request) */
    for (int serve = 0; serve < 2; serve++) {
        kb_verifier *v = open_with(kv, serve, 1, 0);
        const char *cand = at("corpus/tasks/gelu/candidates/vec4.cu");
        run_expect(v, at("corpus/tasks/gelu"), cand, KB_VERIFY_COMPILED,
                   "not run (--compile-only)", &r);
        assert_false(r.synthesised);
        assert_string_equal(r.task, "gelu");
        assert_string_equal(r.candidate, cand);
        assert_false(r.has_speedup);
        assert_false(r.has_library);
        assert_int_equal(r.ntimings, 0);
        assert_true(r.compile.present && r.compile.ok);
        assert_string_equal(r.compile.arch, "sm_90");
        assert_true(r.compile.nkernels >= 1);
        assert_string_equal(r.compile.kernels[0].name, "gelu_vec4");
        assert_true(r.compile.kernels[0].registers > 0);
        assert_false(kb_verify_verdict_ok(r.verdict));

        /* NVRTC's log comes with a compile error */
        run_expect(v, at("corpus/tasks/gelu"), at("tests/verify/adversarial/compile_error.cu"),
                   KB_VERIFY_COMPILE_ERROR, "NVRTC could not compile", &r);
        assert_true(r.compile.present);
        assert_false(r.compile.ok);
        assert_true(strlen(r.compile.log) > 0);
        /* a launch kernel it does not define, named with the ones it does */
        run_expect(v, at("corpus/tasks/histogram"), at("corpus/tasks/gelu/reference.cu"),
                   KB_VERIFY_COMPILE_ERROR, "the launch needs kernel 'hist_zero', "
                   "which the candidate does not define (it defines 'gelu')", &r);
        assert_true(r.compile.ok);
        kb_verifier_free(v);
    }
    kb_verify_result_release(&r);
}

/* Refusals come before any GPU work: the same with or without one. */
static void test_refused(void **state)
{
    (void)state;
    if (!have_kv)
        skip();
    kb_verify_result r;
    kb_verify_result_init(&r);
    for (int serve = 0; serve < 2; serve++) {
        kb_verifier *v = open_with(kv, serve, 0, 0);
        run_expect(v, at("corpus/tasks/gelu"), at("tests/verify/adversarial/globaltimer.cu"),
                   KB_VERIFY_REFUSED, "globaltimer", &r);
        assert_false(r.synthesised);
        assert_string_equal(r.task, "gelu");
        run_expect(v, at("corpus/tasks/gelu"), at("tests/verify/adversarial/device_malloc.cu"),
                   KB_VERIFY_REFUSED, "allocates memory on the device", &r);
        /* a task that is not there: kb-verify's error, the child lives on */
        run_expect(v, "/nonexistent/task", at("corpus/tasks/gelu/candidates/vec4.cu"),
                   KB_VERIFY_ERROR, "cannot open '/nonexistent/task/task.json'", &r);
        assert_false(r.synthesised);
        assert_string_equal(r.task, "/nonexistent/task");
        run_expect(v, at("corpus/tasks/gemm_bf16"), at("tests/verify/adversarial/tensormap_overreach.cu"),
                   KB_VERIFY_REFUSED, "kb-tensormap over 'A'", &r);
        kb_verifier_free(v);
    }
    kb_verify_result_release(&r);
}

/* ------------------------------------------------------------------ fake children */

static void test_missing_kb_verify(void **state)
{
    (void)state;
    kb_verify_result r;
    kb_verify_result_init(&r);
    for (int serve = 0; serve < 2; serve++) {
        kb_verifier *v = open_with("/nonexistent/kb-verify", serve, 0, 0);
        assert_string_equal(kb_verifier_path(v), "/nonexistent/kb-verify");
        run_expect(v, "corpus/tasks/gelu", "c.cu", KB_VERIFY_ERROR,
                   "cannot run '/nonexistent/kb-verify'", &r);
        assert_true(r.synthesised);
        assert_string_equal(r.task, "gelu");
        assert_string_equal(r.candidate, "c.cu");
        kb_verifier_free(v);
    }
    kb_verify_result_release(&r);
}

/* A child that hangs is killed at the deadline, sleeping grandchild and
 * all. */
static void test_timeout(void **state)
{
    (void)state;
    const char *hang = script("hang", "sleep 30");
    kb_verifier *v = open_with(hang, 0, 0, 0.5);
    assert_string_equal(kb_verifier_path(v), hang);
    kb_verify_result r;
    kb_verify_result_init(&r);
    double t0 = kb_now_ms();
    run_expect(v, "tasks/gelu", "c.cu", KB_VERIFY_TIMEOUT,
               "no result within 0.5 s: kb-verify was killed", &r);
    assert_true(kb_now_ms() - t0 < 5000);
    assert_true(r.synthesised);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(r.json, "verdict")),
                        "timeout");
    kb_verifier_free(v);

    /* a --serve child that reads the request and never answers */
    v = open_with(script("mute", "while read -r l; do sleep 30; done"), 1, 0, 0.5);
    t0 = kb_now_ms();
    run_expect(v, "tasks/gelu", "c.cu", KB_VERIFY_TIMEOUT, "was killed", &r);
    assert_true(kb_now_ms() - t0 < 5000);
    kb_verify_result_release(&r);
    kb_verifier_free(v);
}

/* Children that end without a result line. */
static void test_no_result(void **state)
{
    (void)state;
    kb_verify_result r;
    kb_verify_result_init(&r);
    struct { const char *body; kb_verify_verdict want; const char *why; } cases[] = {
        { "exit 0", KB_VERIFY_ERROR, "kb-verify ended without a result (exit 0)" },
        { "echo 'not a result'; exit 2", KB_VERIFY_ERROR, "without a result (exit 2)" },
        { "echo '{\"task\":\"gelu\"}'", KB_VERIFY_ERROR, "without a result (exit 0)" },
        { "kill -SEGV $$", KB_VERIFY_CRASH, "without a result (signal 11)" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kb_verifier *v = open_with(script("silent", cases[i].body), 0, 0, 10);
        run_expect(v, "tasks/gelu", "c.cu", cases[i].want, cases[i].why, &r);
        assert_true(r.synthesised);
        kb_verifier_free(v);
    }
    /* a --serve child that hangs up is a crash, whatever its status */
    kb_verifier *v = open_with(script("quits", "read -r l; exit 0"), 1, 0, 10);
    run_expect(v, "tasks/gelu", "c.cu", KB_VERIFY_CRASH,
               "kb-verify --serve ended without a result (exit 0)", &r);
    kb_verify_result_release(&r);
    kb_verifier_free(v);
}

/* One --serve child for many candidates, a new one after a sticky error;
 * a last line without a newline still counts. */
static void test_serve_restart(void **state)
{
    (void)state;
    char body[1024];
    snprintf(body, sizeof body,
             "[ \"$1\" = --serve ] || exit 9\n"
             "echo start >>'%s/starts'\n"
             "while read -r line; do\n"
             "  case \"$line\" in\n"
             "  *sticky*) echo '{\"task\":\"a\",\"verdict\":\"crash\",\"reason\":\"boom\",\"sticky_error\":true}'; exit 3 ;;\n"
             "  *last*) printf '{\"task\":\"a\",\"verdict\":\"faster\",\"speedup_geomean\":2.5,\"reason\":\"ok\"}'; exit 0 ;;\n"
             "  *) echo '{\"task\":\"a\",\"verdict\":\"correct\",\"speedup_geomean\":1.2,\"reason\":\"ok\",\"wall_ms\":3}' ;;\n"
             "  esac\n"
             "done", tmp);
    kb_verifier *v = open_with(script("serve", body), 1, 0, 10);
    kb_verify_result r;
    kb_verify_result_init(&r);
    run_expect(v, "s/a", "one.cu", KB_VERIFY_CORRECT, "ok", &r);
    assert_true(r.has_speedup && r.speedup_geomean == 1.2);
    assert_true(r.has_wall && r.wall_ms == 3);
    assert_false(r.sticky_error);
    run_expect(v, "s/a", "sticky.cu", KB_VERIFY_CRASH, "boom", &r);
    assert_true(r.sticky_error);
    assert_false(r.synthesised);
    run_expect(v, "s/a", "two.cu", KB_VERIFY_CORRECT, "ok", &r);
    run_expect(v, "s/a", "last.cu", KB_VERIFY_FASTER, "ok", &r);
    assert_true(kb_verify_verdict_ok(r.verdict));
    kb_verify_result_release(&r);
    kb_verifier_free(v);
    char starts[512];
    snprintf(starts, sizeof starts, "%s/starts", tmp);
    FILE *f = fopen(starts, "r");
    assert_non_null(f);
    int n = 0, c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    assert_int_equal(n, 2);   /* started once, restarted once */
}

/* ------------------------------------------------------------------ no child */

static void test_parse(void **state)
{
    (void)state;
    kb_verify_result r;
    kb_verify_result_init(&r);
    kb_err err;
    kb_err_clear(&err);
    const char *line =
        "{\"kb_verify\":1,\"task\":\"gelu\",\"candidate\":\"c.cu\","
        "\"compile\":{\"ok\":true,\"arch\":\"sm_90a\",\"ms\":12.5,\"cached\":false,"
        "\"log\":\"x\",\"kernels\":[{\"name\":\"k\",\"registers\":40,"
        "\"spill_store_bytes\":8,\"local_bytes\":16}]},"
        "\"timings\":[{\"shape\":\"target\",\"baseline\":\"reference\",\"runs\":50,"
        "\"candidate_ms\":{\"median\":0.5,\"ci95_lo\":0.4,\"ci95_hi\":0.6,\"min\":0.3},"
        "\"baseline_ms\":{\"median\":1.0},\"speedup\":2,\"floor_ms\":0.25}],"
        "\"speedup_geomean\":2,\"verdict\":\"faster\",\"reason\":\"r\","
        "\"sticky_error\":false,\"wall_ms\":300}";
    assert_int_equal(kb_verify_result_parse(line, &r, &err), KB_OK);
    assert_int_equal(r.verdict, KB_VERIFY_FASTER);
    assert_string_equal(r.task, "gelu");
    assert_true(r.has_speedup && r.speedup_geomean == 2);
    assert_int_equal(r.ntimings, 1);
    assert_string_equal(r.timings[0].shape, "target");
    assert_int_equal(r.timings[0].runs, 50);
    assert_true(r.timings[0].candidate_ms.median == 0.5);
    assert_true(r.timings[0].candidate_ms.ci95_hi == 0.6);
    assert_true(r.timings[0].baseline_ms.median == 1.0);
    assert_true(r.timings[0].floor_ms == 0.25);
    assert_string_equal(r.compile.arch, "sm_90a");
    assert_int_equal(r.compile.nkernels, 1);
    assert_int_equal(r.compile.kernels[0].registers, 40);
    assert_int_equal(r.compile.kernels[0].spill_store_bytes, 8);
    assert_int_equal(r.compile.kernels[0].local_bytes, 16);
    assert_false(r.synthesised);
    assert_false(r.has_library);

    /* against a library baseline: parity and the measured ratio */
    assert_int_equal(kb_verify_result_parse(
        "{\"task\":\"gemm_bf16\",\"verdict\":\"correct\",\"speedup_geomean\":0.985,"
        "\"matches_library\":true,\"library_ratio\":0.985}", &r, &err), KB_OK);
    assert_true(r.has_library && r.matches_library);
    assert_true(r.library_ratio == 0.985);
    assert_int_equal(kb_verify_result_parse(
        "{\"task\":\"gemm_f32\",\"verdict\":\"faster\",\"speedup_geomean\":1.33,"
        "\"matches_library\":false,\"library_ratio\":1.33}", &r, &err), KB_OK);
    assert_true(r.has_library && !r.matches_library);

    /* an unknown verdict keeps its name; missing strings are "" */
    assert_int_equal(kb_verify_result_parse("{\"verdict\":\"odd\"}", &r, &err), KB_OK);
    assert_int_equal(r.verdict, KB_VERIFY_UNKNOWN);
    assert_string_equal(r.verdict_name, "odd");
    assert_string_equal(r.task, "");
    assert_false(r.has_wall || r.has_speedup || r.compile.present);

    static const char *bad[] = { "", "not json", "[1,2]", "{\"task\":\"gelu\"}",
                                 "{\"verdict\":3}", "7" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kb_err_clear(&err);
        assert_int_equal(kb_verify_result_parse(bad[i], &r, &err), KB_ERR_PARSE);
        assert_null(r.json);
        assert_true(strstr(err.msg, "not a kb-verify result") != NULL);
    }
    kb_verify_result_release(&r);

    for (int i = 0; i < KB_VERIFY_UNKNOWN; i++)
        assert_int_equal(kb_verify_verdict_parse(kb_verify_verdict_name((kb_verify_verdict)i)), i);
    assert_int_equal(kb_verify_verdict_parse("unknown"), KB_VERIFY_UNKNOWN);
    assert_int_equal(kb_verify_verdict_parse(NULL), KB_VERIFY_UNKNOWN);
}

static void test_open(void **state)
{
    (void)state;
    kb_verifier_opts o;
    kb_verifier_opts_init(&o);
    assert_true(o.timeout_s == 120);
    kb_err err;
    kb_err_clear(&err);
    kb_verifier_free(NULL);
    kb_verifier *v;
    /* no path: kb-verify beside the running program (here the test), else
     * on the PATH */
    v = open_with(NULL, 0, 0, 0);
    assert_non_null(strstr(kb_verifier_path(v), "kb-verify"));
    kb_verifier_free(v);
    v = open_with("/bin/true", 0, 0, 0);
    kb_verify_result r;
    kb_verify_result_init(&r);
    assert_int_equal(kb_verifier_run(v, NULL, "c.cu", &r, &err), KB_ERR_USAGE);
    kb_verifier_free(v);
}

int main(void)
{
    const char *t = getenv("KB_TOP"), *b = getenv("KB_BUILD");
    snprintf(top, sizeof top, "%s", t ? t : ".");
    if (b)
        snprintf(kv, sizeof kv, "%s/kb-verify", b);
    else
        snprintf(kv, sizeof kv, "%s/build/kb-verify", top);
    have_kv = access(kv, X_OK) == 0;
    if (!have_kv)
        printf("skip: the real-child cases (no kb-verify: no CUDA toolkit)\n");
    snprintf(tmp, sizeof tmp, "/tmp/kb-test-verifier-XXXXXX");
    if (!mkdtemp(tmp))
        return 1;
    char cache[300];
    snprintf(cache, sizeof cache, "%s/cache", tmp);
    setenv("KB_VERIFY_CACHE", cache, 1);   /* the reference's cubin */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compile_only),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_missing_kb_verify),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_no_result),
        cmocka_unit_test(test_serve_restart),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_open),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        rc = rc ? rc : 1;
    return rc;
}
