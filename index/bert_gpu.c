/*
 * bert_gpu.c - the MiniLM encoder of bert.c on a CUDA GPU, for bulk
 * embedding (ingest, --reembed): the matrix products in cuBLAS (float32,
 * no TF32), the rest in the kernels of index/bert_gpu.cu, which is
 * embedded here as text and compiled by NVRTC for the device found.
 *
 * Nothing of CUDA is needed to build kb or to run it without a GPU: the
 * driver (libcuda.so.1), cuBLAS and NVRTC are opened with dlopen, the way
 * kb-verify opens the driver, and the few types and entry points used are
 * declared below (their ABI is stable: the _v2 names are the ones cuda.h
 * maps to). Any of them missing, or no device kb can use, is
 * KB_ERR_NOTFOUND with the reason; a GPU that is there but fails is
 * KB_ERR_GPU. Either way the embedder goes on on the CPU.
 *
 * A batch is packed as on the CPU (no padding); one pass holds as many
 * tokens as a share of the device's free memory allows.
 */
#include "index/index.h"

#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* index/bert_gpu.cu, NUL-terminated (the Makefile rebuilds this file when
 * it changes) */
__asm__(".section .rodata\n.global kb_bert_gpu_src\nkb_bert_gpu_src:\n"
        ".incbin \"index/bert_gpu.cu\"\n.byte 0\n.previous\n");
extern const char kb_bert_gpu_src[];

#define H KB_BERT_DIM
#define FF KB_BERT_FF
#define NHEAD 12
#define DHEAD 32
#define ATTN_THREADS 256
#define ATTN_WARPS (ATTN_THREADS / 32)
/* a pass's tokens at most, and its share of the free device memory */
#define PASS_TOKENS_MAX (1u << 20)
#define MEM_SHARE 0.5

/* ------------------------------------------------------------ the libraries */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct cublasContext *cublasHandle_t;
typedef struct _nvrtcProgram *nvrtcProgram;

enum {
    CU_ATTR_CC_MAJOR = 75, CU_ATTR_CC_MINOR = 76, CU_ATTR_SMEM_OPTIN = 97,
    CU_FUNC_MAX_DYN_SMEM = 8, CUBLAS_OP_N = 0, CUBLAS_OP_T = 1
};

/* each entry point: its name in the library, its type */
#define CU_FNS(X)                                                              \
    X(cuInit, CUresult, (unsigned))                                            \
    X(cuDeviceGetCount, CUresult, (int *))                                     \
    X(cuDeviceGet, CUresult, (CUdevice *, int))                                \
    X(cuDeviceGetName, CUresult, (char *, int, CUdevice))                      \
    X(cuDeviceGetAttribute, CUresult, (int *, int, CUdevice))                  \
    X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext *, CUdevice))             \
    X(cuDevicePrimaryCtxRelease_v2, CUresult, (CUdevice))                      \
    X(cuCtxSetCurrent, CUresult, (CUcontext))                                  \
    X(cuMemGetInfo_v2, CUresult, (size_t *, size_t *))                         \
    X(cuMemAlloc_v2, CUresult, (CUdeviceptr *, size_t))                        \
    X(cuMemFree_v2, CUresult, (CUdeviceptr))                                   \
    X(cuMemcpyHtoD_v2, CUresult, (CUdeviceptr, const void *, size_t))          \
    X(cuMemcpyDtoH_v2, CUresult, (void *, CUdeviceptr, size_t))                \
    X(cuModuleLoadData, CUresult, (CUmodule *, const void *))                  \
    X(cuModuleUnload, CUresult, (CUmodule))                                    \
    X(cuModuleGetFunction, CUresult, (CUfunction *, CUmodule, const char *))   \
    X(cuFuncSetAttribute, CUresult, (CUfunction, int, int))                    \
    X(cuLaunchKernel, CUresult, (CUfunction, unsigned, unsigned, unsigned,     \
                                 unsigned, unsigned, unsigned, unsigned,       \
                                 CUstream, void **, void **))                  \
    X(cuGetErrorName, CUresult, (CUresult, const char **))
