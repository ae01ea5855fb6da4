/* verify.c - one verification, step by step: the task and the candidate's
 * source, refusals, the compile (overlapped with opening the GPU), then
 * every shape's correctness trials and timing, and the verdict. The
 * steps live in the files below it; the context and verdicts they share
 * in ctx.c. The result's fields are documented in docs/formats.md
 * ("kb-verify's result"). */
#include "verify/kb-verify/verify_int.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* Source held in memory (what names it) into v->src, which has a cap.
 * Returns 0 or -1 (verdict set). */
static int put_source(kbv_ctx *v, const char *what, const char *s)
{
    if (kb_buf_puts(&v->src, s) == KB_OK)
        return 0;
    size_t n = strlen(s);
    if (n > v->src.max)
        kbv_set_verdict(v, "error", "%s is too large (%zu bytes, limit %zu)",
                        what, n, v->src.max);
    else
        kbv_set_verdict(v, "error", "out of memory copying %s", what);
    return -1;
}

/* The candidate's source into v->src: inline, from its file, or (neither)
 * the reference as its own candidate. Returns 0 or -1 (verdict set). */
static int read_candidate(kbv_ctx *v, const char *cand_path, const char *src_inline)
{
    kb_err err;
    kb_err_clear(&err);
    if (src_inline)
        return put_source(v, "the candidate's source", src_inline);
    if (cand_path) {
        if (kb_read_file(cand_path, 8u << 20, &v->src, &err)) {
            kbv_set_verdict(v, "error", "%s", err.msg);
            return -1;
        }
        return 0;
    }
    return put_source(v, "the reference", v->rsrc.data);
}

/* Refusals, the header comments and their tensor maps; then the launch
 * sequence the candidate runs, reported. Returns 0 or -1 (verdict set). */
static int admit_candidate(kbv_ctx *v)
{
    kb_err err;
    kb_err_clear(&err);
    kb_buf why;
    kb_buf_init(&why, 0);
    int refused = kb_verify_refuse(v->src.data, &why);
    if (refused)
        kbv_set_verdict(v, "refused", "%s", kbv_why_text(&why));
    kb_buf_release(&why);
    if (refused)
        return -1;
    if (kb_cand_header_parse(v->src.data, &v->hdr, &err)) {
        kbv_set_verdict(v, "refused", "%s", err.msg);
        return -1;
    }
    if (kbv_check_maps(v) != 0)
        return -1;
    v->cseq = v->hdr.nlaunches ? v->hdr.launches : v->task->launches;
    v->ncseq = v->hdr.nlaunches ? v->hdr.nlaunches : v->task->nlaunches;
    kbv_launches_json(v);
    return 0;
}

/* 1 if name is C++'s mangling of the plain function want (_Z4geluPKfPfi
 * for gelu): the kernel was written without extern "C". */
static int mangles(const char *name, const char *want)
{
    if (strncmp(name, "_Z", 2) != 0)
        return 0;
    char *end;
    unsigned long n = strtoul(name + 2, &end, 10);
    return end != name + 2 && n == strlen(want) && strncmp(end, want, n) == 0;
}

/* Every kernel of the candidate's launch sequence must be one it defines
 * (an entry function of its cubin): else a compile_error that names the
 * kernel, the kernels found, and one that is the kernel's name mangled.
 * Returns 0 or -1 (verdict set). */
static int check_launch_kernels(kbv_ctx *v, cJSON *found)
{
    if (!found)
        return 0;   /* no ELF image read: the driver will say */
    for (size_t i = 0; i < v->ncseq; i++) {
        const char *want = v->cseq[i].kernel;
        const char *mangled = NULL;
        int have = 0;
        kb_buf names;
        kb_buf_init(&names, 0);
        kb_rc rc = KB_OK;
        cJSON *it;
        cJSON_ArrayForEach(it, found) {
            const char *n = cJSON_GetStringValue(it);
            have |= !strcmp(n, want);
            if (mangles(n, want))
                mangled = n;
            if (rc == KB_OK)
                rc = kb_buf_printf(&names, "%s'%s'", names.len ? ", " : "", n);
        }
        if (!have) {
            if (mangled)
                kbv_set_verdict(v, "compile_error", "the launch needs kernel "
                                "'%s', which the candidate does not define: "
                                "'%s' is '%s' without extern \"C\" (C++ "
                                "mangled its name)", want, mangled, want);
            else
                kbv_set_verdict(v, "compile_error", "the launch needs kernel "
                                "'%s', which the candidate does not define "
                                "(it defines %s)", want, rc != KB_OK ?
                                "kernels that do not fit here" : names.len ?
                                names.data : "no kernel");
        }
        kb_buf_release(&names);
        if (!have)
            return -1;
    }
    return 0;
}

