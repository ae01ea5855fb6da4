/* test_parse_markdown.c - kb_parse_markdown on our fixtures
 * (tests/fixtures/md) and on the real mirror ($KB_MIRROR): headings and
 * anchors, code intact, tables as rows, the literature list as papers. */
#include "ingest/ingest_int.h"
#include "tests/unit/test_util.h"

#include <stdint.h>

/* ------------------------------------------------------------ helpers */

/* Parses a file into doc (and its bytes into raw, if given). */
static kb_rc parse_path(const char *path, kb_doc *doc, kb_buf *raw, double *ms)
{
    return tu_parse_file(kb_parse_markdown, path, doc, raw, NULL, ms);
}

static void parse_fixture(const char *name, kb_doc *doc)
{
    char *rel = kb_path_join("md", name);
    tu_parse_fixture(kb_parse_markdown, rel, doc);
    free(rel);
}

static const kb_block *find_paper(const kb_doc *doc, const char *title)
{
    for (size_t i = 0; i < doc->nblocks; i++)
        if (doc->blocks[i].paper && strcmp(doc->blocks[i].paper->title, title) == 0)
            return &doc->blocks[i];
    return NULL;
}

static const char *link_url(const kb_paper *p, const char *label)
{
    for (size_t i = 0; i < p->nlinks; i++)
        if (strcmp(p->links[i].label, label) == 0)
            return p->links[i].url;
    return NULL;
}

/* Sections (distinct heading path + anchor) and how many have an anchor. */
static void count_sections(const kb_doc *doc, size_t *nsec, size_t *nanchor)
{
    *nsec = *nanchor = 0;
    kb_buf cur, prev;
    kb_buf_init(&cur, 0);
    kb_buf_init(&prev, 0);
    tu_puts(&prev, "\x01");
    for (size_t i = 0; i < doc->nblocks; i++) {
        const kb_block *b = &doc->blocks[i];
        size_t depth = b->kind == KB_KIND_PAPER ? b->depth - 1 : b->depth;
        kb_buf_reset(&cur);
        for (size_t d = 0; d < depth; d++)
            tu_printf(&cur, "%s\x1f", b->heading[d]);
        tu_puts(&cur, b->anchor);
        if (strcmp(cur.data, prev.data) != 0) {
            (*nsec)++;
            *nanchor += b->anchor[0] != '\0';
            kb_buf_reset(&prev);
            tu_puts(&prev, cur.data);
        }
    }
    kb_buf_release(&cur);
    kb_buf_release(&prev);
}

/* ------------------------------------------------------------ fixtures */

static void test_empty(void **state)
{
    (void)state;
    kb_doc doc;
    parse_fixture("empty.md", &doc);
    assert_int_equal(doc.nblocks, 0);
    assert_null(doc.title);
    kb_doc_release(&doc);

    kb_err err;
    kb_err_clear(&err);
    kb_doc_init(&doc);
    assert_int_equal(kb_parse_markdown("", 0, "x.md", &doc, &err), KB_OK);
    assert_int_equal(doc.nblocks, 0);
    kb_doc_release(&doc);
}

static void test_binary_is_an_error(void **state)
{
    (void)state;
    static const char bin[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
    kb_doc doc;
    kb_doc_init(&doc);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_parse_markdown(bin, sizeof bin - 1, "img.md", &doc, &err),
                     KB_ERR_PARSE);
    assert_string_equal(err.msg, "'img.md' does not look like Markdown (binary data)");
    kb_doc_release(&doc);

    /* control bytes without a NUL are refused as they are for .txt */
    static const char ctrl[] = "\x01\x02\x03\x04\x05\x06\x07\x08\x0e\x0f"
                               "\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19";
    kb_doc_init(&doc);
    kb_err_clear(&err);
    assert_int_equal(kb_parse_markdown(ctrl, sizeof ctrl - 1, "ctrl.md", &doc, &err),
                     KB_ERR_PARSE);
    assert_string_equal(err.msg, "'ctrl.md' does not look like Markdown (binary data)");
    assert_int_equal(doc.nblocks, 0);
    kb_doc_release(&doc);
    kb_doc_init(&doc);
    kb_err_clear(&err);
    assert_int_equal(kb_parse_text(ctrl, sizeof ctrl - 1, "ctrl.txt", &doc, &err),
                     KB_ERR_PARSE);
    assert_string_equal(err.msg, "'ctrl.txt' does not look like text (binary data)");
    kb_doc_release(&doc);

    /* a NUL past the first 8 KiB still makes it binary */
    static char late[9000];
    memset(late, 'a', sizeof late);
    late[8500] = '\0';
    kb_doc_init(&doc);
    kb_err_clear(&err);
    assert_int_equal(kb_parse_markdown(late, sizeof late, "late.md", &doc, &err),
                     KB_ERR_PARSE);
    kb_doc_release(&doc);
}

