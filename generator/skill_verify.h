/*
 * skill_verify.h - the skill library's steps that need what lives above
 * skills/: kb-verify (through generator/verifier.h) to verify a skill and
 * to compile its kernel for lint, the task model to check kb-task, and the
 * KB to resolve a skill's deep links. skills/ keeps the model, the
 * evidence and the lifecycle; these hand it kb-verify's JSON.
 */
#ifndef KB_SKILL_VERIFY_H
#define KB_SKILL_VERIFY_H

#include "kb/kb.h"
#include "generator/verifier.h"
#include "skills/skill.h"

typedef struct {
    const char *tasks_dir;       /* where kb-task names a task: corpus/tasks */
    kb_verifier *verifier;       /* runs kb-verify; unused with from_result */
    const char *from_result;     /* a file of kb-verify results made elsewhere
                                    (one JSON object, or JSON lines): the
                                    one for the skill's task and kernel is
                                    imported instead of a run */
    const cJSON *device;         /* the device profile (kb-verify
                                    --device-info --json) for the record;
                                    NULL: the result's own device */
} kb_gen_skill_opts;

/* Verifies a library entry: kb-verify runs its kernel.cu against its
 * kb-task (or the matching result of o->from_result is taken, its kernel's
 * hash and task checked against the skill's), the result becomes an
 * evidence record (kb_skill_record_make) and the lifecycle applies it
 * (kb_skill_apply_record); then evidence.json and SKILL.md are written.
 * what gets one line on what changed, verdict the verdict (may be NULL).
 * A refusal - a retired skill, no kernel or task, a result for another
 * kernel, a suspicious result, no verdict (no GPU) - writes nothing. */
kb_rc kb_gen_skill_verify(kb_skill_entry *e, const kb_gen_skill_opts *o,
                          kb_buf *what, kb_buf *verdict, kb_err *err);

/* lint's task check: kb-task loads as a task of tasks_dir. */
kb_rc kb_gen_skill_check_task(const kb_skill_entry *e, const char *tasks_dir,
                              kb_skill_diags *d) KB_MUST_CHECK;

/* lint's compile check: kernel.cu (and baseline.cu, if there) compile for
 * kb-task with `kb-verify --compile-only` (v opened with compile_only).
 * Findings into d. KB_ERR_NOTFOUND when v's kb-verify is not there (no
 * CUDA toolkit: nothing checked). */
kb_rc kb_gen_skill_check_compile(const kb_skill_entry *e, const char *tasks_dir,
                                 kb_verifier *v, kb_skill_diags *d, kb_err *err);

/* lint's link check: every http(s) link of the body with an #anchor, and
 * every link to a document the KB holds, names a chunk of store (the
 * document's URL, and a section with that anchor). Findings into d. */
kb_rc kb_gen_skill_check_links(const kb_skill_entry *e, kb_store *store,
                               kb_skill_diags *d, kb_err *err);

#endif
