/* verifier.c - kb-verify as a child process: found, started (one-shot, or
 * one --serve process fed JSON lines), given a deadline, read one result
 * line from, killed at the deadline, reaped, restarted after a sticky
 * error; and its result line parsed into a kb_verify_result. */
#include "verify/verify.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------ verdicts */

static const char *const verdict_names[] = {
    [KB_VERIFY_ERROR] = "error",
    [KB_VERIFY_COMPILED] = "compiled",
    [KB_VERIFY_CORRECT] = "correct",
    [KB_VERIFY_FASTER] = "faster",
    [KB_VERIFY_INCORRECT] = "incorrect",
    [KB_VERIFY_SUSPICIOUS] = "suspicious",
    [KB_VERIFY_COMPILE_ERROR] = "compile_error",
    [KB_VERIFY_REFUSED] = "refused",
    [KB_VERIFY_TIMEOUT] = "timeout",
    [KB_VERIFY_CRASH] = "crash",
    [KB_VERIFY_UNKNOWN] = "unknown",
};

const char *kb_verify_verdict_name(kb_verify_verdict v)
{
    return (unsigned)v <= KB_VERIFY_UNKNOWN ? verdict_names[v] : "unknown";
}

kb_verify_verdict kb_verify_verdict_parse(const char *name)
{
    for (int i = 0; name && i < KB_VERIFY_UNKNOWN; i++)
        if (strcmp(name, verdict_names[i]) == 0)
            return (kb_verify_verdict)i;
    return KB_VERIFY_UNKNOWN;
}

int kb_verify_verdict_ok(kb_verify_verdict v)
{
    return v == KB_VERIFY_CORRECT || v == KB_VERIFY_FASTER;
}

/* ------------------------------------------------------------------ results */

void kb_verify_result_init(kb_verify_result *r)
{
    memset(r, 0, sizeof *r);
}

void kb_verify_result_release(kb_verify_result *r)
{
    free(r->task);
    free(r->candidate);
    free(r->verdict_name);
    free(r->reason);
    for (size_t i = 0; i < r->ntimings; i++) {
        free(r->timings[i].shape);
        free(r->timings[i].baseline);
    }
    free(r->timings);
    free(r->compile.arch);
    free(r->compile.log);
    for (size_t i = 0; i < r->compile.nkernels; i++)
        free(r->compile.kernels[i].name);
    free(r->compile.kernels);
    cJSON_Delete(r->json);
    kb_verify_result_init(r);
}

/* o's string k as an owned copy ("" when absent); NULL sets *rc. */
static char *take_str(const cJSON *o, const char *k, kb_rc *rc)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(o, k));
    char *c = kb_strdup(s ? s : "");
    if (!c)
        *rc = KB_ERR_NOMEM;
    return c;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static void parse_stats(const cJSON *o, kb_verify_stats *s)
{
    s->median = num(o, "median");
    s->ci95_lo = num(o, "ci95_lo");
    s->ci95_hi = num(o, "ci95_hi");
    s->min = num(o, "min");
}

static kb_rc parse_timings(const cJSON *arr, kb_verify_result *r)
{
    int n = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : 0;
    if (n <= 0)
        return KB_OK;
    r->timings = calloc((size_t)n, sizeof *r->timings);
    if (!r->timings)
        return KB_ERR_NOMEM;
    kb_rc rc = KB_OK;
    const cJSON *t;
    cJSON_ArrayForEach(t, arr) {
        kb_verify_timing *x = &r->timings[r->ntimings++];
        x->shape = take_str(t, "shape", &rc);
        x->baseline = take_str(t, "baseline", &rc);
        x->runs = (int)num(t, "runs");
        parse_stats(cJSON_GetObjectItem(t, "candidate_ms"), &x->candidate_ms);
        parse_stats(cJSON_GetObjectItem(t, "baseline_ms"), &x->baseline_ms);
        x->speedup = num(t, "speedup");
        x->floor_ms = num(t, "floor_ms");
    }
    return rc;
}