/* The result's "state": the module-scope __device__ variables the
 * candidate defines, which keep what a launch wrote for the next; a note
 * (many honest kernels keep a tile counter there), not a verdict: the
 * trials on changed inputs and the timed runs' re-checks are what catch a
 * kernel that replays from it. */
static void state_note(kbv_ctx *v)
{
    cJSON *g = kbv_cubin_globals(&v->cc);
    if (!g || cJSON_GetArraySize(g) == 0) {
        cJSON_Delete(g);
        return;
    }
    cJSON *st = cJSON_AddObjectToObject(v->res, "state");
    cJSON_AddItemToObject(st, "device_variables", g);
    cJSON_AddStringToObject(st, "note", "module-scope __device__ variables persist "
                            "across launches: what one launch leaves there the next "
                            "can read");
}

typedef struct {
    kbv_gpu *gpu;
    kb_buf *why;
} opener_arg;

static void *gpu_open_thread(void *arg)
{
    opener_arg *a = arg;
    kbv_gpu_open(a->gpu, a->why);
    return NULL;
}

/* Compiles the candidate while the GPU opens (cuInit and a context take
 * ~0.1 s) for the architecture expected; a different device means a
 * recompile. Returns 0 or -1 (verdict set). */
static int compile_candidate(kbv_ctx *v, int compile_only)
{
    kbv_gpu *g = v->gpu;
    const kbv_opts *o = v->o;
    char arch[32];
    kb_buf why;
    kb_buf_init(&why, 0);
    opener_arg oa = { g, &why };
    pthread_t opener;
    int opening = !compile_only && !g->ok &&
                  pthread_create(&opener, NULL, gpu_open_thread, &oa) == 0;
    if (!compile_only && !g->ok && !opening)
        kbv_gpu_open(g, &why);
    if (opening)   /* g is the opener's until the join */
        snprintf(arch, sizeof arch, "%s", o->arch ? o->arch : v->hdr.arch ? v->hdr.arch : "sm_90");
    else
        kbv_default_arch(g, o, v->hdr.arch, arch, sizeof arch);
    kbv_compile(o, v->src.data, v->cand_name, arch, 0, &v->cc);
    if (opening) {
        pthread_join(opener, NULL);
        if (g->ok)   /* the context was made current in the opener thread */
            cuCtxSetCurrent(g->ctx);
    }
    if (!compile_only && !g->ok) {
        kbv_set_verdict(v, "error", "%s", kbv_why_text(&why));
        kb_buf_release(&why);
        return -1;
    }
    kb_buf_release(&why);
    if (g->ok) {
        cJSON_AddItemToObject(v->res, "device", kbv_device_json(g, 0));
        char want[32];
        kbv_default_arch(g, o, v->hdr.arch, want, sizeof want);
        if (strcmp(want, arch) != 0) {
            kbv_compiled_release(&v->cc);
            snprintf(arch, sizeof arch, "%s", want);
            kbv_compile(o, v->src.data, v->cand_name, arch, 0, &v->cc);
        }
    }
    cJSON *cj = kbv_compile_json(&v->cc, arch);
    cJSON_AddItemToObject(v->res, "compile", cj);
    if (!v->cc.ok) {
        kbv_set_verdict(v, "compile_error", "NVRTC could not compile the candidate");
        return -1;
    }
    cJSON *found = kbv_cubin_kernels(&v->cc);
    if (found)
        cJSON_AddItemToObject(cj, "entries", found);
    state_note(v);
    return check_launch_kernels(v, found);
}

/* The reference, compiled through the cache. Returns 0 or -1. */
static int compile_reference(kbv_ctx *v)
{
    char rarch[32];
    kbv_default_arch(v->gpu, v->o, NULL, rarch, sizeof rarch);
    kbv_compile(v->o, v->rsrc.data, "reference.cu", rarch, 1, &v->rc);
    cJSON_AddItemToObject(v->res, "reference_compile", kbv_compile_json(&v->rc, rarch));
    if (!v->rc.ok) {
        kbv_set_verdict(v, "error", "NVRTC could not compile the task's reference");
        return -1;
    }
    return 0;
}

