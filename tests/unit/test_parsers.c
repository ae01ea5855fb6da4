/* test_parsers.c - heading slugs (GitHub's and docutils'), anchor
 * de-duplication, and the choice of a parser by extension, hint and
 * sniffing (ingest/parsers.c). */
#include "ingest/ingest_int.h"
#include "tests/unit/test_util.h"

#include <stdint.h>

static void slug_is(const char *heading, const char *want)
{
    char *s = kb_slugify(heading);
    assert_non_null(s);
    if (strcmp(s, want) != 0)
        fail_msg("slug of '%s' is '%s', wanted '%s'", heading, s, want);
    free(s);
}

static void test_slug_github(void **state)
{
    (void)state;
    slug_is("Loop Counters: Signed", "loop-counters-signed");
    slug_is("Loop Counters Signed vs. Unsigned", "loop-counters-signed-vs-unsigned");
    slug_is("Hello, World!", "hello-world");
    slug_is("Shared Memory: Banks & Conflicts!", "shared-memory-banks--conflicts");
    slug_is("snake_case and kebab-case", "snake_case-and-kebab-case");
    slug_is("`__shfl_down_sync()` (warp)", "__shfl_down_sync-warp");
    slug_is("C++ / CUDA?", "c--cuda");
    slug_is("  Trimmed  ", "trimmed");
    slug_is("Größe über alles", "größe-über-alles");
    slug_is("日本語 見出し", "日本語-見出し");
    slug_is("📌 Table of Content (ToC)", "-table-of-content-toc");
    slug_is("Version 2.0", "version-20");
    slug_is("", "");
    char *s = kb_slugify(NULL);
    assert_string_equal(s, "");
    free(s);
}

static void test_slug_unique(void **state)
{
    (void)state;
    kb_strset seen;
    kb_strset_init(&seen);
    const char *heads[] = { "Intro", "Intro", "Intro", "Intro-1", "Usage" };
    const char *want[] = { "intro", "intro-1", "intro-2", "intro-1-1", "usage" };
    for (size_t i = 0; i < 5; i++) {
        char *s = kb_ingest_unique_slug(&seen, heads[i]);
        assert_string_equal(s, want[i]);
        free(s);
    }
    /* many entries force the set to grow */
    for (int i = 0; i < 500; i++) {
        char *s = kb_ingest_unique_slug(&seen, "Same");
        free(s);
    }
    char *s = kb_ingest_unique_slug(&seen, "Same");
    assert_string_equal(s, "same-500");
    free(s);
    kb_strset_release(&seen);
}

