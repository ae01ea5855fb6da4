/* prompt.c - the prompt for a task (gen.h, "prompt.c"): its fixed
 * sections (prompt_task.c's) and the retrieved passages (context.c's)
 * assembled within a token budget, its hash and its JSON form. */
#include "generator/gen.h"
#include "verify/verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_BUDGET KB_GEN_BUDGET_DEFAULT

/* The section headings this file writes, in their order among all
 * (docs/generate.md, "kb prompt"): hardware, task, reference, context, feedback,
 * parent, contract. */
#define H_REFERENCE "## Reference kernel"
#define H_CONTEXT "## Retrieved context"
#define H_FEEDBACK "## Last attempts"
#define H_PARENT "## Kernel to refine"

static long tokens_of(size_t bytes)
{
    return (long)((bytes + KB_GEN_BYTES_PER_TOKEN - 1) / KB_GEN_BYTES_PER_TOKEN);
}

void kb_gen_prompt_release(kb_gen_prompt *p)
{
    if (!p)
        return;
    free(p->system);
    free(p->user);
    for (size_t i = 0; i < p->ncites; i++)
        kb_gen_cite_release(&p->cites[i]);
    free(p->cites);
    free(p->seed_skill);
    memset(p, 0, sizeof *p);
}

/* ------------------------------------------------------------------ assembly */

/* Cuts the feedback section fb, whose first head bytes are its heading
 * and intro, to at most room bytes when it is longer: after the last
 * attempt ("### " at a line's start) that fits whole, the first excepted,
 * else after the last line that fits, else inside a line at a character
 * boundary; then says how much was left out. A cut feedback is worth more
 * than none: without it the next round's prompt is the last round's again.
 * Too little room for any of it empties it. */
static kb_rc fit_feedback(kb_buf *fb, size_t head, size_t room)
{
    if (fb->len <= room)
        return KB_OK;
    static const char note[] = "\n(the rest of the feedback did not fit within the "
                               "token budget: %zu bytes left out)\n";
    size_t note_max = sizeof note + 20;
    if (room < head + note_max + 64) {
        kb_buf_reset(fb);
        return KB_OK;
    }
    size_t keep = room - note_max, cut = 0;
    for (size_t i = keep; i > head + 1 && !cut; i--)
        if (fb->data[i - 1] == '\n' && strncmp(fb->data + i, "### ", 4) == 0)
            cut = i;
    for (size_t i = keep; i > head && !cut; i--)
        if (fb->data[i - 1] == '\n')
            cut = i;
    if (!cut)
        cut = head + (size_t)kb_utf8_cut(fb->data + head, keep - head);
    size_t left = fb->len - cut;
    fb->len = cut;
    fb->data[cut] = '\0';
    return kb_buf_printf(fb, note, left);
}

static const char system_text[] =
    "You are an expert CUDA kernel engineer. You write one CUDA kernel for the task "
    "the user describes, to be correct and as fast as it can be on the GPU the "
    "hardware profile names. Your source is compiled with NVRTC and verified by "
    "kb-verify: checked against the reference kernel on several shapes, seeds and "
    "input distributions, then timed against the task's baseline with the L2 "
    "flushed. Ground your choices in the retrieved context and cite what you use "
    "by its [n]. Answer as the output contract at the end says.";

/* One passage as the prompt carries it, numbered n. */
static kb_rc render_passage(kb_buf *b, const kb_gen_passage *p, size_t n)
{
    kb_rc rc = kb_buf_printf(b, "### [%zu] %s\nSource: %s", n, p->label, p->cite.source);
    if (rc == KB_OK && *p->cite.heading)
        rc = kb_buf_printf(b, " \xc2\xb7 %s", p->cite.heading);
    if (rc == KB_OK && *p->cite.url)
        rc = kb_buf_printf(b, " \xc2\xb7 %s", p->cite.url);
    if (rc == KB_OK)
        rc = kb_buf_puts(b, "\n\n");
    size_t len = strlen(p->text);
    if (rc == KB_OK)
        rc = p->code ? kb_buf_printf(b, "```cuda\n%s%s```\n\n", p->text,
                                     len && p->text[len - 1] == '\n' ? "" : "\n")
                     : kb_buf_printf(b, "%s\n\n", p->text);
    return rc;
}

