/*
 * cli.h - what the command files share: the global options and the command
 * table's entry type. Only main.c and cmd_*.c files include this; they are
 * the only code that prints to stdout or decides the exit status.
 */
#ifndef KB_CLI_H
#define KB_CLI_H

#include "kb/kb.h"
#include "kb/kb_int.h"
#include "skills/skill.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>

typedef struct kb_command kb_command;

/* Options that every command accepts, parsed by kb_cli_main from anywhere
 * on the command line. */
typedef struct {
    const char *kb_dir;      /* --kb DIR, $KB_DIR, $XDG_DATA_HOME/kb */
    int quiet;               /* --quiet / -q */
    int color;               /* --color=always, or auto: stdout is a
                                terminal, NO_COLOR unset, TERM not dumb */
    int progress;            /* stderr is a terminal and not quiet */
    const kb_config *config; /* the environment, loaded once */
    const kb_command *const *commands;   /* every command, for help */
} kb_cli;


/* A command gets argv with argv[0] = its name and the global options
 * removed; it returns the process exit status. */
typedef int (*kb_command_fn)(int argc, char **argv, const kb_cli *cli,
                             const kb_command *self);

/* One option of a command. The table of them is the one place an option
 * is spelt: kb_getopt parses with getopt_long from it, and --help, the
 * shell completion and the man page are printed from it. */
typedef struct {
    const char *name;    /* the long name without "--" ("kind"); NULL ends
                            the table */
    int key;             /* what kb_getopt_next returns for it: a letter or
                            digit that is also the short option ('k': -k),
                            or KB_OPT_LONG(c) for a long option alone */
    const char *arg;     /* the value's name in help ("N", "DIR", "FILE");
                            NULL: a flag without a value. DIR, FILE, PATH
                            complete as names of the file system */
    const char *help;    /* what it does; a "\n" continues on a new line */
} kb_option;

#define KB_OPT_LONG(c) (0x100 + (c))

/* A command: one file exports one (`const kb_command kb_cmd_query`), and
 * cli/main.c lists them. A command of subcommands (kb skill) has fn NULL
 * and a NULL-terminated list of entries whose parent it is. */
struct kb_command {
    const char *name;             /* the word that calls it: "query", "lint" */
    kb_command_fn fn;
    const char *usage;            /* "kb query [options] TEXT..." */
    const char *summary;          /* one line for `kb --help` */
    const kb_option *options;     /* NULL, or ends with { NULL } */
    const char *notes;            /* NULL, or more help after the options */
    const kb_command *const *subcommands;
    const kb_command *parent;     /* the command a subcommand belongs to */
    const char *operands;         /* how completion offers the arguments
                                     that are not options: "file", "dir",
                                     "source" (a manifest id or a path),
                                     "task", "skill"; NULL: nothing */
};

/* The global options (--kb, -q, --color, --version, --help): parsed by
 * kb_cli_main from anywhere on the command line before "--". */
extern const kb_option kb_global_options[];

/* getopt_long over a command's table. Usage:
 *
 *     kb_getopt g;
 *     kb_getopt_init(&g, self, argc, argv);
 *     int c;
 *     while ((c = kb_getopt_next(&g)) > 0)
 *         switch (c) { case 'k': ... g.arg ...; }
 *     if (c < 0)
 *         return g.status;
 *     operands: argv[g.ind] .. argv[argc - 1]
 *
 * Long options match whole names only ("--k" is not "--kind"); "--name
 * VALUE", "--name=VALUE", "-kVALUE", "-k VALUE" and clustered flags are
 * read; "--" ends the options, so an operand may start with '-'; operands
 * and options may come in any order. --help (and -h where the command has
 * no -h of its own) and --version are every command's. */
#define KB_GETOPT_MAX 48
typedef struct {
    const kb_command *cmd;
    int argc;
    char **argv;
    const char *arg;        /* the value of the option just returned */
    int ind;                /* once 0 is returned: the first operand */
    int status;             /* once -1 is returned: the exit status */
    int nopts;
    struct option *longopts;
    char shortopts[2 * KB_GETOPT_MAX + 4];
    struct option longbuf[KB_GETOPT_MAX + 3];
} kb_getopt;

void kb_getopt_init(kb_getopt *g, const kb_command *cmd, int argc, char **argv);
/* The next option's key (> 0); 0 at the end of the options; -1 when the
 * command is done: --help or --version printed (status 0) or a usage
 * error reported (status 2). */
int kb_getopt_next(kb_getopt *g);

