/* launch.c - launch sequences: resolved for a shape (grid, block, dynamic
 * shared memory), run on the stream with each side's arguments, and
 * reported in the result as written, with the driver's per-kernel
 * resources; and the reference: opened alone (the GPU, its cubin
 * through the cache) for --reference and --baseline-only, and run on a
 * shape's inputs (its outputs poisoned first), which the trials, the
 * sensitivity runs and --reference share. */
#include "verify/kb-verify/verify_int.h"

#include <stdlib.h>
#include <string.h>

/* Evaluates a launch's grid, block and shared memory on shape s. */
static kb_rc eval_launch(const kb_task *t, const kb_shape *s, const kb_launch *l,
                         kbv_rlaunch *out, kb_err *err)
{
    double x;
    for (int k = 0; k < 3; k++) {
        out->g[k] = out->b[k] = 1;
        if (l->grid[k]) {
            if (kb_task_eval(t, s, l->grid[k], &x, err))
                return KB_ERR_PARSE;
            out->g[k] = x < 1 ? 0 : (unsigned)x;
        }
        if (l->block[k]) {
            if (kb_task_eval(t, s, l->block[k], &x, err))
                return KB_ERR_PARSE;
            out->b[k] = x < 1 ? 0 : (unsigned)x;
        }
    }
    out->shm = 0;
    if (l->shared) {
        if (kb_task_eval(t, s, l->shared, &x, err))
            return KB_ERR_PARSE;
        out->shm = (unsigned)x;
    }
    return KB_OK;
}

int kbv_resolve(kbv_ctx *v, const kb_shape *s, CUmodule mod,
                const kb_launch *l, size_t nl, kbv_rlaunch *out, int cand)
{
    kb_err err;
    kb_err_clear(&err);
    for (size_t i = 0; i < nl; i++) {
        CUresult r = cuModuleGetFunction(&out[i].f, mod, l[i].kernel);
        if (r) {
            if (cand)
                kbv_set_verdict(v, "compile_error",
                                "no kernel '%s' in the candidate (it must be "
                                "extern \"C\" __global__)", l[i].kernel);
            else
                kbv_set_verdict(v, "error", "no kernel '%s' in the reference",
                                l[i].kernel);
            return -1;
        }
        if (eval_launch(v->task, s, &l[i], &out[i], &err) != KB_OK) {
            kbv_set_verdict(v, cand ? "compile_error" : "error", "launch: %s",
                            err.msg);
            return -1;
        }
        if (out[i].shm > 48 * 1024)
            cuFuncSetAttribute(out[i].f,
                               CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                               (int)out[i].shm);
    }
    return 0;
}

CUresult kbv_run_side(kbv_ctx *v, int cand)
{
    return kbv_run_part(v, cand, NULL, cand ? v->ncseq : v->task->nlaunches);
}

CUresult kbv_run_part(kbv_ctx *v, int cand, const size_t *which, size_t nl)
{
    const kbv_rlaunch *l = cand ? v->cl : v->rl;
    size_t np = v->task->nparams, nmaps = cand ? v->hdr.nmaps : 0;
    void **args = calloc(np + nmaps, sizeof *args);
    if (!args)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < np; i++) {
        kbv_param *p = &v->ps[i];
        if (kbv_is_buffer(&v->task->params[i]))
            args[i] = cand ? &p->cand_arg : &p->ref_arg;
        else
            args[i] = &p->scalar;
    }
    for (size_t i = 0; i < nmaps; i++)   /* after the task's parameters */
        args[np + i] = &v->maps[i];
    CUresult r = CUDA_SUCCESS;
    for (size_t j = 0; j < nl && !r; j++) {
        size_t i = which ? which[j] : j;
        r = cuLaunchKernel(l[i].f, l[i].g[0], l[i].g[1], l[i].g[2], l[i].b[0],
                           l[i].b[1], l[i].b[2], l[i].shm, v->gpu->stream,
                           args, NULL);
    }
    free(args);
    return r;
}

