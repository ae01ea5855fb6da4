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
/* a skill's kernel: verified code for the instructions the device has
 * (a wgmma/TMA GEMM is 13 kB) */
#define SKILL_KERNEL_MAX_BYTES 16000
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
    free(c->path);
    free(c->text);
    memset(c, 0, sizeof *c);
}

void kb_gen_passages_release(kb_gen_passages *ps)
{
    for (size_t i = 0; i < ps->n; i++) {
        kb_gen_cite_release(&ps->items[i].cite);
        free(ps->items[i].label);
        free(ps->items[i].text);
        free(ps->items[i].path);
        free(ps->items[i].seed_skill);
    }
    free(ps->items);
    memset(ps, 0, sizeof *ps);
}

/* kb_query_run for the prompt's searches: with KB_RERANK=llm their stage
 * is the local one, since one request a prompt chooses its passages
 * (choose.c), not one a search. */
static kb_rc search(kb_store *store, kb_embedder *emb, const kb_query_opts *opts,
                    kb_results *out, kb_err *err)
{
    kb_query_opts o = *opts;
    const kb_config *c = o.config;
    if (o.rerank == KB_RERANK_DEFAULT && c && c->rerank && !strcmp(c->rerank, "llm"))
        o.rerank = KB_RERANK_LOCAL;
    return kb_query_run(store, emb, &o, out, err);
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
    p->path = kb_strdup(r->path);
    ps->n++;   /* released with the list, whole or not */
    if (!p->cite.kind || !p->cite.source || !p->cite.title || !p->cite.heading ||
        !p->cite.url || !p->cite.skill || !p->path)
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
    const char *device;      /* the device's name, or NULL */
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

/* How many items the comma-separated lists a and b share. */
static int lists_shared(const char *a, const char *b)
{
    int n = 0;
    for (const char *p = a ? a : ""; *p;) {
        p += strspn(p, ", ");
        size_t len = strcspn(p, ", ");
        char one[64];
        if (len && len < sizeof one) {
            memcpy(one, p, len);
            one[len] = '\0';
            n += lists_meet(one, b);
        }
        p += len;
    }
    return n;
}

/* 1 when a passage's place names an architecture newer than the device's
 * (cc; 0 unknown: none is): Blackwell's tcgen05 is no help on an H200. */
static int newer_arch(const kb_result *r, int cc)
{
    static const struct { const char *word; int cc; } names[] = {
        { "blackwell", 100 }, { "sm100", 100 }, { "sm_100", 100 }, { "sm120", 120 },
        { "sm_120", 120 }, { "tcgen05", 100 }, { "5th generation", 100 },
        { "hopper", 90 }, { "sm90", 90 }, { "sm_90", 90 }, { "wgmma", 90 },
    };
    if (!cc)
        return 0;
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = kb_buf_printf(&b, "%s ", r->title);
    for (size_t i = 0; rc == KB_OK && i < r->depth; i++)
        rc = kb_buf_printf(&b, "%s ", r->heading_path[i]);
    int newer = 0;
    for (char *p = b.data; rc == KB_OK && p && *p; p++)
        *p = (char)tolower((unsigned char)*p);
    for (size_t i = 0; rc == KB_OK && i < sizeof names / sizeof names[0] && !newer; i++)
        newer = names[i].cc > cc && strstr(b.data, names[i].word) != NULL;
    kb_buf_release(&b);
    return newer;
}


/* 1 when r's document is a skill's file (a SKILL.md beside it, in its
 * source): a skill's kernel comes with its skill, when the skill fits. */
static int skill_file(kb_store *store, const kb_result *r)
{
    const char *slash = strrchr(r->path, '/');
    kb_buf p;
    kb_buf_init(&p, 0);
    long long id = 0;
    kb_err quiet;
    kb_err_clear(&quiet);
    if (kb_buf_printf(&p, "%.*sSKILL.md", slash ? (int)(slash - r->path + 1) : 0,
                      r->path) == KB_OK)
        kb_store_doc_first_chunk(store, r->source, p.data, &id, &quiet);
    kb_buf_release(&p);
    return id != 0;
}

/* The kernel of skill h (kernel.cu beside its SKILL.md, as the KB holds
 * it) as an exemplar passage, marked as a seed when the skill is for this
 * very task; nothing when the KB has none or it is over the exemplar's
 * size. */
static kb_rc skill_kernel(kb_store *store, const kb_skill_hit *h, const char *task_name,
                          kb_gen_passages *ps, kb_err *err)
{
    const char *path = h->r->path, *slash = strrchr(path, '/');
    kb_buf kp;
    kb_buf_init(&kp, 0);
    kb_rc rc = kb_buf_printf(&kp, "%.*skernel.cu", slash ? (int)(slash - path + 1) : 0, path);
    long long id = 0;
    if (rc != KB_OK)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    else
        rc = kb_store_doc_first_chunk(store, h->r->source, kp.data, &id, err);
    char *body = NULL;
    long long first = 0;
    kb_results top = { 0 };
    if (rc == KB_OK && id)
        rc = document_text(store, id, 0, SKILL_KERNEL_MAX_BYTES, &body, &first, err);
    int dup = 0;   /* skills of one kernel (the GEMM's three techniques) */
    for (size_t i = 0; rc == KB_OK && body && i < ps->n && !dup; i++)
        dup = ps->items[i].code && !strcmp(ps->items[i].text, body);
    if (rc == KB_OK && body && (dup || !strstr(body, "__global__"))) {
        free(body);
        body = NULL;
    }
    if (rc == KB_OK && body)
        rc = kb_get_chunk(store, first, 0, &top, err);
    if (rc == KB_OK && body && top.n) {
        kb_buf l;
        kb_buf_init(&l, 0);
        kb_rc lr = kb_buf_printf(&l, "exemplar %s: the kernel of skill %s", kp.data, h->name);
        rc = push_passage(ps, &top.items[0], NULL, kb_buf_finish(&l, lr), body, 1, err);
        body = NULL;
        kb_gen_passage *p = &ps->items[ps->n - 1];
        if (rc == KB_OK && *h->task && !strcmp(h->task, task_name) &&
            !(p->seed_skill = kb_strdup(h->name)))
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    if (top.n || top.items)
        kb_results_release(&top);
    free(body);
    kb_buf_release(&kp);
    return rc;
}

/* The baseline's median at the target shape on the device named dev, as
 * the evidence of skill h recorded it (evidence.json beside its SKILL.md,
 * where its link is a file); 0 when none says. */
static double evidence_baseline(const kb_skill_hit *h, const char *dev)
{
    const char *url = h->r->url;
    if (!dev || strncmp(url, "file://", 7) != 0)
        return 0;
    const char *path = url + 7;
    size_t n = strcspn(path, "#");
    while (n && path[n - 1] != '/')
        n--;
    char *dir = n ? kb_strndup(path, n - 1) : NULL;
    kb_skill_evidence ev;
    kb_skill_evidence_init(&ev);
    kb_err quiet;
    kb_err_clear(&quiet);
    double ms = 0;
    if (dir && kb_skill_evidence_load(dir, h->name, &ev, NULL, &quiet) == KB_OK)
        for (size_t i = kb_skill_evidence_count(&ev); i-- > 0 && !ms;) {
            const cJSON *rec = kb_skill_evidence_at(&ev, i), *tm;
            const char *name = kb_gen_jstr(kb_gen_jget(rec, "device"), "name", "");
            if (strcmp(name, dev) != 0)
                continue;
            cJSON_ArrayForEach(tm, kb_gen_jget(rec, "timings"))
                if (!ms && !strcmp(kb_gen_jstr(tm, "shape", ""), "target"))
                    ms = kb_gen_jnum(kb_gen_jget(tm, "baseline_ms"), "median", 0);
        }
    kb_skill_evidence_release(&ev);
    free(dir);
    return ms > 0 ? ms : 0;
}

/* One skill of hits as a passage: its SKILL.md whole, cited at its top. */
static kb_rc push_skill(kb_store *store, const kb_skill_hit *h, const char *task_name,
                        kb_gen_passages *ps, int *taken, kb_err *err)
{
    char *body = NULL;
    long long top_id = 0;
    kb_rc rc = document_text(store, (long long)h->r->chunk_id, 1, SKILL_MAX_BYTES, &body,
                             &top_id, err);
    if (rc != KB_OK || !body)
        return rc;
    kb_buf l;
    kb_buf_init(&l, 0);
    kb_rc lr = kb_buf_printf(&l, "skill %s: %s", h->name, *h->status ? h->status : "no status");
    if (lr == KB_OK && *h->speedup)
        lr = kb_buf_printf(&l, ", %sx", h->speedup);
    if (lr == KB_OK && *h->task)
        lr = kb_buf_printf(&l, " on %s%s", h->task,
                           strcmp(h->task, task_name) ? "" : " (this task)");
    kb_results top;
    rc = kb_get_chunk(store, top_id, 0, &top, err);
    if (rc == KB_OK) {
        rc = push_passage(ps, &top.items[0], h->name, kb_buf_finish(&l, lr), body, 0, err);
        kb_results_release(&top);
        *taken = 1;
    } else {
        kb_buf_release(&l);
        free(body);
    }
    return rc;
}

/* 1 when hit h may go into the task's prompt: its arch, dtype and ops fit;
 * a draft (unreviewed: what one run wrote) only into its own task's. */
static int skill_fits(const kb_skill_hit *h, const want *w, const char *task_name)
{
    if (!arch_fits(h->arch, w->cc) || !lists_meet(h->dtype, w->dtypes) ||
        !lists_meet(h->ops, w->ops))
        return 0;
    return status_tier(h->status) == 0 || !strcmp(h->task, task_name);
}

/* The skills for the task: verified and approved first, then drafts of
 * this task; in each tier those that share more of the task's ops first,
 * then in search order. A skill is carried whole (its SKILL.md's
 * sections); then the kernels of the skills taken, as exemplars, while
 * there is room for exemplars. */
static kb_rc retrieve_skills(kb_store *store, const kb_config *cfg, const char *text,
                             const want *w, const char *task_name, kb_gen_passages *ps,
                             kb_err *err)
{
    kb_skill_query q = { .run = search, .text = text, .mode = KB_MODE_HYBRID, .k = 50,
                             .config = cfg };
    kb_skill_hits hits;
    kb_rc rc = kb_skill_search(store, &q, &hits, err);
    if (rc != KB_OK)
        return rc;
    const kb_skill_hit *taken[SKILLS_MAX];
    size_t ntaken = 0;
    int most = 0;
    for (size_t i = 0; i < hits.n; i++) {
        int n = lists_shared(hits.items[i].ops, w->ops);
        most = n > most ? n : most;
        /* the baseline's time on this device, as this task's skills measured it */
        if (!ps->baseline_ms && !strcmp(hits.items[i].task, task_name))
            ps->baseline_ms = evidence_baseline(&hits.items[i], w->device);
    }
    for (int tier = 0; tier < 2 && rc == KB_OK; tier++)
        for (int shared = most; shared >= 0 && rc == KB_OK; shared--)
            for (size_t i = 0; i < hits.n && ntaken < SKILLS_MAX && rc == KB_OK; i++) {
                const kb_skill_hit *h = &hits.items[i];
                if (status_tier(h->status) != tier || !skill_fits(h, w, task_name) ||
                    lists_shared(h->ops, w->ops) != shared)
                    continue;
                int ok = 0;
                rc = push_skill(store, h, task_name, ps, &ok, err);
                if (ok)
                    taken[ntaken++] = h;
            }
    for (size_t i = 0; i < ntaken && i < EXEMPLARS_MAX && rc == KB_OK; i++)
        rc = skill_kernel(store, taken[i], task_name, ps, err);
    kb_skill_hits_release(&hits);
    return rc;
}

/* 1 when ps holds a passage of r's file (an exemplar is its file). */
static int have_file(const kb_gen_passages *ps, const kb_result *r)
{
    for (size_t i = 0; i < ps->n; i++)
        if (ps->items[i].code && ps->items[i].path && !strcmp(ps->items[i].path, r->path) &&
            !strcmp(ps->items[i].cite.source, r->source))
            return 1;
    return 0;
}

/* 1 when a kernel's source uses the tensor cores. */
static int tensor_code(const char *src)
{
    return strstr(src, "wmma::") || strstr(src, "mma_sync") || strstr(src, "mma.sync") ||
           strstr(src, "wgmma") || strstr(src, "tcgen05");
}

/* How retrieve_kind picks: at most max passages; the device's cc (0
 * unknown); guides: one from the guides first, where they answer; tensor:
 * the task is one for the tensor cores. */
typedef struct {
    int max, cc, guides, tensor;
} pick;

/* The Programming Guide, Best Practices and the tuning guides. */
static int is_guide(const char *source)
{
    return strstr(source, "guide") || strstr(source, "practices");
}

/* Passages of kinds for text: code as exemplars (whole files when small),
 * text and tables as doc kb_gen_passages; at most max of them, none twice,
 * none on a newer architecture than the device's, no skill's kernel (a
 * skill's kernel comes with its skill: retrieve_skills); with guides, one
 * from the guides (the Programming Guide, Best Practices, the tuning
 * guides) when the results hold one. */
static kb_rc retrieve_kind(kb_store *store, const kb_config *cfg, const char *text,
                           unsigned kinds, const pick *k, kb_gen_passages *ps, kb_err *err)
{
    int max = k->max;
    kb_query_opts o;
    kb_query_opts_init(&o);
    o.text = text;
    o.mode = KB_MODE_HYBRID;
    o.k = max * 3 + 5;
    o.filter.kinds = kinds;
    o.config = cfg;
    kb_results res;
    kb_rc rc = search(store, NULL, &o, &res, err);
    if (rc != KB_OK)
        return rc;
    int code = (kinds & (1u << KB_KIND_CODE)) != 0;
    int taken = 0;
    for (int pass = k->guides ? 0 : 1; pass < 2 && !taken; pass++)
        for (size_t i = 0; i < res.n && taken < max && rc == KB_OK; i++) {
            const kb_result *r = &res.items[i];
            if (have_passage(ps, r) || (code && have_file(ps, r)) || newer_arch(r, k->cc) ||
                (code && (is_guide(r->source) || skill_file(store, r))) ||
                (pass == 0 && !is_guide(r->source)))
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
            /* host code, or a helper: no kernel to learn from; a tensor-core
             * kernel teaches a task of no tensor cores nothing */
            if (code && body && (!strstr(body, "__global__") ||
                                 (!k->tensor && tensor_code(body)))) {
                free(body);
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
 * ops (three letters or more: "y = GELU(x)" says gelu), then extra. */
static char *task_query(const kb_task *t, const char *extra)
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
    if (rc == KB_OK && extra && *extra)
        rc = kb_buf_printf(&b, " %s", extra);
    kb_buf_release(&all);
    return kb_buf_finish(&b, rc);
}

/* ------------------------------------------------------------------ what the task is */

/* What bounds a class of kernels, and what the passages that help with it
 * are about: the ops that put a task in the class, a query per topic for
 * the documentation, the words an exemplar kernel of it holds. A task's
 * doc passages come from its classes' topics, not from its own words: a
 * description says what is computed ("per row of an M x N matrix"), and
 * its words find GEMM and im2col passages, not the ones on how to make
 * such a kernel fast. */
typedef struct {
    const char *ops;            /* comma-separated; NULL: by the roofline */
    int cc;                     /* only on this architecture (90); -90: on any
                                   but that one; 0: on any */
    int guides;                 /* its topics from the guides, where they answer */
    const char *topics[3];
    const char *code;
} kernel_class;

#define CLASS_TENSOR_OPS "gemm,matmul,tensor-core,implicit-gemm,attention,flash-attention"

static const kernel_class classes[] = {
    /* GEMM-like on Hopper: wgmma, TMA, clusters */
    { CLASS_TENSOR_OPS, 90, 0,
      { "wgmma warpgroup asynchronous matrix multiply-accumulate",
        "tensor memory accelerator cp.async.bulk.tensor mbarrier",
        "Hopper thread block clusters distributed shared memory tensor memory accelerator" },
      "wgmma mbarrier cp.async.bulk.tensor warpgroup" },
    /* GEMM-like elsewhere: mma.sync, cp.async pipelines */
    { CLASS_TENSOR_OPS, -90, 0,
      { "warp-level matrix multiply-accumulate mma.sync ldmatrix tensor cores",
        "cp.async asynchronous copy global to shared memory multistage pipeline",
        "shared memory bank conflicts swizzle layout" },
      "mma.sync ldmatrix cp.async shared memory tile" },
    { "reduction,sum,softmax,normalization,layernorm,rmsnorm,topk,gemv", 0, 1,
      { "parallel reduction warp shuffle __shfl_xor_sync",
        "shared memory reduction __syncthreads synchronization functions", NULL },
      "__shfl_xor_sync warp reduce shared memory blockDim" },
    { "scan,prefix-sum", 0, 0,
      { "warp shuffle __shfl_up_sync inclusive scan",
        "decoupled look-back single-pass parallel prefix scan", NULL },
      "__shfl_up_sync scan prefix sum" },
    { "histogram,atomics", 0, 1,
      { "atomic functions atomicAdd shared memory histogram",
        "warp vote match __match_any_sync aggregated atomics",
        "distributed shared memory thread block clusters" },
      "atomicAdd shared memory histogram bins" },
    { "stencil,convolution,conv2d", 0, 1,
      { "shared memory data reuse tiling __syncthreads", NULL, NULL },
      "stencil shared memory tile halo" },
    { "transpose", 0, 1,
      { "shared memory bank conflicts padding",
        "strided accesses coalescing shared memory", NULL },
      "transpose shared memory tile TILE_DIM" },
    { "int4,quantization,dequantization", 0, 0,
      { "integer intrinsics bit field extract byte permute __byte_perm", NULL, NULL },
      "dequantize int4 nibble shift mask" },
    /* memory-bound: every task whose roofline is its bytes */
    { NULL, 0, 1,
      { "coalesced access to global memory",
        "device memory accesses size and alignment requirement vector types",
        "latency hiding occupancy memory throughput independent loads in flight" },
      "float4 vectorized loads coalesced grid-stride" },
};

#define CLASSES_N (sizeof classes / sizeof classes[0])

/* 1 when the task's roofline is its bytes: moving them at the device's
 * bandwidth takes longer than its flops at the unit's rate (an H200's
 * balance when the device is unknown). */
static int memory_bound(const kb_task *t, const cJSON *d)
{
    const kb_shape *s = t->nshapes ? &t->shapes[0] : NULL;
    for (size_t i = 0; i < t->nshapes; i++)
        if (t->shapes[i].timed) {
            s = &t->shapes[i];
            break;
        }
    double bytes = 0, flops = 0;
    if (!s || !t->roof_bytes || kb_task_eval(t, s, t->roof_bytes, &bytes, NULL) != KB_OK)
        return 0;
    if (t->roof_flops)
        kb_task_eval(t, s, t->roof_flops, &flops, NULL);
    const cJSON *bw = cJSON_GetObjectItemCaseSensitive(d, "peak_bandwidth_bytes_per_s");
    const cJSON *f32 = cJSON_GetObjectItemCaseSensitive(d, "fp32_flops_per_s");
    const cJSON *bf16 = cJSON_GetObjectItemCaseSensitive(d, "bf16_tensor_flops_per_s");
    double b = cJSON_IsNumber(bw) ? bw->valuedouble : 4.8e12;
    double rate = cJSON_IsNumber(f32) ? f32->valuedouble : 6.7e13;
    if (t->roof_unit && strstr(t->roof_unit, "tensor"))
        rate = cJSON_IsNumber(bf16) ? bf16->valuedouble : 1.0e15;
    return bytes / b >= flops / rate;
}

/* The classes of task t on a device of cc (0 unknown): into in[], their
 * count returned. */
static size_t task_classes(const kb_task *t, const cJSON *d, int cc,
                           const kernel_class *in[CLASSES_N])
{
    size_t n = 0;
    for (size_t i = 0; i < CLASSES_N; i++) {
        const kernel_class *k = &classes[i];
        if (k->cc > 0 && cc != k->cc)
            continue;
        if (k->cc < 0 && cc == -k->cc)
            continue;
        if (k->ops ? lists_meet(t->ops, k->ops) && *t->ops : memory_bound(t, d))
            in[n++] = k;
    }
    return n;
}

/* Keeps ps->items[chosen[0..nchosen)] in that order after ps->items[0..start),
 * and releases the other candidates. */
static kb_rc keep_chosen(kb_gen_passages *ps, size_t start, const size_t *chosen,
                         size_t nchosen)
{
    size_t n = ps->n - start;
    kb_gen_passage *was = malloc(n * sizeof *was);
    char *keep = calloc(n, 1);
    if (!was || !keep) {
        free(was);
        free(keep);
        return KB_ERR_NOMEM;
    }
    memcpy(was, ps->items + start, n * sizeof *was);
    size_t at = start;
    for (size_t i = 0; i < nchosen; i++)
        if (!keep[chosen[i] - start]) {
            keep[chosen[i] - start] = 1;
            ps->items[at++] = was[chosen[i] - start];
        }
    kb_gen_passages rest = { .items = was, .n = 0 };
    for (size_t i = 0; i < n; i++)   /* the dropped ones, released together */
        if (!keep[i])
            rest.items[rest.n++] = was[i];
    ps->n = at;
    kb_gen_passages_release(&rest);
    free(keep);
    return KB_OK;
}

/* The doc passages: the topics of the task's classes in turn (the first
 * topic of each class, then the second, ...), one passage each, until max
 * are taken. A task of no class is searched by its own words, from the
 * guides where they answer: the words of a description find passages
 * that share them (a "matrix" finds a TMA transpose example), not the
 * ones on how to make such a kernel fast. With o->choose, each topic gives
 * a few candidates and the llm stage chooses among them (choose.c). */
static kb_rc retrieve_topics(const kb_gen_prompt_opts *o, const kb_task *t,
                             const kernel_class *const *cls, size_t ncls, const char *words,
                             int max, int cc, kb_gen_passages *ps, kb_err *err)
{
    unsigned kinds = (1u << KB_KIND_TEXT) | (1u << KB_KIND_TABLE);
    size_t start = ps->n, own[3 * CLASSES_N], nown = 0;
    /* choosing: a few candidates a topic, kb's own pick the first of each */
    int per = o->choose ? KB_GEN_CHOOSE_PER_TOPIC : 1;
    kb_rc rc = KB_OK;
    for (int topic = 0; topic < 3 && rc == KB_OK; topic++)
        for (size_t c = 0; c < ncls && rc == KB_OK; c++) {
            const char *q = cls[c]->topics[topic];
            size_t before = ps->n;
            if (q && nown < (size_t)max) {
                pick k = { per, cc, cls[c]->guides, 0 };
                rc = retrieve_kind(o->store, o->config, q, kinds, &k, ps, err);
            }
            if (ps->n > before)
                own[nown++] = before;
        }
    if (rc == KB_OK && ps->n == start) {   /* no class: the task's words alone */
        pick k = { o->choose ? max * 2 : max, cc, 1, 0 };
        rc = retrieve_kind(o->store, o->config, words, kinds, &k, ps, err);
        for (nown = 0; nown < (size_t)max && start + nown < ps->n; nown++)
            own[nown] = start + nown;
    }
    size_t chosen[DOCS_MAX], nchosen = 0;
    if (rc == KB_OK && o->choose && ps->n > start &&
        (rc = kb_gen_choose(o, t, ps, start, own, nown, DOCS_MAX, chosen, &nchosen,
                            err)) == KB_OK &&
        keep_chosen(ps, start, chosen, nchosen) != KB_OK)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return rc;
}

kb_rc kb_gen_retrieve(const kb_gen_prompt_opts *o, const kb_task *t,
                      kb_gen_passages *ps, kb_err *err)
{
    want w = { 0 };
    char arch[16];
    kb_gen_device_arch(o->device, arch, &w.cc);
    w.arch = *arch ? arch : NULL;
    w.ops = t->ops;
    w.device = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o->device, "name"));
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
    const kernel_class *cls[CLASSES_N];
    size_t ncls = task_classes(t, o->device, w.cc, cls);
    kb_buf code;
    kb_buf_init(&code, 0);
    kb_rc rc = kb_buf_puts(&code, "");
    for (size_t i = 0; i < ncls && rc == KB_OK; i++)
        rc = kb_buf_printf(&code, "%s%s", i ? " " : "", cls[i]->code);
    char *q = task_query(t, NULL), *qc = rc == KB_OK ? task_query(t, code.data) : NULL;
    kb_buf_release(&code);
    if (!q || !qc) {
        free(q);
        free(qc);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    rc = retrieve_skills(o->store, o->config, qc, &w, t->name, ps, err);
    int exemplars = 0;
    for (size_t i = 0; i < ps->n; i++)
        exemplars += ps->items[i].code;
    /* the skills' kernels are verified code for kernels of this kind;
     * a search finds GEMMs for a GEMV, so it is asked only without them */
    int tensor = 0;
    for (size_t i = 0; i < ncls; i++)
        tensor |= cls[i]->ops && !strcmp(cls[i]->ops, CLASS_TENSOR_OPS);
    pick k = { EXEMPLARS_MAX, w.cc, 0, tensor };
    if (rc == KB_OK && !exemplars)
        rc = retrieve_kind(o->store, o->config, qc, 1u << KB_KIND_CODE, &k, ps, err);
    if (rc == KB_OK)
        rc = retrieve_topics(o, t, cls, ncls, q, DOCS_MAX, w.cc, ps, err);
    free(q);
    free(qc);
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
    rc = search(store, NULL, &o, &res, err);
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

