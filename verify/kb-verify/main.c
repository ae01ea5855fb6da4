/* main.c - kb-verify: compiles a candidate kernel with NVRTC, checks it
 * against a task's reference on every shape, seed and input distribution,
 * times it against the baseline and prints one JSON result. The protocol
 * and the result's fields are documented in docs/formats.md ("kb-verify's result").
 *
 *   kb-verify [options] TASK_DIR CANDIDATE.cu
 *   kb-verify --reference TASK_DIR          reference vs CPU float64
 *   kb-verify --compile-only TASK_DIR [CANDIDATE.cu]   NVRTC only, no GPU
 *   kb-verify --device-info [--json]
 *   kb-verify --serve                       JSON lines in, JSON lines out
 *
 * This file is the command line: options, the one-shot run, --serve and
 * the printing of results. The device (a kbv_gpu) is opened on demand and
 * lives as long as the process. */
#include "verify/kb-verify/verify_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MODE_VERIFY, MODE_COMPILE, MODE_REFERENCE, MODE_DEVICE, MODE_SERVE,
       MODE_BASELINE };

static int exit_for(const cJSON *res)
{
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(res, "verdict"));
    if (!v)
        return 4;
    if (!strcmp(v, "correct") || !strcmp(v, "faster") || !strcmp(v, "compiled") ||
        !strcmp(v, "measured"))
        return 0;
    if (!strcmp(v, "error"))
        return 4;
    return 1;
}

static void print_result(const kbv_opts *o, cJSON *res)
{
    if (o->json) {
        char *s = cJSON_PrintUnformatted(res);
        puts(s ? s : "{\"verdict\":\"error\",\"reason\":\"out of memory\"}");
        free(s);
        return;
    }
    kb_buf b;
    kb_buf_init(&b, 0);
    if (kb_verify_result_text(res, &b) == KB_OK)
        fputs(b.data, stdout);
    else
        fprintf(stderr, "kb-verify: out of memory printing the result\n");
    kb_buf_release(&b);
}

static cJSON *error_result(const char *reason)
{
    cJSON *res = cJSON_CreateObject();
    cJSON_AddStringToObject(res, "verdict", "error");
    cJSON_AddStringToObject(res, "reason", reason);
    return res;
}

/* The answer to one --serve request (a parsed line, maybe not an object). */
static cJSON *serve_one(kbv_gpu *gpu, const kbv_opts *o, const cJSON *req)
{
    if (!cJSON_IsObject(req))
        return error_result("a request is one JSON object a line");
    if (cJSON_IsTrue(cJSON_GetObjectItem(req, "device_info"))) {
        kb_buf why;
        kb_buf_init(&why, 0);
        cJSON *res = kbv_gpu_open(gpu, &why) == 0
                         ? kbv_device_json(gpu, 1)
                         : error_result(kbv_why_text(&why));
        kb_buf_release(&why);
        return res;
    }
    const char *task = cJSON_GetStringValue(cJSON_GetObjectItem(req, "task"));
    const char *cand = cJSON_GetStringValue(cJSON_GetObjectItem(req, "candidate"));
    const char *src = cJSON_GetStringValue(cJSON_GetObjectItem(req, "source"));
    kbv_opts o2 = *o;
    if (cJSON_IsTrue(cJSON_GetObjectItem(req, "no_timing")))
        o2.no_timing = 1;
    const char *shapes = cJSON_GetStringValue(cJSON_GetObjectItem(req, "shapes"));
    if (shapes)
        o2.shapes = shapes;
    const cJSON *best = cJSON_GetObjectItem(req, "best_speedup");
    if (cJSON_IsNumber(best))
        o2.best_speedup = best->valuedouble;
    const cJSON *spread = cJSON_GetObjectItem(req, "spread");
    if (cJSON_IsNumber(spread) && spread->valuedouble >= 0 && spread->valuedouble <= 16)
        o2.spread = (int)spread->valuedouble;
    if (!task)
        return error_result("a request needs \"task\"");
    return kbv_verify(gpu, &o2, task, cand, src,
                      cJSON_IsTrue(cJSON_GetObjectItem(req, "compile_only")));
}

