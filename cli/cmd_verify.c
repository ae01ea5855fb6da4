/* cmd_verify.c - kb verify: one candidate, or a whole task suite, through
 * the verifier (verify/verify.h: kb-verify as a child process with a
 * wall-clock limit), and the suite's fast_p scores. */
#include "cli/cli.h"
#include "generator/gen.h"
#include "verify/verify.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------ one candidate */

/* The result as text on stdout (kb_verify_result_text). Returns KB_OK
 * or KB_ERR_NOMEM with err set. */
static kb_rc print_one(const kb_verify_result *r, kb_err *err)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = kb_verify_result_text(r->json, &b);
    if (rc == KB_OK)
        fputs(b.data, stdout);
    kb_buf_release(&b);
    return rc == KB_OK ? KB_OK : kb_err_set(err, rc, "out of memory printing the result");
}

/* The task directory arg names, where the generator finds tasks too
 * (kb_gen_task_dir: kb_task_find beside cli's manifest first). Caller
 * frees *dir. */
static kb_rc find_task(const kb_cli *cli, const char *arg, char **dir, kb_err *err)
{
    return kb_gen_task_dir(cli->config, NULL, arg, dir, err);
}

/* The exit status for a verdict: 0 kept (correct, faster; compiled when
 * only compiling), 4 error, 1 else. */
static int verdict_status(kb_verify_verdict v)
{
    return kb_verify_verdict_ok(v) || v == KB_VERIFY_COMPILED ? 0
           : v == KB_VERIFY_ERROR ? 4 : 1;
}

static int verify_one(const kb_cli *cli, kb_verifier *v, const char *task,
                      const char *cand, int json, int no_wait)
{
    kb_err err;
    kb_err_clear(&err);
    char *dir = NULL;
    if (find_task(cli, task, &dir, &err) != KB_OK)
        return kb_cli_fail(&err);
    if (access(cand, R_OK) != 0) {
        kb_cli_errorf("cannot open '%s': %s", cand, strerror(errno));
        free(dir);
        return 1;
    }
    if (no_wait) {   /* the job's id and state: kb verify queue ID waits */
        char id[65];
        kb_job_state st;
        kb_rc rc = kb_jobq_verify_submit(v, dir, cand, id, &st, &err);
        free(dir);
        if (rc != KB_OK)
            return kb_cli_fail(&err);
        printf("%s %s\n", id, kb_job_state_name(st));
        return 0;
    }
    kb_verify_result r;
    kb_verify_result_init(&r);
    kb_rc rc = kb_jobq_verify(v, dir, cand, &r, &err);
    free(dir);
    if (rc == KB_OK && json) {
        rc = kb_cli_print_json(r.json, &err);
        r.json = NULL;   /* printed and freed */
    } else if (rc == KB_OK) {
        rc = print_one(&r, &err);
    }
    int status = rc == KB_OK ? verdict_status(r.verdict) : kb_cli_fail(&err);
    kb_verify_result_release(&r);
    return status;
}

/* ------------------------------------------------------------------ suite */

typedef struct {
    char *name, *dir;
    char **cands;
    size_t ncands, capcands;
    int has_best;
    kb_verify_result best;     /* the best result of its candidates */
} suite_task;

typedef struct {
    const char *path;
    suite_task *ts;
    size_t n, cap;
    size_t ncand;              /* candidates run, or results scored */
    size_t nerror;             /* of them, ended in "error" */
    char *first_error;         /* the first one's reason */
    size_t ncompiled;          /* of them, "compiled": --compile-only */
    size_t ntimed;             /* of them, with a speedup */
    size_t nuntimed_ok;        /* of them, correct without one: --no-timing */
    int name_w;                /* the longest task name, for the columns */
} suite;

/* Counts r into the suite's tally of results and errors. Returns KB_OK
 * or KB_ERR_NOMEM. */
