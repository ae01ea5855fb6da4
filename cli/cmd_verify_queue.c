/* cmd_verify_queue.c - kb verify worker (claims jobs from a queue and
 * runs them through kb-verify) and kb verify queue (a queue's counts,
 * dead letter and results). The queue is verify/'s kb_jobq; where it is
 * comes from --queue, else KB_QUEUE. */
#include "cli/cli.h"
#include "verify/verify.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ kb verify worker */

static volatile int worker_stop;

static void on_signal(int sig)
{
    (void)sig;
    worker_stop = 1;
}

static void worker_log(void *arg, const char *what, const kb_job *j, const char *text)
{
    if (*(const int *)arg)   /* --quiet */
        return;
    fprintf(stderr, "kb: worker %s %.16s %s%s%s\n", what, j ? j->id : "-",
            j && j->task ? j->task : "", text ? ": " : "", text ? text : "");
    fflush(stderr);
}

/* "all" GPUs: CUDA_VISIBLE_DEVICES's entries, else nvidia-smi's count. */
static char *all_gpus(void)
{
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (cvd && *cvd)
        return kb_strdup(cvd);
    FILE *f = popen("nvidia-smi -L 2>/dev/null", "r");
    kb_buf b;
    kb_buf_init(&b, 0);
    char line[512];
    int n = 0;
    kb_rc rc = KB_OK;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "GPU ", 4) && rc == KB_OK) {
            rc = kb_buf_printf(&b, "%s%d", n ? "," : "", n);
            n++;
        }
    if (f)
        pclose(f);
    return kb_buf_finish(&b, rc);
}

/* Splits list at commas into o's gpus (list is kept: the pieces point into it). */
static int split_gpus(char *list, kb_worker_opts *o)
{
    size_t n = 1;
    for (char *p = list; *p; p++)
        n += *p == ',';
    if (!(o->gpus = calloc(n, sizeof *o->gpus)))
        return -1;
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t;
         t = strtok_r(NULL, ",", &save))
        o->gpus[o->ngpus++] = t;
    return 0;
}

const kb_option cmd_verify_worker_options[] = {
    { "queue", KB_OPT_LONG('Q'), "URL", "sqlite:PATH or redis://HOST:PORT/KEY (default KB_QUEUE)" },
    { "gpu", KB_OPT_LONG('g'), "LIST", "GPUs to run on: ordinals or UUIDs, comma-separated, or all" },
    { "slots", KB_OPT_LONG('s'), "N", "kb-verify --serve children per GPU (default 1)" },
    { "compile-threads", KB_OPT_LONG('c'), "N", "slots for compile-only jobs (default 1 without a GPU, else 0)" },
    { "drain", KB_OPT_LONG('d'), NULL, "exit once the queue is empty" },
    { "max-jobs", KB_OPT_LONG('m'), "N", "exit after N jobs" },
    { "lease", KB_OPT_LONG('l'), "S", "a claim's lease in seconds, renewed while it runs (default 60)" },
    { "max-deliveries", KB_OPT_LONG('M'), "N", "then the dead letter (default 3)" },
    { "timeout", KB_OPT_LONG('t'), "S", "a job's limit when it sets none (default 120)" },
    { "name", KB_OPT_LONG('n'), "NAME", "this worker's name (default HOST:PID)" },
    { "json", KB_OPT_LONG('j'), NULL, "print the tally as JSON at the end" },
    { NULL, 0, NULL, NULL },
};

/* Parses one numeric option into *out; 0 ok. */
static int num_opt(const kb_command *self, const char *arg, long lo, long hi, long *out)
{
    if (kb_parse_long(arg, lo, hi, out) == KB_OK)
        return 0;
    kb_cli_usage_error(self, "bad number '%s'", arg);
    return -1;
}

