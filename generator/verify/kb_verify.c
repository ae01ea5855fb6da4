/* kb_verify.c - kb-verify: compiles a candidate kernel with NVRTC, checks it
 * against a task's reference on every shape, seed and input distribution,
 * times it against the baseline and prints one JSON result. The protocol
 * and the result's fields are documented in README.md ("GPU verification").
 *
 *   kb-verify [options] TASK_DIR CANDIDATE.cu
 *   kb-verify --reference TASK_DIR          reference vs CPU float64
 *   kb-verify --compile-only TASK_DIR [CANDIDATE.cu]   NVRTC only, no GPU
 *   kb-verify --device-info [--json]
 *   kb-verify --serve                       JSON lines in, JSON lines out
 */
#include "generator/verify/verify_int.h"
#include "generator/verify/cudrv.h"

#include <cjson/cJSON.h>
#include <cublas_v2.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef KBV_CUDA_HOME
#define KBV_CUDA_HOME "/usr/local/cuda"
#endif

/* the harness fatbin, embedded at build time (see generator/verify.mk) */
#ifdef KBV_HARNESS_PATH
__asm__(".section .rodata\n.balign 16\n.global kbv_harness_fatbin\n"
        "kbv_harness_fatbin:\n.incbin \"" KBV_HARNESS_PATH "\"\n"
        ".byte 0\n.previous\n");
extern const unsigned char kbv_harness_fatbin[];
#endif

#define GUARD 4096            /* guard bytes before and after each buffer */
#define GUARD_BYTE 0xA7
#define NSEEDS 3
#define NWARM 2
#define FASTER_MARGIN 1.03    /* geomean speedup needed for "faster" */
#define FLOOR_SLACK 0.7       /* faster than 0.7 x roofline: suspicious */

enum { POISON_NAN = 0, POISON_SENTINEL = 1 };

typedef struct {
    int json;
    const char *arch;          /* NULL: the device's */
    uint64_t seed;
    int seed_set;
    int runs_max;
    double timeout_ms;         /* per launch sequence */
    int no_timing;
    const char *cache_dir;
} vopts;

/* ------------------------------------------------------------------ GPU */

typedef struct {
    int ok;
    int sticky;                /* a sticky error or a hung kernel: exit */
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    CUmodule harness;
    CUfunction k_fill, k_checksum, k_guard, k_compare;
    char name[256];
    int cc_major, cc_minor, sms;
    int l2_bytes;
    double peak_bw;            /* bytes/s, from clocks and bus width */
    double fp32_rate, bf16_rate, int_rate;   /* FLOP/s, from the SM clock */
    CUdeviceptr flush;
    size_t flush_bytes;
    CUdeviceptr dres;          /* small result area */
    void *cublas;              /* dlopen handle */
    cublasHandle_t blas;
} gpu_t;

static gpu_t G;

typedef struct {
    unsigned long long nbad, first_bad, nonfinite;
    unsigned max_abs_bits, max_rel_bits;
    double cand_at_first, ref_at_first;
} cmp_t;

static const char *cu_name(CUresult r)
{
    const char *s = NULL;
    if (kbv_cuGetErrorName)
        cuGetErrorName(r, &s);
    return s ? s : "CUDA_ERROR_UNKNOWN";
}

static int cu_sticky(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS: case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION: case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE: case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ASSERT: case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_LAUNCH_TIMEOUT: case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED: case CUDA_ERROR_UNKNOWN:
        return 1;
    default:
        return 0;
    }
}

static int gpu_open(kb_buf *why)
{
    if (G.ok)
        return 0;
    const char *lwhy = NULL;
    if (kbv_cu_load(&lwhy) != 0) {
        kb_buf_printf(why, "no GPU: %s", lwhy);
        return -1;
    }
    CUresult r = cuInit(0);
    int n = 0;
    if (r == CUDA_SUCCESS)
        r = cuDeviceGetCount(&n);
    if (r != CUDA_SUCCESS || n < 1) {
        kb_buf_printf(why, "no GPU: %s", r ? cu_name(r) : "no CUDA device");
        return -1;
    }
    const char *ord = getenv("KB_VERIFY_DEVICE");
    long dn = 0;
    if (ord && kb_parse_long(ord, 0, n - 1, &dn) != KB_OK)
        dn = 0;
    if ((r = cuDeviceGet(&G.dev, (int)dn)) ||
        (r = cuDevicePrimaryCtxRetain(&G.ctx, G.dev)) ||
        (r = cuCtxSetCurrent(G.ctx)) ||
        (r = cuStreamCreate(&G.stream, CU_STREAM_NON_BLOCKING))) {
        kb_buf_printf(why, "cannot open the GPU: %s", cu_name(r));
        return -1;
    }
    cuDeviceGetName(G.name, sizeof G.name, G.dev);
    int clock = 0, mclock = 0, bus = 0;
    cuDeviceGetAttribute(&G.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, G.dev);
    cuDeviceGetAttribute(&G.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, G.dev);
    cuDeviceGetAttribute(&G.sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, G.dev);
    cuDeviceGetAttribute(&G.l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, G.dev);
    cuDeviceGetAttribute(&clock, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, G.dev);
    cuDeviceGetAttribute(&mclock, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, G.dev);
    cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, G.dev);
    G.peak_bw = 2.0 * mclock * 1e3 * bus / 8.0;
    if (G.peak_bw <= 0)
        G.peak_bw = 4.8e12;
    if (clock <= 0)
        clock = 1980000;
    /* per SM and clock: 128 fp32 FMAs (256 FLOPs), 4096 dense bf16 tensor
     * FLOPs (sm_90), 128 integer ops */
    G.fp32_rate = (double)G.sms * 256.0 * clock * 1e3;
    G.bf16_rate = (double)G.sms * 4096.0 * clock * 1e3;
    G.int_rate = (double)G.sms * 128.0 * clock * 1e3;
#ifdef KBV_HARNESS_PATH
    r = cuModuleLoadData(&G.harness, kbv_harness_fatbin);
#else
    r = CUDA_ERROR_NOT_FOUND;
#endif
    if (r || (r = cuModuleGetFunction(&G.k_fill, G.harness, "kbv_fill")) ||
        (r = cuModuleGetFunction(&G.k_checksum, G.harness, "kbv_checksum")) ||
        (r = cuModuleGetFunction(&G.k_guard, G.harness, "kbv_guard")) ||
        (r = cuModuleGetFunction(&G.k_compare, G.harness, "kbv_compare"))) {
        kb_buf_printf(why, "cannot load kb-verify's harness: %s", cu_name(r));
        return -1;
    }
    /* the L2 flush buffer: written between timed runs, twice the L2 */
    G.flush_bytes = (size_t)(G.l2_bytes > 0 ? G.l2_bytes : 64 << 20) * 2;
    if ((r = cuMemAlloc(&G.flush, G.flush_bytes)) ||
        (r = cuMemAlloc(&G.dres, 4096))) {
        kb_buf_printf(why, "cannot allocate: %s", cu_name(r));
        return -1;
    }
    G.ok = 1;
    return 0;
}

/* Waits for the stream; gives up after ms (the kernel is left running:
 * the caller reports a timeout and the process exits). */
static CUresult sync_deadline(double ms, int *timed_out)
{
    double t0 = kb_now_ms();
    *timed_out = 0;
    for (long spin = 0;; spin++) {
        CUresult r = cuStreamQuery(G.stream);
        if (r != CUDA_ERROR_NOT_READY)
            return r;
        if (kb_now_ms() - t0 > ms) {
            *timed_out = 1;
            return CUDA_ERROR_NOT_READY;
        }
        if (spin > 2000) {
            struct timespec ts = { 0, 50000 };
            nanosleep(&ts, NULL);
        }
    }
}

static unsigned grid_for(unsigned long long n)
{
    unsigned long long g = (n + 255) / 256;
    unsigned long long cap = (unsigned long long)G.sms * 16;
    return (unsigned)(g < 1 ? 1 : g > cap ? cap : g);
}

static CUresult launch1(CUfunction f, unsigned long long n, void **args)
{
    return cuLaunchKernel(f, grid_for(n), 1, 1, 256, 1, 1, 0, G.stream, args, NULL);
}

/* ------------------------------------------------------------------ NVRTC */

typedef struct {
    int ok;
    double ms;
    char *log;
    void *cubin;
    size_t cubin_len;
    int cached;
} compiled;

static void compiled_release(compiled *c)
{
    free(c->log);
    free(c->cubin);
    memset(c, 0, sizeof *c);
}

static const char *cuda_home(void)
{
    const char *h = getenv("CUDA_HOME");
    return h && *h ? h : KBV_CUDA_HOME;
}

static char *cache_path(const vopts *o, const char *key)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    const char *dir = o->cache_dir ? o->cache_dir : getenv("KB_VERIFY_CACHE");
    if (dir && *dir) {
        kb_buf_printf(&b, "%s/%s.cubin", dir, key);
    } else {
        const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
        if (x && *x)
            kb_buf_printf(&b, "%s/kb/verify/%s.cubin", x, key);
        else
            kb_buf_printf(&b, "%s/.cache/kb/verify/%s.cubin", h ? h : "/tmp", key);
    }
    return kb_buf_detach(&b);
}

/* Compiles src for arch into a cubin; with use_cache, looks the cubin up
 * (and stores it) by the SHA-256 of source, arch and options. */
static void nvrtc_compile(const vopts *o, const char *src, const char *name,
                          const char *arch, int use_cache, compiled *out)
{
    memset(out, 0, sizeof *out);
    double t0 = kb_now_ms();
    kb_buf opt_arch, opt_inc, key;
    kb_buf_init(&opt_arch, 0);
    kb_buf_init(&opt_inc, 0);
    kb_buf_init(&key, 0);
    kb_buf_printf(&opt_arch, "--gpu-architecture=%s", arch);
    kb_buf_printf(&opt_inc, "--include-path=%s/include", cuda_home());
    const char *opts[] = { opt_arch.data, opt_inc.data, "--std=c++17",
                           "--ptxas-options=-v", "-default-device" };
    int nopts = 5;
    char *cpath = NULL;
    char hex[65];
    if (use_cache) {
        kb_buf_printf(&key, "%s\n%s\n%s\n", arch, opt_inc.data, src);
        kb_sha256_hex(key.data, key.len, hex);
        cpath = cache_path(o, hex);
        kb_buf bin;
        kb_buf_init(&bin, 0);
        if (kb_read_file(cpath, 64u << 20, &bin, NULL) == KB_OK && bin.len > 0) {
            out->ok = 1;
            out->cached = 1;
            out->cubin_len = bin.len;
            out->cubin = kb_buf_detach(&bin);
            out->log = kb_strdup("");
            out->ms = kb_now_ms() - t0;
            goto out;
        }
        kb_buf_release(&bin);
    }
    nvrtcProgram prog = NULL;
    nvrtcResult r = nvrtcCreateProgram(&prog, src, name, 0, NULL, NULL);
    if (r == NVRTC_SUCCESS) {
        nvrtcResult cr = nvrtcCompileProgram(prog, nopts, opts);
        size_t ln = 0;
        nvrtcGetProgramLogSize(prog, &ln);
        out->log = calloc(1, ln + 1);
        if (out->log && ln)
            nvrtcGetProgramLog(prog, out->log);
        if (cr == NVRTC_SUCCESS) {
            size_t cn = 0;
            if (nvrtcGetCUBINSize(prog, &cn) == NVRTC_SUCCESS && cn > 0) {
                out->cubin = malloc(cn);
                if (out->cubin && nvrtcGetCUBIN(prog, out->cubin) == NVRTC_SUCCESS) {
                    out->cubin_len = cn;
                    out->ok = 1;
                }
            }
        }
        nvrtcDestroyProgram(&prog);
    } else {
        out->log = kb_strdup(nvrtcGetErrorString(r));
    }
    if (out->ok && cpath) {
        char *slash = strrchr(cpath, '/');
        if (slash) {
            *slash = '\0';
            kb_mkdirs(cpath, NULL);
            *slash = '/';
        }
        kb_write_file_atomic(cpath, out->cubin, out->cubin_len, NULL);
    }
    out->ms = kb_now_ms() - t0;
out:
    free(cpath);
    kb_buf_release(&opt_arch);
    kb_buf_release(&opt_inc);
    kb_buf_release(&key);
}

