/* mcp.c - the MCP server's core (serve.h): a message checked, routed to its
 * era, the method run against the one tool table, the reply made. */
#include "serve/serve.h"
#include "api/api.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* JSON-RPC's and MCP's error codes */
#define PARSE_ERROR (-32700)
#define INVALID_REQUEST (-32600)
#define METHOD_NOT_FOUND (-32601)
#define INVALID_PARAMS (-32602)
#define INTERNAL_ERROR (-32603)
#define RESOURCE_NOT_FOUND (-32002)
#define HEADER_MISMATCH (-32020)
#define UNSUPPORTED_VERSION (-32022)

#define META_VERSION "io.modelcontextprotocol/protocolVersion"
#define META_CAPABILITIES "io.modelcontextprotocol/clientCapabilities"
#define META_CLIENT "io.modelcontextprotocol/clientInfo"
#define META_SERVER "io.modelcontextprotocol/serverInfo"
#define SKILLS_EXTENSION "io.modelcontextprotocol/skills"

/* How long a client may keep the tool list and the discovery result: the
 * tools do not change while a server runs. */
#define LIST_TTL_MS 3600000

/* The handshake versions, newest first: an initialize asking for one of
 * them gets it, any other the first. */
static const char *const handshake_versions[] = {
    KB_MCP_VERSION_LATEST_HANDSHAKE, "2025-06-18"
};
#define NHANDSHAKE (sizeof handshake_versions / sizeof handshake_versions[0])

typedef enum { ERA_NONE = 0, ERA_HANDSHAKE, ERA_MODERN } mcp_era;

struct kb_mcp_session {
    pthread_mutex_t lock;
    mcp_era era;
    const char *version;     /* the handshake version (static), or NULL */
    kb_mcp_client client;    /* for sampling (mcp_sampling.c) */
};

struct kb_mcp {
    int allow_verify;        /* the opt-in tools offered too */
    kb_skill_pub *skills;    /* the library served as resources, or NULL */
    cJSON *tools;            /* tools/list's array, made once */
    char *instructions;
    char *names;             /* "search, get, papers, status" */
    char *tasks_dir;         /* verify's, or NULL */
    kb_mcp_tasks *tasks;     /* the Tasks extension's (mcp_task.c) */
    kb_api_env env;          /* what the tools need attached */
};

/* ------------------------------------------------------------------ server */

void kb_mcp_opts_init(kb_mcp_opts *opts)
{
    memset(opts, 0, sizeof *opts);
}

static const char instructions_text[] =
    "kb searches GPU kernel engineering documents: the CUDA C++ Programming "
    "Guide, the PTX ISA, the CUDA Best Practices Guide, the architecture "
    "tuning guides (Hopper, Blackwell, Ada, Ampere, Turing), the Nsight "
    "Compute docs, the CUTLASS/CuTe docs, the libcu++ cuda::ptx reference, "
    "CUDA sample kernels and a literature list of LLM kernel-generation "
    "papers. Call search first for any question on CUDA, PTX, GPU "
    "architecture or kernel optimisation: it answers in milliseconds, with "
    "passages, and every result names its source, version and a deep-link "
    "url to cite. When the question's words may not be the documents' "
    "words, add your own rewrites in searches: lex for keywords and "
    "identifiers (cp.async.bulk.tensor, __shfl_down_sync), vec for a "
    "rephrased question, hyde for a short passage written as the "
    "documentation would put the answer. Call get with a result's chunk_id "
    "(and section true) when a passage is cut short or its surroundings "
    "matter; papers to list the literature on a topic; status for the "
    "sources, their versions and when they were ingested; task and prompt "
    "for a kernel task's definition and the generator's prompt for it. Results keep "
    "within budget_tokens (8000 unless you pass another); when truncated "
    "is true, raise it, lower k, or pass snippet. Before you write or "
    "optimise a kernel, call skill_search: skills are techniques measured "
    "by kb-verify on a GPU, with their speedup and where they do not pay; "
    "skill_get gives one whole (its SKILL.md, evidence and files).";

static const char resources_instructions[] =
    " Each skill is also a resource, skill://NAME/SKILL.md, with its other "
    "files (kernel.cu, evidence.json) beside it, each with a sha256 digest.";

static const char verify_instructions[] =
    " Call verify with a task's name and a candidate kernel's source before "
    "you claim a kernel correct or faster: kb-verify compiles it, checks it "
    "against the task's reference and times it on the GPU.";

