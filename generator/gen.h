/*
 * gen.h - the generator's internals (DESIGN.md, "Generator"): kernel
 * extraction, prompt assembly, the generate-verify loop and its
 * transcripts (the LLM clients are kb/llm.h's, shared with query
 * expansion). The command files (kb generate, kb prompt) and the
 * servers (the MCP prompt tool) call these; nothing below generator/ does.
 * One section per file. Library code: nothing prints to stdout or exits.
 */
#ifndef KB_GEN_H
#define KB_GEN_H

#include "kb/kb.h"
#include "kb/config.h"
#include "kb/llm.h"
#include "verify/verify.h"

#include <cjson/cJSON.h>

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

/* -------------------------------------------------------------- generate.c */

/* The generate-verify loop (DESIGN.md, "Generator"): for each round, a
 * prompt per sample (kb_gen_prompt_build with the last attempts'
 * feedback), the samples requested at once (one thread each), each reply's
 * kernel extracted, deduplicated by kb_gen_source_hash and verified
 * through the verifier (one kb-verify --serve), the verdicts fed back;
 * the best kernel verified faster written back as a draft skill
 * (writeback.c). Every run keeps its transcript in runs_dir/<id>/:
 * transcript.jsonl (README, "kb generate"), kernels/, summary.json. */

typedef enum { KB_GEN_REFINE = 0, KB_GEN_POPULATION } kb_gen_strategy;

/* "refine", "population"; parse: 0 and *out, or -1. */
const char *kb_gen_strategy_name(kb_gen_strategy s);
int kb_gen_strategy_parse(const char *name, kb_gen_strategy *out);

/* Appends to out the feedback on one attempt, for the next prompt, in
 * structured form: label ("attempt 3 (round 1, sample 2)"), then the
 * verdict and its reason; NVRTC's log trimmed to its first errors; each
 * kernel's registers, shared and local memory and spills; per failing
 * check the shape, the output, the first mismatching index with the
 * candidate's and the reference's values; per timed shape the
 * candidate's median against the baseline's and the roofline floor. x is
 * the attempt's extraction: when it found no kernel, its message is the
 * feedback and r is NULL. */
kb_rc kb_gen_feedback(const char *label, const kb_extracted *x,
                      const kb_verify_result *r, kb_buf *out) KB_MUST_CHECK;

/* What the loop tells its caller as it goes (from the calling thread). */
typedef struct {
    const char *event;        /* "request" (a round's samples sent),
                                 "verdict" (one sample done), "round" (a
                                 round done) */
    int round, rounds;        /* 1-based */
    int sample, samples;      /* 1-based; 0 for "request" and "round" */
    const char *verdict;      /* the sample's, for "verdict" */
    size_t nverdicts[KB_VERIFY_UNKNOWN + 1];   /* verdicts so far, by kind */
    size_t no_kernel;         /* replies without a kernel so far */
    size_t llm_errors;        /* requests that failed so far */
    size_t duplicates;        /* candidates not verified again */
    double best_speedup;      /* the best kept kernel's; 0: none yet */
    long tokens;              /* used so far */
} kb_gen_progress;

typedef void (*kb_gen_progress_fn)(const kb_gen_progress *p, void *ctx);