/* ptxas -v lines, per kernel: registers, shared, stack, spills. */
static cJSON *ptxas_kernels(const char *log)
{
    cJSON *arr = cJSON_CreateArray();
    cJSON *cur = NULL;
    for (const char *p = log; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char *line = kb_strndup(p, len);
        const char *q;
        if ((q = strstr(line, "Compiling entry function '"))) {
            q += strlen("Compiling entry function '");
            const char *end = strchr(q, '\'');
            char *nm = kb_strndup(q, end ? (size_t)(end - q) : strlen(q));
            cur = cJSON_CreateObject();
            cJSON_AddStringToObject(cur, "name", nm);
            cJSON_AddItemToArray(arr, cur);
            free(nm);
        } else if (cur && (q = strstr(line, "bytes stack frame"))) {
            long st = 0, ss = 0, sl = 0;
            const char *s0 = line;
            while (*s0 == ' ' || *s0 == '\t')
                s0++;
            st = strtol(s0, NULL, 10);
            const char *a = strstr(line, "stack frame, ");
            if (a)
                ss = strtol(a + 13, NULL, 10);
            const char *b = strstr(line, "spill stores, ");
            if (b)
                sl = strtol(b + 14, NULL, 10);
            cJSON_AddNumberToObject(cur, "stack_bytes", (double)st);
            cJSON_AddNumberToObject(cur, "spill_store_bytes", (double)ss);
            cJSON_AddNumberToObject(cur, "spill_load_bytes", (double)sl);
        } else if (cur && (q = strstr(line, "Used "))) {
            long regs = strtol(q + 5, NULL, 10);
            cJSON_AddNumberToObject(cur, "registers", (double)regs);
            const char *sm = strstr(line, "bytes smem");
            long smem = 0;
            if (sm) {
                const char *s1 = sm;
                while (s1 > line && s1[-1] == ' ')
                    s1--;
                while (s1 > line && s1[-1] >= '0' && s1[-1] <= '9')
                    s1--;
                smem = strtol(s1, NULL, 10);
            }
            cJSON_AddNumberToObject(cur, "shared_static_bytes", (double)smem);
        }
        free(line);
        p = e ? e + 1 : NULL;
    }
    return arr;
}

static cJSON *compile_json(const compiled *c, const char *arch)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "ok", c->ok);
    cJSON_AddStringToObject(o, "arch", arch);
    cJSON_AddNumberToObject(o, "ms", round(c->ms * 100) / 100);
    cJSON_AddBoolToObject(o, "cached", c->cached);
    cJSON_AddStringToObject(o, "log", c->log ? c->log : "");
    cJSON_AddItemToObject(o, "kernels", ptxas_kernels(c->log));
    return o;
}

/* ------------------------------------------------------------------ distributions */

typedef struct { int dist; double a, b; } dist_t;

static int parse_dist(const char *s, kb_dtype t, dist_t *d)
{
    int is_int = t == KB_DT_I32 || t == KB_DT_U32;
    double a = 0, b = 0;
    const char *par = strchr(s, '(');
    size_t nl = par ? (size_t)(par - s) : strlen(s);
    int has = 0;
    if (par) {
        char *end;
        a = strtod(par + 1, &end);
        if (*end != ',')
            return -1;
        b = strtod(end + 1, &end);
        if (*end != ')')
            return -1;
        has = 1;
    }
    if (nl == 6 && strncmp(s, "normal", 6) == 0 && !is_int) {
        d->dist = 1, d->a = has ? a : 0, d->b = has ? b : 1;
    } else if (nl == 7 && strncmp(s, "uniform", 7) == 0 && !is_int) {
        d->dist = 0, d->a = has ? a : -1, d->b = has ? b : 1;
    } else if (nl == 7 && strncmp(s, "randint", 7) == 0 && has) {
        d->dist = 2, d->a = a, d->b = b;
    } else if (nl == 6 && strncmp(s, "skewed", 6) == 0 && has) {
        d->dist = 3, d->a = a, d->b = b;
    } else {
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ one verification */

typedef struct {
    CUfunction f;
    unsigned g[3], b[3], shm;
} rlaunch;

typedef struct {
    CUdeviceptr base;
    CUdeviceptr ptr;
    size_t bytes, alloc;
} dbuf;

/* per-parameter state of one shape */
typedef struct {
    double val;                /* dim/scalar value, or element count */
    size_t elems, bytes;
    dbuf in;                   /* inputs (shared by both sides) */
    dbuf cand, ref, gold, chk; /* outputs/inout/scratch per side */
    union { int i; float f; double d; unsigned u; } scalar;
    CUdeviceptr cand_arg, ref_arg;   /* what each side's kernels get */
} pstate;

typedef struct {
    const vopts *o;
    kb_task *task;
    char *src;                 /* candidate source */
    const char *cand_path;
    kb_cand_header hdr;        /* the candidate's launches, maps, arch */
    CUtensorMap *maps;         /* hdr.maps encoded for the current shape */
    compiled cc, rc;
    CUmodule cmod, rmod;
    cJSON *res, *checks, *timings;
    const char *verdict;
    kb_buf reason;
    pstate *ps;
    uint64_t seed_base;
    double speed_log_sum;
    int nspeed;
} vctx;

static void set_verdict(vctx *v, const char *verdict, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_verdict(vctx *v, const char *verdict, const char *fmt, ...)
{
    if (v->verdict)
        return;
    v->verdict = verdict;
    va_list ap;
    va_start(ap, fmt);
    kb_buf_vprintf(&v->reason, fmt, ap);
    va_end(ap);
}

/* A CUDA failure while the candidate (or anything after it) ran. */
static void cuda_failed(vctx *v, CUresult r, const char *what)
{
    if (cu_sticky(r))
        G.sticky = 1;
    set_verdict(v, "crash", "%s: %s", what, cu_name(r));
}

static void dbuf_free(dbuf *b)
{
    if (b->base)
        cuMemFree(b->base);
    memset(b, 0, sizeof *b);
}

static CUresult dbuf_alloc(dbuf *b, size_t bytes)
{
    memset(b, 0, sizeof *b);
    size_t body = (bytes + 255) & ~(size_t)255;
    b->alloc = GUARD + (body ? body : 256) + GUARD;
    CUresult r = cuMemAlloc(&b->base, b->alloc);
    if (r)
        return r;
    b->ptr = b->base + GUARD;
    b->bytes = bytes;
    return cuMemsetD8Async(b->base, GUARD_BYTE, b->alloc, G.stream);
}

/* counts changed guard bytes of b (queued; read after sync) */
static CUresult dbuf_guard_check(const dbuf *b, CUdeviceptr counter)
{
    unsigned pat = GUARD_BYTE;
    unsigned long long n1 = GUARD;
    CUdeviceptr p1 = b->base;
    void *a1[] = { &p1, &n1, &pat, &counter };
    CUresult r = launch1(G.k_guard, n1, a1);
    CUdeviceptr p2 = b->ptr + b->bytes;
    unsigned long long n2 = b->alloc - GUARD - b->bytes;
    void *a2[] = { &p2, &n2, &pat, &counter };
    if (!r)
        r = launch1(G.k_guard, n2, a2);
    return r;
}

static CUresult poison(CUdeviceptr p, size_t bytes, kb_dtype t, int kind)
{
    if (!bytes)
        return CUDA_SUCCESS;
    if (kb_dtype_size(t) == 2)
        return cuMemsetD16Async(p, kind == POISON_NAN ? 0x7FC0 : 0xC7C7,
                                bytes / 2, G.stream);
    if (bytes % 4)
        return cuMemsetD8Async(p, 0xC7, bytes, G.stream);
    return cuMemsetD32Async(p, kind == POISON_NAN ? 0x7FC00000u : 0xC7C7C7C7u,
                            bytes / 4, G.stream);
}

static int is_buffer(const kb_task_param *p)
{
    return p->role <= KB_ROLE_SCRATCH;
}

/* Resolves a launch sequence for the current shape. */
static int resolve(vctx *v, const kb_shape *s, CUmodule mod,
                   const kb_launch *l, size_t nl, rlaunch *out, int cand)
{
    kb_err err;
    kb_err_clear(&err);
    for (size_t i = 0; i < nl; i++) {
        CUresult r = cuModuleGetFunction(&out[i].f, mod, l[i].kernel);
        if (r) {
            if (cand)
                set_verdict(v, "compile_error",
                            "no kernel '%s' in the candidate (it must be "
                            "extern \"C\" __global__)", l[i].kernel);
            else
                set_verdict(v, "error", "no kernel '%s' in the reference",
                            l[i].kernel);
            return -1;
        }
        double x;
        for (int k = 0; k < 3; k++) {
            out[i].g[k] = out[i].b[k] = 1;
            if (l[i].grid[k]) {
                if (kb_task_eval(v->task, s, l[i].grid[k], &x, &err))
                    goto bad;
                out[i].g[k] = x < 1 ? 0 : (unsigned)x;
            }
            if (l[i].block[k]) {
                if (kb_task_eval(v->task, s, l[i].block[k], &x, &err))
                    goto bad;
                out[i].b[k] = x < 1 ? 0 : (unsigned)x;
            }
        }
        out[i].shm = 0;
        if (l[i].shared) {
            if (kb_task_eval(v->task, s, l[i].shared, &x, &err))
                goto bad;
            out[i].shm = (unsigned)x;
        }
        if (out[i].shm > 48 * 1024)
            cuFuncSetAttribute(out[i].f,
                               CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                               (int)out[i].shm);
    }
    return 0;
bad:
    set_verdict(v, cand ? "compile_error" : "error", "launch: %s", err.msg);
    return -1;
}

static CUresult run_seq(vctx *v, const rlaunch *l, size_t nl, int cand)
{
    size_t np = v->task->nparams, nmaps = cand ? v->hdr.nmaps : 0;
    void **args = calloc(np + nmaps, sizeof *args);
    if (!args)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < np; i++) {
        pstate *p = &v->ps[i];
        if (is_buffer(&v->task->params[i]))
            args[i] = cand ? &p->cand_arg : &p->ref_arg;
        else
            args[i] = &p->scalar;
    }
    for (size_t i = 0; i < nmaps; i++)   /* after the task's parameters */
        args[np + i] = &v->maps[i];
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < nl && !r; i++)
        r = cuLaunchKernel(l[i].f, l[i].g[0], l[i].g[1], l[i].g[2], l[i].b[0],
                           l[i].b[1], l[i].b[2], l[i].shm, G.stream, args, NULL);
    free(args);
    return r;
}

/* ---- cuBLAS baseline (loaded on demand) */

typedef cublasStatus_t (*blas_create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*blas_stream_fn)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*blas_sgemm_fn)(cublasHandle_t, cublasOperation_t,
    cublasOperation_t, int, int, int, const float *, const float *, int,
    const float *, int, const float *, float *, int);
