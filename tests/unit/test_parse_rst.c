/* test_parse_rst.c - kb_parse_rst on our fixtures (tests/fixtures/rst) and
 * on every .rst file of the mirror ($KB_MIRROR/ptx-isa/libcudacxx-rst,
 * $KB_MIRROR/cutlass-docs). */
#include "ingest/ingest_int.h"
#include "tests/unit/test_util.h"

#include <stdint.h>

static kb_rc parse_path(const char *path, kb_doc *doc, kb_buf *raw)
{
    return tu_parse_file(kb_parse_rst, path, doc, raw, NULL, NULL);
}

static void parse_fixture(const char *name, kb_doc *doc)
{
    char *rel = kb_path_join("rst", name);
    tu_parse_fixture(kb_parse_rst, rel, doc);
    free(rel);
}

static void test_empty(void **state)
{
    (void)state;
    kb_doc doc;
    parse_fixture("empty.rst", &doc);
    assert_int_equal(doc.nblocks, 0);
    assert_null(doc.title);
    kb_doc_release(&doc);
}

static void test_binary(void **state)
{
    (void)state;
    static const char ctrl[] = "\x01\x02\x03\x04\x05\x06\x07\x08\x0e\x0f";
    kb_doc doc;
    kb_doc_init(&doc);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_parse_rst(ctrl, sizeof ctrl - 1, "ctrl.rst", &doc, &err),
                     KB_ERR_PARSE);
    assert_string_equal(err.msg, "'ctrl.rst' does not look like reStructuredText (binary data)");
    kb_doc_release(&doc);
}

static void test_sections(void **state)
{
    (void)state;
    kb_doc doc;
    parse_fixture("basic.rst", &doc);
    /* overlined "=" is level 1, underlined "=" level 2, "-" level 3 */
    assert_string_equal(doc.title, "Warp Shuffle Primer");
    const kb_block *b = tu_find(&doc, KB_KIND_TEXT, "An introduction");
    assert_non_null(b);
    assert_int_equal(b->depth, 1);
    assert_string_equal(b->anchor, "warp-shuffle-primer");
    /* inline markup reduced to its text */
    assert_string_equal(b->text, "An introduction with __shfl_down_sync and a "
                        "cross reference and an external link in emphasis and bold.");
    /* an explicit target names the section */
    b = tu_find(&doc, KB_KIND_TEXT, "The reduction looks like this:");
    assert_non_null(b);
    assert_int_equal(b->depth, 2);
    assert_string_equal(b->heading[1], "Reduction With Shuffles");
    assert_string_equal(b->anchor, "shuffle-sums");
    b = tu_find(&doc, KB_KIND_TABLE, "Shuffle costs");
    assert_non_null(b);
    assert_int_equal(b->depth, 3);
    assert_string_equal(b->heading[2], "Costs");
    assert_string_equal(b->anchor, "costs");
    /* the repeated title is level 2 again; its page id would be generated
     * ("id1"), so it keeps the enclosing section's anchor */
    b = tu_find(&doc, KB_KIND_TEXT, "A second section");
    assert_non_null(b);
    assert_int_equal(b->depth, 2);
    assert_string_equal(b->anchor, "warp-shuffle-primer");
    b = tu_find(&doc, KB_KIND_TEXT, "Deepest text.");
    assert_non_null(b);
    assert_int_equal(b->depth, 3);
    assert_string_equal(b->heading[2], "Another Style");
    assert_string_equal(b->anchor, "another-style");
    /* comments and includes leave nothing */
    for (size_t i = 0; i < doc.nblocks; i++) {
        assert_null(strstr(doc.blocks[i].text, "comment"));
        assert_null(strstr(doc.blocks[i].text, "missing/file"));
        assert_null(strstr(doc.blocks[i].text, ":linenos:"));
    }
    kb_doc_release(&doc);
}

