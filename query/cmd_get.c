/* cmd_get.c - kb get: a whole chunk, or its whole section. */
#include "kb/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const kb_option get_options[] = {
    { "section", KB_OPT_LONG('s'), NULL, "print every chunk of the chunk's section" },
    { "json", KB_OPT_LONG('j'), NULL, "print JSON" },
    { "budget", KB_OPT_LONG('b'), "TOKENS", "with --json: the chunks that fit about TOKENS tokens" },
    { NULL, 0, NULL, NULL },
};

static int cmd_get(int argc, char **argv, const kb_cli *cli, const kb_command *self);

const kb_command kb_cmd_get = {
    .name = "get",
    .fn = cmd_get,
    .usage = "kb get [--json [--budget TOKENS]] [--section] CHUNK_ID",
    .summary = "print a whole chunk, or with --section its whole section",
    .options = get_options,
    .operands = "chunk",
};

static int cmd_get(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    int json = 0, section = 0, c;
    long budget = 0;
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    while ((c = kb_getopt_next(&g)) > 0) {
        switch (c) {
        case KB_OPT_LONG('j'): json = 1; break;
        case KB_OPT_LONG('s'): section = 1; break;
        case KB_OPT_LONG('b'):
            /* the number's range is the get tool's to check */
            if (kb_parse_long(g.arg, 1, 1000000000L, &budget) != KB_OK)
                return kb_cli_usage_error(self, "--budget wants a number of tokens, "
                                          "not '%s'", g.arg);
            break;
        }
    }
    if (c < 0)
        return g.status;
    const char *id_arg = g.ind < argc ? argv[g.ind] : NULL;
    if (g.ind + 1 < argc)
        return kb_cli_usage_error(self, "unexpected argument '%s'", argv[g.ind + 1]);
    long id;
    if (!id_arg)
        return kb_cli_usage_error(self, "no chunk id given");
    if (kb_parse_long(id_arg, 1, 0x7fffffffL, &id) != KB_OK)
        return kb_cli_usage_error(self, "'%s' is not a chunk id", id_arg);
    if (budget && !json)
        return kb_cli_usage_error(self, "--budget needs --json");

    if (json) {   /* the get tool's object */
        cJSON *args = cJSON_CreateObject();
        if (!cJSON_AddNumberToObject(args, "chunk_id", (double)id) ||
            !cJSON_AddBoolToObject(args, "section", section) ||
            (budget && !cJSON_AddNumberToObject(args, "budget_tokens", (double)budget))) {
            cJSON_Delete(args);
            args = NULL;
        }
        return cmd_tool_json(cli, "get", args);
    }

    kb_err err;
    kb_err_clear(&err);
    kb_store *store = NULL;
    kb_results res = { 0 };
    kb_rc rc = kb_cli_open_store(cli, KB_STORE_READONLY, &store, &err);
    if (rc == KB_OK)
        rc = kb_get_chunk(store, id, section, &res, &err);
    if (rc == KB_OK) {
        /* document text, escaped for the terminal (kb_cli_put_safe) */
        const kb_result *first = &res.items[0];
        putchar('[');
        kb_cli_puts_safe(stdout, first->source);
        fputs("] ", stdout);
        for (size_t d = 0; d < first->depth; d++) {
            fputs(d ? " > " : "", stdout);
            kb_cli_puts_safe(stdout, first->heading_path[d]);
        }
        putchar('\n');
        kb_cli_puts_safe(stdout, first->url);
        putchar('\n');
        if (*first->path) {
            kb_cli_puts_safe(stdout, first->path);
            putchar('\n');
        }
        for (size_t i = 0; i < res.n; i++) {
            putchar('\n');
            kb_cli_puts_safe(stdout, res.items[i].text);
            putchar('\n');
        }
    }
    kb_results_release(&res);
    kb_store_close(store);
    return rc == KB_OK ? 0 : kb_cli_fail(&err);
}
