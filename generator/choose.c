/* choose.c - the llm relevance stage chooses a prompt's doc passages
 * (gen.h, "choose.c"): the candidates retrieval found for the task's
 * topics go to the stage's one listwise request (query/rerank_llm.c: the
 * same prompt, parser, timeout and cache as kb query --rerank llm), with
 * the task as the question; the passages its reply names stay, in its
 * order. */
#include "generator/gen.h"
#include "verify/verify.h"
#include "kb/kb_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The question the stage is asked: what the kernel is, its types and the
 * device it runs on. Caller frees; NULL out of memory. */
static char *question_of(const kb_task *t, const cJSON *device)
{
    char arch[16];
    int cc = 0;
    kb_gen_device_arch(device, arch, &cc);
    const char *dev = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(device, "name"));
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = kb_buf_printf(&b, "Which passages help an engineer write a fast CUDA kernel "
                             "for this task? %s: %s (ops: %s; data type %s", t->name,
                             t->description ? t->description : "", t->ops ? t->ops : "",
                             kb_dtype_name(t->dtype));
    if (rc == KB_OK && (dev || *arch))
        rc = kb_buf_printf(&b, "; on %s%s%s%s", dev ? dev : "", dev && *arch ? ", " : "",
                           arch, "");
    if (rc == KB_OK)
        rc = kb_buf_puts(&b, ")");
    return kb_buf_finish(&b, rc);
}

kb_rc kb_gen_choose(const kb_gen_prompt_opts *o, const kb_task *t, kb_gen_passages *ps,
                    size_t start, const size_t *own, size_t nown, size_t max, size_t *pick,
                    size_t *npick, kb_err *err)
{
    size_t n = ps->n - start, norder = 0;
    *npick = 0;
    int64_t *ids = calloc(n, sizeof *ids);
    size_t *order = calloc(n, sizeof *order);
    char *q = question_of(t, o->device);
    kb_rc rc = ids && order && q ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    for (size_t i = 0; rc == KB_OK && i < n; i++)
        ids[i] = (int64_t)ps->items[start + i].cite.chunk_id;
    if (rc == KB_OK) {
        ps->chose = 1;
        rc = kb_query_llm_order(o->store, o->config, NULL, q, ids, n, order, &norder,
                                &ps->choice, err);
    }
    for (size_t i = 0; rc == KB_OK && i < norder && *npick < max; i++)
        pick[(*npick)++] = start + order[i];
    for (size_t i = 0; rc == KB_OK && !norder && i < nown && i < max; i++)
        pick[(*npick)++] = own[i];   /* a fallback: kb's own picks */
    if (rc == KB_OK)
        kb_log_debug("prompt for '%s': %zu of %zu candidate passages chosen%s%s", t->name,
                     *npick, n, ps->choice.fallback[0] ? ", kb's own: " : " by the llm",
                     ps->choice.fallback);
    free(q);
    free(order);
    free(ids);
    return rc;
}

int kb_gen_can_choose(const kb_config *config)
{
    return config && config->llm_url && *config->llm_url && config->rerank &&
           !strcmp(config->rerank, "llm");
}