/* After the options: a usage error if operands are left (returns 2), else 0. */
int kb_cli_no_operands(kb_getopt *g);

/* The command line of a command with no options of its own (--help and
 * --version only). With ind, the operands start at argv[*ind]; without,
 * an operand is a usage error. Returns -1 to go on, or the exit status to
 * stop with: --help or --version printed (0), a usage error reported (2). */
int kb_cli_no_options(const kb_command *self, int argc, char **argv, int *ind);

/* The name among names[0, n) that word most likely misspells (a few
 * edits away), or NULL: for "did you mean". */
const char *kb_cli_similar(const char *word, const char *const *names, size_t n);
/* "-k, --k N" or "    --mode M" into buf; returns its length. */
size_t kb_cli_option_label(const kb_option *o, char *buf, size_t n);
/* The option table as --help prints it. */
void kb_cli_print_options(FILE *f, const kb_option *opts);

/* The whole program: the global options, then the command of commands
 * (a NULL-terminated list) that argv names, dispatched. Returns the exit
 * status; a failed write to stdout is an error (exit 1). */
int kb_cli_main(int argc, char **argv, const kb_command *const *commands);

/* A progress line on stderr, git's way: on a terminal one line redrawn in
 * place; otherwise (a log, a pipe) a plain line at once and then one every
 * 15 s, so that a long step is not silent; none when not wanted. */
