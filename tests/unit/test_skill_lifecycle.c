/* test_skill_lifecycle.c - evidence records made from kb-verify results
 * (the shape of a real H200 result line), the lifecycle's transitions and
 * its refusals, the evidence checks, kb-when-not, dominance and
 * near-duplicates, evidence.json's own errors. */
#include "skills/skill.h"
#include "tests/unit/test_util.h"

#include <math.h>

#define K1 "1111111111111111111111111111111111111111111111111111111111111111"
#define K2 "2222222222222222222222222222222222222222222222222222222222222222"

/* A kb-verify result line: verdict, baseline, candidate median and
 * interval on the target shape, speedup (< 0: untimed). */
static cJSON *result(const char *task, const char *verdict, const char *baseline,
                     double med, double lo, double hi, double speedup)
{
    char timing[600] = "";
    if (speedup >= 0)
        snprintf(timing, sizeof timing,
                 ",\"timings\":[{\"shape\":\"target\",\"baseline\":\"%s\",\"runs\":50,"
                 "\"candidate_ms\":{\"median\":%g,\"ci95_lo\":%g,\"ci95_hi\":%g,\"min\":%g},"
                 "\"baseline_ms\":{\"median\":%g,\"ci95_lo\":%g,\"ci95_hi\":%g,\"min\":%g},"
                 "\"speedup\":%g,\"floor_ms\":0.1}],\"speedup_geomean\":%g",
                 baseline, med, lo, hi, lo, med * speedup, med * speedup * 0.99,
                 med * speedup * 1.01, med * speedup * 0.98, speedup, speedup);
    char buf[2000];
    snprintf(buf, sizeof buf,
             "{\"kb_verify\":1,\"task\":\"%s\",\"candidate\":\"kernel.cu\","
             "\"device\":{\"name\":\"NVIDIA H200\",\"compute_capability\":\"9.0\",\"sms\":132},"
             "\"compile\":{\"ok\":true,\"arch\":\"sm_90\",\"kernels\":[{\"name\":\"k\","
             "\"registers\":31,\"shared_static_bytes\":0,\"local_bytes\":0}]},\"seed\":7,"
             "\"checks\":[{\"shape\":\"target\",\"seed\":7,\"ok\":true},"
             "{\"shape\":\"target\",\"seed\":8,\"ok\":true},"
             "{\"shape\":\"odd\",\"seed\":7,\"ok\":%s}]%s,"
             "\"verdict\":\"%s\",\"reason\":\"because %s\",\"wall_ms\":300}",
             task, strcmp(verdict, "incorrect") ? "true" : "false", timing, verdict, verdict);
    cJSON *j = cJSON_Parse(buf);
    assert_non_null(j);
    return j;
}

static cJSON *record(cJSON *res, const char *kernel, const cJSON *device)
{
    kb_skill_record_in in = { .result = res, .device = device, .kernel_sha256 = kernel,
                              .how = "kb-verify", .date = "2026-12-01T12:00:00Z" };
    cJSON *rec = NULL;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_skill_record_make(&in, &rec, &err), KB_OK);
    cJSON_Delete(res);
    return rec;
}

static kb_skill draft(const char *name, const char *task)
{
    char text[600];
    snprintf(text, sizeof text,
             "---\nname: %s\ndescription: d\nmetadata:\n  kb-status: draft\n  kb-task: %s\n"
             "  kb-bottleneck: memory\n---\n## When to apply\nx\n## Technique\nx\n"
             "## Pitfalls\nx\n## Evidence\nx\n", name, task);
    char path[200];
    snprintf(path, sizeof path, "skills/%s/SKILL.md", name);
    kb_skill s;
    kb_skill_init(&s);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_skill_parse(path, text, strlen(text), &s, NULL, &err), KB_OK);
    return s;
}

static kb_skill_evidence empty_evidence(const char *name)
{
    kb_skill_evidence ev;
    kb_skill_evidence_init(&ev);
    kb_err err;
    kb_err_clear(&err);
    /* a folder with no evidence.json: an empty list */
    assert_int_equal(kb_skill_evidence_load("/nonexistent-skill-dir", name, &ev, NULL, &err),
                     KB_OK);
    assert_false(ev.exists);
    return ev;
}

