/*
 * verify.h - verify/'s one header: the task model (task.c, task_expr.c,
 * task_candidate.c, task_result.c) and the verifier runner (verifier.c).
 * One section per file.
 *
 * The task model is plain C, no CUDA: kb (`kb verify`, the generator) and
 * kb-verify (verify/kb-verify/) both use it; kb-verify uses nothing of kb
 * but the task model and kb/'s utilities (docs/design.md, Layout). The
 * files call one way: task_candidate.c -> task.c -> task_expr.c;
 * task_result.c and verifier.c call none of them.
 */
#ifndef KB_VERIFY_H
#define KB_VERIFY_H

#include "kb/kb.h"

/* ------------------------------------------------------------------ task.c */
/* the task model: kernel tasks (corpus/tasks/<name>/task.json +
 * reference.cu) loaded, found by name, and their shapes as records; the
 * sections below hold the rest of the model (size expressions, candidate
 * source, reading results).
 *
 * Plain C, no CUDA: kb (`kb verify`, the generator) and kb-verify both use
 * it; kb-verify uses nothing of kb but the model and kb/kb.h's utilities
 * (docs/design.md, Layout). Memory follows kb/kb.h's rule: kb_task_load's task
 * is freed with kb_task_free, a kb_cand_header's contents with
 * kb_cand_header_release.
 */

#include <cjson/cJSON.h>

/* A kernel task (corpus/tasks/<name>/task.json + reference.cu), parsed in
 * plain C so that kb never links CUDA; kb-verify links this too. The
 * format is documented in docs/verify.md. */

typedef enum {
    KB_ROLE_INPUT = 0, KB_ROLE_OUTPUT, KB_ROLE_INOUT, KB_ROLE_SCRATCH,
    KB_ROLE_DIM, KB_ROLE_SCALAR
} kb_role;

typedef enum {
    KB_DT_F32 = 0, KB_DT_BF16, KB_DT_F16, KB_DT_I32, KB_DT_U32, KB_DT_F64
} kb_dtype;

const char *kb_dtype_name(kb_dtype t);
int kb_dtype_parse(const char *name, kb_dtype *out);   /* 0 ok, -1 no */
size_t kb_dtype_size(kb_dtype t);

#define KB_TASK_MAX_DIMS 8
#define KB_TASK_MAX_DISTS 4

typedef struct {
    char *name;
    kb_role role;
    kb_dtype dtype;
    char *size;        /* buffers: element count, an expression */
    char *value;       /* dim/scalar: the value, an expression */
    char *dists[KB_TASK_MAX_DISTS];   /* inputs: "normal", "uniform(-1,1)" */
    size_t ndists;
} kb_task_param;

/* One launch: kernel name, grid and block (up to 3 expressions each, NULL
 * where unused) and dynamic shared memory bytes (expression or NULL). */
typedef struct {
    char *kernel;
    char *grid[3];
    char *block[3];
    char *shared;
} kb_launch;

typedef struct {
    char *name;
    double dims[KB_TASK_MAX_DIMS];   /* in the order of kb_task.dims */
    int timed;
} kb_shape;

typedef struct {
    char *dir, *name, *description;
    int level;
    char *ops;                 /* comma-joined */
    kb_dtype dtype;
    char *kernel;              /* the default kernel name */
    char *dims[KB_TASK_MAX_DIMS];
    size_t ndims;
    kb_task_param *params;
    size_t nparams;
    kb_shape *shapes;
    size_t nshapes;
    char *atol, *rtol;         /* expressions over the dims */
    kb_launch *launches;       /* the default launch sequence */
    size_t nlaunches;
    char *baseline;            /* "reference", "cublas_sgemm", "cublas_bf16" */
    /* a library baseline's operands: the buffers it reads as A and B and
     * writes as C (row-major C = A B, dims m, n, k; default "A", "B",
     * "C"), and the task's launches (indices into launches) run after the
     * library call and timed with it: an epilogue of the reference's */
    char *blas_args[3];
    size_t *baseline_then;
    size_t nthen;
    char *cpu_ref;             /* CPU float64 implementation's name */
    char *roof_bytes, *roof_flops;  /* expressions */
    char *roof_unit;           /* "fp32", "fp32_tensor3", "bf16_tensor", "int" */
    double max_speedup;        /* over the baseline before "suspicious" */
} kb_task;

