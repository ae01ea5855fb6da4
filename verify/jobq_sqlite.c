/* jobq_sqlite.c - the queue as one SQLite table, for one machine with
 * several GPUs: a database file of its own (beside the KB, or anywhere
 * the workers and submitters share), WAL mode so submitters read while a
 * worker claims. A claim is one IMMEDIATE transaction: the oldest job
 * that is pending or whose lease expired becomes leased to the claimer,
 * its deliveries counted. Its SQL is on the queue's own table, not on
 * kb's (check-layers.sh allows this file for that reason). */
#include "verify/jobq_int.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

typedef struct {
    sqlite3 *db;
    kb_jobq_opts o;
    char consumer[64];
    char *path;
} sq;

static const char schema[] =
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=NORMAL;"
    "CREATE TABLE IF NOT EXISTS kb_jobs("
    " id TEXT PRIMARY KEY,"
    " kind TEXT NOT NULL,"            /* gpu | compile */
    " spec TEXT NOT NULL,"
    " state TEXT NOT NULL,"           /* pending leased done dead */
    " deliveries INTEGER NOT NULL DEFAULT 0,"
    " lease_until REAL,"              /* unix seconds */
    " consumer TEXT,"
    " result TEXT,"                   /* done: kb-verify's JSON */
    " reason TEXT,"                   /* dead: why; retried: the last failure */
    " submitted REAL NOT NULL,"
    " finished REAL);"
    "CREATE INDEX IF NOT EXISTS kb_jobs_queue ON kb_jobs(state, kind, submitted);";