/* Applies rec; returns the code, the line in *what (caller frees). */
static kb_rc apply(kb_skill *s, kb_skill_evidence *ev, cJSON *rec, const char *kernel,
                   char **what, kb_err *err)
{
    kb_buf w;
    kb_buf_init(&w, 0);
    kb_err_clear(err);
    kb_rc rc = kb_skill_apply_record(s, ev, rec, kernel, &w, err);
    *what = kb_buf_detach(&w);
    return rc;
}

static void assert_clean(const kb_skill *s, const kb_skill_evidence *ev, const char *kernel)
{
    kb_skill_diags d;
    kb_skill_diags_init(&d);
    assert_int_equal(kb_skill_check_evidence(s, ev, kernel, &d), KB_OK);
    if (d.n)
        fail_msg("unexpected finding: %s", d.items[0].msg);
    kb_skill_diags_release(&d);
}

/* The first finding of the evidence checks, "" when none (caller frees). */
static char *first_finding(const kb_skill *s, const kb_skill_evidence *ev, const char *kernel)
{
    kb_skill_diags d;
    kb_skill_diags_init(&d);
    assert_int_equal(kb_skill_check_evidence(s, ev, kernel, &d), KB_OK);
    char *m = kb_strdup(d.n ? d.items[0].msg : "");
    kb_skill_diags_release(&d);
    return m;
}

static void test_record(void **state)
{
    (void)state;
    cJSON *dev = cJSON_Parse("{\"name\":\"NVIDIA H200\",\"compute_capability\":\"9.0\","
                             "\"sms\":132,\"driver_version\":\"580.159.04\",\"arch\":\"sm_90\"}");
    cJSON *rec = record(result("gelu", "faster", "reference", 0.1355, 0.1353, 0.1361, 1.61),
                        K1, dev);
    assert_string_equal(kb_skill_record_str(rec, "task"), "gelu");
    assert_string_equal(kb_skill_record_str(rec, "kernel_sha256"), K1);
    assert_string_equal(kb_skill_record_str(rec, "verdict"), "faster");
    assert_string_equal(kb_skill_record_str(rec, "baseline"), "reference");
    assert_string_equal(kb_skill_record_str(rec, "date"), "2026-12-01T12:00:00Z");
    const cJSON *d = cJSON_GetObjectItem(rec, "device");
    assert_string_equal(kb_skill_record_str(d, "driver_version"), "580.159.04");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(d, "nvrtc_version")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(d, "cuda_driver_version")));
    assert_string_equal(kb_skill_record_str(d, "arch"), "sm_90");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(rec, "seeds")), 2);
    const cJSON *checks = cJSON_GetObjectItem(rec, "checks");
    assert_int_equal(cJSON_GetObjectItem(checks, "run")->valueint, 3);
    assert_int_equal(cJSON_GetObjectItem(checks, "passed")->valueint, 3);
    const cJSON *t = cJSON_GetArrayItem(cJSON_GetObjectItem(rec, "timings"), 0);
    const cJSON *c = cJSON_GetObjectItem(t, "candidate_ms");
    assert_true(cJSON_GetObjectItem(c, "ci95_lo")->valuedouble == 0.1353);
    assert_true(cJSON_GetObjectItem(c, "ci95_hi")->valuedouble == 0.1361);
    assert_true(cJSON_GetObjectItem(rec, "speedup")->valuedouble == 1.61);
    /* shapes from the checks when the task's are not given */
    const cJSON *shapes = cJSON_GetObjectItem(rec, "shapes");
    assert_int_equal(cJSON_GetArraySize(shapes), 2);
    assert_string_equal(kb_skill_record_str(cJSON_GetArrayItem(shapes, 1), "name"), "odd");
    assert_int_equal(kb_skill_record_outcome(rec), KB_SKILL_BACKS);
    /* the hash is of the compact JSON, stable over a print and a parse */
    char h1[65], h2[65];
    assert_int_equal(kb_skill_record_hash(rec, h1), KB_OK);
    char *txt = cJSON_Print(rec);
    cJSON *again = cJSON_Parse(txt);
    assert_int_equal(kb_skill_record_hash(again, h2), KB_OK);
    assert_string_equal(h1, h2);
    free(txt);
    cJSON_Delete(again);
    cJSON_Delete(rec);

    /* without a profile: the result's device, arch made from its capability,
     * the versions kb-verify reports with it */
    cJSON *res = result("gelu", "faster", "reference", 1, 0.9, 1.1, 2);
    cJSON *rdev = cJSON_GetObjectItem(res, "device");
    cJSON_AddStringToObject(rdev, "cuda_driver_version", "13.0");
    cJSON_AddStringToObject(rdev, "nvrtc_version", "13.0");
    rec = record(res, K1, NULL);
    d = cJSON_GetObjectItem(rec, "device");
    assert_string_equal(kb_skill_record_str(d, "arch"), "sm_90");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(d, "driver_version")));
    assert_string_equal(kb_skill_record_str(d, "cuda_driver_version"), "13.0");
    assert_string_equal(kb_skill_record_str(d, "nvrtc_version"), "13.0");
    cJSON_Delete(rec);

    /* what each verdict says of the kernel */
    struct { const char *v, *b; double sp; kb_skill_outcome o; } cases[] = {
        { "correct", "cublas_bf16", 0.98, KB_SKILL_BACKS },
        { "correct", "cublas_sgemm", 0.90, KB_SKILL_SLOWER },
        { "correct", "reference", 1.01, KB_SKILL_SLOWER },
        { "correct", "reference", -1, KB_SKILL_NO_VERDICT },
        { "incorrect", "reference", -1, KB_SKILL_FAILS },
        { "timeout", "reference", -1, KB_SKILL_FAILS },
        { "suspicious", "reference", 90, KB_SKILL_SUSPICIOUS },
        { "error", "reference", -1, KB_SKILL_NO_VERDICT },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        rec = record(result("gemm_bf16", cases[i].v, cases[i].b, 1, 0.9, 1.1, cases[i].sp),
                     K1, NULL);
        assert_int_equal(kb_skill_record_outcome(rec), cases[i].o);
        cJSON_Delete(rec);
    }

    /* not a result */
    cJSON *bad = cJSON_Parse("{\"task\":\"gelu\"}");
    kb_skill_record_in in = { .result = bad, .kernel_sha256 = K1, .how = "x", .date = "d" };
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_skill_record_make(&in, &rec, &err), KB_ERR_PARSE);
    assert_null(rec);
    assert_string_equal(err.msg, "not a kb-verify result: no \"verdict\" and \"task\"");
    cJSON_Delete(bad);
    cJSON_Delete(dev);
}