static kb_rc parse_compile(const cJSON *c, kb_verify_compile *out)
{
    if (!cJSON_IsObject(c))
        return KB_OK;
    kb_rc rc = KB_OK;
    out->present = 1;
    out->ok = cJSON_IsTrue(cJSON_GetObjectItem(c, "ok"));
    out->cached = cJSON_IsTrue(cJSON_GetObjectItem(c, "cached"));
    out->ms = num(c, "ms");
    out->arch = take_str(c, "arch", &rc);
    out->log = take_str(c, "log", &rc);
    const cJSON *ks = cJSON_GetObjectItem(c, "kernels");
    int n = cJSON_IsArray(ks) ? cJSON_GetArraySize(ks) : 0;
    if (rc || n <= 0)
        return rc;
    if (!(out->kernels = calloc((size_t)n, sizeof *out->kernels)))
        return KB_ERR_NOMEM;
    const cJSON *k;
    cJSON_ArrayForEach(k, ks) {
        kb_verify_kernel *x = &out->kernels[out->nkernels++];
        x->name = take_str(k, "name", &rc);
        x->registers = (int)num(k, "registers");
        x->shared_static_bytes = (long)num(k, "shared_static_bytes");
        x->local_bytes = (long)num(k, "local_bytes");
        x->stack_bytes = (long)num(k, "stack_bytes");
        x->spill_store_bytes = (long)num(k, "spill_store_bytes");
        x->spill_load_bytes = (long)num(k, "spill_load_bytes");
    }
    return rc;
}

/* Fills out from json, which it takes (freed on failure). */
static kb_rc result_from_json(cJSON *json, kb_verify_result *out, kb_err *err)
{
    kb_verify_result_release(out);
    const char *verdict = cJSON_GetStringValue(cJSON_GetObjectItem(json, "verdict"));
    if (!cJSON_IsObject(json) || !verdict) {
        cJSON_Delete(json);
        return kb_err_set(err, KB_ERR_PARSE, "not a kb-verify result (a JSON "
                          "object with a \"verdict\")");
    }
    kb_rc rc = KB_OK;
    out->json = json;
    out->task = take_str(json, "task", &rc);
    out->candidate = take_str(json, "candidate", &rc);
    out->verdict_name = take_str(json, "verdict", &rc);
    out->verdict = kb_verify_verdict_parse(verdict);
    out->reason = take_str(json, "reason", &rc);
    const cJSON *x = cJSON_GetObjectItem(json, "speedup_geomean");
    out->has_speedup = cJSON_IsNumber(x);
    out->speedup_geomean = num(json, "speedup_geomean");
    x = cJSON_GetObjectItem(json, "matches_library");
    out->has_library = cJSON_IsBool(x);
    out->matches_library = cJSON_IsTrue(x);
    out->library_ratio = num(json, "library_ratio");
    x = cJSON_GetObjectItem(json, "wall_ms");
    out->has_wall = x != NULL;
    out->wall_ms = num(json, "wall_ms");
    out->sticky_error = cJSON_IsTrue(cJSON_GetObjectItem(json, "sticky_error"));
    if (rc == KB_OK)
        rc = parse_timings(cJSON_GetObjectItem(json, "timings"), out);
    if (rc == KB_OK)
        rc = parse_compile(cJSON_GetObjectItem(json, "compile"), &out->compile);
    if (rc != KB_OK) {
        kb_verify_result_release(out);
        return kb_err_set(err, rc, "out of memory");
    }
    return KB_OK;
}

kb_rc kb_verify_result_parse(const char *line, kb_verify_result *out, kb_err *err)
{
    cJSON *json = line ? cJSON_Parse(line) : NULL;
    if (!json) {
        kb_verify_result_release(out);
        return kb_err_set(err, KB_ERR_PARSE, "not a kb-verify result (no JSON)");
    }
    return result_from_json(json, out, err);
}

