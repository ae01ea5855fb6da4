/* prompt_task.c - the task as a prompt shows it (gen.h,
 * "prompt_task.c"): the hardware profile, the task (the target shape
 * only), the code sections and the output contract; the task as one JSON
 * object (the MCP task tool); the folder a task's name resolves to. */
#include "generator/gen.h"
#include "verify/verify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REFERENCE_MAX_BYTES (1u << 20)

/* The section headings this file writes (docs/generate.md, "kb prompt"). */
#define H_HARDWARE "## Hardware profile"
#define H_TASK "## Task"
#define H_CONTRACT "## Output contract"

/* ------------------------------------------------------------------ task text */

static const char *c_type(kb_dtype t)
{
    switch (t) {
    case KB_DT_F32: return "float";
    case KB_DT_BF16: return "__nv_bfloat16";
    case KB_DT_F16: return "__half";
    case KB_DT_I32: return "int";
    case KB_DT_U32: return "unsigned int";
    case KB_DT_F64: return "double";
    }
    return "void";
}

static int is_buffer(const kb_task_param *p)
{
    return p->role != KB_ROLE_DIM && p->role != KB_ROLE_SCALAR;
}

const kb_shape *kb_gen_target_shape(const kb_task *t)
{
    if (!t->nshapes)
        return NULL;
    for (size_t i = 0; i < t->nshapes; i++)
        if (!strcmp(t->shapes[i].name, "target"))
            return &t->shapes[i];
    for (size_t i = 0; i < t->nshapes; i++)
        if (t->shapes[i].timed)
            return &t->shapes[i];
    return &t->shapes[0];
}

/* x in the fewest digits that give it back ("1e-05", not the
 * "1.0000000000000001e-05" a JSON number's round trip leaves), integers
 * whole. */
static void num_text(double x, char out[40])
{
    if (fabs(x) < 1e15 && floor(x) == x) {
        snprintf(out, 40, "%.0f", x);
        return;
    }
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(out, 40, "%.*g", digits, x);
        if (strtod(out, NULL) == x)
            return;
    }
}

static kb_rc put_num(kb_buf *b, double x)
{
    char t[40];
    num_text(x, t);
    return kb_buf_puts(b, t);
}

/* expr as the prompt shows it: a plain number in its fewest digits. */
static const char *expr_text(const char *expr, char buf[40])
{
    char *end = NULL;
    double x = strtod(expr, &end);
    if (end == expr || *end)
        return expr;
    num_text(x, buf);
    return buf;
}

/* expr, and its value at the target shape when that says more; a plain
 * number as a person writes it. */
static kb_rc put_expr(kb_buf *b, const kb_task *t, const kb_shape *s, const char *expr)
{
    double x;
    char *end = NULL;
    x = strtod(expr, &end);
    if (end != expr && !*end)
        return put_num(b, x);
    kb_rc rc = kb_buf_printf(b, "%s", expr);
    if (rc == KB_OK && kb_task_eval(t, s, expr, &x, NULL) == KB_OK) {
        char tmp[40];
        num_text(x, tmp);
        if (strcmp(tmp, expr) != 0)
            rc = kb_buf_printf(b, " = %s", tmp);
    }
    return rc;
}

static kb_rc put_signature(kb_buf *b, const kb_task *t, const char *kernel)
{
    kb_rc rc = kb_buf_printf(b, "extern \"C\" __global__ void %s(", kernel);
    for (size_t i = 0; rc == KB_OK && i < t->nparams; i++) {
        const kb_task_param *p = &t->params[i];
        rc = kb_buf_printf(b, "%s%s%s%s%s", i ? ", " : "",
                           p->role == KB_ROLE_INPUT ? "const " : "",
                           c_type(p->dtype), is_buffer(p) ? " *" : " ", p->name);
    }
    return rc == KB_OK ? kb_buf_puts(b, ")\n") : rc;
}

/* A size in the largest binary unit it reaches: whole when it is one
 * ("48 KiB"), else with a decimal ("139.8 GiB"). */
