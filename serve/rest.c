/* rest.c - the REST face of the tool table (serve/serve.h, kb_rest_routes):
 * each endpoint is one tool, its arguments taken from the JSON body or
 * from the path and query string by the tool's own input schema, its
 * answer the tool's result object; GET /openapi.json is made from the
 * same schemas, so the document cannot drift from what is served. */
#include "serve/serve.h"
#include "api/api.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PATH_PARAMS_MAX 2

/* One endpoint over one tool. */
typedef struct {
    const char *method;       /* for the OpenAPI document: "get", "post" */
    const char *template;     /* "/v1/chunks/{id}": its {params} fill, in
                                 order, the tool arguments path_args */
    const char *tool;
    const char *path_args[PATH_PARAMS_MAX];
    int body;                 /* 1: the arguments are the JSON body */
    const char *summary;
    const char *not_found;    /* the 404 it may answer, when neither its
                                 path nor its body says (NULL: none) */
    const char *list_tool;    /* run instead when the query string has no
                                 "query" (NULL: none): GET /v1/skills */
} rest_op;

static const rest_op ops[] = {
    { "post", "/v1/search", "search", { NULL }, 1,
      "ranked, cited passages: the object of `kb query --json`", NULL, NULL },
    { "get", "/v1/chunks/{id}", "get", { "chunk_id" }, 0,
      "a chunk, or with section=true its whole section", "no such chunk", NULL },
    { "get", "/v1/papers", "papers", { NULL }, 0,
      "the literature list's paper records", NULL, NULL },
    { "get", "/v1/status", "status", { NULL }, 0,
      "the KB's sources, counts and embedder", NULL, NULL },
    { "get", "/v1/task", "task", { NULL }, 0,
      "a kernel task's definition (?task=NAME)", "no such task", NULL },
    { "post", "/v1/prompt", "prompt", { NULL }, 1,
      "the generator's prompt for a task, within budget_tokens", NULL, NULL },
    { "get", "/v1/skills", "skill_search", { NULL }, 0,
      "with query: the skills that match it, best first (skill_search); "
      "without: the skill library, by name, filtered the same way",
      "this server serves no skill library (kb serve --no-skills)", "skill_list" },
    { "get", "/v1/skills/{name}", "skill_get", { "name" }, 0,
      "one skill whole: SKILL.md, front matter, evidence, files (skill_get)",
      "no such skill, or no skill library", NULL },
    { "get", "/v1/skills/{name}/files/{file}", "skill_file", { "name", "file" }, 0,
      "one file of a skill, the bytes /mcp serves as skill://NAME/FILE",
      "no such skill or file, or no skill library", NULL },
};

/* The tool an endpoint runs, from the one table (api.h): one offered
 * over REST, else NULL. */
static const kb_tool *find_tool(const char *name)
{
    const kb_tool *t = kb_tool_find(name);
    return t && kb_api_offered(t, KB_TOOL_REST, 0) ? t : NULL;
}

/* 1 if path fits op's template, each {param}'s segment (not empty, no
 * '/') copied into buf and pointed at by vals[i]. */
static int path_match(const rest_op *op, const char *path, char *buf, size_t size,
                      const char *vals[PATH_PARAMS_MAX])
{
    const char *t = op->template;
    size_t used = 0, nv = 0;
    while (*t) {
        if (*t != '{') {
            if (*t++ != *path++)
                return 0;
            continue;
        }
        size_t n = strcspn(path, "/");
        if (n == 0 || nv == PATH_PARAMS_MAX || used + n + 1 > size)
            return 0;
        memcpy(buf + used, path, n);
        buf[used + n] = '\0';
        vals[nv++] = buf + used;
        used += n + 1;
        path += n;
        t += strcspn(t, "}") + 1;
    }
    return *path == '\0';
}

