/*
 * task.h - the task model: kernel tasks (corpus/tasks/<name>/task.json +
 * reference.cu), size expressions, what a candidate's header comments ask
 * for, the refusal of candidate source, and a suite's fast_p scores.
 *
 * Plain C, no CUDA: kb (`kb verify`, the generator) and kb-verify both use
 * it; kb-verify uses nothing of kb but this and kb/kb.h's utilities
 * (DESIGN.md, Layout). Memory follows kb/kb.h's rule: kb_task_load's task
 * is freed with kb_task_free, a kb_cand_header's contents with
 * kb_cand_header_release.
 */
#ifndef KB_TASK_H
#define KB_TASK_H

#include "kb/kb.h"

#include <cjson/cJSON.h>

/* A kernel task (corpus/tasks/<name>/task.json + reference.cu), parsed in
 * plain C so that kb never links CUDA; kb-verify links this too. The
 * format is documented in README.md ("GPU verification"). */

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
/* Evaluates expr of a task's dims at shape s (see kb_expr_eval). */
kb_rc kb_task_eval(const kb_task *t, const kb_shape *s, const char *expr,
                   double *out, kb_err *err);

/* How deeply an expression may nest (parentheses, calls, signs): deeper is
 * a parse error, not a stack overflow. */
#define KB_EXPR_MAX_DEPTH 64

/* Evaluates an arithmetic expression: numbers, names (from names/values),
 * + - * / % and parentheses, and the functions ceil_div(a,b), min, max,
 * sqrt, floor, ceil. '/' of two integers divides as integers (C's rule); a
 * literal with a point or an exponent, and sqrt, make a value real. */
kb_rc kb_expr_eval(const char *expr, const char *const *names,
                   const double *values, size_t n, double *out, kb_err *err);

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
/* Frees n launches and the array l itself. */
void kb_launches_free(kb_launch *l, size_t n);

/* Returns 1 and appends the reason to why if candidate source must be
 * refused (%globaltimer, __managed__, device malloc/free/new, device-side
 * launches, host APIs, #include of other files), else 0. Comments are not
 * looked at, nor are string literals, except for %globaltimer, which lives
 * in asm strings: it is looked for in them, adjacent literals joined. When
 * the reason cannot be kept for want of memory, why is left empty: still
 * a refusal, and the caller says "out of memory". */
int kb_verify_refuse(const char *src, kb_buf *why);

/* The fast_p scores of a suite: for p in ps, the share of ntasks whose
 * best result is correct or faster with speedup > p. verdicts[i] and
 * speedups[i] give task i's best candidate ("" verdict: none). */
void kb_verify_fast_p(const char *const *verdicts, const double *speedups,
                      size_t ntasks, const double *ps, size_t np,
                      double *out);

/* Finds the task directory that arg names: arg itself when it holds a
 * task.json; else, for a name (no '/'), tasks/NAME beside the manifest
 * (when manifest is given: kb_config's, or the default one), then under
 * corpus/ (the working directory) and PREFIX/share/kb/ (beside an
 * installed PREFIX/bin). On success *dir is the caller's to free; else
 * KB_ERR_NOTFOUND with every place looked in, or KB_ERR_NOMEM. */
kb_rc kb_task_find(const char *arg, const char *manifest, char **dir, kb_err *err);

/* Appends kb-verify's result res (its JSON) as text to out: the task,
 * verdict and reason; NVRTC's log when the candidate did not compile (its
 * warnings when it did); each kernel's registers, shared and local memory
 * and spills; each timed shape; parity with a library baseline; the wall
 * time. KB_ERR_NOMEM past out's cap. */
kb_rc kb_verify_result_text(const cJSON *res, kb_buf *out) KB_MUST_CHECK;
/* The task's shapes as evidence records keep them:
 * [{"name","timed","dims":{DIM: n}}]; NULL out of memory. */
cJSON *kb_task_shapes_json(const kb_task *t);

#endif /* KB_TASK_H */