/* A result with the speedup's interval (the runs' ratios) and the
 * baseline's spread across processes, as kb-verify --spread reports them. */
static cJSON *result_ci(const char *verdict, double speedup, double lo, double hi,
                        double spread)
{
    cJSON *r = result("gelu", verdict, "reference", 1, 0.99, 1.01, speedup);
    cJSON *ci = cJSON_AddArrayToObject(r, "speedup_ci95");
    cJSON_AddItemToArray(ci, cJSON_CreateNumber(lo));
    cJSON_AddItemToArray(ci, cJSON_CreateNumber(hi));
    cJSON *sp = cJSON_AddObjectToObject(r, "baseline_spread");
    cJSON_AddNumberToObject(sp, "processes", 4);
    cJSON_AddNumberToObject(sp, "spread", spread);
    return r;
}

/* Re-verification compares the speedup's interval with the bar: a
 * difference inside it neither retires a verified skill nor promotes a
 * draft; one outside it does either. */
static void test_intervals(void **state)
{
    (void)state;
    kb_err err;
    char *what = NULL;
    /* the record keeps the interval and the spread; the interval widens by it */
    cJSON *rec = record(result_ci("faster", 1.05, 1.02, 1.08, 0.01), K1, NULL);
    double lo, hi;
    assert_true(kb_skill_record_interval(rec, &lo, &hi));
    assert_true(fabs(lo - 1.02 / 1.01) < 1e-9 && fabs(hi - 1.08 * 1.01) < 1e-9);
    assert_true(kb_skill_record_bar(rec) == KB_SKILL_FASTER_MARGIN);
    assert_int_equal(cJSON_GetObjectItem(rec, "baseline_processes")->valueint, 4);
    /* a draft faster by its point, the bar inside the interval: not promoted */
    kb_skill s = draft("vec", "gelu");
    kb_skill_evidence ev = empty_evidence("vec");
    assert_int_equal(apply(&s, &ev, rec, K1, &what, &err), KB_OK);
    assert_int_equal(kb_skill_status_of(&s), KB_SKILL_DRAFT);
    assert_non_null(strstr(what, "draft -> draft: "));
    assert_non_null(strstr(what, "holds the bar 1.03: a difference inside it promotes "
                                 "nothing"));
    free(what);
    /* clearly faster: verified */
    rec = record(result_ci("faster", 1.6, 1.55, 1.65, 0.02), K1, NULL);
    assert_int_equal(apply(&s, &ev, rec, K1, &what, &err), KB_OK);
    assert_string_equal(what, "draft -> verified: faster, 1.60x reference");
    free(what);
    /* re-verified at 1.01x by its point, but the interval reaches the bar:
     * kept, and the record backs it (kb-speedup follows it) */
    rec = record(result_ci("correct", 1.01, 0.98, 1.04, 0.0), K1, NULL);
    assert_int_equal(apply(&s, &ev, rec, K1, &what, &err), KB_OK);
    assert_int_equal(kb_skill_status_of(&s), KB_SKILL_VERIFIED);
    assert_non_null(strstr(what, "verified -> verified: correct, 1.01x reference (the "
                                 "speedup's interval [0.980, 1.040] holds the bar 1.03: "
                                 "a difference inside it retires nothing)"));
    free(what);
    assert_clean(&s, &ev, K1);
    /* the spread across processes widens it too: [0.99/1.05, 1.02*1.05] */
    rec = record(result_ci("correct", 1.0, 0.99, 1.02, 0.05), K1, NULL);
    assert_int_equal(apply(&s, &ev, rec, K1, &what, &err), KB_OK);
    assert_int_equal(kb_skill_status_of(&s), KB_SKILL_VERIFIED);
    free(what);
    /* slower beyond the interval: retired */
    rec = record(result_ci("correct", 0.9, 0.88, 0.92, 0.01), K1, NULL);
    assert_int_equal(apply(&s, &ev, rec, K1, &what, &err), KB_OK);
    assert_int_equal(kb_skill_status_of(&s), KB_SKILL_RETIRED);
    free(what);
    kb_skill_evidence_release(&ev);
    kb_skill_release(&s);

    /* review: faster and above 1.25 times the best verified skill's */
    rec = record(result_ci("faster", 3.0, 2.9, 3.1, 0.0), K1, NULL);
    assert_int_equal(kb_skill_record_review(rec, 0), 0);      /* no skill to compare */
    assert_int_equal(kb_skill_record_review(rec, 2.5), 0);    /* 1.2 times */
    assert_int_equal(kb_skill_record_review(rec, 2.0), 1);
    assert_string_equal(kb_skill_record_str(rec, "review"), "3.00x is 1.5 times the best "
                        "verified skill's 2.00x for gelu: review the kernel before "
                        "trusting it");
    cJSON_Delete(rec);
    rec = record(result_ci("correct", 3.0, 2.9, 3.1, 0.0), K1, NULL);
    assert_int_equal(kb_skill_record_review(rec, 1.0), 0);    /* only a faster one */
    cJSON_Delete(rec);
}

