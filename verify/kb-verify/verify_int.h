/* verify_int.h - what kb-verify's files share (not part of libkb), one
 * section per file, in the order a verification runs. kb-verify uses the
 * task model (verify/verify.h) and kb/kb.h's utilities, nothing else of
 * kb. The device is a kbv_gpu that main.c owns and hands down, inside the
 * verification context (kbv_ctx) where a step works on one candidate.
 *
 * The files call one way (no circle): main.c -> verify.c, reference.c
 * (the runs) -> timing.c, check.c, tensormap.c, baselines.c, launch.c,
 * buffers.c, inputs.c, cpuref.c (the steps) -> gpu.c (the device) ->
 * ctx.c (the ground: the driver's pointers, CUDA error names, the
 * context, reasons and verdicts) -> compile.c (NVRTC, which calls none). */
#ifndef KB_VERIFY_INT_H
#define KB_VERIFY_INT_H

#include "verify/verify.h"
#include "verify/kb-verify/cudrv.h"

#include <cjson/cJSON.h>
#include <stdint.h>

/* ------------------------------------------------------------------ the protocol */

#define KBV_GUARD 4096            /* guard bytes before and after each buffer */
#define KBV_GUARD_BYTE 0xA7
#define KBV_NSEEDS 3
#define KBV_NWARM 2
#define KBV_FASTER_MARGIN 1.03    /* geomean speedup needed for "faster" */
#define KBV_LIBRARY_PARITY 0.03   /* a library baseline matched within 3% */
#define KBV_FLOOR_SLACK 0.7       /* faster than 0.7 x roofline: suspicious */
#define KBV_REVIEW_OVER_BEST 1.25 /* above 1.25 x the best skill: review */

/* What a candidate's outputs hold before it runs: NaN, a finite sentinel,
 * or primed with a valid result of other inputs (the reference's output of
 * the trial before), so that a kernel which skips work when its output
 * "looks done" keeps a stale result and fails. */
enum { KBV_POISON_NAN = 0, KBV_POISON_SENTINEL = 1, KBV_POISON_PRIMED = 2 };
#define KBV_PRIMED_TRIAL 2        /* the trial of a shape that is primed */
#define KBV_PERTURB_ELEMS 16      /* elements changed per input, at first */
#define KBV_RUN_CHANGES 1024      /* elements changed per input before a timed run */
#define KBV_NSETS 3               /* input sets the timed runs rotate over */
#define KBV_SENS_RUNS 3           /* jittered reference runs on a mismatch */
#define KBV_SENS_ULPS 4.0         /* how far each input is jittered */
#define KBV_SENS_K 8.0            /* tolerance grown by k x the sensitivity */

/* ------------------------------------------------------------------ main.c */

/* The command line's options. */
typedef struct {
    int json;
    const char *arch;          /* NULL: the device's */
    uint64_t seed;
    int seed_set;
    int runs_max;
    double timeout_ms;         /* per launch sequence */
    int no_timing;
    const char *cache_dir;
    double best_speedup;       /* the best verified skill's, for review */
    int spread;                /* baseline-only processes for the spread */
    const char *shapes;        /* NULL, or the shapes to run: "odd,tiny" */
    int repeat;                /* --reference: checks in one process */
} kbv_opts;

/* 1 if o lets shape name run (--shapes lists it, or there is no list). */
int kbv_shape_wanted(const kbv_opts *o, const char *name);

/* ------------------------------------------------------------------ gpu.c */

typedef struct kbv_blas kbv_blas;   /* baselines.c */

/* The device, opened once per process. sticky is set when a candidate left
 * the context unusable (a sticky CUDA error, or a kernel that still runs
 * past its deadline): the process then reports and exits. dres is a small
 * result area: checksums at 0, a comparison at 1024, a guard count at 2048. */
