/* timing.c - candidate and baseline timed on one stream with CUDA events,
 * after warm-up, interleaved (the order alternating), the L2 flushed
 * before every run; median and a 95% interval of each side and of the
 * runs' ratios. No timed launch sees an input it has seen before: the
 * runs rotate over KBV_NSETS input sets (each its own allocation, so that
 * where memory placed one weighs a third) and, outside the timed region,
 * KBV_RUN_CHANGES elements of each input change before every run; the timed runs'
 * outputs (the last, and one picked at random) are re-checked against the
 * reference on that run's own inputs, so that a result replayed from an
 * earlier launch fails. Speedups beyond the roofline or the task's
 * plausible maximum are flagged. */
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
    int has_inout;             /* in-place buffers: drawn again each run */
    CUdeviceptr cmp;           /* a kbv_cmp a run: its output vs the baseline's */
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

void kbv_use_input_set(kbv_ctx *v, const kb_shape *s, int j)
{
    const kb_task *t = v->task;
    for (size_t i = 0; i < t->nparams; i++) {
        kbv_param *st = &v->ps[i];
        if (t->params[i].role != KB_ROLE_INPUT)
            continue;
        CUdeviceptr p = j == 0 || !st->rot[j - 1].base ? st->in.ptr : st->rot[j - 1].ptr;
        st->cand_arg = st->ref_arg = p;
    }
    if (v->hdr.nmaps)
        kbv_encode_maps(v, s, NULL);
}

/* Draws the other input sets (from seeds of their own). */
static CUresult draw_sets(kbv_ctx *v, timing *tm)
{
    CUresult r = CUDA_SUCCESS;
    for (int j = 1; j < KBV_NSETS && !r; j++) {
        kbv_use_input_set(v, tm->s, j);
        r = kbv_gen_inputs(v, tm->seed + (uint64_t)j * 0x9E37ull, 0, NULL);
    }
    kbv_use_input_set(v, tm->s, 0);
    return r;
}

/* Run k's inputs, outside the timed region: set k % KBV_NSETS (in-place
 * buffers drawn again), a few elements of it changed from any run before. */
static CUresult prepare_run(kbv_ctx *v, timing *tm, int k)
{
    int j = k % KBV_NSETS;
    kbv_use_input_set(v, tm->s, j);
    CUresult r = CUDA_SUCCESS;
    if (tm->has_inout)
        r = kbv_gen_inputs(v, tm->seed + (uint64_t)j * 0x9E37ull, 0, NULL);
    if (!r)
        r = kbv_perturb_inputs(v, tm->seed ^ (0x7E57ull * (uint64_t)(k + 1)), 0,
                               KBV_RUN_CHANGES);
    return r;
}

/* Queues timed run k of one side between its two events. */
static CUresult queue_run(kbv_ctx *v, timing *tm, int k, int cand)
{
    kbv_gpu *g = v->gpu;
    unsigned flush_words = (unsigned)(g->flush_bytes / 4);
    CUresult r = cuMemsetD32Async(g->flush, (unsigned)k, flush_words, g->stream);
    if (!r && cand)
        r = kbv_poison_side(v, 1, KBV_POISON_NAN);
    CUevent *pe = &tm->ev[(k * 2 + cand) * 2];
    if (!r)
        r = cuEventRecord(pe[0], g->stream);
    if (!r)
        r = cand ? kbv_run_side(v, 1) : run_baseline(v, tm);
    if (!r)
        r = cuEventRecord(pe[1], g->stream);
    return r;
}

/* After run k (the one re-checked, or the last): the reference's results
 * on that run's inputs in the reference's buffers (the baseline's, when
 * the reference is the baseline; else the reference run, untimed), and
 * for the run re-checked both sides' results kept aside. */
static CUresult after_run(kbv_ctx *v, timing *tm, int k)
{
    const kb_task *t = v->task;
    kbv_gpu *g = v->gpu;
    CUresult r = CUDA_SUCCESS;
    if (tm->use_blas && !tm->has_inout)
        r = kbv_run_side(v, 0);
    for (size_t i = 0; i < t->nparams && !r && k == tm->rcheck; i++)
        if (kbv_is_result(&t->params[i])) {
            r = cuMemcpyDtoDAsync(v->ps[i].chk.ptr, v->ps[i].cand.ptr,
                                  v->ps[i].bytes, g->stream);
            if (!r)
                r = cuMemcpyDtoDAsync(v->ps[i].gold.ptr, v->ps[i].ref.ptr,
                                      v->ps[i].bytes, g->stream);
        }
    return r;
}

/* Queues the comparison of run k's outputs with the baseline's on the
 * same inputs (the reference's, or the library's) into run k's slot. */
