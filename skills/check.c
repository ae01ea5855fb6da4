/* check.c - what a SKILL.md must say: the Agent Skills format's rules and
 * kb's own, on the parsed model alone (files beside it: lifecycle.c). */
#include "skills/skill.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

const char *const kb_skill_sections[4] = {
    "When to apply", "Technique", "Pitfalls", "Evidence"
};

const char *const kb_skill_meta_keys[] = {
    "kb-status", "kb-ops", "kb-bottleneck", "kb-arch", "kb-dtype", "kb-task",
    "kb-speedup", "kb-evidence", "kb-author", "kb-parent", "kb-when-not",
    "kb-reviewer", "kb-retired", "kb-provenance", NULL
};

int kb_skill_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > KB_SKILL_NAME_MAX || name[0] == '-' || name[n - 1] == '-' ||
        strstr(name, "--"))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!islower((unsigned char)name[i]) && !isdigit((unsigned char)name[i]) &&
            name[i] != '-')
            return 0;
    return 1;
}

/* Characters (code points) of UTF-8 text, as the format counts them. */
static size_t utf8_len(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static int blank(const char *s)
{
    for (; *s; s++)
        if (!isspace((unsigned char)*s))
            return 0;
    return 1;
}

static int line_of(const kb_skill *s, kb_skill_key k)
{
    return s->lines[k] ? s->lines[k] : 1;
}

static const char *base_name(const char *dir)
{
    const char *b = strrchr(dir, '/');
    return b && b[1] ? b + 1 : dir;
}

/* The format's own rules: name, description, compatibility. */
static kb_rc check_format(const kb_skill *s, kb_skill_diags *d)
{
    const char *f = s->path;
    const char *name = s->fields[KB_SKILL_NAME];
    const char *desc = s->fields[KB_SKILL_DESCRIPTION];
    const char *compat = s->fields[KB_SKILL_COMPATIBILITY];
    kb_rc rc = KB_OK;
    if (!name) {
        rc = kb_skill_diag_add(d, f, 1, KB_SKILL_ERROR, "name",
                               "the key 'name' is missing (required)");
    } else if (!kb_skill_name_ok(name)) {
        size_t n = strlen(name);
        rc = kb_skill_diag_add(d, f, line_of(s, KB_SKILL_NAME), KB_SKILL_ERROR, "name",
                               "name '%s' %s", name,
                               n == 0 ? "is empty" :
                               n > KB_SKILL_NAME_MAX ? "is longer than 64 characters" :
                               name[0] == '-' || name[n - 1] == '-' ?
                               "starts or ends with '-'" :
                               strstr(name, "--") ? "holds '--'" :
                               "may hold only a-z, 0-9 and '-'");
    } else if (strcmp(name, base_name(s->dir)) != 0) {
        rc = kb_skill_diag_add(d, f, line_of(s, KB_SKILL_NAME), KB_SKILL_ERROR, "name",
                               "name '%s' differs from its folder '%s'", name,
                               base_name(s->dir));
    }
    if (rc != KB_OK)
        return rc;
    int dl = line_of(s, KB_SKILL_DESCRIPTION);
    if (!desc)
        rc = kb_skill_diag_add(d, f, 1, KB_SKILL_ERROR, "description",
                               "the key 'description' is missing (required)");
    else if (blank(desc))
        rc = kb_skill_diag_add(d, f, dl, KB_SKILL_ERROR, "description",
                               "the description is empty");
    else if (utf8_len(desc) > KB_SKILL_DESCRIPTION_MAX)
        rc = kb_skill_diag_add(d, f, dl, KB_SKILL_ERROR, "description",
                               "the description has %zu characters, more than 1024",
                               utf8_len(desc));
    else if (strpbrk(desc, "<>"))
        rc = kb_skill_diag_add(d, f, dl, KB_SKILL_ERROR, "description",
                               "the description holds '%c' (no '<' or '>')",
                               *strpbrk(desc, "<>"));
    if (rc == KB_OK && compat && utf8_len(compat) > KB_SKILL_COMPATIBILITY_MAX)
        rc = kb_skill_diag_add(d, f, line_of(s, KB_SKILL_COMPATIBILITY), KB_SKILL_ERROR,
                               "compatibility", "compatibility has %zu characters, "
                               "more than 500", utf8_len(compat));
    return rc;
}

static int known_key(const char *key)
{
    for (size_t i = 0; kb_skill_meta_keys[i]; i++)
        if (strcmp(key, kb_skill_meta_keys[i]) == 0)
            return 1;
    return 0;
}

static int is_hex64(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (!isxdigit((unsigned char)s[n]) || isupper((unsigned char)s[n]))
            return 0;
    return n == 64;
}

static int meta_line(const kb_skill *s, const char *key)
{
    for (size_t i = 0; i < s->nmeta; i++)
        if (strcmp(s->meta[i].key, key) == 0 && s->meta[i].line)
            return s->meta[i].line;
    return line_of(s, KB_SKILL_METADATA);
}

/* kb's metadata: a known status, known kb- keys, a task, numbers. */
static kb_rc check_meta(const kb_skill *s, kb_skill_diags *d)
{
    const char *f = s->path;
    kb_rc rc = KB_OK;
    for (size_t i = 0; i < s->nmeta && rc == KB_OK; i++)
        if (strncmp(s->meta[i].key, "kb-", 3) == 0 && !known_key(s->meta[i].key))
            rc = kb_skill_diag_add(d, f, s->meta[i].line, KB_SKILL_WARNING, "metadata",
                                   "unknown kb key '%s'", s->meta[i].key);
    const char *st = kb_skill_get(s, "kb-status");
    kb_skill_status status;
    if (rc == KB_OK && !st)
        rc = kb_skill_diag_add(d, f, line_of(s, KB_SKILL_METADATA), KB_SKILL_ERROR,
                               "status", "metadata 'kb-status' is missing (draft, "
                               "verified, approved or retired)");
    else if (rc == KB_OK && kb_skill_status_parse(st, &status) != 0)
        rc = kb_skill_diag_add(d, f, meta_line(s, "kb-status"), KB_SKILL_ERROR, "status",
                               "kb-status '%s' is none of draft, verified, approved, "
                               "retired", st);
    if (rc == KB_OK && !kb_skill_get(s, "kb-task"))
        rc = kb_skill_diag_add(d, f, line_of(s, KB_SKILL_METADATA), KB_SKILL_ERROR,
                               "task", "metadata 'kb-task' is missing: the task of "
                               "corpus/tasks its kernel.cu solves");
    const char *sp = kb_skill_get(s, "kb-speedup");
    if (rc == KB_OK && sp) {
        char *end = NULL;
        double v = strtod(sp, &end);
        if (end == sp || *end || !(v > 0))
            rc = kb_skill_diag_add(d, f, meta_line(s, "kb-speedup"), KB_SKILL_ERROR,
                                   "speedup", "kb-speedup '%s' is not a positive number",
                                   sp);
    }
    const char *ev = kb_skill_get(s, "kb-evidence");
    if (rc == KB_OK && ev && !is_hex64(ev))
        rc = kb_skill_diag_add(d, f, meta_line(s, "kb-evidence"), KB_SKILL_ERROR,
                               "evidence", "kb-evidence '%s' is not a SHA-256 (64 "
                               "lower-case hex digits)", ev);
    return rc;
}

/* The four sections, each with some text. */
static kb_rc check_body(const kb_skill *s, kb_skill_diags *d)
{
    kb_rc rc = KB_OK;
    for (size_t i = 0; i < 4 && rc == KB_OK; i++) {
        const kb_skill_section *x = kb_skill_section_find(s, kb_skill_sections[i]);
        if (!x) {
            rc = kb_skill_diag_add(d, s->path, s->body_line, KB_SKILL_ERROR, "sections",
                                   "the body has no section '## %s'", kb_skill_sections[i]);
            continue;
        }
        /* the text under the heading line */
        const char *t = s->body + x->start;
        const char *nl = memchr(t, '\n', x->end - x->start);
        size_t skip = nl ? (size_t)(nl - t) + 1 : x->end - x->start;
        int empty = 1;
        for (size_t j = x->start + skip; j < x->end && empty; j++)
            empty = isspace((unsigned char)s->body[j]) != 0;
        if (empty)
            rc = kb_skill_diag_add(d, s->path, x->line, KB_SKILL_WARNING, "sections",
                                   "the section '%s' is empty", x->title);
    }
    return rc;
}

/* 1 if the byte at t is one SKILL.md may not hold: a control byte but
 * tab, line feed and a CRLF's CR. An escape sequence in SKILL.md is obeyed
 * by the terminal of every reviewer and agent that prints it. */
static int is_control(const char *t)
{
    unsigned char c = (unsigned char)*t;
    return (c < 0x20 && c != '\t' && c != '\n' && !(c == '\r' && t[1] == '\n')) || c == 0x7F;
}

/* The first control byte of t, or NULL. */
static const char *control_byte(const char *t)
{
    for (; t && *t; t++)
        if (is_control(t))
            return t;
    return NULL;
}

char *kb_skill_escape_controls(char *s)
{
    if (!s)
        return NULL;
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = KB_OK;
    for (const char *p = s; *p && rc == KB_OK; p++) {
        if (*p == '\r' && p[1] == '\n')
            continue;             /* a CRLF is a line feed */
        rc = is_control(p) ? kb_buf_printf(&b, "\\x%02x", (unsigned char)*p)
                           : kb_buf_putc(&b, *p);
    }
    free(s);
    return kb_buf_finish(&b, rc);
}

/* Control bytes in the values and the body: one finding each. */
static kb_rc check_controls(const kb_skill *s, kb_skill_diags *d)
{
    kb_rc rc = KB_OK;
    const char *at;
    for (int k = 0; k < KB_SKILL_NKEYS && rc == KB_OK; k++)
        if ((at = control_byte(s->fields[k])) != NULL)
            rc = kb_skill_diag_add(d, s->path, s->lines[k], KB_SKILL_ERROR, "text",
                                   "'%s' holds a control byte (0x%02x): write it escaped",
                                   kb_skill_key_name((kb_skill_key)k), (unsigned char)*at);
    for (size_t i = 0; i < s->nmeta && rc == KB_OK; i++)
        if ((at = control_byte(s->meta[i].value)) != NULL)
            rc = kb_skill_diag_add(d, s->path, s->meta[i].line, KB_SKILL_ERROR, "text",
                                   "metadata '%s' holds a control byte (0x%02x): write it "
                                   "escaped", s->meta[i].key, (unsigned char)*at);
    if (rc == KB_OK && (at = control_byte(s->body)) != NULL) {
        int line = s->body_line;
        for (const char *p = s->body; p < at; p++)
            line += *p == '\n';
        rc = kb_skill_diag_add(d, s->path, line, KB_SKILL_ERROR, "text", "a control byte "
                               "(0x%02x) in the text: a terminal that prints it obeys it; "
                               "write it escaped", (unsigned char)*at);
    }
    return rc;
}

/* Placeholders `kb skill new` wrote that are still there. */
static kb_rc check_todo(const kb_skill *s, kb_skill_diags *d)
{
    const char *desc = s->fields[KB_SKILL_DESCRIPTION];
    kb_rc rc = KB_OK;
    if (desc && strstr(desc, "TODO"))
        rc = kb_skill_diag_add(d, s->path, line_of(s, KB_SKILL_DESCRIPTION),
                               KB_SKILL_WARNING, "todo", "the description is still a TODO");
    for (size_t i = 0; i < s->nsections && rc == KB_OK; i++) {
        const kb_skill_section *x = &s->sections[i];
        const char *t = memmem(s->body + x->start, x->end - x->start, "TODO", 4);
        if (t)
            rc = kb_skill_diag_add(d, s->path, x->line, KB_SKILL_WARNING, "todo",
                                   "the section '%s' holds a TODO", x->title);
    }
    return rc;
}

kb_rc kb_skill_check(const kb_skill *s, kb_skill_diags *d)
{
    kb_rc rc = check_format(s, d);
    if (rc == KB_OK)
        rc = check_meta(s, d);
    if (rc == KB_OK)
        rc = check_body(s, d);
    if (rc == KB_OK)
        rc = check_todo(s, d);
    if (rc == KB_OK)
        rc = check_controls(s, d);
    return rc;
}
