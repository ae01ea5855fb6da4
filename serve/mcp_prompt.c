/* mcp_prompt.c - MCP's prompts (serve.h, "mcp_prompt.c"): the generator's
 * prompt for a kernel task as one prompt, write-kernel, with the task as
 * its argument, which an agent offers its user as a command
 * (/mcp__kb__write-kernel gelu) - the prompt tool's text, as a message. */
#include "serve/serve.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INVALID_PARAMS (-32602)
#define INTERNAL_ERROR (-32603)

#define PROMPT_NAME "write-kernel"

/* The arguments, in order: name, description, required. */
static const struct {
    const char *name, *description;
    int required;
} args[] = {
    { "task", "the kernel task: a folder of kb's task library such as gelu, "
      "softmax, layernorm, reduce_sum, transpose, gemm_f32 or gemm_bf16", 1 },
    { "feedback", "the last attempts' verdicts (verify's reasons, compile logs, "
      "timings), carried in their own section", 0 },
    { "parent", "a kernel to refine, carried in its own section", 0 },
    { "budget_tokens", "the whole prompt within about this many tokens "
      "(1000-200000, default 8000; retrieved passages are cut first; the least "
      "that fits depends on the task)", 0 },
};
#define NARGS (sizeof args / sizeof args[0])

cJSON *kb_mcp_prompts_json(void)
{
    cJSON *list = cJSON_CreateArray(), *p = cJSON_CreateObject(), *a = cJSON_CreateArray();
    int ok = list && p && a;
    kb_json_put_str(p, "name", PROMPT_NAME, &ok);
    kb_json_put_str(p, "title", "Write a CUDA kernel for a kb task", &ok);
    kb_json_put_str(p, "description", "kb's generator prompt for a kernel task: the "
                    "GPU's profile, the task and its reference kernel, the team's "
                    "verified skills, exemplar kernels and documentation retrieved for "
                    "it (each cited by its link), the last attempts when given, and the "
                    "output contract. Write the kernel from it, then check it with the "
                    "verify tool.", &ok);
    for (size_t i = 0; ok && i < NARGS; i++) {
        cJSON *e = cJSON_CreateObject();
        ok = e && cJSON_AddItemToArray(a, e);
        if (!ok)
            cJSON_Delete(e);
        kb_json_put_str(e, "name", args[i].name, &ok);
        kb_json_put_str(e, "description", args[i].description, &ok);
        kb_json_put_bool(e, "required", args[i].required, &ok);
    }
    kb_json_put_item(p, "arguments", a, &ok);
    if (ok && cJSON_AddItemToArray(list, p))
        return list;
    cJSON_Delete(p);
    cJSON_Delete(list);
    return NULL;
}

/* The prompt tool's arguments for prompts/get's (strings all): budget_tokens
 * a whole number, whose range the tool checks. NULL with msg set when one
 * is wrong. */
static cJSON *tool_args(const cJSON *given, char *msg, size_t size)
{
    cJSON *out = cJSON_CreateObject();
    const cJSON *v;
    cJSON_ArrayForEach(v, given) {
        size_t i = 0;
        while (i < NARGS && strcmp(args[i].name, v->string) != 0)
            i++;
        if (i < NARGS && cJSON_IsString(v) && !*v->valuestring)
            continue;   /* "" is absent: forms send every field they show */
        if (i == NARGS || !cJSON_IsString(v)) {
            snprintf(msg, size, i == NARGS ? "prompts/get: " PROMPT_NAME " takes no "
                     "argument '%.*s' (it takes task, feedback, parent, budget_tokens)"
                     : "prompts/get: argument '%.*s' must be a string",
                     kb_utf8_cut(v->string, 64), v->string);
            cJSON_Delete(out);
            return NULL;
        }
        if (!out)
            return NULL;
        if (strcmp(v->string, "budget_tokens") == 0) {
            long n;
            if (kb_parse_long(v->valuestring, LONG_MIN, LONG_MAX, &n) != KB_OK) {
                snprintf(msg, size, "prompts/get: budget_tokens must be a whole "
                         "number, not '%.*s'", kb_utf8_cut(v->valuestring, 32),
                         v->valuestring);
                cJSON_Delete(out);
                return NULL;
            }
            if (!cJSON_AddNumberToObject(out, v->string, (double)n))
                return cJSON_Delete(out), NULL;
        } else if (!cJSON_AddStringToObject(out, v->string, v->valuestring)) {
            return cJSON_Delete(out), NULL;
        }
    }
    if (out && !cJSON_GetObjectItemCaseSensitive(out, "task")) {
        snprintf(msg, size, "prompts/get: " PROMPT_NAME " needs the argument task, "
                 "such as gelu");
        cJSON_Delete(out);
        return NULL;
    }
    return out;
}

