/* reference.c - `kb-verify --reference`: a task's reference.cu on the
 * shapes cheap enough for the CPU, against the task's CPU float64
 * implementation (cpuref.c), one seed per input distribution. */
#include "verify/kb-verify/verify_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the reference's inputs and outputs on the host, as doubles */
typedef struct {
    size_t np;
    double **bufs;             /* inputs, then the CPU's outputs */
    double *vals;              /* dims and scalars */
    double **gpu_out;          /* the reference's outputs */
} host_side;

static void host_free(host_side *h)
{
    for (size_t i = 0; i < h->np; i++) {
        free(h->bufs[i]);
        free(h->gpu_out[i]);
    }
    free(h->bufs);
    free(h->vals);
    free(h->gpu_out);
}

/* Reads src, parameter st's buffer on one side, back as doubles. Caller
 * frees. */
static double *read_back(const kb_task_param *p, const kbv_param *st, CUdeviceptr src)
{
    unsigned char *h = malloc(st->bytes + 1);
    size_t es = kb_dtype_size(p->dtype);
    cuMemcpyDtoH(h, src, st->bytes);
    double *d = calloc(st->elems + 1, sizeof(double));
    for (size_t k = 0; k < st->elems; k++)
        d[k] = kbv_to_double(h + k * es, p->dtype);
    free(h);
    return d;
}

static void to_host(kbv_ctx *v, host_side *h)
{
    size_t np = v->task->nparams;
    h->np = np;
    h->bufs = calloc(np, sizeof *h->bufs);
    h->vals = calloc(np, sizeof *h->vals);
    h->gpu_out = calloc(np, sizeof *h->gpu_out);
    for (size_t i = 0; i < np; i++) {
        const kb_task_param *p = &v->task->params[i];
        kbv_param *st = &v->ps[i];
        h->vals[i] = p->role == KB_ROLE_SCALAR && p->dtype == KB_DT_F32
                   ? (double)st->scalar.f : st->val;
        if (!kbv_is_buffer(p))
            continue;
        h->bufs[i] = calloc(st->elems + 1, sizeof(double));
        if (p->role == KB_ROLE_SCRATCH)
            continue;
        if (p->role == KB_ROLE_INPUT) {
            double *d = read_back(p, st, st->in.ptr);
            memcpy(h->bufs[i], d, st->elems * sizeof(double));
            free(d);
            continue;
        }
        h->gpu_out[i] = read_back(p, st, st->ref.ptr);
        if (p->role == KB_ROLE_INOUT) {
            /* the input, which the reference changed in place: the
             * candidate's side still holds it (both were drawn alike) */
            double *d = read_back(p, st, st->cand.ptr);
            memcpy(h->bufs[i], d, st->elems * sizeof(double));
            free(d);
        }
    }
}

/* Output i of the reference against the CPU's, each element's tolerance
 * grown by KBV_SENS_K times its sensitivity when sens is given; 1 if it
 * matched (else, with final, the verdict). */
static int compare_output(kbv_ctx *v, const kb_shape *s, cJSON *c,
                          const host_side *h, size_t i, double atol, double rtol,
                          const double *sens, int final)
{
    const double *gout = h->gpu_out[i], *cpu = h->bufs[i];
    double mabs = 0, mrel = 0;
    size_t nbad = 0, first = 0;
    for (size_t k = 0; k < v->ps[i].elems; k++) {
        double g = gout[k], c0 = cpu[k];
        double e = fabs(g - c0);
        if (!isfinite(g) || e > atol + rtol * fabs(c0) + (sens ? KBV_SENS_K * sens[k] : 0)) {
            if (!nbad++)
                first = k;
        }
        if (isfinite(e)) {
            if (e > mabs)
                mabs = e;
            if (e / fmax(fabs(c0), 1e-30) > mrel)
                mrel = e / fmax(fabs(c0), 1e-30);
        }
    }
    if (!final && nbad)
        return 0;
    kbv_add_num(c, "max_abs_err", mabs);
    kbv_add_num(c, "max_rel_err", mrel);
    cJSON_AddNumberToObject(c, "mismatches", (double)nbad);
    if (sens)
        cJSON_AddBoolToObject(c, "tolerance_from_sensitivity", 1);
    if (!nbad)
        return 1;
    kbv_set_verdict(v, "incorrect", "the reference differs from "
                    "the CPU float64 result on shape '%s' (%zu "
                    "mismatches, first at %zu: %g vs %g)", s->name,
                    nbad, first, gout[first], cpu[first]);
    return 0;
}

