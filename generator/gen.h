/*
 * gen.h - the generator's internals (docs/design.md, "Generator"): kernel
 * extraction, prompt assembly, the generate-verify loop and its
 * transcripts (the LLM clients are kb/llm.c's, shared with query
 * expansion). The command files (kb generate, kb prompt) and the
 * servers (the MCP prompt tool) call these; nothing below generator/ does.
 * One section per file. Library code: nothing prints to stdout or exits.
 */
#ifndef KB_GEN_H
#define KB_GEN_H

#include "kb/kb.h"
#include "kb/kb_int.h"
#include "verify/verify.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>

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
    char *path;               /* in a prompt's cites: its document's path as
                                 the KB keys it (relative for a local
                                 source: "corpus/skills/x/SKILL.md"), or
                                 NULL; what a draft cites it by */
    char *text;               /* in a prompt's cites: the passage's text as
                                 the prompt carried it, or NULL; what a
                                 draft judges whether it helped by */
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
                                 NULL: the kernel of a skill retrieved for
                                 this very task, if one is (its seed) */
    int no_seed;              /* no seed: without parent, no kernel to refine */
    int choose;               /* 1: the llm relevance stage (config's
                                 KB_LLM_URL) chooses the doc passages from
                                 a larger pool (choose.c); the caller sets
                                 it by kb_gen_can_choose */
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
    char *seed_skill;         /* the skill whose kernel is the kernel to
                                 refine (no parent given), or NULL */
    int chose;                /* the llm stage was asked for the passages */
    kb_rerank_info choice;    /* what it did (its model is config's) */
} kb_gen_prompt;

/* p's citations as a JSON array (caller's), skill "" written as null when
 * no_skill_null; NULL with *ok cleared on no memory (or *ok already 0). */
cJSON *kb_gen_cites_json(const kb_gen_prompt *p, int no_skill_null, int *ok);

void kb_gen_prompt_release(kb_gen_prompt *p);
/* Retrieves for the task (skills first: verified and approved, filtered by
 * arch, dtype and ops; exemplar kernels; doc passages) and assembles the
 * prompt in its stable sections within the budget (docs/generate.md, "kb prompt");
 * without a parent, the kernel of a skill retrieved for this very task is
 * the kernel to refine (not also an exemplar), out->seed_skill its name:
 * kb prompt, the MCP prompt tool, --dry-run and a run's first round all
 * send this one prompt. The sections:
 * the hardware profile, the task (the target shape only), the reference,
 * the retrieved context, the feedback, the parent, the output contract.
 * Passages are cut whole, the context first, then the parent, then the
 * feedback; a budget that the task, reference and contract alone exceed
 * is KB_ERR_USAGE. The same KB and inputs give the same prompt. On
 * failure *out is empty (nothing to release). */
kb_rc kb_gen_prompt_build(const kb_gen_prompt_opts *o, kb_gen_prompt *out,
                          kb_err *err);
/* p as one object, what `kb prompt --json` prints and the MCP prompt
 * tool returns: {"system","user","tokens","hash","cites":[{"chunk_id",
 * "kind","source","title","heading","url","skill"}]}. *out is the
 * caller's (cJSON_Delete). */
kb_rc kb_gen_prompt_json(const kb_gen_prompt *p, cJSON **out, kb_err *err);

/* Tokens are estimated as api/tools.c packs results: 3 bytes each,
 * fewer than English prose takes, since code and identifiers cut into
 * more tokens - a budget should not be overrun by the estimate. */
#define KB_GEN_BYTES_PER_TOKEN 3

/* ----------------------------------------------------------- prompt_task.c */

/* The prompt's fixed sections, appended to b: the hardware profile of
 * device d (NULL: unknown), the task t (the target shape alone, the
 * buffers' alignment, the baseline's time there when baseline_ms > 0, the
 * roofline at it on d, what is judged suspicious), a code block under a heading with its intro, and
 * the output contract. */
kb_rc kb_gen_section_hardware(kb_buf *b, const cJSON *d) KB_MUST_CHECK;
/* The one shape a prompt shows the model (the others are held back): the
 * one named target, else the first timed, else the first; NULL for a task
 * without shapes. */