static CUresult queue_check(kbv_ctx *v, timing *tm, int k)
{
    const kb_task *t = v->task;
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < t->nparams && !r; i++) {
        if (!kbv_is_result(&t->params[i]))
            continue;
        CUdeviceptr c = v->ps[i].cand.ptr, b = v->ps[i].ref.ptr, no = 0;
        CUdeviceptr res = tm->cmp + (size_t)k * sizeof(kbv_cmp);
        unsigned long long n = v->ps[i].elems;
        int dt = (int)t->params[i].dtype;
        double k0 = 0;
        void *a[] = { &c, &b, &n, &dt, &tm->atol, &tm->rtol, &res, &no, &k0 };
        r = kbv_gpu_launch1(v->gpu, v->gpu->k_compare, n, a);
    }
    return r;
}

/* The first run whose outputs differ from the baseline's (slots read
 * back), or -1; its mismatches in *nbad. */
static int first_bad_run(timing *tm, unsigned long long *nbad)
{
    kbv_cmp *c = calloc((size_t)tm->runs, sizeof *c);
    int bad = -1;
    if (c && cuMemcpyDtoH(c, tm->cmp, (size_t)tm->runs * sizeof *c) == CUDA_SUCCESS)
        for (int k = 0; k < tm->runs && bad < 0; k++)
            if (c[k].nbad) {
                bad = k;
                *nbad = c[k].nbad;
            }
    free(c);
    return bad;
}

/* Slots for the runs' comparisons, first_bad at ~0. */
static CUresult alloc_checks(kbv_gpu *g, timing *tm)
{
    size_t bytes = (size_t)tm->runs * sizeof(kbv_cmp);
    CUresult r = cuMemAlloc(&tm->cmp, bytes);
    kbv_cmp *init = calloc((size_t)tm->runs, sizeof *init);
    for (int k = 0; init && k < tm->runs; k++)
        init[k].first_bad = ~0ull;
    if (!r)
        r = init ? cuMemcpyHtoDAsync(tm->cmp, init, bytes, g->stream) : CUDA_ERROR_OUT_OF_MEMORY;
    free(init);
    return r;
}

