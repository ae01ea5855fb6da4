/* cmd_completion.c - kb completion (bash, zsh, fish) and kb manpage
 * (kb.1): all printed from the command table, so none can drift from the
 * options the commands parse. make builds them into build/ and make
 * install puts them where bash-completion, zsh, fish and man look. */
#include "cli/cli.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ common */

/* 1 if an option's value names a file, 2 a folder, 0 something else. */
static int value_kind(const kb_option *o)
{
    if (!o->arg)
        return 0;
    if (strcmp(o->arg, "DIR") == 0)
        return 2;
    return strcmp(o->arg, "FILE") == 0 || strcmp(o->arg, "PATH") == 0;
}

/* The first line of an option's help. */
static int first_line(const char *help)
{
    return (int)strcspn(help, "\n");
}

/* Prints s (n bytes) for inside a single-quoted shell word, with the
 * brackets zsh's _arguments reads turned into parentheses. */
static void put_quoted(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\'')
            fputs("'\\''", f);
        else if (s[i] == '[')
            fputc('(', f);
        else if (s[i] == ']')
            fputc(')', f);
        else
            fputc(s[i], f);
    }
}

/* "query" or "skill_lint": cmd's words joined by c. */
static void put_path(FILE *f, const kb_command *cmd, char c)
{
    if (cmd->parent) {
        put_path(f, cmd->parent, c);
        fputc(c, f);
    }
    fputs(cmd->name, f);
}

/* ------------------------------------------------------------------ bash */

static void bash_words(FILE *f, const kb_option *opts, int want)
{
    /* want: 0 every option word, 1 those with a file, 2 with a folder,
     * 3 with another value */
    const char *sep = "";
    for (const kb_option *o = opts; o && o->name; o++) {
        int k = value_kind(o);
        if (want && !(o->arg && (want == 3 ? k == 0 : k == want)))
            continue;
        if (o->key > 0 && o->key < 0x80 && isalnum(o->key)) {
            fprintf(f, "%s-%c", sep, o->key);
            sep = " ";
        }
        fprintf(f, "%s--%s", sep, o->name);
        sep = " ";
    }
}

static void bash_case(FILE *f, const kb_command *cmd)
{
    fputs("    \"", f);
    put_path(f, cmd, ' ');
    fputs("\")\n        opts='--help ", f);
    bash_words(f, cmd->options, 0);
    fputs("'\n        fileopts='", f);
    bash_words(f, cmd->options, 1);
    fputs("'\n        diropts='", f);
    bash_words(f, cmd->options, 2);
    fputs("'\n        valopts='", f);
    bash_words(f, cmd->options, 3);
    fprintf(f, "'\n        operands='%s'\n", cmd->operands ? cmd->operands : "");
    if (cmd->subcommands) {
        fputs("        subs='", f);
        for (const kb_command *const *s = cmd->subcommands; *s; s++)
            fprintf(f, "%s%s", s == cmd->subcommands ? "" : " ", (*s)->name);
        fputs("'\n", f);
    }
    fputs("        ;;\n", f);
    for (const kb_command *const *s = cmd->subcommands; s && *s; s++)
        bash_case(f, *s);
}

