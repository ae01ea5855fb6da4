/*
 * api.h - api/'s one header: the one tool table (kb/kb.h, "tools") that
 * the CLI's --json, REST and MCP all call. One section per file.
 */
#ifndef KB_API_H
#define KB_API_H

#include "kb/kb.h"
#include "skills/skill.h"

/* ------------------------------------------------------------------ api/api.c */

/* Every tool of api/ once, in the order a server lists them: search, get,
 * papers, status, skill_search, skill_get, skill_list, skill_file, task,
 * prompt, verify; each with its flags (kb.h, KB_TOOL_*): where it is
 * offered and what it must have attached. Made once, static; *n its
 * length. kb_tool_find and kb_tool_call look names up here. */
const kb_tool *kb_api_tools(size_t *n);
/* 1 if a server offers tool over transport (KB_TOOL_MCP, KB_TOOL_REST):
 * the tool says it is offered there, and an opt-in one (verify: it runs
 * kernels) only when the server opted in. A tool that answers from the
 * skill library alone (KB_TOOL_NEEDS_LIBRARY) is left out by an MCP
 * server that serves none; REST's routes answer that it serves none. */
int kb_api_offered(const kb_tool *tool, unsigned transport, int opt_in);

/* What a server attaches to its stores for the tools that need it. */
typedef struct {
    const kb_skill_pub *skills;   /* the library served, or NULL */
    const char *tasks_dir;        /* verify's (NULL: where kb verify looks) */
    double verify_timeout_s;      /* verify's, per candidate (<= 0: 120) */
} kb_api_env;

/* Parks with store what tool's flags say it needs: the skill library
 * (KB_TOOL_NEEDS_SKILLS, kb_api_skills_attach), verify's settings
 * (KB_TOOL_NEEDS_VERIFY, kb_api_verify_attach). Call it before
 * kb_tool_run on a store of a server's; nothing for other tools. */
kb_rc kb_api_attach(kb_store *store, const kb_tool *tool, const kb_api_env *env,
                    kb_err *err);

/* The rooms' parts of the table, which only api.c assembles. Static; *n
 * each one's length. */
const kb_tool *kb_api_query_tools(size_t *n);    /* api/tools.c: search, get,
                                                    papers, status */
const kb_tool *kb_api_skill_tools(size_t *n);    /* api/tool_skill.c */
const kb_tool *kb_api_prompt_tools(size_t *n);   /* api/tool_prompt.c */
const kb_tool *kb_api_verify_tools(size_t *n);   /* api/tool_verify.c */

/* ----------------------------------------------------------- api/tool_prompt.c */

/* task (a task's definition: signature, roles, the target shape,
 * tolerances, launch, reference source) and prompt (kb_gen_prompt_build
 * for a task, within budget_tokens). Both read only; the device profile
 * for prompts is kb-verify --device-info's, asked once per store and kept
 * in its slot (unknown without a GPU). */

/* ------------------------------------------------------------ api/tool_skill.c */

/* skill_search (the KB's skills, kb_skill_search) and skill_get (one
 * skill of the library: front matter, SKILL.md, its files with digests,
 * its evidence), offered over MCP and REST; skill_list (the library,
 * filtered by its metadata) and skill_file (one file of a skill, as text
 * or base64, with its digest), REST's only: MCP's resources give the
 * same. */
/* Parks the library (not owned: it outlives the store's use) with store,
 * for the skill tools' calls on that store; lib NULL: none. Parking the
 * same library again is a no-op. */
kb_rc kb_api_skills_attach(kb_store *store, const kb_skill_pub *lib, kb_err *err);

/* ------------------------------------------------------------ api/tool_verify.c */

/* verify, a candidate kernel checked and timed on the GPU by kb-verify
 * through the verifier (verify/verify.h); opt-in. Its settings live in
 * the store's slot, set by kb_api_verify_attach (defaults without it: the
 * tasks kb verify finds, 120 s). */
/* Parks verify's settings with store (tasks_dir NULL: the task folders
 * kb_task_find looks in; timeout_s <= 0: 120), for the tool calls on that
 * store. */
kb_rc kb_api_verify_attach(kb_store *store, const char *tasks_dir,
                           double timeout_s, kb_err *err);
/* For the MCP Tasks extension (serve/mcp_task.c): a verify call queued
 * without waiting, and its job read back later as the tool's answer. */
typedef enum { KB_API_JOB_NONE, KB_API_JOB_WORKING, KB_API_JOB_DONE } kb_api_job_state;
/* Submits verify's candidate (args as the tool's; verify's settings
 * attached) to the queue of KB_QUEUE: id (65 bytes) gets its job's id,
 * *state WORKING, or DONE for a job verified already. KB_ERR_USAGE when
 * this process verifies in process (no queue): the call is answered the
 * usual way; other errors as the tool's. */
kb_rc kb_api_verify_submit(kb_tool_ctx *ctx, const cJSON *args, char id[65],
                           kb_api_job_state *state, kb_err *err);
/* Job id's state on KB_QUEUE's queue (NONE: no such job, or no queue);
 * when DONE, *out (the caller's) the tool's answer, as a verify call
 * would give it, or NULL and *tool_err the tool's failure (a job in the
 * dead letter, kb-verify that could not judge). Fails (err) only when the
 * queue cannot be read. */
kb_rc kb_api_verify_job(kb_tool_ctx *ctx, const char *id, kb_api_job_state *state,
                        cJSON **out, kb_err *tool_err, kb_err *err);

#endif /* KB_API_H */