/* Appends the tools/list entry of tool to arr. */
static kb_rc tool_entry(cJSON *arr, const kb_tool *tool, kb_err *err)
{
    cJSON *in = cJSON_Parse(tool->input_schema), *outs = cJSON_Parse(tool->output_schema);
    if (!cJSON_IsObject(in) || !cJSON_IsObject(outs)) {
        cJSON_Delete(in);
        cJSON_Delete(outs);
        return kb_err_set(err, KB_ERR_INTERNAL, "tool '%s': its %s schema is not a "
                          "JSON object", tool->name, cJSON_IsObject(in) ? "output" : "input");
    }
    cJSON *o = cJSON_CreateObject(), *ann = cJSON_CreateObject();
    int ok = o && ann;
    kb_json_put_str(o, "name", tool->name, &ok);
    kb_json_put_str(o, "description", tool->description, &ok);
    kb_json_put_item(o, "inputSchema", in, &ok);
    kb_json_put_item(o, "outputSchema", outs, &ok);
    kb_json_put_bool(ann, "readOnlyHint", tool->read_only, &ok);
    if (!tool->read_only)   /* it runs things, and changes nothing kept */
        kb_json_put_bool(ann, "destructiveHint", 0, &ok);
    kb_json_put_bool(ann, "openWorldHint", 0, &ok);
    kb_json_put_item(o, "annotations", ann, &ok);
    if (ok && cJSON_AddItemToArray(arr, o))
        return KB_OK;
    cJSON_Delete(o);
    return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
}

/* Is tool offered over MCP by m? Not verify unless opted in, not a tool
 * that answers from the skill library when m serves none (it could only
 * fail: kb mcp started where no library is found). */
static int offered(const kb_mcp *m, const kb_tool *tool)
{
    return kb_api_offered(tool, KB_TOOL_MCP, m->allow_verify) &&
           (m->skills || !(tool->flags & KB_TOOL_NEEDS_LIBRARY));
}

kb_rc kb_mcp_open(const kb_mcp_opts *opts, kb_mcp **out, kb_err *err)
{
    *out = NULL;
    kb_mcp *m = calloc(1, sizeof *m);
    if (!m)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    m->allow_verify = opts->allow_verify;
    m->env.verify_timeout_s = opts->verify_timeout_s;
    if (opts->skills_dir) {
        kb_rc lrc = kb_skill_pub_load(opts->skills_dir, &m->skills, err);
        if (lrc != KB_OK) {
            free(m);
            return lrc;
        }
    }
    kb_buf names, text;
    kb_buf_init(&names, 0);
    kb_buf_init(&text, 2048);   /* the spec's advice: instructions stay short */
    kb_rc rc = kb_buf_puts(&text, instructions_text);
    if (rc == KB_OK && m->skills)
        rc = kb_buf_puts(&text, resources_instructions);
    if (rc == KB_OK && opts->allow_verify)
        rc = kb_buf_puts(&text, verify_instructions);
    m->tools = cJSON_CreateArray();
    if (rc == KB_OK && !m->tools)
        rc = KB_ERR_NOMEM;
    if (rc != KB_OK)
        kb_err_set(err, rc, "out of memory");
    size_t n = 0;
    const kb_tool *all = kb_api_tools(&n);
    for (size_t i = 0; rc == KB_OK && i < n; i++) {
        if (!offered(m, &all[i]))
            continue;
        rc = tool_entry(m->tools, &all[i], err);
        if (rc == KB_OK && (rc = kb_buf_printf(&names, "%s%s", names.len ? ", " : "",
                                               all[i].name)) != KB_OK)
            kb_err_set(err, rc, "out of memory");
    }
    m->instructions = kb_buf_finish(&text, rc);
    m->names = kb_buf_finish(&names, rc);
    if (rc == KB_OK && ((opts->tasks_dir && !(m->tasks_dir = kb_strdup(opts->tasks_dir))) ||
                        !(m->tasks = kb_mcp_tasks_new())))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    m->env.skills = m->skills;
    m->env.tasks_dir = m->tasks_dir;
    if (rc != KB_OK) {
        kb_mcp_free(m);
        return rc;
    }
    *out = m;
    return KB_OK;
}

void kb_mcp_free(kb_mcp *m)
{
    if (!m)
        return;
    cJSON_Delete(m->tools);
    kb_skill_pub_free(m->skills);
    free(m->instructions);
    free(m->names);
    free(m->tasks_dir);
    kb_mcp_tasks_free(m->tasks);
    free(m);
}

const char *kb_mcp_tool_names(const kb_mcp *m)
{
    return m->names;
}

size_t kb_mcp_skill_count(const kb_mcp *m)
{
    return m->skills ? m->skills->n : 0;
}

kb_rc kb_mcp_attach(const kb_mcp *m, kb_store *store, kb_err *err)
{
    return kb_api_skills_attach(store, m->skills, err);
}

/* The tool called name that the server offers over MCP, or NULL. */
static const kb_tool *find_tool(const kb_mcp *m, const char *name)
{
    const kb_tool *tool = kb_tool_find(name);
    return tool && offered(m, tool) ? tool : NULL;
}

/* ------------------------------------------------------------------ sessions */

kb_rc kb_mcp_session_open(kb_mcp_session **out, kb_err *err)
{
    kb_mcp_session *s = calloc(1, sizeof *s);
    if (!s || pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s);
        *out = NULL;
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    *out = s;
    return KB_OK;
}

void kb_mcp_session_free(kb_mcp_session *s)
{
    if (!s)
        return;
    pthread_mutex_destroy(&s->lock);
    free(s);
}

void kb_mcp_session_set_requester(kb_mcp_session *s, kb_mcp_request_fn fn, void *ctx)
{
    s->client.request = fn;
    s->client.ctx = ctx;
}

