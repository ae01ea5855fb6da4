/* test_extract.c - the kernel of an LLM reply (generator/gen.h,
 * "extract.c"): prose around the block, several blocks, the block that
 * defines the task's kernel, a reply cut inside its block, no fences at
 * all, no code, C++ linkage, host code, and the normalised source hash
 * (comments and whitespace do not count; kb-verify's directives and the
 * code do). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "generator/gen.h"

#define GELU "extern \"C\" __global__ void gelu(const float *x, float *y, int n)\n" \
             "{\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n" \
             "    if (i < n) y[i] = 0.5f * x[i];\n}\n"

static kb_extracted run(const char *reply, const char *name)
{
    kb_extracted x;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_gen_extract(reply, name, &x, &err), KB_OK);
    return x;
}

static void test_prose_around_block(void **state)
{
    (void)state;
    kb_extracted x = run("Here is a faster kernel. It uses one thread per element.\n\n"
                         "```cuda\n" GELU "```\n\nThis should be about 2x faster.\n",
                         "gelu");
    assert_int_equal(x.status, KB_EXTRACT_OK);
    assert_string_equal(x.source, GELU);
    assert_null(x.message);
    kb_extracted_release(&x);
}

static void test_several_blocks(void **state)
{
    (void)state;
    /* a shell block and a host harness first, then the kernel */
    kb_extracted x = run("Build it with:\n```bash\nnvcc -O3 k.cu\n```\nA test:\n"
                         "```cpp\nint main() { float *d; cudaMalloc(&d, 4); "
                         "gelu<<<1,1>>>(d, d, 1); }\n```\nThe kernel:\n```cu\n" GELU
                         "```\n", "gelu");
    assert_int_equal(x.status, KB_EXTRACT_OK);
    assert_string_equal(x.source, GELU);
    kb_extracted_release(&x);

    /* two kernel blocks: the one that defines the task's kernel wins */
    x = run("First try:\n```cuda\nextern \"C\" __global__ void other(float *y) { y[0] = 1; }\n"
            "```\nBetter:\n~~~cuda\n" GELU "~~~\n", "gelu");
    assert_int_equal(x.status, KB_EXTRACT_OK);
    assert_string_equal(x.source, GELU);
    kb_extracted_release(&x);

    /* without a name asked for, the first kernel block */
    x = run("```cuda\nextern \"C\" __global__ void other(float *y) { y[0] = 1; }\n```\n"
            "```cuda\n" GELU "```\n", NULL);
    assert_int_equal(x.status, KB_EXTRACT_OK);
    assert_non_null(strstr(x.source, "other"));
    kb_extracted_release(&x);
}

static void test_cut_and_unfenced(void **state)
{
    (void)state;
    /* a reply cut at its token cap inside the block */
    kb_extracted x = run("```cuda\n" GELU, "gelu");
    assert_int_equal(x.status, KB_EXTRACT_OK);
    assert_string_equal(x.source, GELU);
    kb_extracted_release(&x);
    /* no fences: a reply that is all code */
    x = run(GELU, "gelu");
    assert_int_equal(x.status, KB_EXTRACT_OK);
    assert_string_equal(x.source, GELU);
    kb_extracted_release(&x);
    /* an extern "C" block, __launch_bounds__, a directive line kept */
    const char *src = "// kb-launch: kernel=gelu grid=ceil_div(N,256) block=256\n"
                      "extern \"C\" {\n__global__ void __launch_bounds__(256) gelu(const "
                      "float *x, float *y, int n) { }\n}\n";
    char reply[1024];
    snprintf(reply, sizeof reply, "```\n%s```\n", src);
    x = run(reply, "gelu");
    assert_int_equal(x.status, KB_EXTRACT_OK);
    assert_string_equal(x.source, src);
    kb_extracted_release(&x);
}

static void test_no_code(void **state)
{
    (void)state;
    kb_extracted x = run("I cannot write this kernel, but here is how I would go about "
                         "it: use shared memory.", "gelu");
    assert_int_equal(x.status, KB_EXTRACT_NO_CODE);
    assert_null(x.source);
    assert_non_null(strstr(x.message, "no fenced block"));
    assert_non_null(strstr(x.message, "```cuda"));
    assert_non_null(strstr(x.message, "'gelu'"));
    kb_extracted_release(&x);
    x = run("", "gelu");
    assert_int_equal(x.status, KB_EXTRACT_NO_CODE);
    kb_extracted_release(&x);
    x = run(NULL, NULL);
    assert_int_equal(x.status, KB_EXTRACT_NO_CODE);
    kb_extracted_release(&x);
}

