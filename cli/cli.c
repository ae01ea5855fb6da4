/* cli.c - the command line: the global options, dispatch through the
 * command table, getopt_long over each command's option table, help and
 * usage errors printed alike, the KB of the command line, JSON on stdout. */
#include "cli/cli.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

kb_rc kb_cli_print_json(cJSON *root, kb_err *err)
{
    char *s = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!s)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory printing JSON");
    size_t n = strlen(s);
    if (!kb_utf8_valid(s, n)) {
        /* cJSON copies a string's bytes as they are: bytes that are not
         * UTF-8 (from a query's argv, a file name) would make invalid
         * JSON; they are only ever inside strings, where U+FFFD is fine */
        kb_buf fixed;
        kb_buf_init(&fixed, 0);
        if (kb_utf8_repair(s, n, &fixed, NULL) != KB_OK) {
            kb_buf_release(&fixed);
            free(s);
            return kb_err_set(err, KB_ERR_NOMEM, "out of memory printing JSON");
        }
        free(s);
        s = kb_buf_detach(&fixed);
    }
    puts(s);
    free(s);
    return KB_OK;
}

/* The length of the UTF-8 sequence at s (n bytes left) and its code point,
 * or 0 if it is not one (overlong, surrogate, cut short, beyond U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n, unsigned long *cp)
{
    size_t len = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 ? 2 : 0;
    if (s[0] > 0xF4 || len == 0 || len > n)
        return 0;
    unsigned long c = s[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = c << 6 | (s[i] & 0x3F);
    }
    static const unsigned long least[] = { 0, 0, 0x80, 0x800, 0x10000 };
    if (c < least[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    *cp = c;
    return len;
}

void kb_cli_put_safe(FILE *f, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        const unsigned char *run = p;   /* what needs no escape, in one write */
        unsigned long cp = 0;
        size_t len = 0;
        while (p < end) {
            if (*p >= 0x20 && *p < 0x7F) {
                p++;
            } else if (*p == '\n' || *p == '\t') {
                p++;
            } else if (*p >= 0x80 && (len = utf8_seq(p, (size_t)(end - p), &cp)) &&
                       cp >= 0xA0 && !(cp >= 0x202A && cp <= 0x202E) &&
                       !(cp >= 0x2066 && cp <= 0x2069)) {
                p += len;
            } else {
                break;
            }
        }
        fwrite(run, 1, (size_t)(p - run), f);
        if (p == end)
            break;
        if (*p == '\r' && p + 1 < end && p[1] == '\n') {
            p++;   /* a CRLF line end is a line end */
        } else if (*p >= 0x80 && len) {
            fprintf(f, "\\u%04lx", cp);   /* C1 control, bidi override */
            p += len;
        } else {
            fprintf(f, "\\x%02x", *p++);
        }
    }
}

void kb_cli_puts_safe(FILE *f, const char *s)
{
    kb_cli_put_safe(f, s, strlen(s));
}

void kb_cli_puts_safe_pad(FILE *f, const char *s, int width)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) {                   /* out of memory: unpadded, still safe */
        kb_cli_puts_safe(f, s);
        return;
    }
    kb_cli_puts_safe(m, s);
    if (fclose(m) != 0 || !text) {
        free(text);
        kb_cli_puts_safe(f, s);
        return;
    }
    fwrite(text, 1, len, f);
    for (size_t i = len; i < (size_t)(width > 0 ? width : 0); i++)
        fputc(' ', f);
    free(text);
}

/* "kb skill lint": the words that call cmd. */
static void print_path(FILE *f, const kb_command *cmd)
{
    if (cmd->parent)
        print_path(f, cmd->parent);
    else
        fputs("kb", f);
    fprintf(f, " %s", cmd->name);
}

/* The command running, for its messages' "kb COMMAND: " (NULL before one
 * is chosen: "kb: "). */
static const kb_command *running;

/* "kb query: " (or "kb: ") on stderr. */
static void error_prefix(void)
{
    if (running)
        print_path(stderr, running);
    else
        fputs("kb", stderr);
    fputs(": ", stderr);
}