static void test_headings_and_anchors(void **state)
{
    (void)state;
    kb_doc doc;
    parse_fixture("basic.md", &doc);
    assert_string_equal(doc.title, "Tiling Notes");
    const kb_block *b = tu_find(&doc, KB_KIND_TEXT, "first paragraph");
    assert_non_null(b);
    assert_int_equal(b->depth, 1);
    assert_string_equal(b->anchor, "tiling-notes");

    b = tu_find(&doc, KB_KIND_TEXT, "Padding one column");
    assert_non_null(b);
    assert_int_equal(b->depth, 2);
    assert_string_equal(b->heading[1], "Shared Memory: Banks & Conflicts!");
    assert_string_equal(b->anchor, "shared-memory-banks--conflicts");
    /* the same title again: GitHub's "-1" */
    b = tu_find(&doc, KB_KIND_TEXT, "first item");
    assert_non_null(b);
    assert_string_equal(b->anchor, "shared-memory-banks--conflicts-1");
    b = tu_find(&doc, KB_KIND_TEXT, "Last words");
    assert_non_null(b);
    assert_int_equal(b->depth, 3);
    assert_string_equal(b->heading[2], "Größe über alles");
    assert_string_equal(b->anchor, "größe-über-alles");
    kb_doc_release(&doc);
}

static void test_code_tables_lists(void **state)
{
    (void)state;
    kb_doc doc;
    parse_fixture("basic.md", &doc);
    const kb_block *b = tu_find(&doc, KB_KIND_CODE, "__global__");
    assert_non_null(b);
    assert_string_equal(b->text,
        "__global__ void transpose(float *out, const float *in, int n)\n"
        "{\n"
        "    __shared__ float tile[32][33];\n"
        "\n"
        "    int x = blockIdx.x * 32 + threadIdx.x;\n"
        "    // keep the blank line above and this comment intact\n"
        "    tile[threadIdx.y][threadIdx.x] = in[x];\n"
        "}");
    b = tu_find(&doc, KB_KIND_CODE, "indented_code_line_one");
    assert_non_null(b);
    assert_string_equal(b->text, "indented_code_line_one();\nindented_code_line_two();");

    b = tu_find(&doc, KB_KIND_TABLE, "Variant");
    assert_non_null(b);
    assert_string_equal(b->text, "Variant | Time (us) | Notes\n"
                                 "naive | 120.5 | strided writes\n"
                                 "padded | 61.0 | no conflicts");

    b = tu_find(&doc, KB_KIND_TEXT, "first item");
    assert_non_null(b);
    assert_string_equal(b->text, "- first item with bold text\n- second item\n"
                                 "  - nested item");
    assert_non_null(tu_find(&doc, KB_KIND_TEXT, "A quoted remark about occupancy."));
    /* inline code kept, link text kept, URL and image dropped, HTML text */
    b = tu_find(&doc, KB_KIND_TEXT, "first paragraph");
    assert_non_null(strstr(b->text, "inline_code()"));
    assert_non_null(strstr(b->text, "link to the notes"));
    assert_null(strstr(b->text, "example.org"));
    assert_null(strstr(b->text, "diagram"));
    assert_non_null(tu_find(&doc, KB_KIND_TEXT, "Raw HTML text & more"));
    /* converter leftovers: "**" that is no emphasis, a URL glued to a word */
    b = tu_find(&doc, KB_KIND_TEXT, "Pad by one word");
    assert_non_null(b);
    assert_string_equal(b->text, "Tip: Pad by one word; see the notes "
                                 "https://example.org/pad.");
    /* emphasis and links glued to the words around them come apart */
    b = tu_find(&doc, KB_KIND_TEXT, "Glued spans");
    assert_non_null(b);
    assert_string_equal(b->text, "Glued spans are called architecture-specific "
                                 "features (see Padding Rules) and bold too.");
    for (size_t i = 0; i < doc.nblocks; i++)
        assert_null(strchr(doc.blocks[i].text, '<'));
    assert_int_equal(tu_count_kind(&doc, KB_KIND_CODE), 2);
    /* a raw HTML table is a table too */
    b = tu_find(&doc, KB_KIND_TABLE, "Launch limits");
    assert_non_null(b);
    assert_string_equal(b->text, "Launch limits\nLimit | Value\nmaxThreads | 1024");
    assert_int_equal(tu_count_kind(&doc, KB_KIND_TABLE), 2);
    kb_doc_release(&doc);
}