static kb_rc tally(suite *s, const kb_verify_result *r)
{
    s->ncand++;
    s->ncompiled += r->verdict == KB_VERIFY_COMPILED;
    s->ntimed += r->has_speedup != 0;
    s->nuntimed_ok += kb_verify_verdict_ok(r->verdict) && !r->has_speedup;
    if (r->verdict != KB_VERIFY_ERROR)
        return KB_OK;
    if (s->nerror++ == 0 && !(s->first_error = kb_strdup(r->reason)))
        return KB_ERR_NOMEM;
    return KB_OK;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Appends path (taken: freed on failure; NULL, an allocation that
 * failed) to t's candidates. Returns KB_OK or KB_ERR_NOMEM. */
static kb_rc add_cand(suite_task *t, char *path)
{
    if (!path || KB_GROW(t->cands, t->ncands + 1, t->capcands) != KB_OK) {
        free(path);
        return KB_ERR_NOMEM;
    }
    t->cands[t->ncands++] = path;
    return KB_OK;
}

/* appends DIR's *.cu files but reference.cu (none if there is no DIR) */
static kb_rc add_cu_files(const char *dir, suite_task *t)
{
    DIR *d = opendir(dir);
    if (!d)
        return KB_OK;
    kb_rc rc = KB_OK;
    struct dirent *e;
    while (rc == KB_OK && (e = readdir(d)))
        if (ends_with(e->d_name, ".cu") && strcmp(e->d_name, "reference.cu"))
            rc = add_cand(t, kb_path_join(dir, e->d_name));
    closedir(d);
    return rc;
}

/* Is r better than t's best? faster > correct (by speedup) > the rest. */
static int better(const kb_verify_result *r, const suite_task *t)
{
    if (!t->has_best)
        return 1;
    int ro = kb_verify_verdict_ok(r->verdict), bo = kb_verify_verdict_ok(t->best.verdict);
    if (ro != bo)
        return ro;
    return r->speedup_geomean > t->best.speedup_geomean;
}

/* Keeps r (moved, r left empty) as t's best if it is better. */
static void consider(suite_task *t, kb_verify_result *r)
{
    if (better(r, t)) {
        kb_verify_result_release(&t->best);
        t->best = *r;
        t->has_best = 1;
        kb_verify_result_init(r);
    } else {
        kb_verify_result_release(r);
    }
}

static int cmp_task(const void *a, const void *b)
{
    return strcmp(((const suite_task *)a)->name, ((const suite_task *)b)->name);
}

/* Adds the task in folder name of the suite if it holds a task.json.
 * Returns KB_OK or KB_ERR_NOMEM. */
static kb_rc add_task(suite *s, const char *name)
{
    char *dir = kb_path_join(s->path, name);
    char *j = dir ? kb_path_join(dir, "task.json") : NULL;
    if (!j) {
        free(dir);
        return KB_ERR_NOMEM;
    }
    int is_task = access(j, R_OK) == 0;
    free(j);
    if (!is_task) {
        free(dir);
        return KB_OK;
    }
    char *nm = kb_strdup(name);
    if (!nm || KB_GROW(s->ts, s->n + 1, s->cap) != KB_OK) {
        free(nm);
        free(dir);
        return KB_ERR_NOMEM;
    }
    memset(&s->ts[s->n], 0, sizeof s->ts[s->n]);
    s->ts[s->n].name = nm;
    s->ts[s->n++].dir = dir;
    return KB_OK;
}

/* The suite's tasks (folders with a task.json), sorted by name. */
static kb_rc list_tasks(suite *s, kb_err *err)
{
    DIR *d = opendir(s->path);
    if (!d)
        return kb_err_set(err, KB_ERR_IO, "cannot open '%s': %s", s->path,
                          strerror(errno));
    kb_rc rc = KB_OK;
    struct dirent *e;
    while (rc == KB_OK && (e = readdir(d)))
        if (e->d_name[0] != '.')
            rc = add_task(s, e->d_name);
    closedir(d);
    if (rc != KB_OK)
        return kb_err_set(err, rc, "out of memory listing the tasks in '%s'",
                          s->path);
    if (s->n > 1)
        qsort(s->ts, s->n, sizeof *s->ts, cmp_task);
    return KB_OK;
}

/* Task t's candidates: CAND_DIR/NAME.cu, CAND_DIR/NAME/ *.cu and
 * CAND_DIR/NAME/candidates/ *.cu. Returns KB_OK or KB_ERR_NOMEM. */
static kb_rc task_candidates(suite_task *t, const char *cand_dir)
{
    kb_buf p;
    kb_buf_init(&p, 0);
    kb_rc rc = kb_buf_printf(&p, "%s/%s.cu", cand_dir, t->name);
    if (rc == KB_OK && access(p.data, R_OK) == 0)
        rc = add_cand(t, kb_strdup(p.data));
    kb_buf_reset(&p);
    if (rc == KB_OK)
        rc = kb_buf_printf(&p, "%s/%s", cand_dir, t->name);
    if (rc == KB_OK)
        rc = add_cu_files(p.data, t);
    if (rc == KB_OK)
        rc = kb_buf_puts(&p, "/candidates");
    if (rc == KB_OK)
        rc = add_cu_files(p.data, t);
    kb_buf_release(&p);
    if (t->ncands > 1)
        qsort(t->cands, t->ncands, sizeof *t->cands, kb_cmp_str);
    return rc;
}

/* Each task's candidates under cand_dir, sorted. */
static kb_rc find_candidates(suite *s, const char *cand_dir, kb_err *err)
{
    for (size_t i = 0; i < s->n; i++) {
        if (task_candidates(&s->ts[i], cand_dir) != KB_OK)
            return kb_err_set(err, KB_ERR_NOMEM, "out of memory finding the "
                              "candidates in '%s'", cand_dir);
    }
    return KB_OK;
}

/* One saved result line: scored for its task, if the suite has it; a
 * line that is no result is passed by. Returns KB_OK or KB_ERR_NOMEM. */
static kb_rc score_line(suite *s, const char *line)
{
    kb_verify_result r;
    kb_verify_result_init(&r);
    kb_rc rc = kb_verify_result_parse(line, &r, NULL);
    if (rc != KB_OK)
        return rc == KB_ERR_NOMEM ? rc : KB_OK;
    const char *base = strrchr(r.task, '/');
    for (size_t i = 0; i < s->n && rc == KB_OK; i++)
        if (!strcmp(s->ts[i].name, base ? base + 1 : r.task)) {
            rc = tally(s, &r);
            consider(&s->ts[i], &r);
            break;
        }
    kb_verify_result_release(&r);
    return rc;
}

/* The results in the file at path scored; a file that cannot be read is
 * passed by. Returns KB_OK or KB_ERR_NOMEM. */
static kb_rc score_file(suite *s, const char *path)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = kb_read_file(path, 256u << 20, &b, NULL);
    if (rc == KB_OK) {
        for (char *line = b.data; rc == KB_OK && line && *line;) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = '\0';
            rc = score_line(s, line);
            line = nl ? nl + 1 : NULL;
        }
    } else if (rc != KB_ERR_NOMEM) {
        rc = KB_OK;
    }
    kb_buf_release(&b);
    return rc;
}

