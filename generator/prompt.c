/* prompt.c - the loop's minimal prompt assembly (gen.h, "prompt.c"): the
 * task, its reference kernel, passages retrieved from the KB with their
 * citations, the last attempts' feedback, a kernel to refine, and the
 * output contract; repair passages for a failure. A stand-in written by
 * the loop's branch until branch 'prompt' delivers the full version. */
#include "generator/gen.h"
#include "generator/task.h"

#include <stdlib.h>
#include <string.h>

#define REF_MAX_BYTES (1u << 20)

void kb_gen_prompt_release(kb_gen_prompt *p)
{
    if (!p)
        return;
    free(p->system);
    free(p->user);
    for (size_t i = 0; i < p->ncites; i++) {
        kb_gen_cite *c = &p->cites[i];
        free(c->kind);
        free(c->source);
        free(c->title);
        free(c->heading);
        free(c->url);
        free(c->skill);
    }
    free(p->cites);
    memset(p, 0, sizeof *p);
}

/* The result's heading path joined with " > ". Caller frees. */
static char *heading_of(const kb_result *r)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = kb_buf_puts(&b, "");
    for (size_t i = 0; rc == KB_OK && i < r->depth; i++)
        rc = kb_buf_printf(&b, "%s%s", i ? " > " : "", r->heading_path[i]);
    return kb_buf_finish(&b, rc);
}

static kb_rc add_cite(kb_gen_prompt *p, size_t *cap, const kb_result *r)
{
    if (KB_GROW(p->cites, p->ncites + 1, *cap) != KB_OK)
        return KB_ERR_NOMEM;
    kb_gen_cite *c = &p->cites[p->ncites];
    memset(c, 0, sizeof *c);
    c->chunk_id = (long long)r->chunk_id;
    c->kind = kb_strdup(kb_kind_name(r->kind));
    c->source = kb_strdup(r->source ? r->source : "");
    c->title = kb_strdup(r->title ? r->title : "");
    c->heading = heading_of(r);
    c->url = kb_strdup(r->url ? r->url : "");
    /* a skill's name is the first item of its heading path */
    const char *sk = r->kind == KB_KIND_SKILL && r->depth ? r->heading_path[0] : "";
    size_t n = strcspn(sk, " ");
    c->skill = kb_strndup(sk, n);
    p->ncites++;
    if (!c->kind || !c->source || !c->title || !c->heading || !c->url || !c->skill)
        return KB_ERR_NOMEM;
    return KB_OK;
}

/* k results of text in store into *res (lexical: no embedder needed). */
static kb_rc search(kb_store *store, const kb_config *config, const char *text, int k,
                    unsigned kinds, kb_results *res, kb_err *err)
{
    kb_query_opts qo;
    kb_query_opts_init(&qo);
    qo.text = text;
    qo.mode = KB_MODE_LEXICAL;
    qo.k = k;
    qo.snippet = 0;
    qo.filter.kinds = kinds;
    qo.config = config;
    memset(res, 0, sizeof *res);
    return kb_query_run(store, NULL, &qo, res, err);
}

/* Appends at most budget_chars of r's passages with their citations. */
static kb_rc put_passages(kb_buf *b, const kb_results *res, long budget_chars,
                          kb_gen_prompt *p, size_t *cap)
{
    kb_rc rc = KB_OK;
    long used = 0;
    for (size_t i = 0; i < res->n && rc == KB_OK; i++) {
        const kb_result *r = &res->items[i];
        size_t tl = strlen(r->text);
        if (used + (long)tl > budget_chars)
            continue;
        used += (long)tl;
        char *h = heading_of(r);
        rc = h ? kb_buf_printf(b, "[%zu] %s: %s (%s)\n%s\n\n", p ? p->ncites + 1 : i + 1,
                               r->title, h, r->url, r->text)
               : KB_ERR_NOMEM;
        free(h);
        if (rc == KB_OK && p)
            rc = add_cite(p, cap, r);
    }
    return rc;
}