/* Loads dir/task.json. On success *out is freed with kb_task_free. */
kb_rc kb_task_load(const char *dir, kb_task **out, kb_err *err);
void kb_task_free(kb_task *t);
/* Frees n launches and the array l itself. */
void kb_launches_free(kb_launch *l, size_t n);

/* Finds the task directory that arg names: arg itself when it holds a
 * task.json; else, for a name (no '/'), tasks/NAME in the folders
 * kb_data_dirs lists for manifest (when given: kb_manifest_path's):
 * beside it, corpus/ of the working directory, corpus/ beside the
 * executable's folder, PREFIX/share/kb/ beside an installed PREFIX/bin. On success *dir is the caller's to free; else
 * KB_ERR_NOTFOUND with every place looked in, or KB_ERR_NOMEM. */
kb_rc kb_task_find(const char *arg, const char *manifest, char **dir, kb_err *err);

/* The task's shapes as evidence records keep them:
 * [{"name","timed","dims":{DIM: n}}]; NULL out of memory. */
cJSON *kb_task_shapes_json(const kb_task *t);

/* ------------------------------------------------------------- task_expr.c */
/* size expressions: the arithmetic of a task's sizes, launches and
 * tolerances. */

/* How deeply an expression may nest (parentheses, calls, signs): deeper is
 * a parse error, not a stack overflow. */
#define KB_EXPR_MAX_DEPTH 64

/* Evaluates an arithmetic expression: numbers, names (from names/values),
 * + - * / % and parentheses, and the functions ceil_div(a,b), min, max,
 * sqrt, floor, ceil. '/' of two integers divides as integers (C's rule); a
 * literal with a point or an exponent, and sqrt, make a value real. */
kb_rc kb_expr_eval(const char *expr, const char *const *names,
                   const double *values, size_t n, double *out, kb_err *err);

/* Evaluates expr of a task's dims at shape s (see kb_expr_eval). */
kb_rc kb_task_eval(const kb_task *t, const kb_shape *s, const char *expr,
                   double *out, kb_err *err);

/* -------------------------------------------------------- task_candidate.c */
/* candidate source: what its header comments ask for, and its refusal. */

/* A TMA tensor map that kb-verify makes on the host for a candidate, over
 * one of the task's buffers seen as a packed array (Hopper's bulk tensor
 * copies take a map that only the host can encode):
 *   // kb-tensormap: buffer=A dims=K,M box=64,128 swizzle=128
 * dims and box innermost first (expressions, no spaces); swizzle in bytes
 * (0, 32, 64, 128); out-of-bounds elements read as zero. */
#define KB_TMAP_MAX_RANK 5
typedef struct {
    char *buffer;
    char *dims[KB_TMAP_MAX_RANK];
    char *box[KB_TMAP_MAX_RANK];
    int rank;
    int swizzle;
    int swizzle_set;   /* parsing: swizzle= was given */
} kb_tensormap;

/* What a candidate's header comments ask for:
 *   // kb-launch: kernel=NAME grid=E[,E[,E]] block=E[,E[,E]] shared=E
 * (one line per launch, run in order; expressions hold no spaces),
 *   // kb-tensormap: ... (above; passed after the task's parameters, in
 *   order, each a 128-byte `const __grid_constant__ CUtensorMap`),
 *   // kb-verify: arch=sm_90a */
typedef struct {
    kb_launch *launches;       /* none: the task's launch */
    size_t nlaunches;
    kb_tensormap *maps;
    size_t nmaps;
    char *arch;                /* NULL: the device's own */
} kb_cand_header;

/* Parses the header comments of candidate source src into *out. On
 * success the caller releases *out with kb_cand_header_release; on failure
 * *out is left empty (nothing to release). */
kb_rc kb_cand_header_parse(const char *src, kb_cand_header *out, kb_err *err);
void kb_cand_header_release(kb_cand_header *h);