/* Results already computed: kb-verify --json lines in DIR's *.json[l]. */
static kb_rc read_results(suite *s, const char *dir, kb_err *err)
{
    DIR *rd = opendir(dir);
    if (!rd)
        return kb_err_set(err, KB_ERR_IO, "cannot open '%s': %s", dir,
                          strerror(errno));
    kb_rc rc = KB_OK;
    struct dirent *e;
    while (rc == KB_OK && (e = readdir(rd))) {
        if (!ends_with(e->d_name, ".json") && !ends_with(e->d_name, ".jsonl"))
            continue;
        char *path = kb_path_join(dir, e->d_name);
        rc = path ? score_file(s, path) : KB_ERR_NOMEM;
        free(path);
    }
    closedir(rd);
    if (rc != KB_OK)
        return kb_err_set(err, rc, "out of memory reading the results in '%s'",
                          dir);
    return KB_OK;
}

/* With a queue: every candidate submitted before any is waited for, so
 * the workers have them all; ids[] gets their job ids in suite order. */
static kb_rc submit_all(suite *s, kb_verifier *v, char (**ids)[65], kb_err *err)
{
    size_t n = 0, at = 0;
    for (size_t i = 0; i < s->n; i++)
        n += s->ts[i].ncands;
    if (!(*ids = calloc(n ? n : 1, sizeof **ids)))
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < s->n; i++)
        for (size_t k = 0; k < s->ts[i].ncands; k++) {
            kb_job_state st;
            kb_rc rc = kb_jobq_verify_submit(v, s->ts[i].dir, s->ts[i].cands[k],
                                             (*ids)[at++], &st, err);
            if (rc != KB_OK)
                return rc;
        }
    return KB_OK;
}