static kb_rc put_bytes(kb_buf *b, double n)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    int u = 0;
    double x = n;
    while (x >= 1024 && u < 4) {
        x /= 1024;
        u++;
    }
    return floor(x) == x ? kb_buf_printf(b, "%.0f %s", x, units[u])
                         : kb_buf_printf(b, "%.1f %s", x, units[u]);
}

static double dev_num(const cJSON *d, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(d, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const char *dev_str(const cJSON *d, const char *key)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, key));
}

/* The device's architecture: "arch", else from "compute_capability"
 * ("9.0" -> sm_90, cc 90). */
void kb_gen_device_arch(const cJSON *d, char arch[16], int *cc)
{
    *cc = 0;
    arch[0] = '\0';
    const char *a = dev_str(d, "arch"), *c = dev_str(d, "compute_capability");
    int major = 0, minor = 0;
    if (c && sscanf(c, "%d.%d", &major, &minor) == 2 && major > 0 && major < 100 &&
        minor >= 0 && minor < 10)
        *cc = major * 10 + minor;
    if (a && strlen(a) < 16 && !strncmp(a, "sm_", 3)) {
        snprintf(arch, 16, "%s", a);
        long v = strtol(a + 3, NULL, 10);
        if (!*cc && v > 0 && v < 1000)
            *cc = (int)v;
    } else if (*cc) {
        snprintf(arch, 16, "sm_%d", *cc);
    }
}

