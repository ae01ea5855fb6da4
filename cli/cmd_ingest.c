/* cmd_ingest.c - kb ingest: progress (a line redrawn on a terminal, else
 * one every 15 s), a summary line per source, a JSON summary on request. */
#include "cli/cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const kb_cli *cli;
    int json;
    kb_cli_progress line;   /* --progress, --no-progress */
} progress_state;

static void on_progress(const kb_ingest_progress *p, void *ctx)
{
    progress_state *ps = ctx;
    if (ps->cli->quiet)
        return;
    double secs = p->elapsed_ms / 1000.0;
    double rate = secs > 0 ? (double)p->docs_done / secs : 0;
    double eta = rate > 0 && p->docs_total > p->docs_done
                     ? (double)(p->docs_total - p->docs_done) / rate : 0;
    char line[512];
    int embedding = strcmp(p->source, "embeddings") == 0;
    if (embedding) {
        snprintf(line, sizeof line, "embedding: %zu/%zu chunks, %.1f chunks/s, ETA %.0fs",
                 p->docs_done, p->docs_total, rate, eta);
        kb_cli_progress_show(&ps->line, "%s", line);
        if (p->docs_done == p->docs_total) {
            kb_cli_progress_clear(&ps->line);
            fprintf(stderr, "embeddings: %zu chunk%s in %.1fs (%.1f chunks/s)\n",
                    p->docs_done, KB_S(p->docs_done), secs, rate);
        }
        return;
    }
    if (!p->finished) {
        snprintf(line, sizeof line, "[%zu/%zu] %s: %zu/%zu documents, %zu chunk%s, "
                 "%.1f docs/s, ETA %.0fs", p->source_index + 1, p->nsources,
                 p->source, p->docs_done, p->docs_total, p->chunks, KB_S(p->chunks),
                 rate, eta);
        kb_cli_progress_show(&ps->line, "%s", line);
        return;
    }
    kb_cli_progress_clear(&ps->line);
    if (p->error && p->docs_total == 0) {
        fprintf(stderr, "%s: failed: %s\n", p->source, p->error);
        return;
    }
    fprintf(stderr, "%s: %zu document%s (%zu changed, %zu unchanged, %zu removed,"
            " %zu failed), %zu chunk%s in %.1fs\n", p->source, p->docs_total,
            p->docs_total == 1 ? "" : "s", p->changed, p->unchanged, p->removed,
            p->failed, p->chunks, p->chunks == 1 ? "" : "s", secs);
}

/* Removes the KB a failed first ingest made: its files, and the folder
 * when this run made it (rmdir: never a folder that holds anything else). */
static void remove_new_kb(const char *dir, int dir_fresh)
{
    static const char *const files[] = { "kb.sqlite", "kb.sqlite-wal", "kb.sqlite-shm",
                                         "ingest.lock" };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *p = kb_path_join(dir, files[i]);
        if (p)
            unlink(p);
        free(p);
    }
    char *cache = kb_path_join(dir, "cache");
    if (cache)
        rmdir(cache);
    free(cache);
    if (dir_fresh)
        rmdir(dir);
}

/* "did you mean" for a target that is neither a file nor a source of the
 * manifest (kb ingest ptx_isa). */
static void suggest_source(const kb_cli *cli, const kb_ingest_opts *opts,
                           char *const *targets, size_t n)
{
    kb_manifest m;
    kb_err err;
    kb_err_clear(&err);
    char *path = opts->manifest_path ? kb_strdup(opts->manifest_path)
                                     : kb_manifest_path(cli->config, cli->kb_dir);
    kb_rc rc = path ? kb_manifest_load(path, &m, &err) : KB_ERR_NOMEM;
    free(path);
    if (rc != KB_OK)
        return;
    const char **ids = calloc(m.n ? m.n : 1, sizeof *ids);
    for (size_t i = 0; ids && i < m.n; i++)
        ids[i] = m.sources[i].id;
    struct stat st;
    for (size_t i = 0; ids && i < n; i++) {
        const char *like = stat(targets[i], &st) != 0 && !kb_manifest_find(&m, targets[i])
                               ? kb_cli_similar(targets[i], ids, m.n) : NULL;
        if (like)
            fprintf(stderr, "hint: did you mean '%s'? ('kb sources' lists them)\n", like);
    }
    free(ids);
    kb_manifest_release(&m);
    (void)cli;
}

