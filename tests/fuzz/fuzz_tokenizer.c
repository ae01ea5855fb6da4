/* fuzz_tokenizer.c - the WordPiece tokenizer both ways: the input as text
 * through the model's vocabulary (when installed), and as a vocabulary
 * file tokenizing a fixed text. Counts and encodings agree. */
#include "index/index.h"
#include "tests/fuzz/fuzz.h"

static void tokenize(const kb_tokenizer *tok, const char *text)
{
    int32_t ids[KB_TOK_MAX_LEN];
    size_t n = 0;
    fuzz_check(kb_tokenizer_encode(tok, text, ids, KB_TOK_MAX_LEN, &n) == KB_OK);
    size_t count = kb_tokenizer_count(tok, text);
    fuzz_check(n >= 2 && n <= KB_TOK_MAX_LEN);
    fuzz_check(n - 2 == (count < KB_TOK_MAX_LEN - 2 ? count : KB_TOK_MAX_LEN - 2));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const kb_tokenizer *model = fuzz_tokenizer();
    kb_err err;
    char *text = malloc(size + 1);
    fuzz_check(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    if (model)
        tokenize(model, text);
    free(text);

    const char *path = fuzz_file("vocab.txt", data, size);
    kb_tokenizer *tok = NULL;
    kb_err_clear(&err);
    if (kb_tokenizer_open(path, &tok, &err) == KB_OK) {
        tokenize(tok, "[CLS] Shared-memory bank conflicts, __shfl_down_sync "
                      "and cp.async.bulk.tensor: caf\xc3\xa9 \xe5\x85\xb1\xe4\xba\xab [SEP]");
        kb_tokenizer_free(tok);
    } else {
        fuzz_check(err.rc == KB_ERR_MODEL);
    }
    return 0;
}