/* The op for this request (method and path), or NULL: no such endpoint. */
static const rest_op *find_op(const kb_serve_req *req, char *buf, size_t size,
                              const char *vals[PATH_PARAMS_MAX])
{
    const char *m = kb_serve_req_method(req);
    int post = strcmp(m, "POST") == 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if ((strcmp(ops[i].method, "post") == 0) == post &&
            path_match(&ops[i], kb_serve_req_path(req), buf, size, vals))
            return &ops[i];
    return NULL;
}

/* ------------------------------------------------------------ arguments */

/* 1 if the JSON text holds the escape \u0000: cJSON would end the
 * string there, so kb cannot take it as it was meant. */
static int has_nul_escape(const char *s, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (s[i] != '\\')
            continue;
        if (s[i + 1] == 'u' && i + 5 < len && strncmp(s + i + 2, "0000", 4) == 0)
            return 1;
        i++;   /* the escaped character: a "\\" does not start another */
    }
    return 0;
}

/* The body as the tool's arguments: a JSON object in valid UTF-8 with
 * nothing after it. NULL with reply set to the 400. */
static cJSON *body_args(const kb_serve_req *req, kb_serve_reply *reply)
{
    size_t len;
    const char *body = kb_serve_req_body(req, &len);
    if (!kb_serve_utf8_valid(body, len)) {
        kb_serve_reply_error(reply, 400, "bad_json", "the body is not valid UTF-8");
        return NULL;
    }
    if (has_nul_escape(body, len)) {
        kb_serve_reply_error(reply, 400, "bad_json", "the body holds a NUL "
                             "character (\\u0000), which kb cannot take");
        return NULL;
    }
    const char *end = NULL;
    cJSON *args = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    size_t at = end ? (size_t)(end - body) : 0;
    if (!args) {
        if (len == 0)
            kb_serve_reply_error(reply, 400, "bad_json", "the body is empty: "
                                 "send the arguments as a JSON object");
        else
            kb_serve_reply_error(reply, 400, "bad_json", "the body is not "
                                 "JSON (at byte %zu)", at);
        return NULL;
    }
    while (at < len && strchr(" \t\r\n", body[at]))
        at++;
    if (at < len)
        kb_serve_reply_error(reply, 400, "bad_json", "the body has more than "
                             "one JSON value (at byte %zu)", at);
    else if (!cJSON_IsObject(args))
        kb_serve_reply_error(reply, 400, "bad_json", "the body must be a JSON "
                             "object of arguments");
    if (at < len || !cJSON_IsObject(args)) {
        cJSON_Delete(args);
        return NULL;
    }
    return args;
}

static int all_digits(const char *s)
{
    s += *s == '-';
    return *s && strspn(s, "0123456789") == strlen(s);
}

/* value (from a path or a query string) as a JSON value of the type the
 * schema prop asks for; when it is none, the string itself, so that the
 * tool's checker says what was wanted. */
static cJSON *typed_value(const cJSON *prop, const char *value)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(prop, "type");
    const char *t = cJSON_IsString(type) ? type->valuestring : "string";
    char *end = NULL;
    if (strcmp(t, "boolean") == 0) {
        if (strcmp(value, "true") == 0 || strcmp(value, "1") == 0)
            return cJSON_CreateTrue();
        if (strcmp(value, "false") == 0 || strcmp(value, "0") == 0)
            return cJSON_CreateFalse();
    } else if (strcmp(t, "integer") == 0 && all_digits(value)) {
        return cJSON_CreateNumber(strtod(value, NULL));
    } else if (strcmp(t, "number") == 0) {
        double d = strtod(value, &end);
        if (end != value && !*end && isfinite(d))
            return cJSON_CreateNumber(d);
    }
    return cJSON_CreateString(value);
}

typedef struct {
    const kb_tool *tool;
    const rest_op *op;
    const cJSON *props;
    cJSON *args;
    kb_serve_reply *reply;
} query_walk;

