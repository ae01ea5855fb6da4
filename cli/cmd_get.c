/* cmd_get.c - kb get: a whole chunk, or its whole section. */
#include "cli/cli.h"

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
    .usage = "kb get [--json [--budget TOKENS]] [--section] CHUNK_ID|@RANK",
    .summary = "print a whole chunk, or with --section its whole section",
    .options = get_options,
    .notes = "@RANK is a result of the last 'kb query' (in this KB, with or without\n"
             "--json), numbered as it printed them, its skills after its results:\n"
             "kb get @1.\n",
    .operands = "chunk",
};

/* The chunk id of result rank of the last query in the KB at dir (its
 * ids are in the state folder's last-query, first line the KB). */
static int last_result(const kb_cli *cli, const kb_command *self, long rank, long *id)
{
    char *path = kb_path_join(cli->config->state_dir, "last-query");
    char *dir = kb_store_default_dir(cli->kb_dir);
    kb_buf b;
    kb_buf_init(&b, 1 << 20);
    kb_err err;
    kb_err_clear(&err);
    int status = 0;
    if (!path || !dir || kb_read_file(path, 1 << 20, &b, &err) != KB_OK) {
        status = kb_cli_usage_error(self, "no last query to take @%ld from; run 'kb "
                                    "query' first", rank);
        goto out;
    }
    char *line = b.data, *nl = strchr(line, '\n');
    if (!nl || (size_t)(nl - line) != strlen(dir) || strncmp(line, dir, strlen(dir)) != 0) {
        status = kb_cli_usage_error(self, "the last query searched another KB; run "
                                    "'kb query' here first");
        goto out;
    }
    const char *text = NULL;   /* the query, when the file says it */
    long r = 1;
    for (; (line = nl + 1) && *line; ) {
        nl = strchr(line, '\n');
        if (!nl)
            break;
        *nl = '\0';
        if (line[0] == '#') {
            text = line[1] == ' ' ? line + 2 : line + 1;
            continue;
        }
        if (r++ == rank) {
            if (kb_parse_long(line, 1, 0x7fffffffL, id) != KB_OK)
                break;
            goto out;
        }
    }
    if (text)
        status = kb_cli_usage_error(self, "the last query, '%.80s', has %ld result%s: "
                                    "no @%ld", text, r - 1, r == 2 ? "" : "s", rank);
    else
        status = kb_cli_usage_error(self, "the last query has no result @%ld", rank);
out:
    kb_buf_release(&b);
    free(path);
    free(dir);
    return status;
}

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
            /* the get tool's range, said in the CLI's words */
            if (kb_parse_long(g.arg, KB_TOOL_BUDGET_MIN, KB_TOOL_BUDGET_MAX,
                              &budget) != KB_OK)
                return kb_cli_usage_error(self, "--budget wants a number of tokens "
                                          "from %d to %d, not '%s'", KB_TOOL_BUDGET_MIN,
                                          KB_TOOL_BUDGET_MAX, g.arg);
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
    long rank;
    if (id_arg[0] == '@' && kb_parse_long(id_arg + 1, 1, 1000, &rank) == KB_OK) {
        int status = last_result(cli, self, rank, &id);
        if (status)
            return status;
    } else if (kb_parse_long(id_arg, 1, 0x7fffffffL, &id) != KB_OK) {
        return kb_cli_usage_error(self, "'%s' is not a chunk id (nor @RANK of the last "
                                  "query)", id_arg);
    }
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
