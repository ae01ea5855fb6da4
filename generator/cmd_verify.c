/* cmd_verify.c - kb verify: runs kb-verify (a separate executable: kb never
 * links CUDA) as a child process with a wall-clock limit, for one candidate
 * or a whole task suite, and computes the suite's fast_p scores. */
#include "kb/cli.h"
#include "generator/task.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------ the child */

/* kb-verify: $KB_VERIFY, else beside this kb, else on the PATH. */
static char *find_kb_verify(void)
{
    const char *env = getenv("KB_VERIFY");
    if (env && *env)
        return kb_strdup(env);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            char *p = kb_path_join(self, "kb-verify");
            if (p && access(p, X_OK) == 0)
                return p;
            free(p);
        }
    }
    return kb_strdup("kb-verify");
}

typedef struct {
    pid_t pid;
    int in, out;      /* our ends: write requests to in, read results from out */
    kb_buf pending;   /* bytes read past the last line */
} child;

static int child_start(child *c, char *const argv[], int want_stdin)
{
    int po[2], pi[2] = { -1, -1 };
    memset(c, 0, sizeof *c);
    c->in = c->out = -1;
    kb_buf_init(&c->pending, 64u << 20);
    if (pipe(po) != 0)
        return -1;
    if (want_stdin && pipe(pi) != 0) {
        close(po[0]);
        close(po[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(po[0]);
        close(po[1]);
        if (want_stdin) {
            close(pi[0]);
            close(pi[1]);
        }
        return -1;
    }
    if (pid == 0) {
        dup2(po[1], STDOUT_FILENO);
        if (want_stdin)
            dup2(pi[0], STDIN_FILENO);
        else {
            int dn = open("/dev/null", O_RDONLY);
            if (dn >= 0)
                dup2(dn, STDIN_FILENO);
        }
        close(po[0]);
        close(po[1]);
        if (want_stdin) {
            close(pi[0]);
            close(pi[1]);
        }
        setpgid(0, 0);   /* its own group: a kill reaches what it started */
        execvp(argv[0], argv);
        fprintf(stderr, "kb: cannot run '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(po[1]);
    c->out = po[0];
    if (want_stdin) {
        close(pi[0]);
        c->in = pi[1];
    }
    c->pid = pid;
    return 0;
}

/* How long a child that has answered (or whose stdin was closed) gets to
 * exit by itself before it is killed. */
#define CHILD_GRACE_MS 10000

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

/* Reads one line from the child within deadline_ms (absolute, kb_now_ms).
 * Returns 1 with the line in *line (caller frees), 0 on end of output, -1
 * on timeout. */
static int child_read_line(child *c, double deadline_ms, char **line)
{
    for (;;) {
        char *nl = c->pending.data ? memchr(c->pending.data, '\n', c->pending.len) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - c->pending.data);
            *line = kb_strndup(c->pending.data, n);
            memmove(c->pending.data, nl + 1, c->pending.len - n - 1);
            c->pending.len -= n + 1;
            c->pending.data[c->pending.len] = '\0';
            return 1;
        }
        double left = deadline_ms - kb_now_ms();
        if (left <= 0)
            return -1;
        struct pollfd pf = { c->out, POLLIN, 0 };
        int pr = poll(&pf, 1, left > 1000 ? 1000 : (int)left + 1);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
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

/* A result for a candidate that gave none. Caller frees. */
static cJSON *synth_result(const char *task, const char *cand,
                           const char *verdict, const char *reason)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "kb_verify", 1);
    cJSON_AddStringToObject(r, "task", task);
    cJSON_AddStringToObject(r, "candidate", cand);
    cJSON_AddStringToObject(r, "verdict", verdict);
    cJSON_AddStringToObject(r, "reason", reason);
    return r;
}

/* The result for a child that gave none: got is child_read_line's answer
 * (-1: it was killed at the deadline), st the child's wait status, serve
 * whether it was the --serve process. Caller frees. */
static cJSON *no_result(const char *kv, int serve, double timeout_s, int got,
                        int st, const char *task, const char *cand)
{
    kb_buf msg;
    kb_buf_init(&msg, 0);
    const char *verdict;
    if (got == -1) {
        verdict = "timeout";
        kb_buf_printf(&msg, "no result within %.0f s: kb-verify was killed",
                      timeout_s);
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == 127) {
        verdict = "error";
        kb_buf_printf(&msg, "cannot run '%s' (build it where a CUDA toolkit "
                      "is found, or set KB_VERIFY)", kv);
    } else {
        verdict = WIFSIGNALED(st) || serve ? "crash" : "error";
        kb_buf_printf(&msg, "kb-verify%s ended without a result (%s %d)",
                      serve ? " --serve" : "",
                      WIFSIGNALED(st) ? "signal" : "exit",
                      WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    }
    cJSON *r = synth_result(task, cand, verdict, msg.data ? msg.data : "");
    kb_buf_release(&msg);
    return r;
}

typedef struct {
    const char *kv;
    double timeout_s;
    int no_timing;
    int serve;
    child srv;        /* the --serve process, started on demand */
} runner;

/* Verifies one candidate; never NULL (caller frees). */
static cJSON *run_one(runner *R, const char *task_dir, const char *task_name,
                      const char *cand)
{
    double t0 = kb_now_ms(), deadline = t0 + R->timeout_s * 1000;
    if (R->serve) {
        if (R->srv.pid <= 0) {
            char *argv[] = { (char *)R->kv, "--serve", NULL };
            if (child_start(&R->srv, argv, 1) != 0)
                return synth_result(task_name, cand, "error", "cannot start kb-verify --serve");
        }
        cJSON *req = cJSON_CreateObject();
        cJSON_AddStringToObject(req, "task", task_dir);
        cJSON_AddStringToObject(req, "candidate", cand);
        if (R->no_timing)
            cJSON_AddBoolToObject(req, "no_timing", 1);
        char *s = cJSON_PrintUnformatted(req);
        cJSON_Delete(req);
        size_t len = strlen(s);
        s[len] = '\0';
        /* a child that could not start (or died) must not kill kb with
         * SIGPIPE: the failed write shows as no result, reported below */
        struct sigaction ign, old;
        memset(&ign, 0, sizeof ign);
        ign.sa_handler = SIG_IGN;
        sigaction(SIGPIPE, &ign, &old);
        int ok = write(R->srv.in, s, len) == (ssize_t)len && write(R->srv.in, "\n", 1) == 1;
        sigaction(SIGPIPE, &old, NULL);
        free(s);
        char *line = NULL;
        int got = ok ? child_read_line(&R->srv, deadline, &line) : 0;
        cJSON *res = got == 1 ? cJSON_Parse(line) : NULL;
        free(line);
        if (!res) {
            /* at the deadline it is killed; having hung up, it is reaped */
            int st = child_end(&R->srv, got != 0);
            return no_result(R->kv, 1, R->timeout_s, got, st, task_name, cand);
        }
        if (cJSON_IsTrue(cJSON_GetObjectItem(res, "sticky_error")))
            child_end(&R->srv, 0);   /* it exits by itself; restart next time */
        return res;
    }
    char tmo[32];
    snprintf(tmo, sizeof tmo, "%.0f", R->timeout_s * 1000);
    char *argv[8];
    int a = 0;
    argv[a++] = (char *)R->kv;
    argv[a++] = "--json";
    if (R->no_timing)
        argv[a++] = "--no-timing";
    argv[a++] = (char *)task_dir;
    argv[a++] = (char *)cand;
    argv[a] = NULL;
    child c;
    if (child_start(&c, argv, 0) != 0)
        return synth_result(task_name, cand, "error", "cannot start kb-verify");
    char *line = NULL;
    int got = child_read_line(&c, deadline, &line);
    int st = child_end(&c, got == -1);
    cJSON *res = got == 1 ? cJSON_Parse(line) : NULL;
    free(line);
    if (!res)
        return no_result(R->kv, 0, R->timeout_s, got, st, task_name, cand);
    return res;
}

/* ------------------------------------------------------------------ output */

static const char *jstr(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(o, k));
    return s ? s : "";
}

static double jnum(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static int verdict_ok(const char *v)
{
    return !strcmp(v, "correct") || !strcmp(v, "faster");
}

static void print_one(const cJSON *r)
{
    printf("%s: %s\n  %s\n", jstr(r, "task"), jstr(r, "verdict"), jstr(r, "reason"));
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(r, "timings")) {
        printf("  %s: candidate %.4f ms, %s %.4f ms, roofline floor %.4f ms, "
               "speedup %.2fx\n", jstr(t, "shape"),
               jnum(cJSON_GetObjectItem(t, "candidate_ms"), "median"),
               jstr(t, "baseline"),
               jnum(cJSON_GetObjectItem(t, "baseline_ms"), "median"),
               jnum(t, "floor_ms"), jnum(t, "speedup"));
    }
    if (cJSON_GetObjectItem(r, "wall_ms"))
        printf("  wall %.0f ms\n", jnum(r, "wall_ms"));
}

/* A task directory: DIR itself, or corpus/tasks/NAME. Caller frees. */
static char *task_dir_for(const char *arg)
{
    char *j = kb_path_join(arg, "task.json");
    int here = j && access(j, R_OK) == 0;
    free(j);
    if (here)
        return kb_strdup(arg);
    char *d = kb_path_join("corpus/tasks", arg);
    j = d ? kb_path_join(d, "task.json") : NULL;
    int there = j && access(j, R_OK) == 0;
    free(j);
    if (there)
        return d;
    free(d);
    return NULL;
}

/* ------------------------------------------------------------------ suite */

typedef struct {
    char *name, *dir;
    char **cands;
    size_t ncands;
    cJSON *best;
} suite_task;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* appends DIR's *.cu files but reference.cu */
static void add_cu_files(const char *dir, suite_task *t)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!ends_with(e->d_name, ".cu") || !strcmp(e->d_name, "reference.cu"))
            continue;
        char **n = realloc(t->cands, (t->ncands + 1) * sizeof *n);
        if (!n)
            break;
        t->cands = n;
        t->cands[t->ncands++] = kb_path_join(dir, e->d_name);
    }
    closedir(d);
}