/* The relative unit in the last place of a type's values. */
static double type_eps(kb_dtype t)
{
    return t == KB_DT_BF16 ? 0x1p-7 : t == KB_DT_F16 ? 0x1p-10
         : t == KB_DT_F64 ? 0x1p-52 : 0x1p-23;
}

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The float64 result's sensitivity to its inputs' rounding: the CPU
 * implementation run KBV_SENS_RUNS times more on the inputs jittered by up
 * to KBV_SENS_ULPS units in the last place of their type, and per element
 * of every output the most it moved; one array per parameter (NULL for
 * all but the outputs). Caller frees with host_free's rule. */
static double **cpu_sensitivity(kbv_ctx *v, const host_side *h, uint64_t seed)
{
    const kb_task *t = v->task;
    double **sens = calloc(h->np, sizeof *sens);
    for (int j = 0; sens && j < KBV_SENS_RUNS; j++) {
        host_side h2;
        to_host(v, &h2);
        for (size_t i = 0; i < h2.np; i++) {
            const kb_task_param *p = &t->params[i];
            if ((p->role != KB_ROLE_INPUT && p->role != KB_ROLE_INOUT) ||
                p->dtype == KB_DT_I32 || p->dtype == KB_DT_U32)
                continue;
            for (size_t k = 0; k < v->ps[i].elems; k++) {
                double u = (double)(splitmix(&seed) >> 11) * 0x1p-53 * 2.0 - 1.0;
                h2.bufs[i][k] *= 1.0 + u * KBV_SENS_ULPS * type_eps(p->dtype);
            }
        }
        kb_buf why;
        kb_buf_init(&why, 0);
        int bad = kbv_cpu_ref(t, h2.bufs, h2.vals, &why) != 0;
        kb_buf_release(&why);
        for (size_t i = 0; i < h2.np && !bad; i++) {
            if (!h->gpu_out[i])
                continue;
            if (!sens[i])
                sens[i] = calloc(v->ps[i].elems + 1, sizeof(double));
            for (size_t k = 0; sens[i] && k < v->ps[i].elems; k++) {
                double d = fabs(h->bufs[i][k] - h2.bufs[i][k]);
                if (isfinite(d) && d > sens[i][k])
                    sens[i][k] = d;
            }
        }
        host_free(&h2);
    }
    return sens;
}

/* Every output compared: with the plain tolerance, and (when one missed
 * it) all again with the tolerance the float64 result's sensitivity
 * gives. Returns 1 if all matched. */
static int compare_outputs(kbv_ctx *v, const kb_shape *s, cJSON *c, const host_side *h,
                           double atol, double rtol, uint64_t seed)
{
    int ok = 1;
    for (size_t i = 0; i < h->np && ok; i++)
        if (h->gpu_out[i] && !compare_output(v, s, c, h, i, atol, rtol, NULL, 0))
            ok = 0;
    double **sens = ok ? NULL : cpu_sensitivity(v, h, seed);
    ok = 1;
    for (size_t i = 0; i < h->np; i++)
        if (h->gpu_out[i] && !compare_output(v, s, c, h, i, atol, rtol,
                                             sens ? sens[i] : NULL, 1))
            ok = 0;
    for (size_t i = 0; sens && i < h->np; i++)
        free(sens[i]);
    free(sens);
    return ok;
}

/* The reference on distribution di, then the CPU on the same inputs.
 * Returns -1 when the reference failed, else 0 (a verdict may be set). */