typedef cublasStatus_t (*blas_gemmex_fn)(cublasHandle_t, cublasOperation_t,
    cublasOperation_t, int, int, int, const void *, const void *, cudaDataType,
    int, const void *, cudaDataType, int, const void *, void *, cudaDataType,
    int, cublasComputeType_t, cublasGemmAlgo_t);
static blas_sgemm_fn p_sgemm;
static blas_gemmex_fn p_gemmex;

static int blas_open(kb_buf *why)
{
    if (G.blas)
        return 0;
    G.cublas = dlopen("libcublas.so.13", RTLD_NOW | RTLD_GLOBAL);
    if (!G.cublas)
        G.cublas = dlopen("libcublas.so", RTLD_NOW | RTLD_GLOBAL);
    if (!G.cublas) {
        kb_buf_printf(why, "cannot load cuBLAS: %s", dlerror());
        return -1;
    }
    blas_create_fn create = (blas_create_fn)dlsym(G.cublas, "cublasCreate_v2");
    blas_stream_fn stream = (blas_stream_fn)dlsym(G.cublas, "cublasSetStream_v2");
    p_sgemm = (blas_sgemm_fn)dlsym(G.cublas, "cublasSgemm_v2");
    p_gemmex = (blas_gemmex_fn)dlsym(G.cublas, "cublasGemmEx");
    if (!create || !stream || !p_sgemm || !p_gemmex || create(&G.blas) ||
        stream(G.blas, (cudaStream_t)G.stream)) {
        kb_buf_printf(why, "cannot start cuBLAS");
        G.blas = NULL;
        return -1;
    }
    return 0;
}

/* Runs the library baseline into the reference side's output. */
static CUresult run_blas(vctx *v)
{
    const kb_task *t = v->task;
    int ia = kbv_param_index(t, "A"), ib = kbv_param_index(t, "B");
    int ic = kbv_param_index(t, "C"), im = kbv_param_index(t, "m");
    int in = kbv_param_index(t, "n"), ik = kbv_param_index(t, "k");
    if (ia < 0 || ib < 0 || ic < 0 || im < 0 || in < 0 || ik < 0)
        return CUDA_ERROR_INVALID_VALUE;
    int M = (int)v->ps[im].val, N = (int)v->ps[in].val, K = (int)v->ps[ik].val;
    float one = 1.0f, zero = 0.0f;
    cublasStatus_t s;
    /* row-major C = A B is column-major C^T = B^T A^T */
    if (strcmp(t->baseline, "cublas_sgemm") == 0)
        s = p_sgemm(G.blas, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one,
                    (const float *)v->ps[ib].ref_arg, N,
                    (const float *)v->ps[ia].ref_arg, K, &zero,
                    (float *)v->ps[ic].ref_arg, N);
    else
        s = p_gemmex(G.blas, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one,
                     (const void *)v->ps[ib].ref_arg, CUDA_R_16BF, N,
                     (const void *)v->ps[ia].ref_arg, CUDA_R_16BF, K, &zero,
                     (void *)v->ps[ic].ref_arg, CUDA_R_32F, N,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return s == CUBLAS_STATUS_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_FAILED;
}

/* ---- inputs */

static CUresult gen_inputs(vctx *v, uint64_t seed, int di, cJSON *dists)
{
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < v->task->nparams && !r; i++) {
        const kb_task_param *p = &v->task->params[i];
        pstate *s = &v->ps[i];
        if (p->role != KB_ROLE_INPUT && p->role != KB_ROLE_INOUT)
            continue;
        const char *dn = p->dists[(size_t)di % p->ndists];
        dist_t d;
        if (parse_dist(dn, p->dtype, &d) != 0)
            return CUDA_ERROR_INVALID_VALUE;
        if (dists)
            cJSON_AddStringToObject(dists, p->name, dn);
        int dt = (int)p->dtype, dist = d.dist;
        unsigned long long n = s->elems;
        uint64_t sd = seed * 0x100000001B3ull + i;
        CUdeviceptr dst = p->role == KB_ROLE_INPUT ? s->in.ptr : s->ref.ptr;
        void *a[] = { &dst, &n, &dt, &dist, &d.a, &d.b, &sd };
        r = launch1(G.k_fill, n, a);
        if (!r && p->role == KB_ROLE_INOUT)
            r = cuMemcpyDtoDAsync(s->cand.ptr, s->ref.ptr, s->bytes, G.stream);
    }
    return r;
}

/* checksums of the inputs into sums[nparams] (0 for others) */
static CUresult checksum_inputs(vctx *v, unsigned long long *sums)
{
    size_t np = v->task->nparams;
    CUresult r = cuMemsetD8Async(G.dres, 0, np * 8, G.stream);
    for (size_t i = 0; i < np && !r; i++) {
        if (v->task->params[i].role != KB_ROLE_INPUT)
            continue;
        CUdeviceptr p = v->ps[i].in.ptr, out = G.dres + i * 8;
        unsigned long long nb = v->ps[i].bytes;
        void *a[] = { &p, &nb, &out };
        r = launch1(G.k_checksum, nb / 4 + 1, a);
    }
    if (!r)
        r = cuMemcpyDtoHAsync(sums, G.dres, np * 8, G.stream);
    return r;
}

/* One element of type t at p, as a double (f16 and bf16 decoded exactly). */
static double to_double(const unsigned char *p, kb_dtype t)
{
    switch (t) {
    case KB_DT_F32: { float f; memcpy(&f, p, 4); return f; }
    case KB_DT_I32: { int32_t x; memcpy(&x, p, 4); return x; }
    case KB_DT_U32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case KB_DT_F64: { double x; memcpy(&x, p, 8); return x; }
    case KB_DT_BF16: { uint32_t u = 0; memcpy((char *)&u + 2, p, 2); float f; memcpy(&f, &u, 4); return f; }
    default: { /* f16 */
        uint16_t h; memcpy(&h, p, 2);
        int e = (h >> 10) & 31, m = h & 1023;
        double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
        return h & 0x8000 ? -v : v;
    } }
}

static CUresult compare(vctx *v, size_t i, CUdeviceptr cand, CUdeviceptr ref,
                        double atol, double rtol, cmp_t *out)
{
    const kb_task_param *p = &v->task->params[i];
    cmp_t init;
    memset(&init, 0, sizeof init);
    init.first_bad = ~0ull;
    CUdeviceptr res = G.dres + 1024;
    CUresult r = cuMemcpyHtoDAsync(res, &init, sizeof init, G.stream);
    unsigned long long n = v->ps[i].elems;
    int dt = (int)p->dtype;
    void *a[] = { &cand, &ref, &n, &dt, &atol, &rtol, &res };
    if (!r)
        r = launch1(G.k_compare, n, a);
    if (!r)
        r = cuMemcpyDtoHAsync(out, res, sizeof *out, G.stream);
    int to;
    if (!r)
        r = sync_deadline(10000, &to);
    if (!r && out->nbad && out->first_bad < n) {
        /* the values at the first mismatch, read back exactly */
        size_t es = kb_dtype_size(p->dtype);
        unsigned char cb[8] = { 0 }, rb[8] = { 0 };
        r = cuMemcpyDtoH(cb, cand + out->first_bad * es, es);
        if (!r)
            r = cuMemcpyDtoH(rb, ref + out->first_bad * es, es);
        out->cand_at_first = to_double(cb, p->dtype);
        out->ref_at_first = to_double(rb, p->dtype);
    }
    return r;
}

