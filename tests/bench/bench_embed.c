/* bench_embed.c - embedding throughput (chunks of 256 tokens per second)
 * and query-embedding latency of the local all-MiniLM-L6-v2.
 *   bench_embed [threads] [chunks]     (threads 0: $KB_THREADS, else one
 *   per online CPU, at most 16; BLAS itself always runs single-threaded)
 * Prints one line: key=value pairs (machine-readable, for scripts/bench-embed.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index/index.h"
#include "kb/kb_int.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    long threads = 0, nchunks = 64;
    if ((argc > 1 && kb_parse_long(argv[1], 0, 256, &threads) != KB_OK) ||
        (argc > 2 && kb_parse_long(argv[2], 1, 100000, &nchunks) != KB_OK)) {
        fprintf(stderr, "usage: bench_embed [threads] [chunks]\n");
        return 2;
    }
    kb_err err;
    kb_err_clear(&err);
    kb_embedder *e = NULL;
    kb_config cfg;
    if (kb_config_load(&cfg, &err) != KB_OK ||
        kb_embedder_open_local(cfg.model_dir, threads ? (int)threads : cfg.threads,
                               &e, &err) != KB_OK) {
        fprintf(stderr, "bench_embed: %s\n", err.msg);
        return 1;
    }
    /* chunks of varied prose and code, each long enough to fill 256 tokens */
    static const char *const parts[] = {
        "Coalesced loads let a warp fetch 128 contiguous bytes in one transaction. ",
        "__global__ void transpose(float *out, const float *in, int n) { tile[ty][tx] = in[y * n + x]; } ",
        "Pad the shared-memory tile by one column to avoid bank conflicts in the transpose. ",
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7}; ",
        "Occupancy is limited by registers: 96 per thread leaves room for only two blocks. ",
    };
    const kb_tokenizer *tok = kb_embedder_tokenizer(e);
    char **texts = calloc((size_t)nchunks, sizeof *texts);
    for (long i = 0; i < nchunks; i++) {
        kb_buf b;
        kb_buf_init(&b, 0);
        for (long k = i; kb_tokenizer_count(tok, b.data ? b.data : "") < 300; k++)
            if (kb_buf_puts(&b, parts[k % 5]) != KB_OK) {
                fprintf(stderr, "bench_embed: out of memory\n");
                return 1;
            }
        texts[i] = kb_buf_detach(&b);
    }
    float *out = malloc((size_t)nchunks * 384 * sizeof *out);
    /* warm-up, then the best of 3 runs */
    kb_embedder_embed(e, (const char *const *)texts, nchunks < 8 ? (size_t)nchunks : 8, out, &err);
    double best = 1e18;
    for (int r = 0; r < 3; r++) {
        double t0 = kb_now_ms();
        if (kb_embedder_embed(e, (const char *const *)texts, (size_t)nchunks, out, &err) != KB_OK) {
            fprintf(stderr, "bench_embed: %s\n", err.msg);
            return 1;
        }
        double ms = kb_now_ms() - t0;
        best = ms < best ? ms : best;
    }
    const char *q = "why is my kernel slow when threads read columns";
    double lat[101];
    for (int i = 0; i < 101; i++) {
        double t0 = kb_now_ms();
        kb_embedder_embed(e, &q, 1, out, &err);
        lat[i] = kb_now_ms() - t0;
    }
    qsort(lat, 101, sizeof lat[0], cmp);
    int32_t ids[256];
    size_t n;
    kb_tokenizer_encode(tok, q, ids, 256, &n);
    printf("threads=%ld chunks=%ld chunks_per_s=%.1f ms_per_chunk=%.2f query_tokens=%zu query_p50_ms=%.2f query_p99_ms=%.2f\n",
           threads, nchunks, nchunks / (best / 1000), best / nchunks, n, lat[50], lat[99]);
    for (long i = 0; i < nchunks; i++)
        free(texts[i]);
    free(texts);
    free(out);
    kb_embedder_free(e);
    kb_config_release(&cfg);
    return 0;
}
