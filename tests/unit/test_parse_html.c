/* test_parse_html.c - kb_parse_html on our fixtures (Sphinx-like, DITA-like,
 * plain, truncated, binary, empty) and on the real mirror: the PTX ISA
 * single page and the two Nsight Compute pages. */
#include "ingest/ingest_int.h"
#include "tests/unit/test_util.h"

/* ------------------------------------------------------------------ helpers */

static kb_rc parse_path(const char *path, kb_doc *doc, kb_err *err, double *ms)
{
    return tu_parse_file(kb_parse_html, path, doc, NULL, err, ms);
}

static void parse_fixture(const char *name, kb_doc *doc)
{
    char *rel = kb_path_join("html", name);
    tu_parse_fixture(kb_parse_html, rel, doc);
    free(rel);
}

static kb_rc parse_str(const char *s, size_t len, kb_doc *doc, kb_err *err)
{
    kb_doc_init(doc);
    kb_err_clear(err);
    return kb_parse_html(s, len, "inline.html", doc, err);
}

/* The first block under a section with this anchor, or NULL. */
static const kb_block *block_at(const kb_doc *doc, const char *anchor)
{
    for (size_t i = 0; i < doc->nblocks; i++)
        if (strcmp(doc->blocks[i].anchor, anchor) == 0)
            return &doc->blocks[i];
    return NULL;
}

/* 1 if needle appears in any block's text or heading path. */
static int anywhere(const kb_doc *doc, const char *needle)
{
    for (size_t i = 0; i < doc->nblocks; i++) {
        const kb_block *b = &doc->blocks[i];
        if (strstr(b->text, needle))
            return 1;
        for (size_t d = 0; d < b->depth; d++)
            if (strstr(b->heading[d], needle))
                return 1;
    }
    return 0;
}

static const char *innermost(const kb_block *b)
{
    return b->depth ? b->heading[b->depth - 1] : "";
}

/* Distinct non-empty anchors, and whether a heading holds the pilcrow or
 * is empty. */
static size_t distinct_anchors(const kb_doc *doc, int *bad_heading)
{
    size_t n = 0;
    const char **seen = calloc(doc->nblocks + 1, sizeof *seen);
    *bad_heading = 0;
    for (size_t i = 0; i < doc->nblocks; i++) {
        const kb_block *b = &doc->blocks[i];
        for (size_t d = 0; d < b->depth; d++)
            if (strstr(b->heading[d], "\xC2\xB6") || !b->heading[d][0])
                *bad_heading = 1;
        if (!b->anchor[0])
            continue;
        /* blocks of a section are consecutive; compare to all seen */
        size_t k = 0;
        while (k < n && strcmp(seen[k], b->anchor) != 0)
            k++;
        if (k == n)
            seen[n++] = b->anchor;
    }
    free(seen);
    return n;
}

/* ------------------------------------------------------------------ fixtures */