static void test_explicit_anchors(void **state)
{
    (void)state;
    kb_doc doc;
    parse_fixture("explicit.md", &doc);
    const char *want[][2] = {
        { "Text one.", "attr-id" }, { "Text two.", "perma-id" },
        { "Text three.", "html-id" },
    };
    const char *titles[] = { "Attribute Style", "Permalink Style", "HTML Style" };
    for (size_t i = 0; i < 3; i++) {
        const kb_block *b = tu_find(&doc, KB_KIND_TEXT, want[i][0]);
        assert_non_null(b);
        assert_string_equal(b->anchor, want[i][1]);
        assert_string_equal(b->heading[b->depth - 1], titles[i]);
    }
    kb_doc_release(&doc);
}

static void test_sphinx_anchors(void **state)
{
    (void)state;
    /* A page converted from Sphinx HTML: anchors are the page's section
     * ids, not GitHub slugs; a repeated title keeps its parent's anchor. */
    kb_doc doc;
    parse_fixture("anchors.md", &doc);
    const kb_block *b = tu_find(&doc, KB_KIND_TEXT, "Intro text.");
    assert_non_null(b);
    assert_string_equal(b->anchor, "overview");
    b = tu_find(&doc, KB_KIND_TEXT, "Body one.");
    assert_string_equal(b->heading[1], "1.1. Loop Things vs. Others");
    assert_string_equal(b->anchor, "loop-things-vs-others");
    b = tu_find(&doc, KB_KIND_TEXT, "Body two");
    assert_string_equal(b->anchor, "overview");
    /* the converter's page-title heading has no section id */
    b = tu_find(&doc, KB_KIND_TEXT, "docs.nvidia.com");
    assert_non_null(b);
    assert_string_equal(b->anchor, "");
    kb_doc_release(&doc);
}

/* A page converted from Sphinx HTML lost the blanks around its links
 * ("seeDevice Memory Accesses", "the followingTable 12summarizes"): its
 * words come apart again; inline code, identifiers that start with no
 * small word and a page that was not converted keep theirs (issue 22). */