/* JSON lines in, JSON lines out, one device for all; after a sticky error
 * the process exits (3): the caller starts a new one. */
static int serve(kbv_gpu *gpu, kbv_opts *o)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    o->json = 1;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        if (n > 16 << 20)
            continue;
        cJSON *req = cJSON_Parse(line);
        cJSON *res = serve_one(gpu, o, req);
        cJSON *id = req ? cJSON_GetObjectItem(req, "id") : NULL;
        if (id)
            cJSON_AddItemToObject(res, "id", cJSON_Duplicate(id, 1));
        char *s = cJSON_PrintUnformatted(res);
        puts(s);
        fflush(stdout);
        free(s);
        cJSON_Delete(res);
        cJSON_Delete(req);
        if (gpu->sticky) {
            /* the context is unusable: the caller starts a new process */
            free(line);
            fflush(stdout);
            _exit(3);
        }
    }
    free(line);
    return 0;
}

static int device_info(kbv_gpu *gpu, const kbv_opts *o)
{
    kb_buf why;
    kb_buf_init(&why, 0);
    if (kbv_gpu_open(gpu, &why)) {
        fprintf(stderr, "kb-verify: %s\n", kbv_why_text(&why));
        kb_buf_release(&why);
        return 4;
    }
    cJSON *res = kbv_device_json(gpu, 1);
    char *s = o->json ? cJSON_PrintUnformatted(res) : cJSON_Print(res);
    puts(s);
    free(s);
    cJSON_Delete(res);
    return 0;
}

/* --reference --repeat N: N checks in one process, seeds --seed (else 1)
 * and up, one result a line; exit 1 if one was not correct. */
static int reference_repeats(kbv_gpu *gpu, kbv_opts *o, const char *task)
{
    uint64_t base = o->seed_set ? o->seed : 1;
    int rc = 0;
    o->seed_set = 1;
    for (int k = 0; k < o->repeat; k++) {
        o->seed = base + (uint64_t)k;
        cJSON *res = kbv_check_reference(gpu, o, task);
        cJSON_AddNumberToObject(res, "seed", (double)o->seed);
        print_result(o, res);
        int r = exit_for(res);
        cJSON_Delete(res);
        if (r)
            rc = r;
        if (gpu->sticky)
            break;
    }
    fflush(stdout);
    if (gpu->ok)
        _exit(rc);
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f,
        "usage: kb-verify [options] TASK_DIR CANDIDATE.cu\n"
        "       kb-verify --reference TASK_DIR\n"
        "       kb-verify --compile-only TASK_DIR [CANDIDATE.cu]\n"
        "       kb-verify --baseline-only TASK_DIR   the baseline alone, timed\n"
        "       kb-verify --device-info [--json]\n"
        "       kb-verify --serve\n\n"
        "options:\n"
        "  --json            print the JSON result (one line)\n"
        "  --arch A          NVRTC target (default: the device's, sm_90 without one)\n"
        "  --seed N          base seed (default: random)\n"
        "  --runs N          at most N timed runs per side (default 50)\n"
        "  --timeout-ms N    limit for one launch sequence (default 5000)\n"
        "  --no-timing       correctness only\n"
        "  --repeat N        with --reference: N checks, seeds --seed and up\n"
        "  --shapes A,B      only these of the task's shapes (a partial check:\n"
        "                    for repeats; a verdict needs every shape)\n"
        "  --best X          the best verified skill's speedup for the task: a\n"
        "                    result above 1.25 x it is flagged for review\n"
        "  --spread N        time the baseline again in N short processes of its\n"
        "                    own and report its spread across processes\n"
        "  --cache DIR       reference cubin cache ($KB_VERIFY_CACHE)\n");
}

/* Parses the command line into o, *mode and pos. Returns -1 to go on, else
 * the exit status (help, or a usage error it has reported). */