void kbv_launches_json(kbv_ctx *v)
{
    cJSON *lj = cJSON_AddArrayToObject(v->res, "launches");
    for (size_t i = 0; i < v->ncseq; i++) {
        const kb_launch *l = &v->cseq[i];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "kernel", l->kernel);
        cJSON_AddStringToObject(x, "from", v->hdr.nlaunches ? "candidate" : "task");
        /* the launch as written: grid, block, dynamic shared memory */
        cJSON *gj = cJSON_AddArrayToObject(x, "grid"), *bj = cJSON_AddArrayToObject(x, "block");
        for (int d = 0; d < 3; d++) {
            if (l->grid[d])
                cJSON_AddItemToArray(gj, cJSON_CreateString(l->grid[d]));
            if (l->block[d])
                cJSON_AddItemToArray(bj, cJSON_CreateString(l->block[d]));
        }
        cJSON_AddStringToObject(x, "shared_dynamic", l->shared ? l->shared : "0");
        cJSON_AddItemToArray(lj, x);
    }
}

/* The entry of ks named name, added when ptxas reported none. */
static cJSON *kernel_entry(cJSON *ks, const char *name)
{
    cJSON *k = NULL, *it;
    cJSON_ArrayForEach(it, ks) {
        const char *n = cJSON_GetStringValue(cJSON_GetObjectItem(it, "name"));
        if (!strcmp(n ? n : "", name))
            k = it;
    }
    if (!k) {
        k = cJSON_CreateObject();
        cJSON_AddStringToObject(k, "name", name);
        cJSON_AddItemToArray(ks, k);
    }
    return k;
}

/* per-kernel resources from the driver, for every kernel launched (the
 * ptxas report in the log is not always there) */
void kbv_kernel_attrs(kbv_ctx *v)
{
    static const struct { const char *key; CUfunction_attribute a; } at[] = {
        { "registers", CU_FUNC_ATTRIBUTE_NUM_REGS },
        { "shared_static_bytes", CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES },
        { "local_bytes", CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES },
        { "max_threads_per_block", CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK },
    };
    cJSON *ks = cJSON_GetObjectItem(cJSON_GetObjectItem(v->res, "compile"), "kernels");
    for (size_t i = 0; ks && i < v->ncseq; i++) {
        CUfunction f;
        if (cuModuleGetFunction(&f, v->cmod, v->cseq[i].kernel))
            continue;
        cJSON *k = kernel_entry(ks, v->cseq[i].kernel);
        for (size_t a = 0; a < sizeof at / sizeof at[0]; a++) {
            int x = 0;
            cuFuncGetAttribute(&x, at[a].a, f);
            cJSON_DeleteItemFromObject(k, at[a].key);
            cJSON_AddNumberToObject(k, at[a].key, x);
        }
    }
}

int kbv_run_reference(kbv_ctx *v, const kb_shape *s, CUresult r)
{
    int to = 0;
    if (!r)
        r = kbv_poison_side(v, 0, KBV_POISON_NAN);
    if (!r)
        r = kbv_run_side(v, 0);
    if (!r)
        r = kbv_gpu_sync(v->gpu, 60000, &to);
    if (r || to) {
        kbv_set_verdict(v, "error", "the reference failed on shape '%s': %s",
                        s->name, to ? "timeout" : kbv_cu_name(r));
        if (r && kbv_cu_sticky(r))
            v->gpu->sticky = 1;
        return -1;
    }
    return 0;
}

int kbv_open_reference(kbv_ctx *v)
{
    kb_buf why;
    kb_buf_init(&why, 0);
    if (kbv_gpu_open(v->gpu, &why)) {
        kbv_set_verdict(v, "error", "%s", kbv_why_text(&why));
        kb_buf_release(&why);
        return -1;
    }
    kb_buf_release(&why);
    char arch[32];
    kbv_default_arch(v->gpu, v->o, NULL, arch, sizeof arch);
    kbv_compile(v->o, v->rsrc.data, "reference.cu", arch, 1, &v->rc);
    if (!v->rc.ok || cuModuleLoadData(&v->rmod, v->rc.cubin)) {
        kbv_set_verdict(v, "error", "cannot compile the reference");
        return -1;
    }
    return 0;
}
