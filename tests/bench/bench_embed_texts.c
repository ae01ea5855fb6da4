/* bench_embed_texts.c - bulk embedding as kb ingest does it (the embedder
 * after kb_embedder_bulk, GPU_BATCH_TEXTS or 32 texts a call), over texts
 * from a file: one JSON string per line (what a chunk's embedding sees:
 * "heading > path\ntext").
 *   bench_embed_texts DEVICE FILE [N [VECS]]
 * DEVICE is cpu, gpu or auto (KB_EMBED_DEVICE); N, the first N texts
 * (default all); VECS, a file to write the vectors to (float32, 384 a
 * text), or to compare them with when it exists (the worst cosine).
 * Prints one line of key=value pairs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "index/index.h"
#include "kb/kb_int.h"

static char **read_texts(const char *path, size_t limit, size_t *n)
{
    FILE *f = fopen(path, "r");
    char **t = NULL, *line = NULL;
    size_t cap = 0, lcap = 0;
    ssize_t len;
    *n = 0;
    while (f && *n < limit && (len = getline(&line, &lcap, f)) > 0) {
        cJSON *j = cJSON_ParseWithLength(line, (size_t)len);
        if (!cJSON_IsString(j) || KB_GROW(t, *n + 1, cap) != KB_OK)
            break;
        t[(*n)++] = kb_strdup(j->valuestring);
        cJSON_Delete(j);
    }
    free(line);
    if (f)
        fclose(f);
    return t;
}

/* The worst cosine of v against the vectors in path, or -1 when path
 * holds other than n vectors. */
static double compare(const char *path, const float *v, size_t n)
{
    FILE *f = fopen(path, "rb");
    float *w = malloc(n * 384 * sizeof *w);
    size_t got = f && w ? fread(w, sizeof *w, n * 384, f) : 0;
    if (f)
        fclose(f);
    double worst = got == n * 384 ? 1 : -1;
    for (size_t i = 0; worst >= 0 && i < n; i++) {
        double ab = 0, aa = 0, bb = 0;
        for (size_t k = 0; k < 384; k++) {
            ab += (double)v[i * 384 + k] * w[i * 384 + k];
            aa += (double)v[i * 384 + k] * v[i * 384 + k];
            bb += (double)w[i * 384 + k] * w[i * 384 + k];
        }
        double c = ab / sqrt(aa * bb);
        worst = c < worst ? c : worst;
    }
    free(w);
    return worst;
}

int main(int argc, char **argv)
{
    long limit = 1L << 30;
    if (argc < 3 || (argc > 3 && kb_parse_long(argv[3], 1, 1L << 30, &limit) != KB_OK)) {
        fprintf(stderr, "usage: bench_embed_texts cpu|gpu|auto FILE [N [VECS]]\n");
        return 2;
    }
    kb_err err;
    kb_err_clear(&err);
    kb_config cfg;
    kb_embedder *e = NULL;
    if (getenv("KB_BENCH_DEBUG"))
        kb_log_set_level(KB_LOG_DEBUG);
    double t0 = kb_now_ms();
    if (kb_config_load(&cfg, &err) != KB_OK ||
        kb_embedder_open_local(cfg.model_dir, cfg.threads, &e, &err) != KB_OK ||
        kb_embedder_set_device(e, argv[1], &err) != KB_OK) {
        fprintf(stderr, "bench_embed_texts: %s\n", err.msg);
        return 1;
    }
    size_t n = 0;
    char **texts = read_texts(argv[2], (size_t)limit, &n);
    float *v = malloc((n ? n : 1) * 384 * sizeof *v);
    if (!n || !v) {
        fprintf(stderr, "bench_embed_texts: no texts in '%s'\n", argv[2]);
        return 1;
    }
    double t1 = kb_now_ms();
    size_t batch = kb_embedder_bulk(e, n);
    double t2 = kb_now_ms();
    for (size_t i = 0; i < n; i += batch) {
        size_t nb = n - i < batch ? n - i : batch;
        if (kb_embedder_embed(e, (const char *const *)texts + i, nb, v + i * 384, &err) != KB_OK) {
            fprintf(stderr, "bench_embed_texts: %s\n", err.msg);
            return 1;
        }
    }
    double t3 = kb_now_ms();
    double worst = 2;
    if (argc > 4) {
        FILE *f = fopen(argv[4], "rb");
        if (f) {
            fclose(f);
            worst = compare(argv[4], v, n);
        } else if ((f = fopen(argv[4], "wb")) != NULL) {
            fwrite(v, sizeof *v, n * 384, f);
            fclose(f);
        }
    }
    printf("device=\"%s\" texts=%zu open_ms=%.0f start_ms=%.0f embed_ms=%.0f "
           "texts_per_s=%.1f", kb_embedder_device(e), n, t1 - t0, t2 - t1, t3 - t2,
           (double)n / ((t3 - t2) / 1000));
    if (worst <= 1)
        printf(" worst_cosine=%.7f", worst);
    printf("\n");
    for (size_t i = 0; i < n; i++)
        free(texts[i]);
    free(texts);
    free(v);
    kb_embedder_free(e);
    kb_config_release(&cfg);
    return 0;
}