static int parse_args(int argc, char **argv, kbv_opts *o, int *mode,
                      const char *pos[2], int *npos)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long x;
        if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--compile-only")) *mode = MODE_COMPILE;
        else if (!strcmp(a, "--reference")) *mode = MODE_REFERENCE;
        else if (!strcmp(a, "--device-info")) *mode = MODE_DEVICE;
        else if (!strcmp(a, "--serve")) *mode = MODE_SERVE;
        else if (!strcmp(a, "--baseline-only")) *mode = MODE_BASELINE;
        else if (!strcmp(a, "--no-timing")) o->no_timing = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--arch") && i + 1 < argc) o->arch = argv[++i];
        else if (!strcmp(a, "--cache") && i + 1 < argc) o->cache_dir = argv[++i];
        else if (!strcmp(a, "--shapes") && i + 1 < argc) o->shapes = argv[++i];
        else if (!strcmp(a, "--seed") && i + 1 < argc) {
            char *end;
            o->seed = strtoull(argv[++i], &end, 10);
            o->seed_set = 1;
            if (*end) { usage(stderr); return 2; }
        } else if (!strcmp(a, "--runs") && i + 1 < argc &&
                   kb_parse_long(argv[i + 1], 10, 100000, &x) == KB_OK) {
            o->runs_max = (int)x; i++;
        } else if (!strcmp(a, "--repeat") && i + 1 < argc &&
                   kb_parse_long(argv[i + 1], 1, 100000, &x) == KB_OK) {
            o->repeat = (int)x; i++;
        } else if (!strcmp(a, "--best") && i + 1 < argc) {
            char *end;
            o->best_speedup = strtod(argv[++i], &end);
            if (*end || !(o->best_speedup >= 0)) { usage(stderr); return 2; }
        } else if (!strcmp(a, "--spread") && i + 1 < argc &&
                   kb_parse_long(argv[i + 1], 0, 16, &x) == KB_OK) {
            o->spread = (int)x; i++;
        } else if (!strcmp(a, "--timeout-ms") && i + 1 < argc &&
                   kb_parse_long(argv[i + 1], 1, 3600000, &x) == KB_OK) {
            o->timeout_ms = (double)x; i++;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kb-verify: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (*npos < 2) {
            pos[(*npos)++] = a;
        } else {
            usage(stderr);
            return 2;
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    kbv_opts o = { 0 };
    o.runs_max = 50;
    o.timeout_ms = 5000;
    kbv_gpu gpu;
    memset(&gpu, 0, sizeof gpu);
    int mode = MODE_VERIFY;
    const char *pos[2] = { NULL, NULL };
    int npos = 0;
    int st = parse_args(argc, argv, &o, &mode, pos, &npos);
    if (st >= 0)
        return st;
    if (mode == MODE_SERVE)
        return serve(&gpu, &o);
    if (mode == MODE_DEVICE)
        return device_info(&gpu, &o);
    if (npos < 1 || (mode == MODE_VERIFY && npos < 2) ||
        ((mode == MODE_REFERENCE || mode == MODE_BASELINE) && npos != 1)) {
        usage(stderr);
        return 2;
    }
    if (mode == MODE_REFERENCE && o.repeat > 1)
        return reference_repeats(&gpu, &o, pos[0]);
    cJSON *res = mode == MODE_REFERENCE ? kbv_check_reference(&gpu, &o, pos[0])
               : mode == MODE_BASELINE ? kbv_time_baseline(&gpu, &o, pos[0])
               : kbv_verify(&gpu, &o, pos[0], pos[1], NULL, mode == MODE_COMPILE);
    print_result(&o, res);
    fflush(stdout);
    int rc = exit_for(res);
    cJSON_Delete(res);
    /* leave without tearing the context down: the driver frees it with the
     * process (tens of ms saved), and a hung or broken context cannot be
     * torn down cleanly anyway */
    fflush(stdout);
    if (!gpu.ok)
        return rc;
    _exit(rc);
}
