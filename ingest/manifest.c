/* manifest.c - corpus/sources.json: the documents kb ingests. */
#include "ingest/ingest_int.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MANIFEST_MAX_BYTES (16u << 20)

static char *json_string(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return kb_strdup(cJSON_IsString(v) ? v->valuestring : "");
}

/* Source ids name documents in results and on the command line: keep them
 * to a safe alphabet. */
static int valid_id(const char *id)
{
    if (!*id || strlen(id) > 64)
        return 0;
    for (const char *p = id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.'))
            return 0;
    return 1;
}

/* The array of relative paths obj[key] (absent: none) into *out, *n
 * (released with the manifest): strings, not empty, not absolute, no
 * "..". */
static kb_rc relative_paths(const cJSON *obj, const char *key, const char *path,
                            const char *id, char ***out, size_t *n, kb_err *err)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (a && !cJSON_IsArray(a))
        return kb_err_set(err, KB_ERR_PARSE, "'%s': \"%s\" of source '%s' is not an "
                          "array", path, key, id);
    size_t na = a ? (size_t)cJSON_GetArraySize(a) : 0;
    *out = calloc(na ? na : 1, sizeof **out);
    if (!*out)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    const cJSON *p;
    cJSON_ArrayForEach(p, a) {
        if (!cJSON_IsString(p) || !*p->valuestring ||
            strstr(p->valuestring, "..") || p->valuestring[0] == '/')
            return kb_err_set(err, KB_ERR_PARSE, "'%s': source '%s' has a bad %s path",
                              path, id, key);
        if (!((*out)[*n] = kb_strdup(p->valuestring)))
            return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        (*n)++;
    }
    return KB_OK;
}

kb_rc kb_manifest_load(const char *path, kb_manifest *m, kb_err *err)
{
    memset(m, 0, sizeof *m);
    kb_buf raw;
    kb_buf_init(&raw, 0);
    cJSON *root = NULL;
    kb_rc rc = kb_read_file(path, MANIFEST_MAX_BYTES, &raw, err);
    if (rc != KB_OK)
        goto out;
    root = cJSON_ParseWithLength(raw.data, raw.len);
    if (!root) {
        rc = kb_err_set(err, KB_ERR_PARSE, "'%s' is not valid JSON (near byte %ld)",
                        path, (long)(cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - raw.data : 0));
        goto out;
    }
    const cJSON *sources = cJSON_GetObjectItemCaseSensitive(root, "sources");
    if (!cJSON_IsArray(sources)) {
        rc = kb_err_set(err, KB_ERR_PARSE, "'%s' has no \"sources\" array", path);
        goto out;
    }
    size_t n = (size_t)cJSON_GetArraySize(sources);
    m->path = kb_strdup(path);
    m->sources = calloc(n ? n : 1, sizeof *m->sources);
    if (!m->sources || !m->path) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    const cJSON *s;
    cJSON_ArrayForEach(s, sources) {
        size_t i = m->n;
        if (!cJSON_IsObject(s)) {
            rc = kb_err_set(err, KB_ERR_PARSE, "'%s': source %zu is not an object",
                            path, i + 1);
            goto out;
        }
        kb_source *src = &m->sources[m->n++];
        src->id = json_string(s, "id");
        src->title = json_string(s, "title");
        src->url = json_string(s, "url");
        src->files_url = json_string(s, "files_url");
        src->fetch_url = json_string(s, "fetch_url");
        src->format = json_string(s, "format");
        src->version = json_string(s, "version");
        if (!valid_id(src->id)) {
            rc = kb_err_set(err, KB_ERR_PARSE,
                            "'%s': source %zu has a missing or invalid \"id\" ('%s')",
                            path, i + 1, src->id);
            goto out;
        }
        if (kb_manifest_find(m, src->id) != src) {
            rc = kb_err_set(err, KB_ERR_PARSE, "'%s': source id '%s' appears twice",
                            path, src->id);
            goto out;
        }
        if ((rc = relative_paths(s, "mirror", path, src->id, &src->mirror,
                                 &src->nmirror, err)) != KB_OK ||
            (rc = relative_paths(s, "local", path, src->id, &src->local,
                                 &src->nlocal, err)) != KB_OK)
            goto out;
        if (src->nlocal && (src->nmirror || *src->url)) {
            rc = kb_err_set(err, KB_ERR_PARSE, "'%s': source '%s' has \"local\" and "
                            "also \"%s\": a local source is read from disk only",
                            path, src->id, src->nmirror ? "mirror" : "url");
            goto out;
        }
        if (!*src->url && src->nmirror == 0 && src->nlocal == 0) {
            rc = kb_err_set(err, KB_ERR_PARSE,
                            "'%s': source '%s' has neither \"url\", \"mirror\" nor "
                            "\"local\"", path, src->id);
            goto out;
        }
    }
out:
    cJSON_Delete(root);
    kb_buf_release(&raw);
    if (rc != KB_OK)
        kb_manifest_release(m);
    return rc;
}

void kb_manifest_release(kb_manifest *m)
{
    for (size_t i = 0; i < m->n; i++) {
        kb_source *s = &m->sources[i];
        free(s->id);
        free(s->title);
        free(s->url);
        free(s->files_url);
        free(s->fetch_url);
        free(s->format);
        free(s->version);
        for (size_t j = 0; j < s->nmirror; j++)
            free(s->mirror[j]);
        free(s->mirror);
        for (size_t j = 0; j < s->nlocal; j++)
            free(s->local[j]);
        free(s->local);
    }
    free(m->sources);
    free(m->path);
    memset(m, 0, sizeof *m);
}

const kb_source *kb_manifest_find(const kb_manifest *m, const char *id)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->sources[i].id && strcmp(m->sources[i].id, id) == 0)
            return &m->sources[i];
    return NULL;
}

char *kb_manifest_path(const kb_config *cfg, const char *kb_dir)
{
    char *path = kb_store_data_find(cfg, kb_dir, "sources.json");
    /* none anywhere: the usual place, for the message that names it */
    return path ? path : kb_strdup("corpus/sources.json");
}
