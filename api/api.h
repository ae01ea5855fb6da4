/*
 * api.h - api/'s one header: the tool tables (kb/kb.h, "tools") that the
 * CLI's --json, REST and MCP all call. One section per file.
 */
#ifndef KB_API_H
#define KB_API_H

#include "kb/kb.h"
#include "skills/skill.h"

/* ----------------------------------------------------------- api/tool_prompt.c */

/* generator/'s tool table (kb.h, "tools"): task (a task's definition:
 * signature, roles, the target shape, tolerances, launch, reference
 * source) and prompt (kb_gen_prompt_build for a task, within
 * budget_tokens). Both read only; the device profile for prompts is
 * kb-verify --device-info's, asked once per store and kept in its slot
 * (unknown without a GPU). Static; *n its length. */
const kb_tool *kb_gen_tools(size_t *n);

/* ------------------------------------------------------------ serve/tool_skill.c */

/* serve/'s skill tools: skill_search (the KB's skills, kb_gen_skill_search)
 * and skill_get (one skill of the library: front matter, SKILL.md, its
 * files with digests, its evidence). Static; *n its length. */
const kb_tool *kb_serve_skill_tools(size_t *n);
/* REST's skill tools (serve/rest.c), not offered over MCP, whose
 * resources give the same: skill_list (the library, filtered by its
 * metadata) and skill_file (one file of a skill, as text or base64, with
 * its digest). Static; *n its length. */
const kb_tool *kb_serve_skill_rest_tools(size_t *n);
/* Parks the library (not owned: it outlives the store's use) with store,
 * for the skill tools' calls on that store; lib NULL: none. Parking the
 * same library again is a no-op. */
kb_rc kb_serve_skills_attach(kb_store *store, const kb_mcp_skills *lib, kb_err *err);

/* ------------------------------------------------------------ serve/tool_verify.c */

/* serve/'s tool table: verify, a candidate kernel checked and timed on
 * the GPU by kb-verify through the verifier (generator/verifier.h). Its
 * settings live in the store's slot, set by kb_serve_verify_attach
 * (defaults without it: the tasks kb verify finds, 120 s). Static; *n its
 * length. */
const kb_tool *kb_serve_tools(size_t *n);
/* Parks verify's settings with store (tasks_dir NULL: the task folders
 * kb_task_find looks in; timeout_s <= 0: 120), for the tool calls on that
 * store. */
kb_rc kb_serve_verify_attach(kb_store *store, const char *tasks_dir,
                             double timeout_s, kb_err *err);

#endif /* KB_API_H */
