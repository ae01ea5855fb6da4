/* test_parse_cuda.c - kb_parse_cuda on our fixture and small inline sources,
 * and on the real CUDA samples of the mirror. */
#include "ingest/ingest_int.h"
#include "tests/unit/test_util.h"

#include <ctype.h>
#include <dirent.h>

/* ------------------------------------------------------------------ helpers */

static kb_rc parse_path(const char *path, kb_doc *doc, kb_err *err, double *ms)
{
    return tu_parse_file(kb_parse_cuda, path, doc, NULL, err, ms);
}

static kb_rc parse_str(const char *s, kb_doc *doc, kb_err *err)
{
    kb_doc_init(doc);
    kb_err_clear(err);
    return kb_parse_cuda(s, strlen(s), "dir/inline.cu", doc, err);
}

/* The code block of the function called name (the n-th one), or NULL. */
static const kb_block *function(const kb_doc *doc, const char *name, int nth)
{
    for (size_t i = 0; i < doc->nblocks; i++) {
        const kb_block *b = &doc->blocks[i];
        if (b->depth == 2 && strcmp(b->heading[1], name) == 0 && nth-- == 0)
            return b;
    }
    return NULL;
}

static size_t count_functions(const kb_doc *doc)
{
    size_t n = 0;
    for (size_t i = 0; i < doc->nblocks; i++)
        n += doc->blocks[i].depth == 2;
    return n;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* b's anchor is "L<n>" and line n of the file at path starts b's text
 * (blanks aside): the line a repository's file view jumps to. */
static void assert_line_anchor(const char *path, const kb_block *b)
{
    assert_true(b->anchor[0] == 'L' && isdigit((unsigned char)b->anchor[1]));
    long n = strtol(b->anchor + 1, NULL, 10);
    kb_buf f;
    kb_buf_init(&f, 0);
    tu_read_file(path, 16u << 20, &f);
    const char *line = f.data;
    for (long i = 1; i < n && line; i++) {
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    assert_non_null(line);
    while (*line == ' ' || *line == '\t')
        line++;
    const char *eol = strchr(b->text, '\n');
    size_t len = eol ? (size_t)(eol - b->text) : strlen(b->text);
    if (strncmp(line, b->text, len) != 0)
        fail_msg("%s: anchor %s points at '%.40s', the block starts '%.*s'", path,
                 b->anchor, line, (int)len, b->text);
    kb_buf_release(&f);
}

/* ------------------------------------------------------------------ fixture */

static void test_fixture(void **state)
{
    (void)state;
    char *path = tu_fixture("cuda/kernels.cu");
    kb_doc doc;
    kb_err err;
    if (parse_path(path, &doc, &err, NULL) != KB_OK)
        fail_msg("%s", err.msg);
    assert_string_equal(doc.title, "kernels.cu");

    /* the leading comment without the licence, as text */
    const kb_block *b = &doc.blocks[0];
    assert_int_equal(b->kind, KB_KIND_TEXT);
    assert_int_equal(b->depth, 1);
    assert_string_equal(b->heading[0], "kernels.cu");
    assert_string_equal(b->text,
                        "Fixture kernels\n\n"
                        "Small kernels that exercise the source scanner: braces inside strings,\n"
                        "characters and comments, templates, namespaces and extern \"C\".");
    assert_null(tu_block_with(&doc, "Redistribution"));
    assert_null(tu_block_with(&doc, "Copyright"));

    /* every function, in order, with its name as heading and its first
     * line as anchor */
    static const char *const names[] = {
        "addOne", "trickyLiterals", "blockSum", "blockSum", "laneId", "cLinkage",
        "hostHelper", "main", NULL
    };
    size_t k = 0;
    for (size_t i = 0; i < doc.nblocks; i++) {
        b = &doc.blocks[i];
        if (b->depth != 2)
            continue;
        assert_non_null(names[k]);
        assert_string_equal(b->heading[1], names[k]);
        assert_line_anchor(path, b);
        assert_int_equal(b->kind, KB_KIND_CODE);
        k++;
    }
    assert_null(names[k]);

    /* the comment right above is part of the function */
    b = function(&doc, "addOne", 0);
    assert_non_null(b);
    assert_string_equal(b->text,
                        "// Adds one to every element.\n"
                        "// A second comment line.\n"
                        "__global__ void addOne(float *x, int n) {\n"
                        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                        "  if (i < n) x[i] += 1.0f;  // a brace in a comment: }\n"
                        "}");

    /* braces in strings, characters and comments do not end the body */
    b = function(&doc, "trickyLiterals", 0);
    assert_non_null(b);
    assert_true(ends_with(b->text, "  out[2] = d;\n}"));
    assert_non_null(strstr(b->text, "__launch_bounds__(256)"));

    b = function(&doc, "blockSum", 0);
    assert_non_null(b);
    assert_non_null(strstr(b->text, "template <typename T, int BLOCK>\n__device__ T blockSum"));
    b = function(&doc, "blockSum", 1);
    assert_non_null(b);
    assert_non_null(strstr(b->text, "blockSum<float, 32>(float v)"));

    /* inside namespace and extern "C" */
    b = function(&doc, "laneId", 0);
    assert_non_null(b);
    assert_string_equal(b->text, "// Lives in a namespace.\n"
                                 "__device__ int laneId() { return threadIdx.x & 31; }");
    assert_non_null(function(&doc, "cLinkage", 0));

    /* a raw string with braces; a trailing comment of the line above is
     * not this function's */
    b = function(&doc, "hostHelper", 0);
    assert_non_null(b);
    assert_true(ends_with(b->text, "return n + (raw[0] == 'a');\n}"));
    assert_null(strstr(b->text, "declaration only"));

    /* top-level code under the file heading */
    b = tu_block_with(&doc, "#define TILE 32");
    assert_non_null(b);
    assert_int_equal(b->depth, 1);
    assert_int_equal(b->kind, KB_KIND_CODE);
    assert_non_null(strstr(b->text, "struct Pair {"));
    assert_non_null(strstr(b->text, "__constant__ float c_weights[16];"));
    assert_null(strstr(b->text, "addOne"));
    b = tu_block_with(&doc, "extern \"C\" void hostLaunch");
    assert_non_null(b);
    assert_int_equal(b->depth, 1);
    kb_doc_release(&doc);
    free(path);
}

static void test_inline_cases(void **state)
{
    (void)state;
    kb_doc doc;
    kb_err err;

    /* a comment directly above the first function stays with it */
    assert_int_equal(parse_str("// doubles x\nint twice(int x) { return 2 * x; }\n",
                               &doc, &err), KB_OK);
    assert_string_equal(doc.title, "inline.cu");
    assert_int_equal(doc.nblocks, 1);
    assert_string_equal(doc.blocks[0].text, "// doubles x\nint twice(int x) { return 2 * x; }");
    assert_string_equal(doc.blocks[0].anchor, "L1");
    kb_doc_release(&doc);

    /* an unterminated body runs to the end */
    assert_int_equal(parse_str("__global__ void k(int *p) {\n  if (p) { p[0] = '}';\n",
                               &doc, &err), KB_OK);
    const kb_block *b = function(&doc, "k", 0);
    assert_non_null(b);
    assert_true(ends_with(b->text, "p[0] = '}';"));
    kb_doc_release(&doc);

    /* qualified names, operators, initialisers that are not functions */
    assert_int_equal(parse_str("int table[] = { 1, 2, 3 };\n"
                               "auto f = [](int v) { return v; };\n"
                               "float Foo::scale(float v) const { return v * s_; }\n"
                               "bool operator==(const A &a, const A &b) { return a.v == b.v; }\n"
                               "Foo::operator bool() const { return ok_; }\n",
                               &doc, &err), KB_OK);
    assert_non_null(function(&doc, "Foo::scale", 0));
    assert_non_null(function(&doc, "operator==", 0));
    assert_non_null(function(&doc, "Foo::operator bool", 0));
    assert_int_equal(count_functions(&doc), 3);
    b = tu_block_with(&doc, "int table[]");
    assert_non_null(b);
    assert_int_equal(b->depth, 1);
    assert_non_null(strstr(b->text, "auto f = [](int v) { return v; };"));
    kb_doc_release(&doc);

    /* a conditional around one function belongs to it */
    assert_int_equal(parse_str("#include <x.h>\n\n#if __CUDA_ARCH__ >= 800\n"
                               "__device__ int fast(int v) { return v; }\n#endif\n"
                               "#ifdef SLOW\nint slow(int v) { return v; }\n"
                               "#else\nint slow(int v) { return 0; }\n#endif  // SLOW\n",
                               &doc, &err), KB_OK);
    assert_int_equal(doc.nblocks, 4);
    assert_string_equal(doc.blocks[0].text, "#include <x.h>");
    assert_string_equal(function(&doc, "fast", 0)->text,
                        "#if __CUDA_ARCH__ >= 800\n"
                        "__device__ int fast(int v) { return v; }\n#endif");
    assert_string_equal(function(&doc, "slow", 0)->text,
                        "#ifdef SLOW\nint slow(int v) { return v; }");
    assert_string_equal(function(&doc, "slow", 1)->text,
                        "#else\nint slow(int v) { return 0; }\n#endif  // SLOW");
    kb_doc_release(&doc);

    /* empty input: only the file heading, no blocks */
    assert_int_equal(parse_str("", &doc, &err), KB_OK);
    assert_int_equal(doc.nblocks, 0);
    kb_doc_release(&doc);

    /* binary */
    static const char elf[] = "\x7f" "ELF\x02\x01\x01\0\0\0\0";
    kb_doc_init(&doc);
    kb_err_clear(&err);
    assert_int_equal(kb_parse_cuda(elf, sizeof elf, "a.out.cu", &doc, &err), KB_ERR_PARSE);
    assert_string_equal(err.msg, "'a.out.cu' does not look like source code (binary data)");
    kb_doc_release(&doc);
}

/* Every prefix of the fixture parses: no crash, no error. */
static void test_prefixes(void **state)
{
    (void)state;
    char *path = tu_fixture("cuda/kernels.cu");
    kb_buf src;
    kb_buf_init(&src, 0);
    tu_read_file(path, 1 << 20, &src);
    kb_err err;
    kb_err_clear(&err);
    for (size_t n = 0; n <= src.len; n++) {
        kb_doc doc;
        kb_doc_init(&doc);
        if (kb_parse_cuda(src.data, n, path, &doc, &err) != KB_OK)
            fail_msg("prefix %zu: %s", n, err.msg);
        kb_doc_release(&doc);
    }
    kb_buf_release(&src);
    free(path);
}

/* ------------------------------------------------------------------ mirror */

static void expect_functions(const char *rel, const char *const *names)
{
    char *path = kb_path_join(tu_mirror(), rel);
    kb_doc doc;
    kb_err err;
    double ms = 0;
    if (parse_path(path, &doc, &err, &ms) != KB_OK)
        fail_msg("%s", err.msg);
    printf("%s: %zu blocks, %zu functions, %.2f ms\n", rel, doc.nblocks,
           count_functions(&doc), ms);
    const char *base = strrchr(rel, '/') + 1;
    assert_string_equal(doc.title, base);
    for (size_t i = 0; names[i]; i++) {
        const kb_block *b = function(&doc, names[i], 0);
        if (!b)
            fail_msg("%s: no function '%s'", rel, names[i]);
        assert_line_anchor(path, b);
        assert_int_equal(b->kind, KB_KIND_CODE);
        assert_non_null(strstr(b->text, names[i]));
        assert_true(ends_with(b->text, "}"));
    }
    assert_null(tu_block_with(&doc, "Redistribution and use in source"));
    kb_doc_release(&doc);
    free(path);
}

static void test_transpose_real(void **state)
{
    (void)state;
    static const char *const names[] = {
        "copy", "copySharedMem", "transposeNaive", "transposeCoalesced",
        "transposeNoBankConflicts", "transposeDiagonal", "transposeFineGrained",
        "transposeCoarseGrained", "computeTransposeGold", "main", NULL
    };
    expect_functions("cuda-samples/6_Performance/transpose/transpose.cu", names);

    /* the kernel's block holds the comment above it and the whole body */
    char *path = kb_path_join(tu_mirror(), "cuda-samples/6_Performance/transpose/transpose.cu");
    kb_doc doc;
    kb_err err;
    assert_int_equal(parse_path(path, &doc, &err, NULL), KB_OK);
    const kb_block *b = function(&doc, "transposeNoBankConflicts", 0);
    assert_non_null(b);
    assert_non_null(strstr(b->text, "__shared__ float tile[TILE_DIM][TILE_DIM + 1];"));
    assert_true(strncmp(b->text, "// ", 3) == 0);
    /* the file's own description, without the licence */
    assert_int_equal(doc.blocks[0].kind, KB_KIND_TEXT);
    assert_non_null(strstr(doc.blocks[0].text, "Transpose"));
    assert_null(strstr(doc.blocks[0].text, "Copyright"));
    kb_doc_release(&doc);
    free(path);
}

static void test_samples_real(void **state)
{
    (void)state;
    static const char *const conv[] = {
        "convolutionRowsKernel", "convolutionColumnsKernel", "convolutionRowsGPU",
        "setConvolutionKernel", NULL
    };
    expect_functions("cuda-samples/2_Concepts_and_Techniques/convolutionSeparable/"
                     "convolutionSeparable.cu", conv);
    static const char *const red[] = {
        "warpReduceSum", "reduce0", "reduce1", "reduce2", "reduce3", "reduce4",
        "reduce5", "reduce6", "reduce7", "cg_reduce", "multi_warp_cg_reduce", "reduce",
        NULL
    };
    expect_functions("cuda-samples/2_Concepts_and_Techniques/reduction/reduction_kernel.cu",
                     red);
    static const char *const mm[] = { "MatrixMulCUDA", "ConstantInit", "MatrixMultiply",
                                      "main", NULL };
    expect_functions("cuda-samples/0_Introduction/matrixMul/matrixMul.cu", mm);
}

/* Every source under cuda-samples/ parses, and no licence text is left. */
static void test_all_samples(void **state)
{
    (void)state;
    char *root = kb_path_join(tu_mirror(), "cuda-samples");
    char *stack[64];
    size_t nstack = 0, files = 0, funcs = 0, blocks = 0;
    stack[nstack++] = kb_strdup(root);
    double total = 0;
    while (nstack) {
        char *dir = stack[--nstack];
        DIR *d = opendir(dir);
        assert_non_null(d);
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            char *p = kb_path_join(dir, e->d_name);
            struct stat st;
            assert_int_equal(stat(p, &st), 0);
            if (S_ISDIR(st.st_mode) && nstack < 64) {
                stack[nstack++] = p;
                continue;
            }
            const char *dot = strrchr(e->d_name, '.');
            if (dot && (!strcmp(dot, ".cu") || !strcmp(dot, ".cuh") || !strcmp(dot, ".h"))) {
                kb_doc doc;
                kb_err err;
                double ms = 0;
                if (parse_path(p, &doc, &err, &ms) != KB_OK)
                    fail_msg("%s", err.msg);
                total += ms;
                files++;
                funcs += count_functions(&doc);
                blocks += doc.nblocks;
                assert_true(doc.nblocks > 0);
                assert_null(tu_block_with(&doc, "Redistribution and use in source"));
                kb_doc_release(&doc);
            }
            free(p);
        }
        closedir(d);
        free(dir);
    }
    printf("cuda-samples: %zu files, %zu blocks, %zu functions, %.1f ms\n", files, blocks,
           funcs, total);
    assert_true(files >= 25);
    assert_true(funcs >= 140);
    free(root);
}

int main(void)
{
    const struct CMUnitTest fixtures[] = {
        cmocka_unit_test(test_fixture),
        cmocka_unit_test(test_inline_cases),
        cmocka_unit_test(test_prefixes),
    };
    const struct CMUnitTest real[] = {
        cmocka_unit_test(test_transpose_real),
        cmocka_unit_test(test_samples_real),
        cmocka_unit_test(test_all_samples),
    };
    int failed = cmocka_run_group_tests_name("parse_cuda fixtures", fixtures, NULL, NULL);
    if (!tu_mirror()) {
        printf("skip: the real-document checks (KB_MIRROR is unset or missing)\n");
        return failed;
    }
    return failed + cmocka_run_group_tests_name("parse_cuda mirror", real, NULL, NULL);
}
