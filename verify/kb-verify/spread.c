/* spread.c - the baseline's spread across processes. `kb-verify
 * --baseline-only TASK` times the task's baseline alone on each timed
 * shape in a process of its own (a fresh context and fresh allocations:
 * where the driver places a buffer is what moves a baseline between
 * processes while the runs of one process agree); --spread N runs N of
 * them after a timed verification and reports their medians beside the
 * verification's own, so that a receipt says how far its baseline moves
 * from one process to the next. */
#include "verify/kb-verify/verify_int.h"

#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define SPREAD_RUNS 21         /* seven a input set */

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The baseline's median over SPREAD_RUNS flushed runs of shape s (its
 * buffers allocated with the timed runs' input sets, both sequences
 * resolved), rotating over the sets as a verification's timing does, so
 * that the spread is of the same measure. -1 on a CUDA failure. */
static double time_one(kbv_ctx *v, const kb_shape *s, int blas)
{
    kbv_gpu *g = v->gpu;
    CUevent e[2 * SPREAD_RUNS];
    double t[SPREAD_RUNS];
    for (int i = 0; i < 2 * SPREAD_RUNS; i++)
        cuEventCreate(&e[i], CU_EVENT_DEFAULT);
    CUresult r = CUDA_SUCCESS;
    for (int j = KBV_NSETS - 1; j >= 0 && !r; j--) {
        kbv_use_input_set(v, s, j);
        r = kbv_gen_inputs(v, v->seed_base + (uint64_t)j, 0, NULL);
    }
    for (int w = 0; w < KBV_NWARM && !r; w++)
        r = blas ? kbv_run_blas(v) : kbv_run_side(v, 0);
    for (int k = 0; k < SPREAD_RUNS && !r; k++) {
        kbv_use_input_set(v, s, k % KBV_NSETS);
        r = cuMemsetD32Async(g->flush, (unsigned)k, g->flush_bytes / 4, g->stream);
        if (!r)
            r = cuEventRecord(e[2 * k], g->stream);
        if (!r)
            r = blas ? kbv_run_blas(v) : kbv_run_side(v, 0);
        if (!r)
            r = cuEventRecord(e[2 * k + 1], g->stream);
    }
    int to = 0;
    if (!r)
        r = kbv_gpu_sync(g, 60000, &to);
    for (int k = 0; k < SPREAD_RUNS && !r && !to; k++) {
        float ms = 0;
        cuEventElapsedTime(&ms, e[2 * k], e[2 * k + 1]);
        t[k] = ms;
    }
    for (int i = 0; i < 2 * SPREAD_RUNS; i++)
        cuEventDestroy(e[i]);
    if (r || to)
        return -1;
    qsort(t, SPREAD_RUNS, sizeof *t, cmp_dbl);
    return t[SPREAD_RUNS / 2];
}

/* The reference opened, and the library when it is the baseline.
 * Returns 0 or -1 (verdict set). */
static int open_baseline(kbv_ctx *v, int blas)
{
    if (kbv_open_reference(v))
        return -1;
    kb_buf why;
    kb_buf_init(&why, 0);
    if (blas && kbv_blas_open(v->gpu, &why)) {
        kbv_set_verdict(v, "error", "%s", kbv_why_text(&why));
        kb_buf_release(&why);
        return -1;
    }
    kb_buf_release(&why);
    return 0;
}

cJSON *kbv_time_baseline(kbv_gpu *gpu, const kbv_opts *o, const char *task_dir)
{
    kbv_ctx v;
    kbv_ctx_init(&v, gpu, o, task_dir, 0);
    if (kbv_load_task(&v, task_dir))
        goto out;
    const kb_task *t = v.task;
    int blas = strncmp(t->baseline, "cublas", 6) == 0;
    if (open_baseline(&v, blas))
        goto out;
    v.seed_base = o->seed_set ? o->seed : 12345;
    v.ps = calloc(t->nparams, sizeof *v.ps);
    v.rl = calloc(t->nlaunches, sizeof *v.rl);
    cJSON *sj = cJSON_AddArrayToObject(v.res, "shapes");
    for (size_t si = 0; si < t->nshapes && !v.verdict; si++) {
        const kb_shape *s = &t->shapes[si];
        if (!s->timed)
            continue;
        if (kbv_shape_alloc(&v, s, 1) ||
            kbv_resolve(&v, s, v.rmod, t->launches, t->nlaunches, v.rl, 0))
            break;
        double ms = time_one(&v, s, blas);
        kbv_shape_free(&v);
        if (ms < 0) {
            kbv_set_verdict(&v, "error", "the baseline failed on shape '%s'", s->name);
            break;
        }
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "shape", s->name);
        cJSON_AddNumberToObject(x, "baseline_ms", ms);
        cJSON_AddItemToArray(sj, x);
    }
    kbv_set_verdict(&v, "measured", "the baseline timed in a process of its own");
