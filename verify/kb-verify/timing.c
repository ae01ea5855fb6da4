/* timing.c - candidate and baseline timed on one stream with CUDA events,
 * after warm-up, interleaved (the order alternating), the L2 flushed
 * before every run; median and a 95% interval; the timed runs' outputs
 * re-checked (the last, and one picked at random), and speedups beyond
 * the roofline or the task's plausible maximum flagged. */
#include "verify/kb-verify/verify_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* one shape's timing */
typedef struct {
    const kb_shape *s;
    int use_blas;              /* the baseline is a library (cuBLAS) */
    uint64_t seed;
    double atol, rtol;
    double tc, tb;             /* the last warm-up's times, ms */
    int runs, rcheck;          /* timed runs per side; the one re-checked */
    CUevent *ev;               /* 4 a run: each side's start and end */
    cJSON *tj;                 /* the shape's "timings" entry */
} timing;

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* median and a 95% interval of the median (order statistics) */
static cJSON *stats_json(double *t, int n, double *median)
{
    qsort(t, (size_t)n, sizeof *t, cmp_dbl);
    double med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    int lo = (int)floor(n / 2.0 - 0.98 * sqrt((double)n));
    int hi = (int)ceil(n / 2.0 + 0.98 * sqrt((double)n));
    if (lo < 0)
        lo = 0;
    if (hi > n - 1)
        hi = n - 1;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "median", med);
    cJSON_AddNumberToObject(o, "ci95_lo", t[lo]);
    cJSON_AddNumberToObject(o, "ci95_hi", t[hi]);
    cJSON_AddNumberToObject(o, "min", t[0]);
    *median = med;
    return o;
}

static double roof_floor_ms(kbv_ctx *v, const kb_shape *s)
{
    const kb_task *t = v->task;
    const kbv_gpu *g = v->gpu;
    double bytes = 0, flops = 0;
    if (t->roof_bytes)
        kb_task_eval(t, s, t->roof_bytes, &bytes, NULL);
    if (t->roof_flops)
        kb_task_eval(t, s, t->roof_flops, &flops, NULL);
    /* fp32_tensor3: fp32 accuracy from three TF32 tensor-core products
     * (3xTF32), the fastest honest way to an fp32 GEMM; TF32 runs at half
     * the bf16 rate */
    double rate = strcmp(t->roof_unit, "bf16_tensor") == 0 ? g->bf16_rate
                : strcmp(t->roof_unit, "fp32_tensor3") == 0 ? g->bf16_rate / 6.0
                : strcmp(t->roof_unit, "int") == 0 ? g->int_rate : g->fp32_rate;
    double a = bytes / g->peak_bw, b = flops / rate;
    return (a > b ? a : b) * 1e3;
}

/* The baseline's side of one run: the library, or the reference. */
static CUresult run_baseline(kbv_ctx *v, const timing *tm)
{
    return tm->use_blas ? kbv_run_blas(v) : kbv_run_side(v, 0);
}

/* The reference's outputs on the timing inputs, kept as the gold copy. */
static int gold_run(kbv_ctx *v, timing *tm)
{
    const kb_task *t = v->task;
    int to = 0;
    CUresult r = kbv_gen_inputs(v, tm->seed, 0, NULL);
    if (!r)
        r = kbv_poison_side(v, 0, KBV_POISON_NAN);
    if (!r)
        r = kbv_run_side(v, 0);
    for (size_t i = 0; i < t->nparams && !r; i++)
        if (kbv_is_result(&t->params[i]))
            r = cuMemcpyDtoDAsync(v->ps[i].gold.ptr, v->ps[i].ref.ptr,
                                  v->ps[i].bytes, v->gpu->stream);
    if (!r)
        r = kbv_gpu_sync(v->gpu, 60000, &to);
    if (r || to) {
        kbv_set_verdict(v, "error", "the reference failed while timing");
        return -1;
    }
    return 0;
}

