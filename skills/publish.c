/* publish.c - the skill library as served (skill.h, "publish.c"): each
 * file of each skill folder read once, its SHA-256 and size taken, and
 * served from memory, so that what resources/read returns is always the
 * bytes the digest was made of; and the JSON forms MCP's Skills extension
 * gives of it. */
#include "skills/skill.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <openssl/evp.h>
#include <utf8proc.h>

/* The Skills extension's limits per skill: every conforming host takes
 * this much, so kb serves no more. */
#define FILES_MAX KB_SKILL_FILES_MAX
#define BYTES_MAX KB_SKILL_BYTES_MAX

static void file_release(kb_skill_pub_file *f)
{
    free(f->uri);
    free(f->name);
    free(f->data);
    memset(f, 0, sizeof *f);
}

static void skill_release(kb_skill_pub_skill *s)
{
    for (size_t i = 0; i < s->nfiles; i++)
        file_release(&s->files[i]);
    free(s->files);
    free(s->name);
    free(s->description);
    cJSON_Delete(s->frontmatter);
    memset(s, 0, sizeof *s);
}

void kb_skill_pub_free(kb_skill_pub *lib)
{
    if (!lib)
        return;
    for (size_t i = 0; i < lib->n; i++)
        skill_release(&lib->items[i]);
    free(lib->items);
    free(lib->dir);
    free(lib);
}

/* 1 if data[0..len) is UTF-8 text without NUL: served as text, else as
 * a base64 blob. */
static int is_text(const unsigned char *data, size_t len)
{
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate(data + i, (utf8proc_ssize_t)(len - i), &c);
        if (k <= 0 || c == 0)
            return 0;
        i += (size_t)k;
    }
    return 1;
}

static const char *mime_of(const char *name, int text)
{
    const char *dot = strrchr(name, '.');
    if (strcmp(name, "SKILL.md") == 0 || (dot && strcmp(dot, ".md") == 0))
        return "text/markdown";
    if (dot && strcmp(dot, ".json") == 0)
        return "application/json";
    if (dot && (strcmp(dot, ".cu") == 0 || strcmp(dot, ".cuh") == 0))
        return "text/x-cuda";
    return text ? "text/plain" : "application/octet-stream";
}

/* SKILL.md first, then by name. */
static int cmp_files(const void *a, const void *b)
{
    const kb_skill_pub_file *x = a, *y = b;
    int xs = strcmp(x->name, "SKILL.md") == 0, ys = strcmp(y->name, "SKILL.md") == 0;
    if (xs != ys)
        return ys - xs;
    return strcmp(x->name, y->name);
}

/* Reads the files at the top of the skill's folder that the library's rule
 * lets be read (skills/files.c: a link only into the repository - a seed
 * skill's kernel.cu is a link to the candidate it was verified as; hidden
 * names, kb's temp files among them, left out) into s. */
static kb_rc read_files(const kb_skill_entry *e, kb_skill_pub_skill *s, kb_err *err)
{
    size_t cap = 0, total = 0;
    kb_rc rc = KB_OK;
    for (size_t i = 0; rc == KB_OK && i < e->files.n; i++) {
        const kb_skill_file *x = &e->files.items[i];
        if (x->dir || strchr(x->rel, '/'))
            continue;
        if (s->nfiles == FILES_MAX || total + x->size > BYTES_MAX)
            return kb_err_set(err, KB_ERR_USAGE, "skill '%s' is over the Skills "
                              "extension's limits (%d files, %u bytes)", s->name,
                              FILES_MAX, BYTES_MAX);
        if (KB_GROW(s->files, s->nfiles + 1, cap) != KB_OK)
            return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        kb_buf b;
        kb_buf_init(&b, BYTES_MAX);
        rc = kb_read_file(x->path, BYTES_MAX - total, &b, err);
        if (rc == KB_OK) {
            kb_skill_pub_file *f = &s->files[s->nfiles];
            memset(f, 0, sizeof *f);
            f->size = b.len;
            f->text = is_text((const unsigned char *)b.data, b.len);
            f->mime = mime_of(x->rel, f->text);
            kb_sha256_hex(b.len ? b.data : "", b.len, f->sha256);
            f->name = kb_strdup(x->rel);
            f->data = kb_buf_finish(&b, KB_OK);
            kb_buf_init(&b, 0);
            size_t n = strlen(s->name) + strlen(x->rel) + 16;
            if ((f->uri = malloc(n)) != NULL)
                snprintf(f->uri, n, "skill://%s/%s", s->name, x->rel);
            s->nfiles++;
            total += f->size;
            if (!f->name || !f->data || !f->uri)
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        }
        kb_buf_release(&b);
    }
    if (rc == KB_OK)
        qsort(s->files, s->nfiles, sizeof *s->files, cmp_files);
    return rc;
}

