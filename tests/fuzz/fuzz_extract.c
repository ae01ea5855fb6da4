/* fuzz_extract.c - kb_gen_extract on any bytes as an LLM's reply (the
 * generator's untrusted input): a kernel or the words that say why not.
 * A kernel taken is one of the reply's blocks (or the reply itself), its
 * normalised hash is stable, and the feedback made from the extraction
 * holds its message. */
#include "tests/fuzz/fuzz.h"
#include "generator/gen.h"

static void one(const char *reply, const char *kernel_name)
{
    kb_extracted x;
    kb_err err;
    kb_err_clear(&err);
    fuzz_check(kb_gen_extract(reply, kernel_name, &x, &err) == KB_OK);
    if (x.status == KB_EXTRACT_OK) {
        fuzz_check(x.source && !x.message);
        size_t n = strlen(x.source);
        fuzz_check(n > 0 && x.source[n - 1] == '\n');
        /* the block as the reply has it, but for its trailing space */
        size_t k = n - 1;
        while (k && (x.source[k - 1] == ' ' || x.source[k - 1] == '\r'))
            k--;
        char *body = strndup(x.source, k);
        fuzz_check(body != NULL);
        fuzz_check(strstr(reply, body) != NULL);
        free(body);
        char a[65], b[65];
        kb_gen_source_hash(x.source, a);
        kb_gen_source_hash(x.source, b);
        fuzz_check(strlen(a) == 64 && strcmp(a, b) == 0);
    } else {
        fuzz_check(!x.source && x.message && *x.message);
        kb_buf fb;
        kb_buf_init(&fb, 0);
        fuzz_check(kb_gen_feedback("attempt r0s0", &x, NULL, &fb) == KB_OK);
        fuzz_check(strstr(fb.data, x.message) != NULL);
        kb_buf_release(&fb);
    }
    kb_extracted_release(&x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a reply is text: the bytes up to a NUL */
    char *reply = malloc(size + 1);
    fuzz_check(reply != NULL);
    memcpy(reply, data, size);
    reply[size] = '\0';
    one(reply, "gelu");
    one(reply, NULL);
    char h[65];
    kb_gen_source_hash(reply, h);
    fuzz_check(strlen(h) == 64);
    free(reply);
    return 0;
}
