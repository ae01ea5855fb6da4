/* worker.c - `kb verify worker`: slots that claim jobs from a queue and
 * run them through their own kb-verify --serve child (one per slot, on
 * its GPU, or compile-only), a heartbeat that renews the leases of the
 * jobs in flight, and each result marked with where it was measured. */
#include "verify/jobq_int.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct worker worker;

/* What the heartbeat needs of a job in flight. */
typedef struct {
    int busy;
    kb_job job;        /* id, lease, deliveries: copies */
} inflight;

typedef struct {
    worker *w;
    int index;
    int gpu;                   /* takes GPU jobs */
    const char *gpu_id;        /* its CUDA_VISIBLE_DEVICES; NULL: none */
    kb_jobq *q;
    kb_verifier *v;
    cJSON *device;             /* where it measures: {"uuid","name",...} */
    pthread_t th;
    int started;
    inflight fl;               /* under w->mu */
    kb_rc rc;
    kb_err err;
} slot;

struct worker {
    const kb_worker_opts *o;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    kb_worker_stats st;
    long tickets;              /* jobs begun, for max_jobs */
    int quit;                  /* every slot ended: the heartbeat stops */
    char host[256];
    char *tmp;                 /* where candidates are written */
    slot *slots;
    size_t nslots;
};

void kb_worker_opts_init(kb_worker_opts *o)
{
    memset(o, 0, sizeof *o);
    kb_jobq_opts_init(&o->q);
    o->slots = 1;
    o->timeout_s = 120;
}

static int stopping(const worker *w)
{
    return w->o->stop && *w->o->stop;
}

static void log_job(worker *w, const char *what, const kb_job *j, const char *text)
{
    if (w->o->log)
        w->o->log(w->o->log_arg, what, j, text);
}

/* ------------------------------------------------------------ the device */

/* nvidia-smi's uuid, name and driver version of GPU id, into d. */
static void smi_into(cJSON *d, const char *id, int *ok)
{
    char cmd[256];
    for (const char *p = id; *p; p++)   /* an ordinal or a UUID, nothing else */
        if (!(p[0] == '-' || (p[0] >= '0' && p[0] <= '9') ||
              (p[0] >= 'a' && p[0] <= 'z') || (p[0] >= 'A' && p[0] <= 'Z')))
            return;
    snprintf(cmd, sizeof cmd, "nvidia-smi --query-gpu=uuid,name,driver_version "
             "--format=csv,noheader -i %s 2>/dev/null", id);
    FILE *f = popen(cmd, "r");
    if (!f)
        return;
    char line[512] = "";
    char *got = fgets(line, sizeof line, f);
    pclose(f);
    char *uuid = got ? strtok(line, ",\n") : NULL;
    char *name = uuid ? strtok(NULL, ",\n") : NULL;
    char *drv = name ? strtok(NULL, ",\n") : NULL;
    if (!drv)
        return;
    kb_json_put_str(d, "uuid", uuid, ok);
    kb_json_put_str(d, "driver_version", drv + (*drv == ' '), ok);
}

/* The slot's device, as results record it: kb-verify's profile (name,
 * CUDA driver and NVRTC versions), nvidia-smi's UUID and driver. */
static cJSON *slot_device(slot *s)
{
    cJSON *d = cJSON_CreateObject(), *info = NULL;
    int ok = d != NULL;
    if (!s->gpu) {
        kb_json_put_str(d, "name", "none (compile-only)", &ok);
        return ok ? d : (cJSON_Delete(d), NULL);
    }
    kb_json_put_str(d, "visible", s->gpu_id, &ok);
    if (kb_verifier_device_info(s->v, &info, NULL) == KB_OK) {
        static const char *const keys[][2] = {
            { "name", "name" }, { "cuda_driver_version", "cuda_version" },
            { "nvrtc_version", "nvrtc_version" }, { "arch", "arch" },
            { "compute_capability", "compute_capability" },
        };
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(info, keys[i][0]));
            if (v)
                kb_json_put_str(d, keys[i][1], v, &ok);
        }
        cJSON_Delete(info);
    }
    smi_into(d, s->gpu_id, &ok);
    return ok ? d : (cJSON_Delete(d), NULL);
}

/* ------------------------------------------------------------ one job */

/* The task's directory for j on this host: the submitter's when it holds
 * the task here, else the task found by name. Caller frees. */
static char *task_dir_for(const kb_job *j, kb_err *err)
{
    char *dir = NULL;
    struct stat sb;
    char *tj = kb_path_join(j->task_dir, "task.json");
    if (tj && stat(tj, &sb) == 0) {
        free(tj);
        return kb_strdup(j->task_dir);
    }
    free(tj);
    return kb_task_find(j->task, NULL, &dir, err) == KB_OK ? dir : NULL;
}

