/* tool_skill.c - the skill tools (api.h): skill_search, the KB's
 * skills through skills/'s search (one hit per skill, filtered by its
 * metadata), and skill_get, one skill of the library as the server read
 * it (front matter, SKILL.md, its files with digests, its evidence). */
#include "api/api.h"
#include "skills/skill.h"
#include "kb/kb_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SKILLS_SLOT "api/skills"
#define QUERY_MAX_CHARS 4096

/* The library is the server's: the store only points at it. */
static void not_owned(void *p)
{
    (void)p;
}

kb_rc kb_api_skills_attach(kb_store *store, const kb_skill_pub *lib, kb_err *err)
{
    if (kb_store_slot_get(store, SKILLS_SLOT) == lib)
        return KB_OK;
    return kb_store_slot_set(store, SKILLS_SLOT, (void *)lib, not_owned, err);
}

#define STATUS_ENUM "[\"draft\",\"verified\",\"approved\",\"retired\"]"

/* The properties skill_search and skill_list share: the count, the mode
 * and the metadata filters. */
#define K_PROP(what) \
    "\"k\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":50," what \
        "\"description\":\"how many skills\"},"
#define MODE_PROP \
    "\"mode\":{\"type\":\"string\",\"enum\":[\"hybrid\",\"lexical\",\"vector\"]," \
        "\"default\":\"hybrid\"},"
#define FILTER_PROPS \
    "\"arch\":{\"type\":\"string\",\"maxLength\":16,\"description\":\"only " \
        "skills for this architecture, e.g. sm_90 (a skill for sm_80+ " \
        "counts)\"}," \
    "\"dtype\":{\"type\":\"string\",\"maxLength\":16,\"description\":\"only " \
        "skills for this data type: f32, bf16, ...\"}," \
    "\"ops\":{\"type\":\"string\",\"maxLength\":32,\"description\":\"only " \
        "skills for this operation: gemm, reduce, scan, ...\"}," \
    "\"status\":{\"type\":\"string\",\"enum\":" STATUS_ENUM ",\"description\":" \
        "\"only skills of this status (retired skills only when asked for)\"}"
#define ALL_PROP \
    "\"all\":{\"type\":\"boolean\",\"default\":false,\"description\":" \
        "\"retired skills too\"}"

