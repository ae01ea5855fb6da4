/*
 * llm.h - kb's LLM clients (kb/llm.c) on kb/http.c: OpenAI-compatible
 * /v1/chat/completions and Anthropic /v1/messages, configured by
 * KB_LLM_URL, KB_LLM_MODEL, KB_LLM_API_KEY and KB_LLM_API. The generator
 * (kernels) and query expansion (query/expand.c) both use them, so they
 * live on the ground floor beside the HTTP client: query/ may not call
 * generator/ (docs/design.md, Layout). Library code: nothing is printed.
 */
#ifndef KB_LLM_H
#define KB_LLM_H

#include "kb/kb.h"
#include "kb/config.h"

typedef enum { KB_LLM_OPENAI = 0, KB_LLM_ANTHROPIC } kb_llm_api;

typedef struct {
    kb_llm_api api;
    const char *url;          /* the endpoint: a .../v1/chat/completions or
                                 .../v1/messages URL, or a base URL that the
                                 API's path is appended to */
    const char *model;
    const char *api_key;      /* NULL or "": none; never logged, never in a
                                 transcript or an error message */
    int stream;               /* 1: Server-Sent Events, and a plain request
                                 when the server does not stream */
    long max_tokens;          /* the reply's cap (Anthropic requires one) */
    double temperature;       /* < 0: the server's default */
    long timeout_ms;          /* one attempt; retries as kb/http.h says */
    int max_retries;
} kb_llm_opts;

/* Defaults, then KB_LLM_URL, KB_LLM_MODEL, KB_LLM_API_KEY and KB_LLM_API
 * from config (the strings are config's). KB_ERR_USAGE when no URL is set
 * or the API is neither openai nor anthropic. */
kb_rc kb_llm_opts_from_config(const kb_config *config, kb_llm_opts *o,
                              kb_err *err);

/* One request: a system prompt and one user message. */
typedef struct {
    const char *system;
    const char *user;
    long max_tokens;          /* 0: the client's */
} kb_llm_request;

/* One reply. Strings are owned ("" when absent); released with
 * kb_llm_reply_release. request_json is the body that was sent (it holds
 * no key), raw the reply as it came (the SSE events as lines of JSON for a
 * stream), both for the transcript. */
typedef struct {
    char *text;
    char *finish_reason;      /* "stop", "length", "end_turn", ... */
    long prompt_tokens, completion_tokens;
    int attempts;             /* HTTP requests made */
    int streamed;
    double ms;
    char *request_json;
    char *raw;
} kb_llm_reply;

void kb_llm_reply_init(kb_llm_reply *r);
void kb_llm_reply_release(kb_llm_reply *r);

/* One completion through kb/http.c. Any number of threads may call it at
 * once with the same opts. A reply with no text, an error event in a
 * stream, a cut stream, a body that is not the API's JSON: KB_ERR_NET or
 * KB_ERR_PARSE with a message that says which; *out then holds what was
 * received (request_json, raw) for the transcript. out must have been
 * through kb_llm_reply_init; its old contents are released. */
kb_rc kb_llm_complete(const kb_llm_opts *o, const kb_llm_request *req,
                      kb_llm_reply *out, kb_err *err);

#endif
