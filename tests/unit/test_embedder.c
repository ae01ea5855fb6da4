/* test_embedder.c - the local all-MiniLM-L6-v2 against the reference
 * embeddings (tests/fixtures/parity/embeddings.jsonl), batching, and a
 * broken model: missing, truncated, corrupt header, wrong hash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index/index.h"
#include "kb/config.h"

static char *model_dir;
static kb_embedder *emb;
static char tmpdir[] = "/tmp/kb-test-embedder-XXXXXX";

/* The model directory as kb_config resolves it: the one rule the CLI
 * follows. Caller frees; NULL on a bad environment. */
static char *config_model_dir(void)
{
    kb_config cfg;
    kb_err err;
    kb_err_clear(&err);
    if (kb_config_load(&cfg, &err) != KB_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    char *dir = kb_strdup(cfg.model_dir);
    kb_config_release(&cfg);
    return dir;
}

static int setup(void **state)
{
    model_dir = config_model_dir();
    if (!model_dir)
        return -1;
    kb_err err;
    kb_err_clear(&err);
    if (kb_embedder_open_local(model_dir, 0, &emb, &err) != KB_OK) {
        fprintf(stderr, "the model is not installed (run 'make deps'): %s\n", err.msg);
        return -1;
    }
    if (!mkdtemp(tmpdir))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    kb_embedder_free(emb);
    free(model_dir);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        return -1;
    return 0;
}

typedef struct {
    char **texts;
    float *want;
    size_t n;
} refs;

static void load_refs(refs *r)
{
    const char *top = getenv("KB_TOP");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/parity/embeddings.jsonl",
             top ? top : ".");
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *line = NULL;
    size_t cap = 0, n = 0;
    ssize_t len;
    r->texts = NULL;
    r->want = NULL;
    while ((len = getline(&line, &cap, f)) > 0) {
        cJSON *j = cJSON_ParseWithLength(line, (size_t)len);
        assert_non_null(j);
        r->texts = realloc(r->texts, (n + 1) * sizeof *r->texts);
        r->want = realloc(r->want, (n + 1) * 384 * sizeof *r->want);
        r->texts[n] = kb_strdup(cJSON_GetObjectItem(j, "text")->valuestring);
        cJSON *e = cJSON_GetObjectItem(j, "embedding");
        assert_int_equal(cJSON_GetArraySize(e), 384);
        for (int i = 0; i < 384; i++)
            r->want[n * 384 + (size_t)i] = (float)cJSON_GetArrayItem(e, i)->valuedouble;
        cJSON_Delete(j);
        n++;
    }
    r->n = n;
    free(line);
    fclose(f);
}

static void free_refs(refs *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->texts[i]);
    free(r->texts);
    free(r->want);
}

static double cosine(const float *a, const float *b)
{
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < 384; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return ab / sqrt(aa * bb);
}

/* All reference texts in one call (several batches), then one by one: the
 * same vectors, cosine >= 0.9999 with the reference. */
static void test_parity(void **state)
{
    refs r;
    load_refs(&r);
    assert_true(r.n >= 100);
    assert_int_equal(kb_embedder_dim(emb), 384);
    assert_string_equal(kb_embedder_name(emb), "all-MiniLM-L6-v2");
    assert_int_equal(strlen(kb_embedder_weights_hash(emb)), 64);
    assert_non_null(kb_embedder_tokenizer(emb));
    float *got = malloc(r.n * 384 * sizeof *got);
    kb_err err;
    kb_err_clear(&err);
    double t0 = kb_now_ms();
    assert_int_equal(kb_embedder_embed(emb, (const char *const *)r.texts, r.n,
                                       got, &err), KB_OK);
    double ms = kb_now_ms() - t0;
    double worst = 1;
    size_t worst_i = 0;
    for (size_t i = 0; i < r.n; i++) {
        double c = cosine(got + i * 384, r.want + i * 384);
        if (c < worst) {
            worst = c;
            worst_i = i;
        }
        double norm = 0;
        for (int k = 0; k < 384; k++)
            norm += (double)got[i * 384 + (size_t)k] * got[i * 384 + (size_t)k];
        assert_true(fabs(norm - 1) < 1e-4);
    }
    fprintf(stderr, "%zu texts in %.0f ms; worst cosine %.7f (text %zu)\n", r.n,
            ms, worst, worst_i);
    assert_true(worst >= 0.99999);
    /* one at a time gives the same vectors as the batch */
    float one[384];
    for (size_t i = 0; i < r.n; i += 7) {
        const char *t = r.texts[i];
        assert_int_equal(kb_embedder_embed(emb, &t, 1, one, &err), KB_OK);
        assert_true(cosine(one, got + i * 384) > 0.999999);
    }
    free(got);
    free_refs(&r);
}

