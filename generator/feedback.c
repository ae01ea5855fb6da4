/* feedback.c - what the next prompt is told of an attempt (gen.h,
 * "feedback.c"): its verdict and reason, NVRTC's log trimmed to its first
 * errors, each kernel's resources, the first mismatch per failing shape,
 * the timings against the baseline and the roofline; and the loop's
 * readers of kb-verify's and the transcript's JSON. */
#include "generator/gen.h"
#include "verify/verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_LINES 12          /* of a compile log fed back */
#define LOG_BYTES 2000

/* ------------------------------------------------------------------ JSON */

const cJSON *kb_gen_jget(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

double kb_gen_jnum(const cJSON *o, const char *k, double d)
{
    const cJSON *v = kb_gen_jget(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : d;
}

const char *kb_gen_jstr(const cJSON *o, const char *k, const char *d)
{
    const cJSON *v = kb_gen_jget(o, k);
    return cJSON_IsString(v) && v->valuestring ? v->valuestring : d;
}

/* ------------------------------------------------------------------ feedback */

/* The compile log's first lines (errors first: a log of warnings and
 * errors is cut to the errors when it is long), indented; with clean (a
 * compile that succeeded) its warnings alone, and nothing when it has
 * none: ptxas's "Used 31 registers" lines say what the kernel lines after
 * it say, in more tokens. */
static kb_rc put_log(kb_buf *out, const char *log, const char *path, int clean)
{
    if (clean && !strstr(log, "warning"))
        return KB_OK;
    kb_rc rc = kb_buf_puts(out, "compile log (NVRTC):\n");
    size_t n = strlen(log);
    int errors_only = n > LOG_BYTES && strstr(log, "error");
    const char *keep = clean ? "warning" : errors_only ? "error" : NULL;
    int lines = 0;
    size_t bytes = 0;
    for (const char *p = log; *p && rc == KB_OK && lines < LOG_LINES && bytes < LOG_BYTES;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len && (!keep || memmem(p, len, keep, strlen(keep)))) {
            size_t take = len > 400 ? 400 : len;
            /* the candidate's path is the run's business: kernel.cu */
            size_t pl = path ? strlen(path) : 0;
            rc = kb_buf_puts(out, "  ");
            for (size_t k = 0; rc == KB_OK && k < take;) {
                if (pl && k + pl <= len && memcmp(p + k, path, pl) == 0) {
                    rc = kb_buf_puts(out, "kernel.cu");
                    k += pl;
                } else {
                    rc = kb_buf_putc(out, p[k++]);
                }
            }
            if (rc == KB_OK)
                rc = kb_buf_printf(out, "%s\n", take < len ? " ..." : "");
            lines++;
            bytes += take;
        }
        p = nl ? nl + 1 : p + len;
    }
    if (rc == KB_OK && (lines >= LOG_LINES || bytes >= LOG_BYTES))
        rc = kb_buf_puts(out, "  ... (log trimmed)\n");
    return rc;
}

/* Each distinct failing shape's first failing check: the output, its
 * first mismatch. */
static kb_rc put_checks(kb_buf *out, const cJSON *checks)
{
    kb_rc rc = KB_OK;
    const char *shapes[16];
    size_t nshapes = 0;
    int header = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, checks) {
        if (rc != KB_OK)
            break;
        if (cJSON_IsTrue(kb_gen_jget(c, "ok")) || !cJSON_IsFalse(kb_gen_jget(c, "ok")))
            continue;
        const char *shape = kb_gen_jstr(c, "shape", "?");
        int seen = 0;
        for (size_t i = 0; i < nshapes; i++)
            seen |= strcmp(shapes[i], shape) == 0;
        if (seen || nshapes == 16)
            continue;
        shapes[nshapes++] = shape;
        if (!header++)
            rc = kb_buf_puts(out, "failing checks (first per shape):\n");
        if (rc == KB_OK)
            rc = kb_buf_printf(out, "  shape '%s', poison %s, inputs %s", shape,
                               kb_gen_jstr(c, "poison", "?"),
                               kb_gen_jstr(c, "inputs", "fresh"));
        const cJSON *o;
        cJSON_ArrayForEach(o, kb_gen_jget(c, "outputs")) {
            if (rc != KB_OK || kb_gen_jnum(o, "mismatches", 0) <= 0)
                continue;
            /* kb-verify writes a NaN or an infinity as null */
            char cv[32], rv[32];
            const cJSON *cj = kb_gen_jget(o, "candidate_at_first_bad"),
                        *rj = kb_gen_jget(o, "reference_at_first_bad");
            snprintf(cv, sizeof cv, cJSON_IsNumber(cj) ? "%g" : "non-finite",
                     cJSON_IsNumber(cj) ? cj->valuedouble : 0);
            snprintf(rv, sizeof rv, cJSON_IsNumber(rj) ? "%g" : "non-finite",
                     cJSON_IsNumber(rj) ? rj->valuedouble : 0);
            rc = kb_buf_printf(out, "; output '%s': %.0f mismatches, %.0f non-finite, "
                               "first at index %.0f: candidate %s, reference %s%s",
                               kb_gen_jstr(o, "name", "?"), kb_gen_jnum(o, "mismatches", 0),
                               kb_gen_jnum(o, "nonfinite", 0), kb_gen_jnum(o, "first_bad", -1),
                               cv, rv, cJSON_IsTrue(kb_gen_jget(o, "stale"))
                                       ? " (a stale result)" : "");
        }
        if (rc == KB_OK && cJSON_IsFalse(kb_gen_jget(c, "inputs_unchanged")))
            rc = kb_buf_puts(out, "; the kernel changed an input");
        if (rc == KB_OK && cJSON_IsFalse(kb_gen_jget(c, "guards_intact")))
            rc = kb_buf_puts(out, "; it wrote outside its buffers");
        if (rc == KB_OK && kb_gen_jget(c, "error"))
            rc = kb_buf_printf(out, "; CUDA error %s", kb_gen_jstr(c, "error", "?"));
        if (rc == KB_OK)
            rc = kb_buf_putc(out, '\n');
    }
    return rc;
}

