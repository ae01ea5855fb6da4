/*
 * verifier.h - the GPU verifier as a library. kb-verify is a separate
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
#ifndef KB_VERIFIER_H
#define KB_VERIFIER_H

#include "kb/kb.h"

#include <cjson/cJSON.h>

/* ------------------------------------------------------------------ results */

/* kb-verify's verdicts (README.md, "GPU verification"). */
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
/* Ends a --serve child (its input closed; killed if it lingers) and
 * frees v. v may be NULL. */
void kb_verifier_free(kb_verifier *v);

#endif /* KB_VERIFIER_H */