static void test_sphinx_fixture(void **state)
{
    (void)state;
    kb_doc doc;
    parse_fixture("sphinx.html", &doc);
    assert_string_equal(doc.title, "2. Warp Tricks");

    /* chrome is gone */
    static const char *const gone[] = {
        "NAVLINK", "MOBILE-NAV", "BREADCRUMB", "NEXT-BUTTON", "FOOTER-COPYRIGHT",
        "VERSIONS-PANEL", "SCRIPT-TEXT", "NOSCRIPT-TEXT", "color: red", "LOCAL-TOC",
        "Permalink", "\xC2\xB6", NULL
    };
    for (size_t i = 0; gone[i]; i++)
        if (anywhere(&doc, gone[i]))
            fail_msg("'%s' survived", gone[i]);

    /* section ids are the anchors, nesting from <section> */
    const kb_block *b = tu_block_with(&doc, "A tree reduction");
    assert_non_null(b);
    assert_int_equal(b->kind, KB_KIND_TEXT);
    assert_string_equal(b->anchor, "shuffle-reduction");
    assert_int_equal(b->depth, 2);
    assert_string_equal(b->heading[0], "2. Warp Tricks");
    assert_string_equal(b->heading[1], "2.1. Shuffle __shfl_down_sync reduction");

    b = tu_block_with(&doc, "Warps are groups");
    assert_non_null(b);
    assert_string_equal(b->text, "Warps are groups of thirty-two threads.");
    assert_string_equal(b->anchor, "warp-tricks");

    /* code: white space exactly as written */
    b = tu_block_with(&doc, "__shfl_down_sync(0xffffffff");
    assert_non_null(b);
    assert_int_equal(b->kind, KB_KIND_CODE);
    assert_string_equal(b->text,
                        "for (int off = 16; off > 0; off /= 2)\n"
                        "    v += __shfl_down_sync(0xffffffff, v, off);\n"
                        "\n"
                        "  // indented comment kept");

    /* an admonition keeps its title */
    b = tu_block_with(&doc, "All lanes named");
    assert_non_null(b);
    assert_string_equal(b->text, "Note: All lanes named in the mask must execute the call.");

    /* sections nested deeper than <h6> (Sphinx writes <h7>) */
    b = tu_block_with(&doc, "Seven levels down.");
    assert_non_null(b);
    assert_int_equal(b->depth, 7);
    assert_string_equal(b->anchor, "deep-e");
    assert_string_equal(innermost(b), "Deep E");
    assert_string_equal(b->heading[2], "2.1.1. Deep A");

    /* a table: caption, header row, one line per row */
    b = tu_block_with(&doc, "Lane masks");
    assert_non_null(b);
    assert_int_equal(b->kind, KB_KIND_TABLE);
    assert_string_equal(b->text, "Table 1 Lane masks\n"
                                 "Mask | Lanes\n"
                                 "0xffffffff | all 32\n"
                                 "0x0000ffff | lower 16");
    assert_string_equal(b->anchor, "shuffle-reduction");

    /* after the nested sections close, text is back in its own section */
    b = tu_block_with(&doc, "Back in 2.1");
    assert_non_null(b);
    assert_int_equal(b->depth, 2);
    assert_string_equal(b->anchor, "shuffle-reduction");

    /* a Sphinx rubric labels the paragraph after it; before code it is a
     * block of its own */
    b = tu_block_with(&doc, "same answer");
    assert_non_null(b);
    assert_string_equal(b->text, "Semantics: Every active lane gets the same answer.");
    b = tu_block_with(&doc, "vote.sync.all.pred");
    assert_non_null(b);
    assert_int_equal(b->kind, KB_KIND_CODE);
    assert_string_equal(b->text, "vote.sync.all.pred p, q, membermask;");
    assert_string_equal(b[-1].text, "Syntax");

    /* lists and definitions: one block each */
    b = tu_block_with(&doc, "__all_sync");
    assert_non_null(b);
    assert_string_equal(b->text, "- __all_sync tests every lane.");
    assert_string_equal(b->anchor, "vote-functions");
    assert_non_null(tu_block_with(&doc, "- __any_sync tests any lane."));
    b = tu_block_with(&doc, "Returns a bit mask");
    assert_non_null(b);
    assert_string_equal(b->text, "Returns a bit mask of the lanes.");
    kb_doc_release(&doc);
}

static void test_simple_fixture(void **state)
{
    (void)state;
    kb_doc doc;
    parse_fixture("simple.html", &doc);
    assert_string_equal(doc.title, "Tiling Notes");
    static const char *const gone[] = {
        "SITE-HEADER", "NAV-ITEM", "SITE-FOOTER", "BREADCRUMB-TEXT", "ASIDE-TOC",
        "Simple Page Title", NULL
    };
    for (size_t i = 0; gone[i]; i++)
        if (anywhere(&doc, gone[i]))
            fail_msg("'%s' survived", gone[i]);

    const kb_block *b = tu_block_with(&doc, "Intro paragraph");
    assert_non_null(b);
    assert_string_equal(b->text, "Intro paragraph with extra spaces & an entity.");
    assert_int_equal(b->depth, 1);
    /* the nearest enclosing id: the h1 is the first heading of div#content */
    assert_string_equal(b->anchor, "content");

    b = tu_block_with(&doc, "staged through");
    assert_non_null(b);
    assert_string_equal(b->anchor, "explicit-id");
    assert_int_equal(b->depth, 2);

    b = tu_block_with(&doc, "tab-indented");
    assert_non_null(b);
    assert_int_equal(b->kind, KB_KIND_CODE);
    assert_string_equal(b->text, "__global__ void k(float *x)\n{\n"
                                 "\tx[threadIdx.x] *= 2.0f;   /* tab-indented */\n}");

    /* no id: a slug of the heading */
    b = tu_block_with(&doc, "Padding by one word");
    assert_non_null(b);
    assert_string_equal(innermost(b), "Bank Conflicts: Why & How");
    assert_string_equal(b->anchor, "bank-conflicts-why--how");

    b = tu_block_with(&doc, "[TILE][TILE + 1]");
    assert_non_null(b);
    assert_int_equal(b->depth, 3);
    assert_string_equal(b->anchor, "padding-example");
    assert_string_equal(innermost(b), "Padding Example");   /* no "#" link */
    assert_string_equal(b->heading[1], "Bank Conflicts: Why & How");

    b = tu_block_with(&doc, "Inside a div");
    assert_non_null(b);
    assert_int_equal(b->depth, 3);
    assert_string_equal(b->anchor, "wrapped");

    b = tu_block_with(&doc, "naive | 120");
    assert_non_null(b);
    assert_int_equal(b->kind, KB_KIND_TABLE);
    assert_string_equal(b->text, "Kernel | GB/s\nnaive | 120\npadded | 410");
    assert_int_equal(b->depth, 2);
    assert_string_equal(innermost(b), "R\xC3\xA9sum\xC3\xA9 of Results");
    assert_string_equal(b->anchor, "r\xC3\xA9sum\xC3\xA9-of-results");
    kb_doc_release(&doc);
}

