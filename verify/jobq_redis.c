/* jobq_redis.c - the queue on Redis Streams, for a team across hosts
 * (hiredis). Under the key K of the URL redis://HOST:PORT/K:
 *   K:gpu, K:compile   streams of job ids, read by the consumer group
 *                      "kb-workers" (XREADGROUP), one per kind of worker
 *   K:job:ID           a hash: spec, state, result, reason
 *   K:done             the set of done ids;  K:dead  the dead letter (a
 *                      stream: id, reason, deliveries)
 * A claim is an entry delivered to this consumer: XAUTOCLAIM takes one
 * idle past the lease first (its worker was lost), else XREADGROUP a new
 * one; the delivery count is XPENDING's, and a claim is known by it (a
 * worker whose entry was claimed again no longer renews, requeues or
 * kills it). The lease is renewed by XCLAIM (idle back to 0). Submitting,
 * completing, requeueing and killing a job, and renewing a lease, are Lua
 * scripts, so each is atomic: a job is queued once, its first result is
 * the one kept, and the entry is acknowledged (XACK) with it. A result
 * survives a restart of Redis once it is acknowledged with appendonly yes
 * and appendfsync always (docs/verify.md: what everysec risks). */
#include "verify/jobq_int.h"

#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROUP "kb-workers"
#define MAX_ARGS 16

/* The two streams, by the kind of worker that may take their jobs
 * (jobq_job_kind); a GPU worker reads both, in this order. */
static const char *const kinds[] = { "gpu", "compile" };

typedef struct {
    redisContext *c;
    char *host, *key, *url;
    int port;
    kb_jobq_opts o;
    char consumer[64];
    long lease_ms;
} rd;

/* ------------------------------------------------------------ commands */

static int connect_to(rd *r)
{
    struct timeval tv = { 5, 0 };
    if (r->c)
        redisFree(r->c);
    r->c = redisConnectWithTimeout(r->host, r->port, tv);
    if (!r->c || r->c->err)
        return -1;
    struct timeval cmd_tv = { 60, 0 };   /* a BLOCK is shorter than this */
    redisSetTimeout(r->c, cmd_tv);
    return 0;
}

/* Runs the command argv[0..n) (text arguments); on a lost connection it
 * connects again and tries once more (Redis restarted). NULL: no reply. */
static redisReply *cmd(rd *r, int n, const char **argv)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!r->c || r->c->err) {
            if (connect_to(r) != 0)
                continue;
        }
        redisReply *x = redisCommandArgv(r->c, n, argv, NULL);
        if (x)
            return x;
    }
    return NULL;
}

/* cmd over a NULL-ended list of strings. */
static redisReply *cmdl(rd *r, const char *first, ...)
{
    const char *argv[MAX_ARGS];
    int n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < MAX_ARGS; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    return cmd(r, n, argv);
}

static kb_rc net_err(rd *r, redisReply *x, kb_err *err, const char *what)
{
    kb_rc rc = kb_err_set(err, KB_ERR_NET, "queue '%s': %s: %s", r->url, what,
                          x && x->type == REDIS_REPLY_ERROR ? x->str :
                          r->c && r->c->err ? r->c->errstr : "no reply");
    if (x)
        freeReplyObject(x);
    return rc;
}

static int is_err(const redisReply *x)
{
    return !x || x->type == REDIS_REPLY_ERROR;
}

/* K:suffix into buf. */
static const char *keyf(const rd *r, char *buf, size_t n, const char *suffix)
{
    snprintf(buf, n, "%s:%s", r->key, suffix);
    return buf;
}

static const char *job_key(const rd *r, char *buf, size_t n, const char *id)
{
    snprintf(buf, n, "%s:job:%s", r->key, id);
    return buf;
}

/* ------------------------------------------------------------ scripts */

/* KEYS: job hash, stream. ARGV: spec, id. The state of the job already
 * there, else "new" (queued). */