static kb_rc add_arg(const char *name, const char *value, void *ctx)
{
    query_walk *q = ctx;
    const cJSON *prop = cJSON_GetObjectItemCaseSensitive(q->props, name);
    if (q->op->body) {
        kb_serve_reply_error(q->reply, 400, "bad_arguments", "%s: '%.64s' is "
                             "not a query parameter: the arguments go in the "
                             "JSON body", q->tool->name, name);
        return KB_ERR_USAGE;
    }
    int in_path = 0;
    for (size_t i = 0; i < PATH_PARAMS_MAX && q->op->path_args[i]; i++)
        in_path |= strcmp(name, q->op->path_args[i]) == 0;
    if (!prop || in_path) {
        kb_serve_reply_error(q->reply, 400, "bad_arguments", "%s: unknown query "
                             "parameter '%.64s'", q->tool->name, name);
        return KB_ERR_USAGE;
    }
    if (cJSON_GetObjectItemCaseSensitive(q->args, name)) {
        kb_serve_reply_error(q->reply, 400, "bad_arguments", "%s: query "
                             "parameter '%.64s' given twice", q->tool->name, name);
        return KB_ERR_USAGE;
    }
    if (!value || !kb_serve_utf8_valid(value, strlen(value))) {
        kb_serve_reply_error(q->reply, 400, "bad_arguments", "%s: query "
                             "parameter '%.64s' wants a value in UTF-8",
                             q->tool->name, name);
        return KB_ERR_USAGE;
    }
    if (!cJSON_AddItemToObject(q->args, name, typed_value(prop, value))) {
        kb_serve_reply_error(q->reply, 500, "out_of_memory", "out of memory");
        return KB_ERR_NOMEM;
    }
    return KB_OK;
}

/* The arguments from the path's {params} (vals) and the query string,
 * each typed by the tool's input schema. NULL with reply set on failure. */