void kb_cli_safe_begin(kb_cli_safe_out *o)
{
    o->text = NULL;
    o->len = 0;
    o->f = open_memstream(&o->text, &o->len);
    if (!o->f)
        o->f = stdout;
}

void kb_cli_safe_end(kb_cli_safe_out *o)
{
    if (o->f == stdout)
        return;
    fclose(o->f);
    kb_cli_put_safe(stdout, o->text ? o->text : "", o->len);
    free(o->text);
    o->f = stdout;
    o->text = NULL;
}

int kb_cli_fail(const kb_err *err)
{
    kb_cli_errorf("%s", err->msg[0] ? err->msg : kb_rc_name(err->rc));
    return kb_rc_exit_status(err->rc);
}

void kb_cli_errorf(const char *fmt, ...)
{
    kb_buf line;
    kb_buf_init(&line, 0);
    va_list ap;
    va_start(ap, fmt);
    kb_rc rc = kb_buf_vprintf(&line, fmt, ap);
    va_end(ap);
    error_prefix();
    /* what it quotes (a file name with an escape sequence) is escaped */
    kb_fput_line_safe(stderr, rc == KB_OK && line.data ? line.data : "out of memory");
    fputc('\n', stderr);
    kb_buf_release(&line);
}

enum { PROGRESS_NONE, PROGRESS_REDRAW, PROGRESS_LINES };
#define PROGRESS_EVERY_MS 15000.0

void kb_cli_progress_init(kb_cli_progress *p, int wanted)
{
    memset(p, 0, sizeof *p);
    p->mode = !wanted ? PROGRESS_NONE
              : isatty(STDERR_FILENO) ? PROGRESS_REDRAW : PROGRESS_LINES;
}