static void test_transitions(void **state)
{
    (void)state;
    kb_skill s = draft("vec", "gelu");
    kb_skill_evidence ev = empty_evidence("vec");
    kb_err err;
    kb_err_clear(&err);
    char *what = NULL;

    /* a draft cannot be approved */
    assert_int_equal(kb_skill_approve(&s, &ev, K1, "alice", &err), KB_ERR_MISMATCH);
    assert_string_equal(err.msg, "'vec' is draft: only a verified skill is approved "
                                 "('kb skill verify vec' first)");
    /* no verdict (no GPU), a suspicious result, another kernel, another task:
     * refused, nothing changed */
    cJSON *rec = record(result("gelu", "error", "", 0, 0, 0, -1), K1, NULL);
    assert_int_equal(apply(&s, &ev, rec, K1, &what, &err), KB_ERR_GPU);
    assert_non_null(strstr(err.msg, "because error"));
    free(what);
    rec = record(result("gelu", "suspicious", "reference", 0.01, 0.01, 0.01, 80), K1, NULL);
    assert_int_equal(apply(&s, &ev, rec, K1, &what, &err), KB_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "a suspicious result never verifies a skill; nothing "
                                    "changed"));
    free(what);
    rec = record(result("gelu", "faster", "reference", 1, 0.9, 1.1, 2), K2, NULL);
    assert_int_equal(apply(&s, &ev, rec, K1, &what, &err), KB_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "the result is for another kernel (sha256 222222222222"));
    free(what);
    rec = record(result("softmax", "faster", "reference", 1, 0.9, 1.1, 2), K1, NULL);
    assert_int_equal(apply(&s, &ev, rec, K1, &what, &err), KB_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "the result is for task 'softmax', not 'vec''s kb-task "
                                    "'gelu'"));
    free(what);
    assert_int_equal(kb_skill_evidence_count(&ev), 0);
    assert_int_equal(kb_skill_status_of(&s), KB_SKILL_DRAFT);
    assert_null(kb_skill_get(&s, "kb-speedup"));

    /* faster: verified, with its speedup and the record's hash */
    rec = record(result("gelu", "faster", "reference", 0.1355, 0.1353, 0.1361, 1.6116), K1,
                 NULL);
    char hash[65];
    assert_int_equal(kb_skill_record_hash(rec, hash), KB_OK);
    assert_int_equal(apply(&s, &ev, rec, K1, &what, &err), KB_OK);
    assert_string_equal(what, "draft -> verified: faster, 1.61x reference");
    free(what);
    assert_int_equal(kb_skill_status_of(&s), KB_SKILL_VERIFIED);
    assert_string_equal(kb_skill_get(&s, "kb-speedup"), "1.61");
    assert_string_equal(kb_skill_get(&s, "kb-evidence"), hash);
    assert_null(kb_skill_get(&s, "kb-when-not"));
    assert_clean(&s, &ev, K1);

    /* the kernel changed since: the evidence no longer backs it */
    char *m = first_finding(&s, &ev, K2);
    assert_string_equal(m, "kb-status 'verified', but the latest evidence is for another "
                           "kernel.cu: run 'kb skill verify vec'");
    free(m);
    assert_int_equal(kb_skill_approve(&s, &ev, K2, "alice", &err), KB_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "cannot be approved: the latest evidence is for another "
                                    "kernel.cu"));
    /* a hand-edited speedup or evidence hash is caught */
    assert_int_equal(kb_skill_set(&s, "kb-speedup", "2.5"), KB_OK);
    m = first_finding(&s, &ev, K1);
    assert_string_equal(m, "kb-speedup '2.5', but the latest evidence says 1.61");
    free(m);
    assert_int_equal(kb_skill_set(&s, "kb-speedup", "1.61"), KB_OK);
    assert_int_equal(kb_skill_set(&s, "kb-evidence", K2), KB_OK);
    m = first_finding(&s, &ev, K1);
    assert_non_null(strstr(m, "kb-evidence does not name the latest record"));
    free(m);
    assert_int_equal(kb_skill_set(&s, "kb-evidence", hash), KB_OK);

    /* approve: the human step, once */
    assert_int_equal(kb_skill_approve(&s, &ev, K1, "", &err), KB_ERR_USAGE);
    assert_int_equal(kb_skill_approve(&s, &ev, K1, "alice", &err), KB_OK);
    assert_int_equal(kb_skill_status_of(&s), KB_SKILL_APPROVED);
    assert_string_equal(kb_skill_get(&s, "kb-reviewer"), "alice");
    assert_clean(&s, &ev, K1);
    kb_err_clear(&err);
    assert_int_equal(kb_skill_approve(&s, &ev, K1, "bob", &err), KB_ERR_MISMATCH);
    assert_string_equal(err.msg, "'vec' is already approved (by alice)");

    /* re-verified faster, same kernel: still approved */
    rec = record(result("gelu", "faster", "reference", 0.136, 0.135, 0.137, 1.60), K1, NULL);
    assert_int_equal(apply(&s, &ev, rec, K1, &what, &err), KB_OK);
    assert_string_equal(what, "approved -> approved: faster, 1.60x reference");
    free(what);
    assert_string_equal(kb_skill_get(&s, "kb-speedup"), "1.60");

    /* a failed re-verification retires it, with the reason, and the
     * negative evidence goes into kb-when-not */
    rec = record(result("gelu", "incorrect", "reference", 0, 0, 0, -1), K1, NULL);
    assert_int_equal(apply(&s, &ev, rec, K1, &what, &err), KB_OK);
    assert_string_equal(what, "approved -> retired: verification on NVIDIA H200: "
                              "incorrect (because incorrect)");
    free(what);
    assert_int_equal(kb_skill_status_of(&s), KB_SKILL_RETIRED);
    assert_string_equal(kb_skill_get(&s, "kb-retired"),
                        "verification on NVIDIA H200: incorrect (because incorrect)");
    assert_string_equal(kb_skill_get(&s, "kb-when-not"),
                        "incorrect on gelu (NVIDIA H200, sm_90): because incorrect");
    assert_int_equal(kb_skill_evidence_count(&ev), 3);
    assert_clean(&s, &ev, K1);

    /* a retired skill is not verified again, nor retired twice */
    rec = record(result("gelu", "faster", "reference", 1, 0.9, 1.1, 2), K1, NULL);
    assert_int_equal(apply(&s, &ev, rec, K1, &what, &err), KB_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "'vec' is retired: a retired skill is not verified again"));
    free(what);
    assert_int_equal(kb_skill_evidence_count(&ev), 3);
    kb_err_clear(&err);
    assert_int_equal(kb_skill_retire(&s, "again", &err), KB_ERR_MISMATCH);
    assert_non_null(strstr(err.msg, "is already retired (verification"));
    kb_skill_evidence_release(&ev);
    kb_skill_release(&s);

    /* a draft that comes out slower stays a draft, and says where */
    s = draft("slow", "softmax");
    ev = empty_evidence("slow");
    rec = record(result("softmax", "correct", "reference", 1, 0.99, 1.01, 1.01), K1, NULL);
    assert_int_equal(apply(&s, &ev, rec, K1, &what, &err), KB_OK);
    assert_int_equal(kb_skill_status_of(&s), KB_SKILL_DRAFT);
    assert_string_equal(what, "draft -> draft: verification on NVIDIA H200: correct, "
                              "1.01x reference (because correct)");
    assert_string_equal(kb_skill_get(&s, "kb-when-not"),
                        "1.01x reference on softmax 'target' (NVIDIA H200, sm_90)");
    free(what);
    kb_skill_evidence_release(&ev);
    kb_skill_release(&s);

    /* parity with a vendor library verifies, and says it does not beat it */
    s = draft("tma", "gemm_bf16");
    ev = empty_evidence("tma");
    rec = record(result("gemm_bf16", "correct", "cublas_bf16", 0.1825, 0.182, 0.183, 0.9833),
                 K1, NULL);
    assert_int_equal(apply(&s, &ev, rec, K1, &what, &err), KB_OK);
    assert_string_equal(what, "draft -> verified: correct, 0.98x cublas_bf16");
    free(what);
    assert_string_equal(kb_skill_get(&s, "kb-speedup"), "0.98");
    assert_string_equal(kb_skill_get(&s, "kb-when-not"),
                        "0.98x cublas_bf16 on gemm_bf16 'target' (NVIDIA H200, sm_90)");
    /* the same again: the phrase once */
    rec = record(result("gemm_bf16", "correct", "cublas_bf16", 0.1825, 0.182, 0.183, 0.9846),
                 K1, NULL);
    assert_int_equal(apply(&s, &ev, rec, K1, &what, &err), KB_OK);
    free(what);
    assert_string_equal(kb_skill_get(&s, "kb-when-not"),
                        "0.98x cublas_bf16 on gemm_bf16 'target' (NVIDIA H200, sm_90)");
    assert_clean(&s, &ev, K1);
    /* without kb-when-not, lint says the negative evidence is not summarised */
    assert_int_equal(kb_skill_set(&s, "kb-when-not", NULL), KB_OK);
    m = first_finding(&s, &ev, K1);
    assert_non_null(strstr(m, "the evidence holds negative results that kb-when-not does "
                              "not summarise: 0.98x cublas_bf16"));
    free(m);
    kb_skill_evidence_release(&ev);
    kb_skill_release(&s);
}