typedef struct {
    const char *task_dir;     /* the task (kb_task_find's) */
    const char *tasks_dir;    /* corpus/tasks: for the prompt */
    kb_store *store;          /* retrieval, repair passages and the skill's
                                 indexing; NULL: none of them */
    const kb_config *config;
    const kb_llm_opts *llm;   /* NULL only with replay */
    kb_verifier *verifier;    /* the caller's (serve, compile_only) */
    int compile_only;         /* the verifier only compiles: "compiled" is
                                 the goal and nothing is written back */
    int samples, rounds;      /* <= 0: 4 and 3 */
    kb_gen_strategy strategy;
    int population;           /* kernels kept by population; <= 0: 4 */
    long budget_tokens;       /* no round starts once the run has used
                                 this many tokens; <= 0: no budget */
    long prompt_tokens;       /* each prompt's budget; <= 0: 12000 */
    long repair_tokens;       /* cited passages per failure; <= 0: 800 */
    double floor_fraction;    /* stop after a round whose kernel reaches
                                 this share of the roofline (floor over
                                 its median); <= 0: 0.9 */
    const cJSON *device;      /* kb-verify --device-info; NULL: unknown */
    const char *runs_dir;     /* runs/ of the KB, or --out */
    const char *replay;       /* a run (id in runs_dir, or its folder):
                                 its recorded replies stand for the LLM,
                                 its options for these */
    const char *skills_dir;   /* where a win is written; NULL: nowhere */
    kb_gen_progress_fn progress;
    void *progress_ctx;
} kb_gen_opts;

void kb_gen_opts_init(kb_gen_opts *o);

/* Runs the loop. *summary (caller frees, cJSON_Delete) is the run's
 * summary object, also written as runs_dir/<id>/summary.json: id, dir,
 * task, model, strategy, rounds run, why it stopped, tokens, counts, every
 * candidate with its verdict, the best, the skill written, the credit,
 * the time per round by step, and for a replay whether its verdicts are
 * the recorded ones. KB_OK whenever the run ran to its end, a kernel found
 * or not; a failure that stops it (the transcript unwritable, every
 * request of a round failed, a replay that does not read) is its error,
 * *summary then still set when the run had begun. */
kb_rc kb_gen_run(const kb_gen_opts *o, cJSON **summary, kb_err *err);

/* ------------------------------------------------------------- writeback.c */

/* A win written back: the draft skill (DESIGN.md, Skills) of a kernel
 * verified faster, through the skill library. */
typedef struct {
    const char *skills_dir;   /* corpus/skills */
    const char *task_dir;
    const char *source;       /* the kernel */
    const kb_verify_result *result;   /* its verification (faster) */
    const cJSON *device;      /* for the evidence record; NULL: the
                                 result's */
    const kb_gen_cite *cites; /* the passages of its prompt: the skill's */
    size_t ncites;            /*   citations */
    const char *parent;       /* the retrieved skill it refines, or NULL */
    const char *model, *run_id, *prompt_hash;   /* provenance */
    const char *writeup;      /* the LLM's write-up (kb_gen_writeup_request's
                                 reply); NULL or unusable: placeholders */
    kb_store *store;          /* the KB it is indexed into; NULL: none */
    const kb_config *config;
} kb_gen_writeback;

/* The request for the write-up of a win: its name, description, when to
 * apply it, the technique and its pitfalls, drafted by the LLM from the
 * kernel, its verification and the passages of its prompt. system and
 * user are appended to. */
kb_rc kb_gen_writeup_request(const kb_gen_writeback *w, kb_buf *system,
                             kb_buf *user) KB_MUST_CHECK;

/* Writes skills_dir/<name>/ (kernel.cu, evidence.json with the record of
 * w->result, SKILL.md: kb-status draft, the LLM's text, the citations,
 * kb-parent, kb-provenance) and ingests it into w->store (source
 * "skills"). The name is the write-up's, made unique, else
 * TASK-gen-RUN. *name and *dir are the caller's to free. */
kb_rc kb_gen_write_skill(const kb_gen_writeback *w, char **name, char **dir,
                         kb_err *err);

/* Credit from the runs in runs_dir (each summary.json): per skill, the
 * runs whose prompts carried it and the runs it was in the winner's
 * prompt of. *out (n items) is freed with kb_gen_credit_free. A missing
 * runs_dir is no run. */
typedef struct {
    char *skill;
    long used, won;
} kb_gen_credit;

kb_rc kb_gen_credit_load(const char *runs_dir, kb_gen_credit **out, size_t *n,
                         kb_err *err);
void kb_gen_credit_free(kb_gen_credit *c, size_t n);

#endif