static void test_docutils_id(void **state)
{
    (void)state;
    struct { const char *in, *want; } cases[] = {
        { "12.1.5. Loop Counters Signed vs. Unsigned", "loop-counters-signed-vs-unsigned" },
        { "1. Overview", "overview" },
        { "CUDA®: A General-Purpose Platform", "cuda-a-general-purpose-platform" },
        { "cp.async.bulk.tensor", "cp-async-bulk-tensor" },
        { "tcgen05.mma.cta_group::1.kind::f16", "tcgen05-mma-cta-group-1-kind-f16" },
        { "Café Crème", "cafe-creme" },
        { "3D Textures", "d-textures" },
        { "--", "" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *s = kb_ingest_docutils_id(cases[i].in);
        if (strcmp(s, cases[i].want) != 0)
            fail_msg("id of '%s' is '%s', wanted '%s'", cases[i].in, s, cases[i].want);
        free(s);
    }
}

static void test_dispatch_extension(void **state)
{
    (void)state;
    assert_ptr_equal(kb_parser_for("a/b/page.html", NULL), kb_parse_html);
    assert_ptr_equal(kb_parser_for("page.HTM", NULL), kb_parse_html);
    assert_ptr_equal(kb_parser_for("https://h.org/a.b/page.html?x=1.md#s.rst", NULL),
                     kb_parse_html);
    assert_ptr_equal(kb_parser_for("https://h.org/v1.2/", "rst"), kb_parse_rst);
    assert_ptr_equal(kb_parser_for("page.xhtml", "text"), kb_parse_html);
    assert_ptr_equal(kb_parser_for("README.md", NULL), kb_parse_markdown);
    assert_ptr_equal(kb_parser_for("x.markdown", NULL), kb_parse_markdown);
    assert_ptr_equal(kb_parser_for("docs/ptx.rst", "markdown+rst"), kb_parse_rst);
    assert_ptr_equal(kb_parser_for("docs/guide.md", "markdown+rst"), kb_parse_markdown);
    const char *cuda[] = { "k.cu", "k.cuh", "k.h", "k.hpp", "k.cpp", "k.c", "k.cc" };
    for (size_t i = 0; i < sizeof cuda / sizeof cuda[0]; i++)
        assert_ptr_equal(kb_parser_for(cuda[i], NULL), kb_parse_cuda);
    assert_ptr_equal(kb_parser_for("notes.txt", NULL), kb_parse_text);
    assert_ptr_equal(kb_parser_for("cutlass/LICENSE.txt", NULL), kb_parse_text);
    assert_ptr_equal(kb_parser_for("awesome/LICENSE", NULL), kb_parse_text);
    assert_ptr_equal(kb_parser_for("cuda-samples/copyright", "cuda-source"), kb_parse_text);
    assert_null(kb_parser_for("corpus/MANIFEST.json", "markdown"));
    /* files kb does not ingest, whatever the hint says */
    const char *skip[] = { "img/a.png", "a.jpg", "a.gif", "a.svg", "doc.pdf" };
    for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
        assert_null(kb_parser_for(skip[i], "markdown"));
}

static void test_dispatch_hint(void **state)
{
    (void)state;
    /* no extension (a URL path, say): the manifest's format decides */
    assert_ptr_equal(kb_parser_for("https://docs.example.org/guide/", "html"), kb_parse_html);
    assert_ptr_equal(kb_parser_for("no-such-file", "markdown"), kb_parse_markdown);
    assert_ptr_equal(kb_parser_for("no-such-file", "rst"), kb_parse_rst);
    assert_ptr_equal(kb_parser_for("no-such-file", "cuda-source"), kb_parse_cuda);
    assert_ptr_equal(kb_parser_for("no-such-file", "text"), kb_parse_text);
    /* "markdown+rst" only says "decide by extension" */
    assert_null(kb_parser_for("no-such-file", "markdown+rst"));
    assert_null(kb_parser_for("no-such-file", NULL));
    assert_null(kb_parser_for("no-such-file.bin", "weird"));
}

static void test_dispatch_sniff(void **state)
{
    (void)state;
    static const char bin[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
    /* files without an extension: their first bytes decide */
    static const struct { const char *name, *text; kb_parse_fn want; } cases[] = {
        { "html", "\n  <!DOCTYPE html>\n<html><body>x</body></html>", kb_parse_html },
        { "html2", "<html lang=\"en\"><p>x</p></html>", kb_parse_html },
        { "md", "# A Title\n\nSome text.\n", kb_parse_markdown },
        { "plain", "just some words\n", NULL },
    };
    char *dir = tu_tmpdir("parsers");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *p = tu_write_fixture(dir, cases[i].name, cases[i].text);
        assert_ptr_equal(kb_parser_for(p, NULL), cases[i].want);
        free(p);
    }
    char *p = kb_path_join(dir, "bin");
    tu_write_file(p, bin, sizeof bin - 1);
    assert_null(kb_parser_for(p, NULL));
    free(p);
    tu_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slug_github),
        cmocka_unit_test(test_slug_unique),
        cmocka_unit_test(test_docutils_id),
        cmocka_unit_test(test_dispatch_extension),
        cmocka_unit_test(test_dispatch_hint),
        cmocka_unit_test(test_dispatch_sniff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
