/*
 * skill.h - the skill library: the SKILL.md model (Agent Skills format,
 * parsed and written with libyaml), validation, evidence, the lifecycle
 * and export. One section per file of skills/.
 *
 * skills/ stands beside index/ and uses only kb/ (docs/design.md, Layout): it
 * knows kb-verify's results only as the JSON they are (cJSON), so the
 * command that runs kb-verify lives in generator/ and hands the result
 * down. Memory follows kb/kb.h's rule: a kb_skill is released with
 * kb_skill_release, diagnostics with kb_skill_diags_release, evidence
 * with kb_skill_evidence_release, a library with kb_skill_lib_release.
 */
#ifndef KB_SKILL_H
#define KB_SKILL_H

#include "kb/kb.h"
#include "verify/verify.h"

#include <cjson/cJSON.h>
#include <sys/stat.h>

/* ------------------------------------------------------------ diag.c */

/* A finding about a file, printed `file:line: error: message` (line 0: the
 * file as a whole). rule names the check, for a team's CI to filter on. */
typedef enum { KB_SKILL_ERROR = 0, KB_SKILL_WARNING } kb_skill_severity;

typedef struct {
    char *file;
    int line;
    kb_skill_severity severity;
    const char *rule;          /* a string literal: "yaml", "name", ... */
    char *msg;
    size_t seq;                /* order of addition (a stable sort) */
} kb_skill_diag;

typedef struct {
    kb_skill_diag *items;
    size_t n, cap;
    size_t errors, warnings;
} kb_skill_diags;

void kb_skill_diags_init(kb_skill_diags *d);
void kb_skill_diags_release(kb_skill_diags *d);
/* Adds a finding (file copied; rule a literal). KB_ERR_NOMEM leaves d as
 * it was. */
kb_rc kb_skill_diag_add(kb_skill_diags *d, const char *file, int line,
                        kb_skill_severity sev, const char *rule,
                        const char *fmt, ...)
    __attribute__((format(printf, 6, 7))) KB_MUST_CHECK;
/* kb_skill_diag_add with the arguments in ap. */
kb_rc kb_skill_diag_vadd(kb_skill_diags *d, const char *file, int line,
                         kb_skill_severity sev, const char *rule,
                         const char *fmt, va_list ap) KB_MUST_CHECK;
/* The first error of d from item from on, as "file:line: message" into
 * err (KB_ERR_PARSE); KB_OK when there is none. */
kb_rc kb_skill_diags_fail(const kb_skill_diags *d, size_t from, kb_err *err);
/* Sorts d by file, then line, then order of addition. */
void kb_skill_diags_sort(kb_skill_diags *d);

/* ------------------------------------------------------------ skill.c */

#define KB_SKILL_NAME_MAX 64
#define KB_SKILL_DESCRIPTION_MAX 1024
#define KB_SKILL_COMPATIBILITY_MAX 500

/* The six top-level keys of the front matter, in the order kb writes them. */
typedef enum {
    KB_SKILL_NAME = 0,
    KB_SKILL_DESCRIPTION,
    KB_SKILL_LICENSE,
    KB_SKILL_COMPATIBILITY,
    KB_SKILL_METADATA,
    KB_SKILL_ALLOWED_TOOLS,
    KB_SKILL_NKEYS
} kb_skill_key;

/* "name", "description", ..., "allowed-tools". */
const char *kb_skill_key_name(kb_skill_key k);

/* One metadata entry, string to string. */
typedef struct {
    char *key, *value;
    int line;                  /* of the key in the file; 0: set by kb */
} kb_skill_meta;

/* A `## Title` section of the body: [start, end) are byte offsets into
 * body, the heading line included. */
typedef struct {
    char *title;
    int line;                  /* of the heading in the file */
    size_t start, end;
} kb_skill_section;

/* A parsed SKILL.md. Strings are owned; a key that is absent is NULL
 * (metadata: has_metadata 0). */