static const char lua_submit[] =
    "local st = redis.call('HGET', KEYS[1], 'state')\n"
    "if st then return st end\n"
    "redis.call('HSET', KEYS[1], 'spec', ARGV[1], 'state', 'pending')\n"
    "redis.call('XADD', KEYS[2], '*', 'id', ARGV[2])\n"
    "return 'new'\n";

/* KEYS: job hash, stream, done set. ARGV: group, entry, result, id.
 * 1 when this result is the job's first. */
static const char lua_complete[] =
    "local rec = 0\n"
    "if redis.call('HGET', KEYS[1], 'state') ~= 'done' then\n"
    "  redis.call('HSET', KEYS[1], 'state', 'done', 'result', ARGV[3])\n"
    "  redis.call('HDEL', KEYS[1], 'reason')\n"
    "  redis.call('SADD', KEYS[3], ARGV[4])\n"
    "  rec = 1\n"
    "end\n"
    "redis.call('XACK', KEYS[2], ARGV[1], ARGV[2])\n"
    "redis.call('XDEL', KEYS[2], ARGV[2])\n"
    "return rec\n";

/* A claim's fence, first in the scripts that act for a claim (KEYS[2]
 * the stream; ARGV[1] the group, ARGV[2] the entry, ARGV[3] the claim's
 * delivery count, "0" for none): the entry is still pending, delivered
 * that many times, else it was claimed again since (its lease expired)
 * and the script does nothing (returns 0). */
#define LUA_FENCE \
    "if ARGV[3] ~= '0' then\n" \
    "  local p = redis.call('XPENDING', KEYS[2], ARGV[1], ARGV[2], ARGV[2], 1)\n" \
    "  if #p == 0 or p[1][4] ~= tonumber(ARGV[3]) then return 0 end\n" \
    "end\n"

/* KEYS: job hash, stream. ARGV: group, entry, deliveries, consumer.
 * The lease renewed (idle back to 0). */
static const char lua_extend[] = LUA_FENCE
    "redis.call('XCLAIM', KEYS[2], ARGV[1], ARGV[4], 0, ARGV[2], 'JUSTID')\n"
    "return 1\n";

/* KEYS: job hash, stream. ARGV: group, entry, deliveries, consumer,
 * reason, idle. The reason kept; the entry made idle past the lease, so
 * the next claim (XAUTOCLAIM) takes it again at once, its count going on. */
static const char lua_requeue[] = LUA_FENCE
    "redis.call('HSET', KEYS[1], 'reason', ARGV[5])\n"
    "redis.call('XCLAIM', KEYS[2], ARGV[1], ARGV[4], 0, ARGV[2], 'IDLE', ARGV[6],"
    " 'JUSTID')\n"
    "return 1\n";

/* KEYS: job hash, stream, dead stream. ARGV: group, entry, fence
 * deliveries, reason, id, deliveries. A done job stays done. */
static const char lua_dead[] = LUA_FENCE
    "if redis.call('HGET', KEYS[1], 'state') ~= 'done' then\n"
    "  redis.call('HSET', KEYS[1], 'state', 'dead', 'reason', ARGV[4])\n"
    "  redis.call('XADD', KEYS[3], '*', 'id', ARGV[5], 'reason', ARGV[4],"
    " 'deliveries', ARGV[6])\n"
    "end\n"
    "redis.call('XACK', KEYS[2], ARGV[1], ARGV[2])\n"
    "redis.call('XDEL', KEYS[2], ARGV[2])\n"
    "return 1\n";

/* ------------------------------------------------------------ the queue */

static kb_job_state state_of(const char *s)
{
    if (!s)
        return KB_JOB_NONE;
    if (!strcmp(s, "pending"))
        return KB_JOB_PENDING;
    if (!strcmp(s, "done"))
        return KB_JOB_DONE;
    if (!strcmp(s, "dead"))
        return KB_JOB_DEAD;
    return KB_JOB_NONE;
}