const kb_shape *kb_gen_target_shape(const kb_task *t);
kb_rc kb_gen_section_task(kb_buf *b, const kb_task *t, const cJSON *d,
                          double baseline_ms) KB_MUST_CHECK;
kb_rc kb_gen_section_code(kb_buf *b, const char *heading, const char *intro,
                          const char *src) KB_MUST_CHECK;
kb_rc kb_gen_section_contract(kb_buf *b, const kb_task *t) KB_MUST_CHECK;
/* Device d's architecture ("sm_90", "" unknown) and compute capability
 * (90; 0 unknown). */
void kb_gen_device_arch(const cJSON *d, char arch[16], int *cc);
/* The task named task (kb_gen_task_dir) and its reference source (both
 * the caller's: kb_task_free, free). */
kb_rc kb_gen_load_task(const kb_config *config, const char *tasks_dir, const char *task,
                       kb_task **t, char **ref, kb_err *err);
/* The folder of the task named task (caller frees *dir): tasks_dir/task
 * when tasks_dir is given; else where `kb verify` looks (kb_task_find:
 * the argument itself, tasks/ beside config's manifest or the default
 * one, corpus/, the installed share/kb). KB_ERR_NOTFOUND says where it
 * looked. */
kb_rc kb_gen_task_dir(const kb_config *config, const char *tasks_dir,
                      const char *task, char **dir, kb_err *err);
/* The task named task (kb_gen_task_dir) as one object, what the MCP task
 * tool returns: name, description, level, ops, dtype, the kernels and
 * their signature, each parameter's role and size (as an expression and
 * at the target shape), the target shape alone (the others are kept
 * back), the tolerance, the default launch, the baseline, the roofline
 * and the reference source. *out is the caller's (cJSON_Delete). */
kb_rc kb_gen_task_json(const kb_config *config, const char *tasks_dir,
                       const char *task, cJSON **out, kb_err *err);

/* --------------------------------------------------------------- context.c */

/* A retrieved passage: its citation and the text carried. */
typedef struct {
    kb_gen_cite cite;
    char *label;      /* "skill vectorized-global-access: verified, 1.61x on gelu" */
    char *text;
    int code;         /* fenced as CUDA */
    char *path;       /* its document's path (an exemplar is its file) */
    char *seed_skill; /* the kernel of this task's skill (its name), which a
                         prompt without a kernel to refine refines; else NULL */
} kb_gen_passage;

typedef struct {
    kb_gen_passage *items;
    size_t n, cap;
    double baseline_ms;   /* the baseline's median at the target shape on this
                             device, from this task's skills' evidence; 0 unknown */
    int chose;            /* the llm stage was asked for the doc passages */
    kb_rerank_info choice;
} kb_gen_passages;

void kb_gen_cite_release(kb_gen_cite *c);
void kb_gen_passages_release(kb_gen_passages *ps);
/* The passages for task t's prompt from o->store, best first: the skills
 * that fit (kb-arch, dtype and ops against o->device and t), exemplar
 * kernels, doc passages; appended to ps (the caller releases it, whole or
 * not). */
kb_rc kb_gen_retrieve(const kb_gen_prompt_opts *o, const kb_task *t,
                      kb_gen_passages *ps, kb_err *err);
/* ---------------------------------------------------------------- choose.c */

/* Candidate doc passages taken per topic when the llm stage chooses. */
#define KB_GEN_CHOOSE_PER_TOPIC 3

/* The llm stage chooses task t's doc passages: ps->items[start..n) are
 * the candidates, own[0..nown) the indices of those kb picks itself (one
 * per topic). One request (kb_query_llm_order, the task and device as
 * the question): pick[0..*npick) (room for max) the indices of the
 * passages its reply names, in its order, at most max; on a fallback kb's
 * own picks. ps->choice says what the stage did. */
kb_rc kb_gen_choose(const kb_gen_prompt_opts *o, const kb_task *t, kb_gen_passages *ps,
                    size_t start, const size_t *own, size_t nown, size_t max, size_t *pick,
                    size_t *npick, kb_err *err);
/* 1 when config makes the LLM the relevance stage (KB_RERANK=llm, with
 * KB_LLM_URL), so that kb prompt, --dry-run, the prompt tool and the
 * loop's rounds all let it choose alike: one request more a run, so not
 * without being asked for. */