static void test_dita_fixture(void **state)
{
    (void)state;
    kb_doc doc;
    parse_fixture("dita.html", &doc);
    assert_string_equal(doc.title, "Occupancy Guide :: Example Tools Documentation");
    static const char *const gone[] = {
        "HEADER-TITLE", "NAV-INTRO", "Search Results", "RELEASE-INFO", "-->",
        "_tracker", NULL
    };
    for (size_t i = 0; gone[i]; i++)
        if (anywhere(&doc, gone[i]))
            fail_msg("'%s' survived", gone[i]);

    const kb_block *b = tu_block_with(&doc, "ratio of active warps");
    assert_non_null(b);
    assert_int_equal(b->depth, 1);
    assert_string_equal(b->heading[0], "1. Introduction");   /* &nbsp; */
    assert_string_equal(b->anchor, "intro");

    /* nested topics and their sections repeat <h3>: depth from nesting */
    b = tu_block_with(&doc, "Registers per thread");
    assert_non_null(b);
    assert_int_equal(b->depth, 3);
    assert_string_equal(b->heading[1], "1.1. Limits");
    assert_string_equal(b->heading[2], "Registers");
    assert_string_equal(b->anchor, "limits__registers");

    b = tu_block_with(&doc, "ncu --section Occupancy ./app");
    assert_non_null(b);
    assert_int_equal(b->kind, KB_KIND_CODE);
    assert_string_equal(b->anchor, "limits__smem");

    /* blank lines around code go, indentation stays */
    b = tu_block_with(&doc, "int blocks = 0;");
    assert_non_null(b);
    assert_int_equal(b->kind, KB_KIND_CODE);
    assert_string_equal(b->text, "    int blocks = 0;   // first line keeps its indent\n"
                                 "  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k, 256, 0);");

    b = tu_block_with(&doc, "partial last wave");
    assert_non_null(b);
    assert_int_equal(b->depth, 3);
    assert_string_equal(b->heading[2], "1.1.1. Tail Effects");
    assert_string_equal(b->anchor, "limits-tail");

    /* an empty topic title: the section heading inside it names it, and
     * the topic's id is the anchor */
    b = tu_block_with(&doc, "marks of their owners");
    assert_non_null(b);
    assert_int_equal(b->depth, 2);
    assert_string_equal(b->heading[0], "Notices");
    assert_string_equal(b->heading[1], "Trademarks");
    assert_string_equal(b->anchor, "trademarks");
    kb_doc_release(&doc);
}

static void test_truncated(void **state)
{
    (void)state;
    kb_doc doc;
    parse_fixture("truncated.html", &doc);
    assert_non_null(block_at(&doc, "warp-tricks"));
    const kb_block *b = block_at(&doc, "shuffle-reduction");
    assert_non_null(b);
    b = tu_block_with(&doc, "Seven levels dow");
    assert_non_null(b);
    assert_string_equal(b->anchor, "deep-e");
    kb_doc_release(&doc);

    /* every prefix of a page parses without error or crash */
    char *path = tu_fixture("html/sphinx.html");
    kb_buf page;
    kb_buf_init(&page, 0);
    tu_read_file(path, 1 << 20, &page);
    kb_err err;
    kb_err_clear(&err);
    for (size_t n = 1; n < page.len; n += 37) {
        kb_rc rc = parse_str(page.data, n, &doc, &err);
        if (rc != KB_OK)
            fail_msg("prefix %zu: %s", n, err.msg);
        kb_doc_release(&doc);
    }
    kb_buf_release(&page);
    free(path);
}