/* Copies from to to: the first limit bytes (0: all); with sparse, only the
 * safetensors header is copied and the rest is a hole of the same size
 * (zeros), which is enough for the header checks and fast. */
static void copy_file(const char *from, const char *to, size_t limit, int sparse)
{
    int in = open(from, O_RDONLY);
    assert_true(in >= 0);
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(out >= 0);
    struct stat sb;
    assert_int_equal(fstat(in, &sb), 0);
    size_t n = limit && limit < (size_t)sb.st_size ? limit : (size_t)sb.st_size;
    size_t want = sparse && n > 16384 ? 16384 : n;
    size_t done = 0;
    while (done < want) {
        ssize_t k = copy_file_range(in, NULL, out, NULL, want - done, 0);
        assert_true(k > 0);
        done += (size_t)k;
    }
    assert_int_equal(ftruncate(out, (off_t)n), 0);
    close(in);
    close(out);
}

/* A model dir in tmpdir/name holding vocab.txt and model.safetensors, the
 * latter cut to limit bytes (0: whole), then patched by patch(). */
static char *make_model(const char *name, size_t limit, int sparse,
                        void (*patch)(const char *path))
{
    char *dir = kb_path_join(tmpdir, name);
    assert_int_equal(kb_mkdirs(dir, NULL), KB_OK);
    char *src = kb_path_join(model_dir, "vocab.txt");
    char *dst = kb_path_join(dir, "vocab.txt");
    copy_file(src, dst, 0, 0);
    free(src);
    free(dst);
    src = kb_path_join(model_dir, "model.safetensors");
    dst = kb_path_join(dir, "model.safetensors");
    copy_file(src, dst, limit, sparse);
    if (patch)
        patch(dst);
    free(src);
    free(dst);
    return dir;
}

static void expect_model_error(const char *dir, const char *what)
{
    kb_embedder *e = NULL;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_embedder_open_local(dir, 1, &e, &err), KB_ERR_MODEL);
    assert_null(e);
    fprintf(stderr, "%s: %s\n", what, err.msg);
    assert_non_null(strstr(err.msg, "make deps"));
    assert_non_null(strstr(err.msg, "KB_MODEL_DIR"));
}

static void test_missing(void **state)
{
    char *dir = kb_path_join(tmpdir, "nonexistent");
    expect_model_error(dir, "missing dir");
    free(dir);
    /* a directory without the files */
    dir = kb_path_join(tmpdir, "empty");
    assert_int_equal(kb_mkdirs(dir, NULL), KB_OK);
    expect_model_error(dir, "empty dir");
    free(dir);
}

static void test_truncated(void **state)
{
    static const size_t cuts[] = { 4, 100, 11000, 50u << 20, 90868000 };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "cut%zu", i);
        char *dir = make_model(name, cuts[i], 1, NULL);
        expect_model_error(dir, "truncated");
        free(dir);
    }
}

static void overwrite(const char *path, off_t at, const char *bytes, size_t n)
{
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, bytes, n, at), (ssize_t)n);
    close(fd);
}

/* Overwrites the first `from` in the file's first 16 KiB with `to` (same
 * length). */
static void replace_in_header(const char *path, const char *from, const char *to)
{
    char head[16384];
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    char *p = memmem(head, n, from, strlen(from));
    assert_non_null(p);
    overwrite(path, p - head, to, strlen(to));
}