kb_rc kb_gen_section_hardware(kb_buf *b, const cJSON *d)
{
    kb_rc rc = kb_buf_puts(b, H_HARDWARE "\n\n");
    if (!cJSON_IsObject(d))
        return rc == KB_OK ? kb_buf_puts(b, "Unknown device: no kb-verify --device-info "
                                            "profile was given. Write for a current "
                                            "NVIDIA data-centre GPU and keep the kernel "
                                            "portable.\n") : rc;
    char arch[16];
    int cc;
    kb_gen_device_arch(d, arch, &cc);
    const char *name = dev_str(d, "name");
    rc = kb_buf_printf(b, "%s", name ? name : "a CUDA device");
    if (rc == KB_OK && dev_str(d, "compute_capability"))
        rc = kb_buf_printf(b, ": compute capability %s%s%s%s",
                           dev_str(d, "compute_capability"), *arch ? " (" : "", arch,
                           *arch ? ")" : "");
    if (rc == KB_OK && dev_num(d, "sms") > 0)
        rc = kb_buf_printf(b, ", %.0f SMs", dev_num(d, "sms"));
    if (rc == KB_OK && dev_num(d, "sm_clock_khz") > 0)
        rc = kb_buf_printf(b, " at %.0f MHz", dev_num(d, "sm_clock_khz") / 1000);
    if (rc == KB_OK && dev_num(d, "warp_size") > 0)
        rc = kb_buf_printf(b, ", warp size %.0f", dev_num(d, "warp_size"));
    if (rc == KB_OK)
        rc = kb_buf_puts(b, ".\n");
    if (rc == KB_OK && dev_num(d, "max_threads_per_block") > 0)
        rc = kb_buf_printf(b, "- threads: at most %.0f a block, %.0f an SM; %.0f "
                           "32-bit registers an SM\n", dev_num(d, "max_threads_per_block"),
                           dev_num(d, "max_threads_per_sm"), dev_num(d, "registers_per_sm"));
    if (rc == KB_OK && dev_num(d, "shared_per_block_bytes") > 0) {
        rc = kb_buf_puts(b, "- shared memory: ");
        if (rc == KB_OK)
            rc = put_bytes(b, dev_num(d, "shared_per_block_bytes"));
        if (rc == KB_OK)
            rc = kb_buf_puts(b, " a block");
        if (rc == KB_OK && dev_num(d, "shared_per_block_optin_bytes") > 0) {
            rc = kb_buf_puts(b, " (");
            if (rc == KB_OK)
                rc = put_bytes(b, dev_num(d, "shared_per_block_optin_bytes"));
            if (rc == KB_OK)
                rc = kb_buf_puts(b, " dynamic with opt-in)");
        }
        if (rc == KB_OK && dev_num(d, "shared_per_sm_bytes") > 0) {
            rc = kb_buf_puts(b, ", ");
            if (rc == KB_OK)
                rc = put_bytes(b, dev_num(d, "shared_per_sm_bytes"));
            if (rc == KB_OK)
                rc = kb_buf_puts(b, " an SM");
        }
        if (rc == KB_OK)
            rc = kb_buf_puts(b, "\n");
    }
    if (rc == KB_OK && dev_num(d, "l2_bytes") > 0) {
        rc = kb_buf_puts(b, "- L2 cache: ");
        if (rc == KB_OK)
            rc = put_bytes(b, dev_num(d, "l2_bytes"));
        if (rc == KB_OK && dev_num(d, "memory_bytes") > 0) {
            rc = kb_buf_puts(b, "; device memory: ");
            if (rc == KB_OK)
                rc = put_bytes(b, dev_num(d, "memory_bytes"));
        }
        if (rc == KB_OK)
            rc = kb_buf_puts(b, "\n");
    }
    double peak = dev_num(d, "peak_bandwidth_bytes_per_s");
    double copy = dev_num(d, "measured_copy_bytes_per_s");
    if (rc == KB_OK && (peak > 0 || copy > 0)) {
        rc = kb_buf_puts(b, "- memory bandwidth:");
        if (rc == KB_OK && peak > 0)
            rc = kb_buf_printf(b, " %.2f TB/s peak", peak / 1e12);
        if (rc == KB_OK && copy > 0)
            rc = kb_buf_printf(b, "%s %.2f TB/s measured (a device-to-device copy)",
                               peak > 0 ? "," : "", copy / 1e12);
        if (rc == KB_OK)
            rc = kb_buf_puts(b, "\n");
    }
    double f32 = dev_num(d, "fp32_flops_per_s"), bf16 = dev_num(d, "bf16_tensor_flops_per_s");
    if (rc == KB_OK && (f32 > 0 || bf16 > 0)) {
        rc = kb_buf_puts(b, "- peak rates:");
        if (rc == KB_OK && f32 > 0)
            rc = kb_buf_printf(b, " fp32 %.1f TFLOP/s", f32 / 1e12);
        if (rc == KB_OK && bf16 > 0)
            rc = kb_buf_printf(b, "%s bf16 tensor cores %.1f TFLOP/s", f32 > 0 ? "," : "",
                               bf16 / 1e12);
        if (rc == KB_OK)
            rc = kb_buf_puts(b, "\n");
    }
    const char *drv = dev_str(d, "driver_version"), *cuda = dev_str(d, "cuda_driver_version"),
               *nvrtc = dev_str(d, "nvrtc_version");
    /* the parts there are, a comma between two: "- software: CUDA 13.0" */
    const char *names[] = { "driver", "CUDA", "NVRTC" }, *vals[] = { drv, cuda, nvrtc };
    const char *sep = " ";
    if (rc == KB_OK && (drv || cuda || nvrtc))
        rc = kb_buf_puts(b, "- software:");
    for (int i = 0; i < 3 && rc == KB_OK; i++)
        if (vals[i]) {
            rc = kb_buf_printf(b, "%s%s %s", sep, names[i], vals[i]);
            sep = ", ";
        }
    if (rc == KB_OK && (drv || cuda || nvrtc))
        rc = kb_buf_puts(b, "\n");
    return rc;
}

/* The roofline floor at shape s in ms, as kb-verify computes it (its
 * peak bandwidth and rates); 0 when the device does not say. */
static double floor_ms(const kb_task *t, const kb_shape *s, const cJSON *d,
                       double *bytes, double *flops)
{
    *bytes = *flops = 0;
    if (t->roof_bytes)
        kb_task_eval(t, s, t->roof_bytes, bytes, NULL);
    if (t->roof_flops)
        kb_task_eval(t, s, t->roof_flops, flops, NULL);
    double bw = dev_num(d, "peak_bandwidth_bytes_per_s");
    double bf16 = dev_num(d, "bf16_tensor_flops_per_s"), f32 = dev_num(d, "fp32_flops_per_s");
    double rate = !strcmp(t->roof_unit, "bf16_tensor") ? bf16
                : !strcmp(t->roof_unit, "fp32_tensor3") ? bf16 / 6.0
                : !strcmp(t->roof_unit, "int") ? 0 : f32;
    double a = bw > 0 ? *bytes / bw : 0, c = rate > 0 ? *flops / rate : 0;
    return (a > c ? a : c) * 1e3;
}

