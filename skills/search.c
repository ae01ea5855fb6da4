/* search.c - skills found by kb's search (chunks of kind skill),
 * one hit per skill, filtered by the metadata line ingest gives every
 * skill (ingest/parse_skill.c). */
#include "skills/skill.h"
#include "kb/kb_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the most a search asks for: every section of a library of skills */
#define SEARCH_DEPTH 50

static void hit_release(kb_skill_hit *x)
{
    free(x->name);
    free(x->status);
    free(x->speedup);
    free(x->task);
    free(x->arch);
    free(x->dtype);
    free(x->ops);
    memset(x, 0, sizeof *x);
}

void kb_skill_hits_release(kb_skill_hits *h)
{
    for (size_t i = 0; i < h->n; i++)
        hit_release(&h->items[i]);
    free(h->items);
    kb_results_release(&h->all);
    memset(h, 0, sizeof *h);
}

/* The value of "KEY: value" in a status line ("a: x · b: y"), a copy. */
static char *field(const char *line, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = line; (p = strstr(p, key)) != NULL; p += n) {
        if ((p != line && p[-1] != ' ') || strncmp(p + n, ": ", 2) != 0)
            continue;
        const char *v = p + n + 2;
        const char *end = strstr(v, " \xc2\xb7 ");
        size_t len = end ? (size_t)(end - v) : strcspn(v, "\n");
        return kb_strndup(v, len);
    }
    return kb_strdup("");
}

int kb_skill_speedup_parse(const char *s, double *out)
{
    char *end = NULL;
    double x = s && *s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || !isfinite(x))
        return 0;
    *out = x;
    return 1;
}

/* 1 if want (NULL: anything) is one of the comma- or space-separated
 * items of have; for arch an item "sm_80+" holds every sm_NN from 80 on. */
static int has_item(const char *have, const char *want, int arch)
{
    if (!want)
        return 1;
    size_t wn = strlen(want);
    for (const char *p = have; *p;) {
        p += strspn(p, ", ");
        size_t n = strcspn(p, ", ");
        if (n == wn && strncmp(p, want, n) == 0)
            return 1;
        if (arch && n > 4 && p[n - 1] == '+' && strncmp(p, "sm_", 3) == 0 &&
            strncmp(want, "sm_", 3) == 0 && atol(want + 3) >= atol(p + 3))
            return 1;
        p += n;
    }
    return 0;
}

int kb_skill_search_passes(const kb_skill_query *q, const char *status,
                           const char *arch, const char *dtype, const char *ops)
{
    return has_item(arch, q->arch, 1) && has_item(dtype, q->dtype, 0) &&
           has_item(ops, q->ops, 0) &&
           (q->status ? strcmp(status, q->status) == 0
                      : q->all || strcmp(status, "retired") != 0);
}

/* The hit of result r: its skill's name (the heading's, before " (") and
 * the metadata of its first chunk. */
static kb_rc make_hit(kb_store *store, const kb_result *r, kb_skill_hit *h, kb_err *err)
{
    char *line = NULL;
    kb_rc rc = kb_store_first_text(store, r->chunk_id, &line, err);
    if (rc != KB_OK)
        return rc;
    const char *top = r->depth ? r->heading_path[0] : "";
    h->r = r;
    h->name = kb_strndup(top, strcspn(top, " "));
    h->status = field(line, "kb-status");
    h->speedup = field(line, "kb-speedup");
    h->task = field(line, "kb-task");
    h->arch = field(line, "kb-arch");
    h->dtype = field(line, "kb-dtype");
    h->ops = field(line, "kb-ops");
    free(line);
    if (!h->name || !h->status || !h->speedup || !h->task || !h->arch || !h->dtype ||
        !h->ops)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return KB_OK;
}

kb_rc kb_skill_search(kb_store *store, const kb_skill_query *q,
                      kb_skill_hits *out, kb_err *err)
{
    memset(out, 0, sizeof *out);
    kb_query_opts o;
    kb_query_opts_init(&o);
    o.text = q->text;
    o.mode = q->mode;
    o.k = SEARCH_DEPTH;
    o.snippet = 1;
    o.filter.kinds = 1u << KB_KIND_SKILL;
    o.config = q->config;
    kb_rc rc = q->run ? q->run(store, NULL, &o, &out->all, err)
                      : kb_err_set(err, KB_ERR_INTERNAL, "skill search: no search function");
    for (size_t i = 0; rc == KB_OK && i < out->all.n && out->n < (size_t)q->k; i++) {
        const kb_result *r = &out->all.items[i];
        int seen = 0;
        for (size_t j = 0; j < out->n && !seen; j++)
            seen = strcmp(out->items[j].r->path, r->path) == 0 &&
                   strcmp(out->items[j].r->source, r->source) == 0;
        if (seen)
            continue;
        if (KB_GROW(out->items, out->n + 1, out->cap) != KB_OK) {
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            break;
        }
        kb_skill_hit *h = &out->items[out->n];
        memset(h, 0, sizeof *h);
        out->n++;          /* released with the hits, passing or not */
        rc = make_hit(store, r, h, err);
        if (rc == KB_OK && !kb_skill_search_passes(q, h->status, h->arch, h->dtype, h->ops)) {
            hit_release(h);
            out->n--;
        }
    }
    if (rc != KB_OK)
        kb_skill_hits_release(out);
    return rc;
}