/* Returns 1 and appends the reason to why if candidate source must be
 * refused (%globaltimer, __managed__, device malloc/free/new, device-side
 * launches, host APIs, #include of other files), else 0. Comments are not
 * looked at, nor are string literals, except for %globaltimer, which lives
 * in asm strings: it is looked for in them, adjacent literals joined. When
 * the reason cannot be kept for want of memory, why is left empty: still
 * a refusal, and the caller says "out of memory". */
int kb_verify_refuse(const char *src, kb_buf *why);

/* ----------------------------------------------------------- task_result.c */
/* reading kb-verify's results: as text, and a suite's fast_p. */

/* Appends kb-verify's result res (its JSON) as text to out: the task,
 * verdict and reason; NVRTC's log when the candidate did not compile (its
 * warnings when it did); each kernel's registers, shared and local memory
 * and spills; each timed shape; parity with a library baseline; the wall
 * time. KB_ERR_NOMEM past out's cap. */
kb_rc kb_verify_result_text(const cJSON *res, kb_buf *out) KB_MUST_CHECK;

/* The fast_p scores of a suite: for p in ps, the share of ntasks whose
 * best result is correct or faster with speedup > p. verdicts[i] and
 * speedups[i] give task i's best candidate ("" verdict: none). */
void kb_verify_fast_p(const char *const *verdicts, const double *speedups,
                      size_t ntasks, const double *ps, size_t np,
                      double *out);

/* -------------------------------------------------------------- verifier.c */
/* the GPU verifier as a library. kb-verify is a separate
 * executable (kb never links CUDA, and a kernel that faults or hangs
 * cannot take kb down): a kb_verifier runs it as a child process under a
 * wall-clock limit, one process per candidate or one `kb-verify --serve`
 * for many (restarted after a sticky CUDA error), and parses its one JSON
 * result line, once, into a kb_verify_result. A candidate that gets no
 * result (kb-verify missing, killed at the deadline, crashed, silent) gets
 * one made here, with the verdict that says so. `kb verify`, the generator
 * and the MCP verify tool all go through this.
 *
 * Library code: nothing here prints to stdout or exits. A verifier is used
 * by one thread at a time; while it writes to a --serve child it ignores
 * SIGPIPE (process-wide) for the length of the write.
 */


#include <cjson/cJSON.h>

/* ------------------------------------------------------------------ results */

/* kb-verify's verdicts (docs/verify.md). */
typedef enum {
    KB_VERIFY_ERROR = 0,       /* no verdict on the candidate: the task, the
                                  GPU or kb-verify itself failed */
    KB_VERIFY_COMPILED,        /* --compile-only: NVRTC compiled it */
    KB_VERIFY_CORRECT,
    KB_VERIFY_FASTER,
    KB_VERIFY_INCORRECT,
    KB_VERIFY_SUSPICIOUS,      /* correct, but faster than can be true */
    KB_VERIFY_COMPILE_ERROR,
    KB_VERIFY_REFUSED,         /* the source does what a candidate may not */
    KB_VERIFY_TIMEOUT,
    KB_VERIFY_CRASH,
    KB_VERIFY_UNKNOWN          /* a verdict this kb does not know */
} kb_verify_verdict;

/* "faster", "compile_error", ...; "unknown" for KB_VERIFY_UNKNOWN. */
const char *kb_verify_verdict_name(kb_verify_verdict v);
/* The verdict called name, or KB_VERIFY_UNKNOWN. */
kb_verify_verdict kb_verify_verdict_parse(const char *name);
/* 1 for correct and faster: the verdicts a kernel is kept for. */
int kb_verify_verdict_ok(kb_verify_verdict v);

/* A median with its 95% interval and the minimum, in ms. */
typedef struct {
    double median, ci95_lo, ci95_hi, min;
} kb_verify_stats;

/* One timed shape. */
typedef struct {
    char *shape;
    char *baseline;            /* "reference", "cublas_sgemm", ... */
    int runs;                  /* timed runs per side */
    kb_verify_stats candidate_ms, baseline_ms;
    double speedup;            /* baseline median / candidate median */
    double floor_ms;           /* the roofline floor */
} kb_verify_timing;

