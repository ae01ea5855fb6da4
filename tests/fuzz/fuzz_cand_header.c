/* fuzz_cand_header.c - a candidate's header lines (// kb-launch:,
 * // kb-tensormap:, // kb-verify:) and the refusal scan on any source. */
#include "verify/verify.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *src = malloc(size + 1);
    fuzz_check(src != NULL);
    memcpy(src, data, size);
    src[size] = '\0';
    kb_cand_header h;
    kb_err err;
    kb_err_clear(&err);
    if (kb_cand_header_parse(src, &h, &err) == KB_OK) {
        for (size_t i = 0; i < h.nmaps; i++)
            fuzz_check(h.maps[i].rank >= 1 && h.maps[i].rank <= KB_TMAP_MAX_RANK);
        kb_cand_header_release(&h);
    } else {
        fuzz_check(err.msg[0] != '\0');
    }
    kb_buf why;
    kb_buf_init(&why, 0);
    if (kb_verify_refuse(src, &why))
        fuzz_check(why.len > 0);
    kb_buf_release(&why);
    free(src);
    return 0;
}