/* The front matter as JSON, every key the author wrote: the strings as
 * they are, metadata as an object of strings. */
static cJSON *frontmatter(const kb_skill *k)
{
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL;
    for (int i = 0; ok && i < KB_SKILL_NKEYS; i++) {
        if (i == KB_SKILL_METADATA) {
            if (!k->has_metadata)
                continue;
            cJSON *m = cJSON_AddObjectToObject(o, "metadata");
            ok = m != NULL;
            for (size_t j = 0; ok && j < k->nmeta; j++)
                ok = cJSON_AddStringToObject(m, k->meta[j].key, k->meta[j].value) != NULL;
        } else if (k->fields[i]) {
            ok = cJSON_AddStringToObject(o, kb_skill_key_name((kb_skill_key)i),
                                         k->fields[i]) != NULL;
        }
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

kb_rc kb_skill_pub_load(const char *dir, kb_skill_pub **out, kb_err *err)
{
    *out = NULL;
    kb_skill_pub *lib = calloc(1, sizeof *lib);
    if (!lib || !(lib->dir = kb_strdup(dir))) {
        free(lib);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    kb_skill_lib sl;
    kb_skill_lib_init(&sl);
    kb_skill_diags d;
    kb_skill_diags_init(&d);
    size_t cap = 0;
    kb_rc rc = kb_skill_lib_load(dir, &sl, &d, err);
    for (size_t i = 0; rc == KB_OK && i < sl.n; i++) {
        const kb_skill_entry *e = &sl.items[i];
        const char *name = e->ok ? e->skill.fields[KB_SKILL_NAME] : NULL;
        if (!name || !kb_skill_name_ok(name) || !e->skill.fields[KB_SKILL_DESCRIPTION]) {
            /* a skill that does not parse, or is over the limits, is not
             * served: kb skill lint says why */
            kb_log_warn("skills: '%s' is not served: %s (kb skill lint %s)", e->dir,
                        e->files.over ? "it is over the limits or its folder is refused"
                                      : "its SKILL.md does not parse or lacks a valid "
                                        "name", e->dir);
            continue;
        }
        if (KB_GROW(lib->items, lib->n + 1, cap) != KB_OK) {
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            break;
        }
        kb_skill_pub_skill *s = &lib->items[lib->n++];
        memset(s, 0, sizeof *s);
        s->name = kb_strdup(name);
        s->description = kb_strdup(e->skill.fields[KB_SKILL_DESCRIPTION]);
        s->frontmatter = frontmatter(&e->skill);
        kb_err ferr;
        kb_err_clear(&ferr);
        if (!s->name || !s->description || !s->frontmatter)
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        else if ((rc = read_files(e, s, &ferr)) == KB_ERR_NOMEM)
            kb_err_set(err, rc, "%s", ferr.msg);
        else if (rc != KB_OK) {
            /* changed since it was listed (grown, gone): this skill alone */
            kb_log_warn("skills: '%s' is not served: %s", e->dir, ferr.msg);
            skill_release(&lib->items[--lib->n]);
            rc = KB_OK;
        }
    }
    kb_skill_diags_release(&d);
    kb_skill_lib_release(&sl);
    if (rc != KB_OK) {
        kb_skill_pub_free(lib);
        return rc;
    }
    *out = lib;
    return KB_OK;
}

const kb_skill_pub_skill *kb_skill_pub_find(const kb_skill_pub *lib, const char *name)
{
    for (size_t i = 0; lib && i < lib->n; i++)
        if (strcmp(lib->items[i].name, name) == 0)
            return &lib->items[i];
    return NULL;
}

const kb_skill_pub_file *kb_skill_pub_lookup(const kb_skill_pub *lib, const char *uri,
                                             const kb_skill_pub_skill **skill)
{
    if (!lib || strncmp(uri, "skill://", 8) != 0)
        return NULL;
    const char *rest = uri + 8, *slash = strchr(rest, '/');
    if (!slash)
        return NULL;
    for (size_t i = 0; i < lib->n; i++) {
        const kb_skill_pub_skill *s = &lib->items[i];
        if (strlen(s->name) != (size_t)(slash - rest) || strncmp(s->name, rest, (size_t)(slash - rest)))
            continue;
        for (size_t j = 0; j < s->nfiles; j++)
            if (strcmp(s->files[j].name, slash + 1) == 0) {
                if (skill)
                    *skill = s;
                return &s->files[j];
            }
    }
    return NULL;
}

/* ------------------------------------------------------------ as served */

#define META_DIGEST "io.modelcontextprotocol.skills/digest"

char *kb_skill_pub_base64(const kb_skill_pub_file *f)
{
    /* 4 characters for each 3 bytes, and the NUL */
    char *b64 = malloc((f->size + 2) / 3 * 4 + 1);
    if (b64)
        EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)f->data, (int)f->size);
    return b64;
}

/* {"io.modelcontextprotocol.skills/digest": "sha256:HEX"} */
cJSON *kb_skill_pub_digest_meta(const kb_skill_pub_file *f)
{
    char d[72];
    snprintf(d, sizeof d, "sha256:%s", f->sha256);
    cJSON *m = cJSON_CreateObject();
    if (m && cJSON_AddStringToObject(m, META_DIGEST, d))
        return m;
    cJSON_Delete(m);
    return NULL;
}

/* A Resource of resources/list: SKILL.md named and described by its
 * front matter (the extension's rule), the other files by their place. */
cJSON *kb_skill_pub_resource_json(const kb_skill_pub_skill *s, const kb_skill_pub_file *f)
{
    cJSON *o = cJSON_CreateObject();
    int md = strcmp(f->name, "SKILL.md") == 0;
    char name[200], desc[200];
    snprintf(name, sizeof name, "%s/%s", s->name, f->name);
    snprintf(desc, sizeof desc, "%s of the skill %s", f->name, s->name);
    int ok = o && cJSON_AddStringToObject(o, "uri", f->uri) &&
             cJSON_AddStringToObject(o, "name", md ? s->name : name) &&
             cJSON_AddStringToObject(o, "description", md ? s->description : desc) &&
             cJSON_AddStringToObject(o, "mimeType", f->mime) &&
             cJSON_AddNumberToObject(o, "size", (double)f->size) &&
             cJSON_AddItemToObject(o, "_meta", kb_skill_pub_digest_meta(f));
    if (ok)
        return o;
    cJSON_Delete(o);
    return NULL;
}

/* The extension's Skill entry: uri, front matter, every file with its
 * digest and size. */
cJSON *kb_skill_pub_skill_json(const kb_skill_pub_skill *s)
{
    cJSON *o = cJSON_CreateObject(), *files = NULL;
    char uri[128];
    snprintf(uri, sizeof uri, "skill://%s/SKILL.md", s->name);
    int ok = o && cJSON_AddStringToObject(o, "uri", uri) &&
             cJSON_AddItemToObject(o, "frontmatter", cJSON_Duplicate(s->frontmatter, 1)) &&
             (files = cJSON_AddArrayToObject(o, "resources"));
    for (size_t i = 0; ok && i < s->nfiles; i++) {
        char d[72];
        snprintf(d, sizeof d, "sha256:%s", s->files[i].sha256);
        cJSON *f = cJSON_CreateObject();
        ok = f && cJSON_AddItemToArray(files, f) &&
             cJSON_AddStringToObject(f, "uri", s->files[i].uri) &&
             cJSON_AddStringToObject(f, "digest", d) &&
             cJSON_AddNumberToObject(f, "size", (double)s->files[i].size);
    }
    if (ok)
        return o;
    cJSON_Delete(o);
    return NULL;
}

