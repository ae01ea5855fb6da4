/* tool_verify.c - the verify tool (api.h), opt-in: a candidate kernel
 * through the verifier (verify/verify.h), which runs kb-verify as a
 * child process under a wall-clock limit. */
#include "api/api.h"
#include "verify/verify.h"
#include "kb/kb_int.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SOURCE_MAX_BYTES 1048576   /* a schema's number: no expression */
#define STR_(x) #x
#define STR(x) STR_(x)

#define SETTINGS_SLOT "serve/verify"

/* What kb_api_verify_attach parks with a store. */
typedef struct {
    char *tasks_dir;
    double timeout_s;
} verify_settings;

static void settings_free(void *p)
{
    verify_settings *v = p;
    if (v)
        free(v->tasks_dir);
    free(v);
}

kb_rc kb_api_verify_attach(kb_store *store, const char *tasks_dir,
                           double timeout_s, kb_err *err)
{
    verify_settings *v = calloc(1, sizeof *v);
    if (v && tasks_dir)
        v->tasks_dir = kb_strdup(tasks_dir);
    if (!v || (tasks_dir && !v->tasks_dir)) {
        settings_free(v);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    v->timeout_s = timeout_s;
    return kb_store_slot_set(store, SETTINGS_SLOT, v, settings_free, err);
}

static const char verify_input[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"task\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"
        "\"description\":\"the task's name: a folder of the task library, "
        "such as gelu, softmax, reduce_sum, transpose or gemm_bf16 (an "
        "unknown name is an error that lists them)\"},"
    "\"source\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":"
        STR(SOURCE_MAX_BYTES) ",\"description\":\"the candidate: CUDA "
        "device code only - extern \\\"C\\\" __global__ kernels with the "
        "task's parameter list, no host code, no #include beyond CUDA's "
        "device headers; '// kb-launch: kernel=K grid=G block=B shared=S' "
        "lines override the task's launch\"},"
    "\"compile_only\":{\"type\":\"boolean\",\"default\":false,\"description\":"
        "\"true: compile it with NVRTC and report the log, registers and "
        "spills, without a GPU\"},"
    "\"no_timing\":{\"type\":\"boolean\",\"default\":false,\"description\":"
        "\"true: check correctness only\"}},"
    "\"required\":[\"task\",\"source\"],\"additionalProperties\":false}";

/* kb-verify's result line (docs/formats.md, "kb-verify's result"): the fields every result
 * has, and the main others. */
static const char verify_output[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"task\":{\"type\":\"string\"},"
    "\"candidate\":{\"type\":\"string\"},"
    "\"verdict\":{\"type\":\"string\",\"description\":\"faster, correct, "
        "incorrect, suspicious (faster than can be true), compile_error, "
        "refused, timeout, crash, compiled (compile_only), or error (no GPU, "
        "a bad task: kb-verify's own trouble)\"},"
    "\"reason\":{\"type\":\"string\",\"description\":\"what happened, in "
        "words\"},"
    "\"compile\":{\"type\":\"object\",\"description\":\"NVRTC's log, the "
        "architecture, and each kernel's registers, shared and local memory "
        "and spills\"},"
    "\"checks\":{\"type\":\"array\",\"description\":\"each correctness "
        "check: shape, seed, input distribution, errors against the "
        "reference\"},"
    "\"timings\":{\"type\":\"array\",\"description\":\"each timed shape: "
        "candidate and baseline medians with their 95% intervals, speedup, "
        "the roofline floor\"},"
    "\"speedup_geomean\":{\"type\":\"number\"},"
    "\"wall_ms\":{\"type\":\"number\"}},"
    "\"required\":[\"verdict\",\"reason\"]}";

/* 1 when name could be a task's folder: [a-z0-9_-], no path. */
static int task_name_ok(const char *name)
{
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' ||
              *p == '-'))
            return 0;
    return *name != '\0';
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends the tasks under dir (folders with a task.json), sorted, joined
 * by ", ". */
static kb_rc list_tasks(const char *dir, kb_buf *out)
{
    DIR *d = opendir(dir);
    if (!d)
        return kb_buf_puts(out, "none: the folder cannot be read");
    char **names = NULL;
    size_t n = 0, cap = 0;
    kb_rc rc = KB_OK;
    struct dirent *e;
    while (rc == KB_OK && (e = readdir(d)) != NULL) {
        char *sub = e->d_name[0] != '.' ? kb_path_join(dir, e->d_name) : NULL;
        char *json = sub ? kb_path_join(sub, "task.json") : NULL;
        if (json && access(json, R_OK) == 0) {
            rc = KB_GROW(names, n + 1, cap);
            if (rc == KB_OK && !(names[n] = kb_strdup(e->d_name)))
                rc = KB_ERR_NOMEM;
            if (rc == KB_OK)
                n++;
        }
        free(json);
        free(sub);
    }
    closedir(d);
    if (names)
        qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; rc == KB_OK && i < n; i++)
        rc = kb_buf_printf(out, "%s%s", i ? ", " : "", names[i]);
    if (rc == KB_OK && n == 0)
        rc = kb_buf_puts(out, "none");
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

/* The task's folder (caller frees), or NULL with err saying why: under
 * the settings' tasks folder, listing its tasks when the name is none of
 * them; else where kb verify looks (kb_task_find: beside the manifest,
 * corpus/, the installed share/kb). A name, never a path: an agent picks
 * a task, not a folder on this machine. */
static char *task_dir(const verify_settings *v, const kb_config *cfg,
                      const char *task, kb_err *err)
{
    if (!task_name_ok(task)) {
        kb_err_set(err, KB_ERR_USAGE, "verify: 'task' must be a task's name "
                   "such as gelu, not '%.*s'", kb_utf8_cut(task, 64), task);
        return NULL;
    }
    char *dir = NULL;
    if (!v->tasks_dir) {
        char *manifest = kb_manifest_path(cfg, NULL);
        if (!manifest)
            kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        else if (kb_task_find(task, manifest, &dir, err) != KB_OK)
            dir = NULL;
        free(manifest);
        return dir;
    }
    char *path = kb_path_join(v->tasks_dir, task);
    kb_err quiet;   /* the list of tasks says more than the places looked */
    kb_err_clear(&quiet);
    if (!path || kb_task_find(path, NULL, &dir, &quiet) == KB_ERR_NOMEM) {
        free(path);
        kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        return NULL;
    }
    free(path);
    if (dir)
        return dir;
    kb_buf names;
    kb_buf_init(&names, 8192);
    if (list_tasks(v->tasks_dir, &names) == KB_OK)
        kb_err_set(err, KB_ERR_NOTFOUND, "verify: no task '%s' in '%s' (tasks: %s)",
                   task, v->tasks_dir, names.data);
    else
        kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_buf_release(&names);
    return NULL;
}

/* Writes source to a new temporary .cu file; its path in path. */
static kb_rc write_candidate(const char *source, char path[64], kb_err *err)
{
    snprintf(path, 64, "/tmp/kb-candidate-XXXXXX.cu");
    int fd = mkstemps(path, 3);
    if (fd < 0)
        return kb_err_set(err, KB_ERR_IO, "verify: cannot make a file for the "
                          "candidate in /tmp");
    size_t len = strlen(source), done = 0;
    while (done < len) {
        ssize_t w = write(fd, source + done, len - done);
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    if (close(fd) != 0 || done < len) {
        unlink(path);
        return kb_err_set(err, KB_ERR_IO, "verify: cannot write the candidate to '%s'",
                          path);
    }
    return KB_OK;
}

/* What a verify call runs: the task's folder, the candidate in a
 * temporary file, the verifier (with KB_QUEUE's queue, if any). */
typedef struct {
    char *dir;
    char path[64];
    kb_verifier *verifier;
} verify_call;

static kb_rc call_open(kb_tool_ctx *ctx, const cJSON *args, verify_call *c, kb_err *err)
{
    memset(c, 0, sizeof *c);
    const verify_settings dflt = { NULL, 0 };
    const verify_settings *v = kb_store_slot_get(ctx->store, SETTINGS_SLOT);
    if (!v)
        v = &dflt;
    const char *source = cJSON_GetStringValue(cJSON_GetObjectItem(args, "source"));
    c->dir = task_dir(v, ctx->config,
                      cJSON_GetStringValue(cJSON_GetObjectItem(args, "task")), err);
    if (!c->dir)
        return err->rc;
    kb_verifier_opts o;
    kb_verifier_opts_init(&o);
    o.kb_verify = ctx->config ? ctx->config->verify : NULL;
    o.queue = ctx->config ? ctx->config->queue : NULL;   /* KB_QUEUE */
    o.timeout_s = v->timeout_s;
    o.compile_only = cJSON_IsTrue(cJSON_GetObjectItem(args, "compile_only"));
    o.no_timing = cJSON_IsTrue(cJSON_GetObjectItem(args, "no_timing"));
    kb_rc rc = write_candidate(source, c->path, err);
    if (rc == KB_OK)
        rc = kb_verifier_open(&o, &c->verifier, err);
    return rc;
}

static void call_close(verify_call *c)
{
    kb_verifier_free(c->verifier);
    if (*c->path)
        unlink(c->path);
    free(c->dir);
}

/* The tool's answer for r: kb-verify's result, its candidate the source
 * the caller passed (the temporary file is gone once answered). No
 * verdict on the candidate (no GPU, kb-verify itself failed, a job in
 * the dead letter) is the call's failure, not the kernel's. */
static kb_rc answer(const kb_verify_result *r, cJSON **out, kb_err *err)
{
    if (r->verdict == KB_VERIFY_ERROR)
        return kb_err_set(err, KB_ERR_GPU, "verify: kb-verify could not judge the "
                          "candidate: %s", r->reason && *r->reason ? r->reason : "no reason given");
    *out = cJSON_Duplicate(r->json, 1);
    cJSON_DeleteItemFromObjectCaseSensitive(*out, "candidate");
    if (*out && !cJSON_AddStringToObject(*out, "candidate", "source")) {
        cJSON_Delete(*out);
        *out = NULL;
    }
    return *out ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
}

static kb_rc tool_verify(kb_tool_ctx *ctx, const cJSON *args, cJSON **out,
                         kb_err *err)
{
    verify_call c;
    kb_verify_result r;
    kb_verify_result_init(&r);
    kb_rc rc = call_open(ctx, args, &c, err);
    if (rc == KB_OK)
        rc = kb_jobq_verify(c.verifier, c.dir, c.path, &r, err);
    if (rc == KB_OK)
        rc = answer(&r, out, err);
    kb_verify_result_release(&r);
    call_close(&c);
    return rc;
}

kb_rc kb_api_verify_submit(kb_tool_ctx *ctx, const cJSON *args, char id[65],
                           kb_api_job_state *state, kb_err *err)
{
    *state = KB_API_JOB_NONE;
    verify_call c;
    kb_job_state st = KB_JOB_NONE;
    kb_rc rc = call_open(ctx, args, &c, err);
    if (rc == KB_OK && !kb_verifier_queue(c.verifier))
        rc = kb_err_set(err, KB_ERR_USAGE, "verify: no queue (KB_QUEUE): "
                        "verified in process");
    if (rc == KB_OK)
        rc = kb_jobq_verify_submit(c.verifier, c.dir, c.path, id, &st, err);
    if (rc == KB_OK)
        *state = st == KB_JOB_PENDING || st == KB_JOB_LEASED ? KB_API_JOB_WORKING
                                                             : KB_API_JOB_DONE;
    call_close(&c);
    return rc;
}

kb_rc kb_api_verify_job(kb_tool_ctx *ctx, const char *id, kb_api_job_state *state,
                        cJSON **out, kb_err *tool_err, kb_err *err)
{
    *state = KB_API_JOB_NONE;
    *out = NULL;
    const char *url = ctx->config ? ctx->config->queue : NULL;   /* in process: */
    kb_jobq *q = NULL;                                         /* no jobs kept */
    kb_job_state st = KB_JOB_NONE;
    kb_rc rc = kb_jobq_open(url, NULL, &q, err);
    if (rc == KB_OK)
        rc = kb_jobq_status(q, id, &st, NULL, err);
    if (rc == KB_OK && (st == KB_JOB_PENDING || st == KB_JOB_LEASED)) {
        *state = KB_API_JOB_WORKING;
    } else if (rc == KB_OK && (st == KB_JOB_DONE || st == KB_JOB_DEAD)) {
        *state = KB_API_JOB_DONE;
        kb_verify_result r;
        kb_verify_result_init(&r);
        if (kb_jobq_wait(q, id, 1, &r, tool_err) == KB_OK)
            answer(&r, out, tool_err);
        kb_verify_result_release(&r);
    }
    kb_jobq_close(q);
    return rc;
}

static const kb_tool tools[] = {
    { "verify",
      "Verify a candidate CUDA kernel for one of kb's tasks on the GPU with "
      "kb-verify: it compiles the source with NVRTC, checks the kernel "
      "against the task's reference on every shape, several seeds and "
      "input distributions (outputs poisoned, inputs checked unchanged, "
      "out-of-bounds writes caught), and times it against the task's "
      "baseline. Use it before you claim a kernel correct or faster, and "
      "after each change. Pass the task's name and the kernel's source "
      "(device code only). Returns kb-verify's result: the verdict, the "
      "reason in words, the compile log with registers and spills, each "
      "check, and the timings with the speedup; a kernel that fails is a "
      "verdict, not an error, while a check that could not run (no GPU, "
      "kb-verify failed) is an error that says why. It runs the kernel on "
      "this machine's GPU.",
      verify_input, verify_output, 0, tool_verify, 0,
      KB_TOOL_MCP | KB_TOOL_OPT_IN | KB_TOOL_NEEDS_VERIFY },
};

const kb_tool *kb_api_verify_tools(size_t *n)
{
    *n = sizeof tools / sizeof tools[0];
    return tools;
}