typedef struct {
    char *path;                /* the SKILL.md */
    char *dir;                 /* its folder */
    char *fields[KB_SKILL_NKEYS];   /* KB_SKILL_METADATA unused */
    int lines[KB_SKILL_NKEYS];      /* of each key in the file, 0 absent */
    int has_metadata;
    kb_skill_meta *meta;
    size_t nmeta, capmeta;
    char *body;                /* everything after the closing '---' line */
    int body_line;             /* the file's line the body starts on */
    kb_skill_section *sections;
    size_t nsections, capsections;
} kb_skill;

void kb_skill_init(kb_skill *s);
void kb_skill_release(kb_skill *s);

/* Parses SKILL.md text (path names it in messages; its folder is the
 * skill's). The front matter is YAML between a first line '---' and the
 * next line '---', read with libyaml; it must be one block mapping with at
 * most the six keys, each a string except metadata, a map of string to
 * string. Refused, each with its line: malformed YAML, a missing or
 * unclosed front matter, a key outside the six or given twice, a value
 * that is not a string (a plain 1.5, true or null must be quoted), flow
 * style, anchors, aliases and tags (the format's reference validator reads
 * strict YAML). Every problem goes into diags (may be NULL); the result is
 * KB_ERR_PARSE with the first as "file:line: message" in err. Value rules
 * (the name's characters, lengths) are kb_skill_check's. On failure *out
 * is released. */
kb_rc kb_skill_parse(const char *path, const char *text, size_t len,
                     kb_skill *out, kb_skill_diags *diags, kb_err *err);
/* Reads and parses path: a SKILL.md, or a folder holding one. */
kb_rc kb_skill_load(const char *path, kb_skill *out, kb_skill_diags *diags,
                    kb_err *err);
/* Appends SKILL.md's text for s to out: the front matter made by libyaml's
 * emitter (block style; a value that YAML would read as something other
 * than a string is quoted), then the body as it is. Parsing the result
 * gives s back. */
kb_rc kb_skill_write(const kb_skill *s, kb_buf *out) KB_MUST_CHECK;
/* kb_skill_write to s->path, atomically. */
kb_rc kb_skill_save(const kb_skill *s, kb_err *err);

/* The metadata value of key, or NULL. */
const char *kb_skill_get(const kb_skill *s, const char *key);
/* Sets metadata key to value (a copy; an existing key keeps its place, a
 * new one goes last), or removes it when value is NULL. Setting any key
 * gives the skill a metadata map. */
kb_rc kb_skill_set(kb_skill *s, const char *key, const char *value)
    KB_MUST_CHECK;
/* Sets a top-level string key (not KB_SKILL_METADATA); NULL removes it. */
kb_rc kb_skill_set_field(kb_skill *s, kb_skill_key k, const char *value)
    KB_MUST_CHECK;
/* Replaces the body (and its sections). */
kb_rc kb_skill_set_body(kb_skill *s, const char *body) KB_MUST_CHECK;
/* The section titled title (case-insensitive), or NULL. */
const kb_skill_section *kb_skill_section_find(const kb_skill *s,
                                              const char *title);
/* 1 if a plain YAML scalar of this text would be read as something other
 * than a string (null, a boolean, a number, a date) by YAML 1.1 or 1.2
 * readers: such a value is quoted when written and refused unquoted. */
int kb_skill_yaml_nonstring(const char *text);

/* ------------------------------------------------------------ check.c */

/* The body sections every kb skill has, in this order. */
extern const char *const kb_skill_sections[4];

/* kb's metadata keys (docs/design.md, Skills), NULL-terminated. */
extern const char *const kb_skill_meta_keys[];