const char *kb_mcp_session_version(kb_mcp_session *s)
{
    pthread_mutex_lock(&s->lock);
    const char *v = s->version;
    pthread_mutex_unlock(&s->lock);
    return v;
}

/* ------------------------------------------------------------------ one exchange */

/* One message's handling: what it asked, and what it gets. */
typedef struct {
    kb_mcp *server;
    kb_mcp_session *s;
    kb_tool_ctx *ctx;
    const kb_mcp_transport *t;
    const cJSON *id;          /* the request's, or NULL (unknown, notification) */
    const char *method;
    const cJSON *params;      /* an object, or NULL */
    int modern;               /* answered as 2026-07-28 */
    cJSON *result;            /* the outcome: a result, */
    int code;                 /* or an error (code != 0) */
    char message[1024];
    cJSON *data;
    int nomem;
} exchange;

static void fail(exchange *x, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(exchange *x, int code, const char *fmt, ...)
{
    if (x->code)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->message, sizeof x->message, fmt, ap);
    va_end(ap);
    x->code = code;
    cJSON_Delete(x->result);
    x->result = NULL;
}

static void out_of_memory(exchange *x)
{
    x->nomem = 1;
    fail(x, INTERNAL_ERROR, "out of memory");
}

/* A new object for the result; NULL (and the exchange failed) out of
 * memory. */
static cJSON *new_result(exchange *x)
{
    x->result = cJSON_CreateObject();
    if (!x->result)
        out_of_memory(x);
    return x->result;
}

/* Adds item under key to o, or fails the exchange (item freed). */
static void add(exchange *x, cJSON *o, const char *key, cJSON *item)
{
    int ok = !x->code && item;   /* a NULL item is out of memory */
    kb_json_put_item(o, key, item, &ok);
    if (!ok && !x->code)
        out_of_memory(x);
}

static const char *param_string(const exchange *x, const char *key)
{
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(x->params, key));
}

/* serverInfo: name and version. */
static cJSON *server_info(void)
{
    cJSON *o = cJSON_CreateObject();
    if (o && cJSON_AddStringToObject(o, "name", "kb") &&
        cJSON_AddStringToObject(o, "title", "kb: GPU kernel knowledge base") &&
        cJSON_AddStringToObject(o, "version", KB_VERSION))
        return o;
    cJSON_Delete(o);
    return NULL;
}

/* tools, prompts; resources when a skill library is served; in 2026-07-28
 * the extensions written against that revision: Skills with a library,
 * Tasks with verify. */
static cJSON *capabilities(const exchange *x)
{
    cJSON *c = cJSON_CreateObject(), *tools = cJSON_CreateObject();
    int ok = c && tools && cJSON_AddBoolToObject(tools, "listChanged", 0) &&
             cJSON_AddItemToObject(c, "tools", tools);
    if (!ok)
        cJSON_Delete(tools);
    cJSON *prompts = ok ? cJSON_AddObjectToObject(c, "prompts") : NULL;
    ok = prompts && cJSON_AddBoolToObject(prompts, "listChanged", 0);
    if (ok && x->server->skills) {
        cJSON *res = cJSON_AddObjectToObject(c, "resources");
        ok = res && cJSON_AddBoolToObject(res, "listChanged", 0) &&
             cJSON_AddBoolToObject(res, "subscribe", 0);
    }
    const kb_mcp *m = x->server;
    cJSON *ext = ok && x->modern && (m->skills || m->allow_verify)
                     ? cJSON_AddObjectToObject(c, "extensions") : NULL;
    if (ok && x->modern && (m->skills || m->allow_verify))
        ok = ext && (!m->skills || cJSON_AddObjectToObject(ext, SKILLS_EXTENSION)) &&
             (!m->allow_verify || cJSON_AddObjectToObject(ext, KB_MCP_TASKS_EXTENSION));
    if (ok)
        return c;
    cJSON_Delete(c);
    return NULL;
}

/* The 2026-07-28 fields of a result: resultType (complete unless it has
 * one: a task's), the server's _meta stamp, and for a cacheable one ttlMs
 * and cacheScope. */
static void modern_fields(exchange *x, int cacheable)
{
    if (!x->modern || x->code || !x->result)
        return;
    cJSON *meta = cJSON_CreateObject();
    if (!cJSON_GetObjectItemCaseSensitive(x->result, "resultType"))
        add(x, x->result, "resultType", cJSON_CreateString("complete"));
    if (cacheable) {
        add(x, x->result, "ttlMs", cJSON_CreateNumber(LIST_TTL_MS));
        add(x, x->result, "cacheScope", cJSON_CreateString("public"));
    }
    add(x, meta, META_SERVER, server_info());
    add(x, x->result, "_meta", meta);
}

/* ------------------------------------------------------------------ methods */