/* Markup nested past libxml2's 256 levels was cut there, its error hidden:
 * everything after the deep part was dropped (issue 15 item 8). Now it
 * is kept, and markup past the walker's own 512 levels keeps its text. */
static void test_deep_nesting(void **state)
{
    (void)state;
    static const int depths[] = { 255, 300, 600, 100000 };
    for (size_t i = 0; i < sizeof depths / sizeof depths[0]; i++) {
        kb_buf h;
        kb_buf_init(&h, 0);
        tu_puts(&h, "<html><body><h1>Deep page</h1><p>Before the deep part.</p>");
        for (int d = 0; d < depths[i]; d++)
            tu_puts(&h, "<div>");
        tu_puts(&h, "<p>Inside <b>the</b> deep part.</p>");
        for (int d = 0; d < depths[i]; d++)
            tu_puts(&h, "</div>");
        tu_puts(&h, "<h2 id=\"after\">After</h2><p>Text after the deep part.</p>"
                    "</body></html>");
        kb_doc doc;
        kb_err err;
        assert_int_equal(parse_str(h.data, h.len, &doc, &err), KB_OK);
        if (!anywhere(&doc, "Inside the deep part."))
            fail_msg("%d levels: the deep part's text is lost", depths[i]);
        const kb_block *b = block_at(&doc, "after");
        if (!b || !strstr(b->text, "Text after the deep part."))
            fail_msg("%d levels: what follows the deep part is lost", depths[i]);
        assert_string_equal(innermost(b), "After");
        kb_doc_release(&doc);
        kb_buf_release(&h);
    }
}

static void test_binary(void **state)
{
    (void)state;
    static const unsigned char png[] = {
        0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D',
        'R', 0, 0, 1, 0, 0, 0, 1, 0, 8, 6, 0, 0, 0
    };
    kb_doc doc;
    kb_doc_init(&doc);
    kb_err err;
    kb_err_clear(&err);
    kb_rc rc = kb_parse_html((const char *)png, sizeof png, "img/logo.html", &doc, &err);
    assert_int_equal(rc, KB_ERR_PARSE);
    assert_string_equal(err.msg, "'img/logo.html' does not look like HTML (binary data)");
    assert_int_equal(doc.nblocks, 0);
    kb_doc_release(&doc);

    /* no NUL, but mostly control bytes */
    char junk[512];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)(1 + i % 7);
    rc = parse_str(junk, sizeof junk, &doc, &err);
    assert_int_equal(rc, KB_ERR_PARSE);
    kb_doc_release(&doc);
}

static void test_empty(void **state)
{
    (void)state;
    kb_doc doc;
    kb_err err;
    assert_int_equal(parse_str("", 0, &doc, &err), KB_OK);
    assert_int_equal(doc.nblocks, 0);
    kb_doc_release(&doc);
    assert_int_equal(parse_str(" \n\t\n", 4, &doc, &err), KB_OK);
    assert_int_equal(doc.nblocks, 0);
    kb_doc_release(&doc);
    static const char bare[] = "<html><body></body></html>";
    assert_int_equal(parse_str(bare, sizeof bare - 1, &doc, &err), KB_OK);
    assert_int_equal(doc.nblocks, 0);
    kb_doc_release(&doc);
}