/* Checks what the Agent Skills format itself requires (name: 1-64
 * characters of [a-z0-9-], no leading, trailing or doubled '-', equal to
 * the folder's name; description: 1-1024 characters, no '<' or '>';
 * compatibility: at most 500) and kb's rules on the model alone: the four
 * body sections, kb-status one of the four, kb metadata keys known, kb-task
 * present beyond a draft, kb-speedup a number, no control byte in a value
 * or the body (kb_skill_escape_controls). Findings go to d. Returns
 * KB_OK or KB_ERR_NOMEM. */
kb_rc kb_skill_check(const kb_skill *s, kb_skill_diags *d) KB_MUST_CHECK;
/* s (freed) with each control byte kb_skill_check refuses written as a
 * visible "\x1b" and a CRLF as a line feed: text (an LLM's) that passes
 * lint's "text" rule. NULL for NULL or out of memory. */
char *kb_skill_escape_controls(char *s);

/* 1 for a valid name (the format's rule). */
int kb_skill_name_ok(const char *name);

/* ------------------------------------------------------------ evidence.c */

/* evidence.json beside SKILL.md: {"kb_evidence":1,"skill":NAME,
 * "records":[...]}, one record per kb-verify verification (docs/formats.md, "The
 * skill library"). */
typedef struct {
    char *path;
    cJSON *root;               /* never NULL once loaded */
    int exists;                /* the file was there */
} kb_skill_evidence;

void kb_skill_evidence_init(kb_skill_evidence *ev);
void kb_skill_evidence_release(kb_skill_evidence *ev);
/* Loads dir/evidence.json; a missing file is an empty list. A file that
 * is not that JSON, or a record without the fields every record has, is
 * KB_ERR_PARSE, each problem also in diags (may be NULL). */
kb_rc kb_skill_evidence_load(const char *dir, const char *name,
                             kb_skill_evidence *ev, kb_skill_diags *diags,
                             kb_err *err);
/* Writes the evidence atomically (indented JSON). */
kb_rc kb_skill_evidence_save(const kb_skill_evidence *ev, kb_err *err);
size_t kb_skill_evidence_count(const kb_skill_evidence *ev);
/* Record i (0 oldest), or NULL. */
const cJSON *kb_skill_evidence_at(const kb_skill_evidence *ev, size_t i);
/* The record whose hash is hex, or NULL. */
const cJSON *kb_skill_evidence_find(const kb_skill_evidence *ev,
                                    const char *hex);
/* Appends rec (taken, freed on failure). */
kb_rc kb_skill_evidence_add(kb_skill_evidence *ev, cJSON *rec, kb_err *err);

/* A record's hash: SHA-256 of its compact JSON; what kb-evidence holds. */
kb_rc kb_skill_record_hash(const cJSON *rec, char hex[65]);

/* What the evidence record of one verification is made from. result is
 * kb-verify's JSON result (kb_verify_result.json), device the hardware
 * profile (kb-verify --device-info --json; may be NULL: the result's own
 * device then), shapes the task's shapes as [{"name","dims":{..},
 * "timed"}] (may be NULL), kernel_sha256 the hash of the kernel.cu that
 * was verified, how "kb-verify" or "imported from FILE", date ISO 8601. */
typedef struct {
    const cJSON *result;
    const cJSON *device;
    const cJSON *shapes;
    const char *kernel_sha256;
    const char *how;
    const char *date;
    const char *shown_shape;   /* a generated kernel: the one shape its
                                  prompt named (the record's "held_back"
                                  lists the others); NULL: not generated */
} kb_skill_record_in;

/* Makes the record (*out, freed with cJSON_Delete): device (name, compute
 * capability, SMs, arch, driver and NVRTC versions), task, shapes, seeds,
 * checks passed, verdict and reason, per timed shape the candidate's and
 * the baseline's median with its 95 % interval, speedup against the named
 * baseline, the kernel's SHA-256, the date. A result that is not
 * kb-verify's (no verdict or task) is KB_ERR_PARSE. */
kb_rc kb_skill_record_make(const kb_skill_record_in *in, cJSON **out,
                           kb_err *err);

