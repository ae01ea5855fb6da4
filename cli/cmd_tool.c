/* cmd_tool.c - the --json of the commands that are tools (kb query, get,
 * papers, status): one call of the tool table, printed. */
#include "cli/cli.h"

int cmd_tool_json(const kb_cli *cli, const char *tool, cJSON *args)
{
    return cmd_tool_json_on(cli, NULL, tool, args, NULL, NULL, NULL, NULL);
}

int cmd_tool_json_on(const kb_cli *cli, kb_store *store, const char *tool,
                     cJSON *args, const char *extra_key, cJSON *extra,
                     cmd_tool_seen_fn seen, void *seen_ctx)
{
    kb_err err;
    kb_err_clear(&err);
    kb_store *own = NULL;
    cJSON *out = NULL;
    kb_rc rc = args ? KB_OK : kb_err_set(&err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK && !store && (rc = kb_cli_open_store(cli, KB_STORE_READONLY, &own,
                                                         &err)) == KB_OK)
        store = own;
    if (rc == KB_OK) {
        kb_tool_ctx ctx = { .store = store, .emb = NULL, .config = cli->config };
        rc = kb_tool_call(&ctx, tool, args, &out, &err);
    }
    if (rc == KB_OK && extra) {
        if (cJSON_AddItemToObject(out, extra_key, extra))
            extra = NULL;
        else
            rc = kb_err_set(&err, KB_ERR_NOMEM, "out of memory");
    }
    if (rc == KB_OK && seen)
        seen(seen_ctx, store, out);
    if (rc == KB_OK)
        rc = kb_cli_print_json(out, &err);   /* frees out */
    else
        cJSON_Delete(out);
    cJSON_Delete(args);
    cJSON_Delete(extra);
    kb_store_close(own);
    return rc == KB_OK ? 0 : kb_cli_fail(&err);
}
