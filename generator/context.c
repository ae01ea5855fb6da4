/* context.c - what a prompt retrieves (gen.h, "context.c"): the team's
 * skills first (verified and approved, filtered by arch, dtype and ops,
 * whole), exemplar kernels, doc passages, each with its citation; and the
 * passages for a repair, searched by a failure's compile log or class. */
#include "generator/gen.h"
#include "skills/skill.h"
#include "verify/verify.h"
#include "kb/kb_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SKILLS_MAX 3
#define EXEMPLARS_MAX 2
#define DOCS_MAX 6
/* an exemplar is its whole file up to this size, else its section (a
 * function), else the chunk alone */
#define EXEMPLAR_MAX_BYTES 9000
#define SKILL_MAX_BYTES 12000
#define REPAIR_K 6
#define REPAIR_QUERY_MAX 600

/* ------------------------------------------------------------------ cites */

void kb_gen_cite_release(kb_gen_cite *c)
{
    free(c->kind);
    free(c->source);
    free(c->title);
    free(c->heading);
    free(c->url);
    free(c->skill);
    memset(c, 0, sizeof *c);
}

void kb_gen_passages_release(kb_gen_passages *ps)
{
    for (size_t i = 0; i < ps->n; i++) {
        kb_gen_cite_release(&ps->items[i].cite);
        free(ps->items[i].label);
        free(ps->items[i].text);
    }
    free(ps->items);
    memset(ps, 0, sizeof *ps);
}

/* " > "-joined heading path of r. */
static char *heading_of(const kb_result *r)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = kb_buf_puts(&b, "");
    for (size_t i = 0; rc == KB_OK && i < r->depth; i++)
        rc = kb_buf_printf(&b, "%s%s", i ? " > " : "", r->heading_path[i]);
    return kb_buf_finish(&b, rc);
}

/* Appends a passage for r (its citation copied) with label and text
 * (both taken, freed on failure). */