static double bits_float(unsigned b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static void add_num(cJSON *o, const char *k, double x)
{
    if (isfinite(x))
        cJSON_AddNumberToObject(o, k, x);
    else
        cJSON_AddStringToObject(o, k, isnan(x) ? "nan" : x > 0 ? "inf" : "-inf");
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* median and a 95% interval of the median (order statistics) */
static cJSON *stats_json(double *t, int n, double *median)
{
    qsort(t, (size_t)n, sizeof *t, cmp_dbl);
    double med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    int lo = (int)floor(n / 2.0 - 0.98 * sqrt((double)n));
    int hi = (int)ceil(n / 2.0 + 0.98 * sqrt((double)n));
    if (lo < 0)
        lo = 0;
    if (hi > n - 1)
        hi = n - 1;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "median", med);
    cJSON_AddNumberToObject(o, "ci95_lo", t[lo]);
    cJSON_AddNumberToObject(o, "ci95_hi", t[hi]);
    cJSON_AddNumberToObject(o, "min", t[0]);
    *median = med;
    return o;
}

/* allocations for one shape; returns 0 or -1 (verdict set) */
static int shape_alloc(vctx *v, const kb_shape *s, int timed)
{
    kb_err err;
    kb_err_clear(&err);
    for (size_t i = 0; i < v->task->nparams; i++) {
        const kb_task_param *p = &v->task->params[i];
        pstate *st = &v->ps[i];
        memset(st, 0, sizeof *st);
        if (kb_task_eval(v->task, s, is_buffer(p) ? p->size : p->value,
                         &st->val, &err)) {
            set_verdict(v, "error", "%s", err.msg);
            return -1;
        }
        if (!is_buffer(p)) {
            switch (p->dtype) {
            case KB_DT_F32: st->scalar.f = (float)st->val; break;
            case KB_DT_F64: st->scalar.d = st->val; break;
            case KB_DT_U32: st->scalar.u = (unsigned)st->val; break;
            default: st->scalar.i = (int)st->val; break;
            }
            continue;
        }
        st->elems = (size_t)st->val;
        st->bytes = st->elems * kb_dtype_size(p->dtype);
        CUresult r = CUDA_SUCCESS;
        if (p->role == KB_ROLE_INPUT) {
            r = dbuf_alloc(&st->in, st->bytes);
            st->cand_arg = st->ref_arg = st->in.ptr;
        } else {
            r = dbuf_alloc(&st->cand, st->bytes);
            if (!r)
                r = dbuf_alloc(&st->ref, st->bytes);
            /* the timed runs' outputs are kept and re-checked */
            if (!r && timed && p->role != KB_ROLE_SCRATCH)
                r = dbuf_alloc(&st->gold, st->bytes);
            if (!r && timed && p->role != KB_ROLE_SCRATCH)
                r = dbuf_alloc(&st->chk, st->bytes);
            st->cand_arg = st->cand.ptr;
            st->ref_arg = st->ref.ptr;
        }
        if (r) {
            set_verdict(v, "error", "cannot allocate %zu bytes for '%s': %s",
                        st->bytes, p->name, cu_name(r));
            return -1;
        }
    }
    return 0;
}

static void shape_free(vctx *v)
{
    for (size_t i = 0; v->ps && i < v->task->nparams; i++) {
        pstate *st = &v->ps[i];
        dbuf_free(&st->in);
        dbuf_free(&st->cand);
        dbuf_free(&st->ref);
        dbuf_free(&st->gold);
        dbuf_free(&st->chk);
    }
}

/* A map's dims and box on shape s (box clamped only so that the
 * conversion cannot overflow: the driver refuses sides over 256). Returns
 * the elements the map spans, or -1 with err set. */
static double map_extent(const vctx *v, const kb_tensormap *m, const kb_shape *s,
                         cuuint64_t dims[], cuuint32_t box[], kb_err *err)
{
    double elems = 1;
    for (int d = 0; d < m->rank; d++) {
        double x, b;
        if (kb_task_eval(v->task, s, m->dims[d], &x, err) ||
            kb_task_eval(v->task, s, m->box[d], &b, err))
            return -1;
        dims[d] = x < 1 ? 0 : (cuuint64_t)x;
        box[d] = b < 1 ? 0 : b > 1024 ? 1024 : (cuuint32_t)b;
        elems *= (double)dims[d];
    }
    return elems;
}

/* Refuses tensor maps over no buffer of the task, or reaching past their
 * buffer on some shape (a map is a window onto memory: one larger than its
 * buffer would read whatever lies next to it). Returns 0 or -1. */
static int check_maps(vctx *v)
{
    kb_err err;
    kb_err_clear(&err);
    for (size_t i = 0; i < v->hdr.nmaps; i++) {
        const kb_tensormap *m = &v->hdr.maps[i];
        int p = kbv_param_index(v->task, m->buffer);
        if (p < 0 || !is_buffer(&v->task->params[p])) {
            set_verdict(v, "refused", "kb-tensormap: the task has no buffer '%s'",
                        m->buffer);
            return -1;
        }
        for (size_t si = 0; si < v->task->nshapes; si++) {
            const kb_shape *s = &v->task->shapes[si];
            cuuint64_t dims[KB_TMAP_MAX_RANK];
            cuuint32_t box[KB_TMAP_MAX_RANK];
            double have, elems = map_extent(v, m, s, dims, box, &err);
            if (elems < 0) {
                set_verdict(v, "refused", "kb-tensormap over '%s': %s", m->buffer,
                            err.msg);
                return -1;
            }
            if (kb_task_eval(v->task, s, v->task->params[p].size, &have, &err) == KB_OK &&
                elems > have) {
                set_verdict(v, "refused", "kb-tensormap over '%s' spans %.0f elements "
                            "on shape '%s'; the buffer holds %.0f", m->buffer, elems,
                            s->name, have);
                return -1;
            }
        }
    }
    return 0;
}

/* Encodes the candidate's tensor maps over its buffers of this shape (none
 * reaches past its buffer: check_maps saw to that). One the driver refuses
 * (TMA wants 16-byte aligned strides: a row of 999 bf16 cannot be mapped)
 * is passed as zeros and reported: the candidate must not use it on that
 * shape. */
static void encode_maps(vctx *v, const kb_shape *s, cJSON *out)
{
    static const CUtensorMapDataType types[] = {
        [KB_DT_F32] = CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        [KB_DT_BF16] = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        [KB_DT_F16] = CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        [KB_DT_I32] = CU_TENSOR_MAP_DATA_TYPE_INT32,
        [KB_DT_U32] = CU_TENSOR_MAP_DATA_TYPE_UINT32,
        [KB_DT_F64] = CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
    };
    static const CUtensorMapSwizzle swizzles[] = {
        CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_SWIZZLE_32B,
        CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_SWIZZLE_128B,
    };
    for (size_t i = 0; i < v->hdr.nmaps; i++) {
        const kb_tensormap *m = &v->hdr.maps[i];
        int p = kbv_param_index(v->task, m->buffer);
        kb_dtype t = v->task->params[p].dtype;
        cuuint64_t dims[KB_TMAP_MAX_RANK], strides[KB_TMAP_MAX_RANK];
        cuuint32_t box[KB_TMAP_MAX_RANK], estr[KB_TMAP_MAX_RANK];
        map_extent(v, m, s, dims, box, NULL);   /* check_maps evaluated it */
        cJSON *mo = cJSON_CreateObject();
        cJSON_AddItemToArray(out, mo);
        cJSON_AddStringToObject(mo, "shape", s->name);
        cJSON_AddStringToObject(mo, "buffer", m->buffer);
        cJSON *dj = cJSON_AddArrayToObject(mo, "dims");
        cJSON *bj = cJSON_AddArrayToObject(mo, "box");
        size_t stride = kb_dtype_size(t);
        for (int d = 0; d < m->rank; d++) {
            estr[d] = 1;
            stride *= dims[d];
            strides[d] = stride;   /* of dimension d + 1: the buffer is packed */
            cJSON_AddItemToArray(dj, cJSON_CreateNumber((double)dims[d]));
            cJSON_AddItemToArray(bj, cJSON_CreateNumber(box[d]));
        }
        memset(&v->maps[i], 0, sizeof v->maps[i]);
        CUresult r = cuTensorMapEncodeTiled(
            &v->maps[i], types[t], (cuuint32_t)m->rank, (void *)v->ps[p].cand_arg,
            dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzles[m->swizzle == 128 ? 3 : m->swizzle / 32],
            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        cJSON_AddBoolToObject(mo, "encoded", r == CUDA_SUCCESS);
        if (r) {
            memset(&v->maps[i], 0, sizeof v->maps[i]);
            cJSON_AddStringToObject(mo, "error", cu_name(r));
        }
    }
}

/* poison the candidate's outputs and scratch; the reference's too */
static CUresult poison_side(vctx *v, int cand, int kind)
{
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < v->task->nparams && !r; i++) {
        const kb_task_param *p = &v->task->params[i];
        if (p->role != KB_ROLE_OUTPUT && p->role != KB_ROLE_SCRATCH)
            continue;
        dbuf *b = cand ? &v->ps[i].cand : &v->ps[i].ref;
        r = poison(b->ptr, b->bytes, p->dtype,
                   p->role == KB_ROLE_SCRATCH ? POISON_SENTINEL : kind);
    }
    return r;
}

static double shape_tol(vctx *v, const kb_shape *s, const char *e)
{
    double x = 0;
    kb_task_eval(v->task, s, e, &x, NULL);
    return x;
}

/* The correctness trials of one shape. Returns 0 if all passed. */
static int check_shape(vctx *v, const kb_shape *s, const rlaunch *cl,
                       size_t ncl, const rlaunch *rl, size_t nrl)
{
    const kb_task *t = v->task;
    size_t ndist = 2;
    for (size_t i = 0; i < t->nparams; i++)
        if (t->params[i].ndists > ndist)
            ndist = t->params[i].ndists;
    double atol = shape_tol(v, s, t->atol), rtol = shape_tol(v, s, t->rtol);
    unsigned long long *before = calloc(t->nparams, 8), *after = calloc(t->nparams, 8);
    int trial = 0, failed = 0;
    for (int si = 0; si < NSEEDS && !failed; si++)
        for (size_t di = 0; di < ndist && !failed; di++, trial++) {
            int kind = trial % 2 ? POISON_SENTINEL : POISON_NAN;
            uint64_t seed = v->seed_base + (uint64_t)trial * 7919 +
                            (uint64_t)(s - t->shapes) * 104729;
            cJSON *c = cJSON_CreateObject();
            cJSON_AddItemToArray(v->checks, c);
            cJSON_AddStringToObject(c, "shape", s->name);
            cJSON_AddNumberToObject(c, "seed", (double)seed);
            cJSON *dj = cJSON_AddObjectToObject(c, "dist");
            cJSON_AddStringToObject(c, "poison", kind == POISON_NAN ? "nan" : "sentinel");
            int to = 0;
            CUresult r = gen_inputs(v, seed, (int)di, dj);
            if (!r)
                r = poison_side(v, 0, POISON_NAN);
            if (!r)
                r = run_seq(v, rl, nrl, 0);
            if (!r)
                r = sync_deadline(60000, &to);
            if (r || to) {
                set_verdict(v, "error", "the reference failed on shape '%s': %s",
                            s->name, to ? "timeout" : cu_name(r));
                if (r && cu_sticky(r))
                    G.sticky = 1;
                failed = 1;
                break;
            }
            r = checksum_inputs(v, before);
            if (!r)
                r = poison_side(v, 1, kind);
            for (size_t i = 0; i < t->nparams && !r; i++) {
                dbuf *bs[2] = { &v->ps[i].in, &v->ps[i].cand };
                for (int k = 0; k < 2 && !r; k++)
                    if (bs[k]->base)
                        r = cuMemsetD8Async(bs[k]->base, GUARD_BYTE, GUARD, G.stream);
            }
            if (r) {
                cuda_failed(v, r, "preparing a trial");
                failed = 1;
                break;
            }
            double t0 = kb_now_ms();
            r = run_seq(v, cl, ncl, 1);
            if (r) {
                cuda_failed(v, r, "launching the candidate");
                cJSON_AddStringToObject(c, "error", cu_name(r));
                failed = 1;
                break;
            }
            r = sync_deadline(v->o->timeout_ms, &to);
            cJSON_AddNumberToObject(c, "run_ms", round((kb_now_ms() - t0) * 1000) / 1000);
            if (to) {
                G.sticky = 1;
                set_verdict(v, "timeout", "the candidate ran over %.0f ms on "
                            "shape '%s'", v->o->timeout_ms, s->name);
                cJSON_AddStringToObject(c, "error", "timeout");
                failed = 1;
                break;
            }
            if (r) {
                cuda_failed(v, r, "the candidate failed");
                cJSON_AddStringToObject(c, "error", cu_name(r));
                failed = 1;
                break;
            }
            int ok = 1;
            /* outputs */
            cJSON *outs = cJSON_AddArrayToObject(c, "outputs");
            for (size_t i = 0; i < t->nparams && !r; i++) {
                const kb_task_param *p = &t->params[i];
                if (p->role != KB_ROLE_OUTPUT && p->role != KB_ROLE_INOUT)
                    continue;
                cmp_t m;
                r = compare(v, i, v->ps[i].cand.ptr, v->ps[i].ref.ptr, atol, rtol, &m);
                if (r)
                    break;
                cJSON *oj = cJSON_CreateObject();
                cJSON_AddItemToArray(outs, oj);
                cJSON_AddStringToObject(oj, "name", p->name);
                cJSON_AddNumberToObject(oj, "mismatches", (double)m.nbad);
                cJSON_AddNumberToObject(oj, "nonfinite", (double)m.nonfinite);
                add_num(oj, "max_abs_err", bits_float(m.max_abs_bits));
                add_num(oj, "max_rel_err", bits_float(m.max_rel_bits));
                if (m.nbad) {
                    ok = 0;
                    cJSON_AddNumberToObject(oj, "first_bad", (double)m.first_bad);
                    add_num(oj, "candidate_at_first_bad", m.cand_at_first);
                    add_num(oj, "reference_at_first_bad", m.ref_at_first);
                    set_verdict(v, "incorrect",
                                "'%s' differs from the reference on shape '%s' "
                                "(%llu of %zu elements, first at index %llu: %g "
                                "instead of %g%s; poison %s)", p->name, s->name,
                                m.nbad, v->ps[i].elems, m.first_bad,
                                m.cand_at_first, m.ref_at_first,
                                m.nonfinite ? ", non-finite output" : "",
                                kind == POISON_NAN ? "nan" : "sentinel");
                }
            }
            /* inputs unchanged, guards intact */
            if (!r)
                r = checksum_inputs(v, after);
            CUdeviceptr gcount = G.dres + 2048;
            unsigned long long gbad = 0;
            if (!r)
                r = cuMemsetD8Async(gcount, 0, 8, G.stream);
            for (size_t i = 0; i < t->nparams && !r; i++) {
                if (v->ps[i].in.base)
                    r = dbuf_guard_check(&v->ps[i].in, gcount);
                if (!r && v->ps[i].cand.base)
                    r = dbuf_guard_check(&v->ps[i].cand, gcount);
            }
            if (!r)
                r = cuMemcpyDtoHAsync(&gbad, gcount, 8, G.stream);
            if (!r)
                r = sync_deadline(10000, &to);
            if (r) {
                cuda_failed(v, r, "checking the candidate's outputs");
                failed = 1;
                break;
            }
            int inputs_ok = 1;
            for (size_t i = 0; i < t->nparams; i++)
                if (t->params[i].role == KB_ROLE_INPUT && before[i] != after[i]) {
                    inputs_ok = 0;
                    set_verdict(v, "incorrect", "the candidate modified its "
                                "input '%s' on shape '%s'", t->params[i].name,
                                s->name);
                }
            if (gbad)
                set_verdict(v, "incorrect", "the candidate wrote %llu bytes "
                            "outside its buffers on shape '%s'", gbad, s->name);
            cJSON_AddBoolToObject(c, "inputs_unchanged", inputs_ok);
            cJSON_AddBoolToObject(c, "guards_intact", gbad == 0);
            ok = ok && inputs_ok && gbad == 0;
            cJSON_AddBoolToObject(c, "ok", ok);
            if (!ok)
                failed = 1;
        }
    free(before);
    free(after);
    return failed ? -1 : 0;
}

static double roof_floor_ms(vctx *v, const kb_shape *s)
{
    const kb_task *t = v->task;
    double bytes = 0, flops = 0;
    if (t->roof_bytes)
        kb_task_eval(t, s, t->roof_bytes, &bytes, NULL);
    if (t->roof_flops)
        kb_task_eval(t, s, t->roof_flops, &flops, NULL);
    /* fp32_tensor3: fp32 accuracy from three TF32 tensor-core products
     * (3xTF32), the fastest honest way to an fp32 GEMM; TF32 runs at half
     * the bf16 rate */
    double rate = strcmp(t->roof_unit, "bf16_tensor") == 0 ? G.bf16_rate
                : strcmp(t->roof_unit, "fp32_tensor3") == 0 ? G.bf16_rate / 6.0
                : strcmp(t->roof_unit, "int") == 0 ? G.int_rate : G.fp32_rate;
    double a = bytes / G.peak_bw, b = flops / rate;
    return (a > b ? a : b) * 1e3;
}

/* Times candidate and baseline on shape s, interleaved, L2 flushed. */
static int time_shape(vctx *v, const kb_shape *s, const rlaunch *cl, size_t ncl,
                      const rlaunch *rl, size_t nrl)
{
    const kb_task *t = v->task;
    int use_blas = strncmp(t->baseline, "cublas", 6) == 0;
    kb_buf why;
    kb_buf_init(&why, 0);
    if (use_blas && blas_open(&why) != 0) {
        set_verdict(v, "error", "%s", why.data);
        kb_buf_release(&why);
        return -1;
    }
    kb_buf_release(&why);
    int to = 0;
    uint64_t seed = v->seed_base ^ 0x5EEDull;
    double atol = shape_tol(v, s, t->atol), rtol = shape_tol(v, s, t->rtol);
    CUresult r = gen_inputs(v, seed, 0, NULL);
    if (!r)
        r = poison_side(v, 0, POISON_NAN);
    if (!r)
        r = run_seq(v, rl, nrl, 0);
    for (size_t i = 0; i < t->nparams && !r; i++)
        if (t->params[i].role == KB_ROLE_OUTPUT || t->params[i].role == KB_ROLE_INOUT)
            r = cuMemcpyDtoDAsync(v->ps[i].gold.ptr, v->ps[i].ref.ptr,
                                  v->ps[i].bytes, G.stream);
    if (!r)
        r = sync_deadline(60000, &to);
    if (r || to) {
        set_verdict(v, "error", "the reference failed while timing");
        return -1;
    }
    /* warm-up, and a first measurement to size the run count */
    CUevent e[4];
    for (int i = 0; i < 4; i++)
        cuEventCreate(&e[i], CU_EVENT_DEFAULT);
    double tc = 0, tb = 0;
    for (int w = 0; w < NWARM && !r; w++) {
        r = cuEventRecord(e[0], G.stream);
        if (!r)
            r = run_seq(v, cl, ncl, 1);
        if (!r)
            r = cuEventRecord(e[1], G.stream);
        if (!r)
            r = use_blas ? run_blas(v) : run_seq(v, rl, nrl, 0);
        if (!r)
            r = cuEventRecord(e[2], G.stream);
        if (!r)
            r = sync_deadline(v->o->timeout_ms, &to);
        if (to) {
            G.sticky = 1;
            set_verdict(v, "timeout", "the candidate ran over %.0f ms while timing",
                        v->o->timeout_ms);
            return -1;
        }
        float a = 0, b = 0;
        if (!r) {
            cuEventElapsedTime(&a, e[0], e[1]);
            cuEventElapsedTime(&b, e[1], e[2]);
            tc = a, tb = b;
        }
    }
    for (int i = 0; i < 4; i++)
        cuEventDestroy(e[i]);
    if (r) {
        cuda_failed(v, r, "warming up");
        return -1;
    }
    cJSON *tj = cJSON_CreateObject();
    cJSON_AddItemToArray(v->timings, tj);
    cJSON_AddStringToObject(tj, "shape", s->name);
    cJSON_AddStringToObject(tj, "baseline", t->baseline);
    if (use_blas) {
        /* the library baseline must itself agree with the reference */
        int ic = kbv_param_index(t, "C");
        cmp_t m;
        r = compare(v, (size_t)ic, v->ps[ic].ref.ptr, v->ps[ic].gold.ptr, atol, rtol, &m);
        if (r) {
            cuda_failed(v, r, "checking the library baseline");
            return -1;
        }
        cJSON_AddBoolToObject(tj, "baseline_agrees", m.nbad == 0);
        if (m.nbad) {
            /* a speedup over a wrong baseline would mean nothing */
            set_verdict(v, "error", "the library baseline (%s) differs from "
                        "the reference on shape '%s' (%llu mismatches)",
                        t->baseline, s->name, m.nbad);
            return -1;
        }
    }
    int runs = (int)(60.0 / (tc + tb + 0.2));   /* about 60 ms of runs */
    if (runs > v->o->runs_max)
        runs = v->o->runs_max;
    if (runs < 10)
        runs = 10;
    int rcheck = (int)(v->seed_base % (uint64_t)runs);
    CUevent *ev = calloc((size_t)runs * 4, sizeof *ev);
    for (int i = 0; i < runs * 4; i++)
        cuEventCreate(&ev[i], CU_EVENT_DEFAULT);
    unsigned flush_words = (unsigned)(G.flush_bytes / 4);
    int has_inout = 0;
    for (size_t i = 0; i < t->nparams; i++)
        has_inout |= t->params[i].role == KB_ROLE_INOUT;
    for (int k = 0; k < runs && !r; k++)
        for (int side2 = 0; side2 < 2 && !r; side2++) {
            int cand = (k % 2) ? side2 : !side2;   /* alternate the order */
            /* in-place (inout) buffers start from the same input each run */
            if (has_inout)
                r = gen_inputs(v, seed, 0, NULL);
            if (!r)
                r = cuMemsetD32Async(G.flush, (unsigned)k, flush_words, G.stream);
            if (!r && cand)
                r = poison_side(v, 1, POISON_NAN);
            CUevent *pe = &ev[(k * 2 + cand) * 2];
            if (!r)
                r = cuEventRecord(pe[0], G.stream);
            if (!r)
                r = cand ? run_seq(v, cl, ncl, 1)
                         : use_blas ? run_blas(v) : run_seq(v, rl, nrl, 0);
            if (!r)
                r = cuEventRecord(pe[1], G.stream);
            if (!r && cand && k == rcheck)
                for (size_t i = 0; i < t->nparams && !r; i++)
                    if (t->params[i].role == KB_ROLE_OUTPUT ||
                        t->params[i].role == KB_ROLE_INOUT)
                        r = cuMemcpyDtoDAsync(v->ps[i].chk.ptr, v->ps[i].cand.ptr,
                                              v->ps[i].bytes, G.stream);
        }
    if (!r)
        r = sync_deadline(v->o->timeout_ms + runs * 2 * (tc + tb + 1.0), &to);
    if (to) {
        G.sticky = 1;
        set_verdict(v, "timeout", "the timed runs did not finish");
        free(ev);
        return -1;
    }
    if (r) {
        cuda_failed(v, r, "timing");
        free(ev);
        return -1;
    }
    double *tcand = calloc((size_t)runs, sizeof(double));
    double *tbase = calloc((size_t)runs, sizeof(double));
    for (int k = 0; k < runs; k++) {
        float a = 0, b = 0;
        cuEventElapsedTime(&a, ev[(k * 2 + 1) * 2], ev[(k * 2 + 1) * 2 + 1]);
        cuEventElapsedTime(&b, ev[(k * 2) * 2], ev[(k * 2) * 2 + 1]);
        tcand[k] = a;
        tbase[k] = b;
    }
    for (int i = 0; i < runs * 4; i++)
        cuEventDestroy(ev[i]);
    free(ev);
    double mc, mb;
    cJSON_AddNumberToObject(tj, "runs", runs);
    cJSON_AddItemToObject(tj, "candidate_ms", stats_json(tcand, runs, &mc));
    cJSON_AddItemToObject(tj, "baseline_ms", stats_json(tbase, runs, &mb));
    free(tcand);
    free(tbase);
    double speedup = mc > 0 ? mb / mc : 0;
    double floor_ms = roof_floor_ms(v, s);
    cJSON_AddNumberToObject(tj, "speedup", speedup);
    cJSON_AddNumberToObject(tj, "floor_ms", floor_ms);
    cJSON_AddNumberToObject(tj, "candidate_over_floor", floor_ms > 0 ? mc / floor_ms : 0);
    /* outputs of the timed runs: the last one, and one picked at random */
    int ok = 1;
    for (size_t i = 0; i < t->nparams && ok; i++) {
        if (t->params[i].role != KB_ROLE_OUTPUT && t->params[i].role != KB_ROLE_INOUT)
            continue;
        cmp_t m1, m2;
        r = compare(v, i, v->ps[i].cand.ptr, v->ps[i].gold.ptr, atol, rtol, &m1);
        if (!r)
            r = compare(v, i, v->ps[i].chk.ptr, v->ps[i].gold.ptr, atol, rtol, &m2);
        if (r) {
            cuda_failed(v, r, "re-checking the timed outputs");
            return -1;
        }
        if (m1.nbad || m2.nbad) {
            ok = 0;
            set_verdict(v, "incorrect", "the output of timed run %d differs "
                        "from the reference (%llu mismatches): right only when "
                        "checked", m1.nbad ? runs : rcheck + 1,
                        m1.nbad ? m1.nbad : m2.nbad);
        }
    }
    cJSON_AddBoolToObject(tj, "timed_outputs_ok", ok);
    cJSON_AddNumberToObject(tj, "rechecked_run", rcheck + 1);
    if (!ok)
        return -1;
    if (floor_ms > 0 && mc < FLOOR_SLACK * floor_ms)
        set_verdict(v, "suspicious", "%.4f ms on shape '%s' is below the "
                    "roofline floor of %.4f ms", mc, s->name, floor_ms);
    else if (speedup > t->max_speedup)
        set_verdict(v, "suspicious", "%.1fx over the baseline on shape '%s' "
                    "is beyond the task's plausible %.0fx", speedup, s->name,
                    t->max_speedup);
    if (speedup > 0) {
        v->speed_log_sum += log(speedup);
        v->nspeed++;
    }
    return 0;
}

static cJSON *device_json(int full)
{
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "name", G.name);
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", G.cc_major, G.cc_minor);
    cJSON_AddStringToObject(d, "compute_capability", cc);
    cJSON_AddNumberToObject(d, "sms", G.sms);
    if (!full)
        return d;
    int a = 0;
    size_t mem = 0;
    cuDeviceTotalMem(&mem, G.dev);
    cJSON_AddNumberToObject(d, "memory_bytes", (double)mem);
    cJSON_AddNumberToObject(d, "l2_bytes", G.l2_bytes);
#define ATTR(key, attr) do { a = 0; cuDeviceGetAttribute(&a, attr, G.dev); \
        cJSON_AddNumberToObject(d, key, a); } while (0)
    ATTR("shared_per_block_bytes", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    ATTR("shared_per_block_optin_bytes", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    ATTR("shared_per_sm_bytes", CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    ATTR("registers_per_sm", CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
    ATTR("max_threads_per_block", CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    ATTR("max_threads_per_sm", CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    ATTR("warp_size", CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    ATTR("sm_clock_khz", CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
    ATTR("memory_clock_khz", CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
    ATTR("memory_bus_bits", CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
#undef ATTR
    cJSON_AddNumberToObject(d, "peak_bandwidth_bytes_per_s", G.peak_bw);
    cJSON_AddNumberToObject(d, "fp32_flops_per_s", G.fp32_rate);
    cJSON_AddNumberToObject(d, "bf16_tensor_flops_per_s", G.bf16_rate);
    /* measured: a 1 GiB device-to-device copy, median of 5 */
    CUdeviceptr s = 0, t = 0;
    size_t n = (size_t)1 << 30;
    if (!cuMemAlloc(&s, n) && !cuMemAlloc(&t, n)) {
        CUevent e0, e1;
        cuEventCreate(&e0, 0);
        cuEventCreate(&e1, 0);
        double ts[6];
        for (int i = 0; i < 6; i++) {
            cuEventRecord(e0, G.stream);
            cuMemcpyDtoDAsync(t, s, n, G.stream);
            cuEventRecord(e1, G.stream);
            cuEventSynchronize(e1);
            float ms = 0;
            cuEventElapsedTime(&ms, e0, e1);
            ts[i] = ms;
        }
        qsort(ts + 1, 5, sizeof(double), cmp_dbl);
        cJSON_AddNumberToObject(d, "measured_copy_bytes_per_s",
                                2.0 * (double)n / (ts[3] * 1e-3));
        cuEventDestroy(e0);
        cuEventDestroy(e1);
    }
    if (s)
        cuMemFree(s);
    if (t)
        cuMemFree(t);
    char arch[16];
    snprintf(arch, sizeof arch, "sm_%d%d", G.cc_major, G.cc_minor);
    cJSON_AddStringToObject(d, "arch", arch);
    return d;
}

static void *gpu_open_thread(void *why)
{
    gpu_open(why);
    return NULL;
}

static void default_arch(const vopts *o, const char *asked, char *arch, size_t n)
{
    if (o->arch)
        snprintf(arch, n, "%s", o->arch);
    else if (asked)
        snprintf(arch, n, "%s", asked);
    else if (G.ok)
        snprintf(arch, n, "sm_%d%d", G.cc_major, G.cc_minor);
    else
        snprintf(arch, n, "sm_90");
}

/* Loads the task in dir into v->task and its reference.cu into rsrc, and
 * names the result's "task" by the task's name (it holds dir until then).
 * On failure sets the "error" verdict and returns -1. */
static int load_task(vctx *v, const char *dir, kb_buf *rsrc)
{
    kb_err err;
    kb_err_clear(&err);
    if (kb_task_load(dir, &v->task, &err)) {
        set_verdict(v, "error", "%s", err.msg);
        return -1;
    }
    cJSON_ReplaceItemInObject(v->res, "task", cJSON_CreateString(v->task->name));
    char *rpath = kb_path_join(dir, "reference.cu");
    kb_rc rc = kb_read_file(rpath, 8u << 20, rsrc, &err);
    free(rpath);
    if (rc) {
        set_verdict(v, "error", "%s", err.msg);
        return -1;
    }
    return 0;
}

/* Verifies one candidate (path, or inline source when src is given).
 * mode: 0 verify, 1 compile only. Returns the result (caller frees). */
static cJSON *verify(const vopts *o, const char *task_dir, const char *cand_path,
                     const char *src_inline, int compile_only)
{
    double t0 = kb_now_ms();
    vctx v;
    memset(&v, 0, sizeof v);
    v.o = o;
    kb_buf_init(&v.reason, 0);
    v.res = cJSON_CreateObject();
    cJSON_AddNumberToObject(v.res, "kb_verify", 1);
    cJSON_AddStringToObject(v.res, "task", task_dir);
    cJSON_AddStringToObject(v.res, "candidate", cand_path ? cand_path : "");
    kb_err err;
    kb_err_clear(&err);
    kb_buf src, why, rsrc;
    kb_buf_init(&src, 8u << 20);
    kb_buf_init(&why, 0);
    kb_buf_init(&rsrc, 8u << 20);
    char arch[32];
    rlaunch *cl = NULL, *rl = NULL;
    if (load_task(&v, task_dir, &rsrc))
        goto out;
    if (src_inline) {
        kb_buf_puts(&src, src_inline);
    } else if (cand_path) {
        if (kb_read_file(cand_path, 8u << 20, &src, &err)) {
            set_verdict(&v, "error", "%s", err.msg);
            goto out;
        }
    } else {
        kb_buf_puts(&src, rsrc.data);   /* the reference as its own candidate */
    }
    if (kb_verify_refuse(src.data, &why)) {
        set_verdict(&v, "refused", "%s", why.data);
        goto out;
    }
    if (kb_cand_header_parse(src.data, &v.hdr, &err)) {
        set_verdict(&v, "refused", "%s", err.msg);
        goto out;
    }
    if (check_maps(&v) != 0)
        goto out;
    const kb_launch *cseq = v.hdr.nlaunches ? v.hdr.launches : v.task->launches;
    size_t ncl = v.hdr.nlaunches ? v.hdr.nlaunches : v.task->nlaunches;
    cJSON *lj = cJSON_AddArrayToObject(v.res, "launches");
    for (size_t i = 0; i < ncl; i++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "kernel", cseq[i].kernel);
        cJSON_AddStringToObject(x, "from", v.hdr.nlaunches ? "candidate" : "task");
        /* the launch as written: grid, block, dynamic shared memory */
        cJSON *gj = cJSON_AddArrayToObject(x, "grid"), *bj = cJSON_AddArrayToObject(x, "block");
        for (int d = 0; d < 3; d++) {
            if (cseq[i].grid[d])
                cJSON_AddItemToArray(gj, cJSON_CreateString(cseq[i].grid[d]));
            if (cseq[i].block[d])
                cJSON_AddItemToArray(bj, cJSON_CreateString(cseq[i].block[d]));
        }
        cJSON_AddStringToObject(x, "shared_dynamic", cseq[i].shared ? cseq[i].shared : "0");
        cJSON_AddItemToArray(lj, x);
    }

    /* the GPU starts (cuInit, context: ~0.1 s) while NVRTC compiles for
     * the architecture expected; a different device means a recompile */
    pthread_t opener;
    int opening = !compile_only && !G.ok &&
                  pthread_create(&opener, NULL, gpu_open_thread, &why) == 0;
    if (!compile_only && !G.ok && !opening)
        gpu_open(&why);
    if (opening)   /* G is the opener's until the join */
        snprintf(arch, sizeof arch, "%s", o->arch ? o->arch : v.hdr.arch ? v.hdr.arch : "sm_90");
    else
        default_arch(o, v.hdr.arch, arch, sizeof arch);
    nvrtc_compile(o, src.data, cand_path ? cand_path : "candidate.cu", arch, 0, &v.cc);
    if (opening) {
        pthread_join(opener, NULL);
        if (G.ok)   /* the context was made current in the opener thread */
            cuCtxSetCurrent(G.ctx);
    }
    if (!compile_only && !G.ok) {
        set_verdict(&v, "error", "%s", why.data);
        goto out;
    }
    if (G.ok) {
        cJSON_AddItemToObject(v.res, "device", device_json(0));
        char want[32];
        default_arch(o, v.hdr.arch, want, sizeof want);
        if (strcmp(want, arch) != 0) {
            compiled_release(&v.cc);
            snprintf(arch, sizeof arch, "%s", want);
            nvrtc_compile(o, src.data, cand_path ? cand_path : "candidate.cu",
                          arch, 0, &v.cc);
        }
    }
    cJSON_AddItemToObject(v.res, "compile", compile_json(&v.cc, arch));
    if (!v.cc.ok) {
        set_verdict(&v, "compile_error", "NVRTC could not compile the candidate");
        goto out;
    }
    char rarch[32];
    default_arch(o, NULL, rarch, sizeof rarch);
    nvrtc_compile(o, rsrc.data, "reference.cu", rarch, 1, &v.rc);
    cJSON_AddItemToObject(v.res, "reference_compile", compile_json(&v.rc, rarch));
    if (!v.rc.ok) {
        set_verdict(&v, "error", "NVRTC could not compile the task's reference");
        goto out;
    }
    if (compile_only) {
        set_verdict(&v, "compiled", "compiled with NVRTC; not run (--compile-only)");
        goto out;
    }
    CUresult r = cuModuleLoadData(&v.cmod, v.cc.cubin);
    if (r) {
        set_verdict(&v, "compile_error", "cannot load the candidate's cubin: %s",
                    cu_name(r));
        goto out;
    }
    if ((r = cuModuleLoadData(&v.rmod, v.rc.cubin))) {
        set_verdict(&v, "error", "cannot load the reference: %s", cu_name(r));
        goto out;
    }
    /* per-kernel resources from the driver, for every kernel launched
     * (the ptxas report in the log is not always there) */
    {
        cJSON *ks = cJSON_GetObjectItem(cJSON_GetObjectItem(v.res, "compile"), "kernels");
        for (size_t i = 0; ks && i < ncl; i++) {
            CUfunction f;
            if (cuModuleGetFunction(&f, v.cmod, cseq[i].kernel))
                continue;
            cJSON *k = NULL, *it;
            cJSON_ArrayForEach(it, ks)
                if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(it, "name")) ?: "", cseq[i].kernel))
                    k = it;
            if (!k) {
                k = cJSON_CreateObject();
                cJSON_AddStringToObject(k, "name", cseq[i].kernel);
                cJSON_AddItemToArray(ks, k);
            }
            static const struct { const char *key; CUfunction_attribute a; } at[] = {
                { "registers", CU_FUNC_ATTRIBUTE_NUM_REGS },
                { "shared_static_bytes", CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES },
                { "local_bytes", CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES },
                { "max_threads_per_block", CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK },
            };
            for (size_t a = 0; a < sizeof at / sizeof at[0]; a++) {
                int x = 0;
                cuFuncGetAttribute(&x, at[a].a, f);
                cJSON_DeleteItemFromObject(k, at[a].key);
                cJSON_AddNumberToObject(k, at[a].key, x);
            }
        }
    }
    if (o->seed_set)
        v.seed_base = o->seed;
    else if (getrandom(&v.seed_base, sizeof v.seed_base, 0) != sizeof v.seed_base)
        v.seed_base = (uint64_t)time(NULL) * 2654435761u;
    /* 48 bits, so that the JSON number is exact and --seed repeats a run */
    v.seed_base &= 0xFFFFFFFFFFFFull;
    cJSON_AddNumberToObject(v.res, "seed", (double)v.seed_base);
    v.checks = cJSON_AddArrayToObject(v.res, "checks");
    v.timings = cJSON_AddArrayToObject(v.res, "timings");
    v.ps = calloc(v.task->nparams, sizeof *v.ps);
    v.maps = calloc(v.hdr.nmaps + 1, sizeof *v.maps);
    cJSON *mj = v.hdr.nmaps ? cJSON_AddArrayToObject(v.res, "tensormaps") : NULL;
    cl = calloc(ncl, sizeof *cl);
    rl = calloc(v.task->nlaunches, sizeof *rl);
    for (size_t si = 0; si < v.task->nshapes && !v.verdict; si++) {
        const kb_shape *s = &v.task->shapes[si];
        int timed = s->timed && !o->no_timing;
        if (shape_alloc(&v, s, timed) == 0)
            encode_maps(&v, s, mj);
        if (!v.verdict &&
            resolve(&v, s, v.cmod, cseq, ncl, cl, 1) == 0 &&
            resolve(&v, s, v.rmod, v.task->launches, v.task->nlaunches, rl, 0) == 0 &&
            check_shape(&v, s, cl, ncl, rl, v.task->nlaunches) == 0 && timed)
            time_shape(&v, s, cl, ncl, rl, v.task->nlaunches);
        if (!G.sticky)
            shape_free(&v);
    }
    if (v.nspeed) {
        double g = exp(v.speed_log_sum / v.nspeed);
        cJSON_AddNumberToObject(v.res, "speedup_geomean", g);
        if (g >= FASTER_MARGIN)
            set_verdict(&v, "faster", "correct on every check; %.2fx the "
                        "baseline (geomean)", g);
        else
            set_verdict(&v, "correct", "correct on every check; %.2fx the "
                        "baseline (geomean)", g);
    } else {
        set_verdict(&v, "correct", "correct on every check; not timed");
    }
out:
    if (!v.verdict)
        set_verdict(&v, "error", "internal error");
    cJSON_AddStringToObject(v.res, "verdict", v.verdict);
    cJSON_AddStringToObject(v.res, "reason", v.reason.data ? v.reason.data : "");
    {
        cJSON *pj = cJSON_AddObjectToObject(v.res, "protocol");
        cJSON_AddNumberToObject(pj, "seeds", NSEEDS);
        cJSON_AddNumberToObject(pj, "warmup_runs", NWARM);
        cJSON_AddNumberToObject(pj, "l2_flush_bytes", (double)G.flush_bytes);
        cJSON_AddNumberToObject(pj, "timeout_ms", o->timeout_ms);
        cJSON_AddNumberToObject(pj, "faster_margin", FASTER_MARGIN);
        cJSON_AddNumberToObject(pj, "floor_slack", FLOOR_SLACK);
    }
    cJSON_AddBoolToObject(v.res, "sticky_error", G.sticky);
    cJSON_AddNumberToObject(v.res, "wall_ms", round((kb_now_ms() - t0) * 100) / 100);
    free(cl);
    free(rl);
    if (!G.sticky) {
        if (v.cmod)
            cuModuleUnload(v.cmod);
        if (v.rmod)
            cuModuleUnload(v.rmod);
    }
    free(v.ps);
    compiled_release(&v.cc);
    compiled_release(&v.rc);
    kb_cand_header_release(&v.hdr);
    free(v.maps);
    kb_task_free(v.task);
    kb_buf_release(&src);
    kb_buf_release(&rsrc);
    kb_buf_release(&why);
    kb_buf_release(&v.reason);
    return v.res;
}

/* ------------------------------------------------------------------ --reference */

/* The reference on the shapes cheap enough for the CPU (float64) against
 * the CPU implementation, one seed per distribution. */
static cJSON *check_reference(const vopts *o, const char *task_dir)
{
    vctx v;
    memset(&v, 0, sizeof v);
    v.o = o;
    kb_buf_init(&v.reason, 0);
    v.res = cJSON_CreateObject();
    cJSON_AddStringToObject(v.res, "task", task_dir);
    kb_buf rsrc, why;
    kb_buf_init(&rsrc, 8u << 20);
    kb_buf_init(&why, 0);
    rlaunch *rl = NULL;
    char arch[32];
    double t0 = kb_now_ms();
    if (load_task(&v, task_dir, &rsrc))
        goto out;
    if (gpu_open(&why)) {
        set_verdict(&v, "error", "%s", why.data);
        goto out;
    }
    default_arch(o, NULL, arch, sizeof arch);
    nvrtc_compile(o, rsrc.data, "reference.cu", arch, 1, &v.rc);
    CUresult r;
    if (!v.rc.ok || (r = cuModuleLoadData(&v.rmod, v.rc.cubin))) {
        set_verdict(&v, "error", "cannot compile the reference");
        goto out;
    }
    v.checks = cJSON_AddArrayToObject(v.res, "checks");
    v.ps = calloc(v.task->nparams, sizeof *v.ps);
    rl = calloc(v.task->nlaunches, sizeof *rl);
    v.seed_base = o->seed_set ? o->seed : 12345;
    int nchecked = 0;
    for (size_t si = 0; si < v.task->nshapes && !v.verdict; si++) {
        const kb_shape *s = &v.task->shapes[si];
        double flops = 0, bytes = 0;
        if (v.task->roof_flops)
            kb_task_eval(v.task, s, v.task->roof_flops, &flops, NULL);
        if (v.task->roof_bytes)
            kb_task_eval(v.task, s, v.task->roof_bytes, &bytes, NULL);
        if (flops > 3e9 || bytes > 64e6)
            continue;   /* too large for the CPU in a test */
        if (shape_alloc(&v, s, 0) || resolve(&v, s, v.rmod, v.task->launches,
                                          v.task->nlaunches, rl, 0))
            break;
        double atol = shape_tol(&v, s, v.task->atol), rtol = shape_tol(&v, s, v.task->rtol);
        for (int di = 0; di < 2 && !v.verdict; di++) {
            int to = 0;
            uint64_t seed = v.seed_base + (uint64_t)di * 31 + si * 1009;
            cJSON *c = cJSON_CreateObject();
            cJSON_AddItemToArray(v.checks, c);
            cJSON_AddStringToObject(c, "shape", s->name);
            cJSON *dj = cJSON_AddObjectToObject(c, "dist");
            r = gen_inputs(&v, seed, di, dj);
            if (!r)
                r = poison_side(&v, 0, POISON_NAN);
            if (!r)
                r = run_seq(&v, rl, v.task->nlaunches, 0);
            if (!r)
                r = sync_deadline(60000, &to);
            if (r || to) {
                set_verdict(&v, "error", "the reference failed: %s", cu_name(r));
                break;
            }
            size_t np = v.task->nparams;
            double **bufs = calloc(np, sizeof *bufs), *vals = calloc(np, sizeof *vals);
            double **gpu_out = calloc(np, sizeof *gpu_out);
            for (size_t i = 0; i < np; i++) {
                const kb_task_param *p = &v.task->params[i];
                pstate *st = &v.ps[i];
                vals[i] = p->role == KB_ROLE_SCALAR && p->dtype == KB_DT_F32 ? (double)st->scalar.f : st->val;
                if (!is_buffer(p))
                    continue;
                bufs[i] = calloc(st->elems + 1, sizeof(double));
                if (p->role == KB_ROLE_SCRATCH)
                    continue;
                unsigned char *h = malloc(st->bytes + 1);
                size_t es = kb_dtype_size(p->dtype);
                CUdeviceptr src = p->role == KB_ROLE_INPUT ? st->in.ptr : st->ref.ptr;
                cuMemcpyDtoH(h, src, st->bytes);
                double *d = calloc(st->elems + 1, sizeof(double));
                for (size_t k = 0; k < st->elems; k++)
                    d[k] = to_double(h + k * es, p->dtype);
                free(h);
                if (p->role == KB_ROLE_INPUT)
                    memcpy(bufs[i], d, st->elems * sizeof(double)), free(d);
                else
                    gpu_out[i] = d;
            }
            double tc = kb_now_ms();
            if (kbv_cpu_ref(v.task, bufs, vals, &why) != 0) {
                set_verdict(&v, "error", "%s", why.data);
            } else {
                cJSON_AddNumberToObject(c, "cpu_ms", kb_now_ms() - tc);
                int ok = 1;
                for (size_t i = 0; i < np; i++) {
                    if (!gpu_out[i])
                        continue;
                    double mabs = 0, mrel = 0;
                    size_t nbad = 0, first = 0;
                    for (size_t k = 0; k < v.ps[i].elems; k++) {
                        double g = gpu_out[i][k], c0 = bufs[i][k];
                        double e = fabs(g - c0);
                        if (!isfinite(g) || e > atol + rtol * fabs(c0)) {
                            if (!nbad++)
                                first = k;
                        }
                        if (isfinite(e)) {
                            if (e > mabs)
                                mabs = e;
                            if (e / fmax(fabs(c0), 1e-30) > mrel)
                                mrel = e / fmax(fabs(c0), 1e-30);
                        }
                    }
                    add_num(c, "max_abs_err", mabs);
                    add_num(c, "max_rel_err", mrel);
                    cJSON_AddNumberToObject(c, "mismatches", (double)nbad);
                    if (nbad) {
                        ok = 0;
                        set_verdict(&v, "incorrect", "the reference differs from "
                                    "the CPU float64 result on shape '%s' (%zu "
                                    "mismatches, first at %zu: %g vs %g)", s->name,
                                    nbad, first, gpu_out[i][first], bufs[i][first]);
                    }
                }
                cJSON_AddBoolToObject(c, "ok", ok);
                nchecked++;
            }
            for (size_t i = 0; i < np; i++) {
                free(bufs[i]);
                free(gpu_out[i]);
            }
            free(bufs);
            free(vals);
            free(gpu_out);
        }
        shape_free(&v);
    }
    if (!v.verdict && nchecked == 0)
        set_verdict(&v, "error", "no shape is small enough for the CPU check");
    if (!v.verdict) {
        char msg[64];
        snprintf(msg, sizeof msg, "%d", nchecked);
        set_verdict(&v, "correct", "the reference matches the CPU float64 "
                    "implementation in %s checks", msg);
    }
out:
    if (!v.verdict)
        set_verdict(&v, "error", "internal error");
    cJSON_AddStringToObject(v.res, "verdict", v.verdict);
    cJSON_AddStringToObject(v.res, "reason", v.reason.data ? v.reason.data : "");
    cJSON_AddNumberToObject(v.res, "wall_ms", kb_now_ms() - t0);
    if (v.rmod)
        cuModuleUnload(v.rmod);
    free(rl);
    free(v.ps);
    compiled_release(&v.rc);
    kb_task_free(v.task);
    kb_buf_release(&rsrc);
    kb_buf_release(&why);
    kb_buf_release(&v.reason);
    return v.res;
}

/* ------------------------------------------------------------------ main */

static int exit_for(const cJSON *res)
{
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(res, "verdict"));
    if (!v)
        return 4;
    if (!strcmp(v, "correct") || !strcmp(v, "faster") || !strcmp(v, "compiled"))
        return 0;
    if (!strcmp(v, "error"))
        return 4;
    return 1;
}

static void print_result(const vopts *o, cJSON *res)
{
    if (o->json) {
        char *s = cJSON_PrintUnformatted(res);
        puts(s);
        free(s);
        return;
    }
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(res, "verdict"));
    const char *why = cJSON_GetStringValue(cJSON_GetObjectItem(res, "reason"));
    const char *task = cJSON_GetStringValue(cJSON_GetObjectItem(res, "task"));
    printf("%s: %s\n  %s\n", task ? task : "?", v ? v : "?", why ? why : "");
    cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(res, "timings")) {
        double c = cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(t, "candidate_ms"), "median"));
        double b = cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(t, "baseline_ms"), "median"));
        double f = cJSON_GetNumberValue(cJSON_GetObjectItem(t, "floor_ms"));
        printf("  %s: candidate %.4f ms, %s %.4f ms, floor %.4f ms, speedup %.2fx\n",
               cJSON_GetStringValue(cJSON_GetObjectItem(t, "shape")), c,
               cJSON_GetStringValue(cJSON_GetObjectItem(t, "baseline")), b, f,
               cJSON_GetNumberValue(cJSON_GetObjectItem(t, "speedup")));
    }
    double w = cJSON_GetNumberValue(cJSON_GetObjectItem(res, "wall_ms"));
    printf("  wall %.1f ms\n", w);
}