static double now_s(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

static kb_rc db_err(sq *s, kb_err *err, const char *what)
{
    return kb_err_set(err, KB_ERR_DB, "queue 'sqlite:%s': %s: %s", s->path, what,
                      sqlite3_errmsg(s->db));
}

static sqlite3_stmt *prep(sq *s, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
        return NULL;
    return st;
}

/* Runs a statement that returns no rows and finalizes it; 0 ok. */
static int exec_done(sqlite3_stmt *st)
{
    int r = st ? sqlite3_step(st) : SQLITE_ERROR;
    sqlite3_finalize(st);
    return r == SQLITE_DONE ? 0 : -1;
}

static kb_job_state state_of(const unsigned char *t)
{
    const char *s = (const char *)t;
    if (!s)
        return KB_JOB_NONE;
    if (!strcmp(s, "pending"))
        return KB_JOB_PENDING;
    if (!strcmp(s, "leased"))
        return KB_JOB_LEASED;
    if (!strcmp(s, "done"))
        return KB_JOB_DONE;
    if (!strcmp(s, "dead"))
        return KB_JOB_DEAD;
    return KB_JOB_NONE;
}

static kb_rc sq_status(void *b, const char *id, kb_job_state *state, char **text,
                       kb_err *err)
{
    sq *s = b;
    *state = KB_JOB_NONE;
    *text = NULL;
    sqlite3_stmt *st = prep(s, "SELECT state, CASE state WHEN 'done' THEN result"
                               " WHEN 'dead' THEN reason END FROM kb_jobs WHERE id=?1");
    if (!st)
        return db_err(s, err, "cannot read a job");
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int r = sqlite3_step(st);
    kb_rc rc = KB_OK;
    if (r == SQLITE_ROW) {
        *state = state_of(sqlite3_column_text(st, 0));
        const unsigned char *t = sqlite3_column_text(st, 1);
        if (t && !(*text = kb_strdup((const char *)t)))
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    } else if (r != SQLITE_DONE) {
        rc = db_err(s, err, "cannot read a job");
    }
    sqlite3_finalize(st);
    return rc;
}

static kb_rc sq_submit(void *b, const kb_job *j, kb_job_state *state, kb_err *err)
{
    sq *s = b;
    char *spec = jobq_job_encode(j);
    if (!spec)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    sqlite3_stmt *st = prep(s, "INSERT INTO kb_jobs(id,kind,spec,state,submitted)"
                               " VALUES(?1,?2,?3,'pending',?4) ON CONFLICT(id) DO NOTHING");
    if (st) {
        sqlite3_bind_text(st, 1, j->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, jobq_job_kind(j), -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, spec, -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 4, now_s());
    }
    int r = exec_done(st);
    free(spec);
    if (r != 0)
        return db_err(s, err, "cannot submit");
    if (sqlite3_changes(s->db) == 1) {
        *state = KB_JOB_PENDING;
        return KB_OK;
    }
    char *text = NULL;   /* a duplicate: the state of the one there */
    kb_rc rc = sq_status(s, j->id, state, &text, err);
    free(text);
    return rc;
}

static int begin(sq *s)
{
    return sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
}

static void end(sq *s, int ok)
{
    sqlite3_exec(s->db, ok ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL);
}

/* In the claim's transaction: the job row chosen, its spec, deliveries. */
static int pick(sq *s, int gpu, char id[65], char **spec, int *deliveries)
{
    sqlite3_stmt *st = prep(s, "SELECT id, spec, deliveries FROM kb_jobs"
                               " WHERE (kind='compile' OR ?1)"
                               "  AND (state='pending' OR (state='leased' AND lease_until<?2))"
                               " ORDER BY state='pending', submitted LIMIT 1");
    if (!st)
        return -1;
    sqlite3_bind_int(st, 1, gpu);
    sqlite3_bind_double(st, 2, now_s());
    int r = sqlite3_step(st), got = 0;
    if (r == SQLITE_ROW) {
        snprintf(id, 65, "%s", (const char *)sqlite3_column_text(st, 0));
        *spec = kb_strdup((const char *)sqlite3_column_text(st, 1));
        *deliveries = sqlite3_column_int(st, 2);
        got = *spec ? 1 : -1;
    } else if (r != SQLITE_DONE) {
        got = -1;
    }
    sqlite3_finalize(st);
    return got;
}

/* Job id to the dead letter, unless done. claim > 0: only while it is
 * still that claim (leased, delivered that many times), else nothing. */
static int set_dead(sq *s, const char *id, const char *reason, int claim)
{
    sqlite3_stmt *st = prep(s, "UPDATE kb_jobs SET state='dead', reason=?2,"
                               " finished=?3, lease_until=NULL WHERE id=?1 AND state!='done'"
                               " AND (?4 = 0 OR (state='leased' AND deliveries=?4))");
    if (st) {
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, reason, -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 3, now_s());
        sqlite3_bind_int(st, 4, claim);
    }
    return exec_done(st);
}

static int set_leased(sq *s, const char *id)
{
    sqlite3_stmt *st = prep(s, "UPDATE kb_jobs SET state='leased', deliveries="
                               "deliveries+1, lease_until=?2, consumer=?3 WHERE id=?1");
    if (st) {
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 2, now_s() + s->o.lease_s);
        sqlite3_bind_text(st, 3, s->consumer, -1, SQLITE_STATIC);
    }
    return exec_done(st);
}

/* One claim's transaction: 1 claimed (into *j), 0 none, -1 an error; a
 * job past its deliveries goes dead and the next is looked at. */
static int claim_once(sq *s, int gpu, kb_job *j, kb_err *err)
{
    if (begin(s) != 0)
        return -1;
    for (;;) {
        char id[65], *spec = NULL;
        int n = 0, got = pick(s, gpu, id, &spec, &n);
        if (got <= 0) {
            end(s, got == 0);
            return got;
        }
        if (n >= s->o.max_deliveries) {
            char why[160];
            jobq_expired_reason(n, why, sizeof why);
            free(spec);
            if (set_dead(s, id, why, 0) != 0) {
                end(s, 0);
                return -1;
            }
            continue;
        }
        int ok = set_leased(s, id) == 0 && jobq_job_decode(spec, j, err) == KB_OK;
        free(spec);
        if (ok) {
            j->deliveries = n + 1;
            ok = (j->lease = kb_strdup(s->consumer)) != NULL;
        }
        end(s, ok);
        return ok ? 1 : -1;
    }
}