/* What a record says of the kernel it verified. */
typedef enum {
    KB_SKILL_BACKS = 0,        /* faster, or correct at parity with a
                                  vendor-library baseline */
    KB_SKILL_SLOWER,           /* correct, but no faster than its baseline */
    KB_SKILL_FAILS,            /* incorrect, crash, timeout, compile_error,
                                  refused */
    KB_SKILL_SUSPICIOUS,       /* never backs anything */
    KB_SKILL_NO_VERDICT        /* error: kb-verify's own trouble */
} kb_skill_outcome;

/* The speedup a vendor-library baseline must be matched to (parity). */
#define KB_SKILL_PARITY 0.95
/* kb-verify's bar for "faster" against a reference baseline. */
#define KB_SKILL_FASTER_MARGIN 1.03

/* A timed record that backs a kernel by its verdict, or finds it slower,
 * unless its speedup's interval holds the bar: then applying it marked it
 * "within_interval" ("kept": a verified or approved skill stays so and the
 * record backs it; "not_promoted": a draft stays one and it does not). */
kb_skill_outcome kb_skill_record_outcome(const cJSON *rec);
/* A speedup this many times the best verified skill's for the task is
 * flagged for a person's review. */
#define KB_SKILL_REVIEW_OVER 1.25
/* Flags rec for review ("review": why) when it is faster and its speedup
 * is above KB_SKILL_REVIEW_OVER times best (> 0: the best verified
 * skill's for its task, kb_skill_lib_best_speedup). The verdict stands: a
 * person looks at the kernel before trusting it. Returns 1 when it
 * flagged it, 0 when not, -1 out of memory. */
int kb_skill_record_review(cJSON *rec, double best);
/* The record's speedup interval: its runs' ratios' 95 % interval
 * (speedup_ci95), widened by the baseline's spread across processes
 * (baseline_spread, a fraction) on both sides. 0 when it has none. */
int kb_skill_record_interval(const cJSON *rec, double *lo, double *hi);
/* The speedup a record must reach to back a kernel: KB_SKILL_PARITY
 * against a library, KB_SKILL_FASTER_MARGIN against the reference. */
double kb_skill_record_bar(const cJSON *rec);
/* The record's string field key ("" when absent). */
const char *kb_skill_record_str(const cJSON *rec, const char *key);

/* Appends to out the negative evidence of ev in words, for kb-when-not:
 * each record of the kernel kernel_sha256 (NULL: of any) that failed, or
 * did not beat its baseline on some timed shape ("incorrect on layernorm
 * (NVIDIA H200, sm_90): REASON; 0.98x cublas_bf16 on gemm_bf16 'target'
 * (NVIDIA H200, sm_90)"), the same phrase once. Nothing when there is
 * none. */
kb_rc kb_skill_when_not(const kb_skill_evidence *ev, const char *kernel_sha256,
                        kb_buf *out) KB_MUST_CHECK;

/* ------------------------------------------------------------ lifecycle.c */

typedef enum {
    KB_SKILL_DRAFT = 0,
    KB_SKILL_VERIFIED,
    KB_SKILL_APPROVED,
    KB_SKILL_RETIRED,
    KB_SKILL_NSTATUS
} kb_skill_status;

const char *kb_skill_status_name(kb_skill_status st);
/* 0 and *out, or -1 for a name that is no status. */
int kb_skill_status_parse(const char *name, kb_skill_status *out);
/* The skill's kb-status; a missing or unknown one reads as draft. */
kb_skill_status kb_skill_status_of(const kb_skill *s);