static kb_rc rd_submit(void *b, const kb_job *j, kb_job_state *state, kb_err *err)
{
    rd *r = b;
    char *spec = jobq_job_encode(j);
    if (!spec)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    char hk[256], sk[256];
    redisReply *x = cmdl(r, "EVAL", lua_submit, "2", job_key(r, hk, sizeof hk, j->id),
                         keyf(r, sk, sizeof sk, jobq_job_kind(j)), spec, j->id, NULL);
    free(spec);
    if (is_err(x) || x->type != REDIS_REPLY_STRING)
        return net_err(r, x, err, "cannot submit");
    *state = !strcmp(x->str, "new") ? KB_JOB_PENDING : state_of(x->str);
    freeReplyObject(x);
    return KB_OK;
}

/* The entry of an XREADGROUP / XAUTOCLAIM reply's entry list: its id and
 * its "id" field into e and id; 1 found, 0 none, 2 one without a job id
 * (deleted). */
static int entry_of(const redisReply *list, char e[64], char id[65])
{
    if (!list || list->type != REDIS_REPLY_ARRAY || list->elements < 1)
        return 0;
    const redisReply *en = list->element[0];
    if (en->type != REDIS_REPLY_ARRAY || en->elements < 2 ||
        en->element[0]->type != REDIS_REPLY_STRING)
        return 0;
    snprintf(e, 64, "%s", en->element[0]->str);
    const redisReply *f = en->element[1];
    if (f->type != REDIS_REPLY_ARRAY)
        return 2;    /* deleted under us: acknowledge it away */
    for (size_t i = 0; i + 1 < f->elements; i += 2)
        if (!strcmp(f->element[i]->str, "id")) {
            snprintf(id, 65, "%s", f->element[i + 1]->str);
            return 1;
        }
    return 2;
}

/* One entry of stream sk for this consumer: reclaimed past the lease, else
 * new (waiting up to block_ms when > 0). entry_of's answer, -1 an error. */
static int take_entry(rd *r, const char *sk, int block_ms, char e[64], char id[65])
{
    char idle[32], blk[32];
    snprintf(idle, sizeof idle, "%ld", r->lease_ms);
    redisReply *x = cmdl(r, "XAUTOCLAIM", sk, GROUP, r->consumer, idle, "0-0",
                         "COUNT", "1", NULL);
    if (is_err(x)) {
        freeReplyObject(x);
        return -1;
    }
    int got = x->type == REDIS_REPLY_ARRAY && x->elements >= 2
                  ? entry_of(x->element[1], e, id) : 0;
    freeReplyObject(x);
    if (got)
        return got;
    snprintf(blk, sizeof blk, "%d", block_ms);
    x = block_ms > 0 ? cmdl(r, "XREADGROUP", "GROUP", GROUP, r->consumer, "COUNT", "1",
                            "BLOCK", blk, "STREAMS", sk, ">", NULL)
                     : cmdl(r, "XREADGROUP", "GROUP", GROUP, r->consumer, "COUNT", "1",
                            "STREAMS", sk, ">", NULL);
    if (!x || x->type == REDIS_REPLY_ERROR) {
        freeReplyObject(x);
        return -1;
    }
    got = 0;
    if (x->type == REDIS_REPLY_ARRAY && x->elements >= 1 &&
        x->element[0]->type == REDIS_REPLY_ARRAY && x->element[0]->elements >= 2)
        got = entry_of(x->element[0]->element[1], e, id);
    freeReplyObject(x);
    return got;
}

/* The delivery count of entry e of stream sk (XPENDING), 0 if unknown. */
static int deliveries_of(rd *r, const char *sk, const char *e)
{
    redisReply *x = cmdl(r, "XPENDING", sk, GROUP, e, e, "1", NULL);
    int n = 0;
    if (!is_err(x) && x->type == REDIS_REPLY_ARRAY && x->elements == 1 &&
        x->element[0]->type == REDIS_REPLY_ARRAY && x->element[0]->elements >= 4)
        n = (int)x->element[0]->element[3]->integer;
    freeReplyObject(x);
    return n;
}