/* r's JSON named as the submitter named the candidate, with the "queue"
 * object: the job, where and by whom it ran. Caller frees; NULL no memory. */
static char *mark_result(slot *s, const kb_job *j, kb_verify_result *r)
{
    cJSON *res = r->json;
    int ok = 1;
    cJSON_DeleteItemFromObject(res, "candidate");
    kb_json_put_str(res, "candidate", j->candidate, &ok);
    cJSON *q = cJSON_CreateObject();
    ok = ok && q;
    kb_json_put_str(q, "job", j->id, &ok);
    kb_json_put_str(q, "host", s->w->host, &ok);
    kb_json_put_str(q, "worker", s->w->o->q.consumer, &ok);
    kb_json_put_num(q, "slot", s->index, &ok);
    kb_json_put_num(q, "deliveries", j->deliveries, &ok);
    kb_json_put_item(q, "gpu", s->device ? cJSON_Duplicate(s->device, 1)
                                         : cJSON_CreateNull(), &ok);
    cJSON_DeleteItemFromObject(res, "queue");
    if (ok)
        kb_json_put_item(res, "queue", q, &ok);
    else
        cJSON_Delete(q);
    return ok ? cJSON_PrintUnformatted(res) : NULL;
}

static void set_inflight(slot *s, const kb_job *j)
{
    pthread_mutex_lock(&s->w->mu);
    kb_job_release(&s->fl.job);
    s->fl.busy = 0;
    if (j) {
        memcpy(s->fl.job.id, j->id, 65);
        s->fl.job.lease = j->lease ? kb_strdup(j->lease) : NULL;
        s->fl.job.deliveries = j->deliveries;
        s->fl.busy = 1;
    }
    pthread_mutex_unlock(&s->w->mu);
}

/* How long a worker keeps trying to record a job's end while the queue
 * cannot be reached (Redis restarting, SQLite locked): as long as a claim
 * would (slot_main), one try a second. */
#define RECORD_TRIES 60

/* Records j's result (text) or, with why, its failure, trying again while
 * the queue is unreachable: the result is the job's work, and one dropped
 * here would be run again once its lease expired. *flag: complete's
 * recorded, fail's dead. */
static kb_rc record(slot *s, const kb_job *j, const char *text, const char *why,
                    int *flag, kb_err *err)
{
    for (int t = 1;; t++) {
        kb_err e;
        kb_err_clear(&e);
        kb_rc rc = why ? kb_jobq_fail(s->q, j, why, flag, &e)
                       : kb_jobq_complete(s->q, j, text, flag, &e);
        if (rc == KB_OK)
            return KB_OK;
        if ((rc != KB_ERR_NET && rc != KB_ERR_DB) || t >= RECORD_TRIES)
            return kb_err_set(err, rc, "%s", e.msg);
        char line[sizeof e.msg + 32];
        snprintf(line, sizeof line, "%s (trying again)", e.msg);
        pthread_mutex_lock(&s->w->mu);
        log_job(s->w, "error", j, line);
        pthread_mutex_unlock(&s->w->mu);
        sleep(1);
    }
}

