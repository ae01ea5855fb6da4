/* fuse.c - reciprocal rank fusion of a query's candidate lists, at the
 * level of sections. */
#include "query/query_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Lexical mode ranks a section by its best chunk's BM25 plus this share
 * of its second best's (issue 13, item 7: a section's evidence is its
 * chunks'). Lexical nDCG@10 0.770 / 0.609 -> 0.773 / 0.639 on dev / dev2;
 * the sum of all other chunks, or the same in hybrid's lexical list or in
 * the vector list, lost on one set or both (BENCHMARKS.md). */
#define LEXICAL_SECOND_SHARE 0.1
/* ... counted only within the list's first this many hits, so that a
 * deeper list (a larger k once, a backfill pass) does not reorder the
 * sections it had: lexical nDCG@10 over lists of 240, 0.781 / 0.652 on
 * dev / dev2 counting all, 0.805 / 0.654 within 80 (0.808 / 0.653 within
 * 40, 0.805 / 0.649 within 120). */
#define LEXICAL_SECOND_WITHIN 80

/* The section of each hit (document and heading path), as a small integer
 * shared by hits of the same section: results are merged by section, so
 * fusion counts a section once per list. */
static kb_rc section_ids(kb_store *store, const kb_hits *h, int *out, char ***keys,
                         size_t *nkeys, size_t *capkeys, kb_err *err)
{
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(store, "SELECT document_id || ':' || heading_path"
                                " FROM chunks WHERE id = ?", &st, err);
    for (size_t i = 0; rc == KB_OK && i < h->n; i++) {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, h->items[i].id);
        const char *key = sqlite3_step(st) == SQLITE_ROW
                              ? (const char *)sqlite3_column_text(st, 0) : "";
        size_t k = 0;
        while (k < *nkeys && strcmp((*keys)[k], key) != 0)
            k++;
        if (k == *nkeys) {
            if (KB_GROW(*keys, *nkeys + 1, *capkeys) != KB_OK ||
                !((*keys)[*nkeys] = kb_strdup(key))) {
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
                break;
            }
            (*nkeys)++;
        }
        out[i] = (int)k;
    }
    sqlite3_finalize(st);
    return rc;
}

/* One list's sections in the order of their evidence: a section scores
 * its best chunk's score plus share times its second-best chunk's in the
 * list; ties keep the list's order. order[o] is the list index of the
 * o-th section's best chunk; agg[k] section k's score (both sized by the
 * caller: the list's length, nkeys). */
static kb_rc section_order(const kb_hits *hits, const int *ids, size_t nkeys,
                           double share, double *agg, size_t *order, size_t *nsec,
                           kb_err *err)
{
    size_t *best = malloc((nkeys + 1) * sizeof *best);
    unsigned char *second = calloc(nkeys + 1, 1);
    if (!best || !second) {
        free(best);
        free(second);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    for (size_t k = 0; k < nkeys; k++)
        best[k] = SIZE_MAX;
    *nsec = 0;
    for (size_t i = 0; i < hits->n; i++) {
        size_t k = (size_t)ids[i];
        double s = hits->items[i].score;
        if (best[k] == SIZE_MAX) {   /* the list is best first */
            best[k] = i;
            agg[k] = s;
            order[(*nsec)++] = i;
        } else if (!second[k] && i < LEXICAL_SECOND_WITHIN) {
            second[k] = 1;
            agg[k] += share * s;
        }
    }
    /* insertion sort (stable) by the sections' scores */
    for (size_t o = 1; o < *nsec; o++) {
        size_t i = order[o];
        double s = agg[ids[i]];
        size_t j = o;
        while (j > 0 && agg[ids[order[j - 1]]] < s) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    free(best);
    free(second);
    return KB_OK;
}

/* Reciprocal rank fusion of the lists at the level of sections: each list
 * ranks sections by their best chunk, a section scores the sum over the
 * lists of w / (KB_RRF_K + rank) (w = 1 for a lexical list,
 * KB_RRF_VECTOR_WEIGHT for a vector one), and stands for its best chunk in
 * the first list that has it (the query's lexical list comes first). Its
 * lexical and vector places are its best places in the lists of each
 * kind. One list alone is ranked by section too, a lexical one by its
 * evidence (LEXICAL_SECOND_SHARE), and scores it. */
kb_rc kb_fuse_rrf(kb_store *store, const kb_query_list *lists, size_t nlists,
                  kb_hits *out, kb_err *err)
{
    int *ids[KB_QUERY_MAX_LISTS] = { 0 };   /* per list and hit: its section */
    char **keys = NULL;
    size_t nkeys = 0, capkeys = 0;
    kb_hit *sec = NULL;   /* per section: best chunk, fused score, places */
    double *agg = NULL;   /* per section: its evidence in the list at hand */
    size_t *order = NULL; /* the list's sections, best first */
    kb_rc rc = KB_OK;
    for (size_t l = 0; rc == KB_OK && l < nlists; l++) {
        ids[l] = calloc(lists[l].hits.n + 1, sizeof *ids[l]);
        rc = ids[l] ? section_ids(store, &lists[l].hits, ids[l], &keys, &nkeys,
                                  &capkeys, err)
                    : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    if (rc == KB_OK) {
        sec = calloc(nkeys + 1, sizeof *sec);
        agg = calloc(nkeys + 1, sizeof *agg);
        size_t longest = 0;
        for (size_t l = 0; l < nlists; l++)
            longest = lists[l].hits.n > longest ? lists[l].hits.n : longest;
        order = calloc(longest + 1, sizeof *order);
        if (!sec || !agg || !order)
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    for (size_t l = 0; rc == KB_OK && l < nlists; l++) {
        const kb_query_list *list = &lists[l];
        size_t nsec = 0;
        double share = nlists == 1 && !list->vector ? LEXICAL_SECOND_SHARE : 0;
        rc = section_order(&list->hits, ids[l], nkeys, share, agg, order, &nsec, err);
        for (size_t o = 0; rc == KB_OK && o < nsec; o++) {
            size_t i = order[o];
            size_t k = (size_t)ids[l][i];
            int rank = (int)o + 1;
            kb_hit *h = &sec[k];
            int *place = list->vector ? &h->vec_rank : &h->lex_rank;
            if (!*place || rank < *place) {
                *place = rank;
                *(list->vector ? &h->vec_score : &h->lex_score) = list->hits.items[i].score;
            }
            /* one list alone ranks by its own evidence */
            h->score += nlists == 1 ? agg[k]
                        : (list->vector ? KB_RRF_VECTOR_WEIGHT : 1.0) / (KB_RRF_K + rank);
            if (!h->id)
                h->id = list->hits.items[i].id;
        }
    }
    for (size_t k = 0; rc == KB_OK && k < nkeys; k++) {
        if (!sec[k].id)
            continue;
        if (kb_hits_push(out, sec[k].id, sec[k].score) != KB_OK)
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        else
            out->items[out->n - 1] = sec[k];
    }
    /* insertion sort (stable): the lists are short */
    for (size_t i = 1; rc == KB_OK && i < out->n; i++) {
        kb_hit h = out->items[i];
        size_t j = i;
        while (j > 0 && out->items[j - 1].score < h.score) {
            out->items[j] = out->items[j - 1];
            j--;
        }
        out->items[j] = h;
    }
    for (size_t k = 0; k < nkeys; k++)
        free(keys[k]);
    free(keys);
    free(sec);
    free(agg);
    free(order);
    for (size_t l = 0; l < nlists; l++)
        free(ids[l]);
    return rc;
}