static void test_sphinx_glued_links(void **state)
{
    (void)state;
    static const char head[] =
        "# Guide\n\n**Source**: [https://docs.nvidia.com/cuda/x/index.html]"
        "(https://docs.nvidia.com/cuda/x/index.html)\n\n# 1. Memory\n\n";
    static const char body[] =
        "Spaces differ (seeDevice Memory Accesses). Refer toWarp Shuffle "
        "Functions, as shown inFigure 2 and inCUDA Graphs. The schematicFigure "
        "1shows chips. Runs on 10.3.Table 25shows it. The followingTable "
        "12summarizes swizzles, Figure 9Matrix Multiplication and Figure 3a. Call`isNaN`and keep cudaMemcpyHostToDevice, "
        "sm_90a and 128B too.\n";
    kb_buf md;
    kb_buf_init(&md, 0);
    tu_printf(&md, "%s%s", head, body);
    kb_doc doc;
    memset(&doc, 0, sizeof doc);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_parse_markdown(md.data, md.len, "g.md", &doc, &err), KB_OK);
    const kb_block *b = tu_find(&doc, KB_KIND_TEXT, "Spaces differ");
    assert_non_null(b);
    assert_string_equal(b->text,
        "Spaces differ (see Device Memory Accesses). Refer to Warp Shuffle "
        "Functions, as shown in Figure 2 and in CUDA Graphs. The schematic Figure "
        "1 shows chips. Runs on 10.3. Table 25 shows it. The following Table "
        "12 summarizes swizzles, Figure 9 Matrix Multiplication and Figure 3a. Call isNaN and keep cudaMemcpyHostToDevice, "
        "sm_90a and 128B too.");
    kb_doc_release(&doc);
    /* not converted from a Sphinx page: as written */
    assert_int_equal(kb_parse_markdown(body, strlen(body), "n.md", &doc, &err), KB_OK);
    b = tu_find(&doc, KB_KIND_TEXT, "Spaces differ");
    assert_non_null(b);
    assert_non_null(strstr(b->text, "(seeDevice Memory"));
    kb_doc_release(&doc);
    kb_buf_release(&md);
}

static void test_papers_fixture(void **state)
{
    (void)state;
    kb_doc doc;
    parse_fixture("papers.md", &doc);
    assert_int_equal(tu_count_kind(&doc, KB_KIND_PAPER), 8);

    const kb_block *b = find_paper(&doc, "Alpha: A Tile Compiler for Everyone");
    assert_non_null(b);
    assert_string_equal(b->paper->date, "2024-03");
    assert_int_equal(b->paper->nlinks, 2);
    assert_string_equal(link_url(b->paper, "paper"), "https://example.org/alpha");
    assert_string_equal(link_url(b->paper, "code"), "https://example.org/alpha-code");
    assert_int_equal(b->depth, 3);
    assert_string_equal(b->heading[0], "Reading List");
    assert_string_equal(b->heading[1], "Compilers");
    assert_string_equal(b->heading[2], "Alpha: A Tile Compiler for Everyone");
    assert_string_equal(b->anchor, "compilers");

    /* odd spacing, a space inside the label, a full-width separator */
    b = find_paper(&doc, "Beta: Odd Spacing Kernels");
    assert_non_null(b);
    assert_string_equal(b->paper->date, "2023-11");
    assert_string_equal(link_url(b->paper, "paper"), "https://example.org/beta");
    assert_string_equal(link_url(b->paper, "blog"), "https://example.org/beta-blog");
    /* one-digit month, bold name, unescaped "[[code\]]" */
    b = find_paper(&doc, "Gamma — Bold Name And Dash");
    assert_non_null(b);
    assert_string_equal(b->paper->date, "2022-07");
    assert_string_equal(link_url(b->paper, "code"), "https://example.org/gamma");
    /* no links at all */
    b = find_paper(&doc, "Delta Without Links");
    assert_non_null(b);
    assert_int_equal(b->paper->nlinks, 0);
    /* extra text after the links; a second entry on the next line */
    b = find_paper(&doc, "Epsilon With Extra Text");
    assert_non_null(b);
    assert_int_equal(b->paper->nlinks, 1);
    b = find_paper(&doc, "Zeta On The Next Line");
    assert_non_null(b);
    assert_string_equal(b->paper->date, "2025-05");
    assert_string_equal(link_url(b->paper, "dataset"), "https://example.org/zeta");
    /* no date */
    b = find_paper(&doc, "Eta - Undated Entry");
    assert_non_null(b);
    assert_string_equal(b->paper->date, "");
    assert_string_equal(link_url(b->paper, "project"), "https://example.org/eta");
    /* a list item can be an entry too */
    b = find_paper(&doc, "Theta As A List Item");
    assert_non_null(b);
    assert_string_equal(b->heading[1], "Not Papers");

    /* list items that are not entries stay text */
    b = tu_find(&doc, KB_KIND_TEXT, "A normal link");
    assert_non_null(b);
    assert_non_null(strstr(b->text, "[note] a bracketed remark"));
    assert_non_null(strstr(b->text, "plain list item"));
    kb_doc_release(&doc);
}

