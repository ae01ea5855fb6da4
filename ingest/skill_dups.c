/* skill_dups.c - near-duplicate skills, flagged at ingest: two SKILL.md
 * of one run with the same kernel.cu for the same task and bottleneck (the
 * rule lint applies), or whose description and "When to apply" embed
 * nearly alike (cosine >= KB_SKILL_DUP_COSINE). Those two texts are
 * embedded here, without the skill's name and status: the stored chunks
 * carry the name in their heading, and two copies of one skill under two
 * names embed at about 0.9. */
#include "ingest/ingest_int.h"
#include "skills/skill.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* what one skill is compared by */
typedef struct {
    const kb_skill_ref *ref;
    char *name, *task, *bottleneck;
    char kernel[65];           /* "" when there is no kernel.cu */
    char *text;                /* description and "When to apply" */
} skill_sig;

static void sig_release(skill_sig *g)
{
    free(g->name);
    free(g->task);
    free(g->bottleneck);
    free(g->text);
}

/* g from its SKILL.md and the kernel.cu beside it; 0 when the skill does
 * not parse (skipped), 1 when g is filled, -1 out of memory */
static int load_sig(const kb_skill_ref *ref, skill_sig *g)
{
    memset(g, 0, sizeof *g);
    g->ref = ref;
    kb_skill s;
    kb_skill_init(&s);
    kb_err e;
    kb_err_clear(&e);
    if (kb_skill_load(ref->file, &s, NULL, &e) != KB_OK)
        return 0;
    const char *name = s.fields[KB_SKILL_NAME], *task = kb_skill_get(&s, "kb-task");
    const char *bn = kb_skill_get(&s, "kb-bottleneck");
    g->name = kb_strdup(name ? name : ref->path);
    g->task = task ? kb_strdup(task) : NULL;
    g->bottleneck = bn ? kb_strdup(bn) : NULL;
    int ok = g->name && (!task || g->task) && (!bn || g->bottleneck);
    const char *desc = s.fields[KB_SKILL_DESCRIPTION];
    const kb_skill_section *when = kb_skill_section_find(&s, "When to apply");
    kb_buf t;
    kb_buf_init(&t, 0);
    kb_rc rc = kb_buf_puts(&t, desc ? desc : "");
    if (rc == KB_OK && when)
        rc = kb_buf_puts(&t, "\n\n");
    if (rc == KB_OK && when)
        rc = kb_buf_append(&t, s.body + when->start, when->end - when->start);
    g->text = kb_buf_finish(&t, rc);
    ok = ok && g->text;
    const char *slash = strrchr(ref->file, '/');
    char *dir = slash ? kb_strndup(ref->file, (size_t)(slash - ref->file)) : kb_strdup(".");
    char *kernel = dir ? kb_path_join(dir, "kernel.cu") : NULL;
    ok = ok && kernel;
    if (kernel && kb_sha256_file(kernel, g->kernel, &e) != KB_OK)
        g->kernel[0] = '\0';   /* no kernel: compared by its text only */
    free(kernel);
    free(dir);
    kb_skill_release(&s);
    return ok ? 1 : -1;
}

static int same(const char *a, const char *b)
{
    return a ? b && strcmp(a, b) == 0 : !b;
}

static kb_rc add_dup(kb_ingest_stats *stats, const skill_sig *a, const skill_sig *b,
                     int same_kernel, double cosine, kb_err *err)
{
    kb_skill_dup *d = realloc(stats->dups, (stats->ndups + 1) * sizeof *d);
    if (!d)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    stats->dups = d;
    d += stats->ndups;
    memset(d, 0, sizeof *d);
    d->a = kb_strdup(a->name);
    d->b = kb_strdup(b->name);
    d->path_a = kb_strdup(a->ref->path);
    d->path_b = kb_strdup(b->ref->path);
    d->same_kernel = same_kernel;
    d->cosine = cosine;
    stats->ndups++;   /* released whole, even when a copy failed */
    if (!d->a || !d->b || !d->path_a || !d->path_b)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (same_kernel)
        kb_log_warn("skills '%s' and '%s' look like one: the same kernel.cu for "
                    "task '%s' and bottleneck '%s' (%s, %s)", a->name, b->name,
                    a->task ? a->task : "", a->bottleneck ? a->bottleneck : "",
                    a->ref->path, b->ref->path);
    else
        kb_log_warn("skills '%s' and '%s' look like one: their description and "
                    "'When to apply' embed at cosine %.3f (%s, %s)", a->name, b->name,
                    cosine, a->ref->path, b->ref->path);
    return KB_OK;
}

/* The texts' embeddings into *vecs (n x dim, normalised; caller frees). */
static kb_rc embed_texts(kb_embedder *emb, const skill_sig *g, size_t n,
                         float **vecs, size_t *dim, kb_err *err)
{
    *dim = (size_t)kb_embedder_dim(emb);
    const char **texts = calloc(n, sizeof *texts);
    *vecs = calloc(n * *dim, sizeof **vecs);
    if (!texts || !*vecs) {
        free(texts);
        free(*vecs);
        *vecs = NULL;
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        texts[i] = g[i].text;
    kb_rc rc = kb_embedder_embed(emb, texts, n, *vecs, err);
    for (size_t i = 0; rc == KB_OK && i < n; i++) {
        float *v = *vecs + i * *dim;
        double norm = 0;
        for (size_t k = 0; k < *dim; k++)
            norm += (double)v[k] * v[k];
        for (size_t k = 0; norm > 0 && k < *dim; k++)
            v[k] = (float)(v[k] / sqrt(norm));
    }
    free(texts);
    if (rc != KB_OK) {
        free(*vecs);
        *vecs = NULL;
    }
    return rc;
}

kb_rc kb_ingest_skill_dups(kb_embedder *emb, const kb_skill_ref *refs, size_t n,
                           kb_ingest_stats *stats, kb_err *err)
{
    if (n < 2)
        return KB_OK;
    skill_sig *g = calloc(n, sizeof *g);
    float *vecs = NULL;
    size_t ng = 0, dim = 0;
    kb_rc rc = g ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n && rc == KB_OK; i++) {
        int got = load_sig(&refs[i], &g[ng]);
        if (got < 0) {
            sig_release(&g[ng]);
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        } else if (got > 0) {
            ng++;
        }
    }
    if (rc == KB_OK && emb && ng > 1)
        rc = embed_texts(emb, g, ng, &vecs, &dim, err);
    for (size_t i = 0; i < ng && rc == KB_OK; i++)
        for (size_t j = i + 1; j < ng && rc == KB_OK; j++) {
            const skill_sig *a = &g[i], *b = &g[j];
            int kernel = *a->kernel && strcmp(a->kernel, b->kernel) == 0 &&
                         a->task && same(a->task, b->task) &&
                         same(a->bottleneck, b->bottleneck);
            double cos = -1;
            if (vecs) {
                const float *va = vecs + i * dim, *vb = vecs + j * dim;
                cos = 0;
                for (size_t k = 0; k < dim; k++)
                    cos += (double)va[k] * vb[k];
            }
            if (kernel || cos >= KB_SKILL_DUP_COSINE)
                rc = add_dup(stats, a, b, kernel, cos, err);
        }
    free(vecs);
    for (size_t i = 0; g && i < ng; i++)
        sig_release(&g[i]);
    free(g);
    return rc;
}
