/* buffers.c - device buffers for one shape: each between two guards that
 * catch writes outside it, outputs poisoned (NaN, then a finite sentinel)
 * before a run so that a kernel which writes nothing cannot pass, or primed
 * with a valid result of other inputs so that one which skips work when its
 * output looks done cannot either. */
#include "verify/kb-verify/verify_int.h"

#include <string.h>

int kbv_is_buffer(const kb_task_param *p)
{
    return p->role <= KB_ROLE_SCRATCH;
}

int kbv_is_result(const kb_task_param *p)
{
    return p->role == KB_ROLE_OUTPUT || p->role == KB_ROLE_INOUT;
}

static void dbuf_free(kbv_dbuf *b)
{
    if (b->base)
        cuMemFree(b->base);
    memset(b, 0, sizeof *b);
}

CUresult kbv_dbuf_alloc(kbv_gpu *g, kbv_dbuf *b, size_t bytes)
{
    memset(b, 0, sizeof *b);
    size_t body = (bytes + 255) & ~(size_t)255;
    b->alloc = KBV_GUARD + (body ? body : 256) + KBV_GUARD;
    CUresult r = cuMemAlloc(&b->base, b->alloc);
    if (r)
        return r;
    b->ptr = b->base + KBV_GUARD;
    b->bytes = bytes;
    return cuMemsetD8Async(b->base, KBV_GUARD_BYTE, b->alloc, g->stream);
}

/* counts changed guard bytes of b (queued; read after sync) */
CUresult kbv_dbuf_guard_check(kbv_gpu *g, const kbv_dbuf *b, CUdeviceptr counter)
{
    unsigned pat = KBV_GUARD_BYTE;
    unsigned long long n1 = KBV_GUARD;
    CUdeviceptr p1 = b->base;
    void *a1[] = { &p1, &n1, &pat, &counter };
    CUresult r = kbv_gpu_launch1(g, g->k_guard, n1, a1);
    CUdeviceptr p2 = b->ptr + b->bytes;
    unsigned long long n2 = b->alloc - KBV_GUARD - b->bytes;
    void *a2[] = { &p2, &n2, &pat, &counter };
    if (!r)
        r = kbv_gpu_launch1(g, g->k_guard, n2, a2);
    return r;
}

CUresult kbv_reset_guards(kbv_ctx *v)
{
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < v->task->nparams && !r; i++) {
        kbv_dbuf *bs[2] = { &v->ps[i].in, &v->ps[i].cand };
        for (int k = 0; k < 2 && !r; k++)
            if (bs[k]->base)
                r = cuMemsetD8Async(bs[k]->base, KBV_GUARD_BYTE, KBV_GUARD,
                                    v->gpu->stream);
    }
    return r;
}

static CUresult poison(kbv_gpu *g, CUdeviceptr p, size_t bytes, kb_dtype t,
                       int kind)
{
    if (!bytes)
        return CUDA_SUCCESS;
    if (kb_dtype_size(t) == 2)
        return cuMemsetD16Async(p, kind == KBV_POISON_NAN ? 0x7FC0 : 0xC7C7,
                                bytes / 2, g->stream);
    if (bytes % 4)
        return cuMemsetD8Async(p, 0xC7, bytes, g->stream);
    return cuMemsetD32Async(p, kind == KBV_POISON_NAN ? 0x7FC00000u : 0xC7C7C7C7u,
                            bytes / 4, g->stream);
}

CUresult kbv_poison_side(kbv_ctx *v, int cand, int kind)
{
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < v->task->nparams && !r; i++) {
        const kb_task_param *p = &v->task->params[i];
        if (p->role != KB_ROLE_OUTPUT && p->role != KB_ROLE_SCRATCH)
            continue;
        kbv_dbuf *b = cand ? &v->ps[i].cand : &v->ps[i].ref;
        if (p->role == KB_ROLE_OUTPUT && kind == KBV_POISON_PRIMED)
            r = cuMemcpyDtoDAsync(b->ptr, v->ps[i].prev.ptr, b->bytes,
                                  v->gpu->stream);
        else
            r = poison(v->gpu, b->ptr, b->bytes, p->dtype,
                       p->role == KB_ROLE_SCRATCH ? KBV_POISON_SENTINEL : kind);
    }
    return r;
}