/* Is r better than best? faster > correct (by speedup) > the rest. */
static int better(const cJSON *r, const cJSON *best)
{
    if (!best)
        return 1;
    int ro = verdict_ok(jstr(r, "verdict")), bo = verdict_ok(jstr(best, "verdict"));
    if (ro != bo)
        return ro;
    return jnum(r, "speedup_geomean") > jnum(best, "speedup_geomean");
}

static int run_suite(const kb_command *self, const char *suite,
                     const char *cand_dir, const char *results, runner *R,
                     int json)
{
    double t0 = kb_now_ms();
    DIR *d = opendir(suite);
    if (!d) {
        fprintf(stderr, "kb: cannot open '%s': %s\n", suite, strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t nn = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *dir = kb_path_join(suite, e->d_name);
        char *j = kb_path_join(dir, "task.json");
        if (access(j, R_OK) == 0) {
            char **n2 = realloc(names, (nn + 1) * sizeof *n2);
            if (n2) {
                names = n2;
                names[nn++] = kb_strdup(e->d_name);
            }
        }
        free(j);
        free(dir);
    }
    closedir(d);
    qsort(names, nn, sizeof *names, cmp_str);
    suite_task *ts = calloc(nn ? nn : 1, sizeof *ts);
    size_t ncand = 0;
    for (size_t i = 0; i < nn; i++) {
        suite_task *t = &ts[i];
        t->name = names[i];
        t->dir = kb_path_join(suite, t->name);
        if (results)
            continue;
        kb_buf p;
        kb_buf_init(&p, 0);
        kb_buf_printf(&p, "%s/%s.cu", cand_dir, t->name);
        if (access(p.data, R_OK) == 0) {
            t->cands = calloc(1, sizeof *t->cands);
            t->cands[t->ncands++] = kb_strdup(p.data);
        }
        kb_buf_reset(&p);
        kb_buf_printf(&p, "%s/%s", cand_dir, t->name);
        add_cu_files(p.data, t);
        kb_buf_puts(&p, "/candidates");
        add_cu_files(p.data, t);
        kb_buf_release(&p);
        if (t->ncands > 1)
            qsort(t->cands, t->ncands, sizeof *t->cands, cmp_str);
        ncand += t->ncands;
    }
    if (results) {
        /* results already computed (kb-verify --json lines in *.json[l]) */
        DIR *rd = opendir(results);
        if (!rd) {
            fprintf(stderr, "kb: cannot open '%s': %s\n", results, strerror(errno));
            return 1;
        }
        while ((e = readdir(rd))) {
            if (!ends_with(e->d_name, ".json") && !ends_with(e->d_name, ".jsonl"))
                continue;
            char *path = kb_path_join(results, e->d_name);
            kb_buf b;
            kb_buf_init(&b, 0);
            if (kb_read_file(path, 256u << 20, &b, NULL) == KB_OK) {
                for (char *line = b.data; line && *line;) {
                    char *nl = strchr(line, '\n');
                    if (nl)
                        *nl = '\0';
                    cJSON *r = cJSON_Parse(line);
                    const char *tn = r ? jstr(r, "task") : "";
                    const char *base = strrchr(tn, '/');
                    for (size_t i = 0; r && i < nn; i++)
                        if (!strcmp(ts[i].name, base ? base + 1 : tn) &&
                            cJSON_GetObjectItem(r, "verdict")) {
                            ncand++;
                            if (better(r, ts[i].best)) {
                                cJSON_Delete(ts[i].best);
                                ts[i].best = r;
                                r = NULL;
                            }
                            break;
                        }
                    cJSON_Delete(r);
                    line = nl ? nl + 1 : NULL;
                }
            }
            kb_buf_release(&b);
            free(path);
        }
        closedir(rd);
    } else {
        for (size_t i = 0; i < nn; i++)
            for (size_t k = 0; k < ts[i].ncands; k++) {
                cJSON *r = run_one(R, ts[i].dir, ts[i].name, ts[i].cands[k]);
                if (!json)
                    fprintf(stderr, "%-12s %-14s %s\n", ts[i].name,
                            jstr(r, "verdict"), ts[i].cands[k]);
                if (better(r, ts[i].best)) {
                    cJSON_Delete(ts[i].best);
                    ts[i].best = r;
                } else {
                    cJSON_Delete(r);
                }
            }
        if (R->srv.pid > 0)
            child_end(&R->srv, 0);
    }
    /* fast_p */
    const char **verdicts = calloc(nn ? nn : 1, sizeof *verdicts);
    double *speed = calloc(nn ? nn : 1, sizeof *speed);
    for (size_t i = 0; i < nn; i++) {
        verdicts[i] = ts[i].best ? jstr(ts[i].best, "verdict") : "";
        speed[i] = ts[i].best ? jnum(ts[i].best, "speedup_geomean") : 0;
        /* correct but untimed counts for p = 0 only */
        if (ts[i].best && verdict_ok(verdicts[i]) && speed[i] == 0)
            speed[i] = 1e-9;
    }
    static const double ps[] = { 0, 1, 1.5, 2 };
    double fp[4];
    kb_verify_fast_p(verdicts, speed, nn, ps, 4, fp);
    int status = 0;
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "suite", suite);
        cJSON_AddNumberToObject(o, "candidates", (double)ncand);
        cJSON *arr = cJSON_AddArrayToObject(o, "tasks");
        for (size_t i = 0; i < nn; i++) {
            cJSON *x = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "task", ts[i].name);
            cJSON_AddStringToObject(x, "candidate", ts[i].best ? jstr(ts[i].best, "candidate") : "");
            cJSON_AddStringToObject(x, "verdict", verdicts[i][0] ? verdicts[i] : "none");
            if (ts[i].best && cJSON_GetObjectItem(ts[i].best, "speedup_geomean"))
                cJSON_AddNumberToObject(x, "speedup", jnum(ts[i].best, "speedup_geomean"));
            else
                cJSON_AddNullToObject(x, "speedup");
            cJSON_AddStringToObject(x, "reason", ts[i].best ? jstr(ts[i].best, "reason") : "no candidate");
            cJSON_AddItemToArray(arr, x);
        }
        cJSON *f = cJSON_AddObjectToObject(o, "fast_p");
        cJSON_AddNumberToObject(f, "0", fp[0]);
        cJSON_AddNumberToObject(f, "1", fp[1]);
        cJSON_AddNumberToObject(f, "1.5", fp[2]);
        cJSON_AddNumberToObject(f, "2", fp[3]);
        cJSON_AddNumberToObject(o, "wall_ms", kb_now_ms() - t0);
        char *s = cJSON_PrintUnformatted(o);
        puts(s);
        free(s);
        cJSON_Delete(o);
    } else {
        printf("%-12s %-14s %9s  %s\n", "task", "verdict", "speedup", "candidate");
        for (size_t i = 0; i < nn; i++) {
            char sp[32] = "-";
            if (ts[i].best && cJSON_GetObjectItem(ts[i].best, "speedup_geomean"))
                snprintf(sp, sizeof sp, "%.2fx", jnum(ts[i].best, "speedup_geomean"));
            printf("%-12s %-14s %9s  %s\n", ts[i].name,
                   verdicts[i][0] ? verdicts[i] : "none", sp,
                   ts[i].best ? jstr(ts[i].best, "candidate") : "");
        }
        printf("fast_0 %.2f  fast_1 %.2f  fast_1.5 %.2f  fast_2 %.2f  (%zu tasks, %zu candidates)\n",
               fp[0], fp[1], fp[2], fp[3], nn, ncand);
    }
    if (nn == 0) {
        fprintf(stderr, "kb %s: no tasks (task.json) under '%s'\n", self->name, suite);
        status = 1;
    }
    for (size_t i = 0; i < nn; i++) {
        free(ts[i].name);
        free(ts[i].dir);
        for (size_t k = 0; k < ts[i].ncands; k++)
            free(ts[i].cands[k]);
        free(ts[i].cands);
        cJSON_Delete(ts[i].best);
    }
    free(ts);
    free(names);
    free(verdicts);
    free(speed);
    return status;
}