static int ack(rd *r, const char *sk, const char *e)
{
    redisReply *x = cmdl(r, "XACK", sk, GROUP, e, NULL);
    int ok = !is_err(x);
    freeReplyObject(x);
    x = cmdl(r, "XDEL", sk, e, NULL);
    freeReplyObject(x);
    return ok ? 0 : -1;
}

/* The entry e of job id to the dead letter, recorded as delivered
 * deliveries times; fence: the claim's delivery count (0: none, the
 * caller holds the entry). 1 done, 0 the claim was no longer ours, -1 an
 * error. */
static int kill_job(rd *r, const char *kind, const char *e, const char *id,
                    const char *reason, int deliveries, int fence)
{
    char hk[256], sk[256], dk[256], dn[16], fn[16];
    snprintf(dn, sizeof dn, "%d", deliveries);
    snprintf(fn, sizeof fn, "%d", fence);
    redisReply *x = cmdl(r, "EVAL", lua_dead, "3", job_key(r, hk, sizeof hk, id),
                         keyf(r, sk, sizeof sk, kind), keyf(r, dk, sizeof dk, "dead"),
                         GROUP, e, fn, reason, id, dn, NULL);
    int got = !is_err(x) && x->type == REDIS_REPLY_INTEGER ? (int)x->integer : -1;
    freeReplyObject(x);
    return got;
}

/* The entry (e, id) of stream kind, delivered n times, as a claim: 1 it
 * is j's, 0 it was not to be run (done already, or dead now), -1 error. */
static int adopt(rd *r, const char *kind, const char *e, const char *id, int n,
                 kb_job *j, kb_err *err)
{
    char hk[256], sk[256];
    keyf(r, sk, sizeof sk, kind);
    redisReply *x = cmdl(r, "HMGET", job_key(r, hk, sizeof hk, id), "spec", "state",
                         NULL);
    if (is_err(x) || x->type != REDIS_REPLY_ARRAY || x->elements != 2) {
        freeReplyObject(x);
        return -1;
    }
    const char *spec = x->element[0]->str, *st = x->element[1]->str;
    int r_ = 1;
    if (!spec || (st && strcmp(st, "pending") != 0)) {
        r_ = ack(r, sk, e) == 0 ? 0 : -1;   /* done or dead already: not again */
    } else if (n > r->o.max_deliveries) {
        char why[160];
        jobq_expired_reason(n - 1, why, sizeof why);
        r_ = kill_job(r, kind, e, id, why, n - 1, 0) == 1 ? 0 : -1;
    } else if (jobq_job_decode(spec, j, err) != KB_OK) {
        r_ = kill_job(r, kind, e, id, "its spec is not a job", n, 0) == 1 ? 0 : -1;
    } else {
        kb_buf l;
        kb_buf_init(&l, 0);
        j->deliveries = n;
        j->lease = kb_buf_printf(&l, "%s %s", kind, e) == KB_OK ? kb_buf_detach(&l) : NULL;
        kb_buf_release(&l);
        r_ = j->lease ? 1 : -1;
    }
    freeReplyObject(x);
    return r_;
}

static kb_rc rd_claim(void *b, int gpu, int wait_ms, kb_job *j, int *got, kb_err *err)
{
    rd *r = b;
    double deadline = kb_now_ms() + wait_ms;
    *got = 0;
    for (;;) {
        for (int k = gpu ? 0 : 1; k < 2; k++) {
            char sk[256], e[64], id[65];
            keyf(r, sk, sizeof sk, kinds[k]);
            double left = deadline - kb_now_ms();
            /* the last stream looked at blocks (briefly, so a GPU worker
             * also sees compile-only jobs come) */
            int block = k == 1 && left > 1 ? (int)(left < 100 ? left : 100) : 0;
            int t = take_entry(r, sk, block, e, id);
            if (t < 0)
                return net_err(r, NULL, err, "cannot claim");
            if (t == 0)
                continue;
            int a = t == 1 ? adopt(r, kinds[k], e, id, deliveries_of(r, sk, e), j, err)
                           : ack(r, sk, e);
            if (a < 0)
                return net_err(r, NULL, err, "cannot claim");
            if (a == 1 && t == 1) {
                *got = 1;
                return KB_OK;
            }
            k--;   /* that entry was not to be run: look at this stream again */
        }
        if (kb_now_ms() >= deadline)
            return KB_OK;
    }
}