void kb_cli_progress_show(kb_cli_progress *p, const char *fmt, ...)
{
    if (p->mode == PROGRESS_NONE)
        return;
    double now = kb_now_ms();
    if (p->mode == PROGRESS_LINES && p->last_ms > 0 && now - p->last_ms < PROGRESS_EVERY_MS)
        return;
    p->last_ms = now;
    va_list ap;
    va_start(ap, fmt);
    if (p->mode == PROGRESS_REDRAW)
        fputs("\r\033[K", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (p->mode == PROGRESS_LINES)
        fputc('\n', stderr);
    p->drawn = p->mode == PROGRESS_REDRAW;
}

void kb_cli_progress_clear(kb_cli_progress *p)
{
    if (p->drawn)
        fputs("\r\033[K", stderr);
    p->drawn = 0;
}

int kb_cli_usage_error(const kb_command *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    print_path(stderr, cmd);
    fputs(": ", stderr);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nusage: %s\n", cmd->usage);
    va_end(ap);
    return 2;
}

/* After "no KB in DIR": the KB `make demo` leaves beside the executable
 * (build/demo-kb), when there is one and it is another, named with the
 * way to use it - following "run 'kb ingest'" would embed the corpus
 * again for minutes. */
static void demo_kb_hint(const char *dir, kb_err *err)
{
    char *exe = kb_exe_dir();
    char *demo = exe ? kb_path_join(exe, "demo-kb") : NULL;
    char *db = demo ? kb_path_join(demo, "kb.sqlite") : NULL;
    char *real_demo = demo ? realpath(demo, NULL) : NULL;
    char *real_dir = realpath(dir, NULL);
    struct stat st;
    if (db && stat(db, &st) == 0 && real_demo &&
        !(real_dir && strcmp(real_dir, real_demo) == 0)) {
        kb_buf msg;
        kb_buf_init(&msg, 0);
        if (kb_buf_printf(&msg, "%s; the demo KB is '%s': kb --kb %s ..., or "
                          "export KB_DIR=%s", err->msg, real_demo, real_demo,
                          real_demo) == KB_OK) {
            kb_err_clear(err);
            kb_err_set(err, KB_ERR_NOTFOUND, "%s", msg.data);
        }
        kb_buf_release(&msg);
    }
    free(real_dir);
    free(real_demo);
    free(db);
    free(demo);
    free(exe);
}

char *kb_cli_data(const kb_cli *cli, const char *name)
{
    char *found = kb_store_data_find(cli->config, cli->kb_dir, name);
    return found ? found : kb_path_join("corpus", name);
}

kb_rc kb_cli_open_store(const kb_cli *cli, int flags, kb_store **store,
                        kb_err *err)
{
    char *dir = kb_store_default_dir(cli->kb_dir);
    if (!dir)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_rc rc = kb_store_open(dir, flags, store, err);
    if (rc == KB_ERR_NOTFOUND)
        demo_kb_hint(dir, err);
    free(dir);
    return rc;
}


/* ------------------------------------------------------------------ help */

#define KEY_HELP 0x1000
#define KEY_VERSION 0x1001

const kb_option kb_global_options[] = {
    { "kb", KB_OPT_LONG('d'), "DIR", "the KB directory ($KB_DIR, else $XDG_DATA_HOME/kb)" },
    { "quiet", 'q', NULL, "no progress or informational messages" },
    { "color", KB_OPT_LONG('c'), "WHEN", "colour: auto (on a terminal, unless NO_COLOR is\n"
      "set or TERM is dumb; the default), always or never" },
    { "version", KB_OPT_LONG('v'), NULL, "print the version" },
    { "help", 'h', NULL, "print the help; 'kb COMMAND --help' a command's" },
    { NULL, 0, NULL, NULL },
};

static int is_short(int key)
{
    return key > 0 && key < 0x80 && isalnum(key);
}

size_t kb_cli_option_label(const kb_option *o, char *buf, size_t n)
{
    int len;
    if (is_short(o->key))
        len = snprintf(buf, n, "-%c, --%s%s%s", o->key, o->name, o->arg ? " " : "",
                       o->arg ? o->arg : "");
    else
        len = snprintf(buf, n, "    --%s%s%s", o->name, o->arg ? " " : "",
                       o->arg ? o->arg : "");
    return len < 0 ? 0 : (size_t)len;
}

void kb_cli_print_options(FILE *f, const kb_option *opts)
{
    for (const kb_option *o = opts; o && o->name; o++) {
        char label[128];
        size_t n = kb_cli_option_label(o, label, sizeof label);
        fprintf(f, "  %s", label);
        if (n > 22)
            fprintf(f, "\n  %-22s", "");
        else
            fprintf(f, "%*s", (int)(22 - n), "");
        for (const char *h = o->help; *h;) {
            size_t len = strcspn(h, "\n");
            fprintf(f, " %.*s\n", (int)len, h);
            h += len;
            if (*h == '\n' && *++h)
                fprintf(f, "  %-22s", "");
        }
    }
}

void kb_cli_usage(const kb_command *cmd, int to_stderr)
{
    FILE *f = to_stderr ? stderr : stdout;
    fprintf(f, "usage: %s\n\n%s.\n", cmd->usage, cmd->summary);
    if (cmd->subcommands) {
        fputs("\nsubcommands:\n", f);
        for (const kb_command *const *s = cmd->subcommands; *s; s++)
            fprintf(f, "  %-10s %s\n", (*s)->name, (*s)->summary);
    }
    if (cmd->options && cmd->options->name) {
        /* a command of its own too (kb verify TASK ...): its options are
         * its own, not its subcommands' */
        fputs(cmd->subcommands && !cmd->fn ? "\ncommon options:\n" : "\noptions:\n", f);
        kb_cli_print_options(f, cmd->options);
    }
    if (cmd->notes)
        fprintf(f, "\n%s", cmd->notes);
    if (cmd->subcommands) {
        fputs("\n'", f);
        print_path(f, cmd);
        fputs(" SUBCOMMAND --help' shows a subcommand's options.\n", f);
    } else {
        fputs("\nglobal options ('kb --help'): --kb DIR, -q, --color WHEN.\n", f);
    }
}

/* The edit distance of a and b, two letters swapped counting as one edit
 * (optimal string alignment: "lsit" is one from "list", two from "lint"),
 * or a large number past 64 bytes. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return 1000;
    size_t rows[3][65];   /* row i of the table in rows[i % 3] */
    for (size_t j = 0; j <= lb; j++)
        rows[0][j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t *cur = rows[i % 3], *prev = rows[(i + 2) % 3], *two = rows[(i + 1) % 3];
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t best = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                two[j - 2] + 1 < best)
                best = two[j - 2] + 1;
            cur[j] = best;
        }
    }
    return rows[la % 3][lb];
}