static cJSON *url_args(const kb_serve_req *req, const char *const *vals,
                       const rest_op *op, const kb_tool *tool,
                       kb_serve_reply *reply)
{
    cJSON *schema = cJSON_Parse(tool->input_schema);
    query_walk q = { tool, op, cJSON_GetObjectItemCaseSensitive(schema, "properties"),
                     op->body ? NULL : cJSON_CreateObject(), reply };
    if (!schema || (!op->body && !q.args)) {
        kb_serve_reply_error(reply, 500, "out_of_memory", "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < PATH_PARAMS_MAX && op->path_args[i]; i++) {
        const char *arg = op->path_args[i];
        const cJSON *prop = cJSON_GetObjectItemCaseSensitive(q.props, arg);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(prop, "type");
        cJSON *v = typed_value(prop, vals[i]);
        if (cJSON_IsString(v) && !(cJSON_IsString(type) &&
                                   strcmp(type->valuestring, "string") == 0)) {
            kb_serve_reply_error(reply, 400, "bad_arguments", "%s: '%.64s' is "
                                 "not a %s", tool->name, vals[i], arg);
            cJSON_Delete(v);
            goto fail;
        }
        if (!cJSON_AddItemToObject(q.args, arg, v)) {
            kb_serve_reply_error(reply, 500, "out_of_memory", "out of memory");
            goto fail;
        }
    }
    if (kb_serve_req_args(req, add_arg, &q) != KB_OK)
        goto fail;
    cJSON_Delete(schema);
    return q.args ? q.args : body_args(req, reply);
fail:
    cJSON_Delete(schema);
    cJSON_Delete(q.args);
    return NULL;
}

/* ------------------------------------------------------------ handlers */

static void rest_tool(const kb_serve_req *req, kb_serve_reply *reply,
                      const kb_serve_route *route)
{
    char buf[1024];
    const char *vals[PATH_PARAMS_MAX] = { NULL };
    const rest_op *op = find_op(req, buf, sizeof buf, vals);
    if (!op) {
        kb_serve_reply_error(reply, 404, "not_found", "no such endpoint '%.200s'",
                             kb_serve_req_path(req));
        return;
    }
    const kb_tool *tool = find_tool(op->tool);
    cJSON *args = tool ? url_args(req, vals, op, tool, reply) : NULL;
    if (!tool) {
        kb_serve_reply_error(reply, 500, "internal", "no tool '%s'", op->tool);
        return;
    }
    if (!args)
        return;
    if (op->list_tool && !cJSON_GetObjectItemCaseSensitive(args, "query"))
        tool = find_tool(op->list_tool);
    kb_err err;
    kb_err_clear(&err);
    cJSON *out = NULL;
    kb_tool_ctx *ctx = kb_serve_req_tools(req);
    if (!tool)
        kb_serve_reply_error(reply, 500, "internal", "no tool '%s'", op->list_tool);
    else if (kb_tool_run(tool, ctx, args, &out, &err) == KB_OK) {
        kb_serve_reply_json(reply, 200, out);
        /* the body's schema has no room for it: a header says */
        if (tool->cached && ctx->results &&
            kb_serve_reply_header(reply, "X-Kb-Cache", ctx->cache_hit ? "hit" : "miss") != KB_OK)
            kb_serve_reply_error(reply, 500, "out_of_memory", "out of memory");
    } else
        kb_serve_reply_kb_error(reply, &err);
    cJSON_Delete(args);
}

static void rest_healthz(const kb_serve_req *req, kb_serve_reply *reply,
                         const kb_serve_route *route)
{
    cJSON *o = cJSON_CreateObject();
    if (o && !cJSON_AddStringToObject(o, "status", "ok")) {
        cJSON_Delete(o);
        o = NULL;
    }
    kb_serve_reply_json(reply, 200, o);
}

/* ------------------------------------------------------------ OpenAPI */

/* The document is built with cJSON through these: a failed call clears
 * *ok and the calls after it do nothing; the end checks once. */
static cJSON *obj(cJSON *parent, const char *key, int *ok)
{
    cJSON *o = *ok ? cJSON_AddObjectToObject(parent, key) : NULL;
    if (!o)
        *ok = 0;
    return o;
}

static void str(cJSON *parent, const char *key, const char *value, int *ok)
{
    if (*ok && !cJSON_AddStringToObject(parent, key, value))
        *ok = 0;
}

static void item(cJSON *parent, const char *key, cJSON *x, int *ok)
{
    if (!*ok || !x || !cJSON_AddItemToObject(parent, key, x)) {
        cJSON_Delete(x);
        *ok = 0;
    }
}

static void push(cJSON *array, cJSON *x, int *ok)
{
    if (!*ok || !x || !cJSON_AddItemToArray(array, x)) {
        cJSON_Delete(x);
        *ok = 0;
    }
}

/* {"description": D, "content": {"application/json": {"schema": S}}} */
static cJSON *json_content(const char *description, cJSON *schema, int *ok)
{
    cJSON *r = cJSON_CreateObject();
    if (!r) {
        cJSON_Delete(schema);
        *ok = 0;
        return NULL;
    }
    if (description)
        str(r, "description", description, ok);
    cJSON *c = obj(r, "content", ok);
    cJSON *m = obj(c, "application/json", ok);
    item(m, "schema", schema, ok);
    return r;
}

static cJSON *error_ref(const char *description, int *ok)
{
    cJSON *ref = cJSON_CreateObject();
    str(ref, "$ref", "#/components/schemas/Error", ok);
    return json_content(description, ref, ok);
}

/* The parameters of a GET op: the path's, then each other property of
 * the tool's input schema as a query parameter. */
static cJSON *parameters(const rest_op *op, const cJSON *input, int *ok)
{
    cJSON *params = cJSON_CreateArray();
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(input, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(input, "required");
    const cJSON *p;
    cJSON_ArrayForEach(p, props) {
        /* the template's {name} of a path argument */
        char pname[64] = "";
        const char *t = op->template;
        for (size_t i = 0; i < PATH_PARAMS_MAX && op->path_args[i]; i++) {
            t = strchr(t, '{') + 1;
            if (strcmp(p->string, op->path_args[i]) == 0)
                snprintf(pname, sizeof pname, "%.*s", (int)strcspn(t, "}"), t);
        }
        int in_path = pname[0] != '\0';
        int required = in_path;
        const cJSON *r;
        cJSON_ArrayForEach(r, req)   /* the list's alternative asks for none */
            required |= !op->list_tool && cJSON_IsString(r) &&
                        strcmp(r->valuestring, p->string) == 0;
        cJSON *x = cJSON_CreateObject();
        str(x, "name", in_path ? pname : p->string, ok);
        str(x, "in", in_path ? "path" : "query", ok);
        if (*ok && !cJSON_AddBoolToObject(x, "required", required))
            *ok = 0;
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(p, "description");
        if (cJSON_IsString(d))
            str(x, "description", d->valuestring, ok);
        item(x, "schema", cJSON_Duplicate(p, 1), ok);
        push(params, x, ok);
    }
    return params;
}

static cJSON *operation(const rest_op *op, int token, int *ok)
{
    const kb_tool *tool = find_tool(op->tool);
    cJSON *input = tool ? cJSON_Parse(tool->input_schema) : NULL;
    cJSON *output = tool ? cJSON_Parse(tool->output_schema) : NULL;
    cJSON *o = cJSON_CreateObject();
    if (!input || !output || !o)
        *ok = 0;
    str(o, "operationId", op->tool, ok);
    str(o, "summary", op->summary, ok);
    str(o, "description", tool ? tool->description : "", ok);
    if (op->body) {
        cJSON *body = json_content(NULL, input, ok);
        input = NULL;
        if (*ok && !cJSON_AddBoolToObject(body, "required", 1))
            *ok = 0;
        item(o, "requestBody", body, ok);
    } else {
        item(o, "parameters", parameters(op, input, ok), ok);
    }
    const kb_tool *list = op->list_tool ? find_tool(op->list_tool) : NULL;
    if (op->list_tool) {   /* either answer: with a query, then without */
        cJSON *one = cJSON_CreateObject(), *of = cJSON_AddArrayToObject(one, "oneOf");
        if (!list || !of)
            *ok = 0;
        push(of, output, ok);
        push(of, list ? cJSON_Parse(list->output_schema) : NULL, ok);
        output = one;
    }
    cJSON *resp = obj(o, "responses", ok);
    item(resp, "200", json_content("the tool's result", output, ok), ok);
    output = NULL;
    item(resp, "400", error_ref("bad JSON or arguments", ok), ok);
    if (token)
        item(resp, "401", error_ref("no token, or not this server's", ok), ok);
    item(resp, "403", error_ref("an Origin or Host that is not loopback", ok), ok);
    if (op->body || op->not_found)
        item(resp, "404", error_ref(op->not_found ? op->not_found
                                    : "the KB lacks what the mode needs "
                                      "(vectors), a source asked for, or no such task", ok), ok);
    if (op->body)
        item(resp, "413", error_ref("the body is over the server's cap", ok), ok);
    item(resp, "500", error_ref("the server's own failure", ok), ok);
    cJSON_Delete(input);
    cJSON_Delete(output);
    return o;
}

#define ERROR_SCHEMA \
    "{\"type\":\"object\",\"properties\":{\"error\":{\"type\":\"object\"," \
    "\"properties\":{\"code\":{\"type\":\"string\",\"description\":\"a " \
    "short word: bad_json, bad_arguments, not_found, unauthorized, ...\"}," \
    "\"message\":{\"type\":\"string\",\"description\":\"what went wrong, " \
    "for a person\"}},\"required\":[\"code\",\"message\"]," \
    "\"additionalProperties\":false}},\"required\":[\"error\"]," \
    "\"additionalProperties\":false}"

#define HEALTH_SCHEMA \
    "{\"type\":\"object\",\"properties\":{\"status\":{\"const\":\"ok\"}}," \
    "\"required\":[\"status\"],\"additionalProperties\":false}"

/* The OpenAPI 3.1 document of the REST routes; NULL out of memory. */
static cJSON *openapi(int token)
{
    int ok = 1;
    cJSON *doc = cJSON_CreateObject();
    if (!doc)
        return NULL;
    str(doc, "openapi", "3.1.0", &ok);
    cJSON *info = obj(doc, "info", &ok);
    str(info, "title", "kb", &ok);
    str(info, "version", "0.1.0", &ok);
    str(info, "description", "kb's knowledge base of GPU kernel engineering "
        "documents over HTTP: each endpoint is a tool of kb's tool table, its "
        "arguments and result the tool's own JSON Schemas (the same as "
        "`kb query --json` and kb mcp). Errors are "
        "{\"error\": {\"code\", \"message\"}}.", &ok);
    str(doc, "jsonSchemaDialect", "https://json-schema.org/draft/2020-12/schema", &ok);
    cJSON *paths = obj(doc, "paths", &ok);
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        cJSON *p = obj(paths, ops[i].template, &ok);
        item(p, ops[i].method, operation(&ops[i], token, &ok), &ok);
    }
    cJSON *health = obj(obj(paths, "/healthz", &ok), "get", &ok);
    str(health, "operationId", "healthz", &ok);
    str(health, "summary", "whether the server is up (no token needed)", &ok);
    item(health, "security", cJSON_CreateArray(), &ok);
    cJSON *hresp = obj(health, "responses", &ok);
    item(hresp, "200", json_content("up", cJSON_Parse(HEALTH_SCHEMA), &ok), &ok);
    cJSON *comp = obj(doc, "components", &ok);
    item(obj(comp, "schemas", &ok), "Error", cJSON_Parse(ERROR_SCHEMA), &ok);
    if (token) {
        cJSON *bearer = obj(obj(comp, "securitySchemes", &ok), "bearer", &ok);
        str(bearer, "type", "http", &ok);
        str(bearer, "scheme", "bearer", &ok);
        cJSON *sec = cJSON_CreateArray(), *req = cJSON_CreateObject();
        if (req)
            item(req, "bearer", cJSON_CreateArray(), &ok);
        push(sec, req, &ok);
        item(doc, "security", sec, &ok);
    }
    if (!ok) {
        cJSON_Delete(doc);
        return NULL;
    }
    return doc;
}

static void rest_openapi(const kb_serve_req *req, kb_serve_reply *reply,
                         const kb_serve_route *route)
{
    kb_serve_reply_json(reply, 200, openapi(kb_serve_req_token_required(req)));
}

/* ------------------------------------------------------------ table */

/* Each row's endpoints found by find_op from the path. */
static const kb_serve_route routes[] = {
    { "/v1/search", KB_HTTP_M_POST, 0, rest_tool, NULL },
    { "/v1/chunks/", KB_HTTP_M_GET, KB_ROUTE_PREFIX, rest_tool, NULL },
    { "/v1/papers", KB_HTTP_M_GET, 0, rest_tool, NULL },
    { "/v1/status", KB_HTTP_M_GET, 0, rest_tool, NULL },
    { "/v1/task", KB_HTTP_M_GET, 0, rest_tool, NULL },
    { "/v1/prompt", KB_HTTP_M_POST, 0, rest_tool, NULL },
    { "/v1/skills", KB_HTTP_M_GET, 0, rest_tool, NULL },
    { "/v1/skills/", KB_HTTP_M_GET, KB_ROUTE_PREFIX, rest_tool, NULL },
    { "/healthz", KB_HTTP_M_GET, KB_ROUTE_OPEN, rest_healthz, NULL },
    { "/openapi.json", KB_HTTP_M_GET, KB_ROUTE_OPEN, rest_openapi, NULL },
};

const kb_serve_route *kb_rest_routes(size_t *n)
{
    *n = sizeof routes / sizeof routes[0];
    return routes;
}