static int ref_trial(kbv_ctx *v, const kb_shape *s, size_t si, int di,
                     int *nchecked)
{
    uint64_t seed = v->seed_base + (uint64_t)di * 31 + si * 1009;
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(v->checks, c);
    cJSON_AddStringToObject(c, "shape", s->name);
    cJSON *dj = cJSON_AddObjectToObject(c, "dist");
    if (kbv_run_reference(v, s, kbv_gen_inputs(v, seed, di, dj)))
        return -1;
    double atol = kbv_shape_tol(v, s, v->task->atol);
    double rtol = kbv_shape_tol(v, s, v->task->rtol);
    host_side h;
    to_host(v, &h);
    kb_buf why;
    kb_buf_init(&why, 0);
    double tc = kb_now_ms();
    if (kbv_cpu_ref(v->task, h.bufs, h.vals, &why) != 0) {
        kbv_set_verdict(v, "error", "%s", kbv_why_text(&why));
    } else {
        cJSON_AddNumberToObject(c, "cpu_ms", kb_now_ms() - tc);
        int ok = compare_outputs(v, s, c, &h, atol, rtol, seed);
        cJSON_AddBoolToObject(c, "ok", ok);
        (*nchecked)++;
    }
    kb_buf_release(&why);
    host_free(&h);
    return 0;
}

/* too large for the CPU in a test? */
static int cpu_sized(const kb_task *t, const kb_shape *s)
{
    double flops = 0, bytes = 0;
    if (t->roof_flops)
        kb_task_eval(t, s, t->roof_flops, &flops, NULL);
    if (t->roof_bytes)
        kb_task_eval(t, s, t->roof_bytes, &bytes, NULL);
    return !(flops > 3e9 || bytes > 64e6);
}

/* Every shape the CPU can take, two distributions each. */
static int check_shapes(kbv_ctx *v)
{
    const kb_task *t = v->task;
    int nchecked = 0;
    v->checks = cJSON_AddArrayToObject(v->res, "checks");
    v->ps = calloc(t->nparams, sizeof *v->ps);
    v->rl = calloc(t->nlaunches, sizeof *v->rl);
    v->seed_base = v->o->seed_set ? v->o->seed : 12345;
    for (size_t si = 0; si < t->nshapes && !v->verdict; si++) {
        const kb_shape *s = &t->shapes[si];
        if (!cpu_sized(t, s) || !kbv_shape_wanted(v->o, s->name))
            continue;
        if (kbv_shape_alloc(v, s, 0) ||
            kbv_resolve(v, s, v->rmod, t->launches, t->nlaunches, v->rl, 0))
            break;
        for (int di = 0; di < 2 && !v->verdict; di++)
            if (ref_trial(v, s, si, di, &nchecked))
                break;
        kbv_shape_free(v);
    }
    return nchecked;
}

cJSON *kbv_check_reference(kbv_gpu *gpu, const kbv_opts *o, const char *task_dir)
{
    kbv_ctx v;
    kbv_ctx_init(&v, gpu, o, task_dir, 0);
    double t0 = kb_now_ms();
    if (kbv_load_task(&v, task_dir) || kbv_open_reference(&v))
        goto out;
    int nchecked = check_shapes(&v);
    if (!v.verdict && nchecked == 0)
        kbv_set_verdict(&v, "error", "no shape is small enough for the CPU check");
    kbv_set_verdict(&v, "correct", "the reference matches the CPU float64 "
                    "implementation in %d checks", nchecked);
out:
    if (!v.verdict)
        kbv_set_verdict(&v, "error", "internal error");
    cJSON_AddStringToObject(v.res, "verdict", v.verdict);
    cJSON_AddStringToObject(v.res, "reason", kbv_why_text(&v.reason));
    cJSON_AddNumberToObject(v.res, "wall_ms", kb_now_ms() - t0);
    cJSON *res = v.res;
    kbv_ctx_release(&v);
    return res;
}