/* dst: p's citation, with its document's path and its text. */
static kb_rc copy_cite(kb_gen_cite *dst, const kb_gen_passage *p)
{
    const kb_gen_cite *src = &p->cite;
    memset(dst, 0, sizeof *dst);
    dst->chunk_id = src->chunk_id;
    dst->kind = kb_strdup(src->kind);
    dst->source = kb_strdup(src->source);
    dst->title = kb_strdup(src->title);
    dst->heading = kb_strdup(src->heading);
    dst->url = kb_strdup(src->url);
    dst->skill = kb_strdup(src->skill);
    dst->path = kb_strdup(p->path ? p->path : "");
    dst->text = kb_strdup(p->text ? p->text : "");
    if (!dst->kind || !dst->source || !dst->title || !dst->heading || !dst->url ||
        !dst->skill || !dst->path || !dst->text) {
        kb_gen_cite_release(dst);
        return KB_ERR_NOMEM;
    }
    return KB_OK;
}

/* A prompt's parts as it is assembled. */
typedef struct {
    kb_buf head;              /* the title, hardware, task, reference, context heading */
    kb_buf tail;              /* the output contract */
    kb_buf feedback, parent;  /* "" when none */
    kb_buf ctx;               /* the passages carried */
    kb_buf user;              /* all of it */
    char *used;               /* per passage: 1 when carried */
    long seed;                /* the passage that is the kernel to refine, or -1 */
    size_t ncites;
    size_t limit, sum;        /* the budget in bytes, and what is taken of it */
} parts;

static const char feedback_head[] = H_FEEDBACK "\n\nThe verdicts of the last "
                                    "candidates; fix what failed:\n\n";
static const char none_fit[] = "(no passage fits within the token budget)\n\n";
static const char none_found[] = "(nothing retrieved: no KB)\n\n";

/* What is always there: before the context, and the contract after it;
 * the feedback and the kernel to refine. */
static kb_rc put_fixed(parts *P, const kb_gen_prompt_opts *o, const kb_task *t,
                       const char *ref, const char *parent, double baseline_ms)
{
    kb_rc br = kb_buf_printf(&P->head, "# Task: %s\n\n", t->name);
    if (br == KB_OK)
        br = kb_gen_section_hardware(&P->head, o->device);
    if (br == KB_OK)
        br = kb_buf_puts(&P->head, "\n");
    if (br == KB_OK)
        br = kb_gen_section_task(&P->head, t, o->device, baseline_ms);
    if (br == KB_OK)
        br = kb_buf_puts(&P->head, "\n");
    if (br == KB_OK)
        br = kb_gen_section_code(&P->head, H_REFERENCE, "The plain, obviously correct "
                                 "kernel that the candidate is checked against:\n\n", ref);
    if (br == KB_OK)
        br = kb_buf_puts(&P->head, "\n" H_CONTEXT "\n\n");
    if (br == KB_OK)
        br = kb_gen_section_contract(&P->tail, t);
    if (br == KB_OK && o->feedback && *o->feedback)
        br = kb_buf_printf(&P->feedback, "%s%s%s\n", feedback_head, o->feedback,
                           o->feedback[strlen(o->feedback) - 1] == '\n' ? "" : "\n");
    if (br == KB_OK && parent && *parent)
        br = kb_gen_section_code(&P->parent, H_PARENT, "A verified kernel to improve on; "
                                 "keep what makes it correct:\n\n", parent);
    if (br == KB_OK)
        br = kb_buf_puts(&P->parent, "");   /* data never NULL below */
    if (br == KB_OK)
        br = kb_buf_puts(&P->feedback, "");
    return br;
}

/* The budget: the task and the contract always; then the feedback and
 * the kernel to refine. KB_ERR_USAGE when the first do not fit. */
static kb_rc fit_budget(parts *P, const kb_task *t, long budget, kb_err *err)
{
    size_t fixed = sizeof system_text - 1 + P->head.len + P->tail.len + sizeof none_fit - 1;
    P->limit = (size_t)budget * KB_GEN_BYTES_PER_TOKEN;
    if (fixed > P->limit)
        return kb_err_set(err, KB_ERR_USAGE, "a budget of %ld tokens is too small for "
                          "task '%s': its definition, reference and the output contract "
                          "take about %ld", budget, t->name, tokens_of(fixed));
    /* the feedback before the kernel to refine; when both do not fit, the
     * kernel keeps its place if it takes at most half of the room left,
     * and the feedback is cut to the rest */
    kb_rc br = KB_OK;
    P->sum = fixed - (sizeof none_fit - 1);
    size_t room = P->limit - fixed - 1;   /* a "none fits" and feedback's blank line kept room for */
    if (P->feedback.len + P->parent.len > room) {
        if (P->parent.len > room / 2)
            kb_buf_reset(&P->parent);
        br = fit_feedback(&P->feedback, sizeof feedback_head - 1, room - P->parent.len);
    }
    P->sum += P->feedback.len + P->parent.len;
    if (br != KB_OK)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory assembling the prompt");
    return KB_OK;
}