/* The timed runs, interleaved, and the wait for them. */
static int timed_runs(kbv_ctx *v, timing *tm)
{
    int runs = tm->runs, to = 0;
    tm->ev = calloc((size_t)runs * 4, sizeof *tm->ev);
    for (int i = 0; i < runs * 4; i++)
        cuEventCreate(&tm->ev[i], CU_EVENT_DEFAULT);
    CUresult r = alloc_checks(v->gpu, tm);
    if (!r)
        r = draw_sets(v, tm);
    for (int k = 0; k < runs && !r; k++) {
        r = prepare_run(v, tm, k);
        for (int side2 = 0; side2 < 2 && !r; side2++) {
            int cand = (k % 2) ? side2 : !side2;   /* alternate the order */
            r = queue_run(v, tm, k, cand);
        }
        if (!r && !tm->use_blas)   /* the baseline's outputs are the reference's */
            r = queue_check(v, tm, k);
        if (!r && (k == tm->rcheck || k == runs - 1))
            r = after_run(v, tm, k);
    }
    if (!r)
        r = kbv_gpu_sync(v->gpu, v->o->timeout_ms + runs * 2 * (tm->tc + tm->tb + 1.0), &to);
    kbv_use_input_set(v, tm->s, 0);
    if ((to || r) && tm->cmp) {
        cuMemFree(tm->cmp);
        tm->cmp = 0;
    }
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

/* Each input set's median of t (runs k with k % KBV_NSETS == j), as an
 * array: where memory placed a set shows here. */
static cJSON *by_set(const double *t, int runs)
{
    cJSON *a = cJSON_CreateArray();
    double *x = calloc((size_t)runs, sizeof *x);
    for (int j = 0; j < KBV_NSETS && x; j++) {
        int n = 0;
        for (int k = j; k < runs; k += KBV_NSETS)
            x[n++] = t[k];
        double med = 0;
        if (n)
            cJSON_Delete(stats_json(x, n, &med));
        cJSON_AddItemToArray(a, cJSON_CreateNumber(round(med * 1e5) / 1e5));
    }
    free(x);
    return a;
}

/* The runs' times into the shape's entry: each side's, each input set's,
 * and the ratio of each run's pair (baseline over candidate, measured
 * next to each other) with its interval, into *lo and *hi. Returns the
 * speedup, the candidate's median in *mc and the roofline floor in
 * *floor_ms. */
static double report_times(kbv_ctx *v, timing *tm, double *mc, double *floor_ms,
                           double *lo, double *hi)
{
    int runs = tm->runs;
    double *tcand = calloc((size_t)runs, sizeof(double));
    double *tbase = calloc((size_t)runs, sizeof(double));
    double *ratio = calloc((size_t)runs, sizeof(double));
    for (int k = 0; k < runs; k++) {
        float a = 0, b = 0;
        cuEventElapsedTime(&a, tm->ev[(k * 2 + 1) * 2], tm->ev[(k * 2 + 1) * 2 + 1]);
        cuEventElapsedTime(&b, tm->ev[(k * 2) * 2], tm->ev[(k * 2) * 2 + 1]);
        tcand[k] = a;
        tbase[k] = b;
        ratio[k] = a > 0 ? b / a : 0;
    }
    for (int i = 0; i < runs * 4; i++)
        cuEventDestroy(tm->ev[i]);
    free(tm->ev);
    tm->ev = NULL;
    double mb, mr;
    cJSON_AddNumberToObject(tm->tj, "runs", runs);
    cJSON_AddNumberToObject(tm->tj, "input_sets", KBV_NSETS);
    cJSON_AddNumberToObject(tm->tj, "changed_per_run", KBV_RUN_CHANGES);
    cJSON_AddItemToObject(tm->tj, "candidate_ms_by_set", by_set(tcand, runs));
    cJSON_AddItemToObject(tm->tj, "baseline_ms_by_set", by_set(tbase, runs));
    cJSON_AddItemToObject(tm->tj, "candidate_ms", stats_json(tcand, runs, mc));
    cJSON_AddItemToObject(tm->tj, "baseline_ms", stats_json(tbase, runs, &mb));
    cJSON *rj = stats_json(ratio, runs, &mr);
    cJSON_AddItemToObject(tm->tj, "ratio", rj);
    *lo = cJSON_GetNumberValue(cJSON_GetObjectItem(rj, "ci95_lo"));
    *hi = cJSON_GetNumberValue(cJSON_GetObjectItem(rj, "ci95_hi"));
    free(tcand);
    free(tbase);
    free(ratio);
    double speedup = *mc > 0 ? mb / *mc : 0;
    *floor_ms = roof_floor_ms(v, tm->s);
    cJSON_AddNumberToObject(tm->tj, "speedup", speedup);
    cJSON_AddNumberToObject(tm->tj, "floor_ms", *floor_ms);
    cJSON_AddNumberToObject(tm->tj, "candidate_over_floor", *floor_ms > 0 ? *mc / *floor_ms : 0);
    return speedup;
}

/* The outputs of two timed runs against the reference on their own inputs:
 * the last (still in place), and one picked at random (kept aside). */
static int recheck_outputs(kbv_ctx *v, timing *tm)
{
    const kb_task *t = v->task;
    int ok = 1;
    unsigned long long nb = 0;
    int bad = tm->use_blas ? -1 : first_bad_run(tm, &nb);
    cuMemFree(tm->cmp);
    tm->cmp = 0;
    if (bad >= 0) {
        ok = 0;
        kbv_set_verdict(v, "incorrect", "the output of timed run %d of %d on shape "
                        "'%s' differs from the reference's on that run's own inputs "
                        "(%llu mismatches; every timed run's inputs differ from any "
                        "run's before in %d elements of each input): a result "
                        "replayed from an earlier launch, or right only when checked",
                        bad + 1, tm->runs, tm->s->name, nb, KBV_RUN_CHANGES);
    }
    for (size_t i = 0; i < t->nparams; i++) {
        if (!kbv_is_result(&t->params[i]))
            continue;
        kbv_cmp m1, m2;
        CUresult r = kbv_compare(v, i, v->ps[i].cand.ptr, v->ps[i].ref.ptr,
                                 tm->atol, tm->rtol, &m1);
        if (!r)
            r = kbv_compare(v, i, v->ps[i].chk.ptr, v->ps[i].gold.ptr,
                            tm->atol, tm->rtol, &m2);
        if (r) {
            kbv_cuda_failed(v, r, "re-checking the timed outputs");
            return -1;
        }
        if (ok && (m1.nbad || m2.nbad)) {
            ok = 0;
            kbv_set_verdict(v, "incorrect", "the output of timed run %d on "
                            "shape '%s' differs from the reference on that "
                            "run's own inputs (%llu mismatches; every timed run's "
                            "inputs differ from any run's before in %d elements "
                            "of each input): a result replayed from an earlier "
                            "launch, or right only when checked",
                            m1.nbad ? tm->runs : tm->rcheck + 1, tm->s->name,
                            m1.nbad ? m1.nbad : m2.nbad, KBV_RUN_CHANGES);
        }
    }
    cJSON_AddBoolToObject(tm->tj, "timed_outputs_ok", ok);
    cJSON_AddNumberToObject(tm->tj, "rechecked_run", tm->rcheck + 1);
    return ok ? 0 : -1;
}

/* Flags what cannot be true, and adds the speedup to the geomean. */
static void judge(kbv_ctx *v, const timing *tm, double mc, double floor_ms,
                  double speedup, double lo, double hi)
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
        v->speed_lo_log += log(lo > 0 ? lo : speedup);
        v->speed_hi_log += log(hi > 0 ? hi : speedup);
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
    for (size_t i = 0; i < t->nparams; i++)
        tm.has_inout |= t->params[i].role == KB_ROLE_INOUT;
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
    double mc, floor_ms, lo, hi, speedup = report_times(v, &tm, &mc, &floor_ms, &lo, &hi);
    if (recheck_outputs(v, &tm))
        return -1;
    judge(v, &tm, mc, floor_ms, speedup, lo, hi);
    return 0;
}