/* Every candidate of every task through v (through its queue when it has
 * one); progress on stderr unless json. Returns KB_OK, or the error of a
 * run that could not be made. */
static kb_rc run_candidates(suite *s, kb_verifier *v, int json, kb_err *err)
{
    kb_verify_result r;
    kb_verify_result_init(&r);
    char (*ids)[65] = NULL;
    size_t at = 0;
    if (kb_verifier_queue(v) && submit_all(s, v, &ids, err) != KB_OK) {
        free(ids);
        return err->rc;
    }
    for (size_t i = 0; i < s->n; i++)
        for (size_t k = 0; k < s->ts[i].ncands; k++) {
            kb_rc rc = ids ? kb_jobq_verify_wait(v, ids[at++], &r, err)
                           : kb_verifier_run(v, s->ts[i].dir, s->ts[i].cands[k], &r, err);
            if (rc != KB_OK) {
                free(ids);
                return rc;
            }
            if (!json)
                fprintf(stderr, "%-*s %-14s %s\n", s->name_w, s->ts[i].name,
                        r.verdict_name, s->ts[i].cands[k]);
            if (tally(s, &r) != KB_OK) {
                kb_verify_result_release(&r);
                free(ids);
                return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            }
            consider(&s->ts[i], &r);
        }
    free(ids);
    return KB_OK;
}

/* The best verdict of task t ("" for none). */
static const char *best_verdict(const suite_task *t)
{
    return t->has_best ? t->best.verdict_name : "";
}

/* fast_0, fast_1, fast_1.5, fast_2 of the suite's best results; NAN for
 * one its results cannot tell: all of them after --compile-only (nothing
 * ran, so nothing is known correct), p >= 1 after --no-timing (correct,
 * never timed). */
static void suite_fast_p(const suite *s, double fp[4])
{
    static const double ps[] = { 0, 1, 1.5, 2 };
    size_t n = s->n ? s->n : 1;
    const char **verdicts = calloc(n, sizeof *verdicts);
    double *speed = calloc(n, sizeof *speed);
    if (!verdicts || !speed) {
        memset(fp, 0, 4 * sizeof *fp);
    } else {
        for (size_t i = 0; i < s->n; i++) {
            const suite_task *t = &s->ts[i];
            verdicts[i] = best_verdict(t);
            speed[i] = t->has_best ? t->best.speedup_geomean : 0;
            /* correct but untimed counts for p = 0 only */
            if (t->has_best && kb_verify_verdict_ok(t->best.verdict) && speed[i] == 0)
                speed[i] = 1e-9;
        }
        kb_verify_fast_p(verdicts, speed, s->n, ps, 4, fp);
        for (int i = 0; i < 4; i++)
            if (s->ncompiled || (i > 0 && s->nuntimed_ok && !s->ntimed))
                fp[i] = NAN;
    }
    free(verdicts);
    free(speed);
}