kb_rc kb_gen_prompt_build(const kb_gen_prompt_opts *o, kb_gen_prompt *out, kb_err *err)
{
    memset(out, 0, sizeof *out);
    char *dir = kb_path_join(o->tasks_dir ? o->tasks_dir : "corpus/tasks", o->task);
    char *refp = dir ? kb_path_join(dir, "reference.cu") : NULL;
    kb_task *t = NULL;
    kb_buf sys, user, ref;
    kb_buf_init(&sys, 0);
    kb_buf_init(&user, 0);
    kb_buf_init(&ref, 0);
    size_t cap = 0;
    kb_rc rc = refp ? kb_task_load(dir, &t, err) : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK)
        rc = kb_read_file(refp, REF_MAX_BYTES, &ref, err);
    if (rc != KB_OK)
        goto out;
    long budget = o->budget_tokens > 0 ? o->budget_tokens : 12000;
    rc = kb_buf_puts(&sys, "You write fast, correct CUDA kernels. Answer with one fenced "
                     "```cuda block that holds the whole candidate: extern \"C\" __global__ "
                     "kernels and their __device__ helpers, no host code, no #include "
                     "beyond CUDA's device headers. kb-verify allocates, fills, launches "
                     "and times it; optional `// kb-launch: kernel=NAME grid=E block=E "
                     "shared=E` lines override the launch.");
    if (rc == KB_OK) {
        const cJSON *dn = cJSON_GetObjectItemCaseSensitive(o->device, "name");
        rc = kb_buf_printf(&user, "## Hardware\n\n%s\n\n", cJSON_IsString(dn)
                           ? dn->valuestring : "The device is unknown.");
    }
    if (rc == KB_OK)
        rc = kb_buf_printf(&user, "## Task: %s\n\n%s\n\nKernel: %s; dtype %s; parameters:",
                           t->name, t->description, t->kernel, kb_dtype_name(t->dtype));
    for (size_t i = 0; rc == KB_OK && i < t->nparams; i++)
        rc = kb_buf_printf(&user, " %s %s", kb_dtype_name(t->params[i].dtype),
                           t->params[i].name);
    if (rc == KB_OK && t->nshapes && t->ndims)
        rc = kb_buf_printf(&user, ".\nTarget shape: %s = %.0f.\n\n", t->dims[0],
                           t->shapes[0].dims[0]);
    if (rc == KB_OK)
        rc = kb_buf_printf(&user, "## Reference kernel\n\n```cuda\n%s```\n\n", ref.data);
    if (rc == KB_OK && o->store) {
        kb_results res;
        kb_err qerr;
        kb_err_clear(&qerr);
        kb_buf q;
        kb_buf_init(&q, 0);
        rc = kb_buf_printf(&q, "%s %s", t->name, t->ops ? t->ops : "");
        for (char *c = q.data; rc == KB_OK && c && *c; c++)
            if (*c == ',' || *c == '_')
                *c = ' ';
        if (rc == KB_OK && search(o->store, o->config, q.data, 4, 0, &res, &qerr) == KB_OK) {
            rc = kb_buf_puts(&user, "## Retrieved context\n\n");
            if (rc == KB_OK)
                rc = put_passages(&user, &res, budget * 2, out, &cap);
        }
        kb_results_release(&res);
        kb_buf_release(&q);
    }
    if (rc == KB_OK && o->feedback)
        rc = kb_buf_printf(&user, "## The last attempts\n\n%s\n", o->feedback);
    if (rc == KB_OK && o->parent)
        rc = kb_buf_printf(&user, "## The kernel to improve\n\n```cuda\n%s```\n\n", o->parent);
    if (rc == KB_OK)
        rc = kb_buf_puts(&user, "## Output\n\nOne ```cuda block with the extern \"C\" "
                         "__global__ kernel, nothing else.\n");
    if (rc != KB_OK) {
        rc = kb_err_set(err, rc, "out of memory");
        goto out;
    }
    out->tokens = (long)((sys.len + user.len) / 4);
    kb_buf all;
    kb_buf_init(&all, 0);
    if (kb_buf_puts(&all, sys.data) == KB_OK && kb_buf_puts(&all, user.data) == KB_OK)
        kb_sha256_hex(all.data, all.len, out->hash);
    kb_buf_release(&all);
    out->system = kb_buf_detach(&sys);
    out->user = kb_buf_detach(&user);
    if (!out->system || !out->user)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
out:
    if (rc != KB_OK)
        kb_gen_prompt_release(out);
    kb_task_free(t);
    free(dir);
    free(refp);
    kb_buf_release(&sys);
    kb_buf_release(&user);
    kb_buf_release(&ref);
    return rc;
}

kb_rc kb_gen_repair_context(kb_store *store, const kb_config *config,
                            const kb_verify_result *r, long budget_tokens, kb_buf *out,
                            kb_err *err)
{
    if (!store || !r)
        return KB_OK;
    kb_buf q;
    kb_buf_init(&q, 0);
    kb_rc rc = KB_OK;
    if (r->verdict == KB_VERIFY_COMPILE_ERROR && r->compile.log && *r->compile.log) {
        const char *e = strstr(r->compile.log, "error");
        const char *nl = e ? strchr(e, '\n') : NULL;
        rc = e ? kb_buf_append(&q, e + 5, nl ? (size_t)(nl - e - 5) : strlen(e + 5))
               : kb_buf_puts(&q, "compile error");
    } else {
        rc = kb_buf_printf(&q, "%s %s", r->verdict_name, r->reason);
    }
    for (char *c = q.data; rc == KB_OK && c && *c; c++)
        if (!(*c >= 'a' && *c <= 'z') && !(*c >= 'A' && *c <= 'Z') && !(*c >= '0' && *c <= '9') &&
            *c != '_')
            *c = ' ';
    kb_results res;
    memset(&res, 0, sizeof res);
    kb_err qerr;
    kb_err_clear(&qerr);
    if (rc == KB_OK && search(store, config, q.data, 3, (1u << KB_KIND_TEXT), &res, &qerr) == KB_OK)
        rc = put_passages(out, &res, (budget_tokens > 0 ? budget_tokens : 800) * 4, NULL, NULL);
    kb_results_release(&res);
    kb_buf_release(&q);
    return rc == KB_OK ? KB_OK : kb_err_set(err, rc, "out of memory");
}