static const char *role_name(kb_role r)
{
    static const char *const names[] = { "input", "output", "input and output",
                                         "scratch", "dimension", "scalar" };
    return (unsigned)r <= KB_ROLE_SCALAR ? names[r] : "?";
}

/* Each parameter: its C type, role, size or value at the target shape,
 * its distributions, and how it is checked. */
static kb_rc put_params(kb_buf *b, const kb_task *t, const kb_shape *s)
{
    kb_rc rc = KB_OK;
    for (size_t i = 0; rc == KB_OK && i < t->nparams; i++) {
        const kb_task_param *p = &t->params[i];
        rc = kb_buf_printf(b, "- `%s` (%s%s%s): %s, ", p->name,
                           p->role == KB_ROLE_INPUT ? "const " : "", c_type(p->dtype),
                           is_buffer(p) ? " *" : "", role_name(p->role));
        if (rc == KB_OK && is_buffer(p)) {
            rc = put_expr(b, t, s, p->size);
            if (rc == KB_OK)
                rc = kb_buf_printf(b, " elements of %s", kb_dtype_name(p->dtype));
        } else if (rc == KB_OK) {
            rc = put_expr(b, t, s, p->value);
        }
        for (size_t k = 0; rc == KB_OK && k < p->ndists; k++)
            rc = kb_buf_printf(b, "%s%s", k ? ", " : "; drawn from ", p->dists[k]);
        if (rc == KB_OK)
            rc = kb_buf_puts(b, p->role == KB_ROLE_INPUT ? "; read only (checked unchanged)"
                              : p->role == KB_ROLE_OUTPUT ? "; every element checked"
                              : p->role == KB_ROLE_INOUT ? "; checked after the run"
                              : p->role == KB_ROLE_SCRATCH ? "; yours to use, not checked"
                              : "");
        if (rc == KB_OK)
            rc = kb_buf_puts(b, "\n");
    }
    return rc;
}

/* The target shape alone (the others are kept back) and the tolerance. */
static kb_rc put_shape_tolerance(kb_buf *b, const kb_task *t, const kb_shape *s)
{
    kb_rc rc = KB_OK;
    if (rc == KB_OK)
        rc = kb_buf_puts(b, "\nTarget shape (timed):");
    for (size_t i = 0; rc == KB_OK && i < t->ndims; i++) {
        rc = kb_buf_printf(b, "%s %s = ", i ? "," : "", t->dims[i]);
        if (rc == KB_OK)
            rc = put_num(b, s->dims[i]);
    }
    if (rc == KB_OK)
        rc = kb_buf_puts(b, ". The kernel is also checked on other shapes, kept back: "
                         "sizes that are no multiple of any tile and tiny ones. Handle "
                         "every size the parameters allow.\n\n");
    /* tolerances */
    if (rc == KB_OK)
        rc = kb_buf_printf(b, "Tolerance (%s): |out - ref| <= atol + rtol*|ref|, atol = ",
                           kb_dtype_name(t->dtype));
    if (rc == KB_OK)
        rc = put_expr(b, t, s, t->atol);
    if (rc == KB_OK)
        rc = kb_buf_puts(b, ", rtol = ");
    if (rc == KB_OK)
        rc = put_expr(b, t, s, t->rtol);
    if (rc == KB_OK)
        rc = kb_buf_puts(b, "; a non-finite output where the reference is finite fails. "
                         "Correctness is checked on every shape with several seeds and "
                         "input distributions; outputs are poisoned before each run (NaN, "
                         "a sentinel, a stale valid result) and must depend on the whole "
                         "current input.\n\n");
    return rc;
}

