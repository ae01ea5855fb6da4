/*
 * gen.h - the generator's internals (DESIGN.md, "Generator"): the LLM
 * clients, kernel extraction, prompt assembly, the generate-verify loop
 * and its transcripts. The command files (kb generate, kb prompt) and the
 * servers (the MCP prompt tool) call these; nothing below generator/ does.
 * One section per file. Library code: nothing prints to stdout or exits.
 */
#ifndef KB_GEN_H
#define KB_GEN_H

#include "kb/kb.h"
#include "kb/config.h"
#include "generator/verifier.h"

#include <cjson/cJSON.h>

/* ------------------------------------------------------------------ llm.c */

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

/* --------------------------------------------------------------- extract.c */

typedef enum {
    KB_EXTRACT_OK = 0,
    KB_EXTRACT_NO_CODE,       /* no fenced block and no kernel in the text */
    KB_EXTRACT_NO_KERNEL,     /* code, but no extern "C" __global__ kernel */
    KB_EXTRACT_HOST_CODE      /* the kernel comes with host code (main,
                                 cudaMalloc, <<<...>>> launches) */
} kb_extract_status;

/* The kernel of an LLM reply: the fenced CUDA block that defines
 * kernel_name (else the first with an extern "C" __global__), tolerant of
 * prose around it and of several blocks. source is owned (NULL unless
 * status is OK); message says what is wrong otherwise, in words fit to
 * feed back to the model. */
typedef struct {
    kb_extract_status status;
    char *source;
    char *message;
} kb_extracted;

void kb_extracted_release(kb_extracted *x);
kb_rc kb_gen_extract(const char *reply, const char *kernel_name,
                     kb_extracted *out, kb_err *err);

/* The SHA-256 (hex, 65 bytes with the NUL) of source with comments and
 * whitespace runs normalised: two candidates that differ only there are
 * one candidate. */
void kb_gen_source_hash(const char *source, char out[65]);

/* ---------------------------------------------------------------- prompt.c */

/* A prompt's token budget when none is given. */
#define KB_GEN_BUDGET_DEFAULT 12000

/* One passage carried into a prompt, with its citation. */
typedef struct {
    long long chunk_id;
    char *kind;               /* "skill", "code", "text", ... */
    char *source, *title, *heading, *url;
    char *skill;              /* the skill's name for kind skill, else "" */
} kb_gen_cite;

typedef struct {
    kb_store *store;          /* the KB retrieved from; NULL: no retrieval */
    const kb_config *config;  /* the query embedder's */
    const char *tasks_dir;    /* corpus/tasks */
    const char *task;         /* the task's name */
    const cJSON *device;      /* kb-verify --device-info --json; NULL: the
                                 prompt says the device is unknown */
    long budget_tokens;       /* the whole prompt; <= 0: 12000
                                 (KB_GEN_BUDGET_DEFAULT) */
    const char *feedback;     /* the last attempts' verdicts (the loop's
                                 kb_gen_feedback); NULL: first round */
    const char *parent;       /* a kernel to refine (population, refine);
                                 NULL: none */
} kb_gen_prompt_opts;

/* An assembled prompt: system and user text, the passages in it (their
 * citations; the skills among them are the run's credit), its estimated
 * size and its SHA-256. Released with kb_gen_prompt_release. */
typedef struct {
    char *system, *user;
    kb_gen_cite *cites;
    size_t ncites;
    long tokens;
    char hash[65];
} kb_gen_prompt;

void kb_gen_prompt_release(kb_gen_prompt *p);
/* Retrieves for the task (skills first: verified and approved, filtered by
 * arch, dtype and ops; exemplar kernels; doc passages) and assembles the
 * prompt in its stable sections within the budget (README, "kb prompt"):
 * the hardware profile, the task (the target shape only), the reference,
 * the retrieved context, the feedback, the parent, the output contract.
 * Passages are cut whole, the context first, then the parent, then the
 * feedback; a budget that the task, reference and contract alone exceed
 * is KB_ERR_USAGE. The same KB and inputs give the same prompt. On
 * failure *out is empty (nothing to release). */
kb_rc kb_gen_prompt_build(const kb_gen_prompt_opts *o, kb_gen_prompt *out,
                          kb_err *err);
/* Passages for a failure, for a repair grounded in the corpus: searches
 * the KB for r's compile log or failure class and appends at most
 * budget_tokens of cited passages to out. Nothing found: out unchanged. */
kb_rc kb_gen_repair_context(kb_store *store, const kb_config *config,
                            const kb_verify_result *r, long budget_tokens,
                            kb_buf *out, kb_err *err);
/* The folder of the task named task (caller frees *dir): tasks_dir/task
 * when tasks_dir is given; else where `kb verify` looks (kb_task_find:
 * the argument itself, tasks/ beside config's manifest or the default
 * one, corpus/, the installed share/kb). KB_ERR_NOTFOUND says where it
 * looked. */
kb_rc kb_gen_task_dir(const kb_config *config, const char *tasks_dir,
                      const char *task, char **dir, kb_err *err);
/* p as one object, what `kb prompt --json` prints and the MCP prompt
 * tool returns: {"system","user","tokens","hash","cites":[{"chunk_id",
 * "kind","source","title","heading","url","skill"}]}. *out is the
 * caller's (cJSON_Delete). */
kb_rc kb_gen_prompt_json(const kb_gen_prompt *p, cJSON **out, kb_err *err);

/* The task named task (kb_gen_task_dir) as one object, what the MCP task
 * tool returns: name, description, level, ops, dtype, the kernels and
 * their signature, each parameter's role and size (as an expression and
 * at the target shape), the target shape alone (the others are kept
 * back), the tolerance, the default launch, the baseline, the roofline
 * and the reference source. *out is the caller's (cJSON_Delete). */
kb_rc kb_gen_task_json(const kb_config *config, const char *tasks_dir,
                       const char *task, cJSON **out, kb_err *err);

/* ----------------------------------------------------------- tool_prompt.c */

/* generator/'s tool table (kb.h, "tools"): task (a task's definition:
 * signature, roles, the target shape, tolerances, launch, reference
 * source) and prompt (kb_gen_prompt_build for a task, within
 * budget_tokens). Both read only; the device profile for prompts is
 * kb-verify --device-info's, asked once per store and kept in its slot
 * (unknown without a GPU). Static; *n its length. */
const kb_tool *kb_gen_tools(size_t *n);

#endif
