/* test_jobq.c - the verification queue's contract (verify/verify.h,
 * kb_jobq) on both backends, without kb-verify: a real SQLite file, and a
 * real redis-server on loopback that the test starts and stops (skipped
 * where none is installed). A job submitted twice is one job; a claim
 * carries the job back whole; the first result is the only one; a job
 * failed max_deliveries times, or whose leases expired that often, is in
 * the dead letter with its reason, and a waiter gets that reason; and a
 * worker whose lease expired and whose job another claimed cannot put
 * that job back in the queue. */
#include "test_util.h"

#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <sys/wait.h>

#include "verify/verify.h"

static char *dir;
static pid_t redis_pid;
static unsigned redis_port;

/* A job of task gelu whose source says n. Its strings are static: never
 * released. */
static kb_job job(int n)
{
    static char src[8][64];
    kb_job j;
    memset(&j, 0, sizeof j);
    snprintf(src[n % 8], sizeof src[0], "// candidate %d\n", n);
    j.task = "gelu";
    j.task_dir = "corpus/tasks/gelu";
    j.candidate = "c.cu";
    j.source = src[n % 8];
    j.compile_only = 1;
    j.timeout_s = 7;
    kb_sha256_hex(j.source, strlen(j.source), j.id);
    return j;
}

/* The queue at url for worker name (NULL: a submitter). */
static kb_jobq *open_q(const char *url, const char *name, double lease_s, int max)
{
    kb_jobq_opts o;
    kb_jobq_opts_init(&o);
    o.consumer = name;
    o.lease_s = lease_s;
    o.max_deliveries = max;
    kb_jobq *q = NULL;
    kb_err err;
    kb_err_clear(&err);
    if (kb_jobq_open(url, &o, &q, &err) != KB_OK)
        fail_msg("%s", err.msg);
    return q;
}

/* The URL of a queue of its own for test name on backend be. */
static const char *url_of(const char *be, const char *name)
{
    static char u[4][512];
    static int k;
    char *b = u[k++ % 4];
    if (!strcmp(be, "sqlite"))
        snprintf(b, sizeof u[0], "sqlite:%s/%s.sqlite", dir, name);
    else
        snprintf(b, sizeof u[0], "redis://127.0.0.1:%u/%s", redis_port, name);
    return b;
}

static kb_job_state state_of(kb_jobq *q, const char *id, char **text)
{
    kb_job_state st;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_jobq_status(q, id, &st, text, &err), KB_OK);
    return st;
}

static int claim(kb_jobq *q, kb_job *c)
{
    int got = -1;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_jobq_claim(q, 0, 0, c, &got, &err), KB_OK);
    return got;
}

static void nap(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    nanosleep(&ts, NULL);
}

static void skip_without(const char *be)
{
    if (!strcmp(be, "redis") && !redis_pid)
        skip();
}

/* Submitted twice, one job; claimed whole; the first result is the one. */
static void round_trip(const char *be)
{
    skip_without(be);
    const char *url = url_of(be, "round");
    kb_jobq *sub = open_q(url, NULL, 60, 3), *w = open_q(url, "w", 60, 3);
    kb_job j = job(1), c;
    memset(&c, 0, sizeof c);
    kb_job_state st;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_jobq_submit(sub, &j, &st, &err), KB_OK);
    assert_int_equal(st, KB_JOB_PENDING);
    assert_int_equal(kb_jobq_submit(sub, &j, &st, &err), KB_OK);
    assert_int_equal(st, KB_JOB_PENDING);
    assert_int_equal(claim(w, &c), 1);
    assert_string_equal(c.id, j.id);
    assert_string_equal(c.task, "gelu");
    assert_string_equal(c.source, j.source);
    assert_int_equal(c.compile_only, 1);
    assert_true(c.timeout_s == 7);
    assert_int_equal(c.deliveries, 1);
    kb_job none;
    memset(&none, 0, sizeof none);
    assert_int_equal(claim(w, &none), 0);   /* the duplicate is no second job */
    int rec = -1;
    assert_int_equal(kb_jobq_complete(w, &c, "{\"verdict\":\"compiled\"}", &rec, &err), KB_OK);
    assert_int_equal(rec, 1);
    assert_int_equal(kb_jobq_complete(w, &c, "{\"verdict\":\"error\"}", &rec, &err), KB_OK);
    assert_int_equal(rec, 0);
    char *text = NULL;
    assert_int_equal(state_of(sub, j.id, &text), KB_JOB_DONE);
    assert_string_equal(text, "{\"verdict\":\"compiled\"}");
    free(text);
    assert_int_equal(kb_jobq_submit(sub, &j, &st, &err), KB_OK);
    assert_int_equal(st, KB_JOB_DONE);
    kb_jobq_counts n;
    assert_int_equal(kb_jobq_count(sub, &n, &err), KB_OK);
    assert_int_equal(n.pending + n.leased + n.done + n.dead, 1);
    assert_int_equal(n.done, 1);
    kb_job_release(&c);
    kb_jobq_close(sub);
    kb_jobq_close(w);
}