static cJSON *task_json(const suite_task *t)
{
    const char *v = best_verdict(t);
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "task", t->name);
    cJSON_AddStringToObject(x, "candidate", t->has_best ? t->best.candidate : "");
    cJSON_AddStringToObject(x, "verdict", v[0] ? v : "none");
    if (t->has_best && t->best.has_speedup)
        cJSON_AddNumberToObject(x, "speedup", t->best.speedup_geomean);
    else
        cJSON_AddNullToObject(x, "speedup");
    cJSON_AddStringToObject(x, "reason", t->has_best ? t->best.reason : "no candidate");
    return x;
}

static kb_rc print_suite_json(const suite *s, const double fp[4], double t0,
                              kb_err *err)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "suite", s->path);
    cJSON_AddNumberToObject(o, "candidates", (double)s->ncand);
    cJSON *arr = cJSON_AddArrayToObject(o, "tasks");
    for (size_t i = 0; i < s->n; i++)
        cJSON_AddItemToArray(arr, task_json(&s->ts[i]));
    cJSON *f = cJSON_AddObjectToObject(o, "fast_p");
    static const char *const ps[] = { "0", "1", "1.5", "2" };
    for (int i = 0; i < 4; i++)   /* null: the results cannot tell */
        if (isnan(fp[i]))
            cJSON_AddNullToObject(f, ps[i]);
        else
            cJSON_AddNumberToObject(f, ps[i], fp[i]);
    cJSON_AddNumberToObject(o, "wall_ms", kb_now_ms() - t0);
    return kb_cli_print_json(o, err);
}

static void print_suite_text(const suite *s, const double fp[4])
{
    printf("%-*s %-14s %9s  %s\n", s->name_w, "task", "verdict", "speedup", "candidate");
    for (size_t i = 0; i < s->n; i++) {
        const suite_task *t = &s->ts[i];
        const char *v = best_verdict(t);
        char sp[32] = "-";
        if (t->has_best && t->best.has_speedup)
            snprintf(sp, sizeof sp, "%.2fx", t->best.speedup_geomean);
        printf("%-*s %-14s %9s  %s\n", s->name_w, t->name, v[0] ? v : "none", sp,
               t->has_best ? t->best.candidate : "");
    }
    static const char *const ps[] = { "0", "1", "1.5", "2" };
    for (int i = 0; i < 4; i++)
        if (isnan(fp[i]))
            printf("fast_%s n/a  ", ps[i]);
        else
            printf("fast_%s %.2f  ", ps[i], fp[i]);
    printf("(%zu tasks, %zu candidates)\n", s->n, s->ncand);
    if (s->ncompiled)
        printf("compile-only: compiled %zu of %zu candidates; nothing ran, so fast_p "
               "is not known\n", s->ncompiled, s->ncand);
    else if (s->nuntimed_ok && !s->ntimed)
        printf("no timing: fast_0 is the share of tasks with a correct kernel; the "
               "rest is not known\n");
}

static void suite_release(suite *s)
{
    for (size_t i = 0; i < s->n; i++) {
        suite_task *t = &s->ts[i];
        free(t->name);
        free(t->dir);
        for (size_t k = 0; k < t->ncands; k++)
            free(t->cands[k]);
        free(t->cands);
        kb_verify_result_release(&t->best);
    }
    free(s->ts);
    free(s->first_error);
    memset(s, 0, sizeof *s);
}

/* The suite in suite_dir: its candidates in cand_dir run through v, or its
 * saved results in results scored; then the table (or JSON) and fast_p. */