static void test_title_and_text(void **state)
{
    (void)state;
    kb_doc doc;
    kb_err err;
    /* no h1: <title> */
    static const char a[] = "<html><head><title>Page  Title</title></head><body>"
                            "<h2>First</h2><p>one</p><h3>Sub</h3><p>two</p>"
                            "<h2>Second</h2><p>three</p></body></html>";
    assert_int_equal(parse_str(a, sizeof a - 1, &doc, &err), KB_OK);
    assert_string_equal(doc.title, "Page Title");
    const kb_block *b = tu_block_with(&doc, "two");
    assert_non_null(b);
    assert_int_equal(b->depth, 2);
    assert_string_equal(b->anchor, "sub");
    b = tu_block_with(&doc, "three");
    assert_non_null(b);
    assert_int_equal(b->depth, 1);
    assert_string_equal(b->heading[0], "Second");
    kb_doc_release(&doc);

    /* a single-page manual saved from its first chapter: the manual's
     * name after the dash titles it, not the chapter */
    static const char m[] = "<html><head><title>1. Introduction \xe2\x80\x94 Tile "
                            "ISA 2.0 documentation</title></head><body>"
                            "<h1>1. Introduction</h1><p>one</p>"
                            "<h1>2. Model</h1><p>two</p></body></html>";
    assert_int_equal(parse_str(m, sizeof m - 1, &doc, &err), KB_OK);
    assert_string_equal(doc.title, "Tile ISA 2.0");
    assert_string_equal(tu_block_with(&doc, "two")->heading[0], "2. Model");
    kb_doc_release(&doc);

    /* slugs are unique in the page; hidden markup is not content */
    static const char e[] = "<h2>Notes</h2><p>first</p><h2>Notes</h2><p>second</p>"
                            "<h2 id=\"notes-1\">Other</h2><p>third</p>"
                            "<h2>Notes</h2><p>fourth<span aria-hidden=\"true\">ICON</span>"
                            "<span hidden>HIDDEN</span></p>";
    assert_int_equal(parse_str(e, sizeof e - 1, &doc, &err), KB_OK);
    assert_string_equal(tu_block_with(&doc, "first")->anchor, "notes");
    assert_string_equal(tu_block_with(&doc, "second")->anchor, "notes-1");
    assert_string_equal(tu_block_with(&doc, "third")->anchor, "notes-1");
    assert_string_equal(tu_block_with(&doc, "fourth")->anchor, "notes-2");
    assert_string_equal(tu_block_with(&doc, "fourth")->text, "fourth");
    kb_doc_release(&doc);

    /* UTF-8 without a charset declaration stays UTF-8; plain text without
     * markup is still HTML text */
    static const char c[] = "<p>na\xC3\xAFve caf\xC3\xA9 \xE2\x86\x92 ok</p>";
    assert_int_equal(parse_str(c, sizeof c - 1, &doc, &err), KB_OK);
    assert_int_equal(doc.nblocks, 1);
    assert_string_equal(doc.blocks[0].text, "na\xC3\xAFve caf\xC3\xA9 \xE2\x86\x92 ok");
    kb_doc_release(&doc);

    /* headings inside a section wrapper stay siblings */
    static const char d[] = "<main><section><h2>A</h2><p>in a</p><h2>B</h2>"
                            "<p>in b</p></section></main>";
    assert_int_equal(parse_str(d, sizeof d - 1, &doc, &err), KB_OK);
    b = tu_block_with(&doc, "in b");
    assert_non_null(b);
    assert_int_equal(b->depth, 1);
    assert_string_equal(b->heading[0], "B");
    kb_doc_release(&doc);
}

/* ------------------------------------------------------------------ mirror */

static void test_ptx_real(void **state)
{
    (void)state;
    char *path = kb_path_join(tu_mirror(), "ptx-isa/html/ptx.html");
    kb_doc doc;
    kb_doc_init(&doc);
    kb_err err;
    kb_err_clear(&err);
    double ms = 0;
    kb_rc rc = parse_path(path, &doc, &err, &ms);
    if (rc != KB_OK)
        fail_msg("%s", err.msg);
    int bad = 0;
    size_t anchors = distinct_anchors(&doc, &bad);
    printf("ptx.html: %zu blocks (%zu code, %zu table), %zu distinct anchors, %.0f ms\n",
           doc.nblocks, tu_count_kind(&doc, KB_KIND_CODE), tu_count_kind(&doc, KB_KIND_TABLE),
           anchors, ms);
    assert_true(anchors >= 600);
    assert_false(bad);
    assert_true(tu_count_kind(&doc, KB_KIND_TABLE) >= 250);
    assert_true(tu_count_kind(&doc, KB_KIND_CODE) >= 500);
    /* generous: sanitizer builds are several times slower */
    assert_true(ms < 5000);

    const kb_block *b = block_at(&doc, "introduction");
    assert_non_null(b);
    assert_int_equal(b->depth, 1);
    assert_string_equal(b->heading[0], "1. Introduction");

    b = block_at(&doc, "data-movement-and-conversion-instructions-cp-async-bulk-tensor");
    assert_non_null(b);
    assert_int_equal(b->depth, 6);
    assert_string_equal(b->heading[0], "9. Instruction Set");
    assert_non_null(strstr(innermost(b), "cp.async.bulk.tensor"));
    int code = 0;
    for (size_t i = 0; i < doc.nblocks; i++)
        if (doc.blocks[i].kind == KB_KIND_CODE &&
            strcmp(doc.blocks[i].anchor, b->anchor) == 0 &&
            strstr(doc.blocks[i].text, "cp.async.bulk.tensor.dim.dst.src"))
            code = 1;
    assert_true(code);

    /* a section Sphinx titled with <h7> */
    b = block_at(&doc, "asynchronous-warpgroup-level-matrix-register-fragment-wgmma-64n16");
    assert_non_null(b);
    assert_int_equal(b->depth, 7);
    assert_non_null(strstr(innermost(b), "wgmma.mma_async.m64nNk16"));

    b = block_at(&doc, "warp-shuffle-functions-shfl-sync");
    if (!b)
        b = tu_block_with(&doc, "shfl.sync");
    assert_non_null(b);

    /* navigation and footer are not content */
    assert_false(anywhere(&doc, "Search docs"));
    assert_false(anywhere(&doc, "Permalink to this"));
    assert_null(tu_block_with(&doc, "Archive"));
    kb_doc_release(&doc);
    free(path);
}