/* j's stream key and entry from its lease. */
static int lease_of(const rd *r, const kb_job *j, char sk[256], char e[64])
{
    char kind[16];
    if (!j->lease || sscanf(j->lease, "%15s %63s", kind, e) != 2)
        return -1;
    keyf(r, sk, 256, kind);
    return 0;
}

/* lua_extend or lua_requeue for j's claim (reason, idle: the latter's). */
static kb_rc claim_script(rd *r, const kb_job *j, const char *script,
                          const char *reason, const char *idle, kb_err *err,
                          const char *what)
{
    char sk[256], e[64], hk[256], dn[16];
    if (lease_of(r, j, sk, e) != 0)
        return kb_err_set(err, KB_ERR_USAGE, "a job that was not claimed");
    snprintf(dn, sizeof dn, "%d", j->deliveries);
    /* reason NULL ends the list: lua_extend takes four arguments */
    redisReply *x = cmdl(r, "EVAL", script, "2", job_key(r, hk, sizeof hk, j->id), sk,
                         GROUP, e, dn, r->consumer, reason, idle, NULL);
    if (is_err(x))
        return net_err(r, x, err, what);
    freeReplyObject(x);
    return KB_OK;
}

static kb_rc rd_extend(void *b, const kb_job *j, kb_err *err)
{
    return claim_script(b, j, lua_extend, NULL, NULL, err, "cannot extend a lease");
}

static kb_rc rd_complete(void *b, const kb_job *j, const char *result,
                         int *recorded, kb_err *err)
{
    rd *r = b;
    char sk[256], e[64], hk[256], dk[256];
    if (lease_of(r, j, sk, e) != 0)
        return kb_err_set(err, KB_ERR_USAGE, "a job that was not claimed");
    redisReply *x = cmdl(r, "EVAL", lua_complete, "3", job_key(r, hk, sizeof hk, j->id),
                         sk, keyf(r, dk, sizeof dk, "done"), GROUP, e, result, j->id,
                         NULL);
    if (is_err(x) || x->type != REDIS_REPLY_INTEGER)
        return net_err(r, x, err, "cannot record a result");
    *recorded = x->integer == 1;
    freeReplyObject(x);
    return KB_OK;
}

static kb_rc rd_fail(void *b, const kb_job *j, const char *reason, int *dead,
                     kb_err *err)
{
    rd *r = b;
    char sk[256], e[64], kind[16];
    if (lease_of(r, j, sk, e) != 0 || sscanf(j->lease, "%15s", kind) != 1)
        return kb_err_set(err, KB_ERR_USAGE, "a job that was not claimed");
    *dead = 0;
    if (j->deliveries >= r->o.max_deliveries) {
        int k = kill_job(r, kind, e, j->id, reason, j->deliveries, j->deliveries);
        if (k < 0)
            return net_err(r, NULL, err, "cannot kill a job");
        *dead = k == 1;   /* 0: no longer this claim */
        return KB_OK;
    }
    char idle[32];
    snprintf(idle, sizeof idle, "%ld", r->lease_ms + 1000);
    return claim_script(r, j, lua_requeue, reason, idle, err, "cannot requeue a job");
}

static kb_rc rd_reclaim(void *b, long *n, kb_err *err)
{
    rd *r = b;
    char idle[32];
    snprintf(idle, sizeof idle, "%ld", r->lease_ms);
    *n = 0;
    for (int k = 0; k < 2; k++) {
        char sk[256];
        redisReply *x = cmdl(r, "XPENDING", keyf(r, sk, sizeof sk, kinds[k]), GROUP,
                             "IDLE", idle, "-", "+", "100000", NULL);
        if (is_err(x))
            return net_err(r, x, err, "cannot count expired leases");
        if (x->type == REDIS_REPLY_ARRAY)
            *n += (long)x->elements;
        freeReplyObject(x);
    }
    return KB_OK;
}