static int worker_args(int argc, char **argv, const kb_cli *cli, const kb_command *self,
                       kb_worker_opts *o, char **gpus, int *json)
{
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    int c;
    long x;
    while ((c = kb_getopt_next(&g)) > 0) {
        int bad = 0;
        switch (c) {
        case KB_OPT_LONG('Q'): o->queue = g.arg; break;
        case KB_OPT_LONG('g'):
            free(*gpus);
            *gpus = !strcmp(g.arg, "all") ? all_gpus() : kb_strdup(g.arg);
            break;
        case KB_OPT_LONG('s'): bad = num_opt(self, g.arg, 1, 64, &x); o->slots = (int)x; break;
        case KB_OPT_LONG('c'): bad = num_opt(self, g.arg, 0, 256, &x); o->compile_threads = (int)x; break;
        case KB_OPT_LONG('d'): o->drain = 1; break;
        case KB_OPT_LONG('m'): bad = num_opt(self, g.arg, 1, 1L << 40, &x); o->max_jobs = x; break;
        case KB_OPT_LONG('l'): bad = num_opt(self, g.arg, 1, 86400, &x); o->q.lease_s = (double)x; break;
        case KB_OPT_LONG('M'): bad = num_opt(self, g.arg, 1, 1000, &x); o->q.max_deliveries = (int)x; break;
        case KB_OPT_LONG('t'): bad = num_opt(self, g.arg, 1, 86400, &x); o->timeout_s = (double)x; break;
        case KB_OPT_LONG('n'): o->q.consumer = g.arg; break;
        case KB_OPT_LONG('j'): *json = 1; break;
        }
        if (bad)
            return 2;
    }
    if (c < 0)
        return g.status;
    if (g.ind < argc)
        return kb_cli_usage_error(self, "unexpected '%s'", argv[g.ind]);
    if (!o->queue)
        o->queue = cli->config->queue;
    if (!o->queue || !*o->queue)
        return kb_cli_usage_error(self, "no queue: give --queue URL or set KB_QUEUE");
    return 0;
}

int cmd_verify_worker(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    kb_worker_opts o;
    kb_worker_opts_init(&o);
    o.kb_verify = cli->config->verify;
    char *gpus = NULL;
    int json = 0, quiet = cli->quiet;
    int st = worker_args(argc, argv, cli, self, &o, &gpus, &json);
    if (st == 0 && gpus && split_gpus(gpus, &o) != 0)
        st = kb_cli_usage_error(self, "out of memory");
    if (st != 0) {
        free(gpus);
        free(o.gpus);
        return st;
    }
    o.stop = &worker_stop;
    o.log = worker_log;
    o.log_arg = &quiet;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    kb_worker_stats ws;
    kb_err err;
    kb_err_clear(&err);
    kb_rc rc = kb_worker_run(&o, &ws, &err);
    free(gpus);
    free(o.gpus);
    if (json)
        printf("{\"claimed\":%ld,\"completed\":%ld,\"duplicates\":%ld,\"retried\":%ld,"
               "\"dead\":%ld}\n", ws.claimed, ws.completed, ws.duplicates, ws.failed,
               ws.dead);
    else if (!cli->quiet)
        fprintf(stderr, "kb: worker: %ld claimed, %ld completed, %ld duplicate, "
                "%ld retried, %ld dead\n", ws.claimed, ws.completed, ws.duplicates,
                ws.failed, ws.dead);
    return rc == KB_OK ? 0 : kb_cli_fail(&err);
}

/* ------------------------------------------------------------ kb verify queue */

const kb_option cmd_verify_queue_options[] = {
    { "queue", KB_OPT_LONG('Q'), "URL", "sqlite:PATH or redis://HOST:PORT/KEY (default KB_QUEUE)" },
    { "wait", KB_OPT_LONG('w'), "S", "wait up to S seconds for each job's result" },
    { "reclaim", KB_OPT_LONG('r'), NULL, "return jobs whose lease expired to the queue first" },
    { "json", KB_OPT_LONG('j'), NULL, "one JSON object" },
    { NULL, 0, NULL, NULL },
};