/* warm-up, and a first measurement to size the run count */
static int warm_up(kbv_ctx *v, timing *tm)
{
    kbv_gpu *g = v->gpu;
    CUevent e[4];
    for (int i = 0; i < 4; i++)
        cuEventCreate(&e[i], CU_EVENT_DEFAULT);
    CUresult r = CUDA_SUCCESS;
    int to = 0;
    for (int w = 0; w < KBV_NWARM && !r; w++) {
        r = cuEventRecord(e[0], g->stream);
        if (!r)
            r = kbv_run_side(v, 1);
        if (!r)
            r = cuEventRecord(e[1], g->stream);
        if (!r)
            r = run_baseline(v, tm);
        if (!r)
            r = cuEventRecord(e[2], g->stream);
        if (!r)
            r = kbv_gpu_sync(g, v->o->timeout_ms, &to);
        if (to) {
            g->sticky = 1;
            kbv_set_verdict(v, "timeout", "the candidate ran over %.0f ms while timing",
                            v->o->timeout_ms);
            return -1;
        }
        float a = 0, b = 0;
        if (!r) {
            cuEventElapsedTime(&a, e[0], e[1]);
            cuEventElapsedTime(&b, e[1], e[2]);
            tm->tc = a, tm->tb = b;
        }
    }
    for (int i = 0; i < 4; i++)
        cuEventDestroy(e[i]);
    if (r) {
        kbv_cuda_failed(v, r, "warming up");
        return -1;
    }
    return 0;
}

/* the library baseline must itself agree with the reference */
static int check_library(kbv_ctx *v, timing *tm)
{
    const kb_task *t = v->task;
    kbv_cmp m;
    memset(&m, 0, sizeof m);
    CUresult r = CUDA_SUCCESS;
    /* every result: the library's C, or what its epilogue made of it */
    for (size_t i = 0; i < t->nparams && !r && !m.nbad; i++)
        if (kbv_is_result(&t->params[i]))
            r = kbv_compare(v, i, v->ps[i].ref.ptr, v->ps[i].gold.ptr, tm->atol,
                            tm->rtol, &m);
    if (r) {
        kbv_cuda_failed(v, r, "checking the library baseline");
        return -1;
    }
    cJSON_AddBoolToObject(tm->tj, "baseline_agrees", m.nbad == 0);
    if (m.nbad) {
        /* a speedup over a wrong baseline would mean nothing */
        kbv_set_verdict(v, "error", "the library baseline (%s) differs from "
                        "the reference on shape '%s' (%llu mismatches)",
                        t->baseline, tm->s->name, m.nbad);
        return -1;
    }
    return 0;
}

/* Queues timed run k of one side between its two events; the candidate's
 * run rcheck is copied aside to be re-checked. */
static CUresult queue_run(kbv_ctx *v, timing *tm, int k, int cand, int has_inout)
{
    const kb_task *t = v->task;
    kbv_gpu *g = v->gpu;
    unsigned flush_words = (unsigned)(g->flush_bytes / 4);
    CUresult r = CUDA_SUCCESS;
    /* in-place (inout) buffers start from the same input each run */
    if (has_inout)
        r = kbv_gen_inputs(v, tm->seed, 0, NULL);
    if (!r)
        r = cuMemsetD32Async(g->flush, (unsigned)k, flush_words, g->stream);
    if (!r && cand)
        r = kbv_poison_side(v, 1, KBV_POISON_NAN);
    CUevent *pe = &tm->ev[(k * 2 + cand) * 2];
    if (!r)
        r = cuEventRecord(pe[0], g->stream);
    if (!r)
        r = cand ? kbv_run_side(v, 1) : run_baseline(v, tm);
    if (!r)
        r = cuEventRecord(pe[1], g->stream);
    if (!r && cand && k == tm->rcheck)
        for (size_t i = 0; i < t->nparams && !r; i++)
            if (kbv_is_result(&t->params[i]))
                r = cuMemcpyDtoDAsync(v->ps[i].chk.ptr, v->ps[i].cand.ptr,
                                      v->ps[i].bytes, g->stream);
    return r;
}