/* The default launches, and how a candidate launches otherwise. */
static kb_rc put_launch(kb_buf *b, const kb_task *t, const kb_shape *s)
{
    kb_rc rc = KB_OK;
    if (rc == KB_OK)
        rc = kb_buf_printf(b, "Launch: kb-verify owns allocation, inputs, the stream and "
                           "the launches; by default it runs, in order:\n");
    for (size_t i = 0; rc == KB_OK && i < t->nlaunches; i++) {
        const kb_launch *l = &t->launches[i];
        rc = kb_buf_printf(b, "- %s: grid (", l->kernel);
        for (int k = 0; rc == KB_OK && k < 3 && l->grid[k]; k++) {
            rc = kb_buf_puts(b, k ? ", " : "");
            if (rc == KB_OK)
                rc = put_expr(b, t, s, l->grid[k]);
        }
        if (rc == KB_OK)
            rc = kb_buf_puts(b, "), block (");
        for (int k = 0; rc == KB_OK && k < 3 && l->block[k]; k++) {
            rc = kb_buf_puts(b, k ? ", " : "");
            if (rc == KB_OK)
                rc = put_expr(b, t, s, l->block[k]);
        }
        if (rc == KB_OK)
            rc = kb_buf_puts(b, "), dynamic shared memory ");
        if (rc == KB_OK)
            rc = l->shared ? put_expr(b, t, s, l->shared) : kb_buf_puts(b, "0");
        if (rc == KB_OK)
            rc = kb_buf_puts(b, " bytes\n");
    }
    if (rc == KB_OK)
        rc = kb_buf_puts(b, "To launch otherwise, start the source with one header line "
                         "per launch, run in order (expressions of the dims, no spaces; "
                         "dynamic shared memory over 48 KiB is opted in for you):\n\n"
                         "    // kb-launch: kernel=NAME grid=E[,E[,E]] block=E[,E[,E]] "
                         "shared=E\n\n"
                         "`// kb-verify: arch=sm_90a` compiles for the arch-specific "
                         "target (wgmma, setmaxnreg); `// kb-tensormap: buffer=A "
                         "dims=K,M box=64,128 swizzle=128` (dims and box innermost first) "
                         "asks for a TMA tensor map over a buffer, passed after the "
                         "parameters as a `const __grid_constant__ CUtensorMap`.\n\n");
    return rc;
}

/* The baseline (its time at the target shape on this device when a skill's
 * evidence measured it: baseline_ms, 0 unknown), the roofline at the
 * target shape on device d, what is judged `suspicious`, and what is
 * refused. */
static kb_rc put_baseline(kb_buf *b, const kb_task *t, const kb_shape *s, const cJSON *d,
                          double baseline_ms)
{
    kb_rc rc = KB_OK;
    if (rc == KB_OK && !strcmp(t->baseline, "reference"))
        rc = kb_buf_puts(b, "Baseline: the reference kernel below. The verdict is "
                         "`faster` at a geomean speedup of 1.03x or more on the timed "
                         "shapes, else `correct`.");
    else if (rc == KB_OK)
        rc = kb_buf_printf(b, "Baseline: the vendor library (%s). Within 3%% of it either "
                           "way is `correct` (parity); `faster` needs 1.03x.", t->baseline);
    if (rc == KB_OK && baseline_ms > 0)
        rc = kb_buf_printf(b, " The baseline takes %.4f ms at the target shape on this "
                           "device (measured by kb-verify, median with the L2 flushed).",
                           baseline_ms);
    double bytes, flops, fl = floor_ms(t, s, d, &bytes, &flops);
    if (rc == KB_OK && (bytes > 0 || flops > 0)) {
        rc = kb_buf_puts(b, " Roofline at the target shape: ");
        if (rc == KB_OK)
            rc = put_bytes(b, bytes);
        if (rc == KB_OK)
            rc = kb_buf_printf(b, " moved, %.4g flop (%s)", flops, t->roof_unit);
        if (rc == KB_OK && fl > 0)
            rc = kb_buf_printf(b, ": a floor of %.4f ms on this device; a time below "
                               "0.7x the floor is `suspicious`, not faster", fl);
        if (rc == KB_OK)
            rc = kb_buf_puts(b, ".");
    }
    if (rc == KB_OK && t->max_speedup > 0)
        rc = kb_buf_printf(b, " A speedup over the baseline above %gx on a shape is "
                           "`suspicious` too (beyond what the task makes plausible).",
                           t->max_speedup);
    if (rc == KB_OK)
        rc = kb_buf_puts(b, "\n\nRefused (verdict `refused`): `%globaltimer`, "
                         "`__managed__`, device malloc/free/new, device-side launches "
                         "(`<<<`, cudaLaunchDevice, graphs), runtime API calls from the "
                         "device, and any #include but CUDA's device headers "
                         "(cuda_bf16.h, cuda_fp16.h, mma.h, cuda/barrier, ...). No host "
                         "code.\n");
    return rc;
}

