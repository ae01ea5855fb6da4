/* parse_skill.c - a SKILL.md as a document of kind skill: parsed through
 * skills/ (front matter and sections), then its Markdown - the
 * description with the skill's status line and "When to apply" first, so
 * a search meets them early - through the Markdown parser. */
#include "ingest/ingest_int.h"
#include "skills/skill.h"

#include <string.h>

/* The metadata a search filters on and shows, one line: "kb-status:
 * verified · kb-speedup: 6.44 · ...". */
static const char *const shown[] = {
    "kb-status", "kb-speedup", "kb-task", "kb-arch", "kb-dtype", "kb-ops", "kb-bottleneck",
    NULL
};

static kb_rc status_line(const kb_skill *s, kb_buf *b)
{
    kb_rc rc = KB_OK;
    const char *sep = "";
    for (size_t i = 0; shown[i] && rc == KB_OK; i++) {
        const char *v = kb_skill_get(s, shown[i]);
        if (v && *v) {
            rc = kb_buf_printf(b, "%s%s: %s", sep, shown[i], v);
            sep = " \xc2\xb7 ";
        }
    }
    return rc;
}

/* The section's text as it stands in the body. */
static kb_rc put_section(const kb_skill *s, const kb_skill_section *x, kb_buf *b)
{
    kb_rc rc = kb_buf_append(b, s->body + x->start, x->end - x->start);
    return rc == KB_OK ? kb_buf_puts(b, "\n") : rc;
}

/* The Markdown the document is made of: "# NAME (STATUS, SPEEDUPx)", the
 * status line, the description, where it does not pay, then "When to
 * apply" and the other sections in their order. */
static kb_rc skill_markdown(const kb_skill *s, kb_buf *b)
{
    const char *name = s->fields[KB_SKILL_NAME] ? s->fields[KB_SKILL_NAME] : "skill";
    const char *st = kb_skill_get(s, "kb-status");
    const char *sp = kb_skill_get(s, "kb-speedup");
    const char *when_not = kb_skill_get(s, "kb-when-not");
    const char *desc = s->fields[KB_SKILL_DESCRIPTION];
    kb_rc rc = kb_buf_printf(b, "# %s (%s%s%s%s)\n\n", name, st ? st : "draft",
                             sp ? ", " : "", sp ? sp : "", sp ? "x" : "");
    if (rc == KB_OK)
        rc = status_line(s, b);
    if (rc == KB_OK && desc)
        rc = kb_buf_printf(b, "\n\n%s\n\n", desc);
    if (rc == KB_OK && when_not && *when_not)
        rc = kb_buf_printf(b, "Where it does not pay: %s\n\n", when_not);
    const kb_skill_section *first = kb_skill_section_find(s, "When to apply");
    if (rc == KB_OK && first)
        rc = put_section(s, first, b);
    for (size_t i = 0; i < s->nsections && rc == KB_OK; i++)
        if (&s->sections[i] != first)
            rc = put_section(s, &s->sections[i], b);
    return rc;
}

kb_rc kb_parse_skill(const char *data, size_t len, const char *path, kb_doc *doc,
                     kb_err *err)
{
    kb_skill s;
    kb_skill_init(&s);
    kb_buf md;
    kb_buf_init(&md, 0);
    kb_rc rc = kb_skill_parse(path ? path : "SKILL.md", data, len, &s, NULL, err);
    if (rc == KB_OK && (rc = skill_markdown(&s, &md)) != KB_OK)
        rc = kb_err_set(err, rc, "out of memory");
    if (rc == KB_OK)
        rc = kb_parse_markdown(md.data, md.len, path, doc, err);
    /* every block is the skill's, whatever Markdown made of it */
    for (size_t i = 0; rc == KB_OK && i < doc->nblocks; i++)
        doc->blocks[i].kind = KB_KIND_SKILL;
    kb_buf_release(&md);
    kb_skill_release(&s);
    return rc;
}
