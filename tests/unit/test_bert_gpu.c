/* test_bert_gpu.c - the encoder on a CUDA GPU (index/bert_gpu.c) against
 * the CPU's (index/bert.c) on the 645 texts of the parity set
 * (tests/fixtures/parity/tokens.jsonl: their token ids): every vector at
 * cosine >= 0.9999 and of unit norm, whether a batch runs in one pass or
 * in many small ones; and the embedder with KB_EMBED_DEVICE gpu against
 * the reference vectors of sentence-transformers. Prints "skipped: no
 * GPU" where no GPU can be used (no driver, no device, no cuBLAS or
 * NVRTC: KB_ERR_NOTFOUND); a GPU that is there but fails (the kernels do
 * not compile, a call fails) fails the test. */
#include "index/index.h"
#include "tests/unit/test_util.h"

#include <math.h>

static kb_safetensors st;
static kb_bert *cpu;
static char *model_dir;

typedef struct {
    int32_t *ids;
    size_t *lens;
    char **texts;
    size_t n, ntok;
} parity;

static parity P;

static void load_parity(void)
{
    size_t capi = 0, capl = 0, capt = 0;
    tu_jsonl r;
    tu_jsonl_open(&r, "parity/tokens.jsonl");
    for (cJSON *j; (j = tu_jsonl_next(&r)) != NULL;) {
        cJSON *ids = cJSON_GetObjectItem(j, "ids");
        size_t k = (size_t)cJSON_GetArraySize(ids);
        assert_true(k >= 2 && k <= KB_TOK_MAX_LEN);
        assert_int_equal(KB_GROW(P.ids, P.ntok + k, capi), KB_OK);
        assert_int_equal(KB_GROW(P.lens, P.n + 1, capl), KB_OK);
        assert_int_equal(KB_GROW(P.texts, P.n + 1, capt), KB_OK);
        for (size_t i = 0; i < k; i++)
            P.ids[P.ntok + i] = (int32_t)cJSON_GetArrayItem(ids, (int)i)->valueint;
        P.texts[P.n] = kb_strdup(cJSON_GetObjectItem(j, "text")->valuestring);
        P.lens[P.n++] = k;
        P.ntok += k;
    }
}

/* The CPU's vectors of the parity set, 32 texts a call as the embedder
 * hands them. */
static float *cpu_vectors(void)
{
    float *v = malloc(P.n * KB_BERT_DIM * sizeof *v);
    assert_non_null(v);
    kb_err err;
    kb_err_clear(&err);
    size_t t = 0;
    for (size_t s = 0; s < P.n; s += 32) {
        size_t nb = P.n - s < 32 ? P.n - s : 32, k = 0;
        for (size_t i = 0; i < nb; i++)
            k += P.lens[s + i];
        assert_int_equal(kb_bert_encode(cpu, P.ids + t, P.lens + s, nb,
                                        v + s * KB_BERT_DIM, &err), KB_OK);
        t += k;
    }
    return v;
}

/* The worst cosine of got against want over the parity set; each of
 * got's vectors of unit norm. */
static double worst_cosine(const float *got, const float *want, size_t *at)
{
    double worst = 1;
    for (size_t i = 0; i < P.n; i++) {
        double c = tu_cosine(got + i * KB_BERT_DIM, want + i * KB_BERT_DIM, KB_BERT_DIM);
        if (!(c >= worst))
            worst = c, *at = i;
        double norm = 0;
        for (int k = 0; k < KB_BERT_DIM; k++)
            norm += (double)got[i * KB_BERT_DIM + k] * got[i * KB_BERT_DIM + k];
        assert_true(fabs(norm - 1) < 1e-4);
    }
    return worst;
}

/* The whole set in one pass, then in passes of at most 300 tokens (a few
 * texts each): every vector as the CPU's. The output is poisoned first,
 * so a vector never written fails. */