#define BLAS_FNS(X)                                                            \
    X(cublasCreate_v2, int, (cublasHandle_t *))                                \
    X(cublasDestroy_v2, int, (cublasHandle_t))                                 \
    X(cublasSgemm_v2, int, (cublasHandle_t, int, int, int, int, int,           \
                            const float *, const float *, int, const float *,  \
                            int, const float *, float *, int))
#define RTC_FNS(X)                                                             \
    X(nvrtcCreateProgram, int, (nvrtcProgram *, const char *, const char *,    \
                                int, const char *const *, const char *const *)) \
    X(nvrtcCompileProgram, int, (nvrtcProgram, int, const char *const *))      \
    X(nvrtcGetProgramLogSize, int, (nvrtcProgram, size_t *))                   \
    X(nvrtcGetProgramLog, int, (nvrtcProgram, char *))                         \
    X(nvrtcGetCUBINSize, int, (nvrtcProgram, size_t *))                        \
    X(nvrtcGetCUBIN, int, (nvrtcProgram, char *))                              \
    X(nvrtcDestroyProgram, int, (nvrtcProgram *))

#define DECL(name, ret, args) ret (*name) args;
typedef struct {
    void *cu, *blas, *rtc;             /* dlopen handles */
    CU_FNS(DECL)
    BLAS_FNS(DECL)
    RTC_FNS(DECL)
} gpu_lib;
#undef DECL

/* the kernels of bert_gpu.cu */
enum { K_EMBED, K_ADD_LN, K_BIAS, K_GELU, K_ATTN, K_POOL, NKERNELS };
static const char *const kernel_names[NKERNELS] = {
    "embed_ln", "add_ln", "add_bias", "bias_gelu", "attention", "pool"
};

typedef struct {
    CUdeviceptr qkv_w, qkv_b, ao_w, ao_b, ln1_w, ln1_b;
    CUdeviceptr in_w, in_b, out_w, out_b, ln2_w, ln2_b;
} dlayer;

struct kb_bert_gpu {
    gpu_lib lib;
    CUdevice dev;
    CUcontext ctx;
    int have_ctx;
    CUmodule mod;
    CUfunction fn[NKERNELS];
    cublasHandle_t blas;
    char name[128];
    size_t vocab;
    size_t maxlen;                       /* longest sequence attention takes */
    CUdeviceptr weights;                 /* every weight, one allocation */
    CUdeviceptr word, pos, type, eln_w, eln_b;
    dlayer L[KB_BERT_LAYERS];
    CUdeviceptr act;                     /* a pass's activations and inputs */
    size_t tokens;                       /* a pass's tokens at most */
    CUdeviceptr x, qkv, ctxv, ff, ids, posid, start, len, out;
    int32_t *h_pos, *h_start, *h_len;    /* [tokens] host staging */
};

/* Opens the first of names that loads (each as given, then under
 * $CUDA_HOME/lib64 and /usr/local/cuda/lib64). */
static void *open_lib(const char *const *names)
{
    const char *home = getenv("CUDA_HOME");
    const char *dirs[] = { home && *home ? home : NULL, "/usr/local/cuda" };
    for (const char *const *n = names; *n; n++) {
        void *h = dlopen(*n, RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
        for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
            char path[512];
            if (!dirs[d])
                continue;
            snprintf(path, sizeof path, "%s/lib64/%s", dirs[d], *n);
            if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL)) != NULL)
                return h;
        }
    }
    return NULL;
}