kb_rc kb_gen_feedback(const char *label, const kb_extracted *x, const kb_verify_result *r,
                      kb_buf *out)
{
    kb_rc rc = kb_buf_printf(out, "### %s: ", label ? label : "attempt");
    if (rc != KB_OK)
        return rc;
    if (!r) {
        static const char *const what[] = { "ok", "no code", "no kernel", "host code" };
        return kb_buf_printf(out, "%s\n%s\n\n",
                             x ? what[x->status <= KB_EXTRACT_HOST_CODE ? x->status : 0]
                               : "no reply",
                             x && x->message ? x->message : "the request got no reply");
    }
    rc = kb_buf_printf(out, "%s\n", r->verdict_name);
    if (rc == KB_OK && *r->reason)
        rc = kb_buf_printf(out, "reason: %s\n", r->reason);
    if (rc == KB_OK && r->compile.present && *r->compile.log &&
        (r->verdict == KB_VERIFY_COMPILE_ERROR || r->compile.ok))
        rc = put_log(out, r->compile.log, r->candidate, r->compile.ok);
    for (size_t i = 0; rc == KB_OK && i < r->compile.nkernels; i++) {
        const kb_verify_kernel *k = &r->compile.kernels[i];
        rc = kb_buf_printf(out, "kernel %s: %d registers, %ld B static shared memory, %ld B "
                           "local memory, spills %ld B stored / %ld B loaded\n", k->name,
                           k->registers, k->shared_static_bytes, k->local_bytes,
                           k->spill_store_bytes, k->spill_load_bytes);
    }
    if (rc == KB_OK && r->json)
        rc = put_checks(out, kb_gen_jget(r->json, "checks"));
    for (size_t i = 0; rc == KB_OK && i < r->ntimings; i++) {
        const kb_verify_timing *t = &r->timings[i];
        if (i == 0)
            rc = kb_buf_puts(out, "timings:\n");
        if (rc == KB_OK)
            rc = kb_buf_printf(out, "  %s: candidate %.4f ms (95%% CI %.4f-%.4f), %s %.4f ms: "
                               "%.2fx", t->shape, t->candidate_ms.median,
                               t->candidate_ms.ci95_lo, t->candidate_ms.ci95_hi, t->baseline,
                               t->baseline_ms.median, t->speedup);
        if (rc == KB_OK && t->floor_ms > 0 && t->candidate_ms.median > 0)
            rc = kb_buf_printf(out, "; roofline floor %.4f ms: the candidate is at %.0f%% "
                               "of the roofline", t->floor_ms,
                               100.0 * t->floor_ms / t->candidate_ms.median);
        if (rc == KB_OK)
            rc = kb_buf_putc(out, '\n');
    }
    if (rc == KB_OK && r->has_library)
        rc = kb_buf_printf(out, "against the library: %.3fx%s\n", r->library_ratio,
                           r->matches_library ? " (matches it)" : "");
    if (rc == KB_OK)
        rc = kb_buf_putc(out, '\n');
    return rc;
}