/* Records how j ended: its result, or a failure (retry or dead letter). */
static kb_rc settle(slot *s, const kb_job *j, kb_verify_result *r, const char *why,
                    kb_err *err)
{
    worker *w = s->w;
    kb_rc rc;
    int flag = 0;
    if (!why) {
        char *text = mark_result(s, j, r);
        rc = text ? record(s, j, text, NULL, &flag, err)
                  : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        free(text);
    } else {
        rc = record(s, j, NULL, why, &flag, err);
    }
    pthread_mutex_lock(&w->mu);
    if (rc == KB_OK && !why) {
        w->st.completed += flag;
        w->st.duplicates += !flag;
        log_job(w, flag ? "done" : "duplicate", j, r->verdict_name);
    } else if (rc == KB_OK) {
        w->st.failed += !flag;
        w->st.dead += flag;
        log_job(w, flag ? "dead" : "retry", j, why);
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

/* Runs claimed job j in slot s. A job that gets no result of kb-verify's
 * own is failed with the runner's reason. */
static kb_rc run_job(slot *s, const kb_job *j, kb_err *err)
{
    worker *w = s->w;
    kb_err jerr;
    kb_err_clear(&jerr);
    char *dir = task_dir_for(j, &jerr);
    kb_buf path;
    kb_buf_init(&path, 0);
    kb_verify_result r;
    kb_verify_result_init(&r);
    const char *why = NULL;
    kb_rc rc = kb_buf_printf(&path, "%s/s%d-%.16s.cu", w->tmp, s->index, j->id);
    if (rc != KB_OK) {
        why = "out of memory";
    } else if (!dir) {
        why = jerr.msg[0] ? jerr.msg : "no such task on this worker";
    } else if (kb_write_file_atomic(path.data, j->source, strlen(j->source),
                                    &jerr) != KB_OK) {
        why = jerr.msg;
    } else {
        set_inflight(s, j);
        kb_verifier_set_run(s->v, j->compile_only, j->no_timing,
                            j->timeout_s > 0 ? j->timeout_s : w->o->timeout_s);
        kb_verifier_set_spread(s->v, j->spread);
        rc = kb_verifier_run(s->v, dir, path.data, &r, &jerr);
        unlink(path.data);
        if (rc != KB_OK)
            why = jerr.msg;
        else if (r.synthesised)
            why = r.reason;   /* kb-verify gave none: crashed, hung, missing */
    }
    rc = settle(s, j, &r, why, err);   /* in flight until then: its lease renewed */
    set_inflight(s, NULL);
    kb_verify_result_release(&r);
    kb_buf_release(&path);
    free(dir);
    return rc;
}

/* ------------------------------------------------------------ the slots */

/* 1 when this slot may begin one more job (max_jobs), counting it. */
static int take_ticket(worker *w)
{
    pthread_mutex_lock(&w->mu);
    int ok = !w->o->max_jobs || w->tickets < w->o->max_jobs;
    w->tickets += ok;
    pthread_mutex_unlock(&w->mu);
    return ok;
}

static void give_back_ticket(worker *w)
{
    pthread_mutex_lock(&w->mu);
    w->tickets--;
    pthread_mutex_unlock(&w->mu);
}

/* With drain: 1 when the queue holds nothing pending or leased. */
static int drained(slot *s)
{
    kb_jobq_counts c;
    return kb_jobq_count(s->q, &c, NULL) == KB_OK && c.pending == 0 && c.leased == 0;
}

static void *slot_main(void *arg)
{
    slot *s = arg;
    worker *w = s->w;
    kb_job j;
    memset(&j, 0, sizeof j);
    int errors = 0;
    while (!stopping(w) && take_ticket(w)) {
        int got = 0;
        kb_err e;
        kb_err_clear(&e);
        if (kb_jobq_claim(s->q, s->gpu, 500, &j, &got, &e) != KB_OK) {
            give_back_ticket(w);
            pthread_mutex_lock(&w->mu);
            log_job(w, "error", NULL, e.msg);
            pthread_mutex_unlock(&w->mu);
            if (++errors >= 60) {   /* a minute without the queue */
                s->rc = kb_err_set(&s->err, e.rc, "%s", e.msg);
                break;
            }
            sleep(1);
            continue;
        }
        errors = 0;
        if (!got) {
            give_back_ticket(w);
            if (w->o->drain && drained(s))
                break;
            continue;
        }
        pthread_mutex_lock(&w->mu);
        w->st.claimed++;
        log_job(w, "claim", &j, NULL);
        pthread_mutex_unlock(&w->mu);
        if (run_job(s, &j, &e) != KB_OK) {
            pthread_mutex_lock(&w->mu);
            log_job(w, "error", &j, e.msg);
            pthread_mutex_unlock(&w->mu);
        }
        kb_job_release(&j);
    }
    kb_job_release(&j);
    return NULL;
}

/* Renews the leases of the jobs in flight a few times a lease, on its own
 * connection, until every slot has ended. */
static void *heartbeat_main(void *arg)
{
    worker *w = arg;
    kb_jobq *q = NULL;
    if (kb_jobq_open(w->o->queue, &w->o->q, &q, NULL) != KB_OK)
        return NULL;
    double every = w->o->q.lease_s / 3;
    pthread_mutex_lock(&w->mu);
    while (!w->quit) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = ts.tv_nsec + (long)((every - (long)every) * 1e9);
        ts.tv_sec += (time_t)every + ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        for (size_t i = 0; !w->quit && i < w->nslots; i++) {
            if (!w->slots[i].fl.busy)
                continue;
            kb_job j;
            memset(&j, 0, sizeof j);
            memcpy(j.id, w->slots[i].fl.job.id, 65);
            j.lease = kb_strdup(w->slots[i].fl.job.lease ? w->slots[i].fl.job.lease : "");
            j.deliveries = w->slots[i].fl.job.deliveries;
            pthread_mutex_unlock(&w->mu);
            kb_jobq_extend(q, &j, NULL);
            kb_job_release(&j);
            pthread_mutex_lock(&w->mu);
        }
    }
    pthread_mutex_unlock(&w->mu);
    kb_jobq_close(q);
    return NULL;
}

/* Opens slot s's queue and verifier. */
static kb_rc slot_open(worker *w, slot *s, const kb_jobq_opts *qo, kb_err *err)
{
    kb_rc rc = kb_jobq_open(w->o->queue, qo, &s->q, err);
    if (rc == KB_OK && !kb_jobq_remote(s->q))
        rc = kb_err_set(err, KB_ERR_USAGE, "a worker needs a queue (--queue "
                        "or KB_QUEUE: sqlite:PATH or redis://HOST:PORT/KEY)");
    kb_verifier_opts vo;
    kb_verifier_opts_init(&vo);
    vo.kb_verify = w->o->kb_verify;
    vo.serve = 1;
    vo.gpu = s->gpu_id;
    vo.timeout_s = w->o->timeout_s;
    if (rc == KB_OK)
        rc = kb_verifier_open(&vo, &s->v, err);
    if (rc == KB_OK && !(s->device = slot_device(s)))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return rc;
}

static void slots_free(worker *w)
{
    for (size_t i = 0; i < w->nslots; i++) {
        slot *s = &w->slots[i];
        kb_verifier_free(s->v);
        kb_jobq_close(s->q);
        cJSON_Delete(s->device);
        kb_job_release(&s->fl.job);
    }
    free(w->slots);
}

/* The slots: o->slots on each GPU, then the compile-only ones; at least
 * one compile-only slot when there is no GPU. */
static kb_rc slots_make(worker *w, const kb_jobq_opts *qo, kb_err *err)
{
    const kb_worker_opts *o = w->o;
    int per = o->slots > 0 ? o->slots : 1;
    int cpu = o->compile_threads > 0 ? o->compile_threads : o->ngpus ? 0 : 1;
    w->nslots = o->ngpus * (size_t)per + (size_t)cpu;
    if (!(w->slots = calloc(w->nslots, sizeof *w->slots)))
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_rc rc = KB_OK;
    for (size_t i = 0; rc == KB_OK && i < w->nslots; i++) {
        slot *s = &w->slots[i];
        s->w = w;
        s->index = (int)i;
        s->gpu = i < o->ngpus * (size_t)per;
        s->gpu_id = s->gpu ? o->gpus[i / (size_t)per] : NULL;
        rc = slot_open(w, s, qo, err);
    }
    return rc;
}

kb_rc kb_worker_run(const kb_worker_opts *opts, kb_worker_stats *st, kb_err *err)
{
    worker w;
    memset(&w, 0, sizeof w);
    memset(st, 0, sizeof *st);
    kb_worker_opts o = *opts;
    char name[64];
    jobq_opts_resolve(&opts->q, &o.q, name);   /* one name for every slot */
    w.o = &o;
    jobq_host(w.host, sizeof w.host);
    /* candidates are written in /tmp/.kb-worker.tmp.PID.XXXXXX; a killed
     * worker's folder (its PID no longer running) is removed here */
    kb_sweep_temp("/tmp");
    kb_buf tmp;
    kb_buf_init(&tmp, 0);
    kb_rc rc = kb_temp_dir("/tmp/kb-worker", &tmp, err);
    if (rc != KB_OK)
        return rc;
    w.tmp = tmp.data;
    signal(SIGPIPE, SIG_IGN);   /* a --serve child that died is a result, not our end */
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    rc = slots_make(&w, &o.q, err);
    pthread_t hb;
    int hb_ok = rc == KB_OK && pthread_create(&hb, NULL, heartbeat_main, &w) == 0;
    for (size_t i = 0; rc == KB_OK && i < w.nslots; i++) {
        w.slots[i].started = pthread_create(&w.slots[i].th, NULL, slot_main,
                                            &w.slots[i]) == 0;
        if (!w.slots[i].started)
            rc = kb_err_set(err, KB_ERR_INTERNAL, "cannot start a thread");
    }
    for (size_t i = 0; i < w.nslots; i++)
        if (w.slots[i].started)
            pthread_join(w.slots[i].th, NULL);
    for (size_t i = 0; rc == KB_OK && i < w.nslots; i++)
        if (w.slots[i].rc != KB_OK)
            rc = kb_err_set(err, w.slots[i].rc, "%s", w.slots[i].err.msg);
    pthread_mutex_lock(&w.mu);
    w.quit = 1;
    pthread_cond_broadcast(&w.cv);
    pthread_mutex_unlock(&w.mu);
    if (hb_ok)
        pthread_join(hb, NULL);
    *st = w.st;
    slots_free(&w);
    kb_rmtree(w.tmp);   /* what a job left there too */
    free(w.tmp);
    pthread_mutex_destroy(&w.mu);
    pthread_cond_destroy(&w.cv);
    return rc;
}
