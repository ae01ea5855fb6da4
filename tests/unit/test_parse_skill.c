/* test_parse_skill.c - kb_parse_skill: a SKILL.md as blocks of kind skill,
 * the status line and description first, "When to apply" before the other
 * sections, anchors from the headings; a broken one refused with its line;
 * SKILL.md picked by name whatever the folder's format. */
#include "ingest/ingest_int.h"
#include "tests/unit/test_util.h"

static const char skill[] =
    "---\nname: tiled\ndescription: Tiles through shared memory. Use for transposes.\n"
    "metadata:\n  kb-status: verified\n  kb-task: transpose\n  kb-speedup: '6.44'\n"
    "  kb-arch: sm_80+\n  kb-dtype: f32\n  kb-when-not: 0.9x on tiny shapes\n---\n"
    "# Tiled\n\n## Technique\n\nA 32x33 tile.\n\n```cuda\n__shared__ float t[32][33];\n```\n\n"
    "## When to apply\n\nUncoalesced stores.\n\n## Pitfalls\n\nThe odd shape.\n";

static void test_blocks(void **state)
{
    (void)state;
    kb_doc doc;
    kb_doc_init(&doc);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_parse_skill(skill, sizeof skill - 1, "skills/tiled/SKILL.md", &doc,
                                    &err), KB_OK);
    assert_string_equal(doc.title, "tiled (verified, 6.44x)");
    assert_true(doc.nblocks >= 5);
    for (size_t i = 0; i < doc.nblocks; i++) {
        assert_int_equal(doc.blocks[i].kind, KB_KIND_SKILL);
        assert_string_equal(doc.blocks[i].heading[0], "tiled (verified, 6.44x)");
    }
    const kb_block *b = &doc.blocks[0];
    assert_int_equal(b->depth, 1);
    assert_non_null(strstr(b->text, "kb-status: verified \xc2\xb7 kb-speedup: 6.44 \xc2\xb7 "
                                    "kb-task: transpose \xc2\xb7 kb-arch: sm_80+ \xc2\xb7 "
                                    "kb-dtype: f32"));
    assert_non_null(tu_block_with(&doc, "Tiles through shared memory"));
    assert_non_null(tu_block_with(&doc, "Where it does not pay: 0.9x on tiny shapes"));
    /* "When to apply" right after the description, then the body's order */
    size_t when = 0, tech = 0, pit = 0;
    for (size_t i = 0; i < doc.nblocks; i++) {
        const kb_block *x = &doc.blocks[i];
        if (x->depth < 2)
            continue;
        if (!when && strcmp(x->heading[1], "When to apply") == 0) {
            when = i;
            assert_string_equal(x->anchor, "when-to-apply");
        }
        if (!tech && strcmp(x->heading[1], "Technique") == 0)
            tech = i;
        if (!pit && strcmp(x->heading[1], "Pitfalls") == 0)
            pit = i;
    }
    assert_true(when > 0 && when < tech && tech < pit);
    assert_non_null(tu_block_with(&doc, "__shared__ float t[32][33];"));
    assert_null(tu_block_with(&doc, "# Tiled"));   /* the body's own title is a heading */
    kb_doc_release(&doc);
}

static void test_refused(void **state)
{
    (void)state;
    static const char bad[] = "---\nname: x\ndescription: d\nauthor: me\n---\nbody\n";
    kb_doc doc;
    kb_doc_init(&doc);
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_parse_skill(bad, sizeof bad - 1, "skills/x/SKILL.md", &doc, &err),
                     KB_ERR_PARSE);
    assert_non_null(strstr(err.msg, "skills/x/SKILL.md:4: unknown key 'author'"));
    assert_int_equal(doc.nblocks, 0);
    kb_doc_release(&doc);
    /* by name, whatever the source's format says; other Markdown is Markdown */
    assert_ptr_equal(kb_parser_for("corpus/skills/x/SKILL.md", "rst"), kb_parse_skill);
    assert_ptr_equal(kb_parser_for("docs/skill.md", NULL), kb_parse_markdown);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests_name("parse_skill", tests, NULL, NULL);
}
