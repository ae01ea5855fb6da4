/* eval.c - retrieval evaluation: qrels files, the match rule, the metrics
 * (see index/index.h and shared/eval/README.md). */
#include "index/index.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define QRELS_MAX_BYTES (64u << 20)

/* ---------------------------------------------------------------- qrels */

static void judgment_release(kb_eval_judgment *j)
{
    free(j->source);
    free(j->heading);
    free(j->path);
    free(j->norm);
}

static void query_release(kb_eval_query *q)
{
    free(q->id);
    free(q->text);
    free(q->kind);
    for (size_t i = 0; i < q->nrel; i++)
        judgment_release(&q->rel[i]);
    free(q->rel);
}

void kb_eval_qrels_release(kb_eval_qrels *q)
{
    if (!q)
        return;
    for (size_t i = 0; i < q->n; i++)
        query_release(&q->queries[i]);
    free(q->queries);
    q->queries = NULL;
    q->n = 0;
}

/* A non-empty string member of obj, or NULL. */
static const char *member_string(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsString(v) || !v->valuestring || !*v->valuestring)
        return NULL;
    return v->valuestring;
}

static kb_rc parse_judgment(const cJSON *jv, const char *name,
                            const kb_eval_query *q, size_t idx,
                            kb_eval_judgment *j, kb_err *err)
{
    if (!cJSON_IsObject(jv))
        return kb_err_set(err, KB_ERR_PARSE,
                          "'%s': judgment %zu of query '%s' is not an object",
                          name, idx + 1, q->id);
    const char *source = member_string(jv, "source");
    const char *heading = member_string(jv, "heading");
    const char *path = member_string(jv, "path");
    if (!source)
        return kb_err_set(err, KB_ERR_PARSE,
                          "'%s': judgment %zu of query '%s' has no 'source'",
                          name, idx + 1, q->id);
    if (!heading && !path)
        return kb_err_set(err, KB_ERR_PARSE,
                          "'%s': judgment %zu of query '%s' has neither "
                          "'heading' nor 'path'", name, idx + 1, q->id);
    if (heading && path)
        return kb_err_set(err, KB_ERR_PARSE,
                          "'%s': judgment %zu of query '%s' has both "
                          "'heading' and 'path'", name, idx + 1, q->id);
    j->source = kb_strdup(source);
    if (heading) {
        j->heading = kb_strdup(heading);
        j->norm = kb_eval_normalize_heading(heading);
        if (j->norm && !*j->norm)
            return kb_err_set(err, KB_ERR_PARSE,
                              "'%s': judgment %zu of query '%s' has a blank "
                              "'heading'", name, idx + 1, q->id);
    } else {
        j->path = kb_strdup(path);
    }
    if (!j->source || (heading && (!j->heading || !j->norm)) ||
        (path && !j->path))
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return KB_OK;
}

