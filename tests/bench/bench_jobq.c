/* bench_jobq.c - the verification queue's own cost per job, no kb-verify
 * (BENCHMARKS.md, "verification queue").
 *   bench_jobq URL [N]
 * N jobs (default 500) of a real candidate's size, each: submitted, claimed
 * by a worker's handle (a second connection), completed with a result of
 * a real result's size, and its result read back by the submitter: one
 * job's queue overhead is the sum of those four calls. Prints the median,
 * p95 and mean of each step in ms, and the jobs per second of the loop. */
#include "verify/verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, double *x, size_t n)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += x[i];
    qsort(x, n, sizeof *x, cmp_double);
    printf("  %-10s median %.3f ms  p95 %.3f ms  mean %.3f ms\n", what, x[n / 2],
           x[(size_t)(n * 0.95)], sum / (double)n);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_jobq URL [N]\n");
        return 2;
    }
    size_t n = argc > 2 ? (size_t)strtoul(argv[2], NULL, 10) : 500;
    kb_err err;
    kb_err_clear(&err);
    kb_jobq_opts o;
    kb_jobq_opts_init(&o);
    o.consumer = "bench-worker";
    kb_jobq *sub = NULL, *wrk = NULL;
    if (kb_jobq_open(argv[1], NULL, &sub, &err) != KB_OK ||
        kb_jobq_open(argv[1], &o, &wrk, &err) != KB_OK) {
        fprintf(stderr, "bench_jobq: %s\n", err.msg);
        return 1;
    }
    double *t[5];
    for (int k = 0; k < 5; k++)
        t[k] = calloc(n, sizeof **t);
    /* a candidate of 3 KB and a result of 2 KB: the sizes of a level-1 job */
    char src[3072], res[2048];
    memset(src, 'x', sizeof src - 1);
    src[sizeof src - 1] = '\0';
    snprintf(res, sizeof res, "{\"verdict\":\"compiled\",\"reason\":\"%0*d\"}", 1900, 0);
    char tag[32];
    snprintf(tag, sizeof tag, "%.0f", kb_now_ms());
    double t0 = kb_now_ms();
    for (size_t i = 0; i < n; i++) {
        kb_job j, c;
        memset(&j, 0, sizeof j);
        memset(&c, 0, sizeof c);
        j.task = "gelu";
        j.task_dir = "corpus/tasks/gelu";
        j.candidate = "bench.cu";
        j.source = src;
        j.compile_only = 1;
        snprintf(src, 96, "// %s %zu ", tag, i);   /* another job each */
        src[strlen(src)] = 'x';
        kb_sha256_hex(src, strlen(src), j.id);
        kb_job_state st;
        int got = 0, rec = 0;
        char *text = NULL;
        double a = kb_now_ms();
        kb_rc rc = kb_jobq_submit(sub, &j, &st, &err);
        double b = kb_now_ms();
        if (rc == KB_OK)
            rc = kb_jobq_claim(wrk, 0, 1000, &c, &got, &err);
        double d = kb_now_ms();
        if (rc == KB_OK && got)
            rc = kb_jobq_complete(wrk, &c, res, &rec, &err);
        double e = kb_now_ms();
        if (rc == KB_OK)
            rc = kb_jobq_status(sub, j.id, &st, &text, &err);
        double f = kb_now_ms();
        if (rc != KB_OK || !got || !rec || st != KB_JOB_DONE || !text ||
            strcmp(c.id, j.id) != 0) {
            fprintf(stderr, "bench_jobq: job %zu: %s (claimed %d, recorded %d, "
                    "state %s)\n", i, err.msg, got, rec, kb_job_state_name(st));
            return 1;
        }
        free(text);
        kb_job_release(&c);
        t[0][i] = b - a;
        t[1][i] = d - b;
        t[2][i] = e - d;
        t[3][i] = f - e;
        t[4][i] = f - a;
    }
    double loop = kb_now_ms() - t0;
    printf("%s, %zu jobs:\n", argv[1], n);
    report("submit", t[0], n);
    report("claim", t[1], n);
    report("complete", t[2], n);
    report("result", t[3], n);
    report("per job", t[4], n);
    printf("  %.0f jobs/s through one submitter and one worker handle\n",
           (double)n / (loop / 1000));
    kb_jobq_counts cnt;
    if (kb_jobq_count(sub, &cnt, &err) == KB_OK)
        printf("  queue: %ld pending, %ld leased, %ld done, %ld dead\n", cnt.pending,
               cnt.leased, cnt.done, cnt.dead);
    for (int k = 0; k < 5; k++)
        free(t[k]);
    kb_jobq_close(sub);
    kb_jobq_close(wrk);
    return 0;
}