static void test_evidence_checks(void **state)
{
    (void)state;
    kb_skill s = draft("e", "gelu");
    kb_skill_evidence ev = empty_evidence("e");
    char *m;
    /* verified with no evidence, approved with no reviewer, retired with no
     * reason, no kernel.cu */
    assert_int_equal(kb_skill_set(&s, "kb-status", "verified"), KB_OK);
    m = first_finding(&s, &ev, K1);
    assert_string_equal(m, "kb-status 'verified', but evidence.json holds no verification: "
                           "run 'kb skill verify e'");
    free(m);
    assert_int_equal(kb_skill_set(&s, "kb-status", "retired"), KB_OK);
    m = first_finding(&s, &ev, K1);
    assert_string_equal(m, "a retired skill without its reason (kb-retired)");
    free(m);
    m = first_finding(&s, &ev, NULL);
    assert_string_equal(m, "no kernel.cu beside SKILL.md");
    free(m);
    /* a suspicious record, or one of another task, in the evidence */
    assert_int_equal(kb_skill_set(&s, "kb-status", "draft"), KB_OK);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_skill_evidence_add(&ev, record(result("gelu", "suspicious",
                                           "reference", 0.01, 0.01, 0.01, 90), K1, NULL),
                                           &err), KB_OK);
    m = first_finding(&s, &ev, K1);
    assert_string_equal(m, "record 1 is a suspicious result: it never backs a skill (kb "
                           "skill verify does not record one)");
    free(m);
    kb_skill_evidence_release(&ev);
    ev = empty_evidence("e");
    assert_int_equal(kb_skill_evidence_add(&ev, record(result("softmax", "faster",
                                           "reference", 1, 0.9, 1.1, 2), K1, NULL), &err),
                     KB_OK);
    m = first_finding(&s, &ev, K1);
    assert_string_equal(m, "record 1 is for task 'softmax', not kb-task 'gelu'");
    free(m);
    kb_skill_evidence_release(&ev);
    kb_skill_release(&s);

    /* evidence.json that is not the format */
    char *dir = tu_tmpdir("evidence");
    char *path = kb_path_join(dir, "evidence.json");
    static const struct { const char *text, *msg; } bad[] = {
        { "{not json", "not JSON (near byte 2)" },
        { "{\"kb_evidence\":1}", "no \"records\" list" },
        { "{\"records\":[{\"date\":\"d\",\"task\":\"gelu\",\"verdict\":\"faster\"}]}",
          "record 1 has no \"kernel_sha256\"" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tu_write_file(path, bad[i].text, strlen(bad[i].text));
        kb_skill_diags d;
        kb_skill_diags_init(&d);
        kb_err_clear(&err);
        assert_int_equal(kb_skill_evidence_load(dir, "e", &ev, &d, &err), KB_ERR_PARSE);
        if (!strstr(err.msg, bad[i].msg))
            fail_msg("'%s' lacks '%s'", err.msg, bad[i].msg);
        assert_non_null(strstr(err.msg, "evidence.json: "));
        assert_int_equal(d.errors, 1);
        kb_skill_diags_release(&d);
        kb_skill_evidence_release(&ev);
    }
    /* saved and loaded back: the same records */
    kb_skill_evidence_init(&ev);
    unlink(path);
    assert_int_equal(kb_skill_evidence_load(dir, "e", &ev, NULL, &err), KB_OK);
    assert_int_equal(kb_skill_evidence_add(&ev, record(result("gelu", "faster", "reference",
                                           1, 0.9, 1.1, 2), K1, NULL), &err), KB_OK);
    char h1[65], h2[65];
    assert_int_equal(kb_skill_record_hash(kb_skill_evidence_at(&ev, 0), h1), KB_OK);
    assert_int_equal(kb_skill_evidence_save(&ev, &err), KB_OK);
    kb_skill_evidence_release(&ev);
    assert_int_equal(kb_skill_evidence_load(dir, "e", &ev, NULL, &err), KB_OK);
    assert_true(ev.exists);
    assert_int_equal(kb_skill_evidence_count(&ev), 1);
    assert_int_equal(kb_skill_record_hash(kb_skill_evidence_at(&ev, 0), h2), KB_OK);
    assert_string_equal(h1, h2);
    assert_non_null(kb_skill_evidence_find(&ev, h1));
    assert_null(kb_skill_evidence_find(&ev, K1));
    kb_skill_evidence_release(&ev);
    free(path);
    tu_rmtree(dir);
    free(dir);
}

