/* cmd_rm.c - kb rm: documents, folders, URLs or whole sources out of the
 * KB, in one transaction, vectors included. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

static const kb_option rm_options[] = {
    { "dry-run", 'n', NULL, "say what would be removed; remove nothing" },
    { "json", KB_OPT_LONG('j'), NULL, "print JSON" },
    { NULL, 0, NULL, NULL },
};

static int cmd_rm(int argc, char **argv, const kb_cli *cli, const kb_command *self);

const kb_command kb_cmd_rm = {
    .name = "rm",
    .fn = cmd_rm,
    .usage = "kb rm [--dry-run] [--json] PATH|URL|SOURCE...",
    .summary = "remove files, folders, URLs or sources from the KB",
    .options = rm_options,
    .notes = "A path is matched by its real path, so a file deleted since it was\n"
             "ingested can still be named; a folder takes everything under it; a\n"
             "source id takes the source and all its documents (also where a file or\n"
             "folder of that name holds nothing ingested). All or nothing: a\n"
             "name that matches nothing removes nothing (exit 1).\n",
    .operands = "source",
};

/* The --json object (NULL when out of memory). */
static cJSON *rm_json(const kb_rm_result *r, int dry_run)
{
    cJSON *o = cJSON_CreateObject(), *arr = NULL, *docs = NULL;
    int ok = o && cJSON_AddBoolToObject(o, "dry_run", dry_run) &&
             (arr = cJSON_AddArrayToObject(o, "removed")) != NULL &&
             (docs = cJSON_AddArrayToObject(o, "documents")) != NULL;
    for (size_t i = 0; ok && i < r->n; i++) {
        cJSON *t = cJSON_CreateObject();
        ok = cJSON_AddItemToArray(arr, t) &&
             cJSON_AddStringToObject(t, "target", r->items[i].target) &&
             cJSON_AddStringToObject(t, "what", r->items[i].what) &&
             cJSON_AddNumberToObject(t, "documents", (double)r->items[i].documents) &&
             cJSON_AddNumberToObject(t, "chunks", (double)r->items[i].chunks);
    }
    for (size_t i = 0; ok && i < r->ndocs; i++)
        ok = cJSON_AddItemToArray(docs, cJSON_CreateString(r->docs[i]));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static int cmd_rm(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    int dry_run = 0, json = 0, c;
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    while ((c = kb_getopt_next(&g)) > 0) {
        if (c == 'n')
            dry_run = 1;
        else
            json = 1;
    }
    if (c < 0)
        return g.status;
    if (g.ind >= argc)
        return kb_cli_usage_error(self, "name what to remove: a path, a URL or a source");

    kb_err err;
    kb_err_clear(&err);
    kb_store *store = NULL;
    kb_rm_result res = { 0 };
    kb_rc rc = kb_cli_open_store(cli, 0, &store, &err);
    if (rc == KB_OK)
        rc = kb_ingest_remove(store, argv + g.ind, (size_t)(argc - g.ind), dry_run,
                              &res, &err);
    if (rc == KB_OK && json) {
        rc = kb_cli_print_json(rm_json(&res, dry_run), &err);
    } else if (rc == KB_OK) {
        if (dry_run)
            for (size_t i = 0; i < res.ndocs; i++) {
                fputs("would remove ", stdout);
                kb_cli_puts_safe(stdout, res.docs[i]);
                putchar('\n');
            }
        size_t docs = 0, chunks = 0;
        for (size_t i = 0; i < res.n; i++) {
            docs += res.items[i].documents;
            chunks += res.items[i].chunks;
        }
        if (!cli->quiet || dry_run)
            printf("%s %zu document%s (%zu chunk%s)\n", dry_run ? "would remove" : "removed",
                   docs, docs == 1 ? "" : "s", chunks, chunks == 1 ? "" : "s");
    }
    kb_rm_result_release(&res);
    kb_store_close(store);
    return rc == KB_OK ? 0 : kb_cli_fail(&err);
}
