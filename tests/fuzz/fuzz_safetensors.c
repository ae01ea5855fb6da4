/* fuzz_safetensors.c - kb_st_open on any bytes: every tensor it accepts
 * lies inside the file and is as large as its dtype and shape say. */
#include "index/index.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("model.safetensors", data, size);
    kb_safetensors st;
    kb_err err;
    kb_err_clear(&err);
    if (kb_st_open(path, &st, &err) == KB_OK) {
        const unsigned char *base = st.map, *end = base + st.size;
        for (size_t i = 0; i < st.n; i++) {
            const kb_st_tensor *t = &st.tensors[i];
            const unsigned char *p = t->data;
            fuzz_check(t->nbytes == 0 || (p >= base && p + t->nbytes <= end));
            fuzz_check(kb_st_get(&st, t->name) != NULL);
            volatile unsigned char sink = 0;   /* every byte is readable */
            for (size_t b = 0; b < t->nbytes; b += 4096)
                sink ^= p[b];
            (void)sink;
        }
        kb_st_close(&st);
    } else {
        fuzz_check(err.rc == KB_ERR_MODEL && strstr(err.msg, "kb model fetch"));
    }
    return 0;
}
