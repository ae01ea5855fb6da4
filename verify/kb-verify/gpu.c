/* gpu.c - the device: the driver loaded, a context and stream, the
 * harness (kb-verify's own kernels, embedded here), the deadline wait,
 * and the device's description. */
#include "verify/kb-verify/verify_int.h"

#include <nvrtc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* the harness fatbin, embedded at build time (see verify/kb-verify/kb-verify.mk) */
#ifdef KBV_HARNESS_PATH
__asm__(".section .rodata\n.balign 16\n.global kbv_harness_fatbin\n"
        "kbv_harness_fatbin:\n.incbin \"" KBV_HARNESS_PATH "\"\n"
        ".byte 0\n.previous\n");
extern const unsigned char kbv_harness_fatbin[];
#endif

/* The driver, the device ($KB_VERIFY_DEVICE, else 0), its primary
 * context and a stream. */
static int open_context(kbv_gpu *g, kb_buf *why)
{
    const char *lwhy = NULL;
    if (kbv_cu_load(&lwhy) != 0) {
        kbv_why(why, "no GPU: %s", lwhy);
        return -1;
    }
    CUresult r = cuInit(0);
    int n = 0;
    if (r == CUDA_SUCCESS)
        r = cuDeviceGetCount(&n);
    if (r != CUDA_SUCCESS || n < 1) {
        kbv_why(why, "no GPU: %s", r ? kbv_cu_name(r) : "no CUDA device");
        return -1;
    }
    const char *ord = getenv("KB_VERIFY_DEVICE");
    long dn = 0;
    if (ord && kb_parse_long(ord, 0, n - 1, &dn) != KB_OK)
        dn = 0;
    if ((r = cuDeviceGet(&g->dev, (int)dn)) ||
        (r = cuDevicePrimaryCtxRetain(&g->ctx, g->dev)) ||
        (r = cuCtxSetCurrent(g->ctx)) ||
        (r = cuStreamCreate(&g->stream, CU_STREAM_NON_BLOCKING))) {
        kbv_why(why, "cannot open the GPU: %s", kbv_cu_name(r));
        return -1;
    }
    return 0;
}

/* The name, compute capability, sizes and the peak rates the roofline
 * floor is computed from. */
static void read_attributes(kbv_gpu *g)
{
    cuDeviceGetName(g->name, sizeof g->name, g->dev);
    int clock = 0, mclock = 0, bus = 0;
    cuDeviceGetAttribute(&g->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, g->dev);
    cuDeviceGetAttribute(&g->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, g->dev);
    cuDeviceGetAttribute(&g->sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, g->dev);
    cuDeviceGetAttribute(&g->l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, g->dev);
    cuDeviceGetAttribute(&clock, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, g->dev);
    cuDeviceGetAttribute(&mclock, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, g->dev);
    cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, g->dev);
    g->peak_bw = 2.0 * mclock * 1e3 * bus / 8.0;
    if (g->peak_bw <= 0)
        g->peak_bw = 4.8e12;
    if (clock <= 0)
        clock = 1980000;
    /* per SM and clock: 128 fp32 FMAs (256 FLOPs), 4096 dense bf16 tensor
     * FLOPs (sm_90), 128 integer ops */
    g->fp32_rate = (double)g->sms * 256.0 * clock * 1e3;
    g->bf16_rate = (double)g->sms * 4096.0 * clock * 1e3;
    g->int_rate = (double)g->sms * 128.0 * clock * 1e3;
}

int kbv_gpu_open(kbv_gpu *g, kb_buf *why)
{
    if (g->ok)
        return 0;
    if (open_context(g, why) != 0)
        return -1;
    read_attributes(g);
    CUresult r;
#ifdef KBV_HARNESS_PATH
    r = cuModuleLoadData(&g->harness, kbv_harness_fatbin);
#else
    r = CUDA_ERROR_NOT_FOUND;
#endif
    if (r || (r = cuModuleGetFunction(&g->k_fill, g->harness, "kbv_fill")) ||
        (r = cuModuleGetFunction(&g->k_perturb, g->harness, "kbv_perturb")) ||
        (r = cuModuleGetFunction(&g->k_checksum, g->harness, "kbv_checksum")) ||
        (r = cuModuleGetFunction(&g->k_guard, g->harness, "kbv_guard")) ||
        (r = cuModuleGetFunction(&g->k_compare, g->harness, "kbv_compare")) ||
        (r = cuModuleGetFunction(&g->k_jitter, g->harness, "kbv_jitter")) ||
        (r = cuModuleGetFunction(&g->k_sens, g->harness, "kbv_sens"))) {
        kbv_why(why, "cannot load kb-verify's harness: %s", kbv_cu_name(r));
        return -1;
    }
    /* the L2 flush buffer: written between timed runs, twice the L2 */
    g->flush_bytes = (size_t)(g->l2_bytes > 0 ? g->l2_bytes : 64 << 20) * 2;
    if ((r = cuMemAlloc(&g->flush, g->flush_bytes)) ||
        (r = cuMemAlloc(&g->dres, 4096))) {
        kbv_why(why, "cannot allocate: %s", kbv_cu_name(r));
        return -1;
    }
    g->ok = 1;
    return 0;
}

