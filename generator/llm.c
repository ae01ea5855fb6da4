/* llm.c - the loop's minimal LLM clients (gen.h, "llm.c"): one plain
 * (non-streaming) request to an OpenAI-compatible /v1/chat/completions or
 * Anthropic's /v1/messages through kb/http.c. A stand-in written by the
 * loop's branch until branch 'llm' delivers the full version. */
#include "generator/gen.h"
#include "kb/http.h"

#include <stdlib.h>
#include <string.h>

kb_rc kb_llm_opts_from_config(const kb_config *config, kb_llm_opts *o, kb_err *err)
{
    memset(o, 0, sizeof *o);
    o->max_tokens = 4096;
    o->temperature = -1;
    o->timeout_ms = 300000;
    o->max_retries = 3;
    if (!config || !config->llm_url)
        return kb_err_set(err, KB_ERR_USAGE, "no LLM: set KB_LLM_URL (and KB_LLM_MODEL)");
    o->url = config->llm_url;
    o->model = config->llm_model ? config->llm_model : "";
    o->api_key = config->llm_api_key;
    o->api = strstr(o->url, "/messages") ? KB_LLM_ANTHROPIC : KB_LLM_OPENAI;
    return KB_OK;
}

void kb_llm_reply_init(kb_llm_reply *r)
{
    memset(r, 0, sizeof *r);
}

void kb_llm_reply_release(kb_llm_reply *r)
{
    free(r->text);
    free(r->finish_reason);
    free(r->request_json);
    free(r->raw);
    memset(r, 0, sizeof *r);
}

kb_rc kb_llm_complete(const kb_llm_opts *o, const kb_llm_request *req, kb_llm_reply *out,
                      kb_err *err)
{
    kb_llm_reply_release(out);
    int anth = o->api == KB_LLM_ANTHROPIC;
    cJSON *b = cJSON_CreateObject(), *msgs = b ? cJSON_AddArrayToObject(b, "messages") : NULL;
    cJSON *m = cJSON_CreateObject();
    if (!msgs || !m) {
        cJSON_Delete(b);
        cJSON_Delete(m);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    cJSON_AddStringToObject(b, "model", o->model ? o->model : "");
    long mt = req->max_tokens > 0 ? req->max_tokens : o->max_tokens;
    cJSON_AddNumberToObject(b, "max_tokens", (double)mt);
    if (anth) {
        cJSON_AddStringToObject(b, "system", req->system ? req->system : "");
    } else {
        cJSON *s = cJSON_CreateObject();
        cJSON_AddStringToObject(s, "role", "system");
        cJSON_AddStringToObject(s, "content", req->system ? req->system : "");
        cJSON_AddItemToArray(msgs, s);
    }
    cJSON_AddStringToObject(m, "role", "user");
    cJSON_AddStringToObject(m, "content", req->user ? req->user : "");
    cJSON_AddItemToArray(msgs, m);
    if (o->temperature >= 0)
        cJSON_AddNumberToObject(b, "temperature", o->temperature);
    out->request_json = cJSON_PrintUnformatted(b);
    cJSON_Delete(b);
    if (!out->request_json)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    const char *hdrs[] = { "anthropic-version: 2023-06-01", NULL };
    kb_http_request hr = { .method = KB_HTTP_POST, .url = o->url,
                           .headers = anth ? hdrs : NULL, .body = out->request_json,
                           .body_len = strlen(out->request_json), .auth_key = o->api_key,
                           .auth_header = anth ? "x-api-key" : NULL, .subject = "the LLM" };
    kb_http_opts ho;
    kb_http_opts_default(&ho);
    if (o->timeout_ms > 0)
        ho.timeout_ms = o->timeout_ms;
    ho.max_retries = o->max_retries;
    ho.error_excerpt = 200;
    kb_http_response resp;
    kb_http_response_init(&resp);
    double t = kb_now_ms();
    kb_rc rc = kb_http_perform(&hr, &ho, &resp, err);
    out->ms = kb_now_ms() - t;
    out->attempts = resp.attempts;
    out->raw = kb_strdup(resp.body.data ? resp.body.data : "");
    cJSON *j = rc == KB_OK ? cJSON_Parse(resp.body.data ? resp.body.data : "") : NULL;
    if (rc == KB_OK && !j)
        rc = kb_err_set(err, KB_ERR_PARSE, "the LLM's reply is not JSON");
    const char *text = NULL, *fin = NULL;
    if (rc == KB_OK && anth) {
        const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "content"), 0);
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(c0, "text");
        text = cJSON_IsString(tx) ? tx->valuestring : NULL;
        const cJSON *sr = cJSON_GetObjectItemCaseSensitive(j, "stop_reason");
        fin = cJSON_IsString(sr) ? sr->valuestring : "";
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
        out->prompt_tokens = (long)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(u, "input_tokens"));
        out->completion_tokens = (long)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(u, "output_tokens"));
    } else if (rc == KB_OK) {
        const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(c0, "message");
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(msg, "content");
        text = cJSON_IsString(tx) ? tx->valuestring : NULL;
        const cJSON *fr = cJSON_GetObjectItemCaseSensitive(c0, "finish_reason");
        fin = cJSON_IsString(fr) ? fr->valuestring : "";
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
        out->prompt_tokens = (long)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens"));
        out->completion_tokens = (long)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(u, "completion_tokens"));
    }
    if (out->prompt_tokens < 0)
        out->prompt_tokens = 0;
    if (out->completion_tokens < 0)
        out->completion_tokens = 0;
    if (rc == KB_OK && !text)
        rc = kb_err_set(err, KB_ERR_PARSE, "the LLM's reply has no text");
    out->text = kb_strdup(text ? text : "");
    out->finish_reason = kb_strdup(fin ? fin : "");
    cJSON_Delete(j);
    kb_http_response_release(&resp);
    return rc;
}
