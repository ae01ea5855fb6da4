/* jobq.c - kb_jobq, the one queue interface: the URL that picks a
 * backend, the calls handed to it, waiting for a result, and
 * kb_jobq_verify, which every path that verifies calls. */
#include "verify/jobq_int.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct kb_jobq {
    char *url;
    void *b;                   /* the backend's state; NULL in process */
    const jobq_backend *ops;
};

kb_rc kb_jobq_open(const char *url, const kb_jobq_opts *o, kb_jobq **out,
                   kb_err *err)
{
    *out = NULL;
    kb_jobq *q = calloc(1, sizeof *q);
    if (!q || !(q->url = kb_strdup(url && *url ? url : "inproc"))) {
        free(q);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    kb_rc rc = KB_OK;
    if (!url || !*url || !strcmp(url, "inproc"))
        ;
    else if (!strncmp(url, "sqlite:", 7))
        rc = jobq_sqlite_open(url + 7, o, &q->b, &q->ops, err);
    else if (!strncmp(url, "redis://", 8))
        rc = jobq_redis_open(url, o, &q->b, &q->ops, err);
    else
        rc = kb_err_set(err, KB_ERR_USAGE, "unknown queue '%s' (sqlite:PATH, "
                        "redis://HOST:PORT/KEY or inproc)", url);
    if (rc != KB_OK) {
        free(q->url);
        free(q);
        return rc;
    }
    *out = q;
    return KB_OK;
}

void kb_jobq_close(kb_jobq *q)
{
    if (!q)
        return;
    if (q->ops)
        q->ops->close(q->b);
    free(q->url);
    free(q);
}

int kb_jobq_remote(const kb_jobq *q)
{
    return q && q->ops != NULL;
}

const char *kb_jobq_url(const kb_jobq *q)
{
    return q->url;
}

static kb_rc in_process(kb_err *err)
{
    return kb_err_set(err, KB_ERR_USAGE, "the in-process queue has no workers "
                      "(set KB_QUEUE to sqlite:PATH or redis://HOST:PORT/KEY)");
}

kb_rc kb_jobq_submit(kb_jobq *q, const kb_job *j, kb_job_state *state, kb_err *err)
{
    return q->ops ? q->ops->submit(q->b, j, state, err) : in_process(err);
}

kb_rc kb_jobq_claim(kb_jobq *q, int gpu, int wait_ms, kb_job *j, int *got,
                    kb_err *err)
{
    *got = 0;
    return q->ops ? q->ops->claim(q->b, gpu, wait_ms, j, got, err) : in_process(err);
}

kb_rc kb_jobq_extend(kb_jobq *q, const kb_job *j, kb_err *err)
{
    return q->ops ? q->ops->extend(q->b, j, err) : in_process(err);
}

kb_rc kb_jobq_complete(kb_jobq *q, const kb_job *j, const char *result,
                       int *recorded, kb_err *err)
{
    int r = 0;
    kb_rc rc = q->ops ? q->ops->complete(q->b, j, result, &r, err) : in_process(err);
    if (recorded)
        *recorded = r;
    return rc;
}

kb_rc kb_jobq_fail(kb_jobq *q, const kb_job *j, const char *reason, int *dead,
                   kb_err *err)
{
    int d = 0;
    kb_rc rc = q->ops ? q->ops->fail(q->b, j, reason, &d, err) : in_process(err);
    if (dead)
        *dead = d;
    return rc;
}

kb_rc kb_jobq_reclaim(kb_jobq *q, long *n, kb_err *err)
{
    long k = 0;
    kb_rc rc = q->ops ? q->ops->reclaim(q->b, &k, err) : KB_OK;
    if (n)
        *n = k;
    return rc;
}

kb_rc kb_jobq_status(kb_jobq *q, const char *id, kb_job_state *state,
                     char **text, kb_err *err)
{
    char *t = NULL;
    *state = KB_JOB_NONE;
    kb_rc rc = q->ops ? q->ops->status(q->b, id, state, &t, err) : KB_OK;
    if (text)
        *text = t;
    else
        free(t);
    return rc;
}

kb_rc kb_jobq_count(kb_jobq *q, kb_jobq_counts *c, kb_err *err)
{
    memset(c, 0, sizeof *c);
    return q->ops ? q->ops->count(q->b, c, err) : KB_OK;
}

kb_rc kb_jobq_dead(kb_jobq *q, cJSON **out, kb_err *err)
{
    *out = NULL;
    if (q->ops)
        return q->ops->dead(q->b, out, err);
    if (!(*out = cJSON_CreateArray()))
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return KB_OK;
}

/* The result for a dead job: no verdict, the dead letter's reason. */
static kb_rc dead_result(const char *id, const char *reason,
                         kb_verify_result *out, kb_err *err)
{
    cJSON *r = cJSON_CreateObject();
    int ok = r != NULL;
    kb_json_put_str(r, "verdict", "error", &ok);
    kb_json_put_str(r, "reason", reason && *reason ? reason : "dead letter", &ok);
    cJSON *qj = ok ? cJSON_AddObjectToObject(r, "queue") : NULL;
    ok = ok && qj;
    kb_json_put_str(qj, "job", id, &ok);
    kb_json_put_str(qj, "state", "dead", &ok);
    char *s = ok ? cJSON_PrintUnformatted(r) : NULL;
    cJSON_Delete(r);
    if (!s)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_rc rc = kb_verify_result_parse(s, out, err);
    free(s);
    if (rc == KB_OK)
        out->synthesised = 1;
    return rc;
}

kb_rc kb_jobq_status_wait(kb_jobq *q, const char *id, double timeout_s,
                          kb_job_state *state, char **text, kb_err *err)
{
    double deadline = kb_now_ms() + timeout_s * 1000;
    useconds_t pause = 500;
    for (;;) {
        kb_rc rc = kb_jobq_status(q, id, state, text, err);
        if (rc != KB_OK || *state == KB_JOB_DONE || *state == KB_JOB_DEAD ||
            *state == KB_JOB_NONE || kb_now_ms() >= deadline)
            return rc;
        if (text) {
            free(*text);
            *text = NULL;
        }
        usleep(pause);
        if (pause < 20000)   /* 0.5 ms, doubling to 20 ms: quick jobs come back quick */
            pause *= 2;
    }
}

kb_rc kb_jobq_wait(kb_jobq *q, const char *id, double timeout_s,
                   kb_verify_result *out, kb_err *err)
{
    if (timeout_s <= 0)
        timeout_s = 3600;
    kb_job_state st;
    char *text = NULL;
    kb_rc rc = kb_jobq_status_wait(q, id, timeout_s, &st, &text, err);
    if (rc == KB_OK && st == KB_JOB_DONE)
        rc = kb_verify_result_parse(text, out, err);
    else if (rc == KB_OK && st == KB_JOB_DEAD)
        rc = dead_result(id, text, out, err);
    else if (rc == KB_OK && st == KB_JOB_NONE)
        rc = kb_err_set(err, KB_ERR_NOTFOUND, "no job '%s' in '%s'", id, q->url);
    else if (rc == KB_OK)
        rc = kb_err_set(err, KB_ERR_GPU, "job '%s' has no result after %g s (is "
                        "a worker serving '%s'?)", id, timeout_s, q->url);
    free(text);
    return rc;
}

/* ------------------------------------------------- the paths that verify */

static void close_slot(void *p)
{
    kb_jobq_close(p);
}

/* v's queue, opened on first use and kept in v's slot. */
static kb_rc verifier_queue(kb_verifier *v, kb_jobq **q, kb_err *err)
{
    *q = kb_verifier_slot(v);
    if (*q)
        return KB_OK;
    kb_rc rc = kb_jobq_open(kb_verifier_queue(v), NULL, q, err);
    if (rc == KB_OK)
        kb_verifier_set_slot(v, *q, close_slot);
    return rc;
}

/* How long a submitter waits: the candidate's limit, plus the time to
 * get a worker, since the job may wait behind others. */
#define WAIT_S 3600

kb_rc kb_jobq_verify_submit(kb_verifier *v, const char *task_dir,
                            const char *candidate_path, char id[65],
                            kb_job_state *state, kb_err *err)
{
    kb_jobq *q;
    kb_rc rc = verifier_queue(v, &q, err);
    if (rc != KB_OK)
        return rc;
    if (!kb_jobq_remote(q))
        return in_process(err);
    kb_job j;
    memset(&j, 0, sizeof j);
    const kb_verifier_opts *o = kb_verifier_opts_get(v);
    rc = kb_job_make(&j, task_dir, candidate_path, o->compile_only, o->no_timing,
                     o->timeout_s, err);
    if (rc == KB_OK && o->spread > 0 && !o->compile_only) {   /* another job: id again */
        j.spread = o->spread;
        rc = kb_job_rehash(&j, err);
    }
    if (rc == KB_OK)
        rc = kb_jobq_submit(q, &j, state, err);
    if (rc == KB_OK)
        memcpy(id, j.id, 65);
    kb_job_release(&j);
    return rc;
}

kb_rc kb_jobq_verify_wait(kb_verifier *v, const char *id, kb_verify_result *out,
                          kb_err *err)
{
    kb_jobq *q;
    kb_rc rc = verifier_queue(v, &q, err);
    return rc == KB_OK ? kb_jobq_wait(q, id, WAIT_S, out, err) : rc;
}

kb_rc kb_jobq_verify(kb_verifier *v, const char *task_dir,
                     const char *candidate_path, kb_verify_result *out,
                     kb_err *err)
{
    if (!v || !kb_verifier_queue(v))
        return kb_verifier_run(v, task_dir, candidate_path, out, err);
    kb_verify_result_release(out);
    if (!task_dir || !candidate_path)
        return kb_err_set(err, KB_ERR_USAGE, "a verification needs a task "
                          "and a candidate");
    char id[65];
    kb_job_state st;
    kb_rc rc = kb_jobq_verify_submit(v, task_dir, candidate_path, id, &st, err);
    if (rc == KB_OK)
        rc = kb_jobq_verify_wait(v, id, out, err);
    /* a duplicate's result names the first submitter's file: name ours */
    char *mine = rc == KB_OK ? kb_strdup(candidate_path) : NULL;
    if (mine && cJSON_ReplaceItemInObject(out->json, "candidate",
                                          cJSON_CreateString(candidate_path))) {
        free(out->candidate);
        out->candidate = mine;
    } else {
        free(mine);
    }
    return rc;
}