/* Applies one verification's record (taken: appended to ev, or freed) to
 * s and ev, as docs/design.md's lifecycle says, with kernel_sha256 the hash of
 * s's kernel.cu now:
 *  - a retired skill is not verified again (KB_ERR_MISMATCH);
 *  - a record for another kernel or task is refused (KB_ERR_MISMATCH);
 *  - a suspicious result never makes or strengthens a skill, and a result
 *    without a verdict (kb-verify's own error: no GPU) says nothing of the
 *    kernel: both are refused (KB_ERR_MISMATCH, KB_ERR_GPU) with s and ev
 *    unchanged;
 *  - a record that backs the kernel makes a draft or verified skill
 *    verified; an approved one stays approved when its kernel is the one
 *    approved (kb-evidence's record), else it is verified again; kb-speedup
 *    and kb-evidence follow the record;
 *  - a record that fails or is slower retires a verified or approved skill
 *    with the reason (kb-retired); a draft stays a draft;
 *  - kb-when-not is made again from the records of the current kernel
 *    (kb_skill_when_not), when they hold something against it.
 * what gets one line saying what changed. s and ev are not saved here. */
kb_rc kb_skill_apply_record(kb_skill *s, kb_skill_evidence *ev, cJSON *rec,
                            const char *kernel_sha256, kb_buf *what,
                            kb_err *err);
/* The human step: only a verified skill whose latest evidence backs its
 * current kernel (kernel_sha256) is approved; kb-reviewer records who.
 * Else KB_ERR_MISMATCH saying why (KB_ERR_USAGE: no reviewer). */
kb_rc kb_skill_approve(kb_skill *s, const kb_skill_evidence *ev,
                       const char *kernel_sha256, const char *reviewer,
                       kb_err *err);
/* Retires s with the reason (kb-retired); kept, never deleted. Retiring
 * a retired skill is KB_ERR_MISMATCH. */
kb_rc kb_skill_retire(kb_skill *s, const char *reason, kb_err *err);
/* Checks that what s says of itself (kb-status, kb-speedup, kb-evidence)
 * agrees with ev and its kernel (kernel_sha256, NULL: no kernel.cu):
 * findings into d. */
kb_rc kb_skill_check_evidence(const kb_skill *s, const kb_skill_evidence *ev,
                              const char *kernel_sha256, kb_skill_diags *d)
    KB_MUST_CHECK;

/* ------------------------------------------------------------ files.c */
/* The files of a skill folder, by the one rule every reader follows (lint,
 * list, export, the servers, ingest): a link is followed only when its
 * real path stays inside the repository that holds the library (the seed
 * skills' kernel.cu -> ../../../corpus/tasks/...); one that leaves it,
 * dangles or loops is a lint error and never read. Hidden names (kb's
 * temp files, .git) are not the skill's. The limits (docs/formats.md, "The
 * skill library"): */
#define KB_SKILL_MD_MAX (1u << 20)        /* SKILL.md */
#define KB_SKILL_FRONT_MAX (16u << 10)    /* its front matter (the fields fit in 2 KB) */
#define KB_SKILL_FILES_MAX 512            /* files of a skill: the Skills extension's */
#define KB_SKILL_BYTES_MAX (16u << 20)    /* their bytes: the Skills extension's */

/* The folder links of the skill folder dir may lead into: the git work
 * tree holding it (the nearest folder above with a .git), else the folder
 * that holds the library (dir's grandparent). Real path; caller frees;
 * NULL when dir cannot be resolved or out of memory. */
char *kb_skill_root(const char *dir);
/* NULL and *st (what path leads to) when path's real path stays inside
 * root; else why not, a literal ("a link that leaves the repository", "a
 * dangling link", "a link loop"). */
const char *kb_skill_path_check(const char *root, const char *path, struct stat *st);

/* One file or folder of a skill folder. */
typedef struct {
    char *rel;                 /* its place in the folder: "kernel.cu", "ref/a.cu" */
    char *path;                /* the path to read it by */
    size_t size;
    unsigned mode;             /* st_mode of what it leads to */
    int dir;                   /* a folder (listed before what it holds) */
} kb_skill_file;

