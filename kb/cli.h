/*
 * cli.h - what the command files share: the global options and the command
 * table's entry type. Only main.c and cmd_*.c files include this; they are
 * the only code that prints to stdout or decides the exit status.
 */
#ifndef KB_CLI_H
#define KB_CLI_H

#include "kb/kb.h"
#include "kb/config.h"

#include <cjson/cJSON.h>

/* Options that every command accepts, parsed by main.c from anywhere on
 * the command line. */
typedef struct {
    const char *kb_dir;      /* --kb DIR, $KB_DIR, $XDG_DATA_HOME/kb */
    int quiet;               /* --quiet / -q */
    int color;               /* stdout is a terminal and NO_COLOR unset */
    int progress;            /* stderr is a terminal and not quiet */
    const kb_config *config; /* the environment, loaded once by main() */
} kb_cli;

typedef struct kb_command kb_command;

/* A command gets argv with argv[0] = its name and the global options
 * removed; it returns the process exit status. */
typedef int (*kb_command_fn)(int argc, char **argv, const kb_cli *cli,
                             const kb_command *self);

struct kb_command {
    const char *name;
    kb_command_fn fn;
    const char *usage;    /* "kb query [options] TEXT..." */
    const char *summary;  /* one line for `kb --help` */
    const char *help;     /* the options, printed by `kb CMD --help` */
};

/* Prints the command's usage and help to f. */
void kb_cli_usage(const kb_command *cmd, int to_stderr);
/* Prints "kb: MSG" for err on stderr and returns the exit status for it. */
int kb_cli_fail(const kb_err *err);
/* Prints a usage error ("kb CMD: MSG") and the usage line; returns 2. */
int kb_cli_usage_error(const kb_command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Opens the KB of the command line (--kb, $KB_DIR, the default) with
 * kb_store_open's flags. */
kb_rc kb_cli_open_store(const kb_cli *cli, int flags, kb_store **store,
                        kb_err *err);
/* Parses the options of a command that takes no arguments: --json and, if
 * option is not NULL, --OPTION VALUE (into *value). Returns 0, or the exit
 * status of a usage error it has reported. */
int kb_cli_parse_plain(int argc, char **argv, const kb_command *self,
                       const char *option, const char **value, int *json);
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
/* 1 if argv holds -h or --help (before a "--"). */
int kb_cli_wants_help(int argc, char **argv);

/* The commands, one file each. */
int cmd_ingest(int, char **, const kb_cli *, const kb_command *);
int cmd_query(int, char **, const kb_cli *, const kb_command *);
int cmd_get(int, char **, const kb_cli *, const kb_command *);
int cmd_status(int, char **, const kb_cli *, const kb_command *);
int cmd_sources(int, char **, const kb_cli *, const kb_command *);
int cmd_papers(int, char **, const kb_cli *, const kb_command *);
int cmd_eval(int, char **, const kb_cli *, const kb_command *);
int cmd_verify(int, char **, const kb_cli *, const kb_command *);
int cmd_skill(int, char **, const kb_cli *, const kb_command *);
int cmd_generate(int, char **, const kb_cli *, const kb_command *);
int cmd_prompt(int, char **, const kb_cli *, const kb_command *);
int cmd_serve(int, char **, const kb_cli *, const kb_command *);
int cmd_mcp(int, char **, const kb_cli *, const kb_command *);

/* query/cmd_tool.c: the --json of a command that is a tool (kb.h,
 * "tools"): runs the tool named tool with args on the KB of the command
 * line, opened read-only, and prints its result object as one line of
 * JSON. Frees args (NULL stands for out of memory while making them).
 * Returns the exit status. */
int cmd_tool_json(const kb_cli *cli, const char *tool, cJSON *args);

#endif