/* The passages, best first, each whole or not at all (one that does not
 * fit makes way for a smaller one); then the user text in its order. */
static kb_rc put_passages(parts *P, const kb_gen_passages *ps, int have_store)
{
    kb_rc br = KB_OK;
    kb_buf one;
    kb_buf_init(&one, 0);
    for (size_t i = 0; br == KB_OK && i < ps->n; i++) {
        if ((long)i == P->seed)
            continue;   /* in the kernel to refine */
        kb_buf_reset(&one);
        br = render_passage(&one, &ps->items[i], P->ncites + 1);
        if (br == KB_OK && P->sum + one.len <= P->limit) {
            P->sum += one.len;
            br = kb_buf_append(&P->ctx, one.data, one.len);
            P->used[i] = 1;
            P->ncites++;
        }
    }
    kb_buf_release(&one);
    if (br == KB_OK && !P->ncites)
        br = kb_buf_puts(&P->ctx, have_store ? none_fit : none_found);
    if (br == KB_OK)
        br = kb_buf_append(&P->user, P->head.data, P->head.len);
    if (br == KB_OK)
        br = kb_buf_append(&P->user, P->ctx.data, P->ctx.len);
    if (br == KB_OK)
        br = kb_buf_append(&P->user, P->feedback.data, P->feedback.len);
    if (br == KB_OK && P->feedback.len)
        br = kb_buf_puts(&P->user, "\n");
    if (br == KB_OK)
        br = kb_buf_append(&P->user, P->parent.data, P->parent.len);
    if (br == KB_OK && P->parent.len)
        br = kb_buf_puts(&P->user, "\n");
    if (br == KB_OK)
        br = kb_buf_append(&P->user, P->tail.data, P->tail.len);
    return br;
}

/* out's citations, system and user text, then its hash (over both, a NUL
 * between them) and size. */
static kb_rc finish_prompt(parts *P, const kb_gen_passages *ps, kb_gen_prompt *out,
                           kb_err *err)
{
    kb_rc br = KB_OK;
    if (P->ncites && !(out->cites = calloc(P->ncites, sizeof *out->cites)))
        br = KB_ERR_NOMEM;
    for (size_t i = 0; br == KB_OK && i < ps->n; i++)
        if (P->used[i] &&
            (br = copy_cite(&out->cites[out->ncites], &ps->items[i])) == KB_OK)
            out->ncites++;
    if (br == KB_OK && !(out->system = kb_strdup(system_text)))
        br = KB_ERR_NOMEM;
    if (br == KB_OK && !(out->user = kb_buf_finish(&P->user, KB_OK)))
        br = KB_ERR_NOMEM;
    if (br != KB_OK)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory assembling the prompt");
    size_t ls = strlen(out->system), lu = strlen(out->user);
    char *both = malloc(ls + lu + 1);
    if (!both)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    memcpy(both, out->system, ls + 1);
    memcpy(both + ls + 1, out->user, lu);
    kb_sha256_hex(both, ls + 1 + lu, out->hash);
    free(both);
    out->tokens = tokens_of(ls + lu);
    return KB_OK;
}