typedef struct {
    kb_skill_file *items;      /* by place, a folder before its files */
    size_t n, cap;
    size_t nfiles, bytes;      /* regular files and their bytes */
    size_t refused;            /* links out, loops: the folder is not whole */
    int over;                  /* over the limits, or the folder itself refused */
} kb_skill_files;

void kb_skill_files_init(kb_skill_files *f);
void kb_skill_files_release(kb_skill_files *f);
/* Lists the skill folder dir under root's rule: what may be read, into
 * out; each link that leaves root, dangles or loops, a folder met again
 * (a loop), what is neither file nor folder, and a skill over the limits
 * (out->over) are findings in d. Only no memory fails. */
kb_rc kb_skill_files_list(const char *dir, const char *root, kb_skill_files *out,
                          kb_skill_diags *d, kb_err *err);
/* The file listed at rel, or NULL (not there, or refused). */
const kb_skill_file *kb_skill_files_find(const kb_skill_files *f, const char *rel);

/* ------------------------------------------------------------ library.c */

/* One skill of a library with what lint and list need beside it. */
typedef struct {
    char *dir;                 /* the skill's folder */
    kb_skill skill;
    kb_skill_evidence evidence;
    char kernel_sha256[65];    /* "" when there is no kernel.cu */
    int ok;                    /* SKILL.md parsed, the folder within limits */
    char *root;                /* where its links may lead (kb_skill_root) */
    kb_skill_files files;      /* what may be read of its folder */
} kb_skill_entry;

typedef struct {
    char *dir;
    kb_skill_entry *items;
    size_t n, cap;
} kb_skill_lib;

void kb_skill_lib_init(kb_skill_lib *lib);
void kb_skill_lib_release(kb_skill_lib *lib);
/* Loads one skill folder (or SKILL.md) into a new entry of lib: a SKILL.md
 * that does not parse, or evidence that does not, leaves the entry with
 * ok 0 (or an empty evidence) and its findings in diags; only a missing
 * SKILL.md or no memory fails. */
kb_rc kb_skill_lib_add(kb_skill_lib *lib, const char *path,
                       kb_skill_diags *diags, kb_err *err);
/* Adds every folder of dir that holds a SKILL.md, sorted by name, to lib
 * (initialised by the caller). A missing dir is KB_ERR_NOTFOUND. */
kb_rc kb_skill_lib_load(const char *dir, kb_skill_lib *lib,
                        kb_skill_diags *diags, kb_err *err);
/* The entry whose skill is named name, or NULL. */
kb_skill_entry *kb_skill_lib_find(kb_skill_lib *lib, const char *name);

/* The architecture an entry's latest backing evidence ran on ("sm_90"),
 * or "" when none. */
const char *kb_skill_entry_arch(const kb_skill_entry *e);
/* 1 if a dominates b: both verified (or approved) for the same task on
 * the same architecture, and a's candidate median is below b's on every
 * timed shape they share, by more than both 95 % intervals (a's upper
 * bound below b's lower bound). Two skills of the same kernel.cu never
 * dominate each other: their records differ by noise. */
int kb_skill_dominates(const kb_skill_entry *a, const kb_skill_entry *b);
/* The best speedup of a verified or approved skill of lib for task on
 * arch (NULL or "": any), from each one's latest backing record, skipping
 * the kernel except_sha256 (may be NULL); 0 when there is none. */
double kb_skill_lib_best_speedup(const kb_skill_lib *lib, const char *task, const char *arch,
                                 const char *except_sha256);
/* Library-wide findings: a skill another dominates, and near-duplicates
 * (the same kernel.cu for the same task and bottleneck). */
kb_rc kb_skill_lib_check(const kb_skill_lib *lib, kb_skill_diags *d)
    KB_MUST_CHECK;

/* ------------------------------------------------------------ commit.c */