/* The result: the prompt's description and one user message holding the
 * system text, then the user text (a prompt has no system role). */
static cJSON *get_result(const cJSON *out, const char *task)
{
    const char *sys = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(out, "system"));
    const char *user = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(out, "user"));
    kb_buf text, desc;
    kb_buf_init(&text, 0);
    kb_buf_init(&desc, 0);
    kb_rc rc = kb_buf_printf(&text, "%s\n\n%s", sys ? sys : "", user ? user : "");
    if (rc == KB_OK)
        rc = kb_buf_printf(&desc, "kb's generator prompt for task %s", task);
    cJSON *r = cJSON_CreateObject(), *msgs = cJSON_CreateArray(), *m = cJSON_CreateObject(),
          *c = cJSON_CreateObject();
    int ok = rc == KB_OK && r && msgs && m && c;
    kb_json_put_str(c, "type", "text", &ok);
    kb_json_put_str(c, "text", text.data, &ok);
    kb_json_put_str(m, "role", "user", &ok);
    kb_json_put_item(m, "content", c, &ok);
    if (ok && !cJSON_AddItemToArray(msgs, m))
        ok = 0;
    else
        m = NULL;
    kb_json_put_str(r, "description", desc.data, &ok);
    kb_json_put_item(r, "messages", msgs, &ok);
    kb_buf_release(&text);
    kb_buf_release(&desc);
    if (ok)
        return r;
    cJSON_Delete(m);
    cJSON_Delete(r);
    return NULL;
}

int kb_mcp_prompt_get(kb_tool_ctx *ctx, const cJSON *params, cJSON **result,
                      char *msg, size_t size)
{
    *result = NULL;
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(params, "name"));
    if (!name) {
        snprintf(msg, size, "prompts/get needs params.name: " PROMPT_NAME);
        return INVALID_PARAMS;
    }
    if (strcmp(name, PROMPT_NAME) != 0) {
        snprintf(msg, size, "no prompt '%.*s' (prompts: " PROMPT_NAME ")",
                 kb_utf8_cut(name, 64), name);
        return INVALID_PARAMS;
    }
    const cJSON *given = cJSON_GetObjectItemCaseSensitive(params, "arguments");
    if (given && !cJSON_IsObject(given) && !cJSON_IsNull(given)) {
        snprintf(msg, size, "prompts/get: params.arguments must be an object");
        return INVALID_PARAMS;
    }
    msg[0] = '\0';
    cJSON *a = tool_args(cJSON_IsObject(given) ? given : NULL, msg, size);
    if (!a)
        return msg[0] ? INVALID_PARAMS : INTERNAL_ERROR;
    kb_err err;
    kb_err_clear(&err);
    cJSON *out = NULL;
    kb_rc rc = kb_tool_run(kb_tool_find("prompt"), ctx, a, &out, &err);
    if (rc == KB_OK && !(*result = get_result(out, cJSON_GetStringValue(
                                                       cJSON_GetObjectItem(a, "task")))))
        rc = kb_err_set(&err, KB_ERR_NOMEM, "out of memory");
    cJSON_Delete(out);
    cJSON_Delete(a);
    if (rc == KB_OK)
        return 0;
    snprintf(msg, size, "%s", err.msg[0] ? err.msg : kb_rc_name(rc));
    /* a task that is not there, a budget too small: the arguments' fault */
    return rc == KB_ERR_USAGE || rc == KB_ERR_NOTFOUND ? INVALID_PARAMS : INTERNAL_ERROR;
}