static void do_initialize(exchange *x)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(x->params, "protocolVersion");
    if (!cJSON_IsString(v))
        return fail(x, INVALID_PARAMS, "initialize needs params.protocolVersion, "
                    "the version the client speaks (e.g. \"%s\")",
                    KB_MCP_VERSION_LATEST_HANDSHAKE);
    const cJSON *caps = cJSON_GetObjectItemCaseSensitive(x->params, "capabilities");
    if (caps && !cJSON_IsObject(caps))
        return fail(x, INVALID_PARAMS, "initialize: params.capabilities must be an object");
    const char *version = handshake_versions[0];
    for (size_t i = 0; i < NHANDSHAKE; i++)
        if (strcmp(v->valuestring, handshake_versions[i]) == 0)
            version = handshake_versions[i];
    cJSON *r = new_result(x);
    add(x, r, "protocolVersion", cJSON_CreateString(version));
    add(x, r, "capabilities", capabilities(x));
    add(x, r, "serverInfo", server_info());
    add(x, r, "instructions", cJSON_CreateString(x->server->instructions));
    if (x->code)
        return;
    x->s->era = ERA_HANDSHAKE;
    x->s->version = version;
    kb_mcp_client_hello(&x->s->client, x->params, version);   /* who, and sampling */
}

/* The versions a request's _meta may name: ["2026-07-28"]. */
static cJSON *modern_versions(void)
{
    cJSON *a = cJSON_CreateArray(), *v = cJSON_CreateString(KB_MCP_VERSION_MODERN);
    if (a && v && cJSON_AddItemToArray(a, v))
        return a;
    cJSON_Delete(v);
    cJSON_Delete(a);
    return NULL;
}

/* Fails the exchange with -32022 and message; its data names the
 * versions supported and the one requested (NULL: none was). */
static void unsupported_version(exchange *x, const char *requested,
                                const char *message)
{
    cJSON *data = cJSON_CreateObject();
    int ok = data != NULL;
    cJSON *supported = modern_versions();
    ok = ok && supported;
    kb_json_put_item(data, "supported", supported, &ok);
    if (requested)
        kb_json_put_str(data, "requested", requested, &ok);
    fail(x, UNSUPPORTED_VERSION, "%s", message);
    if (ok && !x->data)
        x->data = data;
    else
        cJSON_Delete(data);
}

static void do_discover(exchange *x)
{
    cJSON *r = new_result(x);
    add(x, r, "supportedVersions", modern_versions());
    add(x, r, "capabilities", capabilities(x));
    add(x, r, "instructions", cJSON_CreateString(x->server->instructions));
    modern_fields(x, 1);
}

static void do_tools_list(exchange *x)
{
    if (cJSON_GetObjectItemCaseSensitive(x->params, "cursor"))
        return fail(x, INVALID_PARAMS, "tools/list: unknown cursor (kb lists every "
                    "tool at once and gives no cursor)");
    cJSON *r = new_result(x);
    add(x, r, "tools", cJSON_Duplicate(x->server->tools, 1));
    modern_fields(x, 1);
}

/* A tools/call result: the text block, and on success the structured
 * content (which frees out). */
static void call_result(exchange *x, cJSON *out, const char *error_text)
{
    if (!(x->result = kb_mcp_call_result(out, error_text)))
        return out_of_memory(x);
    modern_fields(x, 0);
}

static void do_tools_call(exchange *x)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(x->params, "name");
    if (!cJSON_IsString(name))
        return fail(x, INVALID_PARAMS, "tools/call needs params.name, one of: %s",
                    x->server->names);
    const kb_tool *tool = find_tool(x->server, name->valuestring);
    if (!tool)
        return fail(x, INVALID_PARAMS, "unknown tool '%.*s' (tools: %s)",
                    kb_utf8_cut(name->valuestring, 64), name->valuestring,
                    x->server->names);
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(x->params, "arguments");
    if (cJSON_IsNull(args))
        args = NULL;
    if (args && !cJSON_IsObject(args))
        return fail(x, INVALID_PARAMS, "tools/call: params.arguments must be an object");
    kb_err err;
    kb_err_clear(&err);
    /* an agent's context always has a budget */
    kb_tool_ctx ctx = *x->ctx;
    if (!ctx.budget_tokens)
        ctx.budget_tokens = KB_TOOL_BUDGET_DEFAULT;
    kb_mcp_sampler sm;   /* the client's model for search's llm stage */
    ctx.llm = kb_mcp_sampling_lend(&sm, &x->s->client);
    /* the library, verify's settings: with this thread's store */
    kb_rc rc = kb_api_attach(ctx.store, tool, &x->server->env, &err);
    cJSON *out = NULL;
    double t0 = kb_now_ms();
    kb_err bad;   /* arguments the tool refuses: its error, answered the usual way */
    if (rc == KB_OK && x->modern && (tool->flags & KB_TOOL_NEEDS_VERIFY) &&
        kb_mcp_tasks_declared(x->params) && kb_tool_check_args(tool, args, &bad) == KB_OK) {
        int got = kb_mcp_task_call(x->server->tasks, &ctx, args, &x->result);
        if (got)
            return got < 0 ? out_of_memory(x) : modern_fields(x, 0);
    }
    if (rc == KB_OK)
        rc = kb_tool_run(tool, &ctx, args, &out, &err);
    kb_log_info("kb mcp: %s %s in %.1f ms%s%s", tool->name, rc == KB_OK ? "answered" : "failed",
                kb_now_ms() - t0, rc == KB_OK ? "" : ": ", rc == KB_OK ? "" : err.msg);
    if (rc == KB_ERR_NOMEM)
        return out_of_memory(x);
    /* anything else is the tool's own failure, for the agent to read */
    call_result(x, out, err.msg[0] ? err.msg : kb_rc_name(rc));
}