static void print_bash(FILE *f, const kb_command *const *commands)
{
    fputs("# bash completion for kb: made by 'kb completion bash' from kb's\n"
          "# command table. Install as /usr/share/bash-completion/completions/kb,\n"
          "# or: source <(kb completion bash)\n"
          "_kb()\n{\n"
          "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
          "    local path='' i w nwords=0\n"
          "    local opts='' fileopts='' diropts='' valopts='' operands='' subs=''\n"
          "    local globals='", f);
    bash_words(f, kb_global_options, 0);
    fputs("'\n    local commands='", f);
    for (const kb_command *const *c = commands; *c; c++)
        fprintf(f, "%s%s", c == commands ? "" : " ", (*c)->name);
    fputs("'\n    local parents='", f);
    for (const kb_command *const *c = commands; *c; c++)
        if ((*c)->subcommands)
            fprintf(f, " %s", (*c)->name);
    fputs(" '\n"
          "    # the command words so far: global options and values skipped\n"
          "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
          "        w=${COMP_WORDS[i]}\n"
          "        case $w in\n"
          "        --) break ;;\n"
          "        --kb) ((i++)); continue ;;\n"
          "        -*) continue ;;\n"
          "        esac\n"
          "        if ((nwords == 0)); then path=$w; nwords=1\n"
          "        elif ((nwords == 1)) && [[ $parents == *\" $path \"* ]]; then\n"
          "            path=\"$path $w\"; nwords=2\n"
          "        else break; fi\n"
          "    done\n"
          "    case $prev in\n"
          "    --kb) COMPREPLY=($(compgen -d -- \"$cur\")); return ;;\n"
          "    --color) COMPREPLY=($(compgen -W 'auto always never' -- \"$cur\")); return ;;\n"
          "    esac\n"
          "    if ((nwords == 0)); then\n"
          "        if [[ $cur == -* ]]; then\n"
          "            COMPREPLY=($(compgen -W \"$globals\" -- \"$cur\"))\n"
          "        else\n"
          "            COMPREPLY=($(compgen -W \"$commands\" -- \"$cur\"))\n"
          "        fi\n"
          "        return\n"
          "    fi\n"
          "    case $path in\n", f);
    for (const kb_command *const *c = commands; *c; c++)
        bash_case(f, *c);
    fputs("    *) return ;;\n"
          "    esac\n"
          "    if [[ \" $fileopts \" == *\" $prev \"* ]]; then\n"
          "        COMPREPLY=($(compgen -f -- \"$cur\")); return\n"
          "    elif [[ \" $diropts \" == *\" $prev \"* ]]; then\n"
          "        COMPREPLY=($(compgen -d -- \"$cur\")); return\n"
          "    elif [[ -n $valopts && \" $valopts \" == *\" $prev \"* ]]; then\n"
          "        COMPREPLY=(); return\n"
          "    fi\n"
          "    if [[ $cur == -* ]]; then\n"
          "        COMPREPLY=($(compgen -W \"$opts $globals\" -- \"$cur\"))\n"
          "    elif [[ -n $subs ]]; then\n"
          "        COMPREPLY=($(compgen -W \"$subs\" -- \"$cur\"))\n"
          "    else\n"
          "        case $operands in\n"
          "        source) COMPREPLY=($(compgen -W \"$(kb sources 2>/dev/null |\n"
          "                   awk 'NR > 1 { print $1 }')\" -- \"$cur\") $(compgen -f -- \"$cur\")) ;;\n"
          "        file|dir|task) COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n"
          "        *) COMPREPLY=() ;;\n"
          "        esac\n"
          "    fi\n"
          "}\n"
          "complete -F _kb kb\n", f);
}

/* ------------------------------------------------------------------ zsh */

static void zsh_option(FILE *f, const kb_option *o)
{
    static const char *const actions[] = { " ", "_files", "_files -/" };
    int n = first_line(o->help);
    const char *action = actions[value_kind(o)];
    if (o->key > 0 && o->key < 0x80 && isalnum(o->key)) {
        fprintf(f, " \\\n    '-%c%s[", o->key, o->arg ? "+" : "");
        put_quoted(f, o->help, (size_t)n);
        fputc(']', f);
        if (o->arg)
            fprintf(f, ":%s:%s", o->arg, action);
        fputc('\'', f);
    }
    fprintf(f, " \\\n    '--%s%s[", o->name, o->arg ? "=" : "");
    put_quoted(f, o->help, (size_t)n);
    fputc(']', f);
    if (o->arg)
        fprintf(f, ":%s:%s", o->arg, action);
    fputc('\'', f);
}

