/* test_tokenizer.c - the WordPiece tokenizer against the Hugging Face
 * reference (tests/fixtures/parity/tokens.jsonl, scripts/gen-parity.py). */
#include "index/index.h"
#include "tests/unit/test_util.h"

#include <cjson/cJSON.h>
#include <stdint.h>

static char *model_dir;
static kb_tokenizer *tok;

static int setup(void **state)
{
    model_dir = tu_model_dir();
    if (!model_dir)
        return -1;
    if (!*model_dir)
        return 0;
    char *vocab = kb_path_join(model_dir, "vocab.txt");
    kb_err err;
    kb_err_clear(&err);
    if (kb_tokenizer_open(vocab, &tok, &err) != KB_OK) {
        fprintf(stderr, "the model is not installed: %s\n", err.msg);
        free(vocab);
        return -1;
    }
    free(vocab);
    return 0;
}

static int teardown(void **state)
{
    kb_tokenizer_free(tok);
    free(model_dir);
    return 0;
}

/* Every fixture text: identical ids (with [CLS]/[SEP], at most 256) and the
 * same untruncated piece count. */
static void test_parity(void **state)
{
    int cases = 0, bad = 0;
    int32_t ids[256];
    tu_jsonl r;
    tu_jsonl_open(&r, "parity/tokens.jsonl");
    for (cJSON *j; (j = tu_jsonl_next(&r)) != NULL;) {
        const char *text = cJSON_GetObjectItem(j, "text")->valuestring;
        cJSON *want = cJSON_GetObjectItem(j, "ids");
        int count = cJSON_GetObjectItem(j, "count")->valueint;
        size_t n = 0;
        assert_int_equal(kb_tokenizer_encode(tok, text, ids, 256, &n), KB_OK);
        int same = (int)n == cJSON_GetArraySize(want);
        for (size_t i = 0; same && i < n; i++)
            same = ids[i] == cJSON_GetArrayItem(want, (int)i)->valueint;
        size_t c = kb_tokenizer_count(tok, text);
        if (!same || (int)c != count) {
            bad++;
            fprintf(stderr, "mismatch on %s (count %zu, want %d; ids n=%zu want %d):",
                    cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "text")), c,
                    count, n, cJSON_GetArraySize(want));
            for (size_t i = 0; i < n && i < 24; i++)
                fprintf(stderr, " %d", ids[i]);
            fprintf(stderr, "\n");
        }
        cases++;
    }
    fprintf(stderr, "%d texts, %d mismatches\n", cases, bad);
    assert_true(cases >= 500);
    assert_int_equal(bad, 0);
}

static void test_truncation(void **state)
{
    int32_t ids[8];
    size_t n;
    assert_int_equal(kb_tokenizer_encode(tok, "one two three four five six seven eight",
                                         ids, 5, &n), KB_OK);
    assert_int_equal(n, 5);
    assert_int_equal(ids[0], 101);   /* [CLS] */
    assert_int_equal(ids[4], 102);   /* [SEP] kept */
    assert_int_equal(kb_tokenizer_encode(tok, "", ids, 8, &n), KB_OK);
    assert_int_equal(n, 2);
    assert_int_equal(kb_tokenizer_encode(tok, "x", ids, 1, &n), KB_ERR_USAGE);
    assert_int_equal(kb_tokenizer_count(tok, ""), 0);
    assert_int_equal(kb_tokenizer_count(tok, NULL), 0);
    /* invalid UTF-8 never crashes; the bad bytes are dropped */
    assert_int_equal(kb_tokenizer_count(tok, "ab\xff\xfe" "cd \xc3"), 
                     kb_tokenizer_count(tok, "abcd"));
}

/* The chunker calls count a lot: a 1 MB text must take well under a second
 * (measured ~20-40 MB/s). */
static void test_count_speed(void **state)
{
    const char *base = "Coalesced loads let a warp fetch 128 contiguous bytes; "
                       "__shfl_down_sync(0xffffffff, v, 16) café 東京 ";
    kb_buf b;
    kb_buf_init(&b, 0);
    while (b.len < (1u << 20))
        tu_puts(&b, base);
    double t0 = kb_now_ms();
    size_t c = kb_tokenizer_count(tok, b.data);
    double ms = kb_now_ms() - t0;
    fprintf(stderr, "count: %zu pieces in %.1f ms (%.1f MB/s)\n", c, ms,
            (double)b.len / 1e3 / ms);
    assert_true(c > 100000);
    assert_true(ms < 1000);
    kb_buf_release(&b);
}

static void test_missing_vocab(void **state)
{
    kb_tokenizer *t = NULL;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_tokenizer_open("/nonexistent/vocab.txt", &t, &err),
                     KB_ERR_MODEL);
    assert_null(t);
    assert_non_null(strstr(err.msg, "'/nonexistent/vocab.txt'"));
    assert_non_null(strstr(err.msg, "No such file or directory"));
    assert_non_null(strstr(err.msg, "kb model fetch"));
}

int main(void)
{
    if (tu_no_model())
        return 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parity),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_count_speed),
        cmocka_unit_test(test_missing_vocab),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