/* A result for a candidate that got none from kb-verify. */
static kb_rc synthesise(kb_verify_result *out, const char *task, const char *cand,
                        const char *verdict, const char *reason, kb_err *err)
{
    cJSON *r = cJSON_CreateObject();
    if (!r || !cJSON_AddNumberToObject(r, "kb_verify", 1) ||
        !cJSON_AddStringToObject(r, "task", task) ||
        !cJSON_AddStringToObject(r, "candidate", cand) ||
        !cJSON_AddStringToObject(r, "verdict", verdict) ||
        !cJSON_AddStringToObject(r, "reason", reason)) {
        cJSON_Delete(r);
        kb_verify_result_release(out);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    kb_rc rc = result_from_json(r, out, err);
    out->synthesised = rc == KB_OK;
    return rc;
}

/* ------------------------------------------------------------------ the child */

typedef struct {
    pid_t pid;
    int in, out;      /* our ends: write requests to in, read results from out */
    kb_buf pending;   /* bytes read past the last line */
} child;

/* How long a child that has answered (or whose stdin was closed) gets to
 * exit by itself before it is killed. */
#define CHILD_GRACE_MS 10000

static void close_pair(int p[2])
{
    if (p[0] >= 0)
        close(p[0]);
    if (p[1] >= 0)
        close(p[1]);
}

/* In the child: stdout to the pipe, stdin from the other pipe or
 * /dev/null, stderr to /dev/null when quiet, its own process group (a
 * kill reaches what it started). */
static void child_exec(char *const argv[], char *const envp[], int po[2],
                       int pi[2], int quiet)
{
    dup2(po[1], STDOUT_FILENO);
    if (pi[0] >= 0) {
        dup2(pi[0], STDIN_FILENO);
    } else {
        int dn = open("/dev/null", O_RDONLY);
        if (dn >= 0)
            dup2(dn, STDIN_FILENO);
    }
    if (quiet) {
        int dn = open("/dev/null", O_WRONLY);
        if (dn >= 0)
            dup2(dn, STDERR_FILENO);
    }
    close_pair(po);
    close_pair(pi);
    setpgid(0, 0);
    if (envp)
        execvpe(argv[0], argv, envp);
    else
        execvp(argv[0], argv);
    fprintf(stderr, "kb: cannot run '%s': %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* Starts argv with its stdout on a pipe (and, with want_stdin, its stdin
 * on another; quiet: its stderr dropped). Returns 0, or -1 (no pipe, no
 * fork). */
static int child_start(child *c, char *const argv[], char *const envp[],
                       int want_stdin, int quiet)
{
    int po[2] = { -1, -1 }, pi[2] = { -1, -1 };
    memset(c, 0, sizeof *c);
    c->in = c->out = -1;
    kb_buf_init(&c->pending, 64u << 20);
    if (pipe2(po, O_CLOEXEC) != 0)   /* no other child inherits it */
        return -1;
    if (want_stdin && pipe2(pi, O_CLOEXEC) != 0) {
        close_pair(po);
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close_pair(po);
        close_pair(pi);
        return -1;
    }
    if (pid == 0)
        child_exec(argv, envp, po, pi, quiet);
    close(po[1]);
    c->out = po[0];
    if (want_stdin) {
        close(pi[0]);
        c->in = pi[1];
    }
    c->pid = pid;
    return 0;
}

/* Reaps the child, killing it at once when kill_it, else once it has not
 * exited within CHILD_GRACE_MS; returns its wait status. */
static int child_end(child *c, int kill_it)
{
    int status = 0;
    if (c->in >= 0)
        close(c->in);
    if (c->pid > 0) {
        double deadline = kb_now_ms() + CHILD_GRACE_MS;
        pid_t w = 0;
        while (!kill_it && kb_now_ms() < deadline) {
            w = waitpid(c->pid, &status, WNOHANG);
            if (w != 0 && !(w < 0 && errno == EINTR))
                break;
            w = 0;
            usleep(10000);
        }
        if (w == 0) {   /* asked to, or past the grace */
            kill(-c->pid, SIGKILL);
            while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
                ;
        }
    }
    if (c->out >= 0)
        close(c->out);
    kb_buf_release(&c->pending);
    c->pid = 0;
    c->in = c->out = -1;
    return status;
}

/* A whole line from c->pending into *line (caller frees); 0 if none yet. */
static int take_line(child *c, char **line)
{
    char *nl = c->pending.data ? memchr(c->pending.data, '\n', c->pending.len) : NULL;
    if (!nl)
        return 0;
    size_t n = (size_t)(nl - c->pending.data);
    *line = kb_strndup(c->pending.data, n);
    memmove(c->pending.data, nl + 1, c->pending.len - n - 1);
    c->pending.len -= n + 1;
    c->pending.data[c->pending.len] = '\0';
    return 1;
}

/* Reads one line from the child within deadline_ms (absolute, kb_now_ms).
 * Returns 1 with the line in *line (caller frees), 0 on end of output, -1
 * on timeout. */
static int child_read_line(child *c, double deadline_ms, char **line)
{
    for (;;) {
        if (take_line(c, line))
            return 1;
        double left = deadline_ms - kb_now_ms();
        if (left <= 0)
            return -1;
        struct pollfd pf = { c->out, POLLIN, 0 };
        int pr = poll(&pf, 1, left > 1000 ? 1000 : (int)left + 1);
        if (pr <= 0)
            continue;   /* EINTR, or no data yet: the deadline decides */
        char buf[65536];
        ssize_t n = read(c->out, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (c->pending.len) {   /* a last line without newline */
                *line = kb_buf_detach(&c->pending);
                return 1;
            }
            return 0;
        }
        if (kb_buf_append(&c->pending, buf, (size_t)n) != KB_OK)
            return 0;
    }
}

/* ------------------------------------------------------------------ the runner */

struct kb_verifier {
    char *path;
    kb_verifier_opts opts;
    child srv;        /* the --serve process, started on demand */
    char *gpu, *queue;    /* opts' strings, owned */
    char **envp;      /* the child's environment with its GPU; NULL: ours */
    void *slot;       /* kb_verifier_set_slot's */
    void (*slot_free)(void *);
};

extern char **environ;

/* Our environment with CUDA_VISIBLE_DEVICES=gpu, built before any fork
 * (a child of a threaded program must not allocate). NULL out of memory. */
static char **env_with_gpu(const char *gpu)
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **e = calloc(n + 2, sizeof *e);
    kb_buf b;
    kb_buf_init(&b, 0);
    if (!e || kb_buf_printf(&b, "CUDA_VISIBLE_DEVICES=%s", gpu) != KB_OK) {
        free(e);
        kb_buf_release(&b);
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "CUDA_VISIBLE_DEVICES=", 21) != 0 &&
            strncmp(environ[i], "KB_VERIFY_DEVICE=", 17) != 0)
            e[k++] = environ[i];   /* borrowed: the environment outlives v */
    e[k] = kb_buf_detach(&b);
    return e;
}

