/*
 * skill_gen.h - the skill library's steps that need what lives above
 * skills/: kb-verify (through generator/verifier.h) to verify a skill and
 * to compile its kernel for lint, the task model to check kb-task, the KB
 * to resolve a skill's deep links and to search skills. skills/ keeps the
 * model, the evidence and the lifecycle; these hand it kb-verify's JSON.
 * One section per file.
 */
#ifndef KB_SKILL_GEN_H
#define KB_SKILL_GEN_H

#include "kb/kb.h"
#include "generator/verifier.h"
#include "skills/skill.h"

/* ------------------------------------------------------------ skill_verify.c */

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

/* ------------------------------------------------------------ skill_search.c */

/* What a skill search keeps: filters on the skill's metadata (NULL: any).
 * arch matches kb-arch's items ("sm_90", or "sm_80+" for 8.0 and up),
 * dtype and ops an item of kb-dtype and kb-ops (comma-separated), status
 * kb-status; retired skills only when asked for (status, or all). */
typedef struct {
    const char *text;
    kb_mode mode;
    int k;                      /* skills wanted, 1-50 */
    const char *arch, *dtype, *ops, *status;
    int all;                    /* retired skills too */
    const kb_config *config;    /* the query embedder's */
} kb_gen_skill_query;

/* One skill found: its best section (a result of all) and the metadata of
 * its status line (owned strings, "" when the skill has none). */
typedef struct {
    const kb_result *r;
    char *name, *status, *speedup, *task, *arch, *dtype, *ops;
} kb_gen_skill_hit;

typedef struct {
    kb_results all;             /* what the search found, every section */
    kb_gen_skill_hit *items;
    size_t n, cap;
} kb_gen_skill_hits;

/* Searches the KB's chunks of kind skill (kb_query_run), one hit per
 * skill, kept when its metadata passes q's filters, at most q->k. The
 * caller releases out with kb_gen_skill_hits_release. */
kb_rc kb_gen_skill_search(kb_store *store, const kb_gen_skill_query *q,
                          kb_gen_skill_hits *out, kb_err *err);
void kb_gen_skill_hits_release(kb_gen_skill_hits *h);
/* 1 if a skill with this metadata (kb-status, kb-arch, kb-dtype, kb-ops;
 * "" for a key it lacks) passes q's filters: the test kb_gen_skill_search
 * applies to each hit, for a caller that lists skills without a search. */
int kb_gen_skill_passes(const kb_gen_skill_query *q, const char *status,
                        const char *arch, const char *dtype, const char *ops);

#endif
