/* check.c - correctness on one shape: every seed x input distribution, the
 * reference run first, the candidate's outputs poisoned (NaN and a finite
 * sentinel by turns; once primed with a valid result of other inputs)
 * before it runs, then its outputs compared with the reference's, its
 * inputs checked unchanged and its guards intact; and one trial on the
 * inputs of the trial before with a few elements changed, so that an
 * output must depend on the whole of its current input and on nothing
 * left over from an earlier launch. */
#include "verify/kb-verify/verify_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double kbv_to_double(const unsigned char *p, kb_dtype t)
{
    switch (t) {
    case KB_DT_F32: { float f; memcpy(&f, p, 4); return f; }
    case KB_DT_I32: { int32_t x; memcpy(&x, p, 4); return x; }
    case KB_DT_U32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case KB_DT_F64: { double x; memcpy(&x, p, 8); return x; }
    case KB_DT_BF16: { uint32_t u = 0; memcpy((char *)&u + 2, p, 2); float f; memcpy(&f, &u, 4); return f; }
    default: { /* f16 */
        uint16_t h; memcpy(&h, p, 2);
        int e = (h >> 10) & 31, m = h & 1023;
        double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
        return h & 0x8000 ? -v : v;
    } }
}

CUresult kbv_compare(kbv_ctx *v, size_t i, CUdeviceptr cand, CUdeviceptr ref,
                     double atol, double rtol, kbv_cmp *out)
{
    return kbv_compare_sens(v, i, cand, ref, atol, rtol, 0, 0.0, out);
}

CUresult kbv_compare_sens(kbv_ctx *v, size_t i, CUdeviceptr cand, CUdeviceptr ref,
                          double atol, double rtol, CUdeviceptr sens, double k,
                          kbv_cmp *out)
{
    kbv_gpu *g = v->gpu;
    const kb_task_param *p = &v->task->params[i];
    kbv_cmp init;
    memset(&init, 0, sizeof init);
    init.first_bad = ~0ull;
    CUdeviceptr res = g->dres + KBV_DRES_COMPARE;
    CUresult r = cuMemcpyHtoDAsync(res, &init, sizeof init, g->stream);
    unsigned long long n = v->ps[i].elems;
    int dt = (int)p->dtype;
    void *a[] = { &cand, &ref, &n, &dt, &atol, &rtol, &res, &sens, &k };
    if (!r)
        r = kbv_gpu_launch1(g, g->k_compare, n, a);
    if (!r)
        r = cuMemcpyDtoHAsync(out, res, sizeof *out, g->stream);
    int to;
    if (!r)
        r = kbv_gpu_sync(g, 10000, &to);
    if (!r && out->nbad && out->first_bad < n) {
        /* the values at the first mismatch, read back exactly */
        size_t es = kb_dtype_size(p->dtype);
        unsigned char cb[8] = { 0 }, rb[8] = { 0 };
        r = cuMemcpyDtoH(cb, cand + out->first_bad * es, es);
        if (!r)
            r = cuMemcpyDtoH(rb, ref + out->first_bad * es, es);
        memcpy(&out->cand_bits, cb, sizeof out->cand_bits);
        out->cand_at_first = kbv_to_double(cb, p->dtype);
        out->ref_at_first = kbv_to_double(rb, p->dtype);
    }
    return r;
}