const char *kb_cli_similar(const char *word, const char *const *names, size_t n)
{
    const char *best = NULL;
    size_t best_d = (strlen(word) + 2) / 3;   /* a third of it may differ */
    if (best_d > 3)
        best_d = 3;
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(word, names[i]);
        if (d <= best_d && (!best || d < best_d)) {
            best = names[i];
            best_d = d;
        }
    }
    return best;
}

/* ------------------------------------------------------------------ getopt */

void kb_getopt_init(kb_getopt *g, const kb_command *cmd, int argc, char **argv)
{
    memset(g, 0, sizeof *g);
    g->cmd = cmd;
    g->argc = argc;
    g->argv = argv;
    g->longopts = g->longbuf;
    size_t s = 0, n = 0;
    int own_h = 0;
    g->shortopts[s++] = ':';   /* a missing value is ':', not '?' */
    for (const kb_option *o = cmd->options; o && o->name && n < KB_GETOPT_MAX; o++, n++) {
        g->longbuf[n] = (struct option){ o->name, o->arg ? required_argument : no_argument,
                                         NULL, o->key };
        if (is_short(o->key)) {
            own_h |= o->key == 'h';
            g->shortopts[s++] = (char)o->key;
            if (o->arg)
                g->shortopts[s++] = ':';
        }
    }
    g->nopts = (int)n;
    g->longbuf[n++] = (struct option){ "help", no_argument, NULL, KEY_HELP };
    g->longbuf[n++] = (struct option){ "version", no_argument, NULL, KEY_VERSION };
    g->longbuf[n] = (struct option){ NULL, 0, NULL, 0 };
    if (!own_h)
        g->shortopts[s++] = 'h';
    g->shortopts[s] = '\0';
    optind = 0;   /* GNU getopt: start afresh, whatever parsed before */
    opterr = 0;
}

/* The option of cmd whose key is key (NULL: --help or --version). */
static const kb_option *option_of(const kb_command *cmd, int key)
{
    for (const kb_option *o = cmd->options; o && o->name; o++)
        if (o->key == key)
            return o;
    return NULL;
}

/* The argv element that holds the short option c, near optind. */
static const char *short_element(const kb_getopt *g, int c)
{
    for (int i = optind; i >= optind - 1 && i >= 1; i--)
        if (i < g->argc && g->argv[i][0] == '-' && g->argv[i][1] != '-' &&
            strchr(g->argv[i] + 1, c))
            return g->argv[i];
    return NULL;
}

/* Reports an unknown option word: names what was meant if one is near,
 * else says how an operand that starts with '-' is given. */
static int unknown_option(kb_getopt *g, const char *shown, const char *word)
{
    const char *names[KB_GETOPT_MAX];
    size_t n = 0;
    for (const kb_option *o = g->cmd->options; o && o->name && n < KB_GETOPT_MAX; o++)
        names[n++] = o->name;
    const char *eq = strchr(word, '=');
    char name[80];
    snprintf(name, sizeof name, "%.*s", (int)(eq ? (size_t)(eq - word) : strlen(word)),
             word + strspn(word, "-"));
    const char *like = word[1] == '-' ? kb_cli_similar(name, names, n) : NULL;
    g->status = like ? kb_cli_usage_error(g->cmd, "unknown option '%s' (did you mean "
                                          "'--%s'?)", shown, like)
                     : kb_cli_usage_error(g->cmd, "unknown option '%s'%s%s%s", shown,
                                          strcmp(shown, word) ? " in '" : "",
                                          strcmp(shown, word) ? word : "",
                                          strcmp(shown, word) ? "'" : "");
    if (!like && g->cmd->operands) {
        fputs("hint: an argument that starts with '-' goes after '--': ", stderr);
        print_path(stderr, g->cmd);
        fprintf(stderr, " -- '%s'\n", word);
    }
    return -1;
}