int kb_gen_can_choose(const kb_config *config);

/* Passages for a failure, for a repair grounded in the corpus: searches
 * the KB for r's compile log or failure class and appends at most
 * budget_tokens of cited passages to out. Nothing found: out unchanged. */
kb_rc kb_gen_repair_context(kb_store *store, const kb_config *config,
                            const kb_verify_result *r, long budget_tokens,
                            kb_buf *out, kb_err *err);

/* -------------------------------------------------------------- feedback.c */

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

/* The loop's readers of JSON (kb-verify's results, the transcript): o's
 * member k; its number, else d; its string, else d. */
const cJSON *kb_gen_jget(const cJSON *o, const char *k);
double kb_gen_jnum(const cJSON *o, const char *k, double d);
const char *kb_gen_jstr(const cJSON *o, const char *k, const char *d);

/* -------------------------------------------------------------- generate.c */

/* The generate-verify loop (docs/design.md, "Generator"): for each round, a
 * prompt per sample (kb_gen_prompt_build with the last attempts'
 * feedback), the samples requested at once (one thread each), each reply's
 * kernel extracted, deduplicated by kb_gen_source_hash and verified
 * through the verifier (one kb-verify --serve), the verdicts fed back;
 * the best kernel verified faster written back as a draft skill
 * (writeback.c). Every run keeps its transcript in runs_dir/<id>/:
 * transcript.jsonl (docs/formats.md, "Transcripts"), kernels/, summary.json. */

typedef enum { KB_GEN_REFINE = 0, KB_GEN_POPULATION } kb_gen_strategy;

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
    int workers;              /* with a queue (the verifier's KB_QUEUE): the
                                 candidates in flight at once, submitted as
                                 their replies come; <= 1: one at a time */
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

/* The run's state, shared by generate.c (the run), round.c (one round)
 * and transcript.c (its folder and transcript). */

/* One request's reply, filled by its thread (or from a transcript). */
typedef struct {
    const kb_llm_opts *llm;
    kb_llm_request req;
    kb_llm_reply reply;
    kb_rc rc;
    kb_err err;
    int done;
    double done_ms;           /* when the reply had come */
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
} kb_gen_slot;

/* One sample of one round. */
typedef struct {
    int round, sample;
    char key[24];             /* "r1s2" */
    size_t prompt;            /* index into the run's prompts */
    kb_llm_reply reply;
    kb_rc llm_rc;
    char *llm_error;          /* NULL: the request succeeded */
    kb_extracted x;
    char hash[65];
    char *file;               /* the kernel, relative to the run's folder */
    long dup_of;              /* the attempt first verified with this hash */
    int verified;
    char job[65];             /* its queue job while in flight, else "" */
    double submitted_ms;
    kb_verify_result r;
    char technique[96];
    char *parent_skill;       /* the retrieved skill its line refines */
    char parent_key[24];      /* the attempt it refined, or "" */
} kb_gen_attempt;

typedef struct {
    const kb_gen_opts *o;
    kb_gen_opts eff;          /* o with a replay's recorded options */
    kb_task *task;
    char id[48];
    char *dir, *kdir;
    FILE *tr;
    kb_rc tr_rc;
    kb_gen_attempt *at;
    size_t nat, capat;
    kb_gen_prompt *prompts;
    char **prompt_parent_skill;   /* per prompt: the skill it refines */
    size_t nprompts, capprompts;
    cJSON *replies;           /* a replay's recorded replies by key */
    cJSON *recorded;          /* a replay's recorded verdicts by key */
    char *replay_of;
    long tokens_prompt, tokens_completion;
    kb_gen_progress pg;
    long best;                /* the best faster kernel (write-back) */
    cJSON *rounds;            /* per round: its time by step */
    double t0;
    const char *model;
    char *replay_model;       /* a replay's recorded model */
    char *replay_task;        /* and task */
} kb_gen_state;

/* ------------------------------------------------------------ transcript.c */

/* A run's folder, runs_dir/<id>/, and its transcript.jsonl: one JSON
 * event a line, written as the run goes; a recorded run read back. */