typedef struct {
    int ok;
    int sticky;
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    CUmodule harness;
    CUfunction k_fill, k_perturb, k_checksum, k_guard, k_compare, k_jitter, k_sens;
    char name[256];
    int cc_major, cc_minor, sms;
    int l2_bytes;
    double peak_bw;            /* bytes/s, from clocks and bus width */
    double fp32_rate, bf16_rate, int_rate;   /* FLOP/s, from the SM clock */
    CUdeviceptr flush;         /* written between timed runs: twice the L2 */
    size_t flush_bytes;
    CUdeviceptr dres;
    kbv_blas *blas;            /* the library baselines, loaded on demand */
} kbv_gpu;

#define KBV_DRES_COMPARE 1024
#define KBV_DRES_GUARDS 2048

/* Opens the device (a no-op once g->ok): the driver, a context and stream,
 * the harness, the flush and result buffers. Returns 0, or -1 with why. */
int kbv_gpu_open(kbv_gpu *g, kb_buf *why);
/* Waits for g's stream; gives up after ms with *timed_out set (the kernel
 * is left running: the caller reports a timeout and the process exits). */
CUresult kbv_gpu_sync(kbv_gpu *g, double ms, int *timed_out);
/* Launches a harness kernel over n elements (grid-stride, 256 threads). */
CUresult kbv_gpu_launch1(kbv_gpu *g, CUfunction f, unsigned long long n,
                         void **args);
/* The device as JSON (name, compute capability, SMs; with full, every
 * attribute and a measured copy bandwidth). Caller frees. */
cJSON *kbv_device_json(kbv_gpu *g, int full);
/* The NVRTC target: --arch, else asked (the candidate's), else the open
 * device's, else sm_90. */
void kbv_default_arch(const kbv_gpu *g, const kbv_opts *o, const char *asked,
                      char *arch, size_t n);

/* ------------------------------------------------------------------ compile.c */

typedef struct {
    int ok;
    double ms;
    char *log;
    void *cubin;
    size_t cubin_len;
    int cached;
} kbv_compiled;

/* Compiles src for arch into out (released by kbv_compiled_release); with
 * use_cache, looks the cubin up (and stores it) by the SHA-256 of source,
 * arch and options under --cache, $KB_VERIFY_CACHE or the user's cache. */
void kbv_compile(const kbv_opts *o, const char *src, const char *name,
                 const char *arch, int use_cache, kbv_compiled *out);
void kbv_compiled_release(kbv_compiled *c);
/* The kernels (entry functions) a cubin defines, from its ELF symbol
 * table, as a JSON array of names; NULL if it is no ELF image this can
 * read. Caller frees. */
cJSON *kbv_cubin_kernels(const kbv_compiled *c);
/* The module-scope device variables (__device__, in .nv.global*) a cubin
 * defines, as a JSON array of names; NULL if it is no ELF image this can
 * read. Caller frees. */
cJSON *kbv_cubin_globals(const kbv_compiled *c);
/* The result's "compile" object: ok, arch, time, log and ptxas's report
 * per kernel. Caller frees. */
cJSON *kbv_compile_json(const kbv_compiled *c, const char *arch);

/* ------------------------------------------------------------------ ctx.c */

/* The CUDA driver's name of r ("CUDA_ERROR_ILLEGAL_ADDRESS"). */
const char *kbv_cu_name(CUresult r);
/* 1 for an error that leaves the context unusable. */
int kbv_cu_sticky(CUresult r);

/* A launch resolved for one shape. */
typedef struct {
    CUfunction f;
    unsigned g[3], b[3], shm;
} kbv_rlaunch;

/* A device buffer between two guards of KBV_GUARD bytes. */
typedef struct {
    CUdeviceptr base;
    CUdeviceptr ptr;
    size_t bytes, alloc;
} kbv_dbuf;

/* A parameter's state on one shape. */
typedef struct {
    double val;                /* dim/scalar value, or element count */
    size_t elems, bytes;
    kbv_dbuf in;               /* inputs (shared by both sides) */
    kbv_dbuf cand, ref, gold, chk;   /* outputs/inout/scratch per side */
    kbv_dbuf prev;             /* results: the reference's of the trial before */
    kbv_dbuf sref, scand, sens;   /* results, on a mismatch: both sides'
                                     kept, and the reference's sensitivity */
    kbv_dbuf rot[KBV_NSETS - 1];  /* timed inputs: the other input sets */
    union { int i; float f; double d; unsigned u; } scalar;
    CUdeviceptr cand_arg, ref_arg;   /* what each side's kernels get */
} kbv_param;

