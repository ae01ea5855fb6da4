/* test_parse_text.c - kb_parse_text: the file name as heading, paragraphs
 * as blocks, binary refused; and the mirror's plain-text PTX copy. */
#include "ingest/ingest_int.h"
#include "tests/unit/test_util.h"

static void test_paragraphs(void **state)
{
    (void)state;
    static const char t[] = "\xEF\xBB\xBF" "First line\nsecond line\n\n \t\n"
                            "Second paragraph.\r\n\r\n\n\nThird\n";
    kb_doc doc;
    kb_doc_init(&doc);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_parse_text(t, sizeof t - 1, "notes/README.txt", &doc, &err), KB_OK);
    assert_string_equal(doc.title, "README.txt");
    assert_int_equal(doc.nblocks, 3);
    assert_string_equal(doc.blocks[0].text, "First line\nsecond line");
    assert_string_equal(doc.blocks[1].text, "Second paragraph.");
    assert_string_equal(doc.blocks[2].text, "Third");
    for (size_t i = 0; i < doc.nblocks; i++) {
        assert_int_equal(doc.blocks[i].kind, KB_KIND_TEXT);
        assert_int_equal(doc.blocks[i].depth, 1);
        assert_string_equal(doc.blocks[i].heading[0], "README.txt");
    }
    kb_doc_release(&doc);

    /* no trailing newline, one paragraph */
    kb_doc_init(&doc);
    assert_int_equal(kb_parse_text("just this", 9, "LICENSE", &doc, &err), KB_OK);
    assert_int_equal(doc.nblocks, 1);
    assert_string_equal(doc.blocks[0].text, "just this");
    assert_string_equal(doc.title, "LICENSE");
    kb_doc_release(&doc);

    /* empty */
    kb_doc_init(&doc);
    assert_int_equal(kb_parse_text("", 0, "empty.txt", &doc, &err), KB_OK);
    assert_int_equal(doc.nblocks, 0);
    kb_doc_release(&doc);
}

static void test_binary(void **state)
{
    (void)state;
    static const char gz[] = "\x1f\x8b\x08\0\0\0\0\0\0\x03";
    kb_doc doc;
    kb_doc_init(&doc);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_parse_text(gz, sizeof gz - 1, "x.txt", &doc, &err), KB_ERR_PARSE);
    assert_string_equal(err.msg, "'x.txt' does not look like text (binary data)");
    kb_doc_release(&doc);
}

static void test_mirror_text(void **state)
{
    (void)state;
    char *path = tu_mirror_path("ptx-isa/text/raw.txt");
    if (!path) {
        printf("skip: raw.txt of the mirror (KB_MIRROR is unset or missing)\n");
        return;
    }
    kb_doc doc;
    double ms = 0;
    assert_int_equal(tu_parse_file(kb_parse_text, path, &doc, NULL, NULL, &ms), KB_OK);
    printf("raw.txt: %zu blocks, %.1f ms\n", doc.nblocks, ms);
    assert_string_equal(doc.title, "raw.txt");
    assert_true(doc.nblocks > 1000);
    kb_doc_release(&doc);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paragraphs),
        cmocka_unit_test(test_binary),
        cmocka_unit_test(test_mirror_text),
    };
    return cmocka_run_group_tests_name("parse_text", tests, NULL, NULL);
}