static int serve(vopts *o)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    o->json = 1;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        if (n > 16 << 20)
            continue;
        cJSON *req = cJSON_Parse(line);
        cJSON *res;
        if (!cJSON_IsObject(req)) {
            res = cJSON_CreateObject();
            cJSON_AddStringToObject(res, "verdict", "error");
            cJSON_AddStringToObject(res, "reason", "a request is one JSON object a line");
        } else if (cJSON_IsTrue(cJSON_GetObjectItem(req, "device_info"))) {
            kb_buf why;
            kb_buf_init(&why, 0);
            if (gpu_open(&why) == 0) {
                res = device_json(1);
            } else {
                res = cJSON_CreateObject();
                cJSON_AddStringToObject(res, "verdict", "error");
                cJSON_AddStringToObject(res, "reason", why.data);
            }
            kb_buf_release(&why);
        } else {
            const char *task = cJSON_GetStringValue(cJSON_GetObjectItem(req, "task"));
            const char *cand = cJSON_GetStringValue(cJSON_GetObjectItem(req, "candidate"));
            const char *src = cJSON_GetStringValue(cJSON_GetObjectItem(req, "source"));
            vopts o2 = *o;
            if (cJSON_IsTrue(cJSON_GetObjectItem(req, "no_timing")))
                o2.no_timing = 1;
            if (!task) {
                res = cJSON_CreateObject();
                cJSON_AddStringToObject(res, "verdict", "error");
                cJSON_AddStringToObject(res, "reason", "a request needs \"task\"");
            } else {
                res = verify(&o2, task, cand, src, 0);
            }
        }
        cJSON *id = req ? cJSON_GetObjectItem(req, "id") : NULL;
        if (id)
            cJSON_AddItemToObject(res, "id", cJSON_Duplicate(id, 1));
        char *s = cJSON_PrintUnformatted(res);
        puts(s);
        fflush(stdout);
        free(s);
        cJSON_Delete(res);
        cJSON_Delete(req);
        if (G.sticky) {
            /* the context is unusable: the caller starts a new process */
            free(line);
            fflush(stdout);
            _exit(3);
        }
    }
    free(line);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
        "usage: kb-verify [options] TASK_DIR CANDIDATE.cu\n"
        "       kb-verify --reference TASK_DIR\n"
        "       kb-verify --compile-only TASK_DIR [CANDIDATE.cu]\n"
        "       kb-verify --device-info [--json]\n"
        "       kb-verify --serve\n\n"
        "options:\n"
        "  --json            print the JSON result (one line)\n"
        "  --arch A          NVRTC target (default: the device's, sm_90 without one)\n"
        "  --seed N          base seed (default: random)\n"
        "  --runs N          at most N timed runs per side (default 50)\n"
        "  --timeout-ms N    limit for one launch sequence (default 5000)\n"
        "  --no-timing       correctness only\n"
        "  --cache DIR       reference cubin cache ($KB_VERIFY_CACHE)\n");
}