kb_rc kb_gen_section_task(kb_buf *b, const kb_task *t, const cJSON *d, double baseline_ms)
{
    const kb_shape *s = kb_gen_target_shape(t);
    kb_rc rc = kb_buf_printf(b, H_TASK "\n\n%s (level %d; ops: %s): %s\n\n", t->name,
                             t->level, *t->ops ? t->ops : "none", t->description);
    /* the signature of every kernel the launch calls */
    if (rc == KB_OK)
        rc = kb_buf_printf(b, "Signature (every kernel of the task takes this parameter "
                           "list, in this order):\n\n```cuda\n");
    for (size_t i = 0; rc == KB_OK && i < t->nlaunches; i++) {
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= !strcmp(t->launches[j].kernel, t->launches[i].kernel);
        if (!seen)
            rc = put_signature(b, t, t->launches[i].kernel);
    }
    if (rc == KB_OK)
        rc = kb_buf_puts(b, "```\n\nParameters:\n");
    if (rc == KB_OK)
        rc = put_params(b, t, s);
    if (rc == KB_OK)
        rc = kb_buf_puts(b, "\nAlignment: every buffer starts on a 256-byte boundary "
                         "(kb-verify allocates each apart, between guard bytes that catch a "
                         "write outside it), so vector loads and stores of up to 16 bytes "
                         "are aligned wherever the element offset times the element size is "
                         "a multiple of the vector's size; sizes need not be multiples of "
                         "anything.\n");
    if (rc == KB_OK)
        rc = put_shape_tolerance(b, t, s);
    if (rc == KB_OK)
        rc = put_launch(b, t, s);
    if (rc == KB_OK)
        rc = put_baseline(b, t, s, d, baseline_ms);
    return rc;
}

kb_rc kb_gen_section_code(kb_buf *b, const char *heading, const char *intro,
                          const char *src)
{
    size_t n = strlen(src);
    return kb_buf_printf(b, "%s\n\n%s```cuda\n%s%s```\n", heading, intro, src,
                         n && src[n - 1] == '\n' ? "" : "\n");
}

kb_rc kb_gen_section_contract(kb_buf *b, const kb_task *t)
{
    kb_rc rc = kb_buf_puts(b, H_CONTRACT "\n\nReply with exactly one fenced code block "
                           "in CUDA (```cuda ... ```) holding the whole candidate source, "
                           "and at most a short paragraph before it on the technique; "
                           "nothing after it.\n- Device code only: `extern \"C\" "
                           "__global__` kernels named as the launch calls them (");
    for (size_t i = 0; rc == KB_OK && i < t->nlaunches; i++) {
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= !strcmp(t->launches[j].kernel, t->launches[i].kernel);
        if (!seen)
            rc = kb_buf_printf(b, "%s`%s`", i ? ", " : "", t->launches[i].kernel);
    }
    if (rc == KB_OK)
        rc = kb_buf_puts(b, ", or your own names with `// kb-launch:` lines), each with "
                         "the task's parameter list in its order; helpers are "
                         "`__device__`. No main, no cudaMalloc, no `<<<...>>>`.\n"
                         "- Optional header comment lines at the top: `// kb-launch:` "
                         "(one per launch), `// kb-verify: arch=sm_90a`, `// "
                         "kb-tensormap:`, as the task says.\n");
    return rc;
}