static kb_rc sq_claim(void *b, int gpu, int wait_ms, kb_job *j, int *got, kb_err *err)
{
    sq *s = b;
    double deadline = kb_now_ms() + wait_ms;
    for (;;) {
        int r = claim_once(s, gpu, j, err);
        if (r < 0)
            return err && err->rc ? err->rc : db_err(s, err, "cannot claim");
        if (r > 0 || kb_now_ms() >= deadline) {
            *got = r;
            return KB_OK;
        }
        usleep(2000);   /* nothing yet: SQLite has no wake-up, look again soon */
    }
}

/* A lease's holder is the claim itself, told by its delivery count: a
 * worker whose lease expired and whose job was claimed again (deliveries
 * one more) extends, requeues or kills it no longer. */
static kb_rc sq_extend(void *b, const kb_job *j, kb_err *err)
{
    sq *s = b;
    sqlite3_stmt *st = prep(s, "UPDATE kb_jobs SET lease_until=?2 WHERE id=?1"
                               " AND state='leased' AND consumer=?3 AND deliveries=?4");
    if (st) {
        sqlite3_bind_text(st, 1, j->id, -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 2, now_s() + s->o.lease_s);
        sqlite3_bind_text(st, 3, s->consumer, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 4, j->deliveries);
    }
    return exec_done(st) == 0 ? KB_OK : db_err(s, err, "cannot extend a lease");
}

static kb_rc sq_complete(void *b, const kb_job *j, const char *result,
                         int *recorded, kb_err *err)
{
    sq *s = b;
    sqlite3_stmt *st = prep(s, "UPDATE kb_jobs SET state='done', result=?2,"
                               " finished=?3, lease_until=NULL, reason=NULL"
                               " WHERE id=?1 AND state!='done'");
    if (st) {
        sqlite3_bind_text(st, 1, j->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, result, -1, SQLITE_STATIC);
        sqlite3_bind_double(st, 3, now_s());
    }
    if (exec_done(st) != 0)
        return db_err(s, err, "cannot record a result");
    *recorded = sqlite3_changes(s->db) == 1;
    return KB_OK;
}

static kb_rc sq_fail(void *b, const kb_job *j, const char *reason, int *dead,
                     kb_err *err)
{
    sq *s = b;
    int kill = j->deliveries >= s->o.max_deliveries;
    if (kill) {
        if (set_dead(s, j->id, reason, j->deliveries) != 0)
            return db_err(s, err, "cannot kill a job");
        *dead = sqlite3_changes(s->db) == 1;   /* 0: no longer this claim */
        return KB_OK;
    }
    sqlite3_stmt *st = prep(s, "UPDATE kb_jobs SET state='pending', reason=?2,"
                               " lease_until=NULL WHERE id=?1 AND state='leased'"
                               " AND deliveries=?3");
    if (st) {
        sqlite3_bind_text(st, 1, j->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, reason, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 3, j->deliveries);
    }
    *dead = 0;
    return exec_done(st) == 0 ? KB_OK : db_err(s, err, "cannot requeue a job");
}

static kb_rc sq_reclaim(void *b, long *n, kb_err *err)
{
    sq *s = b;
    char why[160];
    jobq_expired_reason(s->o.max_deliveries, why, sizeof why);
    if (begin(s) != 0)
        return db_err(s, err, "cannot reclaim");
    double t = now_s();
    sqlite3_stmt *a = prep(s, "UPDATE kb_jobs SET state='dead', reason=?3,"
                              " finished=?1 WHERE state='leased' AND lease_until<?1"
                              " AND deliveries>=?2");
    if (a) {
        sqlite3_bind_double(a, 1, t);
        sqlite3_bind_int(a, 2, s->o.max_deliveries);
        sqlite3_bind_text(a, 3, why, -1, SQLITE_STATIC);
    }
    int ok = exec_done(a) == 0;
    long k = sqlite3_changes(s->db);
    sqlite3_stmt *p = ok ? prep(s, "UPDATE kb_jobs SET state='pending', lease_until=NULL"
                                   " WHERE state='leased' AND lease_until<?1") : NULL;
    if (p)
        sqlite3_bind_double(p, 1, t);
    ok = ok && exec_done(p) == 0;
    k += ok ? sqlite3_changes(s->db) : 0;
    end(s, ok);
    *n = k;
    return ok ? KB_OK : db_err(s, err, "cannot reclaim");
}