int main(int argc, char **argv)
{
    vopts o = { 0 };
    o.runs_max = 50;
    o.timeout_ms = 5000;
    int mode = 0;  /* 0 verify, 1 compile-only, 2 reference, 3 device, 4 serve */
    const char *pos[2] = { NULL, NULL };
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long x;
        if (!strcmp(a, "--json")) o.json = 1;
        else if (!strcmp(a, "--compile-only")) mode = 1;
        else if (!strcmp(a, "--reference")) mode = 2;
        else if (!strcmp(a, "--device-info")) mode = 3;
        else if (!strcmp(a, "--serve")) mode = 4;
        else if (!strcmp(a, "--no-timing")) o.no_timing = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--arch") && i + 1 < argc) o.arch = argv[++i];
        else if (!strcmp(a, "--cache") && i + 1 < argc) o.cache_dir = argv[++i];
        else if (!strcmp(a, "--seed") && i + 1 < argc) {
            char *end;
            o.seed = strtoull(argv[++i], &end, 10);
            o.seed_set = 1;
            if (*end) { usage(stderr); return 2; }
        } else if (!strcmp(a, "--runs") && i + 1 < argc &&
                   kb_parse_long(argv[i + 1], 10, 100000, &x) == KB_OK) {
            o.runs_max = (int)x; i++;
        } else if (!strcmp(a, "--timeout-ms") && i + 1 < argc &&
                   kb_parse_long(argv[i + 1], 1, 3600000, &x) == KB_OK) {
            o.timeout_ms = (double)x; i++;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kb-verify: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            usage(stderr);
            return 2;
        }
    }
    cJSON *res = NULL;
    if (mode == 4)
        return serve(&o);
    if (mode == 3) {
        kb_buf why;
        kb_buf_init(&why, 0);
        if (gpu_open(&why)) {
            fprintf(stderr, "kb-verify: %s\n", why.data);
            kb_buf_release(&why);
            return 4;
        }
        res = device_json(1);
        char *s = o.json ? cJSON_PrintUnformatted(res) : cJSON_Print(res);
        puts(s);
        free(s);
        cJSON_Delete(res);
        return 0;
    }
    if (npos < 1 || (mode == 0 && npos < 2) || (mode == 2 && npos != 1)) {
        usage(stderr);
        return 2;
    }
    if (mode == 2)
        res = check_reference(&o, pos[0]);
    else
        res = verify(&o, pos[0], pos[1], NULL, mode == 1);
    print_result(&o, res);
    fflush(stdout);
    int rc = exit_for(res);
    cJSON_Delete(res);
    /* leave without tearing the context down: the driver frees it with the
     * process (tens of ms saved), and a hung or broken context cannot be
     * torn down cleanly anyway */
    fflush(stdout);
    if (!G.ok)
        return rc;
    _exit(rc);
}