/* Failed max_deliveries times: dead, with the last reason, listed, and a
 * waiter's result says why. */
static void failed_to_dead(const char *be)
{
    skip_without(be);
    const char *url = url_of(be, "failed");
    kb_jobq *w = open_q(url, "w", 60, 2);
    kb_job j = job(2), c;
    memset(&c, 0, sizeof c);
    kb_job_state st;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_jobq_submit(w, &j, &st, &err), KB_OK);
    int dead = -1;
    assert_int_equal(claim(w, &c), 1);
    assert_int_equal(kb_jobq_fail(w, &c, "crash one", &dead, &err), KB_OK);
    assert_int_equal(dead, 0);
    assert_int_equal(claim(w, &c), 1);
    assert_int_equal(c.deliveries, 2);
    assert_int_equal(kb_jobq_fail(w, &c, "crash two", &dead, &err), KB_OK);
    assert_int_equal(dead, 1);
    assert_int_equal(claim(w, &c), 0);
    char *text = NULL;
    assert_int_equal(state_of(w, j.id, &text), KB_JOB_DEAD);
    assert_string_equal(text, "crash two");
    free(text);
    cJSON *dl = NULL;
    assert_int_equal(kb_jobq_dead(w, &dl, &err), KB_OK);
    assert_int_equal(cJSON_GetArraySize(dl), 1);
    cJSON *e = cJSON_GetArrayItem(dl, 0);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e, "id")), j.id);
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(e, "deliveries")) == 2);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e, "reason")), "crash two");
    cJSON_Delete(dl);
    kb_verify_result r;
    kb_verify_result_init(&r);
    assert_int_equal(kb_jobq_wait(w, j.id, 1, &r, &err), KB_OK);
    assert_int_equal(r.verdict, KB_VERIFY_ERROR);
    assert_string_equal(r.reason, "crash two");
    kb_verify_result_release(&r);
    kb_job_release(&c);
    kb_jobq_close(w);
}

/* A lease that expired max_deliveries times: dead at the next claim. */
static void expired_to_dead(const char *be)
{
    skip_without(be);
    const char *url = url_of(be, "expired");
    kb_jobq *w = open_q(url, "w", 0.2, 1);
    kb_job j = job(3), c;
    memset(&c, 0, sizeof c);
    kb_job_state st;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_jobq_submit(w, &j, &st, &err), KB_OK);
    assert_int_equal(claim(w, &c), 1);
    nap(0.4);
    assert_int_equal(claim(w, &c), 0);
    char *text = NULL;
    assert_int_equal(state_of(w, j.id, &text), KB_JOB_DEAD);
    assert_non_null(strstr(text, "delivered 1 times without a result"));
    free(text);
    kb_job_release(&c);
    kb_jobq_close(w);
}

/* Worker a's lease expires and b claims the job: a's failure (its
 * kb-verify crashed late) leaves b's claim alone - c finds nothing to
 * claim - and b's result is the job's. */
