/* test_skill.c - the SKILL.md model: every case of
 * tests/fixtures/skills/cases/ (NAME.md parsed as skills/NAME/SKILL.md,
 * then checked; NAME.expected lists each finding as "LINE SEVERITY RULE:
 * text"), the round trip through libyaml's emitter, metadata edits. */
#include "skills/skill.h"
#include "tests/unit/test_util.h"

#include <dirent.h>

/* The findings of one case, parsed and (when it parses) checked. */
static void run_case(const char *dir, const char *name, kb_skill_diags *d)
{
    kb_buf text, path;
    kb_buf_init(&text, 0);
    kb_buf_init(&path, 0);
    tu_printf(&path, "%s/%s.md", dir, name);
    tu_read_file(path.data, 0, &text);
    kb_buf_reset(&path);
    tu_printf(&path, "skills/%s/SKILL.md", name);
    kb_skill s;
    kb_skill_init(&s);
    kb_err err;
    kb_err_clear(&err);
    kb_rc rc = kb_skill_parse(path.data, text.data ? text.data : "", text.len, &s, d, &err);
    if (rc == KB_OK) {
        assert_int_equal(kb_skill_check(&s, d), KB_OK);
    } else {
        /* the error names the file and the line of the first finding */
        assert_int_equal(rc, KB_ERR_PARSE);
        assert_true(d->n > 0);
        char want[1200];
        snprintf(want, sizeof want, "%s:%d: %s", d->items[0].file, d->items[0].line,
                 d->items[0].msg);
        assert_string_equal(err.msg, want);
    }
    kb_skill_release(&s);
    kb_buf_release(&text);
    kb_buf_release(&path);
}

/* Each line of NAME.expected against the findings, in order. */
static void compare(const char *dir, const char *name, const kb_skill_diags *d)
{
    kb_buf exp;
    kb_buf_init(&exp, 0);
    char empty[1] = "";
    {
        kb_buf f;
        kb_buf_init(&f, 0);
        tu_printf(&f, "%s/%s.expected", dir, name);
        tu_read_file(f.data, 0, &exp);
        kb_buf_release(&f);
    }
    size_t i = 0;
    char *save = NULL;
    for (char *line = strtok_r(exp.data ? exp.data : empty, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save), i++) {
        if (i >= d->n)
            fail_msg("%s: expected '%s', found nothing more", name, line);
        const kb_skill_diag *x = &d->items[i];
        char head[200];
        snprintf(head, sizeof head, "%d %s %s: ", x->line,
                 x->severity == KB_SKILL_ERROR ? "error" : "warning", x->rule);
        const char *colon = strstr(line, ": ");
        if (!colon || strncmp(line, head, strlen(head)) != 0 ||
            !strstr(x->msg, colon + 2))
            fail_msg("%s: expected '%s', found '%s%s'", name, line, head, x->msg);
    }
    if (i != d->n)
        fail_msg("%s: %zu findings, expected %zu; the first extra: line %d: %s", name,
                 d->n, i, d->items[i].line, d->items[i].msg);
    kb_buf_release(&exp);
}

static void test_cases(void **state)
{
    (void)state;
    char *dir = tu_fixture("skills/cases");
    DIR *dh = opendir(dir);
    assert_non_null(dh);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(dh)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".md") != 0)
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(len - 3), e->d_name);
        kb_skill_diags d;
        kb_skill_diags_init(&d);
        run_case(dir, name, &d);
        compare(dir, name, &d);
        kb_skill_diags_release(&d);
        n++;
    }
    closedir(dh);
    printf("%d cases\n", n);
    assert_true(n >= 40);
    free(dir);
}

static kb_skill parse_ok(const char *path, const char *text)
{
    kb_skill s;
    kb_skill_init(&s);
    kb_err err;
    kb_err_clear(&err);
    if (kb_skill_parse(path, text, strlen(text), &s, NULL, &err) != KB_OK)
        fail_msg("%s", err.msg);
    return s;
}

static void assert_same(const kb_skill *a, const kb_skill *b)
{
    for (int k = 0; k < KB_SKILL_NKEYS; k++) {
        if (!a->fields[k] || !b->fields[k])
            assert_ptr_equal(a->fields[k], b->fields[k]);
        else
            assert_string_equal(a->fields[k], b->fields[k]);
    }
    assert_int_equal(a->has_metadata, b->has_metadata);
    assert_int_equal(a->nmeta, b->nmeta);
    for (size_t i = 0; i < a->nmeta; i++) {
        assert_string_equal(a->meta[i].key, b->meta[i].key);
        assert_string_equal(a->meta[i].value, b->meta[i].value);
    }
    assert_string_equal(a->body, b->body);
    assert_int_equal(a->nsections, b->nsections);
}

/* Writing then parsing gives the same skill, whatever the values hold;
 * writing it again gives the same text. */