static void zsh_function(FILE *f, const kb_command *cmd)
{
    for (const kb_command *const *s = cmd->subcommands; s && *s; s++)
        zsh_function(f, *s);
    fputs("_kb_", f);
    put_path(f, cmd, '_');
    fputs("() {\n", f);
    if (cmd->subcommands) {
        fputs("  local curcontext=\"$curcontext\" state line\n"
              "  _arguments -C '--help[print the help]' '1:subcommand:->sub' "
              "'*::argument:->arg'\n"
              "  case $state in\n"
              "  sub)\n"
              "    local -a subs\n"
              "    subs=(", f);
        for (const kb_command *const *s = cmd->subcommands; *s; s++) {
            fprintf(f, " '%s:", (*s)->name);
            put_quoted(f, (*s)->summary, strlen((*s)->summary));
            fputc('\'', f);
        }
        fputs(" )\n    _describe -t commands 'subcommand' subs ;;\n  arg)\n"
              "    case $line[1] in\n", f);
        for (const kb_command *const *s = cmd->subcommands; *s; s++) {
            fprintf(f, "    %s) _kb_", (*s)->name);
            put_path(f, *s, '_');
            fputs(" ;;\n", f);
        }
        fputs("    esac ;;\n  esac\n}\n\n", f);
        return;
    }
    fputs("  _arguments -s '(- *)--help[print the help]'", f);
    for (const kb_option *o = cmd->options; o && o->name; o++)
        zsh_option(f, o);
    const char *op = cmd->operands;
    if (op && (strcmp(op, "file") == 0 || strcmp(op, "source") == 0 ||
               strcmp(op, "task") == 0))
        fprintf(f, " \\\n    '*:%s:_files'", op);
    else if (op && strcmp(op, "dir") == 0)
        fputs(" \\\n    '*:dir:_files -/'", f);
    else if (op)
        fprintf(f, " \\\n    '*:%s: '", op);
    fputs("\n}\n\n", f);
}

static void print_zsh(FILE *f, const kb_command *const *commands)
{
    fputs("#compdef kb\n"
          "# zsh completion for kb: made by 'kb completion zsh' from kb's command\n"
          "# table. Install as _kb in a folder of $fpath.\n\n", f);
    for (const kb_command *const *c = commands; *c; c++)
        zsh_function(f, *c);
    fputs("_kb() {\n  local curcontext=\"$curcontext\" state line\n  _arguments -C", f);
    for (const kb_option *o = kb_global_options; o->name; o++)
        zsh_option(f, o);
    fputs(" \\\n    '1:command:->command' '*::argument:->argument'\n"
          "  case $state in\n  command)\n    local -a cmds\n    cmds=(", f);
    for (const kb_command *const *c = commands; *c; c++) {
        fprintf(f, " '%s:", (*c)->name);
        put_quoted(f, (*c)->summary, strlen((*c)->summary));
        fputc('\'', f);
    }
    fputs(" )\n    _describe -t commands 'kb command' cmds ;;\n  argument)\n"
          "    case $line[1] in\n", f);
    for (const kb_command *const *c = commands; *c; c++)
        fprintf(f, "    %s) _kb_%s ;;\n", (*c)->name, (*c)->name);
    fputs("    esac ;;\n  esac\n}\n\n_kb \"$@\"\n", f);
}

/* ------------------------------------------------------------------ fish */

/* Prints s (n bytes) inside a single-quoted fish word ('\'' and '\\'
 * are its only escapes). */
static void put_fish(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\'' || s[i] == '\\')
            fputc('\\', f);
        fputc(s[i], f);
    }
}

/* One "complete" line per option of opts, offered where cond holds. */
static void fish_options(FILE *f, const char *cond, const kb_option *opts)
{
    for (const kb_option *o = opts; o && o->name; o++) {
        fputs("complete -c kb", f);
        if (cond)
            fprintf(f, " -n '%s'", cond);
        if (o->key > 0 && o->key < 0x80 && isalnum(o->key))
            fprintf(f, " -s %c", o->key);
        fprintf(f, " -l %s", o->name);
        int k = value_kind(o);
        if (k == 1)
            fputs(" -r -F", f);
        else if (k == 2)
            fputs(" -x -a '(__fish_complete_directories (commandline -ct))'", f);
        else if (o->arg && strcmp(o->name, "color") == 0)
            fputs(" -x -a 'auto always never'", f);
        else if (o->arg)
            fputs(" -x", f);
        fputs(" -d '", f);
        put_fish(f, o->help, (size_t)first_line(o->help));
        fputs("'\n", f);
    }
}