static void stale_claim(const char *be)
{
    skip_without(be);
    const char *url = url_of(be, "stale");
    kb_jobq *a = open_q(url, "a", 1, 3), *b = open_q(url, "b", 1, 3),
            *c = open_q(url, "c", 1, 3);
    kb_job j = job(4), ja, jb, jc;
    memset(&ja, 0, sizeof ja);
    memset(&jb, 0, sizeof jb);
    memset(&jc, 0, sizeof jc);
    kb_job_state st;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_jobq_submit(a, &j, &st, &err), KB_OK);
    assert_int_equal(claim(a, &ja), 1);
    nap(1.3);
    assert_int_equal(claim(b, &jb), 1);
    assert_int_equal(jb.deliveries, 2);
    int dead = -1;
    assert_int_equal(kb_jobq_extend(a, &ja, &err), KB_OK);
    assert_int_equal(kb_jobq_fail(a, &ja, "a's late crash", &dead, &err), KB_OK);
    assert_int_equal(dead, 0);
    assert_int_equal(claim(c, &jc), 0);
    int rec = -1;
    assert_int_equal(kb_jobq_complete(b, &jb, "{\"verdict\":\"compiled\"}", &rec, &err), KB_OK);
    assert_int_equal(rec, 1);
    char *text = NULL;
    assert_int_equal(state_of(c, j.id, &text), KB_JOB_DONE);
    free(text);
    kb_job_release(&ja);
    kb_job_release(&jb);
    kb_jobq_close(a);
    kb_jobq_close(b);
    kb_jobq_close(c);
}

static void sqlite_round_trip(void **s) { (void)s; round_trip("sqlite"); }
static void sqlite_failed_to_dead(void **s) { (void)s; failed_to_dead("sqlite"); }
static void sqlite_expired_to_dead(void **s) { (void)s; expired_to_dead("sqlite"); }
static void sqlite_stale_claim(void **s) { (void)s; stale_claim("sqlite"); }
static void redis_round_trip(void **s) { (void)s; round_trip("redis"); }
static void redis_failed_to_dead(void **s) { (void)s; failed_to_dead("redis"); }
static void redis_expired_to_dead(void **s) { (void)s; expired_to_dead("redis"); }
static void redis_stale_claim(void **s) { (void)s; stale_claim("redis"); }

/* A redis-server on a free loopback port, no persistence; redis_pid 0
 * when there is none to start. */
static void start_redis(void)
{
    int fd = tu_bind_local(0, &redis_port);
    assert_true(fd >= 0);
    close(fd);
    char port[16];
    snprintf(port, sizeof port, "%u", redis_port);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execlp("redis-server", "redis-server", "--bind", "127.0.0.1", "--port", port,
               "--save", "", "--appendonly", "no", (char *)NULL);
        _exit(127);
    }
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%u/up", redis_port);
    for (int i = 0; i < 200; i++) {
        kb_jobq *q = NULL;
        if (kb_jobq_open(url, NULL, &q, NULL) == KB_OK) {
            kb_jobq_close(q);
            redis_pid = pid;
            return;
        }
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid)   /* no redis-server */
            return;
        nap(0.025);
    }
    fail_msg("redis-server on port %u did not answer in 5 s", redis_port);
}

int main(void)
{
    dir = tu_tmpdir("jobq");
    start_redis();
    if (!redis_pid)
        printf("skip: Redis (no redis-server: make deps)\n");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sqlite_round_trip),
        cmocka_unit_test(sqlite_failed_to_dead),
        cmocka_unit_test(sqlite_expired_to_dead),
        cmocka_unit_test(sqlite_stale_claim),
        cmocka_unit_test(redis_round_trip),
        cmocka_unit_test(redis_failed_to_dead),
        cmocka_unit_test(redis_expired_to_dead),
        cmocka_unit_test(redis_stale_claim),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    if (redis_pid) {
        kill(redis_pid, SIGKILL);
        waitpid(redis_pid, NULL, 0);
    }
    tu_rmtree(dir);
    free(dir);
    return failed;
}