typedef struct {
    int mode;          /* none, redrawn or lines (cli.c) */
    int drawn;         /* a redrawn line is on the screen */
    double last_ms;    /* when the last plain line was printed (0: none) */
} kb_cli_progress;
void kb_cli_progress_init(kb_cli_progress *p, int wanted);
void kb_cli_progress_show(kb_cli_progress *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Erases a redrawn line, before other output. */
void kb_cli_progress_clear(kb_cli_progress *p);

/* Prints the command's usage and help to f. */
void kb_cli_usage(const kb_command *cmd, int to_stderr);
/* Prints "kb COMMAND: MSG" for err on stderr ("kb: MSG" before a command
 * runs) and returns the exit status for it. */
int kb_cli_fail(const kb_err *err);
/* An error's line on stderr with the same "kb COMMAND: " before it, its
 * control bytes escaped as kb_cli_fail's are. */
void kb_cli_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints a usage error ("kb CMD: MSG") and the usage line; returns 2. */
int kb_cli_usage_error(const kb_command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Opens the KB of the command line (--kb, $KB_DIR, the default) with
 * kb_store_open's flags. */
kb_rc kb_cli_open_store(const kb_cli *cli, int flags, kb_store **store,
                        kb_err *err);
/* kb's own data (name: "sources.json", "tasks", "skills") for this
 * command line: kb_store_data_find with its KB, else "corpus/NAME" (the
 * usual place, for the message that says it is not there). Caller frees;
 * NULL out of memory. */
char *kb_cli_data(const kb_cli *cli, const char *name);
/* Prints root as one line of JSON on stdout and frees it (root may be
 * NULL: out of memory). Returns KB_OK, or KB_ERR_NOMEM with err set. */
kb_rc kb_cli_print_json(cJSON *root, kb_err *err);
/* Writes s[0, n) to f for a person at a terminal, text from documents
 * shown as it is but for what a terminal would obey: control characters
 * (C0 other than tab and line feed, DEL, C1), bytes that are not UTF-8
 * and the bidirectional overrides are written escaped ("\x1b",
 * "\u202e"), so a document cannot retitle or clear the terminal, move
 * its cursor or disguise a link. kb_cli_puts_safe: a whole string. */
void kb_cli_put_safe(FILE *f, const char *s, size_t n);
void kb_cli_puts_safe(FILE *f, const char *s);
/* kb_cli_puts_safe, then spaces up to width bytes: printf's "%-Ns" for a
 * column of text from documents (the escapes count towards the width). */
void kb_cli_puts_safe_pad(FILE *f, const char *s, int width);
/* Text output that quotes what others wrote (a contributor's SKILL.md and
 * evidence.json): printed to f, a memory stream, and by kb_cli_safe_end
 * to stdout through kb_cli_put_safe (f is stdout itself when there is no
 * memory for the stream). */
typedef struct {
    FILE *f;
    char *text;
    size_t len;
} kb_cli_safe_out;
void kb_cli_safe_begin(kb_cli_safe_out *o);
void kb_cli_safe_end(kb_cli_safe_out *o);

/* "s" after a count that is not 1: "%zu chunk%s", n, KB_S(n). */
#define KB_S(n) ((n) == 1 ? "" : "s")

/* The commands' entries, one file each. */
extern const kb_command kb_cmd_ingest, kb_cmd_query, kb_cmd_get, kb_cmd_status,
    kb_cmd_sources, kb_cmd_papers, kb_cmd_eval, kb_cmd_verify, kb_cmd_skill,
    kb_cmd_serve, kb_cmd_mcp, kb_cmd_rm, kb_cmd_config, kb_cmd_doctor, kb_cmd_completion,
    kb_cmd_manpage, kb_cmd_prompt, kb_cmd_generate, kb_cmd_tune, kb_cmd_model;

/* cli/cmd_verify_queue.c: kb verify worker and kb verify queue, whose
 * entries are cmd_verify.c's (the subcommands of kb verify). */
int cmd_verify_worker(int argc, char **argv, const kb_cli *cli, const kb_command *self);
int cmd_verify_queue(int argc, char **argv, const kb_cli *cli, const kb_command *self);
extern const kb_option cmd_verify_worker_options[], cmd_verify_queue_options[];

/* cli/cmd_tool.c: the --json of a command that is a tool (kb.h,
 * "tools"): runs the tool named tool with args on the KB of the command
 * line, opened read-only, and prints its result object as one line of
 * JSON. Frees args (NULL stands for out of memory while making them).
 * Returns the exit status. */
int cmd_tool_json(const kb_cli *cli, const char *tool, cJSON *args);
/* The same on store, an open KB (NULL: the command line's, opened
 * read-only), with extra (NULL: none) added to the result object under
 * extra_key, and seen (NULL: none) shown the result and the store before
 * it is printed (kb query keeps its results for kb get @N). Frees args
 * and extra; the store stays the caller's. */
typedef void (*cmd_tool_seen_fn)(void *ctx, kb_store *store, const cJSON *result);
int cmd_tool_json_on(const kb_cli *cli, kb_store *store, const char *tool,
                     cJSON *args, const char *extra_key, cJSON *extra,
                     cmd_tool_seen_fn seen, void *seen_ctx);

/* cli/cmd_skill_lib.c: what the kb skill files share (cmd_skill.c, the
 * entries; cmd_skill_new.c, kb skill new; cmd_skill_verify.c, kb skill
 * verify). */
/* Where a subcommand's option goes, by its long name (the option itself
 * is in the subcommand's table): --name VALUE into *str, --name into *flag. */
typedef struct {
    const char *name;
    const char **str;
    int *flag;
} cmd_skill_opt;
/* What every kb skill subcommand starts with: its operands, an empty
 * library, its findings and an error. */
typedef struct {
    const char **pos;          /* the operands: argv's tail */
    int npos;
    kb_skill_lib lib;
    kb_skill_diags d;
    kb_err err;
    char *found[2];            /* --dir and --tasks when not given: the
                                  library and tasks kb_cli_data found */
} cmd_skill_run;
/* Readies r (released with cmd_skill_end, whatever this returns) and
 * parses argv (argv[0] is the subcommand) with self's option table into
 * opts' places; a "dir" or "tasks" option left unset (NULL) is the
 * library or the tasks kb_cli_data finds. Returns -1 to go on, or the
 * exit status to stop with (a usage error reported, --help printed). */
int cmd_skill_begin(const kb_command *self, const kb_cli *cli, int argc, char **argv,
                    const cmd_skill_opt *opts, cmd_skill_run *r);
void cmd_skill_end(cmd_skill_run *r);
/* The entry NAME names: a skill of lib by name, else a path (added). */
kb_skill_entry *cmd_skill_find(kb_skill_lib *lib, const char *name, kb_skill_diags *d,
                               kb_err *err);
/* A skill's name (its folder's when it does not parse); a metadata value
 * of it, else dflt. */
const char *cmd_skill_name(const kb_skill_entry *e);
const char *cmd_skill_meta(const kb_skill_entry *e, const char *key, const char *dflt);
/* Prints root (frees it; NULL: out of memory); the exit status. */
int cmd_skill_print_json(cJSON *root);
/* Puts kb-speedup (NULL or "" for none) under "speedup": a number, or
 * null. */
void cmd_skill_put_speedup(cJSON *o, const char *speedup, int *ok);
/* kb skill new (cmd_skill_new.c) and kb skill verify (cmd_skill_verify.c):
 * their entries are cmd_skill.c's. */
int cmd_skill_new(int argc, char **argv, const kb_cli *cli, const kb_command *self);
int cmd_skill_verify(int argc, char **argv, const kb_cli *cli, const kb_command *self);

#endif