static int load_modules(kbv_ctx *v)
{
    CUresult r = cuModuleLoadData(&v->cmod, v->cc.cubin);
    if (r) {
        kbv_set_verdict(v, "compile_error", "cannot load the candidate's cubin: %s",
                        kbv_cu_name(r));
        return -1;
    }
    if ((r = cuModuleLoadData(&v->rmod, v->rc.cubin))) {
        kbv_set_verdict(v, "error", "cannot load the reference: %s", kbv_cu_name(r));
        return -1;
    }
    return 0;
}

/* --seed, else random; 48 bits, so that the JSON number is exact and
 * --seed repeats a run */
static void pick_seed(kbv_ctx *v)
{
    if (v->o->seed_set)
        v->seed_base = v->o->seed;
    else if (getrandom(&v->seed_base, sizeof v->seed_base, 0) != sizeof v->seed_base)
        v->seed_base = (uint64_t)time(NULL) * 2654435761u;
    v->seed_base &= 0xFFFFFFFFFFFFull;
    cJSON_AddNumberToObject(v->res, "seed", (double)v->seed_base);
}

/* Every shape: buffers, tensor maps, both launch sequences resolved, the
 * trials, then (timed shapes) timing, until a verdict is reached. */
static void run_shapes(kbv_ctx *v)
{
    const kb_task *t = v->task;
    v->checks = cJSON_AddArrayToObject(v->res, "checks");
    v->timings = cJSON_AddArrayToObject(v->res, "timings");
    v->ps = calloc(t->nparams, sizeof *v->ps);
    v->maps = calloc(v->hdr.nmaps + 1, sizeof *v->maps);
    v->tensormaps = v->hdr.nmaps ? cJSON_AddArrayToObject(v->res, "tensormaps") : NULL;
    v->cl = calloc(v->ncseq, sizeof *v->cl);
    v->rl = calloc(t->nlaunches, sizeof *v->rl);
    for (size_t si = 0; si < t->nshapes && !v->verdict; si++) {
        const kb_shape *s = &t->shapes[si];
        if (!kbv_shape_wanted(v->o, s->name))
            continue;
        int timed = s->timed && !v->o->no_timing;
        if (kbv_shape_alloc(v, s, timed) == 0)
            kbv_encode_maps(v, s, v->tensormaps);
        if (!v->verdict &&
            kbv_resolve(v, s, v->cmod, v->cseq, v->ncseq, v->cl, 1) == 0 &&
            kbv_resolve(v, s, v->rmod, t->launches, t->nlaunches, v->rl, 0) == 0 &&
            kbv_check_shape(v, s) == 0 && timed)
            kbv_time_shape(v, s);
        if (!v->gpu->sticky)
            kbv_shape_free(v);
    }
}

/* A speedup well above the best verified skill's for the task (--best,
 * or the request's "best_speedup") is flagged for a person to review:
 * the verdict stands, the result says why it deserves a second look. */
static void review(kbv_ctx *v, double g)
{
    double best = v->o->best_speedup;
    if (best > 0 && g > KBV_REVIEW_OVER_BEST * best) {
        char why[256];
        snprintf(why, sizeof why, "%.2fx is %.1f times the best verified skill's "
                 "%.2fx for %s: review the kernel before trusting it", g, g / best,
                 best, v->task->name);
        cJSON_AddStringToObject(v->res, "review", why);
    }
}

/* correct on every check: faster by the margin's geomean, else correct;
 * against a library baseline, parity (within KBV_LIBRARY_PARITY either
 * way) is said with the ratio: a kernel that matches cuBLAS is a good one,
 * and a 3% margin over a library at its power limit is no fair bar */