static void fish_command(FILE *f, const kb_command *cmd)
{
    char cond[128];
    int n = snprintf(cond, sizeof cond, "__kb_is %s%s%s",
                     cmd->parent ? cmd->parent->name : "", cmd->parent ? " " : "",
                     cmd->name);
    if (n < 0 || (size_t)n >= sizeof cond)
        return;
    fprintf(f, "\n# kb %s%s%s\n", cmd->parent ? cmd->parent->name : "",
            cmd->parent ? " " : "", cmd->name);
    fprintf(f, "complete -c kb -n '%s' -l help -d 'print the help'\n", cond);
    fish_options(f, cond, cmd->options);
    for (const kb_command *const *s = cmd->subcommands; s && *s; s++) {
        fprintf(f, "complete -c kb -n '%s' -a %s -d '", cond, (*s)->name);
        put_fish(f, (*s)->summary, strlen((*s)->summary));
        fputs("'\n", f);
    }
    const char *op = cmd->operands;
    if (op && strcmp(op, "source") == 0)
        fprintf(f, "complete -c kb -n '%s' -F -a '(command -q kb; and kb sources "
                "2>/dev/null | string match -rg \"^(\\S+)\\s\" | tail -n +2)'\n", cond);
    else if (op && (strcmp(op, "file") == 0 || strcmp(op, "task") == 0))
        fprintf(f, "complete -c kb -n '%s' -F\n", cond);
    else if (op && strcmp(op, "dir") == 0)
        fprintf(f, "complete -c kb -n '%s' -x -a '(__fish_complete_directories "
                "(commandline -ct))'\n", cond);
    for (const kb_command *const *s = cmd->subcommands; s && *s; s++)
        fish_command(f, *s);
}

static void print_fish(FILE *f, const kb_command *const *commands)
{
    fputs("# fish completion for kb: made by 'kb completion fish' from kb's command\n"
          "# table. Install as kb.fish in fish's vendor_completions.d, or:\n"
          "# kb completion fish | source\n\n"
          "# the command words so far (\"skill lint\"): global options and --kb's\n"
          "# value skipped; a second word only after a command of subcommands\n"
          "function __kb_path\n"
          "    set -l path\n"
          "    set -l skip 0\n"
          "    for w in (commandline -opc)[2..-1]\n"
          "        if test $skip = 1\n"
          "            set skip 0\n"
          "            continue\n"
          "        end\n"
          "        switch $w\n"
          "            case --\n"
          "                break\n"
          "            case --kb --color\n"
          "                set skip 1\n"
          "                continue\n"
          "            case '-*'\n"
          "                continue\n"
          "        end\n"
          "        set -a path $w\n"
          "        if test (count $path) = 2; or not contains -- $path[1]", f);
    for (const kb_command *const *c = commands; *c; c++)
        if ((*c)->subcommands)
            fprintf(f, " %s", (*c)->name);
    fputs("\n            break\n"
          "        end\n"
          "    end\n"
          "    echo $path\n"
          "end\n\n"
          "# __kb_is WORDS: the command line so far is the command WORDS (none: no\n"
          "# command yet)\n"
          "function __kb_is\n"
          "    set -l path (__kb_path)\n"
          "    test \"$path\" = \"$argv\"\n"
          "end\n\n"
          "complete -c kb -f\n", f);
    fish_options(f, NULL, kb_global_options);
    for (const kb_command *const *c = commands; *c; c++) {
        fprintf(f, "complete -c kb -n '__kb_is' -a %s -d '", (*c)->name);
        put_fish(f, (*c)->summary, strlen((*c)->summary));
        fputs("'\n", f);
    }
    for (const kb_command *const *c = commands; *c; c++)
        fish_command(f, *c);
}

/* ------------------------------------------------------------------ man */

/* Writes s (n bytes) as roff text: backslashes and dashes escaped, a line
 * that would start with a request made plain text. */
static void put_roff(FILE *f, const char *s, size_t n, int *bol)
{
    for (size_t i = 0; i < n; i++) {
        if (*bol && (s[i] == '.' || s[i] == '\''))
            fputs("\\&", f);
        *bol = s[i] == '\n';
        if (s[i] == '\\')
            fputs("\\e", f);
        else if (s[i] == '-')
            fputs("\\-", f);
        else
            fputc(s[i], f);
    }
}

static void roff(FILE *f, const char *s)
{
    int bol = 1;
    put_roff(f, s, strlen(s), &bol);
}

static void man_options(FILE *f, const kb_option *opts)
{
    for (const kb_option *o = opts; o && o->name; o++) {
        char label[128];
        kb_cli_option_label(o, label, sizeof label);
        fputs(".TP\n.B ", f);
        roff(f, label + strspn(label, " "));
        fputc('\n', f);
        int bol = 1;
        for (const char *h = o->help; *h; h++)
            put_roff(f, *h == '\n' ? " " : h, 1, &bol);
        fputc('\n', f);
    }
}

