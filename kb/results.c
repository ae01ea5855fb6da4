/* results.c - the lifecycle of the query's value types (kb/kb.h, "query"):
 * options and results are kb's common currency, so their init and release
 * live on the ground floor, where every room that holds one can free it. */
#include "kb/kb_int.h"

#include <stdlib.h>
#include <string.h>

void kb_query_opts_init(kb_query_opts *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->mode = KB_MODE_HYBRID;
    opts->k = 10;
}

void kb_result_release(kb_result *r)
{
    free(r->source);
    free(r->title);
    for (size_t i = 0; i < r->depth; i++)
        free(r->heading_path[i]);
    free(r->heading_path);
    free(r->url);
    free(r->path);
    free(r->text);
    free(r->version);
    for (size_t i = 0; i < r->nsimilar; i++)
        kb_result_release(&r->similar[i]);
    free(r->similar);
}

/* Frees the results themselves; the mode and the timings stay. */
void kb_results_clear(kb_results *r)
{
    for (size_t i = 0; i < r->n; i++)
        kb_result_release(&r->items[i]);
    free(r->items);
    r->items = NULL;
    r->n = 0;
    for (size_t i = 0; i < r->nskills; i++)
        kb_result_release(&r->skills[i]);
    free(r->skills);
    r->skills = NULL;
    r->nskills = 0;
}

void kb_results_release(kb_results *r)
{
    kb_results_clear(r);
    memset(r, 0, sizeof *r);
}
