/* sens.c - how sensitive the reference's result is to its inputs'
 * rounding, asked only when a candidate's output misses the tolerance:
 * the reference run again on the trial's inputs jittered by a few units in
 * the last place (KBV_SENS_RUNS times), and, per element, the most its
 * result moved. An ill-conditioned element (a layernorm of three values
 * close together, whose variance is all cancellation) moves far, and its
 * tolerance grows with it; a well-conditioned one does not move, and a
 * wrong candidate stays wrong there. */
#include "verify/kb-verify/verify_int.h"

#include <string.h>

/* the buffer of k's inputs that the reference reads */
static CUdeviceptr ref_input(const kbv_ctx *v, size_t i)
{
    const kb_task_param *p = &v->task->params[i];
    return p->role == KB_ROLE_INPUT ? v->ps[i].ref_arg
         : p->role == KB_ROLE_INOUT ? v->ps[i].ref.ptr : 0;
}

/* Moves every floating-point input (and the reference's inout buffers)
 * by up to KBV_SENS_ULPS units in the last place, at random from seed. */
static CUresult jitter_inputs(kbv_ctx *v, uint64_t seed)
{
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < v->task->nparams && !r; i++) {
        CUdeviceptr p = ref_input(v, i);
        if (!p)
            continue;
        unsigned long long n = v->ps[i].elems, sd = seed * 0x9E3779B97F4A7C15ull + i;
        int dt = (int)v->task->params[i].dtype;
        double ulps = KBV_SENS_ULPS;
        void *a[] = { &p, &n, &dt, &sd, &ulps };
        r = kbv_gpu_launch1(v->gpu, v->gpu->k_jitter, n, a);
    }
    return r;
}

/* Keeps both sides' results aside (the buffers made on the first need)
 * and zeroes the sensitivities. */
static CUresult keep_sides(kbv_ctx *v)
{
    kbv_gpu *g = v->gpu;
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < v->task->nparams && !r; i++) {
        if (!kbv_is_result(&v->task->params[i]))
            continue;
        kbv_param *st = &v->ps[i];
        if (!st->sens.base) {
            r = kbv_dbuf_alloc(g, &st->sref, st->bytes);
            if (!r)
                r = kbv_dbuf_alloc(g, &st->scand, st->bytes);
            if (!r)
                r = kbv_dbuf_alloc(g, &st->sens, st->elems * sizeof(float));
        }
        if (!r)
            r = cuMemcpyDtoDAsync(st->sref.ptr, st->ref.ptr, st->bytes, g->stream);
        if (!r)
            r = cuMemcpyDtoDAsync(st->scand.ptr, st->cand.ptr, st->bytes, g->stream);
        if (!r)
            r = cuMemsetD32Async(st->sens.ptr, 0, st->elems, g->stream);
    }
    return r;
}

/* sens = max(sens, |kept reference - reference now|) for every result */
static CUresult add_sensitivity(kbv_ctx *v)
{
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < v->task->nparams && !r; i++) {
        if (!kbv_is_result(&v->task->params[i]))
            continue;
        kbv_param *st = &v->ps[i];
        unsigned long long n = st->elems;
        int dt = (int)v->task->params[i].dtype;
        void *a[] = { &st->sens.ptr, &st->sref.ptr, &st->ref.ptr, &n, &dt };
        r = kbv_gpu_launch1(v->gpu, v->gpu->k_sens, n, a);
    }
    return r;
}

/* Both sides' results back where they were. */
static CUresult restore_sides(kbv_ctx *v)
{
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < v->task->nparams && !r; i++) {
        if (!kbv_is_result(&v->task->params[i]))
            continue;
        kbv_param *st = &v->ps[i];
        r = cuMemcpyDtoDAsync(st->ref.ptr, st->sref.ptr, st->bytes, v->gpu->stream);
        if (!r)
            r = cuMemcpyDtoDAsync(st->cand.ptr, st->scand.ptr, st->bytes, v->gpu->stream);
    }
    return r;
}

int kbv_sensitivity(kbv_ctx *v, const kb_shape *s, kbv_redraw redraw, void *arg,
                    uint64_t seed)
{
    CUresult r = keep_sides(v);
    if (r) {
        kbv_cuda_failed(v, r, "keeping the results aside");
        return -1;
    }
    for (int j = 0; j < KBV_SENS_RUNS; j++) {
        r = redraw(v, arg);
        if (!r)
            r = jitter_inputs(v, seed + 0x5E45ull * (uint64_t)(j + 1));
        if (kbv_run_reference(v, s, r))
            return -1;
        if ((r = add_sensitivity(v)))
            break;
    }
    if (!r)
        r = redraw(v, arg);   /* the trial's own inputs again */
    if (!r)
        r = restore_sides(v);
    int to = 0;
    if (!r)
        r = kbv_gpu_sync(v->gpu, 60000, &to);
    if (r || to) {
        kbv_cuda_failed(v, r ? r : CUDA_ERROR_LAUNCH_TIMEOUT, "measuring the "
                        "reference's sensitivity");
        return -1;
    }
    return 0;
}
