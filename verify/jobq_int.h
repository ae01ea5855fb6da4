/*
 * jobq_int.h - the queue's internal header: what jobq.c (the interface)
 * asks of a backend (jobq_sqlite.c, jobq_redis.c), and the job helpers
 * they share (jobq_job.c). Nothing outside verify/ includes it. One
 * section per file. The files call one way: jobq.c -> jobq_sqlite.c,
 * jobq_redis.c -> jobq_job.c; worker.c -> jobq.c, jobq_job.c.
 */
#ifndef KB_JOBQ_INT_H
#define KB_JOBQ_INT_H

#include "verify/verify.h"

/* ------------------------------------------------------------ the backends */

/* A backend's operations; each takes the backend's own state. They follow
 * the kb_jobq_* contracts of verify.h; opts are resolved (no zeros). */
typedef struct {
    const char *name;
    kb_rc (*submit)(void *b, const kb_job *j, kb_job_state *state, kb_err *err);
    kb_rc (*claim)(void *b, int gpu, int wait_ms, kb_job *j, int *got, kb_err *err);
    kb_rc (*extend)(void *b, const kb_job *j, kb_err *err);
    kb_rc (*complete)(void *b, const kb_job *j, const char *result, int *recorded,
                      kb_err *err);
    kb_rc (*fail)(void *b, const kb_job *j, const char *reason, int *dead,
                  kb_err *err);
    kb_rc (*reclaim)(void *b, long *n, kb_err *err);
    kb_rc (*status)(void *b, const char *id, kb_job_state *state, char **text,
                    kb_err *err);
    kb_rc (*count)(void *b, kb_jobq_counts *c, kb_err *err);
    kb_rc (*dead)(void *b, cJSON **out, kb_err *err);
    void (*close)(void *b);
} jobq_backend;

/* Opens the backend for what follows "sqlite:" (a path) into *state. */
kb_rc jobq_sqlite_open(const char *path, const kb_jobq_opts *o, void **state,
                       const jobq_backend **ops, kb_err *err);
/* Opens the backend for a redis:// URL into *state. */
kb_rc jobq_redis_open(const char *url, const kb_jobq_opts *o, void **state,
                      const jobq_backend **ops, kb_err *err);

/* ---------------------------------------------------------------- jobq_job.c */

/* The job's spec as one JSON text (what a queue stores; no claim fields):
 * {"id","task","task_dir","candidate","source","compile_only",
 * "no_timing","timeout_s"}. Caller frees; NULL out of memory. */
char *jobq_job_encode(const kb_job *j);
/* Parses a spec into *j (released first); KB_ERR_PARSE if it is none. */
kb_rc jobq_job_decode(const char *spec, kb_job *j, kb_err *err);
/* "gpu" or "compile": the workers that may take j. */
const char *jobq_job_kind(const kb_job *j);
/* This host's name into buf ("unknown" when it has none). */
void jobq_host(char *buf, size_t n);
/* The defaults filled into a copy of o (o may be NULL); consumer points
 * into name (64 bytes, "host:pid") when o gives none. */
void jobq_opts_resolve(const kb_jobq_opts *o, kb_jobq_opts *out, char name[64]);
/* A reason for the dead letter when a job's lease expired n times. */
void jobq_expired_reason(int n, char *buf, size_t len);

#endif /* KB_JOBQ_INT_H */