/* The timed runs, interleaved, and the wait for them. */
static int timed_runs(kbv_ctx *v, timing *tm)
{
    const kb_task *t = v->task;
    int runs = tm->runs, to = 0, has_inout = 0;
    tm->ev = calloc((size_t)runs * 4, sizeof *tm->ev);
    for (int i = 0; i < runs * 4; i++)
        cuEventCreate(&tm->ev[i], CU_EVENT_DEFAULT);
    for (size_t i = 0; i < t->nparams; i++)
        has_inout |= t->params[i].role == KB_ROLE_INOUT;
    CUresult r = CUDA_SUCCESS;
    for (int k = 0; k < runs && !r; k++)
        for (int side2 = 0; side2 < 2 && !r; side2++) {
            int cand = (k % 2) ? side2 : !side2;   /* alternate the order */
            r = queue_run(v, tm, k, cand, has_inout);
        }
    if (!r)
        r = kbv_gpu_sync(v->gpu, v->o->timeout_ms + runs * 2 * (tm->tc + tm->tb + 1.0), &to);
    if (to) {
        v->gpu->sticky = 1;
        kbv_set_verdict(v, "timeout", "the timed runs did not finish");
        free(tm->ev);
        return -1;
    }
    if (r) {
        kbv_cuda_failed(v, r, "timing");
        free(tm->ev);
        return -1;
    }
    return 0;
}

/* The runs' times into the shape's entry; returns the speedup, the
 * candidate's median in *mc and the roofline floor in *floor_ms. */
static double report_times(kbv_ctx *v, timing *tm, double *mc, double *floor_ms)
{
    int runs = tm->runs;
    double *tcand = calloc((size_t)runs, sizeof(double));
    double *tbase = calloc((size_t)runs, sizeof(double));
    for (int k = 0; k < runs; k++) {
        float a = 0, b = 0;
        cuEventElapsedTime(&a, tm->ev[(k * 2 + 1) * 2], tm->ev[(k * 2 + 1) * 2 + 1]);
        cuEventElapsedTime(&b, tm->ev[(k * 2) * 2], tm->ev[(k * 2) * 2 + 1]);
        tcand[k] = a;
        tbase[k] = b;
    }
    for (int i = 0; i < runs * 4; i++)
        cuEventDestroy(tm->ev[i]);
    free(tm->ev);
    tm->ev = NULL;
    double mb;
    cJSON_AddNumberToObject(tm->tj, "runs", runs);
    cJSON_AddItemToObject(tm->tj, "candidate_ms", stats_json(tcand, runs, mc));
    cJSON_AddItemToObject(tm->tj, "baseline_ms", stats_json(tbase, runs, &mb));
    free(tcand);
    free(tbase);
    double speedup = *mc > 0 ? mb / *mc : 0;
    *floor_ms = roof_floor_ms(v, tm->s);
    cJSON_AddNumberToObject(tm->tj, "speedup", speedup);
    cJSON_AddNumberToObject(tm->tj, "floor_ms", *floor_ms);
    cJSON_AddNumberToObject(tm->tj, "candidate_over_floor", *floor_ms > 0 ? *mc / *floor_ms : 0);
    return speedup;
}