/* A library entry, verified by one faster record with this interval. */
static void entry(kb_skill_entry *e, const char *name, const char *task, const char *kernel,
                  double med, double lo, double hi)
{
    memset(e, 0, sizeof *e);
    e->skill = draft(name, task);
    e->evidence = empty_evidence(name);
    e->ok = 1;
    e->dir = kb_strdup(name);
    memcpy(e->kernel_sha256, kernel, 65);
    char *what = NULL;
    kb_err err;
    cJSON *rec = record(result(task, "faster", "reference", med, lo, hi, 2), kernel, NULL);
    assert_int_equal(apply(&e->skill, &e->evidence, rec, kernel, &what, &err), KB_OK);
    free(what);
}

static void test_dominance(void **state)
{
    (void)state;
    kb_skill_lib lib;
    kb_skill_lib_init(&lib);
    lib.items = calloc(4, sizeof *lib.items);
    lib.n = lib.cap = 4;
    entry(&lib.items[0], "fast", "transpose", K1, 0.10, 0.099, 0.101);
    entry(&lib.items[1], "slow", "transpose", K2, 0.20, 0.19, 0.21);
    entry(&lib.items[2], "close", "transpose", K2, 0.1015, 0.1005, 0.103);   /* overlaps */
    entry(&lib.items[3], "other", "gelu", K1, 0.30, 0.29, 0.31);
    assert_true(kb_skill_dominates(&lib.items[0], &lib.items[1]));
    assert_false(kb_skill_dominates(&lib.items[1], &lib.items[0]));
    assert_false(kb_skill_dominates(&lib.items[0], &lib.items[2]));   /* intervals meet */
    /* one kernel (K2) measured twice: noise, never dominance */
    assert_false(kb_skill_dominates(&lib.items[2], &lib.items[1]));
    assert_false(kb_skill_dominates(&lib.items[0], &lib.items[3]));   /* another task */
    assert_string_equal(kb_skill_entry_arch(&lib.items[0]), "sm_90");
    kb_skill_diags d;
    kb_skill_diags_init(&d);
    assert_int_equal(kb_skill_lib_check(&lib, &d), KB_OK);
    /* 'slow' is dominated by 'fast'; 'slow' and 'close' share a kernel,
     * task and bottleneck */
    assert_int_equal(d.n, 2);
    assert_string_equal(d.items[0].msg, "'fast' dominates it on transpose (sm_90): faster on "
                                        "every timed shape; retire one ('kb skill retire')");
    assert_string_equal(d.items[0].file, "skills/slow/SKILL.md");
    assert_string_equal(d.items[1].file, "skills/close/SKILL.md");
    assert_string_equal(d.items[1].msg, "a near-duplicate of 'slow': the same kernel.cu for "
                                        "the same task and kb-bottleneck");
    kb_skill_diags_release(&d);
    /* a retired skill dominates nothing */
    kb_err err;
    assert_int_equal(kb_skill_retire(&lib.items[0].skill, "gone", &err), KB_OK);
    assert_false(kb_skill_dominates(&lib.items[0], &lib.items[1]));
    /* another bottleneck: two techniques read from one kernel */
    assert_int_equal(kb_skill_set(&lib.items[2].skill, "kb-bottleneck", "latency"), KB_OK);
    kb_skill_diags_init(&d);
    assert_int_equal(kb_skill_lib_check(&lib, &d), KB_OK);
    assert_int_equal(d.n, 0);     /* 'fast' retired, 'close' is 'slow''s own kernel */
    kb_skill_diags_release(&d);
    kb_skill_lib_release(&lib);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record),
        cmocka_unit_test(test_transitions),
        cmocka_unit_test(test_intervals),
        cmocka_unit_test(test_evidence_checks),
        cmocka_unit_test(test_dominance),
    };
    return cmocka_run_group_tests_name("skill_lifecycle", tests, NULL, NULL);
}
