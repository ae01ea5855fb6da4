/* bench_prompt.c - the generator's prompt assembly, in-process
 * (BENCHMARKS.md, "kb prompt").
 *   bench_prompt KB_DIR TASKS_DIR DEVICE.json [ROUNDS]
 * For each task of TASKS_DIR's ten, the first build on a fresh store (the
 * embedder opened, the FAISS index loaded: what one `kb prompt` pays) and
 * ROUNDS warm builds, with retrieval and without (a NULL store: assembly
 * alone). One line per task, then the medians over every task. */
#include "kb/kb.h"
#include "kb/kb_int.h"
#include "generator/gen.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const tasks[] = {
    "gelu", "softmax", "layernorm", "reduce_sum", "transpose", "gemm_f32",
    "gemm_bf16", "histogram", "scan", "stencil3x3",
};
#define NTASKS (sizeof tasks / sizeof tasks[0])

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, size_t n)
{
    qsort(x, n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

/* One build's time in ms; -1 on failure (said on stderr). */
static double one(kb_store *store, const kb_config *cfg, const char *tasks_dir,
                  const char *task, const cJSON *dev, kb_gen_prompt *keep)
{
    kb_gen_prompt_opts o = { .store = store, .config = cfg, .tasks_dir = tasks_dir,
                             .task = task, .device = dev };
    kb_gen_prompt p;
    kb_err err;
    kb_err_clear(&err);
    double t0 = kb_now_ms();
    if (kb_gen_prompt_build(&o, &p, &err) != KB_OK) {
        fprintf(stderr, "%s: %s\n", task, err.msg);
        return -1;
    }
    double dt = kb_now_ms() - t0;
    if (keep)
        *keep = p;
    else
        kb_gen_prompt_release(&p);
    return dt;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench_prompt KB_DIR TASKS_DIR DEVICE.json [ROUNDS]\n");
        return 2;
    }
    long rounds = 20;
    if (argc > 4 && kb_parse_long(argv[4], 1, 10000, &rounds) != KB_OK)
        return 2;
    kb_err err;
    kb_err_clear(&err);
    kb_config cfg;
    kb_buf raw;
    kb_buf_init(&raw, 0);
    if (kb_config_load(&cfg, &err) != KB_OK || kb_read_file(argv[3], 0, &raw, &err) != KB_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    cJSON *dev = cJSON_Parse(raw.data);
    kb_buf_release(&raw);
    kb_log_set_level(KB_LOG_QUIET);
    double fresh[NTASKS], warm[NTASKS], bare[NTASKS];
    double *t = malloc((size_t)rounds * sizeof *t);
    printf("| task | fresh store ms | warm ms (median of %ld) | assembly alone ms | "
           "tokens | passages |\n|---|---|---|---|---|---|\n", rounds);
    for (size_t i = 0; i < NTASKS; i++) {
        kb_store *store = NULL;
        if (kb_store_open(argv[1], KB_STORE_READONLY, &store, &err) != KB_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        kb_gen_prompt p;
        if ((fresh[i] = one(store, &cfg, argv[2], tasks[i], dev, &p)) < 0)
            return 1;
        for (long r = 0; r < rounds; r++)
            if ((t[r] = one(store, &cfg, argv[2], tasks[i], dev, NULL)) < 0)
                return 1;
        warm[i] = median(t, (size_t)rounds);
        for (long r = 0; r < rounds; r++)
            if ((t[r] = one(NULL, &cfg, argv[2], tasks[i], dev, NULL)) < 0)
                return 1;
        bare[i] = median(t, (size_t)rounds);
        printf("| %s | %.1f | %.2f | %.3f | %ld | %zu |\n", tasks[i], fresh[i], warm[i],
               bare[i], p.tokens, p.ncites);
        kb_gen_prompt_release(&p);
        kb_store_close(store);
    }
    printf("| **median** | %.1f | %.2f | %.3f | | |\n", median(fresh, NTASKS),
           median(warm, NTASKS), median(bare, NTASKS));
    free(t);
    cJSON_Delete(dev);
    kb_config_release(&cfg);
    return 0;
}