/* A line that is only a paper's date has no title: it was written through
 * a NULL title (SIGSEGV, issue 15 item 1); it is text, kept, no paper. */
static void test_paper_date_alone(void **state)
{
    (void)state;
    static const char *const inputs[] = {
        "- [12/2023]\n", "[0026]\n", "[12/2023]", "\\[2024-01]   \n",
    };
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        kb_doc doc;
        kb_doc_init(&doc);
        kb_err err;
        kb_err_clear(&err);
        assert_int_equal(kb_parse_markdown(inputs[i], strlen(inputs[i]), "x.md",
                                           &doc, &err), KB_OK);
        assert_int_equal(tu_count_kind(&doc, KB_KIND_PAPER), 0);
        assert_int_equal(doc.nblocks, 1);
        assert_int_equal(doc.blocks[0].kind, KB_KIND_TEXT);
        assert_non_null(strchr(doc.blocks[0].text, ']'));
        kb_doc_release(&doc);
    }

    /* beside real entries, a date-only line is no paper, the others are */
    static const char list[] = "[03/2024] Alpha Compiler [paper](https://a.example)\n"
                               "[04/2024]\n"
                               "[05/2024] Beta Kernels [code](https://b.example)\n";
    kb_doc doc;
    kb_doc_init(&doc);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_parse_markdown(list, sizeof list - 1, "l.md", &doc, &err), KB_OK);
    assert_int_equal(tu_count_kind(&doc, KB_KIND_PAPER), 2);
    assert_non_null(find_paper(&doc, "Alpha Compiler"));
    assert_non_null(find_paper(&doc, "Beta Kernels"));
    kb_doc_release(&doc);
}

/* ------------------------------------------------------------ mirror */

static void test_mirror_survey(void **state)
{
    (void)state;
    char *p = tu_mirror_path("awesome-llm-kernel/README.md");
    if (!p) {
        printf("skip: the survey list (no $KB_MIRROR/awesome-llm-kernel/README.md)\n");
        return;
    }
    kb_doc doc;
    double ms;
    assert_int_equal(parse_path(p, &doc, NULL, &ms), KB_OK);
    size_t papers = 0, dated = 0, with_paper = 0, with_link = 0;
    for (size_t i = 0; i < doc.nblocks; i++) {
        const kb_paper *pp = doc.blocks[i].paper;
        if (!pp)
            continue;
        papers++;
        dated += strlen(pp->date) == 7 && pp->date[4] == '-';
        with_paper += link_url(pp, "paper") != NULL;
        with_link += pp->nlinks > 0;
        assert_true(pp->title[0] != '\0');
        assert_true(doc.blocks[i].depth >= 2);     /* section, then title */
        for (size_t k = 0; k < pp->nlinks; k++) {
            assert_true(strncmp(pp->links[k].url, "http", 4) == 0);
            assert_null(strchr(pp->links[k].label, '['));
            assert_null(strchr(pp->links[k].label, ']'));
        }
    }
    size_t nsec, nanchor;
    count_sections(&doc, &nsec, &nanchor);
    printf("survey: %zu blocks, %zu sections (%zu anchored), %zu papers "
           "(%zu dated, %zu with a paper link, %zu with links), %.1f ms\n",
           doc.nblocks, nsec, nanchor, papers, dated, with_paper, with_link, ms);
    assert_true(papers >= 130);
    assert_true(dated >= 130);
    assert_true(with_paper >= 80);
    assert_true(with_link >= 130);
    kb_doc_release(&doc);
    free(p);
}