static double bits_float(unsigned b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

void kbv_add_num(cJSON *o, const char *k, double x)
{
    if (isfinite(x))
        cJSON_AddNumberToObject(o, k, x);
    else
        cJSON_AddStringToObject(o, k, isnan(x) ? "nan" : x > 0 ? "inf" : "-inf");
}

static const char *poison_name(int kind)
{
    return kind == KBV_POISON_NAN ? "nan" : kind == KBV_POISON_SENTINEL
           ? "sentinel" : "primed";
}

/* one trial's state */
typedef struct {
    const kb_shape *s;
    uint64_t seed;                        /* its inputs: drawn from seed, */
    int di;                               /* distribution di, */
    size_t steps;                         /* then perturbed this often */
    int have_prev;                        /* prev holds the trial before's */
    int sens_ready;                       /* the sensitivities measured */
    double atol, rtol;
    unsigned long long *before, *after;   /* input checksums */
    int kind;                             /* the candidate's poison */
    int perturbed;                        /* the inputs of the trial before,
                                             a few elements changed */
    unsigned long long changed;           /* that many of each input */
    cJSON *c;                             /* the trial's "checks" entry */
} trial;

/* 1 if the reference's results differ from the trial before's beyond the
 * tolerance, 0 if not, -1 on a CUDA failure (verdict set). */
static int reference_changed(kbv_ctx *v, const trial *tr)
{
    for (size_t i = 0; i < v->task->nparams; i++) {
        if (!kbv_is_result(&v->task->params[i]))
            continue;
        kbv_cmp m;
        CUresult r = kbv_compare(v, i, v->ps[i].ref.ptr, v->ps[i].prev.ptr,
                                 tr->atol, tr->rtol, &m);
        if (r) {
            kbv_cuda_failed(v, r, "comparing the reference's results");
            return -1;
        }
        if (m.nbad)
            return 1;
    }
    return 0;
}

/* The perturbed trial's inputs: the trial before's again, with
 * KBV_PERTURB_ELEMS elements of each input changed, then more (up to 4096)
 * until the reference's result differs from the trial before's beyond the
 * tolerance (a change too small to show proves nothing); the reference run
 * on them. Each attempt draws the inputs again: an inout buffer holds the
 * reference's result after a run. Returns 0, or -1 (verdict set). */
static const unsigned long long more[] = { KBV_PERTURB_ELEMS, 240, 3840 };

/* The trial's inputs drawn again, exactly (a kbv_redraw). */
static CUresult draw_trial(kbv_ctx *v, void *arg)
{
    const trial *tr = arg;
    CUresult r = kbv_gen_inputs(v, tr->seed, tr->di, NULL);
    for (size_t b = 0; b < tr->steps && !r; b++)
        r = kbv_perturb_inputs(v, tr->seed ^ (0xD15EA5Eull + b), tr->di, more[b]);
    return r;
}

static int run_reference_perturbed(kbv_ctx *v, trial *tr, uint64_t seed, int di,
                                   cJSON *dj)
{
    const size_t nmore = sizeof more / sizeof more[0];
    int changed = 0;
    tr->changed = 0;
    for (size_t a = 0; a < nmore && !changed; a++) {
        CUresult r = kbv_gen_inputs(v, seed, di, a ? NULL : dj);
        for (size_t b = 0; b <= a && !r; b++)
            r = kbv_perturb_inputs(v, seed ^ (0xD15EA5Eull + b), di, more[b]);
        tr->changed += more[a];
        tr->steps = a + 1;
        if (kbv_run_reference(v, tr->s, r) || (changed = reference_changed(v, tr)) < 0)
            return -1;
    }
    size_t most = 0;   /* no input has fewer elements than it had changed */
    for (size_t i = 0; i < v->task->nparams; i++)
        if (v->ps[i].in.base && v->ps[i].elems > most)
            most = v->ps[i].elems;
    cJSON_AddNumberToObject(tr->c, "changed_elements",
                            (double)(tr->changed < most ? tr->changed : most));
    cJSON_AddBoolToObject(tr->c, "reference_changed", changed);
    return 0;
}

/* Checksums the inputs, poisons the candidate's outputs, rewrites the
 * guards, runs the candidate within the deadline. Returns 0 or -1. */
static int run_candidate(kbv_ctx *v, trial *tr)
{
    int to = 0;
    CUresult r = kbv_checksum_inputs(v, tr->before);
    if (!r)
        r = kbv_poison_side(v, 1, tr->kind);
    if (!r)
        r = kbv_reset_guards(v);
    if (r) {
        kbv_cuda_failed(v, r, "preparing a trial");
        return -1;
    }
    double t0 = kb_now_ms();
    r = kbv_run_side(v, 1);
    if (r) {
        kbv_cuda_failed(v, r, "launching the candidate");
        cJSON_AddStringToObject(tr->c, "error", kbv_cu_name(r));
        return -1;
    }
    r = kbv_gpu_sync(v->gpu, v->o->timeout_ms, &to);
    cJSON_AddNumberToObject(tr->c, "run_ms", round((kb_now_ms() - t0) * 1000) / 1000);
    if (to) {
        v->gpu->sticky = 1;
        kbv_set_verdict(v, "timeout", "the candidate ran over %.0f ms on "
                        "shape '%s'", v->o->timeout_ms, tr->s->name);
        cJSON_AddStringToObject(tr->c, "error", "timeout");
        return -1;
    }
    if (r) {
        kbv_cuda_failed(v, r, "the candidate failed");
        cJSON_AddStringToObject(tr->c, "error", kbv_cu_name(r));
        return -1;
    }
    return 0;
}

/* 1 if the candidate's element at the first mismatch still holds the
 * poison its output was given before the run (buffers.c's patterns). */
static int holds_poison(const kbv_ctx *v, const trial *tr, size_t i, const kbv_cmp *m)
{
    const kb_task_param *p = &v->task->params[i];
    size_t es = kb_dtype_size(p->dtype);
    if (tr->kind == KBV_POISON_PRIMED || p->role != KB_ROLE_OUTPUT || es > 8)
        return 0;
    unsigned long long want = 0;
    unsigned char *w = (unsigned char *)&want;
    for (size_t k = 0; k < es; k++) {
        if (es == 2)
            w[k] = tr->kind == KBV_POISON_NAN ? (k ? 0x7F : 0xC0) : 0xC7;
        else if (v->ps[i].bytes % 4)
            w[k] = 0xC7;
        else   /* 32-bit words */
            w[k] = tr->kind == KBV_POISON_SENTINEL ? 0xC7
                 : (unsigned char[]){ 0x00, 0x00, 0xC0, 0x7F }[k % 4];
    }
    unsigned long long got = 0;
    memcpy(&got, &m->cand_bits, es);
    return got == want;
}

/* The verdict of one mismatched output: stale (the output equals the
 * reference's result of the trial before: it primed the output, or this
 * trial's inputs differ from that one's in a few elements, or entirely),
 * left unwritten (it still holds the poison), or plainly different. */
static void output_verdict(kbv_ctx *v, const trial *tr, size_t i, const kbv_cmp *m,
                           int stale)
{
    const kb_task_param *p = &v->task->params[i];
    const char *name = p->name, *sh = tr->s->name;
    size_t ne = v->ps[i].elems;
    if (stale && tr->perturbed)
        kbv_set_verdict(v, "incorrect",
                        "the output did not change when the input did: with "
                        "%llu elements of each input changed from the trial "
                        "before, '%s' on shape '%s' still holds that trial's "
                        "result (%llu of %zu elements wrong, first at index "
                        "%llu: %g instead of %g)", tr->changed, name, sh,
                        m->nbad, ne, m->first_bad, m->cand_at_first, m->ref_at_first);
    else if (stale && tr->kind == KBV_POISON_PRIMED)
        kbv_set_verdict(v, "incorrect",
                        "the output kept a stale result: '%s' on shape '%s' "
                        "was primed with a valid result of other inputs and "
                        "the candidate left it as it was (%llu of %zu elements "
                        "wrong, first at index %llu: %g instead of %g)",
                        name, sh, m->nbad, ne, m->first_bad, m->cand_at_first,
                        m->ref_at_first);
    else if (stale)
        kbv_set_verdict(v, "incorrect",
                        "a result replayed from an earlier launch: '%s' on "
                        "shape '%s' holds the result of the trial before, "
                        "whose inputs were other draws (%llu of %zu elements "
                        "wrong, first at index %llu: %g instead of %g): a "
                        "cache kept across launches, keyed on less than the "
                        "whole input", name, sh, m->nbad, ne, m->first_bad,
                        m->cand_at_first, m->ref_at_first);
    else if (holds_poison(v, tr, i, m))
        kbv_set_verdict(v, "incorrect",
                        "'%s' on shape '%s' was left unwritten: element %llu "
                        "still holds the poison (%s) it was given before the "
                        "run, where the reference has %g (%llu of %zu elements "
                        "wrong): an output must be written in full, not left "
                        "to what its allocation held", name, sh, m->first_bad,
                        poison_name(tr->kind), m->ref_at_first, m->nbad, ne);
    else
        kbv_set_verdict(v, "incorrect",
                        "'%s' differs from the reference on shape '%s' "
                        "(%llu of %zu elements, first at index %llu: %g "
                        "instead of %g%s; poison %s%s)", name, sh,
                        m->nbad, ne, m->first_bad, m->cand_at_first, m->ref_at_first,
                        m->nonfinite ? ", non-finite output" : "",
                        poison_name(tr->kind),
                        tr->perturbed ? "; the trial before's inputs with a "
                        "few elements changed" : "");
}

/* One output's comparison in the trial's "outputs"; 1 if it matched. */
static int report_output(kbv_ctx *v, const trial *tr, size_t i, const kbv_cmp *m,
                         int stale, unsigned long long widened, cJSON *outs)
{
    const kb_task_param *p = &v->task->params[i];
    cJSON *oj = cJSON_CreateObject();
    cJSON_AddItemToArray(outs, oj);
    cJSON_AddStringToObject(oj, "name", p->name);
    cJSON_AddNumberToObject(oj, "mismatches", (double)m->nbad);
    cJSON_AddNumberToObject(oj, "nonfinite", (double)m->nonfinite);
    kbv_add_num(oj, "max_abs_err", bits_float(m->max_abs_bits));
    kbv_add_num(oj, "max_rel_err", bits_float(m->max_rel_bits));
    if (widened)   /* outside the plain tolerance, inside the sensitivity's */
        cJSON_AddNumberToObject(oj, "within_sensitivity", (double)widened);
    if (!m->nbad)
        return 1;
    cJSON_AddNumberToObject(oj, "first_bad", (double)m->first_bad);
    kbv_add_num(oj, "candidate_at_first_bad", m->cand_at_first);
    kbv_add_num(oj, "reference_at_first_bad", m->ref_at_first);
    if (stale)
        cJSON_AddBoolToObject(oj, "stale", 1);
    output_verdict(v, tr, i, m, stale);
    return 0;
}

/* A mismatch of a floating-point output judged again with the tolerance
 * grown by the reference's sensitivity (measured once a trial, on the
 * first need): *m becomes that comparison, *widened the elements it let
 * pass. Returns the CUDA error, or -1 when the sensitivity run failed. */
static int with_sensitivity(kbv_ctx *v, trial *tr, size_t i, kbv_cmp *m,
                            unsigned long long *widened)
{
    kb_dtype dt = v->task->params[i].dtype;
    *widened = 0;
    if (dt == KB_DT_I32 || dt == KB_DT_U32)
        return 0;
    if (!tr->sens_ready) {
        if (kbv_sensitivity(v, tr->s, draw_trial, tr, tr->seed ^ 0x5E45171Eull))
            return -1;
        tr->sens_ready = 1;
    }
    kbv_cmp m2;
    CUresult r = kbv_compare_sens(v, i, v->ps[i].cand.ptr, v->ps[i].ref.ptr, tr->atol,
                                  tr->rtol, v->ps[i].sens.ptr, KBV_SENS_K, &m2);
    if (r)
        return (int)r;
    *widened = m->nbad - m2.nbad;
    *m = m2;
    return 0;
}

/* Queues the inputs' checksums into tr->after and the guard count into
 * *gbad, and waits for them: before anything draws the inputs again. */
static CUresult inputs_after(kbv_ctx *v, trial *tr, unsigned long long *gbad)
{
    const kb_task *t = v->task;
    kbv_gpu *g = v->gpu;
    CUresult r = kbv_checksum_inputs(v, tr->after);
    CUdeviceptr gcount = g->dres + KBV_DRES_GUARDS;
    if (!r)
        r = cuMemsetD8Async(gcount, 0, 8, g->stream);
    for (size_t i = 0; i < t->nparams && !r; i++) {
        if (v->ps[i].in.base)
            r = kbv_dbuf_guard_check(g, &v->ps[i].in, gcount);
        if (!r && v->ps[i].cand.base)
            r = kbv_dbuf_guard_check(g, &v->ps[i].cand, gcount);
    }
    if (!r)
        r = cuMemcpyDtoHAsync(gbad, gcount, 8, g->stream);
    int to;
    if (!r)
        r = kbv_gpu_sync(g, 10000, &to);
    return r;
}

/* The inputs' checksums and the guard count (first, while the inputs are
 * the candidate's), then every output compared with the reference's (*ok
 * cleared on a mismatch; a mismatch of a floating-point output judged
 * again with the reference's sensitivity; one that remains compared with
 * the trial before's result too, to say whether it is stale). Returns a
 * CUDA error, or -1 (verdict set). */
static int check_outputs(kbv_ctx *v, trial *tr, int *ok, unsigned long long *gbad)
{
    const kb_task *t = v->task;
    CUresult r = inputs_after(v, tr, gbad);
    cJSON *outs = cJSON_AddArrayToObject(tr->c, "outputs");
    for (size_t i = 0; i < t->nparams && !r; i++) {
        if (!kbv_is_result(&t->params[i]))
            continue;
        kbv_cmp m, mp;
        unsigned long long widened = 0;
        r = kbv_compare(v, i, v->ps[i].cand.ptr, v->ps[i].ref.ptr, tr->atol,
                        tr->rtol, &m);
        if (!r && m.nbad) {
            int e = with_sensitivity(v, tr, i, &m, &widened);
            if (e < 0)
                return -1;
            r = (CUresult)e;
        }
        int stale = 0;
        if (!r && m.nbad && tr->have_prev) {
            r = kbv_compare(v, i, v->ps[i].cand.ptr, v->ps[i].prev.ptr,
                            tr->atol, tr->rtol, &mp);
            stale = !r && mp.nbad == 0;
        }
        if (r)
            break;
        if (!report_output(v, tr, i, &m, stale, widened, outs))
            *ok = 0;
    }
    return (int)r;
}

/* The inputs' checksums and the guards; 1 if both are as they were. */
static int inputs_and_guards(kbv_ctx *v, const trial *tr, unsigned long long gbad)
{
    const kb_task *t = v->task;
    int inputs_ok = 1;
    for (size_t i = 0; i < t->nparams; i++)
        if (t->params[i].role == KB_ROLE_INPUT && tr->before[i] != tr->after[i]) {
            inputs_ok = 0;
            kbv_set_verdict(v, "incorrect", "the candidate modified its "
                            "input '%s' on shape '%s'", t->params[i].name,
                            tr->s->name);
        }
    if (gbad)
        kbv_set_verdict(v, "incorrect", "the candidate wrote %llu bytes "
                        "outside its buffers on shape '%s'", gbad, tr->s->name);
    cJSON_AddBoolToObject(tr->c, "inputs_unchanged", inputs_ok);
    cJSON_AddBoolToObject(tr->c, "guards_intact", gbad == 0);
    return inputs_ok && gbad == 0;
}

/* One trial: reference, candidate, checks. Returns 0 if it passed. */
static int run_trial(kbv_ctx *v, trial *tr, uint64_t seed, int di)
{
    cJSON *c = cJSON_CreateObject();
    tr->c = c;
    cJSON_AddItemToArray(v->checks, c);
    cJSON_AddStringToObject(c, "shape", tr->s->name);
    cJSON_AddNumberToObject(c, "seed", (double)seed);
    cJSON *dj = cJSON_AddObjectToObject(c, "dist");
    cJSON_AddStringToObject(c, "poison", poison_name(tr->kind));
    cJSON_AddStringToObject(c, "inputs", tr->perturbed ? "perturbed" : "fresh");
    tr->seed = seed;
    tr->di = di;
    tr->steps = 0;
    tr->sens_ready = 0;
    int failed = tr->perturbed
               ? run_reference_perturbed(v, tr, seed, di, dj)
               : kbv_run_reference(v, tr->s, kbv_gen_inputs(v, seed, di, dj));
    if (failed || run_candidate(v, tr))
        return -1;
    int ok = 1;
    unsigned long long gbad = 0;
    int r = check_outputs(v, tr, &ok, &gbad);
    if (r > 0)
        kbv_cuda_failed(v, (CUresult)r, "checking the candidate's outputs");
    if (r)
        return -1;
    ok = inputs_and_guards(v, tr, gbad) && ok;
    cJSON_AddBoolToObject(c, "ok", ok);
    return ok ? 0 : -1;
}

/* Keeps the reference's results of the trial just run for the next. */
static int keep_reference(kbv_ctx *v)
{
    CUresult r = kbv_keep_reference(v);
    if (r)
        kbv_cuda_failed(v, r, "keeping the reference's results");
    return r ? -1 : 0;
}

/* The trials of a shape: seeds x distributions, fresh inputs each, the
 * poison NaN and the sentinel by turns, but trial KBV_PRIMED_TRIAL primed
 * with the trial before's result; and after the shape's first trial (a
 * cache of the first call at a shape) and the last seed's first, one on
 * its inputs with a few elements changed. Every trial after the first
 * keeps the reference's result of the one before, so that an output
 * replayed from an earlier launch is named as such. */
int kbv_check_shape(kbv_ctx *v, const kb_shape *s)
{
    const kb_task *t = v->task;
    size_t ndist = 2;
    for (size_t i = 0; i < t->nparams; i++)
        if (t->params[i].ndists > ndist)
            ndist = t->params[i].ndists;
    trial tr;
    memset(&tr, 0, sizeof tr);
    tr.s = s;
    tr.atol = kbv_shape_tol(v, s, t->atol);
    tr.rtol = kbv_shape_tol(v, s, t->rtol);
    tr.before = calloc(t->nparams, 8);
    tr.after = calloc(t->nparams, 8);
    int nfresh = KBV_NSEEDS * (int)ndist;
    int before_perturbed = (KBV_NSEEDS - 1) * (int)ndist;
    int failed = 0;
    for (int k = 0; k < nfresh && !failed; k++) {
        int di = k % (int)ndist;
        tr.kind = k == KBV_PRIMED_TRIAL ? KBV_POISON_PRIMED
                : k % 2 ? KBV_POISON_SENTINEL : KBV_POISON_NAN;
        tr.perturbed = 0;
        uint64_t seed = v->seed_base + (uint64_t)k * 7919 +
                        (uint64_t)(s - t->shapes) * 104729;
        failed = run_trial(v, &tr, seed, di) != 0 || keep_reference(v) != 0;
        tr.have_prev = 1;
        if (!failed && (k == 0 || k == before_perturbed)) {
            tr.kind = k % 2 ? KBV_POISON_NAN : KBV_POISON_SENTINEL;
            tr.perturbed = 1;
            failed = run_trial(v, &tr, seed, di) != 0 || keep_reference(v) != 0;
        }
    }
    free(tr.before);
    free(tr.after);
    return failed ? -1 : 0;
}