int kb_getopt_next(kb_getopt *g)
{
    int li = -1;
    int c = getopt_long(g->argc, g->argv, g->shortopts, g->longopts, &li);
    g->arg = optarg;
    if (c == -1) {
        g->ind = optind;
        return 0;
    }
    const char *prev = optind >= 1 && optind - 1 < g->argc ? g->argv[optind - 1] : "";
    if (c == '?' || c == ':') {
        if (strncmp(prev, "--", 2) == 0 && (!optopt || c == ':' || !short_element(g, optopt))) {
            if (c == ':') {
                g->status = kb_cli_usage_error(g->cmd, "option '%s' needs a value", prev);
                return -1;
            }
            char shown[80];
            snprintf(shown, sizeof shown, "%.*s", (int)strcspn(prev, "="), prev);
            return unknown_option(g, shown, prev);
        }
        if (c == ':') {
            g->status = kb_cli_usage_error(g->cmd, "option '-%c' needs a value", optopt);
            return -1;
        }
        const char *word = short_element(g, optopt);
        char shown[3] = { '-', (char)optopt, '\0' };
        return unknown_option(g, shown, word ? word : shown);
    }
    if (li >= 0 && li < g->nopts + 2) {
        /* getopt_long takes a unique prefix ("--k" for "--kind"): only
         * whole names are options here */
        const char *name = g->longopts[li].name;
        const char *word = g->longopts[li].has_arg == required_argument && optarg &&
                           optind >= 2 && optarg == g->argv[optind - 1] &&
                           !strchr(g->argv[optind - 2], '=')
                               ? g->argv[optind - 2] : prev;
        size_t wn = strcspn(word + 2, "=");
        if (strncmp(word, "--", 2) == 0 && (wn != strlen(name) || strncmp(word + 2, name, wn))) {
            char shown[80];
            snprintf(shown, sizeof shown, "%.*s", (int)wn + 2, word);
            return unknown_option(g, shown, word);
        }
    }
    if (c == KEY_HELP || (c == 'h' && !option_of(g->cmd, 'h'))) {
        kb_cli_usage(g->cmd, 0);
        g->status = 0;
        return -1;
    }
    if (c == KEY_VERSION) {
        printf("kb %s\n", KB_VERSION);
        g->status = 0;
        return -1;
    }
    return c;
}

int kb_cli_no_operands(kb_getopt *g)
{
    if (g->ind < g->argc)
        return kb_cli_usage_error(g->cmd, "unexpected argument '%s'", g->argv[g->ind]);
    return 0;
}

int kb_cli_no_options(const kb_command *self, int argc, char **argv, int *ind)
{
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    int c;
    while ((c = kb_getopt_next(&g)) > 0)
        ;   /* none in the table: kb_getopt_next refuses any given */
    if (c < 0)
        return g.status;
    if (ind) {
        *ind = g.ind;
        return -1;
    }
    return kb_cli_no_operands(&g) ? 2 : -1;
}

/* ------------------------------------------------------------------ main */

/* Takes the global options out of argv wherever they stand (before "--").
 * Returns 0, or the exit status of a usage error it reported. */
static int take_global_options(int *argc, char **argv, kb_cli *cli, int *color)
{
    int out = 1;
    int i = 1;
    for (; i < *argc; i++) {
        const char *a = argv[i];
        const char *when = NULL;
        if (strcmp(a, "--") == 0)
            break;
        if (strcmp(a, "--kb") == 0) {
            if (i + 1 >= *argc) {
                fprintf(stderr, "kb: option '--kb' needs a directory\n");
                return 2;
            }
            cli->kb_dir = argv[++i];
        } else if (strncmp(a, "--kb=", 5) == 0) {
            cli->kb_dir = a + 5;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            cli->quiet = 1;
        } else if (strcmp(a, "--color") == 0 || strcmp(a, "--colour") == 0) {
            /* a bare --color is always, as git's; WHEN may follow */
            when = "always";
            if (i + 1 < *argc && (strcmp(argv[i + 1], "auto") == 0 ||
                                  strcmp(argv[i + 1], "always") == 0 ||
                                  strcmp(argv[i + 1], "never") == 0))
                when = argv[++i];
        } else if (strncmp(a, "--color=", 8) == 0 || strncmp(a, "--colour=", 9) == 0) {
            when = strchr(a, '=') + 1;
        } else if (strcmp(a, "--no-color") == 0) {
            when = "never";
        } else {
            argv[out++] = argv[i];
        }
        if (when) {
            if (strcmp(when, "auto") == 0) {
                *color = -1;
            } else if (strcmp(when, "always") == 0) {
                *color = 1;
            } else if (strcmp(when, "never") == 0) {
                *color = 0;
            } else {
                fprintf(stderr, "kb: --color wants auto, always or never, not '%s'\n", when);
                return 2;
            }
        }
    }
    for (; i < *argc; i++)
        argv[out++] = argv[i];
    argv[out] = NULL;
    *argc = out;
    return 0;
}