static void final_verdict(kbv_ctx *v)
{
    /* a run that failed (timeout, error, crash, incorrect) has no speedup,
     * whatever shapes were timed before it failed */
    if (v->verdict && strcmp(v->verdict, "suspicious") != 0)
        return;
    if (!v->nspeed) {
        kbv_set_verdict(v, "correct", "correct on every check; not timed");
        return;
    }
    double g = exp(v->speed_log_sum / v->nspeed);
    cJSON_AddNumberToObject(v->res, "speedup_geomean", g);
    cJSON *ci = cJSON_AddArrayToObject(v->res, "speedup_ci95");
    cJSON_AddItemToArray(ci, cJSON_CreateNumber(exp(v->speed_lo_log / v->nspeed)));
    cJSON_AddItemToArray(ci, cJSON_CreateNumber(exp(v->speed_hi_log / v->nspeed)));
    review(v, g);
    int library = strncmp(v->task->baseline, "cublas", 6) == 0;
    int matches = library && g >= 1.0 - KBV_LIBRARY_PARITY &&
                  g <= 1.0 + KBV_LIBRARY_PARITY;
    if (library) {
        cJSON_AddBoolToObject(v->res, "matches_library", matches);
        cJSON_AddNumberToObject(v->res, "library_ratio", g);
    }
    if (g >= KBV_FASTER_MARGIN)
        kbv_set_verdict(v, "faster", "correct on every check; %.2fx the "
                        "baseline (geomean)", g);
    else if (matches)
        kbv_set_verdict(v, "correct", "correct on every check; %.3fx the "
                        "library baseline (%s, geomean): matches the library "
                        "(within %.0f%% either way)", g, v->task->baseline,
                        KBV_LIBRARY_PARITY * 100);
    else
        kbv_set_verdict(v, "correct", "correct on every check; %.2fx the "
                        "baseline (geomean)", g);
}

/* verdict, reason, the protocol's parameters, sticky_error, wall_ms */
static void finish_result(kbv_ctx *v, double t0)
{
    if (!v->verdict)
        kbv_set_verdict(v, "error", "internal error");
    cJSON_AddStringToObject(v->res, "verdict", v->verdict);
    cJSON_AddStringToObject(v->res, "reason", kbv_why_text(&v->reason));
    cJSON *pj = cJSON_AddObjectToObject(v->res, "protocol");
    cJSON_AddNumberToObject(pj, "seeds", KBV_NSEEDS);
    cJSON_AddNumberToObject(pj, "warmup_runs", KBV_NWARM);
    cJSON_AddNumberToObject(pj, "l2_flush_bytes", (double)v->gpu->flush_bytes);
    cJSON_AddNumberToObject(pj, "timeout_ms", v->o->timeout_ms);
    cJSON_AddNumberToObject(pj, "faster_margin", KBV_FASTER_MARGIN);
    cJSON_AddNumberToObject(pj, "library_parity", KBV_LIBRARY_PARITY);
    cJSON_AddNumberToObject(pj, "floor_slack", KBV_FLOOR_SLACK);
    if (v->o->shapes)   /* a partial check: these shapes alone ran */
        cJSON_AddStringToObject(v->res, "shapes_only", v->o->shapes);
    cJSON_AddBoolToObject(v->res, "sticky_error", v->gpu->sticky);
    cJSON_AddNumberToObject(v->res, "wall_ms", round((kb_now_ms() - t0) * 100) / 100);
}

cJSON *kbv_verify(kbv_gpu *gpu, const kbv_opts *o, const char *task_dir,
                  const char *cand_path, const char *src_inline, int compile_only)
{
    double t0 = kb_now_ms();
    kbv_ctx v;
    kbv_ctx_init(&v, gpu, o, task_dir, 1);
    cJSON_AddStringToObject(v.res, "candidate", cand_path ? cand_path : "");
    v.cand_name = cand_path ? cand_path : "candidate.cu";
    if (kbv_load_task(&v, task_dir) || read_candidate(&v, cand_path, src_inline) ||
        admit_candidate(&v) || compile_candidate(&v, compile_only) ||
        compile_reference(&v))
        goto out;
    if (compile_only) {
        kbv_set_verdict(&v, "compiled", "compiled with NVRTC; not run (--compile-only)");
        goto out;
    }
    if (load_modules(&v))
        goto out;
    kbv_kernel_attrs(&v);
    pick_seed(&v);
    run_shapes(&v);
    final_verdict(&v);
    if (!v.gpu->sticky && v.res && cJSON_GetObjectItem(v.res, "speedup_geomean"))
        kbv_baseline_spread(&v, task_dir);
out:
    finish_result(&v, t0);
    cJSON *res = v.res;
    kbv_ctx_release(&v);
    return res;
}
