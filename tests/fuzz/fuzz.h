/*
 * fuzz.h - what the fuzz targets share (tests/fuzz/fuzz_*.c). Each target
 * is one translation unit that defines LLVMFuzzerTestOneInput: linked with
 * libFuzzer by `make fuzz`, and with replay.c by `make test`, which runs
 * it on every input kept under tests/fuzz/regress/NAME/.
 *
 * A target takes the bytes exactly as given (no NUL after them), so a
 * read past (data, size) is an ASan error, and asserts what must hold of
 * any input with fuzz_check (an abort the fuzzer reports).
 */
#ifndef KB_FUZZ_H
#define KB_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kb/kb.h"
#include "index/index.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts, saying what did not hold: the fuzzer keeps the input. */
#define fuzz_check(cond)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,   \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

static char fuzz_dir[64];

/* Removes the scratch folder and what is in it (at exit). */
static inline void fuzz_cleanup(void)
{
    static const char *const names[] = { "sources.json", "model.safetensors",
                                         "vocab.txt", "task.json" };
    char p[128];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", fuzz_dir, names[i]);
        unlink(p);
    }
    rmdir(fuzz_dir);
}

/* A file NAME in this process's own scratch folder holding data (for the
 * loaders that read a path: NAME is one of those fuzz_cleanup knows); the
 * path stays valid until the next call with the same name. */
static inline const char *fuzz_file(const char *name, const void *data, size_t size)
{
    static char path[128];
    const char *dir = fuzz_dir;
    if (!fuzz_dir[0]) {
        snprintf(fuzz_dir, sizeof fuzz_dir, "/tmp/kb-fuzz-%ld", (long)getpid());
        if (mkdir(fuzz_dir, 0700) != 0 && access(fuzz_dir, W_OK) != 0)
            abort();
        atexit(fuzz_cleanup);
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        abort();
    return path;
}

/* The model's tokenizer (KB_MODEL_DIR, else the default place) if it is
 * installed, else NULL: chunk sizes are then estimated. Loaded once. */
static inline kb_tokenizer *fuzz_tokenizer(void)
{
    static int tried;
    static kb_tokenizer *tok;
    if (!tried) {
        tried = 1;
        const char *dir = getenv("KB_MODEL_DIR");
        char def[512];
        if (!dir) {
            snprintf(def, sizeof def, "%s/.cache/kb/models/all-MiniLM-L6-v2",
                     getenv("HOME") ? getenv("HOME") : "");
            dir = def;
        }
        kb_err err;
        kb_err_clear(&err);
        if (*dir && kb_tokenizer_open_model(dir, &tok, &err) != KB_OK)
            tok = NULL;
    }
    return tok;
}

#ifdef KB_INGEST_INT_H
/* Parses data as one document with parse, then chunks it: every chunk
 * within its word pieces and bytes, with a heading and text. */
static inline void fuzz_parse_and_chunk(kb_parse_fn parse, const char *path,
                                        const uint8_t *data, size_t size)
{
    kb_doc doc;
    kb_doc_init(&doc);
    kb_err err;
    kb_err_clear(&err);
    /* an exact copy: the fuzzer's buffer may be shared with its own checks */
    char *copy = malloc(size ? size : 1);
    fuzz_check(copy != NULL);
    memcpy(copy, data, size);
    if (parse(copy, size, path, &doc, &err) == KB_OK) {
        const kb_tokenizer *toks[2] = { fuzz_tokenizer(), NULL };
        for (int t = 0; t < 2; t++) {
            if (t == 0 && !toks[0])
                continue;
            kb_chunks chunks;
            fuzz_check(kb_chunk_doc(&doc, toks[t], KB_CHUNK_MAX_TOKENS, &chunks, &err) == KB_OK);
            for (size_t i = 0; i < chunks.n; i++) {
                const kb_chunk *c = &chunks.items[i];
                fuzz_check(c->text && c->heading_json && c->anchor);
                fuzz_check(strlen(c->text) <= KB_CHUNK_MAX_BYTES);
            }
            kb_chunks_release(&chunks);
        }
    } else {
        fuzz_check(err.msg[0] != '\0');   /* a failure says why */
    }
    kb_doc_release(&doc);
    free(copy);
}
#endif

#endif