static void main_usage(FILE *f, const kb_command *const *commands)
{
    fprintf(f, "usage: kb [--kb DIR] [-q] [--color WHEN] COMMAND [options]\n\n"
               "kb: a knowledge base and kernel skill library for GPU kernel "
               "engineers.\n\ncommands:\n");
    for (const kb_command *const *c = commands; *c; c++)
        fprintf(f, "  %-11s %s\n", (*c)->name, (*c)->summary);
    fputs("\nglobal options:\n", f);
    kb_cli_print_options(f, kb_global_options);
    fputs("\nsettings:\n"
          "  kb reads its settings (KB_DIR, KB_LLM_URL, KB_EMBED_URL and more) from the\n"
          "  environment and from $XDG_CONFIG_HOME/kb/config: 'kb config' shows each\n"
          "  with its value and what it does; the man page lists them too.\n", f);
    fprintf(f, "\n'kb COMMAND --help' shows a command's options.\n");
}

/* The command of list named name (NULL: none). */
static const kb_command *find_command(const kb_command *const *list, const char *name)
{
    for (; *list; list++)
        if (strcmp((*list)->name, name) == 0)
            return *list;
    return NULL;
}

/* "did you mean" among list's names. */
static const char *similar_command(const kb_command *const *list, const char *name)
{
    const char *names[64];
    size_t n = 0;
    for (; *list && n < 64; list++)
        names[n++] = (*list)->name;
    return kb_cli_similar(name, names, n);
}

/* 1 if argv (before "--") holds word, or -h where cmd has no -h itself. */
static int has_word(const kb_command *cmd, int argc, char **argv, const char *word)
{
    int short_h = strcmp(word, "--help") == 0 && !option_of(cmd, 'h');
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return 0;
        if (strcmp(argv[i], word) == 0 || (short_h && strcmp(argv[i], "-h") == 0))
            return 1;
        /* an option's value is not a word to look at */
        const kb_option *o = NULL;
        if (strncmp(argv[i], "--", 2) == 0 && !strchr(argv[i], '='))
            for (const kb_option *p = cmd->options; p && p->name; p++)
                if (strcmp(argv[i] + 2, p->name) == 0)
                    o = p;
        if (o && o->arg)
            i++;
    }
    return 0;
}

/* Runs cmd (argv[0] its name): its subcommand, its --help or --version,
 * else its function. */
static int dispatch(const kb_command *cmd, int argc, char **argv, const kb_cli *cli)
{
    /* a command of subcommands that is a command of its own too (kb
     * verify TASK ...) takes a word that is no subcommand itself */
    const kb_command *sub = cmd->subcommands && argc >= 2 && argv[1][0] != '-'
                                ? find_command(cmd->subcommands, argv[1]) : NULL;
    if (sub)
        return dispatch(sub, argc - 1, argv + 1, cli);
    if (cmd->subcommands && !cmd->fn && argc >= 2 && argv[1][0] != '-') {
        const char *like = similar_command(cmd->subcommands, argv[1]);
        const char *of = cmd->parent ? cmd->parent->name : "kb";
        if (like)
            return kb_cli_usage_error(cmd, "'%s' is no subcommand of %s %s (did you "
                                      "mean '%s'?)", argv[1], of, cmd->name, like);
        return kb_cli_usage_error(cmd, "'%s' is no subcommand of %s %s", argv[1], of,
                                  cmd->name);
    }
    if (has_word(cmd, argc, argv, "--help")) {
        kb_cli_usage(cmd, 0);
        return 0;
    }
    if (has_word(cmd, argc, argv, "--version")) {
        printf("kb %s\n", KB_VERSION);
        return 0;
    }
    if (!cmd->fn) {
        kb_buf names;
        kb_buf_init(&names, 4096);
        for (const kb_command *const *s = cmd->subcommands; *s; s++)
            if (kb_buf_printf(&names, "%s%s", s == cmd->subcommands ? "" : ", ",
                              (*s)->name) != KB_OK)
                break;
        int status = kb_cli_usage_error(cmd, "need a subcommand (%s)",
                                        names.data ? names.data : "");
        kb_buf_release(&names);
        return status;
    }
    /* its errors and warnings say which command they are of */
    running = cmd;
    char name[64];
    const char *parent = cmd->parent ? cmd->parent->name : NULL;
    snprintf(name, sizeof name, "kb %s%s%s", parent ? parent : "", parent ? " " : "",
             cmd->name);
    kb_log_set_name(name);
    return cmd->fn(argc, argv, cli, cmd);
}