/* outputs of the timed runs: the last one, and one picked at random */
static int recheck_outputs(kbv_ctx *v, timing *tm)
{
    const kb_task *t = v->task;
    int ok = 1;
    for (size_t i = 0; i < t->nparams && ok; i++) {
        if (!kbv_is_result(&t->params[i]))
            continue;
        kbv_cmp m1, m2;
        CUresult r = kbv_compare(v, i, v->ps[i].cand.ptr, v->ps[i].gold.ptr,
                                 tm->atol, tm->rtol, &m1);
        if (!r)
            r = kbv_compare(v, i, v->ps[i].chk.ptr, v->ps[i].gold.ptr,
                            tm->atol, tm->rtol, &m2);
        if (r) {
            kbv_cuda_failed(v, r, "re-checking the timed outputs");
            return -1;
        }
        if (m1.nbad || m2.nbad) {
            ok = 0;
            kbv_set_verdict(v, "incorrect", "the output of timed run %d differs "
                            "from the reference (%llu mismatches): right only when "
                            "checked", m1.nbad ? tm->runs : tm->rcheck + 1,
                            m1.nbad ? m1.nbad : m2.nbad);
        }
    }
    cJSON_AddBoolToObject(tm->tj, "timed_outputs_ok", ok);
    cJSON_AddNumberToObject(tm->tj, "rechecked_run", tm->rcheck + 1);
    return ok ? 0 : -1;
}

/* Flags what cannot be true, and adds the speedup to the geomean. */
static void judge(kbv_ctx *v, const timing *tm, double mc, double floor_ms,
                  double speedup)
{
    const kb_shape *s = tm->s;
    if (floor_ms > 0 && mc < KBV_FLOOR_SLACK * floor_ms)
        kbv_set_verdict(v, "suspicious", "%.4f ms on shape '%s' is below the "
                        "roofline floor of %.4f ms", mc, s->name, floor_ms);
    else if (speedup > v->task->max_speedup)
        kbv_set_verdict(v, "suspicious", "%.1fx over the baseline on shape '%s' "
                        "is beyond the task's plausible %.0fx", speedup, s->name,
                        v->task->max_speedup);
    if (speedup > 0) {
        v->speed_log_sum += log(speedup);
        v->nspeed++;
    }
}

int kbv_time_shape(kbv_ctx *v, const kb_shape *s)
{
    const kb_task *t = v->task;
    timing tm;
    memset(&tm, 0, sizeof tm);
    tm.s = s;
    tm.use_blas = strncmp(t->baseline, "cublas", 6) == 0;
    kb_buf why;
    kb_buf_init(&why, 0);
    if (tm.use_blas && kbv_blas_open(v->gpu, &why) != 0) {
        kbv_set_verdict(v, "error", "%s", kbv_why_text(&why));
        kb_buf_release(&why);
        return -1;
    }
    kb_buf_release(&why);
    tm.seed = v->seed_base ^ 0x5EEDull;
    tm.atol = kbv_shape_tol(v, s, t->atol);
    tm.rtol = kbv_shape_tol(v, s, t->rtol);
    if (gold_run(v, &tm) || warm_up(v, &tm))
        return -1;
    tm.tj = cJSON_CreateObject();
    cJSON_AddItemToArray(v->timings, tm.tj);
    cJSON_AddStringToObject(tm.tj, "shape", s->name);
    cJSON_AddStringToObject(tm.tj, "baseline", t->baseline);
    if (tm.use_blas && t->nthen) {
        /* the library's call is followed by these reference kernels */
        cJSON *th = cJSON_AddArrayToObject(tm.tj, "baseline_then");
        for (size_t i = 0; i < t->nthen; i++)
            cJSON_AddItemToArray(th, cJSON_CreateString(
                t->launches[t->baseline_then[i]].kernel));
    }
    if (tm.use_blas && check_library(v, &tm))
        return -1;
    tm.runs = (int)(60.0 / (tm.tc + tm.tb + 0.2));   /* about 60 ms of runs */
    if (tm.runs > v->o->runs_max)
        tm.runs = v->o->runs_max;
    if (tm.runs < 10)
        tm.runs = 10;
    tm.rcheck = (int)(v->seed_base % (uint64_t)tm.runs);
    if (timed_runs(v, &tm))
        return -1;
    double mc, floor_ms, speedup = report_times(v, &tm, &mc, &floor_ms);
    if (recheck_outputs(v, &tm))
        return -1;
    judge(v, &tm, mc, floor_ms, speedup);
    return 0;
}