static const char *const nvidia_md[] = {
    "best-practices/markdown/cuda_cuda-c-best-practices-guide_index.html.md",
    "cuda-programming-guide/markdown/cuda_cuda-c-programming-guide_index.html.md",
    "tuning-guides/markdown/cuda_hopper-tuning-guide_index.html.md",
    "tuning-guides/markdown/cuda_ampere-tuning-guide_index.html.md",
    "tuning-guides/markdown/cuda_ada-tuning-guide_index.html.md",
    "tuning-guides/markdown/cuda_blackwell-tuning-guide_index.html.md",
    "tuning-guides/markdown/cuda_turing-tuning-guide_index.html.md",
};

static const char *drop_number(const char *t)
{
    const char *p = t;
    while ((*p >= '0' && *p <= '9') || *p == '.')
        p++;
    return p > t && *p == ' ' ? p + 1 : t;
}

static void test_mirror_nvidia(void **state)
{
    (void)state;
    int found_any = 0;
    for (size_t f = 0; f < sizeof nvidia_md / sizeof nvidia_md[0]; f++) {
        char *p = tu_mirror_path(nvidia_md[f]);
        if (!p)
            continue;
        found_any = 1;
        kb_doc doc;
        kb_buf raw;
        double ms;
        assert_int_equal(parse_path(p, &doc, &raw, &ms), KB_OK);
        assert_non_null(doc.title);
        /* every line of every code block is verbatim in the source (a
         * block inside a list item loses the item's indentation) */
        size_t fences = 0;
        for (const char *q = raw.data; q && (q = strstr(q, "\n```")); q += 4)
            fences++;
        for (size_t i = 0; i < doc.nblocks; i++) {
            if (doc.blocks[i].kind != KB_KIND_CODE)
                continue;
            const char *line = doc.blocks[i].text;
            while (*line) {
                const char *nl = strchr(line, '\n');
                size_t n = nl ? (size_t)(nl - line) : strlen(line);
                if (!memmem(raw.data, raw.len, line, n))
                    fail_msg("%s: code block %zu is not verbatim: %.*s",
                             nvidia_md[f], i, (int)n, line);
                line += n + (nl != NULL);
            }
        }
        size_t code = tu_count_kind(&doc, KB_KIND_CODE);
        assert_true(code >= fences / 2 - fences / 20);
        size_t nsec, nanchor;
        count_sections(&doc, &nsec, &nanchor);
        printf("%s: %zu blocks (%zu code, %zu table), %zu sections "
               "(%zu anchored), %.1f ms\n", nvidia_md[f], doc.nblocks, code,
               tu_count_kind(&doc, KB_KIND_TABLE), nsec, nanchor, ms);
        assert_true(nanchor * 10 >= nsec * 9);
        if (f == 0) {
            const kb_block *hit = NULL;
            for (size_t i = 0; i < doc.nblocks && !hit; i++)
                for (size_t d = 0; d < doc.blocks[i].depth; d++)
                    if (strcmp(drop_number(doc.blocks[i].heading[d]),
                               "Loop Counters Signed vs. Unsigned") == 0)
                        hit = &doc.blocks[i];
            assert_non_null(hit);
            assert_string_equal(hit->anchor, "loop-counters-signed-vs-unsigned");
        }
        kb_buf_release(&raw);
        kb_doc_release(&doc);
        free(p);
    }
    if (!found_any)
        printf("skip: the NVIDIA guides (not under $KB_MIRROR)\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_binary_is_an_error),
        cmocka_unit_test(test_headings_and_anchors),
        cmocka_unit_test(test_code_tables_lists),
        cmocka_unit_test(test_explicit_anchors),
        cmocka_unit_test(test_sphinx_anchors),
        cmocka_unit_test(test_sphinx_glued_links),
        cmocka_unit_test(test_papers_fixture),
        cmocka_unit_test(test_paper_date_alone),
        cmocka_unit_test(test_mirror_survey),
        cmocka_unit_test(test_mirror_nvidia),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