/* Writes e's SKILL.md and evidence.json as one step: the folder is made
 * again beside itself under a hidden temp name (its other files hard
 * links, its links made again), the two files written there, and the two
 * folders exchanged (renameat2 RENAME_EXCHANGE); the old one is removed.
 * A kill leaves the old folder or the new one, never one file new and
 * the other old; the temp folder it leaves is swept by the next commit
 * in the library. A skill folder that is itself a link, or one on a file
 * system without RENAME_EXCHANGE (NFS, CIFS), gets the two writes,
 * evidence first. */
kb_rc kb_skill_commit(const kb_skill_entry *e, kb_err *err);

/* ------------------------------------------------------------ export.c */

/* Copies every skill of lib whose status is at least min (verified:
 * verified or approved; approved: approved only; retired skills never)
 * into dir/<name>/ with the files beside its SKILL.md, each folder made
 * under a temporary name and renamed into place (an older export of the
 * same skill is replaced whole; other folders of dir are left alone).
 * A skill with a format error (kb_skill_check) is not exported: it goes
 * into d and the result is KB_ERR_PARTIAL. *n counts the folders
 * written. */
kb_rc kb_skill_export(const kb_skill_lib *lib, const char *dir,
                      kb_skill_status min, size_t *n, kb_skill_diags *d,
                      kb_err *err);


/* ----------------------------------------------------------------- verify.c */
/* A skill verified through kb-verify (verify/verify.h, below skills/), its
 * kernel compiled for lint, its kb-task checked against the task model,
 * its deep links resolved in the KB. skills/ keeps the model, the evidence
 * and the lifecycle; these hand it kb-verify's JSON. */

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
    const kb_skill_lib *lib;     /* the library: a speedup well above its
                                    best verified skill for the task is
                                    flagged for review (may be NULL) */
} kb_skill_verify_opts;

/* Verifies a library entry: kb-verify runs its kernel.cu against its
 * kb-task (or the matching result of o->from_result is taken, its kernel's
 * hash and task checked against the skill's), the result becomes an
 * evidence record (kb_skill_record_make) and the lifecycle applies it
 * (kb_skill_apply_record); then evidence.json and SKILL.md are written.
 * what gets one line on what changed, verdict the verdict (may be NULL).
 * A refusal - a retired skill, no kernel or task, a result for another
 * kernel, a suspicious result, no verdict (no GPU) - writes nothing. */
kb_rc kb_skill_verify(kb_skill_entry *e, const kb_skill_verify_opts *o,
                          kb_buf *what, kb_buf *verdict, kb_err *err);

/* lint's task check: kb-task loads as a task of tasks_dir. */
kb_rc kb_skill_check_task(const kb_skill_entry *e, const char *tasks_dir,
                              kb_skill_diags *d) KB_MUST_CHECK;

/* lint's compile check: kernel.cu (and baseline.cu, if there) compile for
 * kb-task with `kb-verify --compile-only` (v opened with compile_only).
 * Findings into d. KB_ERR_NOTFOUND when v's kb-verify is not there (no
 * CUDA toolkit: nothing checked). */
kb_rc kb_skill_check_compile(const kb_skill_entry *e, const char *tasks_dir,
                                 kb_verifier *v, kb_skill_diags *d, kb_err *err);

/* lint's link check: every http(s) link of the body with an #anchor, and
 * every link to a document the KB holds, names a chunk of store (the
 * document's URL, and a section with that anchor). Findings into d. */
kb_rc kb_skill_check_links(const kb_skill_entry *e, kb_store *store,
                               kb_skill_diags *d, kb_err *err);

/* ------------------------------------------------------------ search.c */

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
    /* the search itself: kb_query_run (query/ sits above skills/, so the
       caller hands it down) */
    kb_rc (*run)(kb_store *store, kb_embedder *emb, const kb_query_opts *opts,
                 kb_results *out, kb_err *err);
} kb_skill_query;

/* One skill found: its best section (a result of all) and the metadata of
 * its status line (owned strings, "" when the skill has none). */
typedef struct {
    const kb_result *r;
    char *name, *status, *speedup, *task, *arch, *dtype, *ops;
} kb_skill_hit;