/* The --json summary (NULL when out of memory). */
static cJSON *summary_json(int ok, const kb_ingest_stats *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddBoolToObject(o, "ok", ok) ||
        !cJSON_AddNumberToObject(o, "sources", (double)s->sources) ||
        !cJSON_AddNumberToObject(o, "sources_failed", (double)s->sources_failed) ||
        !cJSON_AddNumberToObject(o, "documents_changed", (double)s->docs_changed) ||
        !cJSON_AddNumberToObject(o, "documents_unchanged", (double)s->docs_unchanged) ||
        !cJSON_AddNumberToObject(o, "documents_removed", (double)s->docs_removed) ||
        !cJSON_AddNumberToObject(o, "documents_failed", (double)s->docs_failed) ||
        !cJSON_AddNumberToObject(o, "chunks_written", (double)s->chunks_written) ||
        !cJSON_AddNumberToObject(o, "chunks_embedded", (double)s->chunks_embedded) ||
        !cJSON_AddNumberToObject(o, "took_ms", round(s->took_ms * 10) / 10)) {
        cJSON_Delete(o);
        return NULL;
    }
    /* near-duplicate skills: [{"skills":[a,b],"paths":[..],"reason",
     * "cosine"}], the reason "kernel" or "embedding" */
    cJSON *dups = cJSON_AddArrayToObject(o, "near_duplicates");
    for (size_t i = 0; dups && i < s->ndups; i++) {
        const kb_skill_dup *d = &s->dups[i];
        cJSON *x = cJSON_CreateObject();
        const char *na[2] = { d->a, d->b }, *pa[2] = { d->path_a, d->path_b };
        int fine = x && cJSON_AddItemToArray(dups, x) &&
                   cJSON_AddItemToObject(x, "skills", cJSON_CreateStringArray(na, 2)) &&
                   cJSON_AddItemToObject(x, "paths", cJSON_CreateStringArray(pa, 2)) &&
                   cJSON_AddStringToObject(x, "reason",
                                           d->same_kernel ? "kernel" : "embedding") &&
                   (d->cosine < 0 ? cJSON_AddNullToObject(x, "cosine") != NULL
                                  : cJSON_AddNumberToObject(x, "cosine",
                                                            round(d->cosine * 1e4) / 1e4) != NULL);
        if (!fine) {
            if (x && !cJSON_GetArrayItem(dups, (int)i))
                cJSON_Delete(x);
            cJSON_Delete(o);
            return NULL;
        }
    }
    if (!dups) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static const kb_option ingest_options[] = {
    { "manifest", KB_OPT_LONG('m'), "FILE", "sources manifest (default corpus/sources.json)" },
    { "mirror", KB_OPT_LONG('M'), "DIR", "read sources from a local mirror ($KB_MIRROR)" },
    { "source", KB_OPT_LONG('s'), "ID", "source id for ad-hoc paths and URLs (default\n"
      "'local' for paths, 'web' for URLs)" },
    { "force", KB_OPT_LONG('f'), NULL, "re-parse documents even if unchanged" },
    { "no-embed", KB_OPT_LONG('E'), NULL, "skip embeddings (lexical search only)" },
    { "reembed", KB_OPT_LONG('R'), NULL, "drop every vector and embed again (new model)" },
    { "index", KB_OPT_LONG('I'), "KIND", "FAISS index: Flat (exact, default) or e.g. HNSW32" },
    { "json", KB_OPT_LONG('j'), NULL, "print a JSON summary" },
    { "progress", KB_OPT_LONG('p'), NULL, "progress on stderr: a line redrawn on a terminal,\n"
      "else one every 15 s (the default)" },
    { "no-progress", KB_OPT_LONG('P'), NULL, "no progress, only each source's summary" },
    { NULL, 0, NULL, NULL },
};

static int cmd_ingest(int argc, char **argv, const kb_cli *cli, const kb_command *self);

const kb_command kb_cmd_ingest = {
    .name = "ingest",
    .fn = cmd_ingest,
    .usage = "kb ingest [options] [ID|PATH|URL]...",
    .summary = "ingest the manifest's sources, some of them, or files and URLs",
    .options = ingest_options,
    .operands = "source",
};