/* "refine", "population"; parse: 0 and *out, or -1. */
const char *kb_gen_strategy_name(kb_gen_strategy s);
int kb_gen_strategy_parse(const char *name, kb_gen_strategy *out);

/* A new event {"event": name, "key": key (left out when NULL)}; *ok
 * starts its sticky chain of kb_json_put_* (kb/kb.h). */
cJSON *kb_gen_event(const char *name, const char *key, int *ok);
/* Writes event ev (taken; NULL or !ok: out of memory) as one line;
 * returns R->tr_rc, sticky: once a write failed nothing more is written. */
kb_rc kb_gen_tr_write(kb_gen_state *R, cJSON *ev, int ok);
/* Sets err to the transcript's failure ("cannot write the transcript in
 * DIR") and returns its code. */
kb_rc kb_gen_tr_error(const kb_gen_state *R, kb_err *err);
/* The request and reply events of one exchange with the LLM under key:
 * a sample's (with its round, sample and prompt) when a is given, else
 * the write-up's. replied: the request succeeded; error: why not. */
kb_rc kb_gen_exchange_events(kb_gen_state *R, const char *key, const kb_gen_attempt *a,
                             const kb_llm_reply *reply, int replied, const char *error);
/* Makes runs_dir/<id>/ (the id from the time and randomness), its
 * kernels/ and transcript.jsonl (R->tr), and writes the run event. */
kb_rc kb_gen_make_run_dir(kb_gen_state *R, kb_err *err);
kb_rc kb_gen_write_run_event(kb_gen_state *R, kb_err *err);
/* Reads the transcript of o->replay: its recorded options into R->eff,
 * its replies and verdicts by key into R->replies and R->recorded. */
kb_rc kb_gen_load_replay(kb_gen_state *R, kb_err *err);
/* A recorded reply as if it had come: key's reply event into s. */
void kb_gen_replay_reply(kb_gen_state *R, const char *key, kb_gen_slot *s);

/* ----------------------------------------------------------------- round.c */

/* Round round (0-based): its prompts with the last round's feedback,
 * its samples requested at once, each reply extracted and verified in
 * sample order as it comes, its time by step appended to rj. *stop_floor:
 * a kernel reached the roofline's floor_fraction; *all_failed: every
 * request failed. */
kb_rc kb_gen_round(kb_gen_state *R, int round, int *stop_floor, int *all_failed, cJSON *rj,
                   kb_err *err);
/* The result that stands for a (its own, or the one of the attempt it
 * duplicates); NULL when nothing was verified. */
const kb_gen_attempt *kb_gen_verdict_of(const kb_gen_state *R, const kb_gen_attempt *a);
/* The verdict an attempt ends with, as the summary and a replay name it. */
const char *kb_gen_outcome(const kb_gen_state *R, const kb_gen_attempt *a);

/* ------------------------------------------------------------------ cite.c */

/* What a draft skill cites: the passages of its prompt that helped, each
 * by a link that holds no machine's path (a skill may be committed). */
/* c's link fit for a skill: an http(s) URL as it is; a skill's file (a
 * file:// URL of the skills or skill-drafts source) as skill://NAME/FILE
 * with its anchor, the name the servers give it; NULL for another local
 * file (cite it by kb_gen_cite_where) or out of memory. Caller frees. */
char *kb_gen_cite_link(const kb_gen_cite *c);
/* c's document as a path relative to its source's folder ("" unknown;
 * an absolute path is cut to its file's name). Static or c's. */
const char *kb_gen_cite_where(const kb_gen_cite *c);
/* 1 if c's passage helped kernel: its text names an identifier (four
 * bytes or more, with an '_', a '.', a digit or camelCase: float4,
 * __shfl_xor_sync, cp.async, TILE_DIM) that kernel uses and the task's
 * reference kernel (NULL: none) does not. */
int kb_gen_cite_helped(const kb_gen_cite *c, const char *kernel, const char *reference);
/* *text with each file: URL (a machine's path) cut to its file's name,
 * as text; *text replaced (NULL stays NULL). KB_ERR_NOMEM. */
kb_rc kb_gen_scrub_paths(char **text) KB_MUST_CHECK;

/* ------------------------------------------------------------- writeback.c */

/* A win written back: the draft skill (docs/design.md, Skills) of a kernel
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