static void test_no_kernel(void **state)
{
    (void)state;
    /* C++ linkage: a mangled name */
    kb_extracted x = run("```cuda\n__global__ void gelu(float *y) { y[0] = 1; }\n```\n",
                         "gelu");
    assert_int_equal(x.status, KB_EXTRACT_NO_KERNEL);
    assert_null(x.source);
    assert_non_null(strstr(x.message, "'gelu' is __global__ but has C++ linkage"));
    assert_non_null(strstr(x.message, "extern \"C\" __global__"));
    kb_extracted_release(&x);
    /* device code with no kernel at all */
    x = run("```cuda\n__device__ float f(float v) { return v; }\n```\n", "gelu");
    assert_int_equal(x.status, KB_EXTRACT_NO_KERNEL);
    assert_non_null(strstr(x.message, "(1 block)"));
    assert_non_null(strstr(x.message, "The task launches 'gelu'"));
    kb_extracted_release(&x);
    /* an extern "C" in a comment does not count */
    x = run("```cuda\n/* extern \"C\" */ __global__ void gelu(float *y) { }\n```\n", "gelu");
    assert_int_equal(x.status, KB_EXTRACT_NO_KERNEL);
    kb_extracted_release(&x);
}

static void test_host_code(void **state)
{
    (void)state;
    kb_extracted x = run("```cuda\n" GELU "\nint main()\n{\n    float *x;\n"
                         "    cudaMalloc(&x, 1024);\n    gelu<<<4, 256>>>(x, x, 1024);\n}\n```\n",
                         "gelu");
    assert_int_equal(x.status, KB_EXTRACT_HOST_CODE);
    assert_null(x.source);
    assert_non_null(strstr(x.message, "host code (main, line 7"));
    assert_non_null(strstr(x.message, "kb-verify owns allocation"));
    kb_extracted_release(&x);
    /* a launch named in a comment is no host code */
    x = run("```cuda\n// launched as gelu<<<grid, 256>>>\n" GELU "```\n", "gelu");
    assert_int_equal(x.status, KB_EXTRACT_OK);
    kb_extracted_release(&x);
    /* a clean block beats a host one that defines the same kernel */
    x = run("```cuda\n" GELU "int main() { return 0; }\n```\n```cuda\n" GELU "```\n", "gelu");
    assert_int_equal(x.status, KB_EXTRACT_OK);
    assert_string_equal(x.source, GELU);
    kb_extracted_release(&x);
}

static void hash(const char *s, char out[65])
{
    kb_gen_source_hash(s, out);
    assert_int_equal(strlen(out), 64);
}

static void test_hash(void **state)
{
    (void)state;
    char a[65], b[65];
    hash(GELU, a);
    hash("// my kernel\nextern  \"C\"\t__global__ void gelu( const float* x,float *y,int n )"
         "{\n/* index */ int i=blockIdx.x*blockDim.x+threadIdx.x;\n\n"
         "    if(i<n)y[i]=0.5f*x[i]; // half\n}", b);
    assert_string_equal(a, b);
    /* the code counts */
    hash("extern \"C\" __global__ void gelu(const float *x, float *y, int n)\n"
         "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 0.25f * x[i]; }",
         b);
    assert_string_not_equal(a, b);
    /* so do the directives kb-verify reads */
    char c[65];
    hash("// kb-launch: kernel=gelu grid=ceil_div(N,256) block=256\n" GELU, b);
    hash("// kb-launch: kernel=gelu grid=ceil_div(N,512) block=512\n" GELU, c);
    assert_string_not_equal(a, b);
    assert_string_not_equal(b, c);
    /* operators that would run together, words that would */
    hash("int f(int a, int b) { return a - -b; }", b);
    hash("int f(int a, int b) { return a--b; }", c);
    assert_string_not_equal(b, c);
    hash("unsigned int x;", b);
    hash("unsignedint x;", c);
    assert_string_not_equal(b, c);
    /* a string literal as it is */
    hash("const char *s = \"a  b\";", b);
    hash("const char *s = \"a b\";", c);
    assert_string_not_equal(b, c);
    /* a preprocessor line ends at its newline */
    hash("#define A 1\n+2;", b);
    hash("#define A 1 +2;", c);
    assert_string_not_equal(b, c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prose_around_block),
        cmocka_unit_test(test_several_blocks),
        cmocka_unit_test(test_cut_and_unfenced),
        cmocka_unit_test(test_no_code),
        cmocka_unit_test(test_no_kernel),
        cmocka_unit_test(test_host_code),
        cmocka_unit_test(test_hash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
