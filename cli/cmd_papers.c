/* cmd_papers.c - kb papers: the literature list's records. */
#include "cli/cli.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const kb_option papers_options[] = {
    { "section", KB_OPT_LONG('s'), "S", "only papers whose section path contains S" },
    { "words", KB_OPT_LONG('w'), "W", "only papers whose title or section holds every word of W" },
    { "json", KB_OPT_LONG('j'), NULL, "print JSON" },
    { "budget", KB_OPT_LONG('b'), "TOKENS", "with --json: the records that fit about TOKENS tokens" },
    { NULL, 0, NULL, NULL },
};

static int cmd_papers(int argc, char **argv, const kb_cli *cli, const kb_command *self);
static int papers_run(const kb_cli *cli, const kb_command *self, const char *section,
                      const char *words, long budget, int json);

const kb_command kb_cmd_papers = {
    .name = "papers",
    .fn = cmd_papers,
    .usage = "kb papers [--section S] [--words W] [--json [--budget TOKENS]] [WORDS...]",
    .summary = "list the literature list's paper records",
    .options = papers_options,
    .notes = "WORDS, like --words, keep the papers whose title or section holds each:\n"
             "kb papers triton reinforcement\n",
    .operands = "text",
};

static int cmd_papers(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    const char *section = NULL, *words = NULL;
    long budget = 0;
    int json = 0, c;
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    while ((c = kb_getopt_next(&g)) > 0) {
        switch (c) {
        case KB_OPT_LONG('s'): section = g.arg; break;
        case KB_OPT_LONG('w'): words = g.arg; break;
        case KB_OPT_LONG('b'):   /* the papers tool's range, in the CLI's words */
            if (kb_parse_long(g.arg, KB_TOOL_BUDGET_MIN, KB_TOOL_BUDGET_MAX,
                              &budget) != KB_OK)
                return kb_cli_usage_error(self, "--budget wants a number of tokens "
                                          "from %d to %d, not '%s'", KB_TOOL_BUDGET_MIN,
                                          KB_TOOL_BUDGET_MAX, g.arg);
            break;
        case KB_OPT_LONG('j'): json = 1; break;
        }
    }
    if (c < 0)
        return g.status;
    /* kb papers WORDS...: --words by another name */
    kb_buf wbuf;
    kb_buf_init(&wbuf, 1 << 16);
    for (int i = g.ind - 1; i < argc; i++) {
        const char *w = i < g.ind ? words : argv[i];
        if (w && ((wbuf.len && kb_buf_putc(&wbuf, ' ') != KB_OK) ||
                  kb_buf_puts(&wbuf, w) != KB_OK)) {
            kb_buf_release(&wbuf);
            return kb_cli_usage_error(self, "the words are longer than %d bytes", 1 << 16);
        }
    }
    if (wbuf.len)
        words = wbuf.data;
    int status = papers_run(cli, self, section, words, budget, json);
    kb_buf_release(&wbuf);
    return status;
}

static int papers_run(const kb_cli *cli, const kb_command *self, const char *section,
                      const char *words, long budget, int json)
{
    if (budget && !json)
        return kb_cli_usage_error(self, "--budget needs --json");
    if (json) {   /* the papers tool's object */
        cJSON *args = cJSON_CreateObject();
        if (!args || (section && !cJSON_AddStringToObject(args, "section", section)) ||
            (words && !cJSON_AddStringToObject(args, "words", words)) ||
            (budget && !cJSON_AddNumberToObject(args, "budget_tokens", (double)budget))) {
            cJSON_Delete(args);
            args = NULL;
        }
        return cmd_tool_json(cli, "papers", args);
    }
    kb_err err;
    kb_err_clear(&err);
    kb_store *store = NULL;
    kb_paper_list list = { 0 };
    kb_rc rc = kb_cli_open_store(cli, KB_STORE_READONLY, &store, &err);
    if (rc == KB_OK)
        rc = kb_papers_list(store, section, words, &list, &err);
    if (rc == KB_OK) {
        const char *last = "";
        for (size_t i = 0; i < list.n; i++) {
            const kb_paper_row *p = &list.items[i];
            /* the records' text is the document's: escaped for the
             * terminal (kb_cli_put_safe) */
            if (strcmp(p->section, last) != 0) {
                fputs(i ? "\n" : "", stdout);
                kb_cli_puts_safe(stdout, p->section);
                fputc('\n', stdout);
            }
            last = p->section;
            fputs("  [", stdout);
            kb_cli_puts_safe_pad(stdout, p->date, 7);
            fputs("] ", stdout);
            kb_cli_puts_safe(stdout, p->title);
            fputc('\n', stdout);
            cJSON *links = cJSON_Parse(p->links_json);
            const cJSON *l;
            cJSON_ArrayForEach(l, links)
                if (cJSON_IsString(l)) {
                    fputs("            ", stdout);
                    kb_cli_puts_safe(stdout, l->string ? l->string : "");
                    fputs(": ", stdout);
                    kb_cli_puts_safe(stdout, l->valuestring);
                    fputc('\n', stdout);
                }
            cJSON_Delete(links);
        }
        printf("%s%zu papers\n", list.n ? "\n" : "", list.n);
    }
    kb_paper_list_release(&list);
    kb_store_close(store);
    return rc == KB_OK ? 0 : kb_cli_fail(&err);
}