typedef struct {
    kb_results all;             /* what the search found, every section */
    kb_skill_hit *items;
    size_t n, cap;
} kb_skill_hits;

/* Searches the KB's chunks of kind skill (q->run), one hit per
 * skill, kept when its metadata passes q's filters, at most q->k. The
 * caller releases out with kb_skill_hits_release. */
kb_rc kb_skill_search(kb_store *store, const kb_skill_query *q,
                      kb_skill_hits *out, kb_err *err);
void kb_skill_hits_release(kb_skill_hits *h);
/* 1 if a skill with this metadata (kb-status, kb-arch, kb-dtype, kb-ops;
 * "" for a key it lacks) passes q's filters: the test kb_skill_search
 * applies to each hit, for a caller that lists skills without a search. */
int kb_skill_search_passes(const kb_skill_query *q, const char *status,
                           const char *arch, const char *dtype, const char *ops);
/* 1 if s (a kb-speedup, "1.61") is a number, *out set to it; 0 for "" or
 * anything else: its JSON is then null. */
int kb_skill_speedup_parse(const char *s, double *out);


/* ------------------------------------------------------------ publish.c */

/* One file of a skill, read once: the bytes served and their digest. */
typedef struct {
    char *uri;               /* skill://<skill>/<name> */
    char *name;              /* the file's name in the folder: "kernel.cu" */
    const char *mime;        /* text/markdown, text/x-cuda, application/json ... */
    char sha256[65];         /* of the raw bytes, lower-case hex */
    size_t size;
    int text;                /* UTF-8 without NUL: served as text, else base64 */
    char *data;              /* size bytes (and a NUL) */
} kb_skill_pub_file;

typedef struct {
    char *name, *description;
    cJSON *frontmatter;      /* SKILL.md's front matter, every key as written */
    kb_skill_pub_file *files;   /* SKILL.md first, then by name */
    size_t nfiles;
} kb_skill_pub_skill;

typedef struct {
    char *dir;
    kb_skill_pub_skill *items;     /* in the library's order (by name) */
    size_t n;
} kb_skill_pub;

/* Reads the skill library dir (kb_skill_lib_load): every skill whose
 * SKILL.md parses, with the regular files of its folder (links followed,
 * hidden files left out), each at most the Skills extension's limits (512
 * files, 16 MiB a skill). A missing dir is KB_ERR_NOTFOUND. *out is freed
 * with kb_skill_pub_free. */
kb_rc kb_skill_pub_load(const char *dir, kb_skill_pub **out, kb_err *err);
void kb_skill_pub_free(kb_skill_pub *lib);
/* The skill called name, or NULL. */
const kb_skill_pub_skill *kb_skill_pub_find(const kb_skill_pub *lib, const char *name);
/* The file whose URI is uri (and its skill in *skill, may be NULL), or
 * NULL: only the files read at load are ever served. */
const kb_skill_pub_file *kb_skill_pub_lookup(const kb_skill_pub *lib, const char *uri,
                                             const kb_skill_pub_skill **skill);
/* f's bytes in base64 (caller frees; NULL out of memory). */
char *kb_skill_pub_base64(const kb_skill_pub_file *f);
/* The JSON the MCP Skills extension gives of the library (caller frees
 * with cJSON_Delete; NULL out of memory): {"io.modelcontextprotocol.skills/digest":
 * "sha256:HEX"} of f; the Resource of f in resources/list (SKILL.md named
 * and described by its front matter, the other files by their place);
 * a Skill entry of skills/list (uri, front matter, every file with its
 * digest and size). */
cJSON *kb_skill_pub_digest_meta(const kb_skill_pub_file *f);
cJSON *kb_skill_pub_resource_json(const kb_skill_pub_skill *s, const kb_skill_pub_file *f);
cJSON *kb_skill_pub_skill_json(const kb_skill_pub_skill *s);

#endif
