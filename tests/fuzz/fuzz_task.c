/* fuzz_task.c - a task's task.json (kb_task_load) on any bytes: a task,
 * or a clear error. The first bytes up to a NUL, when there is one, are
 * also evaluated as an expression of the dims M, N, K. */
#include "verify/verify.h"
#include "tests/fuzz/fuzz.h"

#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, '\0', size);
    if (nul) {
        char *expr = strndup((const char *)data, (size_t)(nul - data));
        fuzz_check(expr != NULL);
        static const char *const names[] = { "M", "N", "K" };
        static const double values[] = { 4096, 1000, 7 };
        double v;
        kb_err err;
        kb_err_clear(&err);
        if (kb_expr_eval(expr, names, values, 3, &v, &err) != KB_OK)
            fuzz_check(err.msg[0] != '\0');
        free(expr);
        size -= (size_t)(nul - data) + 1;
        data = nul + 1;
    }
    const char *path = fuzz_file("task.json", data, size);
    char dir[128];
    snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(path, '/') - path), path);
    kb_task *t = NULL;
    kb_err err;
    kb_err_clear(&err);
    if (kb_task_load(dir, &t, &err) == KB_OK)
        kb_task_free(t);
    else
        fuzz_check(err.msg[0] != '\0');
    return 0;
}