static void test_code_and_tables(void **state)
{
    (void)state;
    kb_doc doc;
    parse_fixture("basic.rst", &doc);
    const kb_block *b = tu_find(&doc, KB_KIND_CODE, "float v = x;");
    assert_non_null(b);
    assert_string_equal(b->text,
        "float v = x;\n"
        "for (int o = 16; o > 0; o /= 2)\n"
        "    v += __shfl_down_sync(0xffffffff, v, o);\n"
        "\n"
        "return v;");
    b = tu_find(&doc, KB_KIND_CODE, "warp_sum");
    assert_non_null(b);
    assert_string_equal(b->text,
        "__device__ float warp_sum(float v)\n"
        "{\n"
        "    for (int o = 16; o > 0; o /= 2)\n"
        "        v += __shfl_down_sync(0xffffffff, v, o);\n"
        "    return v;\n"
        "}");
    b = tu_find(&doc, KB_KIND_TABLE, "Shuffle costs");
    assert_string_equal(b->text, "Shuffle costs\nOperation | Cycles\n"
                                 "shfl.sync | about 2\nadd | 1");
    b = tu_find(&doc, KB_KIND_TABLE, "Width");
    assert_non_null(b);
    assert_string_equal(b->text, "Width | Steps\n32 lanes | 5\n16 lanes | 4");
    b = tu_find(&doc, KB_KIND_TABLE, "Lanes");
    assert_non_null(b);
    assert_string_equal(b->text, "Lanes | Masks\n8 | 0xff\n4 | 0xf");
    b = tu_find(&doc, KB_KIND_TEXT, "Every lane named");
    assert_non_null(b);
    assert_non_null(strstr(b->text, "Note:"));
    b = tu_find(&doc, KB_KIND_TEXT, "first point");
    assert_non_null(b);
    assert_string_equal(b->text, "- first point\n- second point with helper");
    kb_doc_release(&doc);
}

/* ------------------------------------------------------------ mirror */

static struct {
    size_t files, untitled, blocks, code, tables, sections, anchored;
    double ms;
    int found_label;
} mir;

static int visit(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    size_t n = strlen(path);
    if (type != FTW_F || n < 4 || strcmp(path + n - 4, ".rst") != 0)
        return 0;
    kb_doc doc;
    kb_buf raw;
    double t0 = kb_now_ms();
    if (parse_path(path, &doc, &raw) != KB_OK)
        fail_msg("cannot parse '%s'", path);
    mir.ms += kb_now_ms() - t0;
    mir.files++;
    if (!doc.title) {
        mir.untitled++;
        printf("no title: %s\n", path);
    }
    mir.blocks += doc.nblocks;
    const char *prev_anchor = NULL, *prev_head = NULL;
    size_t prev_depth = 0;
    for (size_t i = 0; i < doc.nblocks; i++) {
        const kb_block *b = &doc.blocks[i];
        const char *head = b->depth ? b->heading[b->depth - 1] : "";
        if (!prev_head || b->depth != prev_depth || strcmp(head, prev_head) != 0 ||
            strcmp(b->anchor, prev_anchor) != 0) {
            mir.sections++;
            mir.anchored += b->anchor[0] != '\0';
        }
        prev_head = head;
        prev_anchor = b->anchor;
        prev_depth = b->depth;
        if (b->kind == KB_KIND_TABLE)
            mir.tables++;
        if (b->kind != KB_KIND_CODE)
            continue;
        mir.code++;
        /* code lines are verbatim (dedented) pieces of the source */
        const char *line = b->text;
        while (*line) {
            const char *nl = strchr(line, '\n');
            size_t ln = nl ? (size_t)(nl - line) : strlen(line);
            if (!memmem(raw.data, raw.len, line, ln))
                fail_msg("%s: code line not verbatim: %.*s", path, (int)ln, line);
            line += ln + (nl != NULL);
        }
    }
    if (strstr(path, "libcudacxx-rst/instructions/cp_async_bulk_tensor.rst")) {
        assert_string_equal(doc.title, "cp.async.bulk.tensor");
        assert_true(doc.nblocks > 0);
        assert_string_equal(doc.blocks[0].anchor,
                            "libcudacxx-ptx-instructions-cp-async-bulk-tensor");
        mir.found_label = 1;
    }
    kb_buf_release(&raw);
    kb_doc_release(&doc);
    return 0;
}

static void test_mirror(void **state)
{
    (void)state;
    const char *m = tu_mirror();
    if (!m) {
        printf("skip: the mirror's .rst files ($KB_MIRROR is unset or missing)\n");
        return;
    }
    const char *dirs[] = { "ptx-isa/libcudacxx-rst", "cutlass-docs" };
    for (size_t i = 0; i < 2; i++) {
        char *d = kb_path_join(m, dirs[i]);
        nftw(d, visit, 16, FTW_PHYS);
        free(d);
    }
    if (mir.files == 0) {
        printf("skip: the mirror's .rst files (none under $KB_MIRROR)\n");
        return;
    }
    printf("rst: %zu files, %zu blocks (%zu code, %zu tables), %zu sections "
           "(%zu anchored), %.1f ms\n", mir.files, mir.blocks, mir.code,
           mir.tables, mir.sections, mir.anchored, mir.ms);
    assert_int_equal(mir.untitled, 0);
    assert_true(mir.found_label);
    assert_true(mir.code >= 1000);
    assert_true(mir.tables >= 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_binary),
        cmocka_unit_test(test_sections),
        cmocka_unit_test(test_code_and_tables),
        cmocka_unit_test(test_mirror),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