/* The task and its reference source (both the caller's). */
kb_rc kb_gen_load_task(const kb_config *config, const char *tasks_dir, const char *task,
                       kb_task **t, char **ref, kb_err *err)
{
    *t = NULL;
    *ref = NULL;
    if (!task || !*task)
        return kb_err_set(err, KB_ERR_USAGE, "no task given");
    char *dir = NULL;
    kb_rc rc = kb_gen_task_dir(config, tasks_dir, task, &dir, err);
    if (rc == KB_OK)
        rc = kb_task_load(dir, t, err);
    char *path = rc == KB_OK ? kb_path_join(dir, "reference.cu") : NULL;
    kb_buf b;
    kb_buf_init(&b, 0);
    if (rc == KB_OK && !path)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK)
        rc = kb_read_file(path, REFERENCE_MAX_BYTES, &b, err);
    if (rc == KB_OK && !(*ref = kb_buf_finish(&b, KB_OK)))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_buf_release(&b);
    free(path);
    free(dir);
    if (rc != KB_OK) {
        kb_task_free(*t);
        *t = NULL;
    }
    return rc;
}

/* ------------------------------------------------------------------ JSON */

/* An expression's value at shape s, or null when it has none there. */
static cJSON *eval_json(const kb_task *t, const kb_shape *s, const char *expr)
{
    double x;
    return expr && kb_task_eval(t, s, expr, &x, NULL) == KB_OK ? cJSON_CreateNumber(x)
                                                             : cJSON_CreateNull();
}

static cJSON *expr_json(const char *expr)
{
    char buf[40];
    return cJSON_CreateString(expr_text(expr, buf));
}

/* An array of the expressions of e[0..n) that are set. */
static cJSON *expr_array(char *const *e, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n && e[i]; i++)
        if (!cJSON_AddItemToArray(a, expr_json(e[i]))) {
            cJSON_Delete(a);
            return NULL;
        }
    return a;
}

/* The task's kernels (each once) into o's "kernels", their signature into
 * "signature", its ops into "ops" (made earlier, kept in its place). */
static void json_kernels(cJSON *o, const kb_task *t, int *ok)
{
    cJSON *kernels = kb_json_put_arr(o, "kernels", ok);
    kb_buf sig;
    kb_buf_init(&sig, 0);
    if (*ok && kb_buf_puts(&sig, "") != KB_OK)
        *ok = 0;
    for (size_t i = 0; *ok && i < t->nlaunches; i++) {
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= !strcmp(t->launches[j].kernel, t->launches[i].kernel);
        if (seen)
            continue;
        if (put_signature(&sig, t, t->launches[i].kernel) != KB_OK)
            *ok = 0;
        kb_json_push_str(kernels, t->launches[i].kernel, ok);
    }
    kb_json_put_str(o, "signature", *ok ? sig.data : NULL, ok);
    kb_buf_release(&sig);
    cJSON *ops = *ok ? cJSON_GetObjectItemCaseSensitive(o, "ops") : NULL;
    for (const char *p = t->ops; *ok && *p;) {
        size_t n = strcspn(p, ",");
        char *one = kb_strndup(p, n);
        if (!one)
            *ok = 0;
        kb_json_push_str(ops, one, ok);
        free(one);
        p += n + (p[n] == ',');
    }
}

/* Each parameter: name, type, role, size (or value), at_target, dists. */
static void json_params(cJSON *o, const kb_task *t, const kb_shape *s, int *ok)
{
    cJSON *params = kb_json_put_arr(o, "params", ok);
    for (size_t i = 0; *ok && i < t->nparams; i++) {
        const kb_task_param *p = &t->params[i];
        const char *expr = is_buffer(p) ? p->size : p->value;
        cJSON *x = kb_json_push_obj(params, ok);
        kb_json_put_str(x, "name", p->name, ok);
        kb_json_put_str(x, "type", kb_dtype_name(p->dtype), ok);
        kb_json_put_str(x, "role", role_name(p->role), ok);
        kb_json_put_item(x, is_buffer(p) ? "size" : "value", expr_json(expr), ok);
        kb_json_put_item(x, "at_target", eval_json(t, s, expr), ok);
        kb_json_put_item(x, "dists", expr_array(p->dists, p->ndists), ok);
    }
}