static kb_rc sq_count(void *b, kb_jobq_counts *c, kb_err *err)
{
    sq *s = b;
    sqlite3_stmt *st = prep(s, "SELECT state, count(*) FROM kb_jobs GROUP BY state");
    if (!st)
        return db_err(s, err, "cannot count jobs");
    while (sqlite3_step(st) == SQLITE_ROW) {
        long n = sqlite3_column_int64(st, 1);
        switch (state_of(sqlite3_column_text(st, 0))) {
        case KB_JOB_PENDING: c->pending = n; break;
        case KB_JOB_LEASED: c->leased = n; break;
        case KB_JOB_DONE: c->done = n; break;
        case KB_JOB_DEAD: c->dead = n; break;
        default: break;
        }
    }
    sqlite3_finalize(st);
    return KB_OK;
}

static kb_rc sq_dead(void *b, cJSON **out, kb_err *err)
{
    sq *s = b;
    sqlite3_stmt *st = prep(s, "SELECT spec, deliveries, reason FROM kb_jobs"
                               " WHERE state='dead' ORDER BY finished");
    cJSON *a = cJSON_CreateArray();
    if (!st || !a) {
        sqlite3_finalize(st);
        cJSON_Delete(a);
        return db_err(s, err, "cannot list the dead letter");
    }
    int ok = 1;
    while (ok && sqlite3_step(st) == SQLITE_ROW) {
        kb_job j;
        memset(&j, 0, sizeof j);
        if (jobq_job_decode((const char *)sqlite3_column_text(st, 0), &j, NULL) != KB_OK)
            continue;
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(a, o);
        kb_json_put_str(o, "id", j.id, &ok);
        kb_json_put_str(o, "task", j.task, &ok);
        kb_json_put_str(o, "candidate", j.candidate, &ok);
        kb_json_put_num(o, "deliveries", sqlite3_column_int(st, 1), &ok);
        kb_json_put_str(o, "reason", (const char *)sqlite3_column_text(st, 2), &ok);
        kb_job_release(&j);
    }
    sqlite3_finalize(st);
    if (!ok) {
        cJSON_Delete(a);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    *out = a;
    return KB_OK;
}

static void sq_close(void *b)
{
    sq *s = b;
    if (!s)
        return;
    sqlite3_close(s->db);
    free(s->path);
    free(s);
}

static const jobq_backend sqlite_ops = {
    "sqlite", sq_submit, sq_claim, sq_extend, sq_complete, sq_fail,
    sq_reclaim, sq_status, sq_count, sq_dead, sq_close,
};

kb_rc jobq_sqlite_open(const char *path, const kb_jobq_opts *o, void **state,
                       const jobq_backend **ops, kb_err *err)
{
    if (!*path)
        return kb_err_set(err, KB_ERR_USAGE, "queue 'sqlite:' needs a path");
    sq *s = calloc(1, sizeof *s);
    if (!s || !(s->path = kb_strdup(path))) {
        free(s);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    char name[64];
    jobq_opts_resolve(o, &s->o, name);
    snprintf(s->consumer, sizeof s->consumer, "%s", s->o.consumer);
    s->o.consumer = s->consumer;
    int r = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                            SQLITE_OPEN_NOMUTEX, NULL);
    if (r == SQLITE_OK) {
        sqlite3_busy_timeout(s->db, 30000);
        r = sqlite3_exec(s->db, schema, NULL, NULL, NULL);
    }
    if (r != SQLITE_OK) {
        kb_rc rc = db_err(s, err, "cannot open");
        sq_close(s);
        return rc;
    }
    *state = s;
    *ops = &sqlite_ops;
    return KB_OK;
}