/* The cursor of a list request: kb lists everything at once. */
static int refuse_cursor(exchange *x, const char *method)
{
    if (!cJSON_GetObjectItemCaseSensitive(x->params, "cursor"))
        return 0;
    fail(x, INVALID_PARAMS, "%s: unknown cursor (kb lists everything at once "
         "and gives no cursor)", method);
    return 1;
}

/* ------------------------------------------------------------------ prompts */

static void do_prompts_list(exchange *x)
{
    if (refuse_cursor(x, "prompts/list"))
        return;
    cJSON *r = new_result(x);
    add(x, r, "prompts", kb_mcp_prompts_json());
    modern_fields(x, 1);
}

static void do_prompts_get(exchange *x)
{
    kb_tool_ctx ctx = *x->ctx;   /* an agent's context always has a budget */
    if (!ctx.budget_tokens)
        ctx.budget_tokens = KB_TOOL_BUDGET_DEFAULT;
    char msg[1024];
    cJSON *r = NULL;
    int code = kb_mcp_prompt_get(&ctx, x->params, &r, msg, sizeof msg);
    if (code)
        return fail(x, code, "%s", msg);
    x->result = r;
    modern_fields(x, 0);
}

/* tasks/get, tasks/update, tasks/cancel (the Tasks extension, 2026-07-28) */
static void do_tasks(exchange *x)
{
    cJSON *data = NULL;
    int code = kb_mcp_task_method(x->server->tasks, x->ctx, x->method, x->params,
                                  &x->result, x->message, sizeof x->message, &data);
    if (code) {
        char msg[sizeof x->message];
        snprintf(msg, sizeof msg, "%s", x->message);
        fail(x, code, "%s", msg);
        x->data = data;
        return;
    }
    modern_fields(x, 0);
}

/* ------------------------------------------------------------------ skills */

static void do_resources_list(exchange *x)
{
    if (refuse_cursor(x, "resources/list"))
        return;
    cJSON *r = new_result(x), *arr = cJSON_CreateArray();
    add(x, r, "resources", arr);
    const kb_skill_pub *lib = x->server->skills;
    for (size_t i = 0; !x->code && i < lib->n; i++)
        for (size_t j = 0; !x->code && j < lib->items[i].nfiles; j++) {
            cJSON *e = kb_skill_pub_resource_json(&lib->items[i], &lib->items[i].files[j]);
            if (!e || !cJSON_AddItemToArray(arr, e)) {
                cJSON_Delete(e);
                out_of_memory(x);
            }
        }
    modern_fields(x, 1);
}

static void do_templates_list(exchange *x)
{
    if (refuse_cursor(x, "resources/templates/list"))
        return;
    cJSON *r = new_result(x);
    add(x, r, "resourceTemplates", cJSON_CreateArray());
    modern_fields(x, 1);
}

/* An unknown resource: -32002 in the handshake era (its spec's code),
 * -32602 in 2026-07-28; the uri in data either way. */
static void no_resource(exchange *x, const char *uri, const char *what)
{
    fail(x, x->modern ? INVALID_PARAMS : RESOURCE_NOT_FOUND, "%s '%.*s' not found "
         "(resources/list or skills/list names them: skill://NAME/SKILL.md and "
         "the files beside it)", what, kb_utf8_cut(uri, 200), uri);
    cJSON *data = cJSON_CreateObject();
    if (data && cJSON_AddStringToObject(data, "uri", uri) && !x->data)
        x->data = data;
    else
        cJSON_Delete(data);
}

static void do_resources_read(exchange *x)
{
    const char *uri = param_string(x, "uri");
    if (!uri)
        return fail(x, INVALID_PARAMS, "resources/read needs params.uri, such as "
                    "skill://NAME/SKILL.md");
    const kb_skill_pub_file *f = kb_skill_pub_lookup(x->server->skills, uri, NULL);
    if (!f)
        return no_resource(x, uri, "resource");
    cJSON *r = new_result(x), *contents = cJSON_CreateArray(), *c = cJSON_CreateObject();
    if (contents && c && !cJSON_AddItemToArray(contents, c))
        c = (cJSON_Delete(c), NULL);
    add(x, r, "contents", contents);
    add(x, c, "uri", cJSON_CreateString(f->uri));
    add(x, c, "mimeType", cJSON_CreateString(f->mime));
    if (f->text) {
        add(x, c, "text", cJSON_CreateString(f->data));
    } else {
        char *b64 = kb_skill_pub_base64(f);
        add(x, c, "blob", b64 ? cJSON_CreateString(b64) : NULL);
        free(b64);
    }
    add(x, c, "_meta", kb_skill_pub_digest_meta(f));
    modern_fields(x, 1);
}