static kb_rc rd_status(void *b, const char *id, kb_job_state *state, char **text,
                       kb_err *err)
{
    rd *r = b;
    char hk[256];
    *state = KB_JOB_NONE;
    *text = NULL;
    redisReply *x = cmdl(r, "HMGET", job_key(r, hk, sizeof hk, id), "state", "result",
                         "reason", NULL);
    if (is_err(x) || x->type != REDIS_REPLY_ARRAY || x->elements != 3)
        return net_err(r, x, err, "cannot read a job");
    *state = state_of(x->element[0]->str);
    const char *t = *state == KB_JOB_DONE ? x->element[1]->str
                    : *state == KB_JOB_DEAD ? x->element[2]->str : NULL;
    kb_rc rc = KB_OK;
    if (t && !(*text = kb_strdup(t)))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    freeReplyObject(x);
    return rc;
}

/* The integer reply of a command, -1 on error. */
static long long int_of(rd *r, const char *a, const char *b_, const char *c)
{
    redisReply *x = cmdl(r, a, b_, c, NULL);
    long long v = !is_err(x) && x->type == REDIS_REPLY_INTEGER ? x->integer : -1;
    freeReplyObject(x);
    return v;
}

static kb_rc rd_count(void *b, kb_jobq_counts *c, kb_err *err)
{
    rd *r = b;
    char k1[256];
    for (int k = 0; k < 2; k++) {
        keyf(r, k1, sizeof k1, kinds[k]);
        long long len = int_of(r, "XLEN", k1, NULL);
        redisReply *x = cmdl(r, "XPENDING", k1, GROUP, NULL);
        if (len < 0 || is_err(x))
            return net_err(r, x, err, "cannot count jobs");
        long long held = x->type == REDIS_REPLY_ARRAY && x->elements >= 1 &&
                         x->element[0]->type == REDIS_REPLY_INTEGER ? x->element[0]->integer : 0;
        freeReplyObject(x);
        c->leased += (long)held;
        c->pending += (long)(len - held);
    }
    long long done = int_of(r, "SCARD", keyf(r, k1, sizeof k1, "done"), NULL);
    long long dead = int_of(r, "XLEN", keyf(r, k1, sizeof k1, "dead"), NULL);
    if (done < 0 || dead < 0)
        return net_err(r, NULL, err, "cannot count jobs");
    c->done = (long)done;
    c->dead = (long)dead;
    return KB_OK;
}

/* One dead-letter entry's fields as an object, with the job's task and
 * candidate from its spec. */
static cJSON *dead_entry(rd *r, const redisReply *f, int *ok)
{
    cJSON *o = cJSON_CreateObject();
    *ok = *ok && o;
    const char *id = NULL;
    for (size_t i = 0; *ok && i + 1 < f->elements; i += 2) {
        const char *k = f->element[i]->str, *v = f->element[i + 1]->str;
        if (!strcmp(k, "deliveries"))
            kb_json_put_num(o, k, atof(v), ok);
        else
            kb_json_put_str(o, k, v, ok);
        if (!strcmp(k, "id"))
            id = v;
    }
    char hk[256];
    redisReply *x = id ? cmdl(r, "HGET", job_key(r, hk, sizeof hk, id), "spec", NULL) : NULL;
    kb_job j;
    memset(&j, 0, sizeof j);
    if (x && x->type == REDIS_REPLY_STRING && jobq_job_decode(x->str, &j, NULL) == KB_OK) {
        kb_json_put_str(o, "task", j.task, ok);
        kb_json_put_str(o, "candidate", j.candidate, ok);
        kb_job_release(&j);
    }
    freeReplyObject(x);
    return o;
}