CUresult kbv_keep_reference(kbv_ctx *v)
{
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < v->task->nparams && !r; i++)
        if (kbv_is_result(&v->task->params[i]))
            r = cuMemcpyDtoDAsync(v->ps[i].prev.ptr, v->ps[i].ref.ptr,
                                  v->ps[i].bytes, v->gpu->stream);
    return r;
}

static void set_scalar(kbv_param *st, kb_dtype t)
{
    switch (t) {
    case KB_DT_F32: st->scalar.f = (float)st->val; break;
    case KB_DT_F64: st->scalar.d = st->val; break;
    case KB_DT_U32: st->scalar.u = (unsigned)st->val; break;
    default: st->scalar.i = (int)st->val; break;
    }
}

/* A buffer parameter's device memory: one buffer for an input, one per
 * side for the rest, for results the reference's result of the trial
 * before, and for timed results the timed runs' copies. */
static CUresult alloc_param(kbv_gpu *g, const kb_task_param *p, kbv_param *st,
                            int timed)
{
    CUresult r;
    if (p->role == KB_ROLE_INPUT) {
        r = kbv_dbuf_alloc(g, &st->in, st->bytes);
        /* the timed runs rotate over KBV_NSETS input sets */
        for (int k = 0; timed && !r && k < KBV_NSETS - 1; k++)
            r = kbv_dbuf_alloc(g, &st->rot[k], st->bytes);
        st->cand_arg = st->ref_arg = st->in.ptr;
        return r;
    }
    r = kbv_dbuf_alloc(g, &st->cand, st->bytes);
    if (!r)
        r = kbv_dbuf_alloc(g, &st->ref, st->bytes);
    if (!r && kbv_is_result(p))
        r = kbv_dbuf_alloc(g, &st->prev, st->bytes);
    /* the timed runs' outputs are kept and re-checked */
    if (!r && timed && p->role != KB_ROLE_SCRATCH)
        r = kbv_dbuf_alloc(g, &st->gold, st->bytes);
    if (!r && timed && p->role != KB_ROLE_SCRATCH)
        r = kbv_dbuf_alloc(g, &st->chk, st->bytes);
    st->cand_arg = st->cand.ptr;
    st->ref_arg = st->ref.ptr;
    return r;
}

int kbv_shape_alloc(kbv_ctx *v, const kb_shape *s, int timed)
{
    kb_err err;
    kb_err_clear(&err);
    for (size_t i = 0; i < v->task->nparams; i++) {
        const kb_task_param *p = &v->task->params[i];
        kbv_param *st = &v->ps[i];
        memset(st, 0, sizeof *st);
        if (kb_task_eval(v->task, s, kbv_is_buffer(p) ? p->size : p->value,
                         &st->val, &err)) {
            kbv_set_verdict(v, "error", "%s", err.msg);
            return -1;
        }
        if (!kbv_is_buffer(p)) {
            set_scalar(st, p->dtype);
            continue;
        }
        st->elems = (size_t)st->val;
        st->bytes = st->elems * kb_dtype_size(p->dtype);
        CUresult r = alloc_param(v->gpu, p, st, timed);
        if (r) {
            kbv_set_verdict(v, "error", "cannot allocate %zu bytes for '%s': %s",
                            st->bytes, p->name, kbv_cu_name(r));
            return -1;
        }
    }
    return 0;
}

void kbv_shape_free(kbv_ctx *v)
{
    for (size_t i = 0; v->ps && i < v->task->nparams; i++) {
        kbv_param *st = &v->ps[i];
        dbuf_free(&st->in);
        dbuf_free(&st->cand);
        dbuf_free(&st->ref);
        dbuf_free(&st->gold);
        dbuf_free(&st->chk);
        dbuf_free(&st->prev);
        dbuf_free(&st->sref);
        dbuf_free(&st->scand);
        dbuf_free(&st->sens);
        for (int k = 0; k < KBV_NSETS - 1; k++)
            dbuf_free(&st->rot[k]);
    }
}