static void test_round_trip(void **state)
{
    (void)state;
    static const char *const values[] = {
        "1.5", "true", "no", "", "~", "null", "2026-01-01", "0x1f", ".inf", "12:30",
        "a: b", "# not a comment", " leading space", "trailing space ", "line one\nline two",
        "'quoted'", "\"double\"", "sm_80+, CUDA C++", "ünïcode — dash", "{not: flow}",
        "[nor, this]", "*star", "&amp", "!bang", "%percent", "@at", "`tick`", "- dash",
        "? question", "|pipe", ">fold", "tab\there", "x" "yz" "\\back\\slash",
    };
    kb_skill s;
    kb_skill_init(&s);
    assert_int_equal(kb_skill_set_field(&s, KB_SKILL_NAME, "round-trip"), KB_OK);
    assert_int_equal(kb_skill_set_field(&s, KB_SKILL_DESCRIPTION, "Does: things; # and more"),
                     KB_OK);
    assert_int_equal(kb_skill_set_field(&s, KB_SKILL_LICENSE, "Apache-2.0"), KB_OK);
    assert_int_equal(kb_skill_set_field(&s, KB_SKILL_ALLOWED_TOOLS, "Read Bash"), KB_OK);
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        char key[32];
        snprintf(key, sizeof key, "kb-v%zu", i);
        assert_int_equal(kb_skill_set(&s, key, values[i]), KB_OK);
        /* every value as a key too */
        if (*values[i] && !strchr(values[i], '\n'))
            assert_int_equal(kb_skill_set(&s, values[i], "v"), KB_OK);
    }
    assert_int_equal(kb_skill_set_body(&s, "\n## When to apply\n\nAlways.\n"), KB_OK);
    s.path = kb_strdup("skills/round-trip/SKILL.md");
    kb_buf a, b;
    kb_buf_init(&a, 0);
    kb_buf_init(&b, 0);
    assert_int_equal(kb_skill_write(&s, &a), KB_OK);
    kb_skill t = parse_ok("skills/round-trip/SKILL.md", a.data);
    assert_same(&s, &t);
    assert_int_equal(kb_skill_write(&t, &b), KB_OK);
    assert_string_equal(a.data, b.data);
    /* one line per value, block style, the keys in the format's order */
    assert_non_null(strstr(a.data, "---\nname: round-trip\ndescription: 'Does: things; # and more'\n"
                                   "license: Apache-2.0\nmetadata:\n  kb-v0: '1.5'\n"));
    assert_non_null(strstr(a.data, "\nallowed-tools: Read Bash\n---\n\n## When to apply\n"));
    kb_buf_release(&a);
    kb_buf_release(&b);
    kb_skill_release(&t);

    /* a parsed file written back keeps its body byte for byte */
    char *dir = tu_fixture("skills/cases");
    kb_buf text, path;
    kb_buf_init(&text, 0);
    kb_buf_init(&path, 0);
    tu_printf(&path, "%s/ok.md", dir);
    tu_read_file(path.data, 0, &text);
    kb_skill u = parse_ok("skills/ok/SKILL.md", text.data);
    kb_buf_init(&a, 0);
    assert_int_equal(kb_skill_write(&u, &a), KB_OK);
    assert_string_equal(a.data, text.data);    /* already in kb's own style */
    kb_buf_release(&a);
    kb_skill_release(&u);
    kb_buf_release(&text);
    kb_buf_release(&path);
    free(dir);
    kb_skill_release(&s);

    /* a last value that ends in "..." keeps it: only a line '...' closes
     * the document (a fuzz find: the dots went, the front matter broke) */
    kb_skill e = parse_ok("skills/e/SKILL.md",
                          "---\nname: e\ndescription: Uses a tile, and more...\n---\nbody\n");
    kb_buf_init(&a, 0);
    assert_int_equal(kb_skill_write(&e, &a), KB_OK);
    assert_string_equal(a.data, "---\nname: e\ndescription: Uses a tile, and more...\n"
                                "---\nbody\n");
    kb_skill f = parse_ok("skills/e/SKILL.md", a.data);
    assert_string_equal(f.fields[KB_SKILL_DESCRIPTION], "Uses a tile, and more...");
    kb_skill_release(&f);
    kb_skill_release(&e);
    kb_buf_release(&a);
}

static void test_metadata_edits(void **state)
{
    (void)state;
    kb_skill s = parse_ok("skills/m/SKILL.md",
                          "---\nname: m\ndescription: d\nmetadata:\n  kb-status: draft\n"
                          "  kb-task: gelu\n  kb-ops: x\n---\nbody\n");
    assert_string_equal(kb_skill_get(&s, "kb-task"), "gelu");
    assert_int_equal(s.meta[1].line, 6);
    assert_int_equal(s.lines[KB_SKILL_DESCRIPTION], 3);
    assert_int_equal(s.body_line, 9);
    assert_null(kb_skill_get(&s, "kb-speedup"));
    assert_int_equal(kb_skill_set(&s, "kb-status", "verified"), KB_OK);
    assert_int_equal(kb_skill_set(&s, "kb-speedup", "1.61"), KB_OK);
    assert_int_equal(kb_skill_set(&s, "kb-task", NULL), KB_OK);
    assert_int_equal(kb_skill_set(&s, "kb-absent", NULL), KB_OK);
    assert_int_equal(s.nmeta, 3);
    assert_string_equal(s.meta[0].key, "kb-status");   /* kept its place */
    assert_string_equal(s.meta[0].value, "verified");
    assert_string_equal(s.meta[1].key, "kb-ops");
    assert_string_equal(s.meta[2].key, "kb-speedup");  /* a new key goes last */
    assert_int_equal(kb_skill_status_of(&s), KB_SKILL_VERIFIED);
    assert_int_equal(kb_skill_set_field(&s, KB_SKILL_METADATA, "x"), KB_ERR_USAGE);
    kb_skill_release(&s);

    assert_true(kb_skill_yaml_nonstring("1e5"));
    assert_true(kb_skill_yaml_nonstring("-.5"));
    assert_true(kb_skill_yaml_nonstring("0o17"));
    assert_true(kb_skill_yaml_nonstring("Off"));
    assert_false(kb_skill_yaml_nonstring("sm_90"));
    assert_false(kb_skill_yaml_nonstring("1.2.3"));
    assert_false(kb_skill_yaml_nonstring("3x"));
    assert_false(kb_skill_yaml_nonstring("e5"));
    assert_true(kb_skill_name_ok("a-b-9"));
    assert_false(kb_skill_name_ok(""));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_metadata_edits),
    };
    return cmocka_run_group_tests_name("skill", tests, NULL, NULL);
}