static kb_rc load_libs(gpu_lib *L, kb_err *err)
{
    static const char *const cu[] = { "libcuda.so.1", NULL };
    static const char *const blas[] = { "libcublas.so.13", "libcublas.so.12",
                                        "libcublas.so.11", "libcublas.so", NULL };
    static const char *const rtc[] = { "libnvrtc.so.13", "libnvrtc.so.12",
                                       "libnvrtc.so.11.2", "libnvrtc.so", NULL };
    if (!(L->cu = open_lib(cu)))
        return kb_err_set(err, KB_ERR_NOTFOUND, "no CUDA driver (libcuda.so.1 not found)");
    if (!(L->blas = open_lib(blas)))
        return kb_err_set(err, KB_ERR_NOTFOUND, "no cuBLAS (libcublas.so not found)");
    if (!(L->rtc = open_lib(rtc)))
        return kb_err_set(err, KB_ERR_NOTFOUND, "no NVRTC (libnvrtc.so not found)");
#define LOAD(handle, name, ret, args)                                          \
    if (!(*(void **)&L->name = dlsym(L->handle, #name)))                       \
        return kb_err_set(err, KB_ERR_NOTFOUND, "the CUDA libraries lack " #name);
#define LOAD_CU(name, ret, args) LOAD(cu, name, ret, args)
#define LOAD_BLAS(name, ret, args) LOAD(blas, name, ret, args)
#define LOAD_RTC(name, ret, args) LOAD(rtc, name, ret, args)
    CU_FNS(LOAD_CU)
    BLAS_FNS(LOAD_BLAS)
    RTC_FNS(LOAD_RTC)
#undef LOAD
#undef LOAD_CU
#undef LOAD_BLAS
#undef LOAD_RTC
    return KB_OK;
}

/* A driver call's failure as rc naming what was done. */
static kb_rc cu_error(kb_bert_gpu *g, kb_rc rc, CUresult r, const char *what, kb_err *err)
{
    const char *name = NULL;
    if (!g->lib.cuGetErrorName || g->lib.cuGetErrorName(r, &name) != 0 || !name)
        name = "unknown error";
    return kb_err_set(err, rc, "cannot %s on the GPU: %s (%d)", what, name, r);
}

static kb_rc cu_fail(kb_bert_gpu *g, CUresult r, const char *what, kb_err *err)
{
    return cu_error(g, KB_ERR_GPU, r, what, err);
}

#define CU(call, what)                                                         \
    do {                                                                       \
        CUresult cu_r_ = (call);                                               \
        if (cu_r_ != 0)                                                        \
            return cu_fail(g, cu_r_, what, err);                               \
    } while (0)

/* ------------------------------------------------------------ opening */

/* The device (KB_CUDA_DEVICE, else 0), its primary context, its name. */
static kb_rc open_device(kb_bert_gpu *g, kb_err *err)
{
    const gpu_lib *L = &g->lib;
    int n = 0;
    CUresult r = L->cuInit(0);
    if (r != 0)   /* a driver with no device it can start (a container) */
        return cu_error(g, KB_ERR_NOTFOUND, r, "start the driver", err);
    CU(L->cuDeviceGetCount(&n), "count the devices");
    long want = 0;
    const char *env = getenv("KB_CUDA_DEVICE");
    if (env && *env && kb_parse_long(env, 0, 1024, &want) != KB_OK)
        return kb_err_set(err, KB_ERR_USAGE, "bad KB_CUDA_DEVICE '%s'", env);
    if (n < 1)
        return kb_err_set(err, KB_ERR_NOTFOUND, "no GPU found");
    if (want >= n)
        return kb_err_set(err, KB_ERR_GPU, "no GPU %ld (KB_CUDA_DEVICE): %d found", want, n);
    CU(L->cuDeviceGet(&g->dev, (int)want), "open the device");
    CU(L->cuDevicePrimaryCtxRetain(&g->ctx, g->dev), "make a context");
    g->have_ctx = 1;
    CU(L->cuCtxSetCurrent(g->ctx), "use the context");
    CU(L->cuDeviceGetName(g->name, (int)sizeof g->name - 1, g->dev), "name the device");
    return KB_OK;
}

/* bert_gpu.cu compiled by NVRTC for the device's architecture, loaded. */
static kb_rc build_kernels(kb_bert_gpu *g, kb_err *err)
{
    const gpu_lib *L = &g->lib;
    int major = 0, minor = 0;
    CU(L->cuDeviceGetAttribute(&major, CU_ATTR_CC_MAJOR, g->dev), "read the architecture");
    CU(L->cuDeviceGetAttribute(&minor, CU_ATTR_CC_MINOR, g->dev), "read the architecture");
    char arch[32];
    snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d%d", major, minor);
    const char *opts[] = { arch, "-default-device" };
    nvrtcProgram prog = NULL;
    char *cubin = NULL, *log = NULL;
    size_t n = 0;
    kb_rc rc = KB_OK;
    if (L->nvrtcCreateProgram(&prog, kb_bert_gpu_src, "bert_gpu.cu", 0, NULL, NULL) != 0)
        return kb_err_set(err, KB_ERR_GPU, "NVRTC cannot create a program");
    if (L->nvrtcCompileProgram(prog, 2, opts) != 0) {
        size_t ln = 0;
        L->nvrtcGetProgramLogSize(prog, &ln);
        if (ln && (log = malloc(ln + 1)) != NULL && L->nvrtcGetProgramLog(prog, log) == 0)
            log[ln] = '\0';
        rc = kb_err_set(err, KB_ERR_GPU, "NVRTC cannot compile the encoder for sm_%d%d: %.300s",
                        major, minor, log ? log : "no log");
    } else if (L->nvrtcGetCUBINSize(prog, &n) != 0 || !n || !(cubin = malloc(n)) ||
               L->nvrtcGetCUBIN(prog, cubin) != 0) {
        rc = kb_err_set(err, KB_ERR_GPU, "NVRTC gave no machine code for sm_%d%d", major, minor);
    }
    L->nvrtcDestroyProgram(&prog);
    free(log);
    if (rc == KB_OK) {
        CUresult r = L->cuModuleLoadData(&g->mod, cubin);
        if (r != 0)
            rc = cu_fail(g, r, "load the encoder's kernels", err);
    }
    free(cubin);
    for (int k = 0; k < NKERNELS && rc == KB_OK; k++) {
        CUresult r = L->cuModuleGetFunction(&g->fn[k], g->mod, kernel_names[k]);
        if (r != 0)
            rc = cu_fail(g, r, "find a kernel", err);
    }
    return rc;
}

/* Attention stages a sequence's keys and values in shared memory: as long
 * a sequence as the device lets one block have. */
static kb_rc size_attention(kb_bert_gpu *g, kb_err *err)
{
    int optin = 0;
    CU(g->lib.cuDeviceGetAttribute(&optin, CU_ATTR_SMEM_OPTIN, g->dev),
       "read the shared memory size");
    size_t per = (33 + 32 + ATTN_WARPS) * sizeof(float);
    size_t want = KB_BERT_MAXPOS * per;
    size_t have = (size_t)optin < want ? (size_t)optin : want;
    g->maxlen = have / per;
    if (g->maxlen < KB_TOK_MAX_LEN)   /* one older than Volta: not one kb can use */
        return kb_err_set(err, KB_ERR_NOTFOUND, "the GPU's shared memory (%d bytes a block) is "
                          "too small for sequences of %d tokens", optin, KB_TOK_MAX_LEN);
    CU(g->lib.cuFuncSetAttribute(g->fn[K_ATTN], CU_FUNC_MAX_DYN_SMEM, (int)have),
       "size attention's shared memory");
    return KB_OK;
}

/* Every weight in one allocation, in the CPU's layout. */
static kb_rc upload_weights(kb_bert_gpu *g, const kb_bert *b, kb_err *err)
{
    kb_bert_weights w;
    kb_bert_get_weights(b, &w);
    g->vocab = w.vocab;
    size_t per_layer = 3 * H * H + 3 * H + H * H + H + 2 * H + (size_t)FF * H + FF +
                       (size_t)H * FF + H + 2 * H;
    size_t total = (w.vocab + KB_BERT_MAXPOS + 2 + 2) * H + KB_BERT_LAYERS * per_layer;
    CU(g->lib.cuMemAlloc_v2(&g->weights, total * sizeof(float)), "allocate the weights");
    CUdeviceptr at = g->weights;
#define PUT(dst, src, count)                                                   \
    do {                                                                       \
        (dst) = at;                                                            \
        CU(g->lib.cuMemcpyHtoD_v2(at, (src), (count) * sizeof(float)),         \
           "copy the weights");                                                \
        at += (count) * sizeof(float);                                         \
    } while (0)
    PUT(g->word, w.word, w.vocab * H);
    PUT(g->pos, w.pos, (size_t)KB_BERT_MAXPOS * H);
    PUT(g->type, w.type, 2 * H);
    PUT(g->eln_w, w.eln_w, H);
    PUT(g->eln_b, w.eln_b, H);
    for (int l = 0; l < KB_BERT_LAYERS; l++) {
        dlayer *D = &g->L[l];
        /* fused on the device: query, key and value rows back to back */
        CUdeviceptr kv;
        PUT(D->qkv_w, w.L[l].qkv_w[0], H * H);
        PUT(kv, w.L[l].qkv_w[1], H * H);
        PUT(kv, w.L[l].qkv_w[2], H * H);
        (void)kv;
        PUT(D->qkv_b, w.L[l].qkv_b, 3 * H);
        PUT(D->ao_w, w.L[l].ao_w, H * H);
        PUT(D->ao_b, w.L[l].ao_b, H);
        PUT(D->ln1_w, w.L[l].ln1_w, H);
        PUT(D->ln1_b, w.L[l].ln1_b, H);
        PUT(D->in_w, w.L[l].in_w, (size_t)FF * H);
        PUT(D->in_b, w.L[l].in_b, FF);
        PUT(D->out_w, w.L[l].out_w, (size_t)H * FF);
        PUT(D->out_b, w.L[l].out_b, H);
        PUT(D->ln2_w, w.L[l].ln2_w, H);
        PUT(D->ln2_b, w.L[l].ln2_b, H);
    }
#undef PUT
    return KB_OK;
}

/* A pass's buffers: as many tokens as MEM_SHARE of the free memory holds
 * (at most PASS_TOKENS_MAX, or max_tokens when given). */
static kb_rc alloc_pass(kb_bert_gpu *g, size_t max_tokens, kb_err *err)
{
    size_t free_b = 0, total_b = 0;
    CU(g->lib.cuMemGetInfo_v2(&free_b, &total_b), "read the free memory");
    /* activations, then ids, positions, starts, lengths and vectors */
    size_t per_token = (H + 3 * H + H + FF) * sizeof(float) + 4 * sizeof(int32_t) +
                       H * sizeof(float);
    size_t n = (size_t)((double)free_b * MEM_SHARE) / per_token;
    if (n > PASS_TOKENS_MAX)
        n = PASS_TOKENS_MAX;
    if (max_tokens && n > max_tokens)
        n = max_tokens;
    if (n < KB_TOK_MAX_LEN)
        return kb_err_set(err, KB_ERR_GPU, "too little free GPU memory (%zu MiB)",
                          free_b >> 20);
    g->tokens = n;
    CU(g->lib.cuMemAlloc_v2(&g->act, n * per_token), "allocate the activations");
    g->x = g->act;
    g->qkv = g->x + n * H * sizeof(float);
    g->ctxv = g->qkv + n * 3 * H * sizeof(float);
    g->ff = g->ctxv + n * H * sizeof(float);
    g->out = g->ff + n * FF * sizeof(float);
    g->ids = g->out + n * H * sizeof(float);
    g->posid = g->ids + n * sizeof(int32_t);
    g->start = g->posid + n * sizeof(int32_t);
    g->len = g->start + n * sizeof(int32_t);
    g->h_pos = malloc(n * sizeof *g->h_pos);
    g->h_start = malloc(n * sizeof *g->h_start);
    g->h_len = malloc(n * sizeof *g->h_len);
    if (!g->h_pos || !g->h_start || !g->h_len)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return KB_OK;
}

kb_rc kb_bert_gpu_open(const kb_bert *b, size_t max_tokens, kb_bert_gpu **out,
                       kb_err *err)
{
    *out = NULL;
    kb_bert_gpu *g = calloc(1, sizeof *g);
    if (!g)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_rc rc = load_libs(&g->lib, err);
    if (rc == KB_OK)
        rc = open_device(g, err);
    if (rc == KB_OK && g->lib.cublasCreate_v2(&g->blas) != 0) {
        g->blas = NULL;
        rc = kb_err_set(err, KB_ERR_GPU, "cuBLAS cannot start");
    }
    if (rc == KB_OK)
        rc = build_kernels(g, err);
    if (rc == KB_OK)
        rc = size_attention(g, err);
    if (rc == KB_OK)
        rc = upload_weights(g, b, err);
    if (rc == KB_OK)
        rc = alloc_pass(g, max_tokens, err);
    if (rc != KB_OK) {
        kb_bert_gpu_free(g);
        return rc;
    }
    *out = g;
    return KB_OK;
}

void kb_bert_gpu_free(kb_bert_gpu *g)
{
    if (!g)
        return;
    if (g->have_ctx) {
        g->lib.cuCtxSetCurrent(g->ctx);
        if (g->blas)
            g->lib.cublasDestroy_v2(g->blas);
        if (g->act)
            g->lib.cuMemFree_v2(g->act);
        if (g->weights)
            g->lib.cuMemFree_v2(g->weights);
        if (g->mod)
            g->lib.cuModuleUnload(g->mod);
        g->lib.cuDevicePrimaryCtxRelease_v2(g->dev);
    }
    /* the libraries stay loaded: unloading the driver is not safe while
     * cuBLAS's own threads may hold it */
    free(g->h_pos);
    free(g->h_start);
    free(g->h_len);
    free(g);
}

const char *kb_bert_gpu_name(const kb_bert_gpu *g)
{
    return g->name;
}

/* ------------------------------------------------------------ forward */

/* y[rows][n] = x[rows][k] W^T with W [n][k] row-major: in cuBLAS's
 * column-major terms y^T = W^T' x^T, W read transposed. */
static kb_rc gemm(kb_bert_gpu *g, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y,
                  size_t rows, int n, int k, kb_err *err)
{
    const float one = 1.0f, zero = 0.0f;
    if (g->lib.cublasSgemm_v2(g->blas, CUBLAS_OP_T, CUBLAS_OP_N, n, (int)rows, k, &one,
                              (const float *)(uintptr_t)w, k,
                              (const float *)(uintptr_t)x, k, &zero,
                              (float *)(uintptr_t)y, n) != 0)
        return kb_err_set(err, KB_ERR_GPU, "cuBLAS cannot multiply (%zu x %d x %d)",
                          rows, n, k);
    return KB_OK;
}

static kb_rc launch(kb_bert_gpu *g, int k, unsigned gx, unsigned gy, unsigned threads,
                    unsigned smem, void **args, kb_err *err)
{
    CU(g->lib.cuLaunchKernel(g->fn[k], gx, gy, 1, threads, 1, 1, smem, NULL, args, NULL),
       kernel_names[k]);
    return KB_OK;
}

/* An element-wise kernel over n values of rows of cols (bias, GELU). */
static kb_rc launch_rows(kb_bert_gpu *g, int k, CUdeviceptr y, CUdeviceptr b,
                         size_t rows, int cols, kb_err *err)
{
    long long n = (long long)rows * cols;
    unsigned blocks = (unsigned)((n + 255) / 256 < 65535 ? (n + 255) / 256 : 65535);
    void *args[] = { &y, &b, &n, &cols };
    return launch(g, k, blocks, 1, 256, 0, args, err);
}

/* One encoder layer over the pass's T tokens of nseq sequences. */
static kb_rc layer_forward(kb_bert_gpu *g, const dlayer *D, int T, int nseq,
                           size_t maxlen, kb_err *err)
{
    size_t rows = (size_t)T;
    float scale = 1.0f / sqrtf((float)DHEAD);
    unsigned rblocks = (unsigned)((T + 7) / 8);
    unsigned smem = (unsigned)(maxlen * (33 + 32 + ATTN_WARPS) * sizeof(float));
    void *attn[] = { &g->qkv, &g->ctxv, &g->start, &g->len, &scale };
    void *ln1[] = { &g->x, &g->qkv, (void *)&D->ao_b, (void *)&D->ln1_w,
                    (void *)&D->ln1_b, &T };
    void *ln2[] = { &g->x, &g->qkv, (void *)&D->out_b, (void *)&D->ln2_w,
                    (void *)&D->ln2_b, &T };
    kb_rc rc = gemm(g, g->x, D->qkv_w, g->qkv, rows, 3 * H, H, err);
    if (rc == KB_OK)
        rc = launch_rows(g, K_BIAS, g->qkv, D->qkv_b, rows, 3 * H, err);
    if (rc == KB_OK)
        rc = launch(g, K_ATTN, (unsigned)nseq, NHEAD, ATTN_THREADS, smem, attn, err);
    /* the projections go to qkv, free by then */
    if (rc == KB_OK)
        rc = gemm(g, g->ctxv, D->ao_w, g->qkv, rows, H, H, err);
    if (rc == KB_OK)
        rc = launch(g, K_ADD_LN, rblocks, 1, 256, 0, ln1, err);
    if (rc == KB_OK)
        rc = gemm(g, g->x, D->in_w, g->ff, rows, FF, H, err);
    if (rc == KB_OK)
        rc = launch_rows(g, K_GELU, g->ff, D->in_b, rows, FF, err);
    if (rc == KB_OK)
        rc = gemm(g, g->ff, D->out_w, g->qkv, rows, H, FF, err);
    if (rc == KB_OK)
        rc = launch(g, K_ADD_LN, rblocks, 1, 256, 0, ln2, err);
    return rc;
}

/* One pass: nseq sequences of T tokens in all, vectors into out. */
static kb_rc pass(kb_bert_gpu *g, const int32_t *ids, const size_t *lens, size_t nseq,
                  size_t T, float *out, kb_err *err)
{
    size_t t = 0, maxlen = 0;
    for (size_t s = 0; s < nseq; s++) {
        g->h_start[s] = (int32_t)t;
        g->h_len[s] = (int32_t)lens[s];
        maxlen = lens[s] > maxlen ? lens[s] : maxlen;
        for (size_t p = 0; p < lens[s]; p++)
            g->h_pos[t++] = (int32_t)p;
    }
    CU(g->lib.cuMemcpyHtoD_v2(g->ids, ids, T * sizeof *ids), "copy the tokens");
    CU(g->lib.cuMemcpyHtoD_v2(g->posid, g->h_pos, T * sizeof *g->h_pos), "copy the tokens");
    CU(g->lib.cuMemcpyHtoD_v2(g->start, g->h_start, nseq * sizeof *g->h_start),
       "copy the tokens");
    CU(g->lib.cuMemcpyHtoD_v2(g->len, g->h_len, nseq * sizeof *g->h_len), "copy the tokens");
    int nt = (int)T;
    void *emb[] = { &g->ids, &g->posid, &g->word, &g->pos, &g->type, &g->eln_w,
                    &g->eln_b, &g->x, &nt };
    kb_rc rc = launch(g, K_EMBED, (unsigned)((T + 7) / 8), 1, 256, 0, emb, err);
    for (int l = 0; l < KB_BERT_LAYERS && rc == KB_OK; l++)
        rc = layer_forward(g, &g->L[l], nt, (int)nseq, maxlen, err);
    void *pool[] = { &g->x, &g->start, &g->len, &g->out };
    if (rc == KB_OK)
        rc = launch(g, K_POOL, (unsigned)nseq, 1, H, 0, pool, err);
    if (rc == KB_OK)
        CU(g->lib.cuMemcpyDtoH_v2(out, g->out, nseq * H * sizeof *out), "run the encoder");
    return rc;
}

kb_rc kb_bert_gpu_encode(kb_bert_gpu *g, const int32_t *ids, const size_t *lens,
                         size_t batch, float *out, kb_err *err)
{
    size_t T = 0;
    for (size_t s = 0; s < batch; s++) {
        if (lens[s] < 1 || lens[s] > g->maxlen || lens[s] > g->tokens)
            return kb_err_set(err, KB_ERR_INTERNAL, "bad sequence length %zu", lens[s]);
        T += lens[s];
    }
    for (size_t t = 0; t < T; t++)
        if (ids[t] < 0 || (size_t)ids[t] >= g->vocab)
            return kb_err_set(err, KB_ERR_INTERNAL, "token id %d out of range", (int)ids[t]);
    CU(g->lib.cuCtxSetCurrent(g->ctx), "use the context");
    kb_rc rc = KB_OK;
    for (size_t s = 0; s < batch && rc == KB_OK;) {
        size_t n = 0, toks = 0;
        while (s + n < batch && toks + lens[s + n] <= g->tokens) {
            toks += lens[s + n];
            n++;
        }
        rc = pass(g, ids, lens + s, n, toks, out + s * H, err);
        ids += toks;
        s += n;
    }
    return rc;
}