static int run_suite(const kb_command *self, const char *suite_dir,
                     const char *cand_dir, const char *results, kb_verifier *v,
                     int json)
{
    double t0 = kb_now_ms();
    suite s = { .path = suite_dir };
    kb_err err;
    kb_err_clear(&err);
    int status = 0;
    kb_rc rc = list_tasks(&s, &err);
    s.name_w = 4;   /* "task" */
    for (size_t i = 0; i < s.n; i++)
        if ((int)strlen(s.ts[i].name) > s.name_w)
            s.name_w = (int)strlen(s.ts[i].name);
    if (rc == KB_OK && results) {
        rc = read_results(&s, results, &err);
    } else if (rc == KB_OK) {
        rc = find_candidates(&s, cand_dir, &err);
        if (rc == KB_OK)
            rc = run_candidates(&s, v, json, &err);
    }
    if (rc != KB_OK)
        goto out;
    double fp[4];
    suite_fast_p(&s, fp);
    if (json)
        rc = print_suite_json(&s, fp, t0, &err);
    else
        print_suite_text(&s, fp);
    if (rc == KB_OK && s.n == 0) {
        fprintf(stderr, "kb %s: no tasks (task.json) under '%s'\n", self->name,
                suite_dir);
        status = 1;
    } else if (rc == KB_OK && s.ncand == 0) {
        fprintf(stderr, results ? "kb %s: no results of the suite's tasks in '%s'\n"
                : "kb %s: no candidates in '%s' (TASK.cu, TASK/*.cu or "
                "TASK/candidates/*.cu for a task of the suite)\n", self->name,
                results ? results : cand_dir);
        status = 1;
    } else if (rc == KB_OK && s.nerror == s.ncand) {
        /* no verdict on any kernel: the scores above mean nothing */
        fprintf(stderr, "kb %s: %s %zu candidate%s ended in 'error' (no "
                "verdict on any kernel): %s\n", self->name,
                s.ncand > 1 ? "all" : "the", s.ncand, s.ncand > 1 ? "s" : "",
                s.first_error);
        status = 4;
    }
out:
    if (rc != KB_OK)
        status = kb_cli_fail(&err);
    suite_release(&s);
    return status;
}

/* ------------------------------------------------------------------ command */

static const kb_option verify_options[] = {
    { "json", KB_OPT_LONG('j'), NULL, "print the JSON result (docs/formats.md)" },
    { "suite", KB_OPT_LONG('s'), "DIR", "every task under DIR (corpus/tasks); prints fast_p" },
    { "candidates", KB_OPT_LONG('c'), "DIR", "DIR/TASK.cu, DIR/TASK/*.cu, DIR/TASK/candidates/*.cu" },
    { "results", KB_OPT_LONG('r'), "DIR", "score kb-verify JSON results saved in DIR instead" },
    { "serve", KB_OPT_LONG('S'), NULL, "one kb-verify --serve process for all candidates" },
    { "no-timing", KB_OPT_LONG('n'), NULL, "correctness only" },
    { "compile-only", KB_OPT_LONG('C'), NULL, "NVRTC only: no GPU needed, nothing runs" },
    { "timeout", KB_OPT_LONG('t'), "S", "wall-clock limit per candidate (default 120)" },
    { "queue", KB_OPT_LONG('Q'), "URL", "verify through this queue's workers (default KB_QUEUE; inproc: here)" },
    { "no-wait", KB_OPT_LONG('W'), NULL, "with a queue: print the job's id and state, do not wait" },
    { NULL, 0, NULL, NULL },
};

/* the subcommands' functions and options are in cmd_verify_queue.c */
static const kb_command worker_cmd = {
    .name = "worker",
    .fn = cmd_verify_worker,
    .usage = "kb verify worker [--queue URL] [--gpu LIST] [options]",
    .summary = "claim verification jobs from a queue and run them (one kb-verify per GPU slot)",
    .options = cmd_verify_worker_options,
    .parent = &kb_cmd_verify,
    .notes = "Runs until stopped (SIGTERM, SIGINT: the jobs in flight finish first),\n"
             "--drain or --max-jobs. A job that gets no result from kb-verify is tried\n"
             "again, then put in the dead letter. docs/verify.md has systemd, Slurm and\n"
             "Kubernetes recipes.\n",
};