CUresult kbv_gpu_sync(kbv_gpu *g, double ms, int *timed_out)
{
    double t0 = kb_now_ms();
    *timed_out = 0;
    for (long spin = 0;; spin++) {
        CUresult r = cuStreamQuery(g->stream);
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

CUresult kbv_gpu_launch1(kbv_gpu *g, CUfunction f, unsigned long long n,
                         void **args)
{
    unsigned long long blocks = (n + 255) / 256;
    unsigned long long cap = (unsigned long long)g->sms * 16;
    unsigned grid = (unsigned)(blocks < 1 ? 1 : blocks > cap ? cap : blocks);
    return cuLaunchKernel(f, grid, 1, 1, 256, 1, 1, 0, g->stream, args, NULL);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* measured: a 1 GiB device-to-device copy, median of 5 (after one) */
static void measure_copy(kbv_gpu *g, cJSON *d)
{
    CUdeviceptr s = 0, t = 0;
    size_t n = (size_t)1 << 30;
    if (!cuMemAlloc(&s, n) && !cuMemAlloc(&t, n)) {
        CUevent e0, e1;
        cuEventCreate(&e0, 0);
        cuEventCreate(&e1, 0);
        double ts[6];
        for (int i = 0; i < 6; i++) {
            cuEventRecord(e0, g->stream);
            cuMemcpyDtoDAsync(t, s, n, g->stream);
            cuEventRecord(e1, g->stream);
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
}

/* The kernel driver's version ("570.133.20") into buf, from the first
 * dotted number of /proc/driver/nvidia/version's NVRM line; 0 if there is
 * none (no NVIDIA kernel module, or a machine that hides it). */
static int kernel_driver_version(char *buf, size_t n)
{
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    char line[512];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) {
        if (strncmp(line, "NVRM", 4) != 0)
            continue;
        for (char *p = strtok(line, " \t\n"); p && !found; p = strtok(NULL, " \t\n")) {
            size_t len = strspn(p, "0123456789.");
            if (len == strlen(p) && len >= 3 && strchr(p, '.') && p[0] != '.' &&
                len < n) {
                memcpy(buf, p, len + 1);
                found = 1;
            }
        }
    }
    if (f)
        fclose(f);
    return found;
}

cJSON *kbv_device_json(kbv_gpu *g, int full)
{
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "name", g->name);
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
    cJSON_AddStringToObject(d, "compute_capability", cc);
    cJSON_AddNumberToObject(d, "sms", g->sms);
    /* the versions an evidence record keeps: the CUDA version the driver
     * implements ("13.0") and NVRTC's */
    int v = 0, major = 0, minor = 0;
    char ver[32];
    if (cuDriverGetVersion(&v) == CUDA_SUCCESS) {
        snprintf(ver, sizeof ver, "%d.%d", v / 1000, v % 1000 / 10);
        cJSON_AddStringToObject(d, "cuda_driver_version", ver);
    }
    if (kernel_driver_version(ver, sizeof ver))
        cJSON_AddStringToObject(d, "driver_version", ver);
    if (nvrtcVersion(&major, &minor) == NVRTC_SUCCESS) {
        snprintf(ver, sizeof ver, "%d.%d", major, minor);
        cJSON_AddStringToObject(d, "nvrtc_version", ver);
    }
    if (!full)
        return d;
    int a = 0;
    size_t mem = 0;
    cuDeviceTotalMem(&mem, g->dev);
    cJSON_AddNumberToObject(d, "memory_bytes", (double)mem);
    cJSON_AddNumberToObject(d, "l2_bytes", g->l2_bytes);
#define ATTR(key, attr) do { a = 0; cuDeviceGetAttribute(&a, attr, g->dev); \
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
    cJSON_AddNumberToObject(d, "peak_bandwidth_bytes_per_s", g->peak_bw);
    cJSON_AddNumberToObject(d, "fp32_flops_per_s", g->fp32_rate);
    cJSON_AddNumberToObject(d, "bf16_tensor_flops_per_s", g->bf16_rate);
    measure_copy(g, d);
    char arch[16];
    snprintf(arch, sizeof arch, "sm_%d%d", g->cc_major, g->cc_minor);
    cJSON_AddStringToObject(d, "arch", arch);
    return d;
}

void kbv_default_arch(const kbv_gpu *g, const kbv_opts *o, const char *asked,
                      char *arch, size_t n)
{
    if (o->arch)
        snprintf(arch, n, "%s", o->arch);
    else if (asked)
        snprintf(arch, n, "%s", asked);
    else if (g->ok)
        snprintf(arch, n, "sm_%d%d", g->cc_major, g->cc_minor);
    else
        snprintf(arch, n, "sm_90");
}