static kb_rc rd_dead(void *b, cJSON **out, kb_err *err)
{
    rd *r = b;
    char dk[256];
    redisReply *x = cmdl(r, "XRANGE", keyf(r, dk, sizeof dk, "dead"), "-", "+", NULL);
    if (is_err(x) || x->type != REDIS_REPLY_ARRAY)
        return net_err(r, x, err, "cannot list the dead letter");
    cJSON *a = cJSON_CreateArray();
    int ok = a != NULL;
    for (size_t i = 0; ok && i < x->elements; i++) {
        const redisReply *en = x->element[i];
        if (en->type != REDIS_REPLY_ARRAY || en->elements < 2 ||
            en->element[1]->type != REDIS_REPLY_ARRAY)
            continue;
        cJSON *o = dead_entry(r, en->element[1], &ok);
        if (!o || !cJSON_AddItemToArray(a, o)) {
            cJSON_Delete(o);
            ok = 0;
        }
    }
    freeReplyObject(x);
    if (!ok) {
        cJSON_Delete(a);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    *out = a;
    return KB_OK;
}

static void rd_close(void *b)
{
    rd *r = b;
    if (!r)
        return;
    if (r->c)
        redisFree(r->c);
    free(r->host);
    free(r->key);
    free(r->url);
    free(r);
}

static const jobq_backend redis_ops = {
    "redis", rd_submit, rd_claim, rd_extend, rd_complete, rd_fail,
    rd_reclaim, rd_status, rd_count, rd_dead, rd_close,
};

/* redis://HOST[:PORT][/KEY] into r; -1 when it is not one. */
static int parse_url(rd *r, const char *url)
{
    const char *h = url + 8, *slash = strchr(h, '/');
    size_t hl = slash ? (size_t)(slash - h) : strlen(h);
    const char *colon = memchr(h, ':', hl);
    r->port = 6379;
    if (colon) {
        long p;
        char port[16];
        size_t pl = hl - (size_t)(colon - h) - 1;
        if (pl == 0 || pl >= sizeof port)
            return -1;
        memcpy(port, colon + 1, pl);
        port[pl] = '\0';
        if (kb_parse_long(port, 1, 65535, &p) != KB_OK)
            return -1;
        r->port = (int)p;
        hl = (size_t)(colon - h);
    }
    r->host = kb_strndup(h, hl ? hl : 0);
    r->key = kb_strdup(slash && slash[1] ? slash + 1 : "kb:verify");
    if (r->host && !*r->host) {
        free(r->host);
        r->host = kb_strdup("127.0.0.1");
    }
    return r->host && r->key ? 0 : -1;
}

/* The consumer group on both streams (made with them when missing). */
static int make_groups(rd *r)
{
    for (int k = 0; k < 2; k++) {
        char sk[256];
        redisReply *x = cmdl(r, "XGROUP", "CREATE", keyf(r, sk, sizeof sk, kinds[k]),
                             GROUP, "0", "MKSTREAM", NULL);
        int ok = x && (x->type != REDIS_REPLY_ERROR || strstr(x->str, "BUSYGROUP"));
        freeReplyObject(x);
        if (!ok)
            return -1;
    }
    return 0;
}

kb_rc jobq_redis_open(const char *url, const kb_jobq_opts *o, void **state,
                      const jobq_backend **ops, kb_err *err)
{
    rd *r = calloc(1, sizeof *r);
    if (!r || !(r->url = kb_strdup(url))) {
        free(r);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    if (parse_url(r, url) != 0) {
        rd_close(r);
        return kb_err_set(err, KB_ERR_USAGE, "bad queue URL '%s' (redis://HOST"
                          "[:PORT][/KEY])", url);
    }
    char name[64];
    jobq_opts_resolve(o, &r->o, name);
    snprintf(r->consumer, sizeof r->consumer, "%s", r->o.consumer);
    r->o.consumer = r->consumer;
    r->lease_ms = (long)(r->o.lease_s * 1000);
    if (connect_to(r) != 0 || make_groups(r) != 0) {
        kb_rc rc = kb_err_set(err, KB_ERR_NET, "cannot reach queue '%s': %s", url,
                              r->c && r->c->err ? r->c->errstr : "no reply");
        rd_close(r);
        return rc;
    }
    *state = r;
    *ops = &redis_ops;
    return KB_OK;
}