/* The exit status once stdout is flushed: what could not be written is a
 * failure, not a success (kb query > /dev/full). */
static int finish(int status)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        int e = errno;
        fprintf(stderr, "kb: cannot write to standard output: %s\n",
                e ? strerror(e) : "write error");
        if (status == 0)
            status = 1;
    }
    return status;
}

int kb_cli_main(int argc, char **argv, const kb_command *const *commands)
{
    kb_cli cli = { 0 };
    int color = -1;   /* auto */
    int status = take_global_options(&argc, argv, &cli, &color);
    if (status)
        return status;
    kb_log_set_level(cli.quiet ? KB_LOG_QUIET : KB_LOG_INFO);
    cli.commands = commands;

    if (argc < 2) {
        main_usage(stderr, commands);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0 ||
        (strcmp(name, "help") == 0 && argc == 2)) {
        main_usage(stdout, commands);
        return finish(0);
    }
    if (strcmp(name, "--version") == 0) {
        printf("kb %s\n", KB_VERSION);
        return finish(0);
    }
    if (strcmp(name, "help") == 0) {   /* kb help COMMAND [SUBCOMMAND] */
        const kb_command *c = find_command(commands, argv[2]);
        for (int i = 3; c && c->subcommands && i < argc; i++)
            c = find_command(c->subcommands, argv[i]);
        if (!c) {
            fprintf(stderr, "kb: no help for '%s'; see 'kb --help'\n", argv[argc - 1]);
            return 2;
        }
        kb_cli_usage(c, 0);
        return finish(0);
    }
    const kb_command *cmd = find_command(commands, name);
    if (!cmd) {
        const char *like = name[0] == '-' ? NULL : similar_command(commands, name);
        if (name[0] == '-')
            fprintf(stderr, "kb: unknown option '%s'; see 'kb --help'\n", name);
        else if (like)
            fprintf(stderr, "kb: '%s' is not a kb command; did you mean '%s'?\n", name, like);
        else
            fprintf(stderr, "kb: '%s' is not a kb command; see 'kb --help'\n", name);
        return 2;
    }

    /* the environment, read once: everything below gets it from here */
    kb_config cfg;
    kb_err err;
    kb_err_clear(&err);
    if (kb_config_load(&cfg, &err) != KB_OK)
        return kb_cli_fail(&err);
    if (!cli.kb_dir)
        cli.kb_dir = cfg.kb_dir;
    else if (strcmp(cli.kb_dir, cfg.kb_dir) != 0) {
        /* --kb is the KB for the library too (kb_store_data_find) */
        char *d = kb_strdup(cli.kb_dir);
        if (!d) {
            kb_config_release(&cfg);
            kb_err_set(&err, KB_ERR_NOMEM, "out of memory");
            return kb_cli_fail(&err);
        }
        free(cfg.kb_dir);
        cfg.kb_dir = d;
        cli.kb_dir = cfg.kb_dir;
    }
    cli.config = &cfg;
    cli.color = color >= 0 ? color
                           : isatty(STDOUT_FILENO) && !cfg.no_color && !cfg.term_dumb;
    cli.progress = isatty(STDERR_FILENO) && !cli.quiet;
    status = dispatch(cmd, argc - 1, argv + 1, &cli);
    kb_config_release(&cfg);
    return finish(status);
}