/* One kernel of the candidate: ptxas's report and the driver's. */
typedef struct {
    char *name;
    int registers;
    long shared_static_bytes, local_bytes, stack_bytes;
    long spill_store_bytes, spill_load_bytes;
} kb_verify_kernel;

/* The candidate's compile ("compile" in the JSON). */
typedef struct {
    int present;               /* the result has one */
    int ok, cached;
    double ms;
    char *arch;                /* "sm_90", "sm_90a" */
    char *log;                 /* NVRTC's log */
    kb_verify_kernel *kernels;
    size_t nkernels;
} kb_verify_compile;

/* One candidate's result. Every string is owned and never NULL ("" when
 * the JSON lacks it); json is the whole result as kb-verify wrote it (or
 * as the runner made it), for printing with --json. Released with
 * kb_verify_result_release. */
typedef struct {
    char *task;                /* the task's name */
    char *candidate;           /* the candidate's path */
    kb_verify_verdict verdict;
    char *verdict_name;        /* as written, also for KB_VERIFY_UNKNOWN */
    char *reason;
    int has_speedup;           /* speedup_geomean is there: it was timed */
    double speedup_geomean;
    int has_library;           /* timed against a library (cuBLAS): */
    int matches_library;       /* within 3% of it either way */
    double library_ratio;      /* the library's time over the candidate's */
    int has_wall;
    double wall_ms;            /* kb-verify's own time for it */
    int sticky_error;          /* it left kb-verify's CUDA context unusable */
    int synthesised;           /* made by the runner: kb-verify gave none */
    kb_verify_timing *timings;
    size_t ntimings;
    kb_verify_compile compile;
    cJSON *json;
} kb_verify_result;

void kb_verify_result_init(kb_verify_result *r);
/* Frees what r holds (json too) and leaves it as after _init. */
void kb_verify_result_release(kb_verify_result *r);
/* Parses one result line of kb-verify (--json, --serve, or saved as
 * JSON lines) into out, which is released first. A line that is not a
 * JSON object with a "verdict" string is KB_ERR_PARSE (out left empty). */
kb_rc kb_verify_result_parse(const char *line, kb_verify_result *out,
                             kb_err *err);

/* ------------------------------------------------------------------ the runner */

typedef struct kb_verifier kb_verifier;

typedef struct {
    const char *kb_verify;     /* the executable (KB_VERIFY: kb_config's
                                  verify); NULL: kb-verify beside the
                                  running program, else on the PATH */
    double timeout_s;          /* wall-clock limit per candidate, the
                                  child's start included (<= 0: 120) */
    int serve;                 /* one kb-verify --serve for every run */
    int no_timing;             /* correctness only */
    int compile_only;          /* NVRTC only, no GPU (with serve: asked
                                  per request) */
    int spread;                /* > 0: the baseline timed again in that
                                  many processes of its own (--spread), its
                                  spread across processes in the result */
    const char *gpu;           /* CUDA_VISIBLE_DEVICES for the child (an
                                  ordinal or a UUID); NULL: inherited */
    const char *queue;         /* KB_QUEUE: where kb_jobq_verify sends the
                                  candidate (jobq.c); NULL, "" or "inproc":
                                  run here */
} kb_verifier_opts;

void kb_verifier_opts_init(kb_verifier_opts *o);
/* A runner for opts (copied). Nothing starts yet: a --serve child starts
 * with the first run. *out is freed with kb_verifier_free. */
kb_rc kb_verifier_open(const kb_verifier_opts *opts, kb_verifier **out,
                       kb_err *err);
/* The kb-verify it runs. */
const char *kb_verifier_path(const kb_verifier *v);
/* Verifies candidate_path against the task in task_dir. Returns KB_OK
 * whenever *out holds a result: kb-verify's, or one made here when it
 * gave none (verdict timeout: killed at the deadline; crash: it died, or
 * the --serve child ended; error: it could not run or said nothing), with
 * synthesised set and a reason that says what happened. Fails only for
 * bad arguments or no memory, *out then empty. *out is released first;
 * the caller releases it with kb_verify_result_release. */
