/* fuse.c - reciprocal rank fusion of a query's candidate lists, at the
 * level of sections. */
#include "query/query_int.h"
#include "kb/kb_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Lexical mode ranks a section by its best chunk's BM25 plus this share
 * of its second best's (issue 13, item 7: a section's evidence is its
 * chunks'). Lexical nDCG@10 0.770 / 0.609 -> 0.773 / 0.639 on dev / dev2;
 * the sum of all other chunks, or the same in hybrid's lexical list or in
 * the vector list, lost on one set or both (BENCHMARKS.md). */
#define LEXICAL_SECOND_SHARE 0.15
/* ... counted only within the list's first this many hits, so that a
 * deeper list (a larger k once, a backfill pass) does not reorder the
 * sections it had: lexical nDCG@10 over lists of 240, 0.781 / 0.652 on
 * dev / dev2 counting all, 0.805 / 0.654 within 80 (0.808 / 0.653 within
 * 40, 0.805 / 0.649 within 120). On ingest version 6 (stubs joined),
 * share 0.1 within 80: 0.800 / 0.660; 0.15 within 30: 0.809 / 0.666
 * (0.12 within 30 0.809 / 0.664, 0.15 / 0.12 within 40 0.804 / 0.669 and
 * 0.804 / 0.667; within 20 or 50, or share 0.2, lower on one set). */
#define LEXICAL_SECOND_WITHIN 30

/* ------------------------------------------------------------ sections */

/* The sections of the chunks fusion has met, kept with the store until the
 * KB changes (as skills.c keeps the skills' chunks): lists 240 deep cost a
 * hybrid query some 480 statements, one a hit, when each query read them
 * again. A chunk's section is its document and heading path. */
#define SECTIONS_SLOT "query/sections"

typedef struct {
    int64_t id;
    uint64_t hash;          /* of key */
    char *key;              /* "DOCUMENT_ID:HEADING_PATH"; "" for a chunk gone */
} chunk_section;

typedef struct {
    chunk_section *items;   /* by id, ascending */
    size_t n;
    /* the KB they were read from, as in kb_skill_chunks */
    long long data_version, changes;
} section_map;

static void section_map_free(void *p)
{
    section_map *m = p;
    for (size_t i = 0; i < m->n; i++)
        free(m->items[i].key);
    free(m->items);
    free(m);
}

/* Where id is in m, or would go. */
static size_t section_at(const section_map *m, int64_t id)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->items[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int has_id(const section_map *m, int64_t id)
{
    size_t i = section_at(m, id);
    return i < m->n && m->items[i].id == id;
}

static int cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Reads the sections of ids (ascending, each once, none in m) into m,
 * which is left as it was on failure. */
static kb_rc section_map_add(kb_store *store, section_map *m, const int64_t *ids,
                             size_t n, kb_err *err)
{
    sqlite3_stmt *st = NULL;
    chunk_section *all = calloc(m->n + n, sizeof *all), *add = calloc(n, sizeof *add);
    kb_rc rc = all && add ? kb_store_prepare(store, "SELECT document_id || ':' ||"
                                             " heading_path FROM chunks WHERE id = ?", &st, err)
                          : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    for (size_t i = 0; rc == KB_OK && i < n; i++) {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, ids[i]);
        int step = sqlite3_step(st);
        const char *key = step == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : "";
        if (step != SQLITE_ROW && step != SQLITE_DONE)
            rc = kb_store_db_error(store, err, "read a chunk's section");
        else if (!key || !(add[i].key = kb_strdup(key)))
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        add[i].id = ids[i];
        add[i].hash = key ? kb_fnv1a(KB_FNV1A_INIT, key, strlen(key)) : 0;
    }
    sqlite3_finalize(st);
    if (rc != KB_OK) {
        for (size_t i = 0; add && i < n; i++)
            free(add[i].key);
        free(add);
        free(all);
        return rc;
    }
    /* the two sorted runs merged */
    size_t a = 0, b = 0, o = 0;
    while (a < m->n || b < n)
        all[o++] = b == n || (a < m->n && m->items[a].id < add[b].id) ? m->items[a++]
                                                                       : add[b++];
    free(m->items);
    free(add);
    m->items = all;
    m->n = o;
    return KB_OK;
}