static kb_rc parse_query(const cJSON *qv, const char *name, size_t idx,
                         kb_eval_query *q, kb_err *err)
{
    kb_buf id;
    kb_buf_init(&id, 0);
    if (!cJSON_IsObject(qv))
        return kb_err_set(err, KB_ERR_PARSE, "'%s': query %zu is not an object",
                          name, idx + 1);
    const cJSON *idv = cJSON_GetObjectItemCaseSensitive(qv, "id");
    kb_rc rc = KB_OK;
    if (cJSON_IsString(idv) && idv->valuestring && *idv->valuestring)
        rc = kb_buf_puts(&id, idv->valuestring);
    else if (cJSON_IsNumber(idv))
        rc = kb_buf_printf(&id, "%g", idv->valuedouble);
    else
        rc = kb_buf_printf(&id, "#%zu", idx + 1);
    if (rc != KB_OK) {
        kb_buf_release(&id);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    q->id = kb_buf_detach(&id);

    const char *text = member_string(qv, "query");
    if (!text)
        return kb_err_set(err, KB_ERR_PARSE,
                          "'%s': query %zu ('%s') has no 'query' text", name,
                          idx + 1, q->id);
    const char *kind = member_string(qv, "kind");
    q->text = kb_strdup(text);
    q->kind = kb_strdup(kind ? kind : "none");
    if (!q->text || !q->kind)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");

    const cJSON *rel = cJSON_GetObjectItemCaseSensitive(qv, "relevant");
    if (!cJSON_IsArray(rel))
        return kb_err_set(err, KB_ERR_PARSE,
                          "'%s': query %zu ('%s') has no 'relevant' list",
                          name, idx + 1, q->id);
    int nrel = cJSON_GetArraySize(rel);
    if (nrel <= 0)
        return kb_err_set(err, KB_ERR_PARSE,
                          "'%s': query %zu ('%s') has an empty 'relevant' list",
                          name, idx + 1, q->id);
    q->rel = calloc((size_t)nrel, sizeof *q->rel);
    if (!q->rel)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    const cJSON *jv;
    cJSON_ArrayForEach(jv, rel) {
        /* count before parsing so a failure releases what was set */
        kb_eval_judgment *j = &q->rel[q->nrel++];
        rc = parse_judgment(jv, name, q, q->nrel - 1, j, err);
        if (rc != KB_OK)
            return rc;
    }
    return KB_OK;
}

kb_rc kb_eval_qrels_parse(const char *json, size_t len, const char *name,
                          kb_eval_qrels *out, kb_err *err)
{
    out->queries = NULL;
    out->n = 0;
    kb_rc rc = KB_OK;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root) {
        size_t line = 1, col = 1;
        const char *stop = end && end >= json && end <= json + len ? end
                                                                  : json + len;
        for (const char *p = json; p < stop; p++) {
            if (*p == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        return kb_err_set(err, KB_ERR_PARSE,
                          "cannot parse '%s': not valid JSON (line %zu, "
                          "column %zu)", name, line, col);
    }
    const cJSON *queries = cJSON_IsArray(root)
        ? root : cJSON_GetObjectItemCaseSensitive(root, "queries");
    if (!cJSON_IsArray(queries)) {
        rc = kb_err_set(err, KB_ERR_PARSE, "'%s': no 'queries' list", name);
        goto out;
    }
    int nq = cJSON_GetArraySize(queries);
    if (nq <= 0) {
        rc = kb_err_set(err, KB_ERR_PARSE, "'%s': the 'queries' list is empty",
                        name);
        goto out;
    }
    out->queries = calloc((size_t)nq, sizeof *out->queries);
    if (!out->queries) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    const cJSON *qv;
    cJSON_ArrayForEach(qv, queries) {
        kb_eval_query *q = &out->queries[out->n++];
        rc = parse_query(qv, name, out->n - 1, q, err);
        if (rc != KB_OK)
            goto out;
    }
out:
    cJSON_Delete(root);
    if (rc != KB_OK)
        kb_eval_qrels_release(out);
    return rc;
}

kb_rc kb_eval_qrels_load(const char *path, kb_eval_qrels *out, kb_err *err)
{
    out->queries = NULL;
    out->n = 0;
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = kb_read_file(path, QRELS_MAX_BYTES, &b, err);
    if (rc == KB_OK)
        rc = kb_eval_qrels_parse(b.data ? b.data : "", b.len, path, out, err);
    kb_buf_release(&b);
    return rc;
}

/* ---------------------------------------------------------------- match */

static int is_space_cp(utf8proc_int32_t c)
{
    if (c == ' ' || (c >= '\t' && c <= '\r'))
        return 1;
    if (c < 0x80)
        return 0;
    utf8proc_category_t cat = utf8proc_category(c);
    return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL ||
           cat == UTF8PROC_CATEGORY_ZP;
}

/* Appends s with white-space runs collapsed to one space and the ends
 * trimmed. s is valid UTF-8 when utf8 is set, else taken byte by byte. */
static kb_rc collapse_space(const char *s, int utf8, kb_buf *out)
{
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s;
    int pending = 0;
    kb_rc rc = KB_OK;
    while (*p && rc == KB_OK) {
        utf8proc_int32_t c = *p;
        utf8proc_ssize_t n = 1;
        if (utf8 && *p >= 0x80) {
            n = utf8proc_iterate(p, -1, &c);
            if (n <= 0) {       /* cannot happen after utf8proc_map */
                c = *p;
                n = 1;
            }
        }
        if (is_space_cp(c)) {
            pending = out->len > 0;
        } else {
            if (pending)
                rc = kb_buf_putc(out, ' ');
            pending = 0;
            if (rc == KB_OK)
                rc = kb_buf_append(out, p, (size_t)n);
        }
        p += n;
    }
    return rc;
}

/* Length of a leading section number of s ("9.7.9.25. ", "18.2.3 ", "4. ")
 * including the space after it; 0 when s does not start with one or when
 * the number is all there is. Digits glued to text ("2D", "64-bit", "8.x",
 * "1.5x") are no section number. */
static size_t section_number_len(const char *s)
{
    const char *p = s;
    if (!isdigit((unsigned char)*p))
        return 0;
    while (isdigit((unsigned char)*p))
        p++;
    while (p[0] == '.' && isdigit((unsigned char)p[1])) {
        p++;
        while (isdigit((unsigned char)*p))
            p++;
    }
    if (*p == '.')
        p++;
    if (*p != ' ' || p[1] == '\0')
        return 0;
    return (size_t)(p + 1 - s);
}

char *kb_eval_normalize_heading(const char *heading)
{
    utf8proc_uint8_t *folded = NULL;
    utf8proc_ssize_t n = utf8proc_map(
        (const utf8proc_uint8_t *)(heading ? heading : ""), 0, &folded,
        UTF8PROC_NULLTERM | UTF8PROC_STABLE | UTF8PROC_COMPOSE |
        UTF8PROC_CASEFOLD);
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc;
    if (n >= 0) {
        rc = collapse_space((const char *)folded, 1, &b);
    } else {
        /* not UTF-8: fold ASCII only, keep the other bytes as they are */
        rc = collapse_space(heading ? heading : "", 0, &b);
        for (size_t i = 0; i < b.len; i++)
            b.data[i] = (char)tolower((unsigned char)b.data[i]);
    }
    free(folded);
    if (rc != KB_OK) {
        kb_buf_release(&b);
        return NULL;
    }
    char *s = kb_buf_detach(&b);
    size_t skip = section_number_len(s);
    if (skip)
        memmove(s, s + skip, strlen(s + skip) + 1);
    return s;
}

/* The match rule, with the result's heading-path entries normalised
 * already (norms[0..r->depth), entries may be NULL). */
static int matches_norm(const kb_eval_judgment *j, const kb_result *r,
                        char *const *norms)
{
    if (!r->source || strcmp(r->source, j->source) != 0)
        return 0;
    if (j->path)
        return r->path && strstr(r->path, j->path) != NULL;
    for (size_t i = 0; i < r->depth; i++)
        if (norms[i] && strstr(norms[i], j->norm))
            return 1;
    return 0;
}

static void norms_free(char **norms, size_t n)
{
    if (!norms)
        return;
    for (size_t i = 0; i < n; i++)
        free(norms[i]);
    free(norms);
}

/* The normalised heading-path entries of r (freed with norms_free), or
 * NULL on no memory. An entry that is NULL stays NULL. */
static char **norms_of(const kb_result *r)
{
    char **norms = calloc(r->depth ? r->depth : 1, sizeof *norms);
    if (!norms)
        return NULL;
    for (size_t i = 0; i < r->depth; i++) {
        if (!r->heading_path || !r->heading_path[i])
            continue;
        norms[i] = kb_eval_normalize_heading(r->heading_path[i]);
        if (!norms[i]) {
            norms_free(norms, r->depth);
            return NULL;
        }
    }
    return norms;
}

int kb_eval_judgment_matches(const kb_eval_judgment *j, const kb_result *r)
{
    char **norms = norms_of(r);
    int m = norms && matches_norm(j, r, norms);
    norms_free(norms, r->depth);
    return m;
}

int kb_eval_result_relevant(const kb_eval_query *q, const kb_result *r)
{
    char **norms = norms_of(r);
    int m = 0;
    for (size_t i = 0; norms && i < q->nrel && !m; i++)
        m = matches_norm(&q->rel[i], r, norms);
    norms_free(norms, r->depth);
    return m;
}

/* ---------------------------------------------------------------- metrics */

kb_rc kb_eval_score(const kb_eval_query *q, const kb_result *results,
                    size_t n, int k, kb_eval_scores *out)
{
    memset(out, 0, sizeof *out);
    if (k < 1)
        k = 1;
    size_t top = n < (size_t)k ? n : (size_t)k;
    unsigned char *seen = calloc(q->nrel ? q->nrel : 1, 1);
    if (!seen)
        return KB_ERR_NOMEM;
    double dcg = 0;
    for (size_t i = 0; i < top; i++) {
        char **norms = norms_of(&results[i]);
        if (!norms) {
            free(seen);
            return KB_ERR_NOMEM;
        }
        int relevant = 0, gain = 0;
        for (size_t j = 0; j < q->nrel; j++) {
            if (!matches_norm(&q->rel[j], &results[i], norms))
                continue;
            relevant = 1;
            if (!seen[j]) {
                seen[j] = 1;
                gain = 1;
                out->matched++;
            }
        }
        norms_free(norms, results[i].depth);
        if (relevant && !out->first_rank)
            out->first_rank = (int)i + 1;
        if (gain)
            dcg += 1.0 / log2((double)i + 2.0);
    }
    free(seen);
    double idcg = 0;
    size_t ideal = q->nrel < (size_t)k ? q->nrel : (size_t)k;
    for (size_t i = 0; i < ideal; i++)
        idcg += 1.0 / log2((double)i + 2.0);
    out->ndcg = idcg > 0 ? dcg / idcg : 0;
    out->recall = q->nrel ? (double)out->matched / (double)q->nrel : 0;
    out->success = out->first_rank ? 1.0 : 0.0;
    out->mrr = out->first_rank ? 1.0 / out->first_rank : 0;
    return KB_OK;
}

static void mean_add(kb_eval_mean *m, const kb_eval_scores *s)
{
    m->n++;
    m->ndcg += s->ndcg;
    m->recall += s->recall;
    m->success += s->success;
    m->mrr += s->mrr;
}

static void mean_finish(kb_eval_mean *m)
{
    if (!m->n)
        return;
    double d = (double)m->n;
    m->ndcg /= d;
    m->recall /= d;
    m->success /= d;
    m->mrr /= d;
}

kb_rc kb_eval_summarize(const kb_eval_qrels *qrels,
                        const kb_eval_scores *scores,
                        kb_eval_summary *out, kb_err *err)
{
    memset(out, 0, sizeof *out);
    size_t cap = 0;   /* of by_kind, filled here alone */
    for (size_t i = 0; i < qrels->n; i++) {
        const char *kind = qrels->queries[i].kind;
        size_t at = 0;
        while (at < out->nkinds && strcmp(out->by_kind[at].kind, kind) != 0)
            at++;
        if (at == out->nkinds) {
            if (KB_GROW(out->by_kind, out->nkinds + 1, cap) != KB_OK)
                goto nomem;
            kb_eval_mean *p = out->by_kind;
            memset(&p[at], 0, sizeof p[at]);
            p[at].kind = kb_strdup(kind);
            out->nkinds++;
            if (!p[at].kind)
                goto nomem;
        }
        mean_add(&out->overall, &scores[i]);
        mean_add(&out->by_kind[at], &scores[i]);
    }
    mean_finish(&out->overall);
    for (size_t i = 0; i < out->nkinds; i++)
        mean_finish(&out->by_kind[i]);
    return KB_OK;
nomem:
    kb_eval_summary_release(out);
    return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
}

void kb_eval_summary_release(kb_eval_summary *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nkinds; i++)
        free(s->by_kind[i].kind);
    free(s->by_kind);
    s->by_kind = NULL;
    s->nkinds = 0;
}
