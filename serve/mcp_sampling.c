/* mcp_sampling.c - MCP sampling as the llm relevance stage's model (serve.h,
 * "mcp_sampling.c"): where kb mcp's client declared the sampling
 * capability and kb has no LLM endpoint of its own, search's llm stage
 * sends its listwise request to the client as sampling/createMessage and
 * reads the text of the reply with its own parser (query/rerank_llm.c). */
#include "serve/serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The request's ids: "kb-sampling-N", N counting up in the process. */
static unsigned long next_id;

char *kb_mcp_sampling_request(const char *id, const char *system, const char *user,
                              long max_tokens)
{
    cJSON *r = cJSON_CreateObject();
    int ok = r != NULL;
    kb_json_put_str(r, "jsonrpc", "2.0", &ok);
    kb_json_put_str(r, "id", id, &ok);
    kb_json_put_str(r, "method", "sampling/createMessage", &ok);
    cJSON *p = kb_json_put_obj(r, "params", &ok);
    cJSON *msgs = kb_json_put_arr(p, "messages", &ok);
    cJSON *m = ok ? kb_json_push_obj(msgs, &ok) : NULL;
    kb_json_put_str(m, "role", "user", &ok);
    cJSON *c = kb_json_put_obj(m, "content", &ok);
    kb_json_put_str(c, "type", "text", &ok);
    kb_json_put_str(c, "text", user, &ok);
    kb_json_put_str(p, "systemPrompt", system, &ok);
    kb_json_put_num(p, "maxTokens", (double)max_tokens, &ok);
    kb_json_put_num(p, "temperature", 0, &ok);
    kb_json_put_str(p, "includeContext", "none", &ok);
    /* ordering passages wants a model that reads well, not the cheapest */
    cJSON *pref = kb_json_put_obj(p, "modelPreferences", &ok);
    kb_json_put_num(pref, "intelligencePriority", 0.8, &ok);
    kb_json_put_num(pref, "speedPriority", 0.5, &ok);
    kb_json_put_num(pref, "costPriority", 0.3, &ok);
    char *text = ok ? cJSON_PrintUnformatted(r) : NULL;
    cJSON_Delete(r);
    return text;
}

/* Appends the text of one content block (a text block; others add
 * nothing) to b. */
static kb_rc put_block(const cJSON *block, kb_buf *b)
{
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(block, "type"));
    const char *text = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(block, "text"));
    if (!type || strcmp(type, "text") || !text)
        return KB_OK;
    return kb_buf_printf(b, "%s%s", b->len ? "\n" : "", text);
}

kb_rc kb_mcp_sampling_reply(const char *response, char **text, char *model, size_t size,
                            kb_err *err)
{
    *text = NULL;
    if (size)
        model[0] = '\0';
    cJSON *r = cJSON_Parse(response);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(r, "result");
    kb_rc rc = KB_OK;
    if (cJSON_IsObject(e)) {
        const char *msg = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "message"));
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
        rc = kb_err_set(err, KB_ERR_NET, "the client did not sample: %.*s (%d)",
                        msg ? kb_utf8_cut(msg, 160) : 0, msg ? msg : "",
                        cJSON_IsNumber(code) ? code->valueint : 0);
    } else if (!cJSON_IsObject(res)) {
        rc = kb_err_set(err, KB_ERR_PARSE, "the client's sampling response is neither "
                        "a result nor an error");
    }
    kb_buf b;
    kb_buf_init(&b, 0);
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(res, "content");
    const cJSON *block;
    if (rc == KB_OK && cJSON_IsArray(content)) {
        cJSON_ArrayForEach(block, content)
            if (rc == KB_OK)
                rc = put_block(block, &b);
    } else if (rc == KB_OK) {
        rc = put_block(content, &b);
    }
    if (rc == KB_ERR_NOMEM)
        kb_err_set(err, rc, "out of memory");
    else if (rc == KB_OK && !b.len)
        rc = kb_err_set(err, KB_ERR_PARSE, "the client's sampling result holds no text");
    const char *m = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(res, "model"));
    if (rc == KB_OK && m && size)
        snprintf(model, size, "%.*s", kb_utf8_cut(m, size - 1), m);
    if (rc == KB_OK)
        *text = kb_buf_finish(&b, rc);
    else
        kb_buf_release(&b);
    cJSON_Delete(r);
    return rc;
}

/* kb_llm_lent.complete over the client: one sampling/createMessage. */
static kb_rc sample(void *ctx, const char *system, const char *user, long max_tokens,
                    long timeout_ms, char **text, char *model, size_t size, kb_err *err)
{
    const kb_mcp_client *c = ((kb_mcp_sampler *)ctx)->client;
    char id[48];
    snprintf(id, sizeof id, "kb-sampling-%lu",
             __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED));
    char *request = kb_mcp_sampling_request(id, system, user, max_tokens);
    if (!request)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    char *response = NULL;
    double t0 = kb_now_ms();
    kb_rc rc = c->request(c->ctx, id, request, timeout_ms, &response, err);
    free(request);
    if (rc == KB_OK)
        rc = kb_mcp_sampling_reply(response, text, model, size, err);
    kb_log_info("kb mcp: sampling %s %s in %.0f ms%s%s", id, rc == KB_OK ? "answered" : "failed",
                kb_now_ms() - t0, rc == KB_OK ? "" : ": ", rc == KB_OK ? "" : err->msg);
    free(response);
    return rc;
}

void kb_mcp_client_hello(kb_mcp_client *c, const cJSON *params, const char *version)
{
    const cJSON *client = cJSON_GetObjectItemCaseSensitive(params, "clientInfo");
    const cJSON *caps = cJSON_GetObjectItemCaseSensitive(params, "capabilities");
    const char *who = cJSON_GetStringValue(cJSON_GetObjectItem(client, "name"));
    kb_log_debug("mcp: initialize from %s: %s", who ? who : "a client", version);
    c->sampling = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(caps, "sampling"));
    snprintf(c->name, sizeof c->name, "%s", who ? who : "client");
}

const kb_llm_lent *kb_mcp_sampling_lend(kb_mcp_sampler *sm, const kb_mcp_client *c)
{
    if (!c->sampling || !c->request)
        return NULL;
    sm->client = c;
    snprintf(sm->name, sizeof sm->name, "sampling: %.*s", kb_utf8_cut(c->name, 60), c->name);
    sm->lent = (kb_llm_lent){ .complete = sample, .ctx = sm, .name = sm->name,
                              .via = "sampling" };
    return &sm->lent;
}
