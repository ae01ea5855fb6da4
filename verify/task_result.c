/* task_result.c - reading kb-verify's results: one result as text, and a
 * suite's fast_p scores from its tasks' best verdicts and speedups. */
#include "verify/verify.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ fast_p */

void kb_verify_fast_p(const char *const *verdicts, const double *speedups,
                      size_t ntasks, const double *ps, size_t np, double *out)
{
    for (size_t j = 0; j < np; j++) {
        size_t k = 0;
        for (size_t i = 0; i < ntasks; i++) {
            const char *v = verdicts[i] ? verdicts[i] : "";
            int ok = strcmp(v, "correct") == 0 || strcmp(v, "faster") == 0;
            if (ok && speedups[i] > ps[j])
                k++;
        }
        out[j] = ntasks ? (double)k / (double)ntasks : 0.0;
    }
}

/* ------------------------------------------------------------------ a result as text */

static const char *res_str(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(o, k));
    return s ? s : "";
}

static double res_num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* log's lines, each after prefix; with only set, just those holding it */
static kb_rc text_lines(kb_buf *b, const char *log, const char *prefix,
                        const char *only)
{
    kb_rc rc = KB_OK;
    for (const char *p = log; rc == KB_OK && p && *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char *line = kb_strndup(p, len);
        if (!line)
            return KB_ERR_NOMEM;
        if (len && (!only || strstr(line, only)))
            rc = kb_buf_printf(b, "%s%s\n", prefix, line);
        free(line);
        p = e ? e + 1 : NULL;
    }
    return rc;
}

/* "kernel K: 31 registers, 0 B static shared memory, ..." of what the
 * compile reported (ptxas's figures, and the driver's once it ran) */
static kb_rc text_kernel(kb_buf *b, const cJSON *k)
{
    static const struct { const char *key, *fmt; } parts[] = {
        { "registers", "%s%.0f registers" },
        { "shared_static_bytes", "%s%.0f B static shared memory" },
        { "local_bytes", "%s%.0f B local memory" },
        { "stack_bytes", "%s%.0f B stack" },
        { "max_threads_per_block", "%s%.0f threads a block at most" },
    };
    kb_rc rc = kb_buf_printf(b, "  kernel %s:", res_str(k, "name"));
    const char *sep = " ";
    for (size_t i = 0; rc == KB_OK && i < sizeof parts / sizeof parts[0]; i++)
        if (cJSON_IsNumber(cJSON_GetObjectItem(k, parts[i].key))) {
            rc = kb_buf_printf(b, parts[i].fmt, sep, res_num(k, parts[i].key));
            sep = ", ";
        }
    if (rc == KB_OK && cJSON_GetObjectItem(k, "spill_store_bytes")) {
        double st = res_num(k, "spill_store_bytes"), ld = res_num(k, "spill_load_bytes");
        rc = st || ld ? kb_buf_printf(b, "%sspills: %.0f B stored, %.0f B loaded", sep, st, ld)
                      : kb_buf_printf(b, "%sno spills", sep);
    }
    return rc == KB_OK ? kb_buf_putc(b, '\n') : rc;
}

kb_rc kb_verify_result_text(const cJSON *res, kb_buf *out)
{
    const cJSON *cj = cJSON_GetObjectItem(res, "compile"), *it;
    const char *verdict = res_str(res, "verdict");
    kb_rc rc = kb_buf_printf(out, "%s: %s\n  %s\n", res_str(res, "task"), verdict,
                             res_str(res, "reason"));
    /* NVRTC's log: whole when it did not compile, else its warnings */
    if (rc == KB_OK && cj && !cJSON_IsTrue(cJSON_GetObjectItem(cj, "ok")))
        rc = kb_buf_puts(out, "  NVRTC's log:\n");
    if (rc == KB_OK && cj)
        rc = cJSON_IsTrue(cJSON_GetObjectItem(cj, "ok"))
             ? text_lines(out, res_str(cj, "log"), "  NVRTC: ", "warning")
             : text_lines(out, res_str(cj, "log"), "    ", NULL);
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(cj, "kernels"))
        if (rc == KB_OK)
            rc = text_kernel(out, it);
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(res, "timings"))
        if (rc == KB_OK)
            rc = kb_buf_printf(out, "  %s: candidate %.4f ms, %s %.4f ms, roofline "
                               "floor %.4f ms, speedup %.2fx\n", res_str(it, "shape"),
                               res_num(cJSON_GetObjectItem(it, "candidate_ms"), "median"),
                               res_str(it, "baseline"),
                               res_num(cJSON_GetObjectItem(it, "baseline_ms"), "median"),
                               res_num(it, "floor_ms"), res_num(it, "speedup"));
    if (rc == KB_OK && cJSON_IsBool(cJSON_GetObjectItem(res, "matches_library")))
        rc = kb_buf_printf(out, "  %s the library: %.3fx (parity is within 3%% "
                           "either way)\n",
                           cJSON_IsTrue(cJSON_GetObjectItem(res, "matches_library"))
                           ? "matches" : "does not match",
                           res_num(res, "library_ratio"));
    if (rc == KB_OK && cJSON_IsNumber(cJSON_GetObjectItem(res, "wall_ms")))
        rc = kb_buf_printf(out, "  wall %.0f ms\n", res_num(res, "wall_ms"));
    return rc;
}
