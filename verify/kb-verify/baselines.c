/* baselines.c - the vendor-library baselines (cuBLAS SGEMM, and GemmEx in
 * bf16 with fp32 output), opened with dlopen on the first task that names
 * one, on the device's stream; over the task's buffers that the baseline
 * names (A, B, C by default), followed by the reference's epilogue kernels
 * when the task names some ("then"). */
#include "verify/kb-verify/verify_int.h"

#include <cublas_v2.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef cublasStatus_t (*blas_create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*blas_stream_fn)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*blas_sgemm_fn)(cublasHandle_t, cublasOperation_t,
    cublasOperation_t, int, int, int, const float *, const float *, int,
    const float *, int, const float *, float *, int);
typedef cublasStatus_t (*blas_gemmex_fn)(cublasHandle_t, cublasOperation_t,
    cublasOperation_t, int, int, int, const void *, const void *, cudaDataType,
    int, const void *, cudaDataType, int, const void *, void *, cudaDataType,
    int, cublasComputeType_t, cublasGemmAlgo_t);

struct kbv_blas {
    void *lib;                 /* the dlopen handle */
    cublasHandle_t handle;
    blas_sgemm_fn sgemm;
    blas_gemmex_fn gemmex;
};

/* Starts cuBLAS on g's stream; the library stays loaded for the process
 * (the handle's teardown happens with it). */
int kbv_blas_open(kbv_gpu *g, kb_buf *why)
{
    if (g->blas)
        return 0;
    struct kbv_blas b;
    memset(&b, 0, sizeof b);
    b.lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_GLOBAL);
    if (!b.lib)
        b.lib = dlopen("libcublas.so", RTLD_NOW | RTLD_GLOBAL);
    if (!b.lib) {
        kbv_why(why, "cannot load cuBLAS: %s", dlerror());
        return -1;
    }
    blas_create_fn create = (blas_create_fn)dlsym(b.lib, "cublasCreate_v2");
    blas_stream_fn stream = (blas_stream_fn)dlsym(b.lib, "cublasSetStream_v2");
    b.sgemm = (blas_sgemm_fn)dlsym(b.lib, "cublasSgemm_v2");
    b.gemmex = (blas_gemmex_fn)dlsym(b.lib, "cublasGemmEx");
    if (!create || !stream || !b.sgemm || !b.gemmex || create(&b.handle) ||
        stream(b.handle, (cudaStream_t)g->stream)) {
        kbv_why(why, "cannot start cuBLAS");
        return -1;
    }
    g->blas = malloc(sizeof *g->blas);
    if (!g->blas) {
        kbv_why(why, "out of memory");
        return -1;
    }
    *g->blas = b;
    return 0;
}

CUresult kbv_run_blas(kbv_ctx *v)
{
    const kb_task *t = v->task;
    const struct kbv_blas *b = v->gpu->blas;
    int ia = kbv_param_index(t, t->blas_args[0]), ib = kbv_param_index(t, t->blas_args[1]);
    int ic = kbv_param_index(t, t->blas_args[2]), im = kbv_param_index(t, "m");
    int in = kbv_param_index(t, "n"), ik = kbv_param_index(t, "k");
    if (ia < 0 || ib < 0 || ic < 0 || im < 0 || in < 0 || ik < 0)
        return CUDA_ERROR_INVALID_VALUE;
    int M = (int)v->ps[im].val, N = (int)v->ps[in].val, K = (int)v->ps[ik].val;
    float one = 1.0f, zero = 0.0f;
    cublasStatus_t s;
    /* row-major C = A B is column-major C^T = B^T A^T */
    if (strcmp(t->baseline, "cublas_sgemm") == 0)
        s = b->sgemm(b->handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one,
                     (const float *)v->ps[ib].ref_arg, N,
                     (const float *)v->ps[ia].ref_arg, K, &zero,
                     (float *)v->ps[ic].ref_arg, N);
    else
        s = b->gemmex(b->handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one,
                      (const void *)v->ps[ib].ref_arg, CUDA_R_16BF, N,
                      (const void *)v->ps[ia].ref_arg, CUDA_R_16BF, K, &zero,
                      (void *)v->ps[ic].ref_arg, CUDA_R_32F, N,
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS)
        return CUDA_ERROR_LAUNCH_FAILED;
    /* the task's epilogue, the reference's kernels on the library's C */
    return t->nthen ? kbv_run_part(v, 0, t->baseline_then, t->nthen) : CUDA_SUCCESS;
}