/* The target shape, the tolerance and the default launch. */
static void json_shape_launch(cJSON *o, const kb_task *t, const kb_shape *s, int *ok)
{
    cJSON *shape = kb_json_put_obj(o, "target_shape", ok);
    cJSON *dims = kb_json_put_obj(shape, "dims", ok);
    kb_json_put_str(shape, "name", s->name, ok);
    for (size_t i = 0; *ok && i < t->ndims; i++)
        kb_json_put_num(dims, t->dims[i], s->dims[i], ok);
    cJSON *tol = kb_json_put_obj(o, "tolerance", ok);
    kb_json_put_str(tol, "dtype", kb_dtype_name(t->dtype), ok);
    kb_json_put_item(tol, "atol", expr_json(t->atol), ok);
    kb_json_put_item(tol, "rtol", expr_json(t->rtol), ok);
    kb_json_put_item(tol, "atol_at_target", eval_json(t, s, t->atol), ok);
    kb_json_put_item(tol, "rtol_at_target", eval_json(t, s, t->rtol), ok);
    cJSON *launch = kb_json_put_arr(o, "launch", ok);
    for (size_t i = 0; *ok && i < t->nlaunches; i++) {
        const kb_launch *l = &t->launches[i];
        cJSON *x = kb_json_push_obj(launch, ok);
        kb_json_put_str(x, "kernel", l->kernel, ok);
        kb_json_put_item(x, "grid", expr_array(l->grid, 3), ok);
        kb_json_put_item(x, "block", expr_array(l->block, 3), ok);
        kb_json_put_item(x, "shared", expr_json(l->shared ? l->shared : "0"), ok);
    }
}

static cJSON *task_object(const kb_task *t, const char *ref)
{
    const kb_shape *s = kb_gen_target_shape(t);
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL;
    kb_json_put_str(o, "name", t->name, &ok);
    kb_json_put_str(o, "description", t->description, &ok);
    kb_json_put_num(o, "level", t->level, &ok);
    kb_json_put_arr(o, "ops", &ok);
    kb_json_put_str(o, "dtype", kb_dtype_name(t->dtype), &ok);
    json_kernels(o, t, &ok);
    json_params(o, t, s, &ok);
    json_shape_launch(o, t, s, &ok);
    cJSON *roof = kb_json_put_obj(o, "roofline", &ok);
    kb_json_put_str(o, "baseline", t->baseline, &ok);
    kb_json_put_str(roof, "bytes", t->roof_bytes ? t->roof_bytes : "0", &ok);
    kb_json_put_str(roof, "flops", t->roof_flops ? t->roof_flops : "0", &ok);
    kb_json_put_str(roof, "unit", t->roof_unit, &ok);
    kb_json_put_item(roof, "bytes_at_target", eval_json(t, s, t->roof_bytes), &ok);
    kb_json_put_item(roof, "flops_at_target", eval_json(t, s, t->roof_flops), &ok);
    kb_json_put_str(o, "reference", ref, &ok);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

kb_rc kb_gen_task_json(const kb_config *config, const char *tasks_dir, const char *task,
                       cJSON **out, kb_err *err)
{
    *out = NULL;
    kb_task *t = NULL;
    char *ref = NULL;
    kb_rc rc = kb_gen_load_task(config, tasks_dir, task, &t, &ref, err);
    if (rc == KB_OK && !(*out = task_object(t, ref)))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory making JSON");
    kb_task_free(t);
    free(ref);
    return rc;
}

/* ------------------------------------------------------------------ tasks */

kb_rc kb_gen_task_dir(const kb_config *config, const char *tasks_dir, const char *task,
                      char **dir, kb_err *err)
{
    *dir = NULL;
    if (tasks_dir) {
        char *path = kb_path_join(tasks_dir, task);
        if (!path)
            return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        kb_rc rc = kb_task_find(path, NULL, dir, err);
        free(path);
        return rc;
    }
    char *manifest = kb_manifest_path(config, NULL);
    if (!manifest)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_rc rc = kb_task_find(task, manifest, dir, err);
    free(manifest);
    return rc;
}
