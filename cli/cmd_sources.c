/* cmd_sources.c - kb sources: the manifest, and each source's state. */
#include "cli/cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* One source of the manifest with its state in the KB (ss NULL: none);
 * NULL when out of memory. */
static cJSON *source_json(const kb_source *s, const kb_source_status *ss,
                          const char *state)
{
    cJSON *o = cJSON_CreateObject(), *mir = NULL, *loc = NULL;
    int ok = o && cJSON_AddStringToObject(o, "id", s->id) &&
             cJSON_AddStringToObject(o, "title", s->title) &&
             cJSON_AddStringToObject(o, "url", s->url) &&
             cJSON_AddStringToObject(o, "format", s->format) &&
             cJSON_AddStringToObject(o, "version", s->version) &&
             (mir = cJSON_AddArrayToObject(o, "mirror")) != NULL;
    for (size_t j = 0; ok && j < s->nmirror; j++)
        ok = cJSON_AddItemToArray(mir, cJSON_CreateString(s->mirror[j]));
    ok = ok && (loc = cJSON_AddArrayToObject(o, "local")) != NULL;
    for (size_t j = 0; ok && j < s->nlocal; j++)
        ok = cJSON_AddItemToArray(loc, cJSON_CreateString(s->local[j]));
    ok = ok && cJSON_AddStringToObject(o, "state", state) &&
         cJSON_AddNumberToObject(o, "documents", ss ? (double)ss->documents : 0) &&
         cJSON_AddNumberToObject(o, "chunks", ss ? (double)ss->chunks : 0) &&
         (!ss || !ss->last_error ||
          cJSON_AddStringToObject(o, "last_error", ss->last_error));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static const kb_option sources_options[] = {
    { "manifest", KB_OPT_LONG('m'), "FILE", "sources manifest (default: corpus/sources.json where kb\nfinds it)" },
    { "json", KB_OPT_LONG('j'), NULL, "print JSON" },
    { NULL, 0, NULL, NULL },
};

/* The manifest given (--manifest, KB_MANIFEST: NULL for none) or the one
 * kb finds (kb_manifest_path); without one anywhere an empty one, so that
 * the KB's sources are still listed, those of files and URLs ingested ad
 * hoc. */
static kb_rc load_manifest(const kb_cli *cli, const char *given, kb_manifest *m,
                           kb_err *err)
{
    char *path = given ? kb_strdup(given) : kb_manifest_path(cli->config, cli->kb_dir);
    struct stat st;
    kb_rc rc;
    if (path && !given && stat(path, &st) != 0 && errno == ENOENT) {
        memset(m, 0, sizeof *m);
        fputs("kb sources: no manifest '", stderr);
        kb_fput_line_safe(stderr, path);
        fputs("' here: listing the KB's sources alone\n", stderr);
        rc = KB_OK;
    } else {
        rc = path ? kb_manifest_load(path, m, err)
                  : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    free(path);
    return rc;
}

static int cmd_sources(int argc, char **argv, const kb_cli *cli, const kb_command *self);

const kb_command kb_cmd_sources = {
    .name = "sources",
    .fn = cmd_sources,
    .usage = "kb sources [--manifest FILE] [--json]",
    .summary = "list the manifest's sources and each one's state in the KB",
    .options = sources_options,
};

static int cmd_sources(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    const char *manifest_path = NULL;
    int json = 0, c;
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    while ((c = kb_getopt_next(&g)) > 0) {
        if (c == KB_OPT_LONG('m'))
            manifest_path = g.arg;
        else
            json = 1;
    }
    if (c < 0)
        return g.status;
    if (kb_cli_no_operands(&g))
        return 2;

    kb_err err;
    kb_err_clear(&err);
    kb_manifest m;
    if (!manifest_path)
        manifest_path = cli->config->manifest;   /* KB_MANIFEST */
    kb_rc rc = load_manifest(cli, manifest_path, &m, &err);
    if (rc != KB_OK)
        return kb_cli_fail(&err);
    /* the KB is optional here: without one every source is 'not ingested' */
    kb_store *store = NULL;
    kb_status st;
    memset(&st, 0, sizeof st);
    kb_err serr;
    kb_err_clear(&serr);
    if (kb_cli_open_store(cli, KB_STORE_READONLY, &store, &serr) == KB_OK)
        kb_store_status(store, &st, &serr);

    cJSON *arr = json ? cJSON_CreateArray() : NULL;
    if (!json)
        printf("%-32s %-10s %6s %7s  %s\n", "id", "state", "docs", "chunks", "url");
    for (size_t i = 0; i < m.n; i++) {
        const kb_source *s = &m.sources[i];
        const kb_source_status *ss = NULL;
        for (size_t j = 0; j < st.n; j++)
            if (strcmp(st.sources[j].id, s->id) == 0)
                ss = &st.sources[j];
        const char *state = !ss || !ss->last_ingest ? "new"
                            : ss->last_error ? "failed" : "ingested";
        if (json) {
            cJSON *o = source_json(s, ss, state);
            if (!cJSON_AddItemToArray(arr, o)) {
                cJSON_Delete(o);
                cJSON_Delete(arr);
                arr = NULL;   /* out of memory: kb_cli_print_json says so */
            }
        } else {
            /* the manifest's strings escaped for the terminal */
            kb_cli_puts_safe_pad(stdout, s->id, 32);
            printf(" %-10s %6zu %7zu  ", state, ss ? ss->documents : 0,
                   ss ? ss->chunks : 0);
            kb_cli_puts_safe(stdout, s->url);
            fputc('\n', stdout);
        }
    }
    /* the KB's sources that are not the manifest's: ad-hoc files and URLs
     * (--source ID, 'local', 'web') */
    for (size_t j = 0; j < st.n; j++) {
        const kb_source_status *ss = &st.sources[j];
        if (kb_manifest_find(&m, ss->id))
            continue;
        if (json) {
            cJSON *o = cJSON_CreateObject();
            if (!o || !cJSON_AddStringToObject(o, "id", ss->id) ||
                !cJSON_AddStringToObject(o, "state", "ad-hoc") ||
                !cJSON_AddNumberToObject(o, "documents", (double)ss->documents) ||
                !cJSON_AddNumberToObject(o, "chunks", (double)ss->chunks) ||
                !cJSON_AddItemToArray(arr, o)) {
                cJSON_Delete(o);
                cJSON_Delete(arr);
                arr = NULL;
            }
        } else {
            kb_cli_puts_safe_pad(stdout, ss->id, 32);
            printf(" %-10s %6zu %7zu  %s\n", "ad-hoc", ss->documents, ss->chunks,
                   "(not in the manifest)");
        }
    }
    if (json) {
        cJSON *root = cJSON_CreateObject();
        if (!cJSON_AddItemToObject(root, "sources", arr)) {
            cJSON_Delete(arr);
            cJSON_Delete(root);
            root = NULL;
        }
        rc = kb_cli_print_json(root, &err);
    }
    kb_status_release(&st);
    kb_store_close(store);
    kb_manifest_release(&m);
    return rc == KB_OK ? 0 : kb_cli_fail(&err);
}