/* One verification (or one --reference check) of one task. */
typedef struct {
    kbv_gpu *gpu;
    const kbv_opts *o;
    kb_task *task;
    kb_buf src, rsrc;          /* the candidate's and the reference's source */
    const char *cand_name;     /* the candidate's file, as NVRTC names it */
    kb_cand_header hdr;        /* the candidate's launches, maps, arch */
    const kb_launch *cseq;     /* the candidate's launch sequence */
    size_t ncseq;
    CUtensorMap *maps;         /* hdr.maps encoded for the current shape */
    kbv_compiled cc, rc;
    CUmodule cmod, rmod;
    kbv_rlaunch *cl, *rl;      /* both sequences resolved for the shape */
    cJSON *res, *checks, *timings, *tensormaps;
    const char *verdict;
    kb_buf reason;
    kbv_param *ps;
    uint64_t seed_base;
    double speed_log_sum;
    double speed_lo_log, speed_hi_log;   /* the runs' ratios' intervals */
    int nspeed;
} kbv_ctx;

/* Starts a context: the result object holds "kb_verify": 1 (when
 * versioned) and "task" (task_dir, until the task is loaded). */
void kbv_ctx_init(kbv_ctx *v, kbv_gpu *gpu, const kbv_opts *o,
                  const char *task_dir, int versioned);
/* Frees what v holds but its result (v->res stays the caller's). */
void kbv_ctx_release(kbv_ctx *v);
/* A reason (why a step failed, or a verdict's) kept in a kb_buf: kbv_why
 * appends to why, printf-style; out of memory it empties why rather than
 * leave part of a reason there. Every failure gives a reason, so
 * kbv_why_text reads an empty one as "out of memory": an error line or a
 * verdict never carries a cut or missing reason. */