static void do_skills_list(exchange *x)
{
    if (refuse_cursor(x, "skills/list"))
        return;
    cJSON *r = new_result(x), *arr = cJSON_CreateArray();
    add(x, r, "skills", arr);
    for (size_t i = 0; !x->code && i < x->server->skills->n; i++) {
        cJSON *e = kb_skill_pub_skill_json(&x->server->skills->items[i]);
        if (!e || !cJSON_AddItemToArray(arr, e)) {
            cJSON_Delete(e);
            out_of_memory(x);
        }
    }
    modern_fields(x, 1);
}

static void do_skills_get(exchange *x)
{
    const char *uri = param_string(x, "uri");
    if (!uri)
        return fail(x, INVALID_PARAMS, "skills/get needs params.uri, a skill's "
                    "SKILL.md: skill://NAME/SKILL.md");
    const kb_skill_pub_skill *s = NULL;
    const kb_skill_pub_file *f = kb_skill_pub_lookup(x->server->skills, uri, &s);
    if (!f || strcmp(f->name, "SKILL.md") != 0) {
        /* the extension's code for this, in either era */
        fail(x, INVALID_PARAMS, "skills/get: '%.*s' is not a skill's SKILL.md "
             "(skills/list names them)", kb_utf8_cut(uri, 200), uri);
        return;
    }
    cJSON *r = new_result(x);
    add(x, r, "skill", kb_skill_pub_skill_json(s));
    modern_fields(x, 1);
}

/* ------------------------------------------------------------------ routing */

/* A method kb serves in some era (so that, before initialize, it is "not
 * yet" rather than "no such method"). */
static int known_method(const char *m)
{
    return !strcmp(m, "tools/list") || !strcmp(m, "tools/call") ||
           !strcmp(m, "ping") || !strcmp(m, "server/discover") ||
           !strcmp(m, "prompts/list") || !strcmp(m, "prompts/get") ||
           !strncmp(m, "resources/", 10) || !strncmp(m, "skills/", 7);
}

static void unknown_method(exchange *x)
{
    if ((!strncmp(x->method, "resources/", 10) || !strncmp(x->method, "skills/", 7)) &&
        !x->server->skills)
        return fail(x, METHOD_NOT_FOUND, "method '%.*s' not found: this server "
                    "serves no skill library, hence no resources (--skills DIR)",
                    kb_utf8_cut(x->method, 64), x->method);
    fail(x, METHOD_NOT_FOUND, "method '%.*s' not found", kb_utf8_cut(x->method, 64),
         x->method);
}

/* The methods both eras share. */
static void dispatch(exchange *x)
{
    int skills = x->server->skills != NULL;
    if (!strcmp(x->method, "tools/list"))
        do_tools_list(x);
    else if (!strcmp(x->method, "tools/call"))
        do_tools_call(x);
    else if (!strcmp(x->method, "prompts/list"))
        do_prompts_list(x);
    else if (!strcmp(x->method, "prompts/get"))
        do_prompts_get(x);
    else if (skills && !strcmp(x->method, "resources/list"))
        do_resources_list(x);
    else if (skills && !strcmp(x->method, "resources/read"))
        do_resources_read(x);
    else if (skills && !strcmp(x->method, "resources/templates/list"))
        do_templates_list(x);
    else if (skills && !strcmp(x->method, "skills/list"))
        do_skills_list(x);
    else if (skills && !strcmp(x->method, "skills/get"))
        do_skills_get(x);
    else if (x->modern && x->server->allow_verify && !strncmp(x->method, "tasks/", 6))
        do_tasks(x);
    else
        unknown_method(x);
}

/* 2026-07-28's checks of a request, in the Python SDK's order: the
 * envelope in _meta, the HTTP headers against the body, the version. */
static void check_envelope(exchange *x)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(x->params, "_meta");
    if (!cJSON_IsObject(meta))
        return fail(x, INVALID_PARAMS, "params._meta must be an object carrying "
                    "'" META_VERSION "' and '" META_CAPABILITIES "' (protocol %s)",
                    KB_MCP_VERSION_MODERN);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(meta, META_VERSION);
    const cJSON *caps = cJSON_GetObjectItemCaseSensitive(meta, META_CAPABILITIES);
    if (!v || !caps)
        return fail(x, INVALID_PARAMS, "params._meta lacks '%s'",
                    !v ? META_VERSION : META_CAPABILITIES);
    if (x->t) {
        char buf[512];
        const char *name = kb_mcp_header_value(x->t->name, buf, sizeof buf);
        const char *body_name = param_string(x, "name");
        if (!x->t->protocol_version || !cJSON_IsString(v) ||
            strcmp(x->t->protocol_version, v->valuestring))
            return fail(x, HEADER_MISMATCH, "the MCP-Protocol-Version header "
                        "does not match params._meta's protocol version");
        if (!x->t->method || strcmp(x->t->method, x->method))
            return fail(x, HEADER_MISMATCH, "the Mcp-Method header does not "
                        "match the method");
        if (!strcmp(x->method, "tools/call") && body_name &&
            (!name || strcmp(name, body_name)))
            return fail(x, HEADER_MISMATCH, "the Mcp-Name header does not match "
                        "params.name");
        const char *body_task = param_string(x, "taskId");
        if (!strncmp(x->method, "tasks/", 6) && body_task && (!name || strcmp(name, body_task)))
            return fail(x, HEADER_MISMATCH, "the Mcp-Name header does not match "
                        "params.taskId");
        const char *body_uri = param_string(x, "uri");
        if (!strcmp(x->method, "resources/read") && body_uri &&
            (!name || strcmp(name, body_uri)))
            return fail(x, HEADER_MISMATCH, "the Mcp-Name header does not match "
                        "params.uri");
    }
    if (!cJSON_IsString(v))
        return fail(x, INVALID_PARAMS, "params._meta's '" META_VERSION "' must "
                    "be a string");
    if (!cJSON_IsObject(caps))
        return fail(x, INVALID_PARAMS, "params._meta's '" META_CAPABILITIES "' "
                    "must be an object (empty: none)");
    if (strcmp(v->valuestring, KB_MCP_VERSION_MODERN)) {
        char message[160];
        snprintf(message, sizeof message, "unsupported protocol version '%.*s' "
                 "(supported: %s; %s and %s through initialize)",
                 kb_utf8_cut(v->valuestring, 32), v->valuestring,
                 KB_MCP_VERSION_MODERN, handshake_versions[0], handshake_versions[1]);
        unsupported_version(x, v->valuestring, message);
    }
}

