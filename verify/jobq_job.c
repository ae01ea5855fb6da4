/* jobq_job.c - a job: made from a candidate (its id the hash of what it
 * is), and as the JSON text a queue stores. */
#include "verify/jobq_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const state_names[] = {
    [KB_JOB_NONE] = "none", [KB_JOB_PENDING] = "pending",
    [KB_JOB_LEASED] = "leased", [KB_JOB_DONE] = "done", [KB_JOB_DEAD] = "dead",
};

const char *kb_job_state_name(kb_job_state s)
{
    return (unsigned)s <= KB_JOB_DEAD ? state_names[s] : "none";
}

void kb_job_release(kb_job *j)
{
    free(j->task);
    free(j->task_dir);
    free(j->candidate);
    free(j->source);
    free(j->lease);
    memset(j, 0, sizeof *j);
}

/* The id: SHA-256 over the task's name, the mode and the source, each
 * ended by a NUL, so the same kernel for another task or mode is another
 * job. The path of the candidate and of the task are not in it. */
static kb_rc job_hash(kb_job *j)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = kb_buf_printf(&b, "kb-job 1%c%s%c%s%c", 0, j->task, 0,
                             j->compile_only ? "compile" : j->no_timing ?
                             "no-timing" : "verify", 0);
    if (rc == KB_OK && j->spread > 0)
        rc = kb_buf_printf(&b, "spread %d%c", j->spread, 0);
    if (rc == KB_OK)
        rc = kb_buf_puts(&b, j->source);
    if (rc == KB_OK)
        kb_sha256_hex(b.data, b.len, j->id);
    kb_buf_release(&b);
    return rc;
}

kb_rc kb_job_make(kb_job *j, const char *task_dir, const char *candidate_path,
                  int compile_only, int no_timing, double timeout_s, kb_err *err)
{
    kb_job_release(j);
    kb_buf src;
    kb_buf_init(&src, 0);
    kb_rc rc = kb_read_file(candidate_path, 16u << 20, &src, err);
    if (rc != KB_OK)
        return rc;
    const char *slash = strrchr(task_dir, '/');
    while (slash && slash[1] == '\0' && slash > task_dir) {   /* "dir/" */
        const char *p = slash - 1;
        while (p > task_dir && *p != '/')
            p--;
        slash = *p == '/' ? p : NULL;
    }
    const char *name = slash ? slash + 1 : task_dir;
    size_t nlen = strcspn(name, "/");
    j->task = kb_strndup(name, nlen);
    j->task_dir = kb_strdup(task_dir);
    j->candidate = kb_strdup(candidate_path);
    j->source = kb_buf_detach(&src);
    j->compile_only = compile_only;
    j->no_timing = no_timing;
    j->timeout_s = timeout_s;
    if (!j->task || !j->task_dir || !j->candidate || !j->source ||
        job_hash(j) != KB_OK) {
        kb_job_release(j);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    return KB_OK;
}

char *jobq_job_encode(const kb_job *j)
{
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL;
    kb_json_put_str(o, "id", j->id, &ok);
    kb_json_put_str(o, "task", j->task, &ok);
    kb_json_put_str(o, "task_dir", j->task_dir, &ok);
    kb_json_put_str(o, "candidate", j->candidate, &ok);
    kb_json_put_str(o, "source", j->source, &ok);
    kb_json_put_bool(o, "compile_only", j->compile_only, &ok);
    kb_json_put_bool(o, "no_timing", j->no_timing, &ok);
    if (j->spread > 0)
        kb_json_put_num(o, "spread", j->spread, &ok);
    kb_json_put_num(o, "timeout_s", j->timeout_s, &ok);
    char *s = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

static char *dup_str(const cJSON *o, const char *k, int *ok)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(o, k));
    char *c = s ? kb_strdup(s) : NULL;
    if (!c)
        *ok = 0;
    return c;
}

kb_rc jobq_job_decode(const char *spec, kb_job *j, kb_err *err)
{
    kb_job_release(j);
    cJSON *o = spec ? cJSON_Parse(spec) : NULL;
    const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(o, "id"));
    if (!cJSON_IsObject(o) || !id || strlen(id) != 64) {
        cJSON_Delete(o);
        return kb_err_set(err, KB_ERR_PARSE, "a queued job that is not one "
                          "(no JSON object with an id)");
    }
    int ok = 1;
    memcpy(j->id, id, 65);
    j->task = dup_str(o, "task", &ok);
    j->task_dir = dup_str(o, "task_dir", &ok);
    j->candidate = dup_str(o, "candidate", &ok);
    j->source = dup_str(o, "source", &ok);
    j->compile_only = cJSON_IsTrue(cJSON_GetObjectItem(o, "compile_only"));
    j->no_timing = cJSON_IsTrue(cJSON_GetObjectItem(o, "no_timing"));
    const cJSON *sp = cJSON_GetObjectItem(o, "spread");
    j->spread = cJSON_IsNumber(sp) ? (int)sp->valuedouble : 0;
    const cJSON *t = cJSON_GetObjectItem(o, "timeout_s");
    j->timeout_s = cJSON_IsNumber(t) ? t->valuedouble : 0;
    cJSON_Delete(o);
    if (!ok) {
        kb_job_release(j);
        return kb_err_set(err, KB_ERR_PARSE, "a queued job without its task, "
                          "candidate or source");
    }
    return KB_OK;
}

kb_rc kb_job_rehash(kb_job *j, kb_err *err)
{
    return job_hash(j) == KB_OK ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
}

const char *jobq_job_kind(const kb_job *j)
{
    return j->compile_only ? "compile" : "gpu";
}

void jobq_host(char *buf, size_t n)
{
    if (gethostname(buf, n) != 0 || !*buf)
        snprintf(buf, n, "unknown");
    buf[n - 1] = '\0';   /* gethostname need not end a name it cut */
}

/* This host's name and pid, "host:pid": a worker's default name. */
static void consumer_name(char *buf, size_t n)
{
    char host[256];
    jobq_host(host, sizeof host);
    snprintf(buf, n, "%.40s:%ld", host, (long)getpid());   /* fits 64 */
}

void kb_jobq_opts_init(kb_jobq_opts *o)
{
    memset(o, 0, sizeof *o);
    o->lease_s = 60;
    o->max_deliveries = 3;
}

void jobq_opts_resolve(const kb_jobq_opts *o, kb_jobq_opts *out, char name[64])
{
    if (o)
        *out = *o;
    else
        kb_jobq_opts_init(out);
    if (out->lease_s <= 0)
        out->lease_s = 60;
    if (out->max_deliveries <= 0)
        out->max_deliveries = 3;
    if (!out->consumer || !*out->consumer) {
        consumer_name(name, 64);
        out->consumer = name;
    }
}

void jobq_expired_reason(int n, char *buf, size_t len)
{
    snprintf(buf, len, "delivered %d times without a result: each worker "
             "that claimed it was lost before its lease expired", n);
}