static void test_nsight_real(void **state)
{
    (void)state;
    static const struct {
        const char *file, *anchor, *heading;
        size_t depth, min_anchors;
    } pages[] = {
        { "tuning-guides/nsight-compute-html/ProfilingGuide/index.html",
          "metric-collection", "2. Metric Collection", 1, 60 },
        { "tuning-guides/nsight-compute-html/ProfilingGuide/index.html",
          "range-replay-supported-apis__rr-supported-apis-error-handling",
          "Error Handling", 5, 60 },
        { "tuning-guides/nsight-compute-html/ProfilingGuide/index.html",
          "metrics-hw-model__metrics-hw-compute-model", "Compute Model", 3, 60 },
        { "tuning-guides/nsight-compute-html/NsightComputeCli/index.html",
          "quick-start", "2. Quickstart", 1, 25 },
    };
    for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
        char *path = kb_path_join(tu_mirror(), pages[i].file);
        kb_doc doc;
        kb_doc_init(&doc);
        kb_err err;
        kb_err_clear(&err);
        double ms = 0;
        if (parse_path(path, &doc, &err, &ms) != KB_OK)
            fail_msg("%s", err.msg);
        int bad = 0;
        size_t anchors = distinct_anchors(&doc, &bad);
        printf("%s: %zu blocks (%zu code, %zu table), %zu distinct anchors, %.0f ms\n",
               pages[i].file, doc.nblocks, tu_count_kind(&doc, KB_KIND_CODE),
               tu_count_kind(&doc, KB_KIND_TABLE), anchors, ms);
        assert_true(anchors >= pages[i].min_anchors);
        assert_false(bad);
        const kb_block *b = block_at(&doc, pages[i].anchor);
        if (!b)
            fail_msg("%s: no section '%s'", pages[i].file, pages[i].anchor);
        assert_int_equal(b->depth, pages[i].depth);
        assert_string_equal(innermost(b), pages[i].heading);
        assert_false(anywhere(&doc, "Search Results"));
        assert_false(anywhere(&doc, "Send Feedback"));
        assert_false(anywhere(&doc, "-->"));
        assert_non_null(doc.title);
        assert_non_null(strstr(doc.title, "Nsight Compute"));
        kb_doc_release(&doc);
        free(path);
    }
}

int main(void)
{
    const struct CMUnitTest fixtures[] = {
        cmocka_unit_test(test_sphinx_fixture),
        cmocka_unit_test(test_simple_fixture),
        cmocka_unit_test(test_dita_fixture),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_binary),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_title_and_text),
    };
    const struct CMUnitTest real[] = {
        cmocka_unit_test(test_ptx_real),
        cmocka_unit_test(test_nsight_real),
    };
    int failed = cmocka_run_group_tests_name("parse_html fixtures", fixtures, NULL, NULL);
    if (!tu_mirror()) {
        printf("skip: the real-document checks (KB_MIRROR is unset or missing)\n");
        return failed;
    }
    return failed + cmocka_run_group_tests_name("parse_html mirror", real, NULL, NULL);
}