/* Frees what env_with_gpu made: its own entry is the last one. */
static void env_free(char **e)
{
    if (!e)
        return;
    size_t n = 0;
    while (e[n])
        n++;
    if (n)
        free(e[n - 1]);
    free(e);
}

void kb_verifier_opts_init(kb_verifier_opts *o)
{
    memset(o, 0, sizeof *o);
    o->timeout_s = 120;
}

/* kb-verify beside this program, else on the PATH. Caller frees; NULL
 * out of memory. */
static char *default_path(void)
{
    char *dir = kb_exe_dir();
    if (dir) {
        char *p = kb_path_join(dir, "kb-verify");
        free(dir);
        if (!p || access(p, X_OK) == 0)
            return p;
        free(p);
    }
    return kb_strdup("kb-verify");
}

kb_rc kb_verifier_open(const kb_verifier_opts *opts, kb_verifier **out, kb_err *err)
{
    *out = NULL;
    kb_verifier *v = calloc(1, sizeof *v);
    if (!v)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    v->opts = *opts;
    if (v->opts.timeout_s <= 0)
        v->opts.timeout_s = 120;
    v->path = opts->kb_verify ? kb_strdup(opts->kb_verify) : default_path();
    if (!v->path) {
        free(v);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    v->opts.kb_verify = v->path;
    int nomem = 0;
    if (opts->gpu && *opts->gpu) {
        v->gpu = kb_strdup(opts->gpu);
        v->envp = v->gpu ? env_with_gpu(opts->gpu) : NULL;
        nomem |= !v->envp;
    }
    /* "inproc" (KB_QUEUE=inproc) is no queue: run here, as unset */
    if (opts->queue && *opts->queue && strcmp(opts->queue, "inproc") != 0)
        nomem |= !(v->queue = kb_strdup(opts->queue));
    v->opts.gpu = v->gpu;
    v->opts.queue = v->queue;
    if (nomem) {
        kb_verifier_free(v);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    v->srv.pid = 0;
    v->srv.in = v->srv.out = -1;
    *out = v;
    return KB_OK;
}

const char *kb_verifier_path(const kb_verifier *v)
{
    return v->path;
}

const kb_verifier_opts *kb_verifier_opts_get(const kb_verifier *v)
{
    return &v->opts;
}

void kb_verifier_set_run(kb_verifier *v, int compile_only, int no_timing,
                         double timeout_s)
{
    v->opts.compile_only = compile_only;
    v->opts.no_timing = no_timing;
    if (timeout_s > 0)
        v->opts.timeout_s = timeout_s;
}

void kb_verifier_set_spread(kb_verifier *v, int spread)
{
    v->opts.spread = spread;
}

const char *kb_verifier_queue(const kb_verifier *v)
{
    return v->queue;
}

void *kb_verifier_slot(const kb_verifier *v)
{
    return v->slot;
}

void kb_verifier_set_slot(kb_verifier *v, void *p, void (*free_fn)(void *))
{
    v->slot = p;
    v->slot_free = free_fn;
}

void kb_verifier_free(kb_verifier *v)
{
    if (!v)
        return;
    if (v->srv.pid > 0)
        child_end(&v->srv, 0);
    if (v->slot && v->slot_free)
        v->slot_free(v->slot);
    env_free(v->envp);
    free(v->gpu);
    free(v->queue);
    free(v->path);
    free(v);
}

/* The result for a child that gave none: got is child_read_line's answer
 * (-1: it was killed at the deadline), st the child's wait status, serve
 * whether it was the --serve process. */
static kb_rc no_result(const kb_verifier *v, int serve, int got, int st,
                       const char *task, const char *cand,
                       kb_verify_result *out, kb_err *err)
{
    kb_buf msg;
    kb_buf_init(&msg, 0);
    const char *verdict;
    kb_rc rc;
    if (got == -1) {
        verdict = "timeout";
        rc = kb_buf_printf(&msg, "no result within %g s: kb-verify was killed",
                           v->opts.timeout_s);
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == 127) {
        verdict = "error";
        rc = kb_buf_printf(&msg, "cannot run '%s' (build it where a CUDA "
                           "toolkit is found, or set KB_VERIFY)", v->path);
    } else {
        verdict = WIFSIGNALED(st) || serve ? "crash" : "error";
        rc = kb_buf_printf(&msg, "kb-verify%s ended without a result (%s %d)",
                           serve ? " --serve" : "",
                           WIFSIGNALED(st) ? "signal" : "exit",
                           WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    }
    if (rc == KB_OK)
        rc = synthesise(out, task, cand, verdict, msg.data, err);
    else
        rc = kb_err_set(err, rc, "out of memory");
    kb_buf_release(&msg);
    return rc;
}

/* One kb-verify process for this candidate. */
static kb_rc run_once(kb_verifier *v, const char *task_dir, const char *task,
                      const char *cand, double deadline, kb_verify_result *out,
                      kb_err *err)
{
    char *argv[10];
    char spread[16];
    int a = 0;
    argv[a++] = v->path;
    argv[a++] = "--json";
    if (v->opts.no_timing)
        argv[a++] = "--no-timing";
    if (v->opts.spread > 0) {
        snprintf(spread, sizeof spread, "%d", v->opts.spread);
        argv[a++] = "--spread";
        argv[a++] = spread;
    }
    if (v->opts.compile_only)
        argv[a++] = "--compile-only";
    argv[a++] = (char *)task_dir;
    argv[a++] = (char *)cand;
    argv[a] = NULL;
    child c;
    if (child_start(&c, argv, v->envp, 0, 0) != 0) {
        kb_buf_release(&c.pending);
        return synthesise(out, task, cand, "error", "cannot start kb-verify", err);
    }
    char *line = NULL;
    int got = child_read_line(&c, deadline, &line);
    int st = child_end(&c, got == -1);
    kb_rc rc = got == 1 ? kb_verify_result_parse(line, out, NULL) : KB_ERR_PARSE;
    free(line);
    if (rc == KB_OK)
        return KB_OK;
    return no_result(v, 0, got, st, task, cand, out, err);
}

/* Writes the request line for one candidate to the --serve child; 1 if
 * all of it went. A child that could not start (or died) must not kill
 * the caller with SIGPIPE: the failed write shows as no result. */
static int send_request(kb_verifier *v, const char *task_dir, const char *cand)
{
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "task", task_dir);
    cJSON_AddStringToObject(req, "candidate", cand);
    if (v->opts.no_timing)
        cJSON_AddBoolToObject(req, "no_timing", 1);
    if (v->opts.compile_only)
        cJSON_AddBoolToObject(req, "compile_only", 1);
    if (v->opts.spread > 0)
        cJSON_AddNumberToObject(req, "spread", v->opts.spread);
    char *s = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    if (!s)
        return 0;
    size_t len = strlen(s);
    struct sigaction ign, old;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, &old);
    int ok = write(v->srv.in, s, len) == (ssize_t)len &&
             write(v->srv.in, "\n", 1) == 1;
    sigaction(SIGPIPE, &old, NULL);
    free(s);
    return ok;
}

/* This candidate through the --serve child, started if it is not running;
 * at the deadline it is killed, having hung up it is reaped, and after a
 * sticky error it exits by itself (the next run starts a new one). */
static kb_rc run_serve(kb_verifier *v, const char *task_dir, const char *task,
                       const char *cand, double deadline, kb_verify_result *out,
                       kb_err *err)
{
    if (v->srv.pid <= 0) {
        char *argv[] = { v->path, "--serve", NULL };
        if (child_start(&v->srv, argv, v->envp, 1, 0) != 0) {
            kb_buf_release(&v->srv.pending);
            return synthesise(out, task, cand, "error",
                              "cannot start kb-verify --serve", err);
        }
    }
    int ok = send_request(v, task_dir, cand);
    char *line = NULL;
    int got = ok ? child_read_line(&v->srv, deadline, &line) : 0;
    kb_rc rc = got == 1 ? kb_verify_result_parse(line, out, NULL) : KB_ERR_PARSE;
    free(line);
    if (rc != KB_OK) {
        int st = child_end(&v->srv, got != 0);
        return no_result(v, 1, got, st, task, cand, out, err);
    }
    if (out->sticky_error)
        child_end(&v->srv, 0);
    return KB_OK;
}

kb_rc kb_verifier_run(kb_verifier *v, const char *task_dir,
                      const char *candidate_path, kb_verify_result *out,
                      kb_err *err)
{
    kb_verify_result_release(out);
    if (!v || !task_dir || !candidate_path)
        return kb_err_set(err, KB_ERR_USAGE, "a verification needs a task "
                          "and a candidate");
    /* named like the task directory until kb-verify names it */
    const char *slash = strrchr(task_dir, '/');
    const char *task = slash ? slash + 1 : task_dir;
    double deadline = kb_now_ms() + v->opts.timeout_s * 1000;
    if (v->opts.serve)
        return run_serve(v, task_dir, task, candidate_path, deadline, out, err);
    return run_once(v, task_dir, task, candidate_path, deadline, out, err);
}

kb_rc kb_verifier_device_info(kb_verifier *v, cJSON **out, kb_err *err)
{
    *out = NULL;
    char *argv[] = { v->path, "--device-info", "--json", NULL };
    child c;
    if (child_start(&c, argv, v->envp, 0, 1) != 0) {
        kb_buf_release(&c.pending);
        return kb_err_set(err, KB_ERR_NOTFOUND, "cannot start '%s'", v->path);
    }
    char *line = NULL;
    int got = child_read_line(&c, kb_now_ms() + v->opts.timeout_s * 1000, &line);
    int st = child_end(&c, got == -1);
    cJSON *d = got == 1 ? cJSON_Parse(line) : NULL;
    free(line);
    if (cJSON_IsObject(d) && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        *out = d;
        return KB_OK;
    }
    cJSON_Delete(d);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
        return kb_err_set(err, KB_ERR_NOTFOUND, "cannot run '%s' (build it where a "
                          "CUDA toolkit is found, or set KB_VERIFY)", v->path);
    if (got == -1)
        return kb_err_set(err, KB_ERR_GPU, "'%s --device-info' gave nothing within "
                          "%g s", v->path, v->opts.timeout_s);
    return kb_err_set(err, KB_ERR_GPU, "'%s --device-info' found no GPU (%s %d)",
                      v->path, WIFSIGNALED(st) ? "signal" : "exit",
                      WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}