/* {"id","state","result"|"reason"} of job id, waiting up to wait_s. */
static cJSON *job_json(kb_jobq *q, const char *id, double wait_s, kb_err *err)
{
    kb_job_state st = KB_JOB_NONE;
    char *text = NULL;
    if (kb_jobq_status_wait(q, id, wait_s, &st, &text, err) != KB_OK)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL;
    kb_json_put_str(o, "id", id, &ok);
    kb_json_put_str(o, "state", kb_job_state_name(st), &ok);
    if (st == KB_JOB_DONE)
        kb_json_put_item(o, "result", text ? cJSON_Parse(text) : cJSON_CreateNull(), &ok);
    else if (st == KB_JOB_DEAD)
        kb_json_put_str(o, "reason", text, &ok);
    free(text);
    if (!ok) {
        cJSON_Delete(o);
        kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return o;
}

static cJSON *counts_json(kb_jobq *q, kb_err *err)
{
    kb_jobq_counts c;
    cJSON *dead = NULL;
    if (kb_jobq_count(q, &c, err) != KB_OK || kb_jobq_dead(q, &dead, err) != KB_OK)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL;
    kb_json_put_str(o, "queue", kb_jobq_url(q), &ok);
    kb_json_put_num(o, "pending", (double)c.pending, &ok);
    kb_json_put_num(o, "leased", (double)c.leased, &ok);
    kb_json_put_num(o, "done", (double)c.done, &ok);
    kb_json_put_num(o, "dead", (double)c.dead, &ok);
    kb_json_put_item(o, "dead_letter", dead, &ok);
    if (!ok) {
        cJSON_Delete(o);
        kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return o;
}

static void print_text(const cJSON *o)
{
    const cJSON *jobs = cJSON_GetObjectItem(o, "jobs");
    if (jobs) {
        const cJSON *j;
        cJSON_ArrayForEach(j, jobs) {
            const cJSON *res = cJSON_GetObjectItem(j, "result");
            const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(res, "verdict"));
            const char *why = cJSON_GetStringValue(cJSON_GetObjectItem(j, "reason"));
            printf("%s %s%s%s\n", cJSON_GetStringValue(cJSON_GetObjectItem(j, "id")),
                   cJSON_GetStringValue(cJSON_GetObjectItem(j, "state")),
                   v || why ? " " : "", v ? v : why ? why : "");
        }
        return;
    }
    printf("%s: %g pending, %g leased, %g done, %g dead\n",
           cJSON_GetStringValue(cJSON_GetObjectItem(o, "queue")),
           cJSON_GetNumberValue(cJSON_GetObjectItem(o, "pending")),
           cJSON_GetNumberValue(cJSON_GetObjectItem(o, "leased")),
           cJSON_GetNumberValue(cJSON_GetObjectItem(o, "done")),
           cJSON_GetNumberValue(cJSON_GetObjectItem(o, "dead")));
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItem(o, "dead_letter"))
        printf("dead %s %s (%g deliveries): %s\n",
               cJSON_GetStringValue(cJSON_GetObjectItem(d, "id")),
               cJSON_GetStringValue(cJSON_GetObjectItem(d, "task")),
               cJSON_GetNumberValue(cJSON_GetObjectItem(d, "deliveries")),
               cJSON_GetStringValue(cJSON_GetObjectItem(d, "reason")));
}

int cmd_verify_queue(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    const char *url = NULL;
    int json = 0, reclaim = 0, c;
    long wait_s = 0;
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    while ((c = kb_getopt_next(&g)) > 0) {
        switch (c) {
        case KB_OPT_LONG('Q'): url = g.arg; break;
        case KB_OPT_LONG('j'): json = 1; break;
        case KB_OPT_LONG('r'): reclaim = 1; break;
        case KB_OPT_LONG('w'):
            if (num_opt(self, g.arg, 0, 86400, &wait_s) != 0)
                return 2;
            break;
        }
    }
    if (c < 0)
        return g.status;
    if (!url)
        url = cli->config->queue;
    if (!url || !*url)
        return kb_cli_usage_error(self, "no queue: give --queue URL or set KB_QUEUE");
    kb_err err;
    kb_err_clear(&err);
    kb_jobq *q = NULL;
    cJSON *out = NULL;
    kb_rc rc = kb_jobq_open(url, NULL, &q, &err);
    if (rc == KB_OK && reclaim)
        rc = kb_jobq_reclaim(q, NULL, &err);
    if (rc == KB_OK && g.ind < argc) {
        out = cJSON_CreateObject();
        cJSON *jobs = out ? cJSON_AddArrayToObject(out, "jobs") : NULL;
        rc = jobs ? KB_OK : kb_err_set(&err, KB_ERR_NOMEM, "out of memory");
        for (int i = g.ind; rc == KB_OK && i < argc; i++) {
            cJSON *j = job_json(q, argv[i], (double)wait_s, &err);
            rc = j && cJSON_AddItemToArray(jobs, j) ? KB_OK : err.rc ? err.rc : KB_ERR_NOMEM;
        }
    } else if (rc == KB_OK && !(out = counts_json(q, &err))) {
        rc = err.rc ? err.rc : KB_ERR_NOMEM;
    }
    kb_jobq_close(q);
    if (rc != KB_OK) {
        cJSON_Delete(out);
        return kb_cli_fail(&err);
    }
    if (json)
        return kb_cli_print_json(out, &err) == KB_OK ? 0 : kb_cli_fail(&err);
    print_text(out);
    cJSON_Delete(out);
    return 0;
}
