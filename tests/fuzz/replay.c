/*
 * replay.c - runs a fuzz target without libFuzzer: on the files given, or
 * with none on every input kept in $KB_TOP/tests/fuzz/regress/FUZZ_NAME/
 * (FUZZ_NAME is set when the target is built). This is how `make test`
 * replays every crash the fuzzers ever found.
 */
#include "tests/fuzz/fuzz.h"

#include <dirent.h>

static int replay(const char *path)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_err err;
    kb_err_clear(&err);
    if (kb_read_file(path, 0, &b, &err) != KB_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    /* the bytes alone, as the fuzzer gives them: no NUL after them */
    uint8_t *exact = malloc(b.len ? b.len : 1);
    if (!exact)
        abort();
    memcpy(exact, b.data ? b.data : "", b.len);
    LLVMFuzzerTestOneInput(exact, b.len);
    free(exact);
    kb_buf_release(&b);
    return 0;
}

int main(int argc, char **argv)
{
    int n = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++, n++)
            if (replay(argv[i]) != 0)
                return 1;
        printf("replayed %d inputs\n", n);
        return 0;
    }
    const char *top = getenv("KB_TOP");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/regress/%s", top && *top ? top : ".",
             FUZZ_NAME);
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "cannot open '%s'\n", dir);
        return 1;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (replay(path) != 0) {
            closedir(d);
            return 1;
        }
        n++;
    }
    closedir(d);
    printf("%s: replayed %d regression inputs\n", FUZZ_NAME, n);
    return n > 0 ? 0 : 1;
}
