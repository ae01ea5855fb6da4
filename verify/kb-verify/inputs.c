/* inputs.c - inputs generated on the device from a seed and each
 * parameter's distributions (the harness's kbv_fill), a few of their
 * elements changed for the trial that reuses the inputs before
 * (kbv_perturb), and their checksums, taken before and after the candidate
 * runs to show it left them alone. */
#include "verify/kb-verify/verify_int.h"

#include <stdlib.h>
#include <string.h>

/* harness.cu's kbv_fill: 0 uniform [a,b), 1 normal(a, b), 2 integers in
 * [a,b), 3 skewed integers in [a,b) */
typedef struct { int dist; double a, b; } dist_t;

/* "normal", "uniform(-1,1)", "randint(0,10)", "skewed(0,10)": 0, or -1
 * for one that is not a distribution of type t */
static int parse_dist(const char *s, kb_dtype t, dist_t *d)
{
    int is_int = t == KB_DT_I32 || t == KB_DT_U32;
    double a = 0, b = 0;
    const char *par = strchr(s, '(');
    size_t nl = par ? (size_t)(par - s) : strlen(s);
    int has = 0;
    if (par) {
        char *end;
        a = strtod(par + 1, &end);
        if (*end != ',')
            return -1;
        b = strtod(end + 1, &end);
        if (*end != ')')
            return -1;
        has = 1;
    }
    if (nl == 6 && strncmp(s, "normal", 6) == 0 && !is_int) {
        d->dist = 1, d->a = has ? a : 0, d->b = has ? b : 1;
    } else if (nl == 7 && strncmp(s, "uniform", 7) == 0 && !is_int) {
        d->dist = 0, d->a = has ? a : -1, d->b = has ? b : 1;
    } else if (nl == 7 && strncmp(s, "randint", 7) == 0 && has) {
        d->dist = 2, d->a = a, d->b = b;
    } else if (nl == 6 && strncmp(s, "skewed", 6) == 0 && has) {
        d->dist = 3, d->a = a, d->b = b;
    } else {
        return -1;
    }
    return 0;
}

/* Fills (k == 0) or perturbs (k elements changed) the inputs and both
 * sides' inout buffers with distribution di of each parameter. */
static CUresult draw_inputs(kbv_ctx *v, uint64_t seed, int di,
                            unsigned long long k, cJSON *dists)
{
    kbv_gpu *g = v->gpu;
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < v->task->nparams && !r; i++) {
        const kb_task_param *p = &v->task->params[i];
        kbv_param *s = &v->ps[i];
        if (p->role != KB_ROLE_INPUT && p->role != KB_ROLE_INOUT)
            continue;
        const char *dn = p->dists[(size_t)di % p->ndists];
        dist_t d;
        if (parse_dist(dn, p->dtype, &d) != 0)
            return CUDA_ERROR_INVALID_VALUE;
        if (dists)
            cJSON_AddStringToObject(dists, p->name, dn);
        int dt = (int)p->dtype, dist = d.dist;
        unsigned long long n = s->elems;
        uint64_t sd = seed * 0x100000001B3ull + i;
        /* an input: the set the launches get now (timing rotates them) */
        CUdeviceptr dst = p->role == KB_ROLE_INPUT ? s->ref_arg : s->ref.ptr;
        void *fa[] = { &dst, &n, &dt, &dist, &d.a, &d.b, &sd };
        void *pa[] = { &dst, &n, &dt, &dist, &d.a, &d.b, &sd, &k };
        r = k ? kbv_gpu_launch1(g, g->k_perturb, k, pa)
              : kbv_gpu_launch1(g, g->k_fill, n, fa);
        if (!r && p->role == KB_ROLE_INOUT)
            r = cuMemcpyDtoDAsync(s->cand.ptr, s->ref.ptr, s->bytes, g->stream);
    }
    return r;
}

CUresult kbv_gen_inputs(kbv_ctx *v, uint64_t seed, int di, cJSON *dists)
{
    return draw_inputs(v, seed, di, 0, dists);
}

CUresult kbv_perturb_inputs(kbv_ctx *v, uint64_t seed, int di,
                            unsigned long long k)
{
    return draw_inputs(v, seed, di, k ? k : 1, NULL);
}

CUresult kbv_checksum_inputs(kbv_ctx *v, unsigned long long *sums)
{
    kbv_gpu *g = v->gpu;
    size_t np = v->task->nparams;
    CUresult r = cuMemsetD8Async(g->dres, 0, np * 8, g->stream);
    for (size_t i = 0; i < np && !r; i++) {
        if (v->task->params[i].role != KB_ROLE_INPUT)
            continue;
        CUdeviceptr p = v->ps[i].in.ptr, out = g->dres + i * 8;
        unsigned long long nb = v->ps[i].bytes;
        void *a[] = { &p, &nb, &out };
        r = kbv_gpu_launch1(g, g->k_checksum, nb / 4 + 1, a);
    }
    if (!r)
        r = cuMemcpyDtoHAsync(sums, g->dres, np * 8, g->stream);
    return r;
}