kb_rc kb_verifier_run(kb_verifier *v, const char *task_dir,
                      const char *candidate_path, kb_verify_result *out,
                      kb_err *err);
/* The device profile: `kb-verify --device-info --json` run once (its
 * stderr dropped), within v's time limit, its object in *out (the
 * caller's, cJSON_Delete). KB_ERR_NOTFOUND when kb-verify cannot be run,
 * KB_ERR_GPU when it has no GPU (exit 4) or says nothing usable; *out
 * NULL then. */
kb_rc kb_verifier_device_info(kb_verifier *v, cJSON **out, kb_err *err);
/* The options v was opened with (its strings v's own). */
const kb_verifier_opts *kb_verifier_opts_get(const kb_verifier *v);
/* The mode and time limit of the runs that follow (a worker's jobs each
 * have their own; timeout_s <= 0 keeps v's). */
void kb_verifier_set_run(kb_verifier *v, int compile_only, int no_timing,
                         double timeout_s);
/* The spread of the runs that follow (kb_verifier_opts.spread). */
void kb_verifier_set_spread(kb_verifier *v, int spread);
/* The queue URL v was opened with (opts.queue), NULL when none (or
 * "inproc"). */
const char *kb_verifier_queue(const kb_verifier *v);
/* A slot for what a room above keeps with v (jobq.c's open queue): the
 * pointer set before, NULL at first; free_fn (may be NULL) is called on p
 * by kb_verifier_free (SQLite's sqlite3_set_clientdata). */
void *kb_verifier_slot(const kb_verifier *v);
void kb_verifier_set_slot(kb_verifier *v, void *p, void (*free_fn)(void *));
/* Ends a --serve child (its input closed; killed if it lingers) and
 * frees v. v may be NULL. */
void kb_verifier_free(kb_verifier *v);

/* ------------------------------------------------------------------ jobq.c */
/* kb_jobq: the one queue every path that verifies goes through (`kb
 * verify`, the generator's samples, `kb skill verify`, the verify tool).
 * Three backends, chosen by a URL (KB_QUEUE, docs/verify.md "The queue"):
 *   ""/NULL, "inproc"          in process: the caller's kb_verifier runs
 *                              the candidate itself (as before the queue)
 *   sqlite:PATH                a SQLite table for one machine (jobq_sqlite.c)
 *   redis://HOST[:PORT][/KEY]  Redis Streams for a team (jobq_redis.c)
 * A job is a task, the candidate's source and its options; its id is the
 * SHA-256 of those (the candidate's hash), so a second submission of the
 * same candidate is the same job and gets the same result. A worker claims
 * a job with a lease, extends it while the job runs, and completes it
 * (the first result recorded is the only one) or fails it; a job whose
 * lease expires is claimed again; one delivered max_deliveries times
 * without a result goes to the dead letter with its reason.
 *
 * A kb_jobq handle is used by one thread at a time (open one per thread).
 * Memory: kb_job's strings are owned (kb_job_release); strings returned
 * through char ** are the caller's to free. */

typedef struct kb_jobq kb_jobq;

typedef enum {
    KB_JOB_NONE = 0,           /* no such job */
    KB_JOB_PENDING,            /* waiting for a worker */
    KB_JOB_LEASED,             /* a worker holds it */
    KB_JOB_DONE,               /* its result is recorded */
    KB_JOB_DEAD                /* in the dead letter, with its reason */
} kb_job_state;

const char *kb_job_state_name(kb_job_state s);

/* One job, as submitted and as claimed. */
typedef struct {
    char id[65];               /* the candidate's hash (kb_job_make) */
    char *task;                /* the task's name */
    char *task_dir;            /* where the submitter found it */
    char *candidate;           /* the submitter's path: names the result */
    char *source;              /* the candidate's text */
    int compile_only, no_timing;
    int spread;                /* the verifier's spread (--spread) */
    double timeout_s;          /* the submitter's limit (0: the worker's) */
    /* set by a claim */
    int deliveries;            /* claims of it so far, this one included */
    char *lease;               /* the backend's handle on the claim */
} kb_job;