/* ------------------------------------------------------------------ command */

int cmd_verify(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    (void)cli;
    int json = 0;
    const char *suite = NULL, *cands = NULL, *results = NULL;
    const char *pos[2] = { NULL, NULL };
    int npos = 0;
    runner R = { 0 };
    R.timeout_s = 120;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long x;
        if (!strcmp(a, "--json"))
            json = 1;
        else if (!strcmp(a, "--serve"))
            R.serve = 1;
        else if (!strcmp(a, "--no-timing"))
            R.no_timing = 1;
        else if (!strcmp(a, "--suite") && i + 1 < argc)
            suite = argv[++i];
        else if (!strcmp(a, "--candidates") && i + 1 < argc)
            cands = argv[++i];
        else if (!strcmp(a, "--results") && i + 1 < argc)
            results = argv[++i];
        else if (!strcmp(a, "--timeout") && i + 1 < argc) {
            if (kb_parse_long(argv[++i], 1, 86400, &x) != KB_OK)
                return kb_cli_usage_error(self, "bad --timeout '%s'", argv[i]);
            R.timeout_s = (double)x;
        } else if (a[0] == '-' && a[1])
            return kb_cli_usage_error(self, "unknown option '%s'", a);
        else if (npos < 2)
            pos[npos++] = a;
        else
            return kb_cli_usage_error(self, "too many arguments");
    }
    char *kv = find_kb_verify();
    R.kv = kv;
    int status;
    if (suite) {
        if (npos)
            return free(kv), kb_cli_usage_error(self, "--suite takes no TASK or CANDIDATE");
        if (!cands && !results)
            return free(kv), kb_cli_usage_error(self, "--suite needs --candidates DIR or --results DIR");
        status = run_suite(self, suite, cands, results, &R, json);
    } else {
        if (npos != 2) {
            free(kv);
            return kb_cli_usage_error(self, "need TASK and CANDIDATE.cu");
        }
        char *dir = task_dir_for(pos[0]);
        if (!dir) {
            fprintf(stderr, "kb: no task '%s' (a directory with task.json, or "
                    "a name under corpus/tasks)\n", pos[0]);
            free(kv);
            return 1;
        }
        if (access(pos[1], R_OK) != 0) {
            fprintf(stderr, "kb: cannot open '%s': %s\n", pos[1], strerror(errno));
            free(dir);
            free(kv);
            return 1;
        }
        const char *base = strrchr(dir, '/');
        cJSON *r = run_one(&R, dir, base ? base + 1 : dir, pos[1]);
        if (R.srv.pid > 0)
            child_end(&R.srv, 0);
        if (json) {
            char *s = cJSON_PrintUnformatted(r);
            puts(s);
            free(s);
        } else {
            print_one(r);
        }
        const char *v = jstr(r, "verdict");
        status = verdict_ok(v) ? 0 : !strcmp(v, "error") ? 4 : 1;
        cJSON_Delete(r);
        free(dir);
    }
    free(kv);
    return status;
}