static void man_command(FILE *f, const kb_command *cmd)
{
    fputs(".SS ", f);
    fputs("kb ", f);
    put_path(f, cmd, ' ');
    fputs("\n.B ", f);
    roff(f, cmd->usage);
    fputs("\n.br\n", f);
    roff(f, cmd->summary);
    fputs(".\n", f);
    if (cmd->options && cmd->options->name) {
        if (cmd->subcommands)
            fputs(".PP\nOptions of every subcommand that takes them:\n", f);
        man_options(f, cmd->options);
    }
    if (cmd->notes) {
        fputs(".PP\n", f);
        roff(f, cmd->notes);
    }
    for (const kb_command *const *s = cmd->subcommands; s && *s; s++)
        man_command(f, *s);
}

static void print_man(FILE *f, const kb_command *const *commands)
{
    fputs(".\\\" kb.1: made by 'kb manpage' from kb's command table\n"
          ".TH KB 1 \"\" \"kb " KB_VERSION "\" \"User Commands\"\n"
          ".SH NAME\nkb \\- a knowledge base and kernel skill library for GPU "
          "kernel engineers\n"
          ".SH SYNOPSIS\n.B kb\n[\\-\\-kb DIR] [\\-q] [\\-\\-color WHEN] COMMAND [options]\n"
          ".SH DESCRIPTION\n"
          "kb ingests GPU programming documentation, papers, exemplar kernels and "
          "a team's skills into a hybrid index (SQLite FTS5 and FAISS) and answers "
          "queries from the shell, over MCP and over HTTP, each passage with a deep "
          "link to where it came from. It verifies candidate kernels on the GPU "
          "(kb\\-verify) and keeps a library of verified skills.\n"
          ".SH GLOBAL OPTIONS\n", f);
    man_options(f, kb_global_options);
    fputs(".SH COMMANDS\n", f);
    for (const kb_command *const *c = commands; *c; c++)
        man_command(f, *c);
    kb_buf env;
    kb_buf_init(&env, 0);
    if (kb_config_help(&env) == KB_OK) {
        fputs(".SH ENVIRONMENT\n.nf\n", f);
        roff(f, env.data);
        fputs(".fi\n", f);
    }
    kb_buf_release(&env);
    fputs(".SH EXIT STATUS\n"
          "0 success; 1 failure; 2 a usage error; 3 some items failed and the rest "
          "succeeded (kb ingest).\n"
          ".SH SEE ALSO\nREADME.md and docs/ of kb's sources.\n", f);
}

/* ------------------------------------------------------------------ commands */

static const kb_option no_options[] = { { NULL, 0, NULL, NULL } };

static int cmd_completion(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    int ind;
    int stop = kb_cli_no_options(self, argc, argv, &ind);
    if (stop >= 0)
        return stop;
    if (ind + 1 != argc)
        return kb_cli_usage_error(self, "name one shell: bash, zsh or fish");
    if (strcmp(argv[ind], "bash") == 0)
        print_bash(stdout, cli->commands);
    else if (strcmp(argv[ind], "zsh") == 0)
        print_zsh(stdout, cli->commands);
    else if (strcmp(argv[ind], "fish") == 0)
        print_fish(stdout, cli->commands);
    else
        return kb_cli_usage_error(self, "no completion for '%s' (bash, zsh or fish)",
                                  argv[ind]);
    return 0;
}

const kb_command kb_cmd_completion = {
    .name = "completion",
    .fn = cmd_completion,
    .usage = "kb completion bash|zsh|fish",
    .summary = "print the shell completion script for bash, zsh or fish",
    .options = no_options,
    .notes = "bash: source <(kb completion bash); zsh: kb completion zsh > ~/.zfunc/_kb;\n"
             "fish: kb completion fish > ~/.config/fish/completions/kb.fish\n"
             "(make install puts all three where the shells look)\n",
};

static int cmd_manpage(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    int stop = kb_cli_no_options(self, argc, argv, NULL);
    if (stop >= 0)
        return stop;
    print_man(stdout, cli->commands);
    return 0;
}

const kb_command kb_cmd_manpage = {
    .name = "manpage",
    .fn = cmd_manpage,
    .usage = "kb manpage",
    .summary = "print kb's man page (kb.1, roff): kb manpage | man -l -",
    .options = no_options,
};