out:
    cJSON_AddStringToObject(v.res, "verdict", v.verdict);
    cJSON_AddStringToObject(v.res, "reason", kbv_why_text(&v.reason));
    cJSON *res = v.res;
    kbv_ctx_release(&v);
    return res;
}

/* Runs `kb-verify --baseline-only --json TASK` (this executable) and
 * returns its result, or NULL. */
static cJSON *spawn_baseline(const kbv_opts *o, const char *task_dir)
{
    int p[2];
    if (pipe(p) != 0)
        return NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_addclose(&fa, p[0]);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", 1, 0);
    char *argv[8];
    int a = 0;
    argv[a++] = "kb-verify";
    argv[a++] = "--baseline-only";
    argv[a++] = "--json";
    if (o->cache_dir) {
        argv[a++] = "--cache";
        argv[a++] = (char *)o->cache_dir;
    }
    argv[a++] = (char *)task_dir;
    argv[a] = NULL;
    pid_t pid;
    int ok = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ) == 0;
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    kb_buf out;
    kb_buf_init(&out, 1 << 20);
    char buf[4096];
    ssize_t n;
    while (ok && (n = read(p[0], buf, sizeof buf)) > 0)
        if (kb_buf_append(&out, buf, (size_t)n) != KB_OK)
            break;
    close(p[0]);
    int st = 0;
    if (ok)
        waitpid(pid, &st, 0);
    cJSON *res = ok && out.data ? cJSON_Parse(out.data) : NULL;
    kb_buf_release(&out);
    return res;
}

/* shape's baseline median in a --baseline-only result, or -1 */
static double median_of(const cJSON *res, const char *shape)
{
    const cJSON *x;
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(res, "shapes"))
        if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(x, "shape")) ?: "", shape))
            return cJSON_GetNumberValue(cJSON_GetObjectItem(x, "baseline_ms"));
    return -1;
}

void kbv_baseline_spread(kbv_ctx *v, const char *task_dir)
{
    int np = v->o->spread;
    if (np <= 0 || !v->timings || cJSON_GetArraySize(v->timings) == 0)
        return;
    cJSON **rs = calloc((size_t)np, sizeof *rs);
    int answered = 0;   /* the processes that measured: the spread is theirs */
    for (int k = 0; rs && k < np; k++) {
        rs[k] = spawn_baseline(v->o, task_dir);
        const char *verdict = cJSON_GetStringValue(cJSON_GetObjectItem(rs[k], "verdict"));
        if (verdict && strcmp(verdict, "measured") == 0) {
            answered++;
        } else {
            cJSON_Delete(rs[k]);
            rs[k] = NULL;
        }
    }
    cJSON *sp = cJSON_AddObjectToObject(v->res, "baseline_spread");
    cJSON_AddNumberToObject(sp, "processes", answered + 1);
    if (answered < np)
        cJSON_AddNumberToObject(sp, "processes_failed", np - answered);
    cJSON *shapes = cJSON_AddArrayToObject(sp, "shapes");
    double worst = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, v->timings) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(t, "shape"));
        double own = cJSON_GetNumberValue(cJSON_GetObjectItem(
            cJSON_GetObjectItem(t, "baseline_ms"), "median"));
        cJSON *x = cJSON_CreateObject(), *ms = cJSON_CreateArray();
        cJSON_AddItemToArray(shapes, x);
        cJSON_AddStringToObject(x, "shape", name ? name : "");
        cJSON_AddItemToObject(x, "baseline_ms", ms);
        double lo = own, hi = own;
        cJSON_AddItemToArray(ms, cJSON_CreateNumber(own));
        for (int k = 0; rs && k < np; k++) {
            double m = rs[k] && name ? median_of(rs[k], name) : -1;
            if (m <= 0)
                continue;
            cJSON_AddItemToArray(ms, cJSON_CreateNumber(m));
            lo = fmin(lo, m);
            hi = fmax(hi, m);
        }
        double s = own > 0 ? (hi - lo) / own : 0;
        cJSON_AddNumberToObject(x, "spread", s);
        worst = fmax(worst, s);
    }
    /* (max - min) / this process's median, the widest shape's */
    cJSON_AddNumberToObject(sp, "spread", worst);
    for (int k = 0; rs && k < np; k++)
        cJSON_Delete(rs[k]);
    free(rs);
}