kb_rc kb_gen_prompt_build(const kb_gen_prompt_opts *o, kb_gen_prompt *out, kb_err *err)
{
    memset(out, 0, sizeof *out);
    long budget = o->budget_tokens > 0 ? o->budget_tokens : DEFAULT_BUDGET;
    kb_task *t = NULL;
    char *ref = NULL;
    kb_gen_passages ps = { 0 };
    parts P = { 0 };
    kb_buf_init(&P.head, 0);
    kb_buf_init(&P.tail, 0);
    kb_buf_init(&P.feedback, 0);
    kb_buf_init(&P.parent, 0);
    kb_buf_init(&P.ctx, 0);
    kb_buf_init(&P.user, 0);
    P.seed = -1;
    kb_rc rc = kb_gen_load_task(o->config, o->tasks_dir, o->task, &t, &ref, err);
    if (rc == KB_OK && o->store)
        rc = kb_gen_retrieve(o, t, &ps, err);
    /* no kernel to refine given: the kernel of this task's skill */
    for (size_t i = 0; rc == KB_OK && !(o->parent && *o->parent) && !o->no_seed &&
                       P.seed < 0 && i < ps.n; i++)
        if (ps.items[i].seed_skill)
            P.seed = (long)i;
    const char *parent = P.seed >= 0 ? ps.items[P.seed].text : o->parent;
    if (rc == KB_OK && put_fixed(&P, o, t, ref, parent, ps.baseline_ms) != KB_OK)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory assembling the prompt");
    if (rc == KB_OK)
        rc = fit_budget(&P, t, budget, err);
    if (rc == KB_OK && P.seed >= 0 && !P.parent.len)
        P.seed = -1;   /* it did not fit as the kernel to refine */
    if (rc == KB_OK && P.seed >= 0 &&
        !(out->seed_skill = kb_strdup(ps.items[P.seed].seed_skill)))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK && !(P.used = calloc(ps.n ? ps.n : 1, 1)))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK && put_passages(&P, &ps, o->store != NULL) != KB_OK)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory assembling the prompt");
    if (rc == KB_OK)
        rc = finish_prompt(&P, &ps, out, err);
    if (rc == KB_OK) {
        out->chose = ps.chose;
        out->choice = ps.choice;
    }
    if (rc == KB_OK)
        kb_log_debug("prompt for '%s': %ld tokens of %ld, %zu of %zu passages", t->name,
                     out->tokens, budget, out->ncites, ps.n);
    else
        kb_gen_prompt_release(out);
    free(P.used);
    kb_buf_release(&P.head);
    kb_buf_release(&P.tail);
    kb_buf_release(&P.feedback);
    kb_buf_release(&P.parent);
    kb_buf_release(&P.ctx);
    kb_buf_release(&P.user);
    kb_gen_passages_release(&ps);
    kb_task_free(t);
    free(ref);
    return rc;
}

/* ------------------------------------------------------------------ JSON */

cJSON *kb_gen_cites_json(const kb_gen_prompt *p, int no_skill_null, int *ok)
{
    cJSON *arr = *ok ? cJSON_CreateArray() : NULL;
    *ok = arr != NULL;
    for (size_t i = 0; *ok && i < p->ncites; i++) {
        const kb_gen_cite *c = &p->cites[i];
        cJSON *x = kb_json_push_obj(arr, ok);
        kb_json_put_num(x, "chunk_id", (double)c->chunk_id, ok);
        kb_json_put_str(x, "kind", c->kind, ok);
        kb_json_put_str(x, "source", c->source, ok);
        kb_json_put_str(x, "title", c->title, ok);
        kb_json_put_str(x, "heading", c->heading, ok);
        kb_json_put_str(x, "url", c->url, ok);
        kb_json_put_str(x, "skill", no_skill_null && !(c->skill && *c->skill) ? NULL : c->skill,
                        ok);
    }
    if (!*ok) {
        cJSON_Delete(arr);
        return NULL;
    }
    return arr;
}

kb_rc kb_gen_prompt_json(const kb_gen_prompt *p, cJSON **out, kb_err *err)
{
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL;
    kb_json_put_str(o, "system", p->system, &ok);
    kb_json_put_str(o, "user", p->user, &ok);
    kb_json_put_num(o, "tokens", (double)p->tokens, &ok);
    kb_json_put_str(o, "hash", p->hash, &ok);
    kb_json_put_item(o, "cites", kb_gen_cites_json(p, 0, &ok), &ok);
    if (p->chose) {   /* the llm stage chose the doc passages */
        cJSON *c = kb_json_put_obj(o, "chosen", &ok);
        kb_json_put_str(c, "model", p->choice.model ? p->choice.model : "", &ok);
        kb_json_put_bool(c, "cached", p->choice.cached, &ok);
        kb_json_put_num(c, "pool", (double)p->choice.pool, &ok);
        kb_json_put_num(c, "ordered", (double)p->choice.ordered, &ok);
        kb_json_put_str(c, "fallback", p->choice.fallback[0] ? p->choice.fallback : NULL, &ok);
    }
    if (!ok) {
        cJSON_Delete(o);
        *out = NULL;
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory making JSON");
    }
    *out = o;
    return KB_OK;
}