static void test_parity(void **state)
{
    float *want = cpu_vectors();
    float *got = malloc(P.n * KB_BERT_DIM * sizeof *got);
    assert_non_null(got);
    kb_err err;
    kb_err_clear(&err);
    size_t caps[] = { 0, 300 };
    for (int c = 0; c < 2; c++) {
        kb_bert_gpu *g = NULL;
        assert_int_equal(kb_bert_gpu_open(cpu, caps[c], &g, &err), KB_OK);
        for (size_t i = 0; i < P.n * KB_BERT_DIM; i++)
            got[i] = NAN;
        double t0 = kb_now_ms();
        assert_int_equal(kb_bert_gpu_encode(g, P.ids, P.lens, P.n, got, &err), KB_OK);
        double ms = kb_now_ms() - t0;
        size_t at = 0;
        double worst = worst_cosine(got, want, &at);
        printf("%s, passes of %s tokens: %zu texts (%zu tokens) in %.1f ms; worst "
               "cosine with the CPU %.7f (text %zu)\n", kb_bert_gpu_name(g),
               caps[c] ? "300" : "any", P.n, P.ntok, ms, worst, at);
        assert_true(worst >= 0.9999);
        kb_bert_gpu_free(g);
    }
    free(want);
    free(got);
}

/* A bad sequence or token id is refused before anything runs. */
static void test_bad_input(void **state)
{
    kb_bert_gpu *g = NULL;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_bert_gpu_open(cpu, 0, &g, &err), KB_OK);
    float v[KB_BERT_DIM];
    int32_t ids[3] = { 101, 1 << 30, 102 };
    size_t lens[1] = { 3 };
    assert_int_equal(kb_bert_gpu_encode(g, ids, lens, 1, v, &err), KB_ERR_INTERNAL);
    lens[0] = 0;
    assert_int_equal(kb_bert_gpu_encode(g, ids, lens, 1, v, &err), KB_ERR_INTERNAL);
    kb_bert_gpu_free(g);
}

/* The embedder told to use the GPU embeds the parity texts there (after
 * kb_embedder_bulk), the same vectors as on the CPU. */
static void test_embedder(void **state)
{
    kb_embedder *e = NULL;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_embedder_open_local(model_dir, 0, &e, &err), KB_OK);
    assert_int_equal(kb_embedder_set_device(e, "gpu", &err), KB_OK);
    assert_true(kb_embedder_bulk(e, P.n) > 32);
    assert_string_not_equal(kb_embedder_device(e), "cpu");
    float *got = malloc(P.n * KB_BERT_DIM * sizeof *got);
    float *want = cpu_vectors();
    double t0 = kb_now_ms();
    assert_int_equal(kb_embedder_embed(e, (const char *const *)P.texts, P.n, got, &err),
                     KB_OK);
    printf("embedder on %s: %zu texts, tokenized and embedded in %.1f ms\n",
           kb_embedder_device(e), P.n, kb_now_ms() - t0);
    size_t at = 0;
    assert_true(worst_cosine(got, want, &at) >= 0.9999);
    free(got);
    free(want);
    kb_embedder_free(e);
}

int main(void)
{
    model_dir = tu_model_dir();
    char *path = model_dir ? kb_path_join(model_dir, "model.safetensors") : NULL;
    kb_err err;
    kb_err_clear(&err);
    if (!path || kb_st_open(path, &st, &err) != KB_OK ||
        kb_bert_open(&st, 0, &cpu, &err) != KB_OK) {
        fprintf(stderr, "the model is not installed (run 'make model'): %s\n", err.msg);
        return 1;
    }
    free(path);
    kb_bert_gpu *g = NULL;
    if (kb_bert_gpu_open(cpu, 0, &g, &err) != KB_OK) {
        if (err.rc == KB_ERR_NOTFOUND) {
            printf("skipped: no GPU (%s)\n", err.msg);
            return 0;
        }
        fprintf(stderr, "the GPU encoder cannot start: %s\n", err.msg);
        return 1;
    }
    kb_bert_gpu_free(g);
    load_parity();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parity),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_embedder),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    for (size_t i = 0; i < P.n; i++)
        free(P.texts[i]);
    free(P.texts);
    free(P.ids);
    free(P.lens);
    kb_bert_free(cpu);
    kb_st_close(&st);
    free(model_dir);
    return rc;
}
