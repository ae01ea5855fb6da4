/* ctx.c - the ground of kb-verify, what every other file uses and which
 * calls none of them back: the CUDA driver's pointers and loader
 * (cudrv.h), the names and stickiness of CUDA errors, the context of one
 * verification (kbv_ctx), reasons and verdicts, and the task a context
 * works on (loading it, a tolerance's value on a shape). Above it, gpu.c
 * opens the device and the steps (buffers.c ... timing.c) use both;
 * verify.c runs them in order and main.c is the command line. */
#define KBV_CUDRV_IMPL   /* the driver's pointers and loader live here */
#include "verify/kb-verify/verify_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------ CUDA errors */

const char *kbv_cu_name(CUresult r)
{
    const char *s = NULL;
    if (kbv_cuGetErrorName)
        cuGetErrorName(r, &s);
    return s ? s : "CUDA_ERROR_UNKNOWN";
}

int kbv_cu_sticky(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS: case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION: case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE: case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ASSERT: case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_LAUNCH_TIMEOUT: case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED: case CUDA_ERROR_UNKNOWN:
        return 1;
    default:
        return 0;
    }
}

/* ------------------------------------------------------------------ the context */

void kbv_ctx_init(kbv_ctx *v, kbv_gpu *gpu, const kbv_opts *o,
                  const char *task_dir, int versioned)
{
    memset(v, 0, sizeof *v);
    v->gpu = gpu;
    v->o = o;
    kb_buf_init(&v->reason, 0);
    kb_buf_init(&v->src, 8u << 20);
    kb_buf_init(&v->rsrc, 8u << 20);
    v->res = cJSON_CreateObject();
    if (versioned)
        cJSON_AddNumberToObject(v->res, "kb_verify", 1);
    cJSON_AddStringToObject(v->res, "task", task_dir);
}

void kbv_ctx_release(kbv_ctx *v)
{
    free(v->cl);
    free(v->rl);
    if (!v->gpu->sticky) {
        if (v->cmod)
            cuModuleUnload(v->cmod);
        if (v->rmod)
            cuModuleUnload(v->rmod);
    }
    free(v->ps);
    kbv_compiled_release(&v->cc);
    kbv_compiled_release(&v->rc);
    kb_cand_header_release(&v->hdr);
    free(v->maps);
    kb_task_free(v->task);
    kb_buf_release(&v->src);
    kb_buf_release(&v->rsrc);
    kb_buf_release(&v->reason);
}

/* ------------------------------------------------------------------ reasons and verdicts */

void kbv_vwhy(kb_buf *why, const char *fmt, va_list ap)
{
    if (kb_buf_vprintf(why, fmt, ap) != KB_OK)
        kb_buf_reset(why);
}

void kbv_why(kb_buf *why, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kbv_vwhy(why, fmt, ap);
    va_end(ap);
}

const char *kbv_why_text(const kb_buf *why)
{
    return why->len ? why->data : "out of memory";
}

void kbv_set_verdict(kbv_ctx *v, const char *verdict, const char *fmt, ...)
{
    if (v->verdict)
        return;
    v->verdict = verdict;
    va_list ap;
    va_start(ap, fmt);
    kbv_vwhy(&v->reason, fmt, ap);
    va_end(ap);
}

void kbv_cuda_failed(kbv_ctx *v, CUresult r, const char *what)
{
    if (kbv_cu_sticky(r))
        v->gpu->sticky = 1;
    kbv_set_verdict(v, "crash", "%s: %s", what, kbv_cu_name(r));
}

/* ------------------------------------------------------------------ the task */

/* The next name of the comma-separated list at *p: its start in *name,
 * its length in *len, *p moved past it; 0 at the list's end. */
static int next_name(const char **p, const char **name, size_t *len)
{
    if (!**p)
        return 0;
    *name = *p;
    *len = strcspn(*p, ",");
    *p += *len;
    if (**p == ',')
        (*p)++;
    return 1;
}

static int has_shape(const kb_task *t, const char *name, size_t len)
{
    for (size_t i = 0; i < t->nshapes; i++)
        if (strlen(t->shapes[i].name) == len && strncmp(t->shapes[i].name, name, len) == 0)
            return 1;
    return 0;
}

/* --shapes (or a request's "shapes") names shapes of the task, at least
 * one: a name it lacks would leave a check that checked nothing (and a
 * verdict of it). Returns 0, or -1 with the "error" verdict set. */
static int check_shapes_named(kbv_ctx *v)
{
    const kb_task *t = v->task;
    const char *p = v->o->shapes, *name;
    size_t len;
    int named = 0;
    while (p && next_name(&p, &name, &len)) {
        named += len > 0;
        if (has_shape(t, name, len))
            continue;
        kb_buf have;
        kb_buf_init(&have, 0);
        for (size_t i = 0; i < t->nshapes; i++)
            if (kb_buf_printf(&have, "%s%s", i ? ", " : "", t->shapes[i].name) != KB_OK)
                break;
        kbv_set_verdict(v, "error", "'%.*s' in --shapes is no shape of task '%s' "
                        "(its shapes: %s)", (int)len, name, t->name,
                        have.data ? have.data : "");
        kb_buf_release(&have);
        return -1;
    }
    if (p && !named) {
        kbv_set_verdict(v, "error", "--shapes names no shape of task '%s'", t->name);
        return -1;
    }
    return 0;
}

int kbv_load_task(kbv_ctx *v, const char *arg)
{
    kb_err err;
    kb_err_clear(&err);
    /* a name (no '/') that is no directory here: corpus/tasks/NAME, or the
     * installed share directory's */
    char *found = NULL;
    char *j = strchr(arg, '/') ? NULL : kb_path_join(arg, "task.json");
    if (j && access(j, R_OK) != 0 && kb_task_find(arg, NULL, &found, &err)) {
        free(j);
        kbv_set_verdict(v, "error", "%s", err.msg);
        return -1;
    }
    free(j);
    const char *dir = found ? found : arg;
    kb_rc lrc = kb_task_load(dir, &v->task, &err);
    if (lrc) {
        free(found);
        kbv_set_verdict(v, "error", "%s", err.msg);
        return -1;
    }
    cJSON_ReplaceItemInObject(v->res, "task", cJSON_CreateString(v->task->name));
    char *rpath = kb_path_join(dir, "reference.cu");
    kb_rc rc = kb_read_file(rpath, 8u << 20, &v->rsrc, &err);
    free(rpath);
    free(found);
    if (rc) {
        kbv_set_verdict(v, "error", "%s", err.msg);
        return -1;
    }
    return check_shapes_named(v);
}

double kbv_shape_tol(const kbv_ctx *v, const kb_shape *s, const char *e)
{
    double x = 0;
    kb_task_eval(v->task, s, e, &x, NULL);
    return x;
}

int kbv_shape_wanted(const kbv_opts *o, const char *name)
{
    const char *p = o->shapes, *item;
    size_t len, n = strlen(name);
    if (!p)
        return 1;
    while (next_name(&p, &item, &len))
        if (len == n && strncmp(item, name, n) == 0)
            return 1;
    return 0;
}
