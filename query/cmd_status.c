/* cmd_status.c - kb status: what the KB holds. */
#include "kb/cli.h"

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

int cmd_status(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    int json, status = kb_cli_parse_plain(argc, argv, self, NULL, NULL, &json);
    if (status)
        return status;
    kb_err err;
    kb_err_clear(&err);
    kb_store *store = NULL;
    kb_status st;
    memset(&st, 0, sizeof st);
    kb_rc rc = kb_cli_open_store(cli, KB_STORE_READONLY, &store, &err);
    if (rc == KB_OK)
        rc = kb_store_status(store, &st, &err);
    if (rc == KB_OK && json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "kb", kb_store_dir(store));
        cJSON_AddNumberToObject(o, "schema_version", st.schema_version);
        cJSON_AddNumberToObject(o, "documents", (double)st.documents);
        cJSON_AddNumberToObject(o, "chunks", (double)st.chunks);
        cJSON_AddNumberToObject(o, "papers", (double)st.papers);
        cJSON_AddNumberToObject(o, "embeddings", (double)st.embeddings);
        cJSON_AddStringToObject(o, "embedder", st.embedder);
        cJSON_AddNumberToObject(o, "disk_bytes", (double)st.disk_bytes);
        cJSON *arr = cJSON_AddArrayToObject(o, "sources");
        for (size_t i = 0; i < st.n; i++) {
            const kb_source_status *s = &st.sources[i];
            cJSON *x = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "id", s->id);
            cJSON_AddStringToObject(x, "title", s->title);
            cJSON_AddStringToObject(x, "url", s->url);
            cJSON_AddNumberToObject(x, "documents", (double)s->documents);
            cJSON_AddNumberToObject(x, "chunks", (double)s->chunks);
            cJSON_AddNumberToObject(x, "papers", (double)s->papers);
            cJSON_AddNumberToObject(x, "last_ingest", (double)s->last_ingest);
            if (s->last_error)
                cJSON_AddStringToObject(x, "last_error", s->last_error);
            else
                cJSON_AddNullToObject(x, "last_error");
            cJSON_AddItemToArray(arr, x);
        }
        rc = kb_cli_print_json(o, &err);
    } else if (rc == KB_OK) {
        printf("KB %s: %zu sources, %zu documents, %zu chunks, %zu papers, "
               "%.1f MB on disk\n", kb_store_dir(store), st.n, st.documents, st.chunks, st.papers,
               (double)st.disk_bytes / 1e6);
        printf("embeddings: %zu%s%s\n\n", st.embeddings, *st.embedder ? " by " : "",
               st.embedder);
        printf("%-32s %6s %7s %6s  %-19s %s\n", "source", "docs", "chunks",
               "papers", "last ingest", "state");
        for (size_t i = 0; i < st.n; i++) {
            const kb_source_status *s = &st.sources[i];
            char when[32];
            format_time(s->last_ingest, when, sizeof when);
            printf("%-32s %6zu %7zu %6zu  %-19s %s\n", s->id, s->documents,
                   s->chunks, s->papers, when, s->last_error ? s->last_error : "ok");
        }
    }
    kb_status_release(&st);
    kb_store_close(store);
    return rc == KB_OK ? 0 : kb_cli_fail(&err);
}