static const kb_command queue_cmd = {
    .name = "queue",
    .fn = cmd_verify_queue,
    .usage = "kb verify queue [--queue URL] [--json] [JOB...]",
    .summary = "a verification queue: its counts and dead letter, or jobs' states and results",
    .options = cmd_verify_queue_options,
    .parent = &kb_cmd_verify,
};

static const kb_command *const verify_subs[] = { &worker_cmd, &queue_cmd, NULL };

static int cmd_verify(int argc, char **argv, const kb_cli *cli, const kb_command *self);

const kb_command kb_cmd_verify = {
    .name = "verify",
    .fn = cmd_verify,
    .usage = "kb verify [options] TASK CANDIDATE.cu | --suite DIR --candidates DIR",
    .summary = "verify a candidate kernel on the GPU (runs kb-verify), or a task suite",
    .options = verify_options,
    .operands = "task",
    .subcommands = verify_subs,
    .notes = "With a queue (--queue or KB_QUEUE: sqlite:PATH, redis://HOST:PORT/KEY) the\n"
             "candidate is a job that `kb verify worker` runs, on this host or another;\n"
             "a candidate verified before (the same task, mode and source) gets its\n"
             "result again.\n",
};

static int cmd_verify(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    int json = 0, no_wait = 0, c;
    const char *suite_dir = NULL, *cands = NULL, *results = NULL;
    const char *pos[2] = { NULL, NULL };
    int npos = 0;
    kb_verifier_opts opts;
    kb_verifier_opts_init(&opts);
    opts.kb_verify = cli->config->verify;   /* KB_VERIFY */
    opts.queue = cli->config->queue;        /* KB_QUEUE */
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    while ((c = kb_getopt_next(&g)) > 0) {
        long x;
        switch (c) {
        case KB_OPT_LONG('j'): json = 1; break;
        case KB_OPT_LONG('S'): opts.serve = 1; break;
        case KB_OPT_LONG('n'): opts.no_timing = 1; break;
        case KB_OPT_LONG('C'): opts.compile_only = 1; break;
        case KB_OPT_LONG('s'): suite_dir = g.arg; break;
        case KB_OPT_LONG('c'): cands = g.arg; break;
        case KB_OPT_LONG('r'): results = g.arg; break;
        case KB_OPT_LONG('Q'): opts.queue = g.arg; break;
        case KB_OPT_LONG('W'): no_wait = 1; break;
        case KB_OPT_LONG('t'):
            if (kb_parse_long(g.arg, 1, 86400, &x) != KB_OK)
                return kb_cli_usage_error(self, "bad --timeout '%s'", g.arg);
            opts.timeout_s = (double)x;
            break;
        }
    }
    if (c < 0)
        return g.status;
    for (int i = g.ind; i < argc; i++) {
        if (npos == 2)
            return kb_cli_usage_error(self, "too many arguments");
        pos[npos++] = argv[i];
    }
    if (suite_dir && npos)
        return kb_cli_usage_error(self, "--suite takes no TASK or CANDIDATE");
    if (suite_dir && !cands && !results)
        return kb_cli_usage_error(self, "--suite needs --candidates DIR or --results DIR");
    if (!suite_dir && npos != 2)
        return kb_cli_usage_error(self, "need TASK and CANDIDATE.cu");
    kb_verifier *v = NULL;
    kb_err err;
    kb_err_clear(&err);
    if (kb_verifier_open(&opts, &v, &err) != KB_OK)
        return kb_cli_fail(&err);
    if (no_wait && (suite_dir || !kb_verifier_queue(v))) {   /* "inproc" is none */
        kb_verifier_free(v);
        return kb_cli_usage_error(self, "--no-wait is for one candidate, with a queue");
    }
    int status = suite_dir ? run_suite(self, suite_dir, cands, results, v, json)
                           : verify_one(cli, v, pos[0], pos[1], json, no_wait);
    kb_verifier_free(v);
    return status;
}
