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
        const cJSON *mirror = cJSON_GetObjectItemCaseSensitive(s, "mirror");
        if (mirror && !cJSON_IsArray(mirror)) {
            rc = kb_err_set(err, KB_ERR_PARSE,
                            "'%s': \"mirror\" of source '%s' is not an array",
                            path, src->id);
            goto out;
        }
        size_t nm = mirror ? (size_t)cJSON_GetArraySize(mirror) : 0;
        src->mirror = calloc(nm ? nm : 1, sizeof *src->mirror);
        const cJSON *p;
        cJSON_ArrayForEach(p, mirror) {
            if (!cJSON_IsString(p) || !*p->valuestring ||
                strstr(p->valuestring, "..") || p->valuestring[0] == '/') {
                rc = kb_err_set(err, KB_ERR_PARSE,
                                "'%s': source '%s' has a bad mirror path", path,
                                src->id);
                goto out;
            }
            src->mirror[src->nmirror++] = kb_strdup(p->valuestring);
        }
        if (!*src->url && src->nmirror == 0) {
            rc = kb_err_set(err, KB_ERR_PARSE,
                            "'%s': source '%s' has neither \"url\" nor \"mirror\"",
                            path, src->id);
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

/* KB_MANIFEST is the caller's (kb_config's manifest), not looked at here. */
char *kb_manifest_default_path(void)
{
    if (access("corpus/sources.json", R_OK) == 0)
        return kb_strdup("corpus/sources.json");
    /* an installed kb: PREFIX/bin/kb reads PREFIX/share/kb/sources.json */
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char *path = kb_path_join(exe, "../share/kb/sources.json");
            if (path && access(path, R_OK) == 0)
                return path;
            free(path);
        }
    }
    return kb_strdup("corpus/sources.json");
}
