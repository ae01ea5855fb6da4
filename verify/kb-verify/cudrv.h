/* cudrv.h - the CUDA driver API through dlopen, so that kb-verify starts
 * (and --compile-only works) on machines without a driver. Every file of
 * kb-verify includes it (through verify_int.h) after <cuda.h>: each cuXxx
 * call below becomes a call through the loaded pointer. Exactly one file
 * (ctx.c) defines KBV_CUDRV_IMPL before including it, which defines the
 * pointers and the loader. */
#ifndef KBV_CUDRV_H
#define KBV_CUDRV_H

#include <cuda.h>
#include <dlfcn.h>

#define KBV_STR_(x) #x
#define KBV_STR(x) KBV_STR_(x)
#define KBV_CU_FNS(X) \
    X(cuCtxSetCurrent) \
    X(cuDeviceGet) \
    X(cuDeviceGetAttribute) \
    X(cuDeviceGetCount) \
    X(cuDeviceGetName) \
    X(cuDevicePrimaryCtxRetain) \
    X(cuDeviceTotalMem) \
    X(cuDriverGetVersion) \
    X(cuEventCreate) \
    X(cuEventDestroy) \
    X(cuEventElapsedTime) \
    X(cuEventRecord) \
    X(cuEventSynchronize) \
    X(cuFuncGetAttribute) \
    X(cuFuncSetAttribute) \
    X(cuGetErrorName) \
    X(cuInit) \
    X(cuLaunchKernel) \
    X(cuMemAlloc) \
    X(cuMemFree) \
    X(cuMemcpyDtoDAsync) \
    X(cuMemcpyDtoH) \
    X(cuMemcpyDtoHAsync) \
    X(cuMemcpyHtoDAsync) \
    X(cuMemsetD16Async) \
    X(cuMemsetD32Async) \
    X(cuMemsetD8Async) \
    X(cuModuleGetFunction) \
    X(cuModuleLoadData) \
    X(cuModuleUnload) \
    X(cuStreamCreate) \
    X(cuStreamQuery) \
    X(cuTensorMapEncodeTiled)

/* the pointers, typed from cuda.h's own declarations (the versioned
 * names, cuMemAlloc_v2 and the like, come from cuda.h's macros) */
#define KBV_DECL(f) extern __typeof__(f) *kbv_##f;
KBV_CU_FNS(KBV_DECL)
#undef KBV_DECL

/* Loads libcuda.so.1 (once per process); returns 0, or -1 with why set. */
int kbv_cu_load(const char **why);

#ifdef KBV_CUDRV_IMPL
#define KBV_DEF(f) __typeof__(f) *kbv_##f;
KBV_CU_FNS(KBV_DEF)
#undef KBV_DEF

int kbv_cu_load(const char **why)
{
    static int loaded = 0;
    if (loaded)
        return 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        *why = "no CUDA driver (libcuda.so.1 not found)";
        return -1;
    }
#define KBV_LOAD(f) \
    if (!(kbv_##f = (__typeof__(f) *)dlsym(h, KBV_STR(f)))) { \
        *why = "the CUDA driver lacks " KBV_STR(f); \
        return -1; \
    }
    KBV_CU_FNS(KBV_LOAD)
#undef KBV_LOAD
    loaded = 1;
    return 0;
}
#endif

#undef cuCtxSetCurrent
#define cuCtxSetCurrent (*kbv_cuCtxSetCurrent)
#undef cuDeviceGet
#define cuDeviceGet (*kbv_cuDeviceGet)
#undef cuDeviceGetAttribute
#define cuDeviceGetAttribute (*kbv_cuDeviceGetAttribute)
#undef cuDeviceGetCount
#define cuDeviceGetCount (*kbv_cuDeviceGetCount)
#undef cuDeviceGetName
#define cuDeviceGetName (*kbv_cuDeviceGetName)
#undef cuDevicePrimaryCtxRetain
#define cuDevicePrimaryCtxRetain (*kbv_cuDevicePrimaryCtxRetain)
#undef cuDeviceTotalMem
#define cuDeviceTotalMem (*kbv_cuDeviceTotalMem)
#undef cuDriverGetVersion
#define cuDriverGetVersion (*kbv_cuDriverGetVersion)
#undef cuEventCreate
#define cuEventCreate (*kbv_cuEventCreate)
#undef cuEventDestroy
#define cuEventDestroy (*kbv_cuEventDestroy)
#undef cuEventElapsedTime
#define cuEventElapsedTime (*kbv_cuEventElapsedTime)
#undef cuEventRecord
#define cuEventRecord (*kbv_cuEventRecord)
#undef cuEventSynchronize
#define cuEventSynchronize (*kbv_cuEventSynchronize)
#undef cuFuncGetAttribute
#define cuFuncGetAttribute (*kbv_cuFuncGetAttribute)
#undef cuFuncSetAttribute
#define cuFuncSetAttribute (*kbv_cuFuncSetAttribute)
#undef cuGetErrorName
#define cuGetErrorName (*kbv_cuGetErrorName)
#undef cuInit
#define cuInit (*kbv_cuInit)
#undef cuLaunchKernel
#define cuLaunchKernel (*kbv_cuLaunchKernel)
#undef cuMemAlloc
#define cuMemAlloc (*kbv_cuMemAlloc)
#undef cuMemFree
#define cuMemFree (*kbv_cuMemFree)
#undef cuMemcpyDtoDAsync
#define cuMemcpyDtoDAsync (*kbv_cuMemcpyDtoDAsync)
#undef cuMemcpyDtoH
#define cuMemcpyDtoH (*kbv_cuMemcpyDtoH)
#undef cuMemcpyDtoHAsync
#define cuMemcpyDtoHAsync (*kbv_cuMemcpyDtoHAsync)
#undef cuMemcpyHtoDAsync
#define cuMemcpyHtoDAsync (*kbv_cuMemcpyHtoDAsync)
#undef cuMemsetD16Async
#define cuMemsetD16Async (*kbv_cuMemsetD16Async)
#undef cuMemsetD32Async
#define cuMemsetD32Async (*kbv_cuMemsetD32Async)
#undef cuMemsetD8Async
#define cuMemsetD8Async (*kbv_cuMemsetD8Async)
#undef cuModuleGetFunction
#define cuModuleGetFunction (*kbv_cuModuleGetFunction)
#undef cuModuleLoadData
#define cuModuleLoadData (*kbv_cuModuleLoadData)
#undef cuModuleUnload
#define cuModuleUnload (*kbv_cuModuleUnload)
#undef cuStreamCreate
#define cuStreamCreate (*kbv_cuStreamCreate)
#undef cuStreamQuery
#define cuStreamQuery (*kbv_cuStreamQuery)
#undef cuTensorMapEncodeTiled
#define cuTensorMapEncodeTiled (*kbv_cuTensorMapEncodeTiled)

#endif