/* A request of the 2026-07-28 era. */
static void serve_modern(exchange *x)
{
    x->modern = 1;
    check_envelope(x);
    if (x->code)
        return;
    if (!strcmp(x->method, "server/discover"))
        do_discover(x);
    else if (!strcmp(x->method, "ping"))
        fail(x, METHOD_NOT_FOUND, "method 'ping' not found: %s has none",
             KB_MCP_VERSION_MODERN);
    else
        dispatch(x);
}

/* A request of the handshake era (or before any). */
static void serve_handshake(exchange *x, mcp_era era)
{
    if (!strcmp(x->method, "ping")) {
        new_result(x);
        return;
    }
    if (era == ERA_NONE) {
        if (known_method(x->method) && strcmp(x->method, "server/discover"))
            return fail(x, INVALID_REQUEST, "not initialized: send 'initialize' "
                        "first, or use protocol %s's per-request _meta",
                        KB_MCP_VERSION_MODERN);
        return unknown_method(x);
    }
    if (x->t && x->t->protocol_version &&
        strcmp(x->t->protocol_version, x->s->version))
        return fail(x, INVALID_REQUEST, "the MCP-Protocol-Version header '%.*s' "
                    "is not this session's '%s'", kb_utf8_cut(x->t->protocol_version, 32),
                    x->t->protocol_version,
                    x->s->version);
    dispatch(x);
}

/* Routes a request to its era; the session's state read and changed under
 * its lock, the method run outside it. */
static void serve_request(exchange *x)
{
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(x->params, "_meta");
    int enveloped = cJSON_GetObjectItemCaseSensitive(meta, META_VERSION) != NULL;
    int is_init = !strcmp(x->method, "initialize");
    pthread_mutex_lock(&x->s->lock);
    mcp_era era = x->s->era;
    if (is_init) {
        if (era == ERA_MODERN)
            unsupported_version(x, param_string(x, "protocolVersion"),
                                "this connection serves protocol " KB_MCP_VERSION_MODERN
                                ", which has no initialize");
        else if (era == ERA_HANDSHAKE)
            fail(x, INVALID_REQUEST, "already initialized (protocol %s)", x->s->version);
        else
            do_initialize(x);
        pthread_mutex_unlock(&x->s->lock);
        return;
    }
    int modern = era == ERA_MODERN ||
                 (era == ERA_NONE && (enveloped || !strcmp(x->method, "server/discover")));
    if (modern && era == ERA_NONE && enveloped)
        x->s->era = ERA_MODERN;   /* the first enveloped request decides */
    pthread_mutex_unlock(&x->s->lock);
    if (era == ERA_HANDSHAKE && enveloped)
        return fail(x, INVALID_REQUEST, "this connection serves protocol %s "
                    "(initialized); requests carrying the %s _meta envelope are "
                    "not accepted on it", x->s->version, KB_MCP_VERSION_MODERN);
    if (modern)
        serve_modern(x);
    else
        serve_handshake(x, era);
}

/* ------------------------------------------------------------------ messages */

/* The reply's text for the exchange's outcome. */
static char *reply_text(exchange *x)
{
    cJSON *r = cJSON_CreateObject();
    int ok = r && cJSON_AddStringToObject(r, "jsonrpc", "2.0");
    if (x->id) {
        cJSON *id = cJSON_Duplicate(x->id, 1);
        ok = ok && id;
        kb_json_put_item(r, "id", id, &ok);
    }
    if (x->code) {
        cJSON *e = cJSON_CreateObject();
        ok = ok && e;
        kb_json_put_num(e, "code", x->code, &ok);
        kb_json_put_str(e, "message", x->message, &ok);
        if (x->data) {
            kb_json_put_item(e, "data", x->data, &ok);
            x->data = NULL;
        }
        kb_json_put_item(r, "error", e, &ok);
    } else {
        ok = ok && x->result;
        kb_json_put_item(r, "result", x->result, &ok);
        x->result = NULL;
    }
    char *text = ok ? cJSON_PrintUnformatted(r) : NULL;
    cJSON_Delete(r);
    return text;
}