static const char search_input[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"query\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,"
        "\"description\":\"the technique or problem, in words: 'bank "
        "conflicts in a shared-memory transpose', 'bf16 gemm with tensor "
        "cores', 'single-pass softmax'\"},"
    K_PROP("\"default\":5,") MODE_PROP FILTER_PROPS "," ALL_PROP "},"
    "\"required\":[\"query\"],\"additionalProperties\":false}";

/* kb-speedup as a number, and kb-arch: one meaning wherever a skill is
 * described (kb skill list calls the device it was verified on
 * verified_on). */
#define SPEEDUP_SCHEMA \
    "{\"type\":[\"number\",\"null\"],\"description\":\"kb-speedup: over the " \
        "task's baseline on the GPU it was verified on; null when none\"}"
#define ARCH_SCHEMA \
    "{\"type\":\"string\",\"description\":\"kb-arch: the architectures " \
        "it is for (sm_90, sm_80+); empty when it names none\"}"

static const char search_output[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"query\":{\"type\":\"string\"},"
    "\"mode\":{\"type\":\"string\"},"
    "\"took_ms\":{\"type\":\"number\"},"
    "\"results\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
    "\"properties\":{"
        "\"rank\":{\"type\":\"integer\",\"minimum\":1},"
        "\"name\":{\"type\":\"string\",\"description\":\"the skill's name, "
            "for skill_get\"},"
        "\"uri\":{\"type\":\"string\",\"description\":\"its SKILL.md as a "
            "resource (skill://NAME/SKILL.md); empty when this server serves "
            "no skill library\"},"
        "\"status\":{\"type\":\"string\",\"description\":\"draft, verified "
            "(kb-verify measured it), approved (and a reviewer), retired\"},"
        "\"speedup\":" SPEEDUP_SCHEMA ","
        "\"task\":{\"type\":\"string\"},"
        "\"arch\":" ARCH_SCHEMA ","
        "\"dtype\":{\"type\":\"string\"},"
        "\"ops\":{\"type\":\"string\"},"
        "\"score\":{\"type\":\"number\"},"
        "\"chunk_id\":{\"type\":\"integer\",\"minimum\":1,\"description\":"
            "\"the best section's chunk, for get\"},"
        "\"url\":{\"type\":\"string\"},"
        "\"path\":{\"type\":\"string\",\"description\":\"its SKILL.md's path "
            "in its source\"},"
        "\"heading_path\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
        "\"text\":{\"type\":\"string\",\"description\":\"a snippet of the "
            "best section\"}},"
    "\"required\":[\"rank\",\"name\",\"uri\",\"status\",\"speedup\",\"task\","
        "\"arch\",\"dtype\",\"ops\",\"score\",\"chunk_id\",\"url\",\"path\","
        "\"heading_path\",\"text\"],"
    "\"additionalProperties\":false}}},"
    "\"required\":[\"query\",\"mode\",\"took_ms\",\"results\"],"
    "\"additionalProperties\":false}";

static const char get_input[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"
        "\"description\":\"a skill's name, as skill_search gives it\"},"
    "\"kernel\":{\"type\":\"boolean\",\"default\":false,\"description\":"
        "\"true: the text of its kernel.cu too (also the resource "
        "skill://NAME/kernel.cu)\"}},"
    "\"required\":[\"name\"],\"additionalProperties\":false}";

/* A skill's files, as skill_get and skill_list give them. */
#define FILES_SCHEMA \
    "{\"type\":\"array\",\"items\":{\"type\":\"object\"," \
        "\"properties\":{\"uri\":{\"type\":\"string\"}," \
        "\"digest\":{\"type\":\"string\",\"description\":\"sha256:HEX of the " \
            "file's bytes\"}," \
        "\"size\":{\"type\":\"integer\",\"minimum\":0}," \
        "\"mimeType\":{\"type\":\"string\"}}," \
        "\"required\":[\"uri\",\"digest\",\"size\",\"mimeType\"]," \
        "\"additionalProperties\":false}," \
        "\"description\":\"every file of the skill, each a resource\"}"

static const char get_output[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\"},"
    "\"uri\":{\"type\":\"string\"},"
    "\"status\":{\"type\":\"string\"},"
    "\"description\":{\"type\":\"string\"},"
    "\"frontmatter\":{\"type\":\"object\",\"description\":\"SKILL.md's "
        "front matter as written: name, description, metadata (kb-status, "
        "kb-task, kb-speedup, kb-arch, kb-when-not, ...)\"},"
    "\"skill_md\":{\"type\":\"string\",\"description\":\"SKILL.md whole: "
        "when to apply, the technique, pitfalls, evidence, with deep links\"},"
    "\"files\":" FILES_SCHEMA ","
    "\"evidence\":{\"type\":\"array\",\"description\":\"the kb-verify "
        "records behind it (evidence.json), oldest first: device, verdict, "
        "timings with 95% intervals, speedup, the kernel's SHA-256\"},"
    "\"kernel\":{\"type\":\"string\",\"description\":\"kernel.cu, when "
        "asked for and the skill has one\"}},"
    "\"required\":[\"name\",\"uri\",\"status\",\"description\",\"frontmatter\","
        "\"skill_md\",\"files\",\"evidence\"],"
    "\"additionalProperties\":false}";

static const char *arg_str(const cJSON *args, const char *key)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(args, key));
}

/* Puts kb-speedup under "speedup": a number, or null when it is none. */
static void put_speedup(cJSON *o, const char *speedup, int *ok)
{
    double x;
    if (kb_skill_speedup_parse(speedup, &x))
        kb_json_put_num(o, "speedup", x, ok);
    else
        kb_json_put_null(o, "speedup", ok);
}

/* The hit x, ranked rank, appended to arr; its uri when lib has it. */
static void put_hit(cJSON *arr, const kb_skill_hit *x, size_t rank,
                    const kb_skill_pub *lib, int *ok)
{
    char uri[128] = "";
    if (kb_skill_pub_find(lib, x->name))
        snprintf(uri, sizeof uri, "skill://%s/SKILL.md", x->name);
    cJSON *o = kb_json_push_obj(arr, ok);
    kb_json_put_num(o, "rank", (double)rank, ok);
    kb_json_put_str(o, "name", x->name, ok);
    kb_json_put_str(o, "uri", uri, ok);
    kb_json_put_str(o, "status", x->status, ok);
    put_speedup(o, x->speedup, ok);
    kb_json_put_str(o, "task", x->task, ok);
    kb_json_put_str(o, "arch", x->arch, ok);
    kb_json_put_str(o, "dtype", x->dtype, ok);
    kb_json_put_str(o, "ops", x->ops, ok);
    kb_json_put_num(o, "score", x->r->score, ok);
    kb_json_put_num(o, "chunk_id", (double)x->r->chunk_id, ok);
    kb_json_put_str(o, "url", x->r->url, ok);
    kb_json_put_str(o, "path", x->r->path, ok);
    cJSON *hp = kb_json_put_arr(o, "heading_path", ok);
    for (size_t d = 0; *ok && d < x->r->depth; d++)
        kb_json_push_str(hp, x->r->heading_path[d], ok);
    kb_json_put_str(o, "text", x->r->text, ok);
}

static kb_rc tool_skill_search(kb_tool_ctx *ctx, const cJSON *args, cJSON **out,
                               kb_err *err)
{
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(args, "k");
    kb_skill_query q = { .run = kb_query_run, .text = arg_str(args, "query"),
                         .mode = KB_MODE_HYBRID, .k = cJSON_IsNumber(k) ? (int)k->valuedouble : 5,
                         .arch = arg_str(args, "arch"), .dtype = arg_str(args, "dtype"),
                         .ops = arg_str(args, "ops"), .status = arg_str(args, "status"),
                         .all = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(args, "all")),
                         .config = ctx->config };
    const char *mode = arg_str(args, "mode");
    if (mode && kb_mode_parse(mode, &q.mode) != 0)
        return kb_err_set(err, KB_ERR_USAGE, "skill_search: unknown mode");
    const kb_skill_pub *lib = kb_store_slot_get(ctx->store, SKILLS_SLOT);
    kb_skill_hits h;
    kb_rc rc = kb_skill_search(ctx->store, &q, &h, err);
    if (rc != KB_OK)
        return rc;
    cJSON *root = cJSON_CreateObject();
    int ok = root != NULL;
    kb_json_put_str(root, "query", q.text, &ok);
    kb_json_put_str(root, "mode", kb_mode_name(h.all.mode), &ok);
    kb_json_put_num(root, "took_ms", h.all.took_ms, &ok);
    cJSON *arr = kb_json_put_arr(root, "results", &ok);
    for (size_t i = 0; ok && i < h.n; i++)
        put_hit(arr, &h.items[i], i + 1, lib, &ok);
    kb_skill_hits_release(&h);
    if (!ok) {
        cJSON_Delete(root);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    *out = root;
    return KB_OK;
}

/* "sha256:HEX" of f. */
static void digest(const kb_skill_pub_file *f, char out[72])
{
    snprintf(out, 72, "sha256:%s", f->sha256);
}

static const kb_skill_pub_file *file_named(const kb_skill_pub_skill *s, const char *name)
{
    for (size_t i = 0; i < s->nfiles; i++)
        if (strcmp(s->files[i].name, name) == 0)
            return &s->files[i];
    return NULL;
}

/* Adds "files": [{uri, digest, size, mimeType}] of s to o; 0 out of
 * memory. */
static int add_files(cJSON *o, const kb_skill_pub_skill *s)
{
    cJSON *files = cJSON_AddArrayToObject(o, "files");
    int ok = files != NULL;
    for (size_t i = 0; ok && i < s->nfiles; i++) {
        char d[72];
        digest(&s->files[i], d);
        cJSON *f = cJSON_CreateObject();
        ok = f && cJSON_AddItemToArray(files, f) &&
             cJSON_AddStringToObject(f, "uri", s->files[i].uri) &&
             cJSON_AddStringToObject(f, "digest", d) &&
             cJSON_AddNumberToObject(f, "size", (double)s->files[i].size) &&
             cJSON_AddStringToObject(f, "mimeType", s->files[i].mime);
    }
    return ok;
}

/* The library on ctx's store, or NULL with err set to the 404 of a
 * server that serves none. */
static const kb_skill_pub *library(kb_tool_ctx *ctx, const char *tool, kb_err *err)
{
    const kb_skill_pub *lib = kb_store_slot_get(ctx->store, SKILLS_SLOT);
    if (!lib)
        kb_err_set(err, KB_ERR_NOTFOUND, "%s: this server serves no skill library "
                   "(--skills DIR; skill_search still searches the KB's skills)", tool);
    return lib;
}

/* The skill called name in lib, or NULL with err set to a 404 that names
 * the skills there are. */
static const kb_skill_pub_skill *skill_named(const kb_skill_pub *lib, const char *tool,
                                       const char *name, kb_err *err)
{
    const kb_skill_pub_skill *s = kb_skill_pub_find(lib, name);
    if (s)
        return s;
    kb_buf names;
    kb_buf_init(&names, 1 << 16);
    kb_rc rc = KB_OK;
    for (size_t i = 0; rc == KB_OK && i < lib->n; i++)
        rc = kb_buf_printf(&names, "%s%s", i ? ", " : "", lib->items[i].name);
    kb_err_set(err, KB_ERR_NOTFOUND, "%s: no skill '%.*s' (skills: %s)", tool,
               kb_utf8_cut(name, 64), name, names.len ? names.data : "none");
    kb_buf_release(&names);
    return NULL;
}

static kb_rc tool_skill_get(kb_tool_ctx *ctx, const cJSON *args, cJSON **out,
                            kb_err *err)
{
    const kb_skill_pub *lib = library(ctx, "skill_get", err);
    const kb_skill_pub_skill *s = lib ? skill_named(lib, "skill_get", arg_str(args, "name"), err) : NULL;
    if (!s)
        return KB_ERR_NOTFOUND;
    const kb_skill_pub_file *md = file_named(s, "SKILL.md");
    const kb_skill_pub_file *ev = file_named(s, "evidence.json");
    const kb_skill_pub_file *kernel = file_named(s, "kernel.cu");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(s->frontmatter, "metadata");
    const char *status = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "kb-status"));
    cJSON *evidence = ev && ev->text ? cJSON_Parse(ev->data) : NULL;
    cJSON *records = cJSON_DetachItemFromObjectCaseSensitive(evidence, "records");
    cJSON_Delete(evidence);
    if (!cJSON_IsArray(records)) {
        cJSON_Delete(records);
        records = cJSON_CreateArray();
    }
    char uri[128];
    snprintf(uri, sizeof uri, "skill://%s/SKILL.md", s->name);
    cJSON *root = cJSON_CreateObject();
    int ok = root && records && cJSON_AddStringToObject(root, "name", s->name) &&
             cJSON_AddStringToObject(root, "uri", uri) &&
             cJSON_AddStringToObject(root, "status", status ? status : "draft") &&
             cJSON_AddStringToObject(root, "description", s->description) &&
             cJSON_AddItemToObject(root, "frontmatter", cJSON_Duplicate(s->frontmatter, 1)) &&
             cJSON_AddStringToObject(root, "skill_md", md && md->text ? md->data : "") &&
             add_files(root, s);
    if (ok) {
        ok = cJSON_AddItemToObject(root, "evidence", records) != 0;
        records = NULL;
    }
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(args, "kernel");
    if (ok && cJSON_IsTrue(want) && kernel && kernel->text)
        ok = cJSON_AddStringToObject(root, "kernel", kernel->data) != NULL;
    cJSON_Delete(records);
    if (!ok) {
        cJSON_Delete(root);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    *out = root;
    return KB_OK;
}

static const char list_input[] =
    "{\"type\":\"object\",\"properties\":{"
    K_PROP("") MODE_PROP FILTER_PROPS "," ALL_PROP "},"
    "\"additionalProperties\":false}";

#define LIST_ENTRY \
    "{\"type\":\"object\",\"properties\":{" \
    "\"name\":{\"type\":\"string\"}," \
    "\"uri\":{\"type\":\"string\"}," \
    "\"status\":{\"type\":\"string\"}," \
    "\"description\":{\"type\":\"string\"}," \
    "\"speedup\":" SPEEDUP_SCHEMA "," \
    "\"task\":{\"type\":\"string\"}," \
    "\"arch\":" ARCH_SCHEMA "," \
    "\"dtype\":{\"type\":\"string\"}," \
    "\"ops\":{\"type\":\"string\"}," \
    "\"files\":" FILES_SCHEMA "}," \
    "\"required\":[\"name\",\"uri\",\"status\",\"description\",\"speedup\"," \
        "\"task\",\"arch\",\"dtype\",\"ops\",\"files\"]," \
    "\"additionalProperties\":false}"

static const char list_output[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"skills\":{\"type\":\"array\",\"items\":" LIST_ENTRY ","
        "\"description\":\"the library's skills that pass the filters, by "
        "name\"}},"
    "\"required\":[\"skills\"],\"additionalProperties\":false}";

static const char file_input[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"
        "\"description\":\"a skill's name\"},"
    "\"file\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":255,"
        "\"description\":\"a file of the skill's folder: SKILL.md, "
        "kernel.cu, evidence.json, ...\"}},"
    "\"required\":[\"name\",\"file\"],\"additionalProperties\":false}";

static const char file_output[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"uri\":{\"type\":\"string\",\"description\":\"skill://NAME/FILE, the "
        "resource /mcp serves the same bytes as\"},"
    "\"mimeType\":{\"type\":\"string\"},"
    "\"size\":{\"type\":\"integer\",\"minimum\":0},"
    "\"digest\":{\"type\":\"string\",\"description\":\"sha256:HEX of the "
        "bytes\"},"
    "\"text\":{\"type\":\"string\",\"description\":\"the file, when it is "
        "UTF-8 text\"},"
    "\"blob\":{\"type\":\"string\",\"contentEncoding\":\"base64\","
        "\"description\":\"the file in base64, when it is not text\"}},"
    "\"required\":[\"uri\",\"mimeType\",\"size\",\"digest\"],"
    "\"oneOf\":[{\"required\":[\"text\"]},{\"required\":[\"blob\"]}],"
    "\"additionalProperties\":false}";

/* A metadata value of s's front matter, "" when it has none. */
static const char *meta_of(const kb_skill_pub_skill *s, const char *key)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(s->frontmatter, "metadata");
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, key));
    return v ? v : "";
}

static kb_rc tool_skill_list(kb_tool_ctx *ctx, const cJSON *args, cJSON **out,
                             kb_err *err)
{
    const kb_skill_pub *lib = library(ctx, "skill_list", err);
    if (!lib)
        return KB_ERR_NOTFOUND;
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(args, "k");
    size_t max = cJSON_IsNumber(k) ? (size_t)k->valuedouble : lib->n;
    kb_skill_query q = { .arch = arg_str(args, "arch"), .dtype = arg_str(args, "dtype"),
                         .ops = arg_str(args, "ops"), .status = arg_str(args, "status"),
                         .all = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(args, "all")) };
    cJSON *root = cJSON_CreateObject(), *arr = NULL;
    int ok = root && (arr = cJSON_AddArrayToObject(root, "skills"));
    for (size_t i = 0, n = 0; ok && i < lib->n && n < max; i++) {
        const kb_skill_pub_skill *x = &lib->items[i];
        const char *status = *meta_of(x, "kb-status") ? meta_of(x, "kb-status") : "draft";
        if (!kb_skill_search_passes(&q, status, meta_of(x, "kb-arch"), meta_of(x, "kb-dtype"),
                                    meta_of(x, "kb-ops")))
            continue;
        char uri[128];
        snprintf(uri, sizeof uri, "skill://%s/SKILL.md", x->name);
        cJSON *o = kb_json_push_obj(arr, &ok);
        kb_json_put_str(o, "name", x->name, &ok);
        kb_json_put_str(o, "uri", uri, &ok);
        kb_json_put_str(o, "status", status, &ok);
        kb_json_put_str(o, "description", x->description, &ok);
        put_speedup(o, meta_of(x, "kb-speedup"), &ok);
        kb_json_put_str(o, "task", meta_of(x, "kb-task"), &ok);
        kb_json_put_str(o, "arch", meta_of(x, "kb-arch"), &ok);
        kb_json_put_str(o, "dtype", meta_of(x, "kb-dtype"), &ok);
        kb_json_put_str(o, "ops", meta_of(x, "kb-ops"), &ok);
        ok = ok && add_files(o, x);
        n++;
    }
    if (!ok) {
        cJSON_Delete(root);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    *out = root;
    return KB_OK;
}

static kb_rc tool_skill_file(kb_tool_ctx *ctx, const cJSON *args, cJSON **out,
                             kb_err *err)
{
    const char *name = arg_str(args, "name"), *file = arg_str(args, "file");
    const kb_skill_pub *lib = library(ctx, "skill_file", err);
    const kb_skill_pub_skill *s = lib ? skill_named(lib, "skill_file", name, err) : NULL;
    if (!s)
        return KB_ERR_NOTFOUND;
    const kb_skill_pub_file *f = file_named(s, file);
    if (!f) {
        kb_buf names;
        kb_buf_init(&names, 1 << 16);
        kb_rc rc = KB_OK;
        for (size_t i = 0; rc == KB_OK && i < s->nfiles; i++)
            rc = kb_buf_printf(&names, "%s%s", i ? ", " : "", s->files[i].name);
        kb_err_set(err, KB_ERR_NOTFOUND, "skill_file: skill '%s' has no file '%.*s' "
                   "(its files: %s)", s->name, kb_utf8_cut(file, 64), file,
                   names.len ? names.data : "none");
        kb_buf_release(&names);
        return KB_ERR_NOTFOUND;
    }
    char d[72];
    digest(f, d);
    char *b64 = f->text ? NULL : kb_skill_pub_base64(f);
    cJSON *root = cJSON_CreateObject();
    int ok = root && (f->text || b64) && cJSON_AddStringToObject(root, "uri", f->uri) &&
             cJSON_AddStringToObject(root, "mimeType", f->mime) &&
             cJSON_AddNumberToObject(root, "size", (double)f->size) &&
             cJSON_AddStringToObject(root, "digest", d) &&
             cJSON_AddStringToObject(root, f->text ? "text" : "blob",
                                     f->text ? f->data : b64);
    free(b64);
    if (!ok) {
        cJSON_Delete(root);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    *out = root;
    return KB_OK;
}

static const kb_tool tools[] = {
    { "skill_search",
      "Finds kernel optimisation skills: techniques a kernel engineer would "
      "teach (tiling, bank-conflict padding, warp-shuffle reductions, cp.async "
      "pipelines, TMA, mma.sync ...), each backed by kb-verify measurements on "
      "a real GPU. Returns one hit per skill with its status (verified and "
      "approved skills were measured faster, or at parity with a vendor "
      "library), its speedup, task, architecture and data type; filter by "
      "arch, dtype, ops or status. Call skill_get with a hit's name for the "
      "whole skill.",
      search_input, search_output, 1, tool_skill_search, 1,
      KB_TOOL_MCP | KB_TOOL_REST | KB_TOOL_NEEDS_SKILLS },
    { "skill_get",
      "One skill whole: its SKILL.md (when to apply, the technique, pitfalls, "
      "the evidence, with deep links into the guides), its front matter "
      "(status, task, speedup, where it does not pay: kb-when-not), the "
      "kb-verify records behind it, and its files (kernel.cu, evidence.json, "
      "...) as skill:// resources with their sha256 digests; kernel true adds "
      "the kernel's source.",
      get_input, get_output, 1, tool_skill_get, 0,
      KB_TOOL_MCP | KB_TOOL_REST | KB_TOOL_NEEDS_SKILLS |
      KB_TOOL_NEEDS_LIBRARY },
    /* REST's own: GET /v1/skills without a query, and a file of a skill
     * (what /mcp serves as resources, so not MCP tools) */
    { "skill_list",
      "The skill library's skills, by name, with their status, speedup, "
      "task, architecture, data type and files; filter by arch, dtype, ops "
      "or status (retired skills only when asked for: status or all), at most k. mode is "
      "a search's and changes nothing here.",
      list_input, list_output, 1, tool_skill_list, 0,
      KB_TOOL_REST | KB_TOOL_NEEDS_SKILLS |
      KB_TOOL_NEEDS_LIBRARY },
    { "skill_file",
      "One file of a skill (SKILL.md, kernel.cu, evidence.json, ...): the "
      "bytes /mcp serves as the resource skill://NAME/FILE, as text (or "
      "base64), with its size and sha256 digest.",
      file_input, file_output, 1, tool_skill_file, 0,
      KB_TOOL_REST | KB_TOOL_NEEDS_SKILLS |
      KB_TOOL_NEEDS_LIBRARY },
};

const kb_tool *kb_api_skill_tools(size_t *n)
{
    *n = sizeof tools / sizeof tools[0];
    return tools;
}