/* Makes the job for candidate_path against the task in task_dir (its
 * source read, its id computed). *j is released first; on success the
 * caller releases it. */
kb_rc kb_job_make(kb_job *j, const char *task_dir, const char *candidate_path,
                  int compile_only, int no_timing, double timeout_s, kb_err *err);
void kb_job_release(kb_job *j);
/* j's id computed again after its fields were changed (spread). */
kb_rc kb_job_rehash(kb_job *j, kb_err *err);

typedef struct {
    double lease_s;            /* a claim's lease (<= 0: 60) */
    int max_deliveries;        /* then the dead letter (<= 0: 3) */
    const char *consumer;      /* the worker's name (NULL: host:pid) */
} kb_jobq_opts;

void kb_jobq_opts_init(kb_jobq_opts *o);
/* Opens the queue url names (above); o may be NULL (defaults). *out is
 * freed with kb_jobq_close. KB_ERR_USAGE for a URL of no known kind,
 * KB_ERR_DB / KB_ERR_NET when the store cannot be reached. */
kb_rc kb_jobq_open(const char *url, const kb_jobq_opts *o, kb_jobq **out,
                   kb_err *err);
void kb_jobq_close(kb_jobq *q);
/* 1 for a queue that workers serve (sqlite, redis), 0 in process. */
int kb_jobq_remote(const kb_jobq *q);
/* Its URL as given ("inproc" in process). */
const char *kb_jobq_url(const kb_jobq *q);

/* Submits j. *state is the job's state after it: KB_JOB_PENDING for a new
 * job, else the state of the job already there (a duplicate: its result,
 * when done, is the answer). */
kb_rc kb_jobq_submit(kb_jobq *q, const kb_job *j, kb_job_state *state,
                     kb_err *err);
/* Claims one job into *j (released first) with a lease of o.lease_s: one
 * whose lease expired first, else the oldest pending. gpu: this worker
 * runs kernels (it takes GPU jobs, then compile-only ones), else it takes
 * compile-only jobs alone. Waits up to wait_ms for one; *got 0 when none
 * came. A job delivered max_deliveries times goes to the dead letter here
 * instead ("its lease expired N times"). */
kb_rc kb_jobq_claim(kb_jobq *q, int gpu, int wait_ms, kb_job *j, int *got,
                    kb_err *err);
/* Extends the lease of j, held by this consumer, by o.lease_s. This and
 * kb_jobq_fail act for j's claim alone: once its lease expired and the job
 * was claimed again (its deliveries one more), they change nothing. */
kb_rc kb_jobq_extend(kb_jobq *q, const kb_job *j, kb_err *err);
/* Records result (JSON text) for j and acknowledges the claim. *recorded
 * (may be NULL) is 1 when this was the job's first result, 0 when one was
 * there (the job ran twice: the first stands). */
kb_rc kb_jobq_complete(kb_jobq *q, const kb_job *j, const char *result,
                       int *recorded, kb_err *err);
/* j ran without a result (kb-verify crashed, hung, could not start):
 * back to the queue for another try, or, once delivered max_deliveries
 * times, to the dead letter with reason. *dead (may be NULL) is 1 when it
 * went there. */
kb_rc kb_jobq_fail(kb_jobq *q, const kb_job *j, const char *reason, int *dead,
                   kb_err *err);
/* Returns jobs whose lease expired to the queue (those past
 * max_deliveries to the dead letter); *n how many (may be NULL). Redis
 * reclaims in kb_jobq_claim (XAUTOCLAIM) and counts them here. */
kb_rc kb_jobq_reclaim(kb_jobq *q, long *n, kb_err *err);
/* The state of job id; with it, in *text (may be NULL; the caller frees,
 * NULL when there is none) its result when done, its reason when dead. */
kb_rc kb_jobq_status(kb_jobq *q, const char *id, kb_job_state *state,
                     char **text, kb_err *err);