/* Streamable HTTP's status for a reply (the Python SDK's table for
 * 2026-07-28; the handshake era answers JSON-RPC errors with 200). */
static int http_status(const exchange *x)
{
    if (!x->code || x->code == INTERNAL_ERROR)
        return 200;
    if (x->code == PARSE_ERROR || x->code == INVALID_REQUEST)
        return 400;
    if (!x->modern)
        return 200;
    return x->code == METHOD_NOT_FOUND ? 404 : 400;
}

/* Checks the message's frame and reads what it asks: sets x->method,
 * x->id and x->params, or fails the exchange. Returns 1 for a message
 * that wants no reply (a notification, a client's response). */
static int read_message(exchange *x, const cJSON *msg)
{
    if (cJSON_IsArray(msg)) {
        fail(x, INVALID_REQUEST, "a batch (an array of %d messages): MCP takes "
             "one message at a time", cJSON_GetArraySize(msg));
        return 0;
    }
    if (!cJSON_IsObject(msg)) {
        fail(x, INVALID_REQUEST, "a message must be a JSON-RPC object");
        return 0;
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
    const cJSON *jsonrpc = cJSON_GetObjectItemCaseSensitive(msg, "jsonrpc");
    if (kb_mcp_valid_id(id))
        x->id = id;
    if (!method && id && (cJSON_GetObjectItemCaseSensitive(msg, "result") ||
                          cJSON_GetObjectItemCaseSensitive(msg, "error")))
        return 1;   /* a response: kb sends no requests, so nothing awaits it */
    if (!cJSON_IsString(jsonrpc) || strcmp(jsonrpc->valuestring, "2.0")) {
        fail(x, INVALID_REQUEST, "'jsonrpc' must be \"2.0\"");
        return 0;
    }
    if (id && !x->id) {
        fail(x, INVALID_REQUEST, "'id' must be a string or an integer");
        return 0;
    }
    if (!cJSON_IsString(method) || !*method->valuestring) {
        fail(x, INVALID_REQUEST, "'method' must be a non-empty string");
        return 0;
    }
    x->method = method->valuestring;
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
    if (params && !cJSON_IsNull(params) && !cJSON_IsObject(params)) {
        fail(x, INVALID_PARAMS, "'params' must be an object");
        return !id;
    }
    x->params = cJSON_IsObject(params) ? params : NULL;
    return !id;
}

static void notification(exchange *x)
{
    /* notifications/initialized: nothing waits on it (tools/call is served
     * once initialize is answered); cancellations cannot reach a call in
     * progress on one thread */
    kb_log_debug("mcp: notification %s", x->method);
}

kb_rc kb_mcp_handle(kb_mcp *server, kb_mcp_session *s, kb_tool_ctx *ctx,
                    const char *msg, size_t len, const kb_mcp_transport *t,
                    kb_mcp_reply *reply, kb_err *err)
{
    memset(reply, 0, sizeof *reply);
    reply->http_status = 202;
    if (len > KB_MCP_MESSAGE_MAX) {
        reply->http_status = 400;
        reply->text = kb_mcp_oversized_reply(len);
        return reply->text ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    exchange x = { .server = server, .s = s, .ctx = ctx, .t = t };
    cJSON *root = NULL;
    size_t bad = 0;
    int quiet = 0;
    const char *why = kb_mcp_bad_text(msg, len, &bad);
    if (why) {
        fail(&x, PARSE_ERROR, "%s at offset %zu", why, bad);
    } else {
        const char *end = NULL;
        root = cJSON_ParseWithLengthOpts(msg, len, &end, 0);
        while (root && end < msg + len && strchr(" \t\r\n", *end) && *end)
            end++;
        if (!root || end != msg + len)   /* end: where parsing stopped */
            fail(&x, PARSE_ERROR, "not JSON (at offset %zu)",
                 end ? (size_t)(end - msg) : (size_t)0);
        else
            quiet = read_message(&x, root);
    }
    if (!x.code && x.method)
        (quiet ? notification : serve_request)(&x);
    if (quiet && !x.nomem) {   /* no reply, even to a notification's error */
        cJSON_Delete(x.result);
        cJSON_Delete(x.data);
        cJSON_Delete(root);
        return KB_OK;
    }
    reply->http_status = http_status(&x);
    reply->initialized = !x.code && x.method && !strcmp(x.method, "initialize");
    reply->text = reply_text(&x);   /* before root goes: x.id points into it */
    cJSON_Delete(x.result);
    cJSON_Delete(x.data);
    cJSON_Delete(root);
    if (!reply->text)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory making a reply");
    return KB_OK;
}

char *kb_mcp_oversized_reply(size_t len)
{
    exchange x = { 0 };
    fail(&x, INVALID_REQUEST, "a message of %zu bytes: the limit is %u bytes",
         len, KB_MCP_MESSAGE_MAX);
    return reply_text(&x);
}