static void bad_json(const char *path) { overwrite(path, 8, "[", 1); }
static void huge_header(const char *path)
{
    overwrite(path, 0, "\xff\xff\xff\xff\xff\xff\xff\x7f", 8);
}
/* the first data_offsets "[0, 4096]" -> "[0, 9999]" keeps the JSON valid */
static void bad_offsets(const char *path)
{
    replace_in_header(path, "[0,4096]", "[0,9999]");
}
static void bad_dtype(const char *path)
{
    replace_in_header(path, "\"F32\"", "\"F64\"");
}
/* one weight changed: a valid file with the wrong SHA-256 */
static void flip_weight(const char *path) { overwrite(path, 50000000, "\x42", 1); }

static void test_corrupt(void **state)
{
    char *dir = make_model("badjson", 0, 1, bad_json);
    expect_model_error(dir, "bad header");
    free(dir);
    dir = make_model("huge", 0, 1, huge_header);
    expect_model_error(dir, "huge header length");
    free(dir);
    dir = make_model("offsets", 0, 1, bad_offsets);
    expect_model_error(dir, "bad offsets");
    free(dir);
    dir = make_model("dtype", 0, 1, bad_dtype);
    expect_model_error(dir, "bad dtype");
    free(dir);
    dir = make_model("hash", 0, 0, flip_weight);
    expect_model_error(dir, "wrong hash");
    /* the verdict is not cached: still refused */
    expect_model_error(dir, "wrong hash again");
    free(dir);
}

/* A good copy is verified once, then opened from the stamp; changing the
 * file afterwards (new mtime) is noticed. */
static void test_stamp(void **state)
{
    char *dir = make_model("good", 0, 0, NULL);
    char *stamp = kb_path_join(dir, ".kb-verified");
    char *model = kb_path_join(dir, "model.safetensors");
    struct stat sb;
    assert_int_not_equal(stat(stamp, &sb), 0);   /* a fresh copy: no stamp */
    kb_embedder *e = NULL;
    kb_err err;
    kb_err_clear(&err);
    double t0 = kb_now_ms();
    assert_int_equal(kb_embedder_open_local(dir, 1, &e, &err), KB_OK);
    double first = kb_now_ms() - t0;
    /* the stamp: "SIZE MTIME_S.MTIME_NS INODE SHA256\n" of the verified file */
    assert_int_equal(stat(model, &sb), 0);
    char want[256];
    snprintf(want, sizeof want, "%lld %lld.%09ld %llu %s\n", (long long)sb.st_size,
             (long long)sb.st_mtim.tv_sec, (long)sb.st_mtim.tv_nsec,
             (unsigned long long)sb.st_ino, kb_embedder_weights_hash(e));
    kb_buf got;
    kb_buf_init(&got, 0);
    assert_int_equal(kb_read_file(stamp, 4096, &got, &err), KB_OK);
    assert_string_equal(got.data, want);
    kb_buf_release(&got);
    kb_embedder_free(e);
    t0 = kb_now_ms();
    assert_int_equal(kb_embedder_open_local(dir, 1, &e, &err), KB_OK);
    double second = kb_now_ms() - t0;
    kb_embedder_free(e);
    fprintf(stderr, "open: %.1f ms verifying, %.1f ms from the stamp\n", first, second);
    usleep(10000);
    flip_weight(model);
    expect_model_error(dir, "changed after the stamp");
    free(model);
    free(stamp);
    free(dir);
}

static void test_query_latency(void **state)
{
    const char *q = "why is my kernel slow when each thread reads a column";
    float v[384];
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_embedder_embed(emb, &q, 1, v, &err), KB_OK);
    double best = 1e9;
    for (int i = 0; i < 10; i++) {
        double t0 = kb_now_ms();
        assert_int_equal(kb_embedder_embed(emb, &q, 1, v, &err), KB_OK);
        double ms = kb_now_ms() - t0;
        best = ms < best ? ms : best;
    }
    fprintf(stderr, "query embedding: %.2f ms\n", best);
    assert_true(best < 50);
}

int main(void)
{
    const char *env = getenv("KB_MODEL_DIR");
    if (env && !*env) {
        printf("skipped: KB_MODEL_DIR is empty\n");
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parity),
        cmocka_unit_test(test_missing),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_corrupt),
        cmocka_unit_test(test_stamp),
        cmocka_unit_test(test_query_latency),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
