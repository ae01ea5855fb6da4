/* test_cite.c - what a draft skill cites (generator/cite.c): links that
 * hold no machine's path, the passages that helped a kernel, file: URLs an
 * LLM wrote cut to their file's name (issue 26 item 19). */
#include "generator/gen.h"
#include "test_util.h"

static kb_gen_cite cite(const char *source, const char *skill, const char *url,
                        const char *path, const char *text)
{
    return (kb_gen_cite){ .source = (char *)source, .skill = (char *)skill,
                          .url = (char *)url, .path = (char *)path, .text = (char *)text };
}

static void test_links(void **state)
{
    (void)state;
    kb_gen_cite c = cite("skills", "smem-tiled-transpose",
                         "file:///home/me/kb/corpus/skills/smem-tiled-transpose/SKILL.md#technique",
                         "corpus/skills/smem-tiled-transpose/SKILL.md", "");
    char *l = kb_gen_cite_link(&c);
    assert_string_equal(l, "skill://smem-tiled-transpose/SKILL.md#technique");
    free(l);
    /* an exemplar: the kernel of a skill, no skill named on the cite */
    c = cite("skill-drafts", "", "file:///tmp/x/skills/gelu-vec4/kernel.cu", "skills/gelu-vec4/kernel.cu", "");
    l = kb_gen_cite_link(&c);
    assert_string_equal(l, "skill://gelu-vec4/kernel.cu");
    free(l);
    c = cite("cuda-best-practices", "", "https://docs.nvidia.com/cuda/x/index.html#coalesced", "", "");
    l = kb_gen_cite_link(&c);
    assert_string_equal(l, "https://docs.nvidia.com/cuda/x/index.html#coalesced");
    free(l);
    /* another local file: no link, its source-relative path */
    c = cite("local", "", "file:///home/me/notes/tiles.md#x", "notes/tiles.md", "");
    assert_null(kb_gen_cite_link(&c));
    assert_string_equal(kb_gen_cite_where(&c), "notes/tiles.md");
    c = cite("local", "", "file:///home/me/notes/tiles.md", "/home/me/notes/tiles.md", "");
    assert_string_equal(kb_gen_cite_where(&c), "tiles.md");
}

static void test_helped(void **state)
{
    (void)state;
    const char *ref = "extern \"C\" __global__ void gelu(const float *x, float *y, int n) {\n"
                      "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }\n";
    const char *kernel = "extern \"C\" __global__ void gelu(const float *x, float *y, int n) {\n"
                         "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                         "  float4 v = reinterpret_cast<const float4 *>(x)[i];\n"
                         "  asm volatile(\"cp.async.ca.shared.global [%0], [%1], 16;\" :: \"r\"(0), \"l\"(x)); }\n";
    kb_gen_cite c = cite("cuda-best-practices", "", "https://x", "",
                         "Use vector types such as float4 for 128-bit loads.");
    assert_true(kb_gen_cite_helped(&c, kernel, ref));
    c.text = "cp.async copies from global to shared memory asynchronously.";
    assert_true(kb_gen_cite_helped(&c, kernel, ref));
    /* what the reference has already, and prose, say nothing */
    c.text = "Each thread computes its index from blockIdx.x, blockDim.x and threadIdx.x.";
    assert_false(kb_gen_cite_helped(&c, kernel, ref));
    c.text = "Coalesced access to global memory is the first thing to get right: the memory "
             "transactions of a warp.";
    assert_false(kb_gen_cite_helped(&c, kernel, ref));
    /* a whole identifier only: float4x is not float4 */
    c.text = "float4x and xfloat4 are not types.";
    assert_false(kb_gen_cite_helped(&c, kernel, ref));
    c.text = NULL;
    assert_false(kb_gen_cite_helped(&c, kernel, ref));
}

static void test_scrub(void **state)
{
    (void)state;
    char *t = kb_strdup("see [the guide](file:///home/me/kb/corpus/guide/g.md#tiles) "
                        "and file:///home/me/x.cu; keep https://docs.nvidia.com/a/b");
    assert_int_equal(kb_gen_scrub_paths(&t), KB_OK);
    assert_string_equal(t, "see [the guide](g.md#tiles) and x.cu; keep https://docs.nvidia.com/a/b");
    free(t);
    t = NULL;
    assert_int_equal(kb_gen_scrub_paths(&t), KB_OK);
    assert_null(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_links),
        cmocka_unit_test(test_helped),
        cmocka_unit_test(test_scrub),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
