/* fuzz_manifest.c - kb_manifest_load on any bytes: a manifest, or a clear
 * error; every source it accepts has an id and its lookup finds it. */
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("sources.json", data, size);
    kb_manifest m;
    kb_err err;
    kb_err_clear(&err);
    if (kb_manifest_load(path, &m, &err) == KB_OK) {
        for (size_t i = 0; i < m.n; i++) {
            fuzz_check(m.sources[i].id && *m.sources[i].id);
            fuzz_check(kb_manifest_find(&m, m.sources[i].id) != NULL);
        }
        kb_manifest_release(&m);
    } else {
        fuzz_check(err.msg[0] != '\0');
    }
    return 0;
}