typedef struct {
    long pending, leased, done, dead;
} kb_jobq_counts;

kb_rc kb_jobq_count(kb_jobq *q, kb_jobq_counts *c, kb_err *err);
/* The dead letter: [{"id","task","candidate","deliveries","reason"}] in
 * *out (the caller's, cJSON_Delete). */
kb_rc kb_jobq_dead(kb_jobq *q, cJSON **out, kb_err *err);

/* kb_jobq_status, asked again until job id is done or dead (or unknown),
 * for up to timeout_s (0: once); *state and *text as kb_jobq_status's
 * last answer. */
kb_rc kb_jobq_status_wait(kb_jobq *q, const char *id, double timeout_s,
                          kb_job_state *state, char **text, kb_err *err);
/* Waits up to timeout_s (<= 0: an hour) for job id's result and parses
 * it into out: kb-verify's result, or for a dead job one made here
 * (verdict "error", the dead letter's reason). KB_ERR_NOTFOUND for no
 * such job. */
kb_rc kb_jobq_wait(kb_jobq *q, const char *id, double timeout_s,
                   kb_verify_result *out, kb_err *err);

/* What every path that verifies calls instead of kb_verifier_run: with no
 * queue (kb_verifier_queue(v) unset) it is kb_verifier_run; with one, the
 * candidate is submitted (its duplicate's result reused) and its result
 * waited for. The queue is opened once per verifier and kept in its slot. */
kb_rc kb_jobq_verify(kb_verifier *v, const char *task_dir,
                     const char *candidate_path, kb_verify_result *out,
                     kb_err *err);
/* Submits without waiting: *id (65 bytes) gets the job's id, *state its
 * state (a duplicate may be done already). In process (no queue) this is
 * KB_ERR_USAGE. */
kb_rc kb_jobq_verify_submit(kb_verifier *v, const char *task_dir,
                            const char *candidate_path, char id[65],
                            kb_job_state *state, kb_err *err);
/* kb_jobq_wait on v's queue. */
kb_rc kb_jobq_verify_wait(kb_verifier *v, const char *id, kb_verify_result *out,
                          kb_err *err);

/* ---------------------------------------------------------------- worker.c */
/* `kb verify worker`: claims jobs from a queue and runs them through one
 * kb-verify --serve child per slot: `slots` slots on each GPU of gpus
 * (each child sees its GPU alone through CUDA_VISIBLE_DEVICES), plus
 * compile_threads slots that take compile-only jobs (NVRTC, no GPU) so a
 * GPU slot never waits on them. A heartbeat extends the leases of the
 * jobs in flight. A result names where it was measured (the "queue"
 * object: job id, host, worker, GPU UUID and name, driver and CUDA
 * versions, deliveries). A job that gets no result from kb-verify (it
 * crashed, hung past its time limit) is failed: retried, then dead. */

typedef struct {
    const char *queue;         /* the URL (required, not in process) */
    kb_jobq_opts q;
    const char *kb_verify;     /* the executable (NULL: as the verifier) */
    char **gpus;               /* CUDA_VISIBLE_DEVICES values, one a GPU */
    size_t ngpus;
    int slots;                 /* per GPU (<= 0: 1) */
    int compile_threads;       /* compile-only slots */
    double timeout_s;          /* per job when the job sets none (120) */
    int drain;                 /* exit once the queue is empty */
    long max_jobs;             /* exit after this many (0: no limit) */
    volatile int *stop;        /* set (by a signal): finish and exit */
    /* each job's end: "done"/"dead"/"retry", the job, the verdict or
     * reason; called under a lock, from the slots' threads */
    void (*log)(void *arg, const char *what, const kb_job *j, const char *text);
    void *log_arg;
} kb_worker_opts;

typedef struct {
    long claimed, completed, duplicates, failed, dead;
} kb_worker_stats;

void kb_worker_opts_init(kb_worker_opts *o);
/* Runs the worker until drained, max_jobs, or *stop. */
kb_rc kb_worker_run(const kb_worker_opts *o, kb_worker_stats *st, kb_err *err);

#endif /* KB_VERIFY_H */