void kbv_why(kb_buf *why, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void kbv_vwhy(kb_buf *why, const char *fmt, va_list ap);
const char *kbv_why_text(const kb_buf *why);
/* The first verdict set wins; later calls do nothing. Its reason goes
 * into v->reason through kbv_vwhy. */
void kbv_set_verdict(kbv_ctx *v, const char *verdict, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A CUDA failure while the candidate (or anything after it) ran: "crash",
 * and the device marked sticky when r is. */
void kbv_cuda_failed(kbv_ctx *v, CUresult r, const char *what);
/* Loads the task in the directory arg (or, for a name that is none here,
 * the one kb_task_find finds) into v->task and its reference.cu into
 * v->rsrc, and names the result's "task" by the task's name; every name
 * in --shapes must be one of its shapes. Returns 0, or -1 with the
 * "error" verdict set. */
int kbv_load_task(kbv_ctx *v, const char *arg);
/* A tolerance expression's value on shape s (0 if it does not evaluate). */
double kbv_shape_tol(const kbv_ctx *v, const kb_shape *s, const char *e);

/* ------------------------------------------------------------------ verify.c */

/* Verifies one candidate (a path, or inline source when src_inline is
 * given, or with neither the reference itself) against task_dir; with
 * compile_only nothing runs on a GPU. Returns the result (caller frees). */
cJSON *kbv_verify(kbv_gpu *gpu, const kbv_opts *o, const char *task_dir,
                  const char *cand_path, const char *src_inline,
                  int compile_only);
/* ------------------------------------------------------------------ launch.c */

/* Resolves a launch sequence of mod for shape s into out (grid, block and
 * shared memory evaluated); cand says whose it is, for the verdict.
 * Returns 0, or -1 with the verdict set. */
int kbv_resolve(kbv_ctx *v, const kb_shape *s, CUmodule mod,
                const kb_launch *l, size_t nl, kbv_rlaunch *out, int cand);
/* Queues one side's resolved sequence (v->cl or v->rl) on the stream. */
CUresult kbv_run_side(kbv_ctx *v, int cand);
/* Queues nl launches of one side's sequence: which[0..nl) (indices), or
 * with which NULL the first nl. */
CUresult kbv_run_part(kbv_ctx *v, int cand, const size_t *which, size_t nl);
/* Opens the GPU and compiles (through the cache) and loads the task's
 * reference into v->rc and v->rmod: what --reference and --baseline-only
 * run. Returns 0, or -1 with the "error" verdict set. */
int kbv_open_reference(kbv_ctx *v);
/* Runs the reference on shape s's inputs just drawn (r: how drawing them
 * went), its outputs poisoned first, and waits for it. Returns 0, or -1
 * with the "error" verdict set (the device sticky when the error is). */
int kbv_run_reference(kbv_ctx *v, const kb_shape *s, CUresult r);
/* The result's "launches": the candidate's sequence as written. */
void kbv_launches_json(kbv_ctx *v);
/* Adds the driver's per-kernel resources of the candidate's launched
 * kernels to the result's compile.kernels. */
void kbv_kernel_attrs(kbv_ctx *v);

/* ------------------------------------------------------------------ buffers.c */

int kbv_is_buffer(const kb_task_param *p);
/* A device buffer of bytes between two guards (guards written). */
CUresult kbv_dbuf_alloc(kbv_gpu *g, kbv_dbuf *b, size_t bytes);
/* 1 for the parameters whose contents are compared: output and inout. */
int kbv_is_result(const kb_task_param *p);
/* Allocates every buffer of shape s (with the timed runs' copies when
 * timed) and sets dims and scalars. Returns 0, or -1 with the verdict set. */
int kbv_shape_alloc(kbv_ctx *v, const kb_shape *s, int timed);
void kbv_shape_free(kbv_ctx *v);
/* Queues a count of b's changed guard bytes into counter. */
CUresult kbv_dbuf_guard_check(kbv_gpu *g, const kbv_dbuf *b,
                              CUdeviceptr counter);
/* Rewrites the guards of the inputs and the candidate's buffers. */
CUresult kbv_reset_guards(kbv_ctx *v);
/* Poisons one side's outputs (kind: KBV_POISON_*; primed: copied from
 * prev) and scratch (always the sentinel). */
CUresult kbv_poison_side(kbv_ctx *v, int cand, int kind);
/* Keeps the reference's results of the trial just run in prev. */
CUresult kbv_keep_reference(kbv_ctx *v);

/* ------------------------------------------------------------------ inputs.c */

/* Fills the inputs (and both sides' inout buffers) of the current shape
 * with each parameter's distribution di (cycled) from seed; with dists,
 * records the distributions' names there. */
CUresult kbv_gen_inputs(kbv_ctx *v, uint64_t seed, int di, cJSON *dists);
/* Changes k elements of every input (and inout buffer) of the current
 * shape, spread over each buffer (one in each of k equal stretches), to
 * other draws of distribution di: the trial that shows whether an output
 * depends on the whole of its current input. */
CUresult kbv_perturb_inputs(kbv_ctx *v, uint64_t seed, int di,
                            unsigned long long k);
/* Queues the inputs' checksums into sums[nparams] (0 for others). */
CUresult kbv_checksum_inputs(kbv_ctx *v, unsigned long long *sums);

/* ------------------------------------------------------------------ check.c */

/* What the harness's comparison reports (harness.cu's struct kbv_cmp). */
typedef struct {
    unsigned long long nbad, first_bad, nonfinite;
    unsigned max_abs_bits, max_rel_bits;
    double cand_at_first, ref_at_first;
    unsigned long long cand_bits;   /* the candidate's bytes there, raw */
} kbv_cmp;

/* One element of type t at p, as a double (f16 and bf16 decoded exactly). */
double kbv_to_double(const unsigned char *p, kb_dtype t);
/* Compares parameter i's elements at cand against ref; waits for it. */
CUresult kbv_compare(kbv_ctx *v, size_t i, CUdeviceptr cand, CUdeviceptr ref,
                     double atol, double rtol, kbv_cmp *out);
/* The same, each element's tolerance grown by k times its sensitivity
 * (sens: floats, one per element; 0 for none). */
CUresult kbv_compare_sens(kbv_ctx *v, size_t i, CUdeviceptr cand, CUdeviceptr ref,
                          double atol, double rtol, CUdeviceptr sens, double k,
                          kbv_cmp *out);
/* A number, or "nan"/"inf"/"-inf" where JSON has none. */
void kbv_add_num(cJSON *o, const char *k, double x);
/* The correctness trials of one shape (seeds x distributions, poisoned,
 * inputs and guards checked). Returns 0 if all passed. */
int kbv_check_shape(kbv_ctx *v, const kb_shape *s);

/* ------------------------------------------------------------------ sens.c */

/* Draws a trial's inputs again, exactly (arg: the trial). */
typedef CUresult (*kbv_redraw)(kbv_ctx *v, void *arg);
/* The reference's sensitivity on shape s, into each result's sens buffer:
 * the reference run KBV_SENS_RUNS times on the inputs redraw makes,
 * jittered by KBV_SENS_ULPS units in the last place (from seed), and per
 * element the most its result moved. Both sides' results and the inputs
 * are as they were after. Returns 0, or -1 (verdict set). */
int kbv_sensitivity(kbv_ctx *v, const kb_shape *s, kbv_redraw redraw, void *arg,
                    uint64_t seed);

/* ------------------------------------------------------------------ spread.c */

/* `--baseline-only`: the task's baseline timed alone on each timed shape
 * (a median of 20 flushed runs). Returns the result (caller frees). */
cJSON *kbv_time_baseline(kbv_gpu *gpu, const kbv_opts *o, const char *task_dir);
/* With o->spread N: N --baseline-only processes after a timed
 * verification, their medians beside its own in the result's
 * "baseline_spread". */
void kbv_baseline_spread(kbv_ctx *v, const char *task_dir);

/* ------------------------------------------------------------------ timing.c */

/* Times candidate and baseline on shape s, interleaved, L2 flushed, and
 * re-checks the timed runs' outputs. Returns 0, or -1 with the verdict. */
int kbv_time_shape(kbv_ctx *v, const kb_shape *s);
/* Both sides' launches get input set j of shape s (0: the trials'
 * buffers; 1 .. KBV_NSETS-1: the timed runs' other sets, where allocated),
 * the candidate's tensor maps encoded over it. */
void kbv_use_input_set(kbv_ctx *v, const kb_shape *s, int j);

/* ------------------------------------------------------------------ tensormap.c */

/* Refuses tensor maps over no buffer of the task, or reaching past their
 * buffer on some shape. Returns 0 or -1 (verdict set). */
int kbv_check_maps(kbv_ctx *v);
/* Encodes the candidate's tensor maps over its buffers of shape s into
 * v->maps, reporting each into out. */
void kbv_encode_maps(kbv_ctx *v, const kb_shape *s, cJSON *out);

/* ------------------------------------------------------------------ baselines.c */

/* Loads cuBLAS (once per device). Returns 0, or -1 with why set. */
int kbv_blas_open(kbv_gpu *g, kb_buf *why);
/* Runs the task's library baseline into the reference side's buffers,
 * then its epilogue (the reference's kernels the task names). */
CUresult kbv_run_blas(kbv_ctx *v);

/* ------------------------------------------------------------------ reference.c */

/* The reference on the shapes cheap enough for the CPU (float64) against
 * the CPU implementation, one seed per distribution. Caller frees. */
cJSON *kbv_check_reference(kbv_gpu *gpu, const kbv_opts *o,
                           const char *task_dir);

/* ------------------------------------------------------------------ cpuref.c */

/* The index of t's parameter called name, or -1. */
int kbv_param_index(const kb_task *t, const char *name);

/* The CPU float64 implementation of a task, by kb_task.cpu_ref. bufs[i]
 * holds parameter i's elements as doubles (NULL for dims and scalars),
 * vals[i] the value of dims and scalars. Outputs are written into their
 * bufs. Returns 0, or -1 with why set when name is unknown. */
int kbv_cpu_ref(const kb_task *t, double **bufs, const double *vals,
                kb_buf *why);

#endif
