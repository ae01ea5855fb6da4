/* diag.c - findings about skill files: `file:line: error: message`. */
#include "skills/skill.h"

#include <stdlib.h>
#include <string.h>

void kb_skill_diags_init(kb_skill_diags *d)
{
    memset(d, 0, sizeof *d);
}

void kb_skill_diags_release(kb_skill_diags *d)
{
    for (size_t i = 0; i < d->n; i++) {
        free(d->items[i].file);
        free(d->items[i].msg);
    }
    free(d->items);
    kb_skill_diags_init(d);
}

kb_rc kb_skill_diag_add(kb_skill_diags *d, const char *file, int line,
                        kb_skill_severity sev, const char *rule,
                        const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kb_rc rc = kb_skill_diag_vadd(d, file, line, sev, rule, fmt, ap);
    va_end(ap);
    return rc;
}

kb_rc kb_skill_diag_vadd(kb_skill_diags *d, const char *file, int line,
                         kb_skill_severity sev, const char *rule,
                         const char *fmt, va_list ap)
{
    if (!d)
        return KB_OK;
    kb_buf msg;
    kb_buf_init(&msg, 0);
    kb_rc rc = kb_buf_vprintf(&msg, fmt, ap);
    char *m = kb_buf_finish(&msg, rc);
    char *f = kb_strdup(file ? file : "");
    if (!m || !f || KB_GROW(d->items, d->n + 1, d->cap) != KB_OK) {
        free(m);
        free(f);
        return KB_ERR_NOMEM;
    }
    d->items[d->n] = (kb_skill_diag){ .file = f, .line = line, .severity = sev,
                                      .rule = rule, .msg = m, .seq = d->n };
    d->n++;
    if (sev == KB_SKILL_ERROR)
        d->errors++;
    else
        d->warnings++;
    return KB_OK;
}

kb_rc kb_skill_diags_fail(const kb_skill_diags *d, size_t from, kb_err *err)
{
    for (size_t i = from; d && i < d->n; i++) {
        const kb_skill_diag *x = &d->items[i];
        if (x->severity != KB_SKILL_ERROR)
            continue;
        if (x->line > 0)
            return kb_err_set(err, KB_ERR_PARSE, "%s:%d: %s", x->file, x->line, x->msg);
        return kb_err_set(err, KB_ERR_PARSE, "%s: %s", x->file, x->msg);
    }
    return KB_OK;
}

static int cmp_diag(const void *pa, const void *pb)
{
    const kb_skill_diag *a = pa, *b = pb;
    int c = strcmp(a->file, b->file);
    if (c)
        return c;
    if (a->line != b->line)
        return a->line < b->line ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

void kb_skill_diags_sort(kb_skill_diags *d)
{
    if (d->n > 1)
        qsort(d->items, d->n, sizeof *d->items, cmp_diag);
}