static int cmd_ingest(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    kb_ingest_opts opts = { 0 };
    opts.embed = 1;
    progress_state ps = { .cli = cli };
    int c, progress = 1;
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    while ((c = kb_getopt_next(&g)) > 0) {
        switch (c) {
        case KB_OPT_LONG('m'): opts.manifest_path = g.arg; break;
        case KB_OPT_LONG('M'): opts.mirror_dir = g.arg; break;
        case KB_OPT_LONG('s'): opts.adhoc_source = g.arg; break;
        case KB_OPT_LONG('f'): opts.force = 1; break;
        case KB_OPT_LONG('E'): opts.embed = 0; break;
        case KB_OPT_LONG('R'): opts.reembed = 1; break;
        case KB_OPT_LONG('I'): opts.index_kind = g.arg; break;
        case KB_OPT_LONG('j'): ps.json = 1; break;
        case KB_OPT_LONG('p'): progress = 1; break;
        case KB_OPT_LONG('P'): progress = 0; break;
        }
    }
    if (c < 0)
        return g.status;
    kb_cli_progress_init(&ps.line, progress);
    opts.progress = on_progress;
    opts.progress_ctx = &ps;
    opts.config = cli->config;
    if (!opts.manifest_path)
        opts.manifest_path = cli->config->manifest;    /* KB_MANIFEST */
    if (!opts.mirror_dir || !*opts.mirror_dir)
        opts.mirror_dir = cli->config->mirror;         /* KB_MIRROR */

    kb_err err;
    kb_err_clear(&err);
    kb_store *store = NULL;
    kb_ingest_stats stats;
    memset(&stats, 0, sizeof stats);
    /* a first ingest that fails leaves no empty KB behind */
    char *dir = kb_store_default_dir(cli->kb_dir);
    char *db = dir ? kb_path_join(dir, "kb.sqlite") : NULL;
    struct stat st;
    int fresh = db && stat(db, &st) != 0;
    int dir_fresh = dir && stat(dir, &st) != 0;
    kb_rc rc = kb_cli_open_store(cli, KB_STORE_CREATE, &store, &err);
    if (rc == KB_OK)
        rc = kb_ingest_run(store, &opts, argv + g.ind, (size_t)(argc - g.ind),
                           &stats, &err);
    kb_store_close(store);
    if (rc != KB_OK && rc != KB_ERR_PARTIAL && fresh && stats.docs_changed == 0)
        remove_new_kb(dir, dir_fresh);
    free(db);
    free(dir);

    if (ps.json) {
        kb_err jerr;
        kb_err_clear(&jerr);
        cJSON *sum = summary_json(rc == KB_OK, &stats);
        kb_ingest_stats_release(&stats);
        if (kb_cli_print_json(sum, &jerr) != KB_OK)
            return kb_cli_fail(&jerr);
    } else if (!cli->quiet && (rc == KB_OK || (rc == KB_ERR_PARTIAL &&
                                                stats.docs_changed + stats.docs_unchanged))) {
        fprintf(stderr, "ingested %zu source%s in %.1fs: %zu document%s changed, "
                "%zu unchanged, %zu removed, %zu failed; %zu chunk%s written\n",
                stats.sources, stats.sources == 1 ? "" : "s", stats.took_ms / 1000.0,
                stats.docs_changed, stats.docs_changed == 1 ? "" : "s",
                stats.docs_unchanged, stats.docs_removed, stats.docs_failed,
                stats.chunks_written, stats.chunks_written == 1 ? "" : "s");
    }
    kb_ingest_stats_release(&stats);
    /* exit 3 says some items failed and the rest succeeded: when nothing
     * could be read at all, the run failed */
    if (rc == KB_ERR_PARTIAL && stats.docs_changed + stats.docs_unchanged == 0) {
        kb_cli_errorf("nothing could be ingested; first failure: %s", err.msg);
        return 1;
    }
    if (rc == KB_ERR_PARTIAL) {
        /* each failure was reported above as it happened; quiet, once here */
        if (cli->quiet || ps.json || !(stats.sources_failed || stats.docs_failed))
            /* quiet, or a failure no line above told (the embedding pass) */
            kb_cli_errorf("some sources or documents failed; first: %s", err.msg);
        else
            kb_cli_errorf("%zu source%s and %zu document%s failed (above); the "
                    "rest was ingested", stats.sources_failed,
                    stats.sources_failed == 1 ? "" : "s", stats.docs_failed,
                    stats.docs_failed == 1 ? "" : "s");
        return kb_rc_exit_status(rc);
    }
    if (rc != KB_OK) {
        int status = kb_cli_fail(&err);
        if (rc == KB_ERR_NOTFOUND)
            suggest_source(cli, &opts, argv + g.ind, (size_t)(argc - g.ind));
        return status;
    }
    return 0;
}
