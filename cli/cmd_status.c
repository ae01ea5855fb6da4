/* cmd_status.c - kb status: what the KB holds. */
#include "cli/cli.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void format_time(long long t, char *out, size_t n)
{
    if (t <= 0) {
        snprintf(out, n, "never");
        return;
    }
    time_t tt = (time_t)t;
    struct tm tm;
    localtime_r(&tt, &tm);
    strftime(out, n, "%Y-%m-%d %H:%M:%S", &tm);
}

static const kb_option status_options[] = {
    { "json", KB_OPT_LONG('j'), NULL, "print JSON" },
    { NULL, 0, NULL, NULL },
};

static int cmd_status(int argc, char **argv, const kb_cli *cli, const kb_command *self);

const kb_command kb_cmd_status = {
    .name = "status",
    .fn = cmd_status,
    .usage = "kb status [--json]",
    .summary = "show the KB: sources, documents, chunks, last ingest, size",
    .options = status_options,
};

static int cmd_status(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    int json = 0, c;
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    while ((c = kb_getopt_next(&g)) > 0)
        json = 1;
    if (c < 0)
        return g.status;
    if (kb_cli_no_operands(&g))
        return 2;
    if (json)   /* the status tool's object */
        return cmd_tool_json(cli, "status", cJSON_CreateObject());
    kb_err err;
    kb_err_clear(&err);
    kb_store *store = NULL;
    kb_status st;
    memset(&st, 0, sizeof st);
    kb_rc rc = kb_cli_open_store(cli, KB_STORE_READONLY, &store, &err);
    if (rc == KB_OK)
        rc = kb_store_status(store, &st, &err);
    if (rc == KB_OK) {
        /* strings from the manifest, the KB and fetch errors (a server's
         * words) escaped for the terminal */
        fputs("KB ", stdout);
        kb_cli_puts_safe(stdout, kb_store_dir(store));
        printf(": %zu source%s, %zu document%s, %zu chunk%s, %zu paper%s, "
               "%.1f MB on disk\n", st.n, KB_S(st.n), st.documents, KB_S(st.documents),
               st.chunks, KB_S(st.chunks), st.papers, KB_S(st.papers),
               (double)st.disk_bytes / 1e6);
        if (st.embeddings == 0) {
            printf("embeddings: none (search is lexical; 'kb ingest' without "
                   "--no-embed makes them)\n\n");
        } else {
            printf("embeddings: %zu of %zu chunks by ", st.embeddings, st.chunks);
            kb_cli_puts_safe(stdout, st.embedder);
            printf(", index %s", st.vec_index);
            if (st.embeddings < st.chunks)
                printf(": partly embedded\n"
                       "  (an interrupted ingest?) vector and hybrid search see only the "
                       "embedded chunks;\n  run 'kb ingest' to embed the other %zu",
                       st.chunks - st.embeddings);
            fputs("\n\n", stdout);
        }
        printf("%-32s %-12s %6s %7s %6s  %-19s %s\n", "source", "version", "docs",
               "chunks", "papers", "last ingest", "state");
        for (size_t i = 0; i < st.n; i++) {
            const kb_source_status *s = &st.sources[i];
            char when[32];
            format_time(s->last_ingest, when, sizeof when);
            kb_cli_puts_safe_pad(stdout, s->id, 32);
            fputc(' ', stdout);
            kb_cli_puts_safe_pad(stdout, s->version && *s->version ? s->version : "-", 12);
            printf(" %6zu %7zu %6zu  %-19s ", s->documents, s->chunks, s->papers, when);
            kb_cli_puts_safe(stdout, s->last_error ? s->last_error : "ok");
            fputc('\n', stdout);
        }
    }
    kb_status_release(&st);
    kb_store_close(store);
    return rc == KB_OK ? 0 : kb_cli_fail(&err);
}