static kb_rc push_passage(kb_gen_passages *ps, const kb_result *r, const char *skill,
                          char *label, char *text, int code, kb_err *err)
{
    kb_rc rc = label && text ? KB_GROW(ps->items, ps->n + 1, ps->cap) : KB_ERR_NOMEM;
    if (rc != KB_OK) {
        free(label);
        free(text);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    kb_gen_passage *p = &ps->items[ps->n];
    memset(p, 0, sizeof *p);
    p->label = label;
    p->text = text;
    p->code = code;
    p->cite.chunk_id = (long long)r->chunk_id;
    p->cite.kind = kb_strdup(kb_kind_name(r->kind));
    p->cite.source = kb_strdup(r->source);
    p->cite.title = kb_strdup(r->title);
    p->cite.heading = heading_of(r);
    p->cite.url = kb_strdup(r->url);
    p->cite.skill = kb_strdup(skill ? skill : "");
    ps->n++;   /* released with the list, whole or not */
    if (!p->cite.kind || !p->cite.source || !p->cite.title || !p->cite.heading ||
        !p->cite.url || !p->cite.skill)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return KB_OK;
}

/* 1 when ps holds a passage cited at r's chunk. */
static int have_passage(const kb_gen_passages *ps, const kb_result *r)
{
    for (size_t i = 0; i < ps->n; i++)
        if (ps->items[i].cite.chunk_id == (long long)r->chunk_id)
            return 1;
    return 0;
}

/* ------------------------------------------------------------------ documents */

/* document_text's walk over a document's chunks. */
typedef struct {
    int headed;
    size_t max;
    kb_buf b;
    char *last;               /* the heading path of the chunk before */
    long long *first;
    int over;
    kb_rc rc;
} doc_walk;

/* One chunk into the walk's text; nonzero to stop (a failure, or over). */
static int doc_chunk(void *ctx, long long id, const char *hp, const char *text)
{
    doc_walk *w = ctx;
    kb_rc rc = KB_OK;
    hp = hp ? hp : "[]";
    if (!w->last)
        *w->first = id;
    if (w->headed && (!w->last || strcmp(w->last, hp) != 0)) {
        cJSON *arr = cJSON_Parse(hp);
        int n = cJSON_GetArraySize(arr);
        const char *h = n > 1 ? cJSON_GetStringValue(cJSON_GetArrayItem(arr, n - 1))
                              : NULL;
        if (h)
            rc = kb_buf_printf(&w->b, "%s#### %s\n\n", w->b.len ? "\n\n" : "", h);
        else if (w->b.len)
            rc = kb_buf_puts(&w->b, "\n\n");
        cJSON_Delete(arr);
    } else if (w->b.len) {
        rc = kb_buf_puts(&w->b, w->headed ? "\n\n" : "\n");
    }
    if (rc == KB_OK)
        rc = kb_buf_puts(&w->b, text ? text : "");
    free(w->last);
    w->last = kb_strdup(hp);
    if (rc == KB_OK && !w->last)
        rc = KB_ERR_NOMEM;
    w->over = w->b.len > w->max;   /* not carried whole: not at all */
    w->rc = rc;
    return rc != KB_OK || w->over;
}

/* The text of the chunks of chunk id's document in order, each after its
 * section's heading when headed (a skill: "#### Technique"), or joined by
 * newlines (code); *first the document's first chunk. NULL in *out (and
 * KB_OK) when it is over max bytes. */
static kb_rc document_text(kb_store *store, long long id, int headed, size_t max,
                           char **out, long long *first, kb_err *err)
{
    *out = NULL;
    *first = id;
    doc_walk w = { .headed = headed, .max = max, .first = first };
    kb_buf_init(&w.b, 0);
    kb_rc rc = kb_store_doc_chunks(store, id, doc_chunk, &w, err);
    if (rc == KB_OK && w.rc == KB_ERR_NOMEM)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    else if (rc == KB_OK)
        rc = w.rc;
    free(w.last);
    if (rc == KB_OK && !w.over) {
        *out = kb_buf_finish(&w.b, KB_OK);
        if (!*out)
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    } else {
        kb_buf_release(&w.b);
    }
    return rc;
}

/* The text of r's section (kb_get_chunk's whole section), NULL when over
 * max bytes. */
static kb_rc section_text(kb_store *store, const kb_result *r, size_t max,
                          char **out, kb_err *err)
{
    *out = NULL;
    kb_results sec;
    kb_rc rc = kb_get_chunk(store, r->chunk_id, 1, &sec, err);
    if (rc != KB_OK)
        return rc;
    kb_buf b;
    kb_buf_init(&b, max);
    for (size_t i = 0; rc == KB_OK && i < sec.n; i++)
        rc = kb_buf_printf(&b, "%s%s", i ? "\n" : "", sec.items[i].text);
    kb_results_release(&sec);
    *out = kb_buf_finish(&b, rc);
    return rc == KB_OK && !*out ? kb_err_set(err, KB_ERR_NOMEM, "out of memory")
                                : KB_OK;
}

/* ------------------------------------------------------------------ retrieval */

/* What the task asks for, as retrieval filters it. */
typedef struct {
    const char *arch;        /* "sm_90", or NULL: unknown device */
    int cc;                  /* 90; 0 unknown */
    const char *ops;         /* the task's, comma-joined */
    char dtypes[64];         /* the task's buffer and scalar types, comma-joined */
} want;

/* 1 if the comma- or space-separated lists a and b share an item (an
 * empty a: yes). */
static int lists_meet(const char *a, const char *b)
{
    if (!a || !*a)
        return 1;
    for (const char *p = a; *p;) {
        p += strspn(p, ", ");
        size_t n = strcspn(p, ", ");
        for (const char *q = b; n && q && *q;) {
            q += strspn(q, ", ");
            size_t m = strcspn(q, ", ");
            if (m == n && strncmp(p, q, n) == 0)
                return 1;
            q += m;
        }
        p += n;
    }
    return 0;
}

/* Does a skill's kb-arch let it run on the device? "sm_NN" and "sm_NN+"
 * from NN up (NVRTC compiles for the device's own architecture),
 * "sm_NNa" on NN only (arch-specific features: wgmma, setmaxnreg); no
 * kb-arch, or an unknown device: yes. */
static int arch_fits(const char *have, int cc)
{
    if (!have || !*have || !cc)
        return 1;
    for (const char *p = have; *p;) {
        p += strspn(p, ", ");
        size_t n = strcspn(p, ", ");
        if (n > 3 && strncmp(p, "sm_", 3) == 0) {
            char *end = NULL;
            long v = strtol(p + 3, &end, 10);
            if (end > p + 3 && (end < p + n && *end == 'a' ? v == cc : v <= cc))
                return 1;
        }
        p += n;
    }
    return 0;
}

static int status_tier(const char *status)
{
    if (!strcmp(status, "approved") || !strcmp(status, "verified"))
        return 0;
    return !strcmp(status, "draft") ? 1 : 2;
}

/* The skills for the task: verified and approved first, then drafts, each
 * tier in search order; only those whose arch, dtype and ops fit. A
 * skill is carried whole (its SKILL.md's sections). */
static kb_rc retrieve_skills(kb_store *store, const kb_config *cfg, const char *text,
                             const want *w, const char *task_name, kb_gen_passages *ps,
                             kb_err *err)
{
    kb_skill_query q = { .run = kb_query_run, .text = text, .mode = KB_MODE_HYBRID, .k = 50,
                             .config = cfg };
    kb_skill_hits hits;
    kb_rc rc = kb_skill_search(store, &q, &hits, err);
    if (rc != KB_OK)
        return rc;
    size_t taken = 0;
    for (int tier = 0; tier < 3 && rc == KB_OK; tier++)
        for (size_t i = 0; i < hits.n && taken < SKILLS_MAX && rc == KB_OK; i++) {
            const kb_skill_hit *h = &hits.items[i];
            if (status_tier(h->status) != tier || !arch_fits(h->arch, w->cc) ||
                !lists_meet(h->dtype, w->dtypes) || !lists_meet(h->ops, w->ops))
                continue;
            char *body = NULL;
            long long top_id = 0;
            rc = document_text(store, (long long)h->r->chunk_id, 1, SKILL_MAX_BYTES,
                               &body, &top_id, err);
            if (rc != KB_OK || !body)
                continue;
            kb_buf l;
            kb_buf_init(&l, 0);
            kb_rc lr = kb_buf_printf(&l, "skill %s: %s", h->name,
                                     *h->status ? h->status : "no status");
            if (lr == KB_OK && *h->speedup)
                lr = kb_buf_printf(&l, ", %sx", h->speedup);
            if (lr == KB_OK && *h->task)
                lr = kb_buf_printf(&l, " on %s%s", h->task,
                                   strcmp(h->task, task_name) ? "" : " (this task)");
            /* the skill is cited at its top: the document, not one section */
            kb_results top;
            rc = kb_get_chunk(store, top_id, 0, &top, err);
            if (rc == KB_OK) {
                rc = push_passage(ps, &top.items[0], h->name, kb_buf_finish(&l, lr), body,
                                  0, err);
                kb_results_release(&top);
                taken++;
            } else {
                kb_buf_release(&l);
                free(body);
            }
        }
    kb_skill_hits_release(&hits);
    return rc;
}

/* Passages of kinds for text: code as exemplars (whole files when small),
 * text and tables as doc kb_gen_passages; at most max of them, none twice. */
static kb_rc retrieve_kind(kb_store *store, const kb_config *cfg, const char *text,
                           unsigned kinds, int max, kb_gen_passages *ps, kb_err *err)
{
    kb_query_opts o;
    kb_query_opts_init(&o);
    o.text = text;
    o.mode = KB_MODE_HYBRID;
    o.k = max * 3;
    o.filter.kinds = kinds;
    o.config = cfg;
    kb_results res;
    kb_rc rc = kb_query_run(store, NULL, &o, &res, err);
    if (rc != KB_OK)
        return rc;
    int code = (kinds & (1u << KB_KIND_CODE)) != 0;
    int taken = 0;
    for (size_t i = 0; i < res.n && taken < max && rc == KB_OK; i++) {
        const kb_result *r = &res.items[i];
        if (have_passage(ps, r))
            continue;
        int dup = 0;   /* an exemplar is its file: one passage a file */
        for (size_t j = 0; code && j < i && !dup; j++)
            dup = strcmp(res.items[j].path, r->path) == 0 &&
                  strcmp(res.items[j].source, r->source) == 0;
        if (dup)
            continue;
        char *body = NULL;
        long long first;
        if (code) {
            rc = document_text(store, (long long)r->chunk_id, 0, EXEMPLAR_MAX_BYTES,
                               &body, &first, err);
            if (rc == KB_OK && !body)
                rc = section_text(store, r, EXEMPLAR_MAX_BYTES, &body, err);
        }
        if (rc == KB_OK && !body)
            body = kb_strdup(r->text);
        if (rc != KB_OK)
            break;
        if (code && body && !strstr(body, "__global__")) {
            free(body);   /* host code, or a helper: no kernel to learn from */
            continue;
        }
        kb_buf l;
        kb_buf_init(&l, 0);
        kb_rc lr = code ? kb_buf_printf(&l, "exemplar %s", *r->path ? r->path : r->title)
                        : kb_buf_printf(&l, "doc: %s", r->depth
                                        ? r->heading_path[r->depth - 1] : r->title);
        rc = push_passage(ps, r, NULL, kb_buf_finish(&l, lr), body, code, err);
        taken++;
    }
    kb_results_release(&res);
    return rc;
}

/* The retrieval query of a task: the words of its name, description and
 * ops (three letters or more: "y = GELU(x)" says gelu). */
static char *task_query(const kb_task *t)
{
    kb_buf all, b;
    kb_buf_init(&all, 0);
    kb_buf_init(&b, 0);
    kb_rc rc = kb_buf_printf(&all, "%s %s %s", t->name, t->description, t->ops);
    for (const char *p = all.data; rc == KB_OK && p && *p;) {
        size_t n = 0;
        while (p[n] && (isalnum((unsigned char)p[n]) || p[n] == '_' ||
                        ((p[n] == '-' || p[n] == '.') && n && isalnum((unsigned char)p[n + 1]))))
            n++;
        size_t letters = 0;
        for (size_t i = 0; i < n; i++)
            letters += isalpha((unsigned char)p[i]) != 0;
        if (letters >= 3)
            rc = kb_buf_printf(&b, "%s%.*s", b.len ? " " : "", (int)n, p);
        p += n ? n : 1;
    }
    kb_buf_release(&all);
    return kb_buf_finish(&b, rc);
}

kb_rc kb_gen_retrieve(const kb_gen_prompt_opts *o, const kb_task *t,
                      kb_gen_passages *ps, kb_err *err)
{
    want w = { 0 };
    char arch[16];
    kb_gen_device_arch(o->device, arch, &w.cc);
    w.arch = *arch ? arch : NULL;
    w.ops = t->ops;
    /* the types the kernel handles: its buffers' and scalars', and the task's */
    snprintf(w.dtypes, sizeof w.dtypes, "%s", kb_dtype_name(t->dtype));
    for (size_t i = 0; i < t->nparams; i++) {
        const char *n = kb_dtype_name(t->params[i].dtype);
        if (t->params[i].role != KB_ROLE_DIM && !lists_meet(n, w.dtypes) &&
            strlen(w.dtypes) + strlen(n) + 2 < sizeof w.dtypes) {
            strncat(w.dtypes, ",", sizeof w.dtypes - strlen(w.dtypes) - 1);
            strncat(w.dtypes, n, sizeof w.dtypes - strlen(w.dtypes) - 1);
        }
    }
    char *q = task_query(t);
    if (!q)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_rc rc = retrieve_skills(o->store, o->config, q, &w, t->name, ps, err);
    if (rc == KB_OK)
        rc = retrieve_kind(o->store, o->config, q, 1u << KB_KIND_CODE, EXEMPLARS_MAX, ps,
                           err);
    if (rc == KB_OK)
        rc = retrieve_kind(o->store, o->config, q,
                           (1u << KB_KIND_TEXT) | (1u << KB_KIND_TABLE), DOCS_MAX, ps, err);
    free(q);
    return rc;
}

/* ------------------------------------------------------------------ repair */

/* Appends the salient part of an NVRTC log to q: its error lines, the
 * "file(line): " before them dropped, each once; and the identifiers they
 * quote to ids. */
static kb_rc log_query(kb_buf *q, kb_buf *ids, const char *log)
{
    kb_rc rc = KB_OK;
    for (const char *line = log; rc == KB_OK && line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        const char *e = NULL;
        for (size_t i = 0; i + 6 <= n && !e; i++)
            if (!strncmp(line + i, "error", 5) && (i == 0 || line[i - 1] == ' '))
                e = line + i;
        if (e && !strncmp(e, "error detected", 14))
            e = NULL;   /* "1 error detected in the compilation of ..." */
        if (e) {
            const char *colon = memchr(e, ':', (size_t)(line + n - e));
            const char *msg = colon ? colon + 1 : e;
            size_t m = (size_t)(line + n - msg);
            while (m && *msg == ' ') {
                msg++;
                m--;
            }
            int seen = 0;
            if (q->len && m) {   /* the same message twice says nothing more */
                char *dup = kb_strndup(msg, m);
                seen = !dup || strstr(q->data, dup) != NULL;
                free(dup);
            }
            if (!seen && m && q->len + m + 1 <= REPAIR_QUERY_MAX)
                rc = kb_buf_printf(q, "%s%.*s", q->len ? " " : "", (int)m, msg);
            /* identifier "__shfl_xor" is undefined: __shfl_xor */
            const char *a = memchr(msg, '"', m);
            while (rc == KB_OK && a) {
                const char *b = memchr(a + 1, '"', (size_t)(msg + m - a - 1));
                if (!b)
                    break;
                size_t k = (size_t)(b - a - 1);
                char *id = k && k < 128 ? kb_strndup(a + 1, k) : NULL;
                if (k && k < 128 && !id)
                    rc = KB_ERR_NOMEM;
                else if (id && (!ids->len || !strstr(ids->data, id)) &&
                         ids->len + k + 1 <= REPAIR_QUERY_MAX)
                    rc = kb_buf_printf(ids, "%s%s", ids->len ? " " : "", id);
                free(id);
                a = b + 1 < msg + m ? memchr(b + 1, '"', (size_t)(msg + m - b - 1)) : NULL;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return rc;
}

/* Words that a failure class's passages hold, searched with its reason. */
static const char *class_words(kb_verify_verdict v)
{
    switch (v) {
    case KB_VERIFY_INCORRECT:
        return "wrong results race condition __syncthreads bounds check";
    case KB_VERIFY_TIMEOUT:
        return "kernel hangs deadlock __syncthreads in divergent code";
    case KB_VERIFY_CRASH:
        return "illegal memory access misaligned address out of bounds";
    case KB_VERIFY_REFUSED:
        return "device code restrictions";
    default:
        return NULL;
    }
}

kb_rc kb_gen_repair_context(kb_store *store, const kb_config *config,
                            const kb_verify_result *r, long budget_tokens,
                            kb_buf *out, kb_err *err)
{
    if (!store || !r || budget_tokens <= 0)
        return KB_OK;
    kb_buf q, ids, text;
    kb_buf_init(&q, REPAIR_QUERY_MAX + 64);
    kb_buf_init(&ids, REPAIR_QUERY_MAX + 64);
    kb_buf_init(&text, 0);
    kb_rc rc = KB_OK;
    unsigned kinds = (1u << KB_KIND_TEXT) | (1u << KB_KIND_TABLE) | (1u << KB_KIND_SKILL);
    if (r->verdict == KB_VERIFY_COMPILE_ERROR) {
        rc = log_query(&q, &ids, r->compile.log);
        if (rc == KB_OK && !q.len)   /* no error line: the reason says it */
            rc = kb_buf_printf(&q, "%.*s", REPAIR_QUERY_MAX, r->reason);
        kinds |= 1u << KB_KIND_CODE;
    } else if (class_words(r->verdict)) {
        rc = kb_buf_printf(&q, "%s %.*s %s", r->verdict_name, REPAIR_QUERY_MAX / 2,
                           r->reason, class_words(r->verdict));
    }
    /* the identifiers the errors quote lead the query, and are a keyword
     * list of their own: "identifier" alone finds "Identifying Hotspots" */
    if (rc == KB_OK && q.len)
        rc = kb_buf_printf(&text, "%s%s%s", ids.len ? ids.data : "", ids.len ? " " : "",
                           q.data);
    kb_buf_release(&q);
    if (rc != KB_OK || !text.len) {
        kb_buf_release(&ids);
        kb_buf_release(&text);
        return rc == KB_OK ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    kb_search lex = { KB_SEARCH_LEX, ids.data };
    kb_query_opts o;
    kb_query_opts_init(&o);
    o.text = text.data;
    o.searches = &lex;
    o.nsearches = ids.len ? 1 : 0;
    o.mode = KB_MODE_HYBRID;
    o.k = REPAIR_K;
    o.filter.kinds = kinds;
    o.config = config;
    kb_results res;
    rc = kb_query_run(store, NULL, &o, &res, err);
    kb_buf_release(&ids);
    kb_buf_release(&text);
    if (rc != KB_OK)
        return rc;
    size_t limit = (size_t)budget_tokens * KB_GEN_BYTES_PER_TOKEN, sum = 0, n = 0;
    static const char intro[] = "Passages on this failure, from the knowledge base:\n\n";
    kb_buf add, one;
    kb_buf_init(&add, 0);
    kb_buf_init(&one, 0);
    rc = kb_buf_puts(&add, intro);
    sum = add.len;
    for (size_t i = 0; rc == KB_OK && i < res.n; i++) {
        const kb_result *x = &res.items[i];
        char *h = heading_of(x);
        kb_buf_reset(&one);
        rc = h ? kb_buf_printf(&one, "[repair %zu] %s \xc2\xb7 %s \xc2\xb7 %s\n%s\n\n", n + 1,
                               x->source, h, x->url, x->text)
               : KB_ERR_NOMEM;
        free(h);
        if (rc == KB_OK && sum + one.len <= limit) {
            sum += one.len;
            rc = kb_buf_append(&add, one.data, one.len);
            n++;
        }
    }
    if (rc == KB_OK && n)   /* at once: out is unchanged if it cannot take it */
        rc = kb_buf_append(out, add.data, add.len);
    kb_buf_release(&add);
    kb_buf_release(&one);
    kb_results_release(&res);
    return rc == KB_OK ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
}