/* The store's section map, current, holding every hit of lists: those not
 * met before are read now. Owned by the store. */
static kb_rc section_map_get(kb_store *store, const kb_query_list *lists, size_t nlists,
                             const section_map **out, kb_err *err)
{
    long long version = 0, changes = 0;
    kb_rc rc = kb_store_version(store, &version, &changes, err);
    if (rc != KB_OK)
        return rc;
    section_map *m = kb_store_slot_get(store, SECTIONS_SLOT);
    if (!m || m->data_version != version || m->changes != changes) {
        if (!(m = calloc(1, sizeof *m)))
            return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        m->data_version = version;
        m->changes = changes;
        if ((rc = kb_store_slot_set(store, SECTIONS_SLOT, m, section_map_free, err)) != KB_OK)
            return rc;
    }
    size_t total = 0, nmiss = 0;
    for (size_t l = 0; l < nlists; l++)
        total += lists[l].hits.n;
    int64_t *miss = malloc((total + 1) * sizeof *miss);
    if (!miss)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    for (size_t l = 0; l < nlists; l++)
        for (size_t i = 0; i < lists[l].hits.n; i++)
            if (!has_id(m, lists[l].hits.items[i].id))
                miss[nmiss++] = lists[l].hits.items[i].id;
    if (nmiss)
        qsort(miss, nmiss, sizeof *miss, cmp_id);
    size_t u = 0;   /* each once */
    for (size_t i = 0; i < nmiss; i++)
        if (!u || miss[u - 1] != miss[i])
            miss[u++] = miss[i];
    if (u)
        rc = section_map_add(store, m, miss, u, err);
    free(miss);
    *out = m;
    return rc;
}

/* A section met in a fusion: its key's hash first, for quick unequals. */
typedef struct {
    uint64_t hash;
    const char *key;
} section_ref;

/* The section of each hit, as a small integer shared by hits of the same
 * section, numbered as first met: results are merged by section, so
 * fusion counts a section once per list. */
static kb_rc section_ids(const section_map *m, const kb_hits *h, int *out,
                         section_ref **keys, size_t *nkeys, size_t *capkeys, kb_err *err)
{
    for (size_t i = 0; i < h->n; i++) {
        const chunk_section *c = &m->items[section_at(m, h->items[i].id)];
        size_t k = 0;
        while (k < *nkeys && ((*keys)[k].hash != c->hash || strcmp((*keys)[k].key, c->key)))
            k++;
        if (k == *nkeys) {
            if (KB_GROW(*keys, *nkeys + 1, *capkeys) != KB_OK)
                return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            (*keys)[(*nkeys)++] = (section_ref){ c->hash, c->key };
        }
        out[i] = (int)k;
    }
    return KB_OK;
}

/* ------------------------------------------------------------ fusion */

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
    section_ref *keys = NULL;
    size_t nkeys = 0, capkeys = 0;
    kb_hit *sec = NULL;   /* per section: best chunk, fused score, places */
    double *agg = NULL;   /* per section: its evidence in the list at hand */
    size_t *order = NULL; /* the list's sections, best first */
    const section_map *map = NULL;
    kb_rc rc = section_map_get(store, lists, nlists, &map, err);
    for (size_t l = 0; rc == KB_OK && l < nlists; l++) {
        ids[l] = calloc(lists[l].hits.n + 1, sizeof *ids[l]);
        rc = ids[l] ? section_ids(map, &lists[l].hits, ids[l], &keys, &nkeys, &capkeys, err)
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
    free(keys);
    free(sec);
    free(agg);
    free(order);
    for (size_t l = 0; l < nlists; l++)
        free(ids[l]);
    return rc;
}
