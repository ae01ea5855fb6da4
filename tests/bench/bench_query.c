/* bench_query.c - warm, in-process query latency (BENCHMARKS.md).
 *   bench_query KB_DIR QUERIES.json [ROUNDS]
 * Runs every query of the file ROUNDS times in each mode after one warm-up
 * round and prints one line per mode: mode=M n=N p50_ms=X p99_ms=Y. */
#include "kb/kb.h"
#include "kb/kb_int.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_query KB_DIR QUERIES.json [ROUNDS]\n");
        return 2;
    }
    long rounds = 5;
    if (argc > 3 && kb_parse_long(argv[3], 1, 1000, &rounds) != KB_OK)
        return 2;
    kb_err err;
    kb_config cfg;   /* the environment's embedder, as kb query uses */
    kb_err_clear(&err);
    kb_buf raw;
    kb_buf_init(&raw, 0);
    if (kb_read_file(argv[2], 0, &raw, &err) != KB_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    cJSON *root = cJSON_Parse(raw.data);
    const cJSON *queries = cJSON_GetObjectItem(root, "queries");
    size_t nq = (size_t)cJSON_GetArraySize(queries);
    kb_store *store = NULL;
    if (kb_config_load(&cfg, &err) != KB_OK ||
        kb_store_open(argv[1], KB_STORE_READONLY, &store, &err) != KB_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const kb_mode modes[] = { KB_MODE_LEXICAL, KB_MODE_VECTOR, KB_MODE_HYBRID };
    double *times = malloc(nq * (size_t)rounds * sizeof *times);
    for (size_t m = 0; m < 3; m++) {
        size_t n = 0;
        int failed = 0;
        double lex_ms = 0, emb_ms = 0, vec_ms = 0, res_ms = 0;
        for (long r = -1; r < rounds && !failed; r++) {   /* r = -1: warm-up */
            const cJSON *q;
            cJSON_ArrayForEach(q, queries) {
                kb_query_opts opts;
                kb_query_opts_init(&opts);
                opts.mode = modes[m];
                opts.config = &cfg;
                opts.text = cJSON_GetObjectItem(q, "query")->valuestring;
                kb_results res;
                double t0 = kb_now_ms();
                if (kb_query_run(store, NULL, &opts, &res, &err) != KB_OK) {
                    fprintf(stderr, "%s: %s\n", kb_mode_name(modes[m]), err.msg);
                    kb_err_clear(&err);
                    failed = 1;
                    break;
                }
                double dt = kb_now_ms() - t0;
                if (r >= 0) {
                    times[n++] = dt;
                    lex_ms += res.lexical_ms;
                    emb_ms += res.embed_ms;
                    vec_ms += res.vector_ms;
                    res_ms += res.results_ms;
                }
                kb_results_release(&res);
            }
        }
        if (failed || n == 0)
            continue;
        qsort(times, n, sizeof *times, cmp_double);
        printf("mode=%s n=%zu p50_ms=%.2f p99_ms=%.2f mean_lexical_ms=%.2f "
               "mean_embed_ms=%.2f mean_vector_ms=%.2f mean_results_ms=%.2f\n",
               kb_mode_name(modes[m]), n, times[n / 2],
               times[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1], lex_ms / (double)n,
               emb_ms / (double)n, vec_ms / (double)n, res_ms / (double)n);
    }
    free(times);
    kb_store_close(store);
    kb_config_release(&cfg);
    cJSON_Delete(root);
    kb_buf_release(&raw);
    return 0;
}
