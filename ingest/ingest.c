/* ingest.c - the ingest driver: the targets checked, one job per source
 * or target planned (docs.c lists its documents), each document through
 * write.c (parse, chunk, store: one transaction per document, incremental
 * by content hash), then the vectors and the skills' near-duplicates. */
#include "ingest/ingest_int.h"
#include "kb/kb_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const char *id;
    const char *format;
    kb_doclist docs;
    int prune;          /* remove documents that are gone (manifest sources) */
    char *prune_under;  /* an ad-hoc folder: remove the documents under it
                           that are gone (owned) */
    const char *title;  /* a source that is one page: its documents' title
                           (a Sphinx page's <title> is its first section's) */
} ingest_job;

static kb_rc run_job(kb_store *store, const kb_ingest_opts *opts,
                     ingest_job *job, kb_ingest_progress *pr,
                     const kb_tokenizer *tok, kb_ingest_stats *stats,
                     kb_err *err)
{
    double t0 = kb_now_ms();
    char **seen = calloc(job->docs.n + 1, sizeof *seen);
    if (!seen)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    size_t nseen = 0;
    kb_rc result = KB_OK;
    pr->docs_total = job->docs.n;
    if (job->docs.failed) {   /* folders not read: nothing under them goes */
        pr->failed += job->docs.failed;
        kb_err_set(err, job->docs.first.rc, "%s", job->docs.first.msg);
        result = KB_ERR_PARTIAL;
    }
    for (size_t i = 0; i < job->docs.n; i++) {
        const kb_docref *ref = &job->docs.items[i];
        kb_err derr;
        kb_err_clear(&derr);
        int changed = 0;
        size_t nchunks = 0;
        kb_rc rc = kb_ingest_document(store, opts, job->id, job->format, job->title,
                                      ref, tok, &changed, &nchunks, &derr);
        if (rc == KB_OK) {
            seen[nseen++] = ref->key;
            if (changed) {
                pr->changed++;
                pr->chunks += nchunks;
            } else {
                pr->unchanged++;
            }
        } else {
            /* nothing lost: the document keeps its previous version */
            seen[nseen++] = ref->key;
            pr->failed++;
            kb_log_warn("%s: %s", job->id, derr.msg);
            kb_err_set(err, rc, "%s", derr.msg);
            result = KB_ERR_PARTIAL;
            if (rc == KB_ERR_DB || rc == KB_ERR_NOMEM) {
                /* the store itself is failing: stop this source */
                result = rc;
                pr->docs_done = i + 1;
                break;
            }
        }
        pr->docs_done = i + 1;
        pr->elapsed_ms = kb_now_ms() - t0;
        if (opts->progress)
            opts->progress(pr, opts->progress_ctx);
    }
    /* Only a source read in full says which documents are gone: after a
     * failure (a fetch that did not answer, where the KB holds the same
     * source read from a mirror under other keys) nothing is removed. */
    if ((job->prune || job->prune_under) && result == KB_OK) {
        qsort(seen, nseen, sizeof *seen, kb_cmp_str);
        kb_err rerr;
        kb_err_clear(&rerr);
        if (kb_ingest_remove_gone(store, job->id, job->prune_under, seen, nseen,
                                  &pr->removed, &rerr) != KB_OK) {
            kb_err_set(err, rerr.rc, "%s", rerr.msg);
            result = KB_ERR_PARTIAL;
        }
    }
    free(seen);
    stats->docs_changed += pr->changed;
    stats->docs_unchanged += pr->unchanged;
    stats->docs_removed += pr->removed;
    stats->docs_failed += pr->failed;
    stats->chunks_written += pr->chunks;
    return result;
}

/* One kb_ingest_run: what its steps share. */
typedef struct {
    kb_store *store;
    const kb_ingest_opts *opts;
    kb_ingest_stats *stats;
    const char *mirror;      /* the mirror's root, or NULL */
    char *manifest_path;
    kb_manifest manifest;    /* loaded when a target needs it */
    int need_manifest;
    int from_manifest;       /* some job is a source of the manifest */
    ingest_job *jobs;        /* one per source or target */
    size_t njobs, nplanned;  /* jobs made so far, jobs the run will have */
    kb_tokenizer *tok;       /* NULL: chunk sizes estimated */
    kb_err first;            /* the first source's failure, for KB_ERR_PARTIAL */
} ingest_run;

/* --source names where ad-hoc files go: never a source of the manifest,
 * whose next pass would delete them as gone from its mirror or URL. */
static kb_rc check_adhoc_source(ingest_run *r, kb_err *err)
{
    const char *id = r->opts->adhoc_source;
    if (!id)
        return KB_OK;
    if (!*id || strchr(id, '/'))
        return kb_err_set(err, KB_ERR_USAGE, "--source wants an id for the ad-hoc "
                          "files and URLs (my-notes), not '%s'", id);
    int in_manifest = 0;
    if (r->need_manifest) {
        in_manifest = kb_manifest_find(&r->manifest, id) != NULL;
    } else {
        kb_manifest m;
        kb_err merr;
        kb_err_clear(&merr);
        if (kb_manifest_load(r->manifest_path, &m, &merr) == KB_OK) {
            in_manifest = kb_manifest_find(&m, id) != NULL;
            kb_manifest_release(&m);
        }
    }
    /* or one the KB holds from a manifest (it has a URL of its own) */
    sqlite3_stmt *st = NULL;
    kb_rc rc = kb_store_prepare(r->store, "SELECT 1 FROM sources WHERE id = ? AND"
                                " url != ''", &st, err);
    if (rc != KB_OK)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    in_manifest |= sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    if (in_manifest)
        return kb_err_set(err, KB_ERR_USAGE, "--source '%s' is a source of the "
                          "manifest: its next ingest would remove files added to it; "
                          "give ad-hoc files an id of their own (--source my-notes)", id);
    return KB_OK;
}

/* Every target must make sense before anything is written: a manifest
 * source (the manifest is loaded when some target is not a file or a URL,
 * or when there are none), a file or folder, or a URL. A bare name that
 * is a source id is that source even where a file of that name is in the
 * working directory (`kb ingest skills` in kb's own tree): that file is
 * ./name. */
static kb_rc check_targets(ingest_run *r, char *const *targets, size_t ntargets,
                           kb_err *err)
{
    r->need_manifest = ntargets == 0;
    int bare = 0;
    for (size_t i = 0; i < ntargets; i++) {
        struct stat st;
        if (!kb_ingest_is_url(targets[i]) && stat(targets[i], &st) != 0)
            r->need_manifest = 1;
        else if (!kb_ingest_is_url(targets[i]) && !strchr(targets[i], '/'))
            bare = 1;
    }
    kb_rc rc;
    struct stat mst;
    if (r->need_manifest && ntargets > 0 && stat(r->manifest_path, &mst) != 0 &&
        errno == ENOENT) {
        /* outside a tree with a manifest: the target itself is what is missing */
        for (size_t i = 0; i < ntargets; i++) {
            struct stat st;
            if (!kb_ingest_is_url(targets[i]) && stat(targets[i], &st) != 0)
                return kb_err_set(err, KB_ERR_NOTFOUND, "cannot find '%s': %s (and "
                                  "there is no manifest '%s' here to name a source)",
                                  targets[i], strerror(errno), r->manifest_path);
        }
    }
    if (r->need_manifest &&
        (rc = kb_manifest_load(r->manifest_path, &r->manifest, err)) != KB_OK)
        return rc;
    if (!r->need_manifest && bare) {
        /* only to tell ids from files: no manifest is no error here */
        kb_err lerr;
        kb_err_clear(&lerr);
        r->need_manifest = kb_manifest_load(r->manifest_path, &r->manifest, &lerr) == KB_OK;
    }
    for (size_t i = 0; i < ntargets; i++) {
        const char *t = targets[i];
        struct stat st;
        if (!(r->need_manifest && kb_manifest_find(&r->manifest, t)) &&
            !kb_ingest_is_url(t) && stat(t, &st) != 0)
            return kb_err_set(err, KB_ERR_NOTFOUND,
                              "'%s' is neither a source in '%s', a file, nor a URL",
                              t, r->manifest_path);
    }
    return check_adhoc_source(r, err);
}

/* The job of a manifest source: its documents listed from the mirror or
 * its URL. A source that cannot be listed fails alone (recorded, reported
 * through progress, job->id left NULL); the others proceed. */
static kb_rc plan_source(ingest_run *r, const kb_source *src, ingest_job *job,
                         kb_err *err)
{
    job->id = src->id;
    job->format = src->format;
    job->prune = 1;
    size_t m0 = src->nmirror ? strlen(src->mirror[0]) : 0;
    if (src->nmirror <= 1 && (!m0 || src->mirror[0][m0 - 1] != '/'))
        job->title = src->title;
    kb_rc rc = kb_ingest_source_record(r->store, src->id, src->title, src->url,
                                       src->format, src->version, err);
    if (rc != KB_OK)
        return rc;
    kb_err lerr;
    kb_err_clear(&lerr);
    if (kb_doclist_source(src, r->manifest_path, r->mirror, &job->docs, &lerr) == KB_OK)
        return KB_OK;
    job->format = NULL;
    if (!r->opts->progress)   /* else progress says it, once */
        kb_log_warn("%s: %s", src->id, lerr.msg);
    if ((rc = kb_ingest_source_finish(r->store, src->id, lerr.msg, err)) != KB_OK)
        return rc;
    kb_err_set(&r->first, lerr.rc, "%s", lerr.msg);
    r->stats->sources_failed++;
    if (r->opts->progress) {
        kb_ingest_progress pr = { .source = src->id, .source_index = r->njobs - 1,
                                  .nsources = r->nplanned, .finished = 1,
                                  .error = lerr.msg };
        r->opts->progress(&pr, r->opts->progress_ctx);
    }
    job->id = NULL;
    return KB_OK;
}

/* The job of a URL or a local file or folder, under the ad-hoc source
 * (--source) or "web" / "local". */
static kb_rc plan_target(ingest_run *r, const char *t, ingest_job *job, kb_err *err)
{
    const char *adhoc = r->opts->adhoc_source;
    struct stat st;
    kb_rc rc;
    job->format = "";
    if (kb_ingest_is_url(t)) {
        job->id = adhoc ? adhoc : "web";
        rc = kb_ingest_source_record(r->store, job->id, "Ad-hoc URLs", "", "", "", err);
        if (rc == KB_OK)
            rc = kb_doclist_add(&job->docs, t, NULL, "", t, err);
        return rc;
    }
    if (stat(t, &st) != 0)   /* gone since it was checked */
        return kb_err_set(err, KB_ERR_IO, "cannot read '%s': %s", t, strerror(errno));
    /* one document per file, however it is spelt (notes.md, ./notes.md,
     * its absolute path, through a link): the key is its real path */
    char *canon = realpath(t, NULL);
    if (!canon)
        return kb_err_set(err, errno == ENOMEM ? KB_ERR_NOMEM : KB_ERR_IO,
                          "cannot resolve '%s': %s", t, strerror(errno));
    job->id = adhoc ? adhoc : "local";
    rc = kb_ingest_source_record(r->store, job->id, "Local files", "", "", "", err);
    char *url = kb_ingest_file_url(canon);
    if (rc == KB_OK && !url)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK && S_ISDIR(st.st_mode)) {
        rc = kb_doclist_tree(canon, &st, canon, "", url, &job->docs, err);
        job->prune_under = canon;   /* a folder read again: what is gone goes */
        canon = NULL;
    } else if (rc == KB_OK) {
        rc = kb_doclist_add(&job->docs, canon, canon, canon, url, err);
    }
    free(url);
    free(canon);
    return rc;
}

/* One job per target, or per manifest source when there are no targets. */
static kb_rc plan_jobs(ingest_run *r, char *const *targets, size_t ntargets,
                       kb_err *err)
{
    r->nplanned = ntargets ? ntargets : r->manifest.n;
    r->jobs = calloc(r->nplanned ? r->nplanned : 1, sizeof *r->jobs);
    if (!r->jobs)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_rc rc = KB_OK;
    for (size_t i = 0; i < r->nplanned && rc == KB_OK; i++) {
        const char *t = ntargets ? targets[i] : r->manifest.sources[i].id;
        const kb_source *src = r->need_manifest ? kb_manifest_find(&r->manifest, t)
                                                : NULL;
        ingest_job *job = &r->jobs[r->njobs++];   /* released with the run */
        r->from_manifest |= src != NULL;
        rc = src ? plan_source(r, src, job, err) : plan_target(r, t, job, err);
    }
    return rc;
}

/* The embedder's tokenizer (from the model in mdir) into *tok, so chunks
 * are sized in its word pieces; NULL (sizes estimated) when its
 * vocabulary is not installed. A vocabulary that is there but not the
 * model's own is an error: it would size every chunk wrongly. */
static kb_rc open_chunk_tokenizer(const char *mdir, kb_tokenizer **tok, kb_err *err)
{
    *tok = NULL;
    char *vocab = mdir && *mdir ? kb_path_join(mdir, "vocab.txt") : NULL;
    int there = vocab && access(vocab, F_OK) == 0;
    free(vocab);
    if (!there) {
        kb_log_debug("chunk sizes estimated: no vocabulary in '%s'", mdir ? mdir : "");
        return KB_OK;
    }
    return kb_tokenizer_open_model(mdir, tok, err);
}

/* The manifest the KB is built from, kept in its meta ("manifest", a
 * whole path) for kb_store_data_find: a command run from another folder
 * finds the tasks and skills beside it. */
static kb_rc record_manifest(ingest_run *r, kb_err *err)
{
    if (!r->from_manifest || !r->manifest_path)
        return KB_OK;
    char *real = realpath(r->manifest_path, NULL);
    kb_rc rc = real ? kb_store_meta_set(r->store, "manifest", real, err) : KB_OK;
    free(real);
    return rc;
}

/* Runs every job that was planned, recording each source's pass. A failing
 * source is counted and the rest proceed, unless the store itself fails. */
static kb_rc run_jobs(ingest_run *r, kb_err *err)
{
    for (size_t j = 0; j < r->njobs; j++) {
        ingest_job *job = &r->jobs[j];
        if (!job->id)
            continue;
        r->stats->sources++;
        kb_ingest_progress pr = { .source = job->id, .source_index = j,
                                  .nsources = r->njobs };
        /* each source records its own first failure; the run reports the
         * first of all */
        kb_err jerr;
        kb_err_clear(&jerr);
        kb_rc jrc = run_job(r->store, r->opts, job, &pr, r->tok, r->stats, &jerr);
        if (jrc != KB_OK) {
            r->stats->sources_failed++;
            kb_err_set(&r->first, jerr.rc != KB_OK ? jerr.rc : jrc, "%s", jerr.msg);
        }
        kb_rc rc = kb_ingest_source_finish(r->store, job->id,
                                           jrc == KB_OK ? NULL : jerr.msg, err);
        if (rc != KB_OK)
            return rc;
        pr.finished = 1;
        pr.error = jrc == KB_OK ? NULL : jerr.msg;
        if (r->opts->progress)
            r->opts->progress(&pr, r->opts->progress_ctx);
        if (jrc == KB_ERR_DB || jrc == KB_ERR_NOMEM)
            return kb_err_set(err, jrc, "%s", jerr.msg);
    }
    return KB_OK;
}

/* Vectors for every chunk that has none: new and changed documents, and
 * whatever an interrupted pass left (all of them again with reembed). */
static kb_rc embed_pending(ingest_run *r, kb_embedder *emb, kb_err *err)
{
    const kb_ingest_opts *opts = r->opts;
    kb_rc rc = KB_OK;
    if (opts->reembed)
        rc = kb_vec_clear(r->store, err);
    if (rc == KB_OK)
        rc = kb_vec_embed_pending(r->store, emb, opts->progress, opts->progress_ctx,
                                  &r->stats->chunks_embedded, err);
    return rc;
}

/* The near-duplicate skills among the SKILL.md files this run read
 * (changed or not), into the run's stats; by their texts too when the
 * run embeds (emb). */
static kb_rc flag_skill_dups(ingest_run *r, kb_embedder *emb, kb_err *err)
{
    kb_skill_ref *refs = NULL;
    size_t n = 0, cap = 0;
    kb_rc rc = KB_OK;
    for (size_t j = 0; j < r->njobs && rc == KB_OK; j++) {
        const ingest_job *job = &r->jobs[j];
        for (size_t i = 0; job->id && i < job->docs.n && rc == KB_OK; i++) {
            const kb_docref *d = &job->docs.items[i];
            if (!d->file || strcmp(kb_ingest_basename(d->file), "SKILL.md") != 0)
                continue;
            if (KB_GROW(refs, n + 1, cap) != KB_OK) {
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
                break;
            }
            refs[n++] = (kb_skill_ref){ .source = job->id, .key = d->key,
                                        .file = d->file, .path = d->path };
        }
    }
    if (rc == KB_OK)
        rc = kb_ingest_skill_dups(emb, refs, n, r->stats, err);
    free(refs);
    return rc;
}

void kb_ingest_stats_release(kb_ingest_stats *stats)
{
    for (size_t i = 0; i < stats->ndups; i++) {
        free(stats->dups[i].a);
        free(stats->dups[i].b);
        free(stats->dups[i].path_a);
        free(stats->dups[i].path_b);
    }
    free(stats->dups);
    stats->dups = NULL;
    stats->ndups = 0;
}

kb_rc kb_ingest_run(kb_store *store, const kb_ingest_opts *opts,
                    char *const *targets, size_t ntargets,
                    kb_ingest_stats *stats, kb_err *err)
{
    memset(stats, 0, sizeof *stats);
    double t0 = kb_now_ms();
    ingest_run r = { .store = store, .opts = opts, .stats = stats };
    kb_err_clear(&r.first);
    if (!opts->config) {
        stats->took_ms = kb_now_ms() - t0;
        return kb_err_set(err, KB_ERR_USAGE, "ingest needs a configuration");
    }
    r.manifest_path = opts->manifest_path ? kb_strdup(opts->manifest_path)
                                          : kb_manifest_path(opts->config, kb_store_dir(store));
    r.mirror = opts->mirror_dir;
    if (r.mirror && !*r.mirror)
        r.mirror = NULL;

    int lock = -1, embed_failed = 0;
    char **tv = calloc(ntargets ? ntargets : 1, sizeof *tv);
    kb_rc rc = tv ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < ntargets && rc == KB_OK; i++)
        rc = kb_ingest_target(targets[i], &tv[i], err);
    targets = tv;
    if (rc == KB_OK)
        rc = check_targets(&r, targets, ntargets, err);
    if (rc == KB_OK)
        rc = kb_ingest_lock(store, &lock, err);
    if (rc == KB_OK)
        rc = open_chunk_tokenizer(opts->config->model_dir, &r.tok, err);
    /* the embedder first: a missing model is a clear error before anything
     * is written, not documents stored without their vectors */
    kb_embedder *emb = NULL;
    if (rc == KB_OK && (opts->embed || opts->reembed))
        rc = kb_embedder_open_config(opts->config, &emb, err);
    /* a factory string FAISS cannot read is refused before anything is
     * stored, not saved for every later query to fail on */
    if (rc == KB_OK && opts->index_kind)
        rc = kb_vec_check_index_kind(opts->index_kind, emb ? kb_embedder_dim(emb) : 0, err);
    if (rc == KB_OK)
        rc = plan_jobs(&r, targets, ntargets, err);
    if (rc == KB_OK)
        rc = run_jobs(&r, err);
    if (rc == KB_OK)
        rc = record_manifest(&r, err);
    if (rc == KB_OK && (opts->embed || opts->reembed)) {
        kb_err eerr;
        kb_err_clear(&eerr);
        rc = embed_pending(&r, emb, &eerr);
        /* documents stored, their vectors not: some of the work stands */
        if (rc != KB_OK && stats->docs_changed > 0) {
            kb_err_set(&r.first, rc, "the documents were stored but not embedded:"
                       " %s; run 'kb ingest' again to embed them", eerr.msg);
            embed_failed = 1;
            rc = KB_OK;
        } else if (rc != KB_OK) {
            kb_err_set(err, rc, "%s", eerr.msg);
        }
    }
    /* the new kind of index last, over every vector: one that cannot be
     * built leaves the KB's index and setting as they were */
    if (rc == KB_OK && opts->index_kind && !embed_failed)
        rc = kb_vec_set_index_kind(store, opts->index_kind, err);
    if (rc == KB_OK)
        rc = flag_skill_dups(&r, embed_failed ? NULL : emb, err);
    if (rc == KB_OK && (stats->sources_failed || stats->docs_failed || embed_failed)) {
        rc = KB_ERR_PARTIAL;
        kb_err_set(err, r.first.rc, "%s", r.first.msg);
    }
    stats->took_ms = kb_now_ms() - t0;
    for (size_t j = 0; j < r.njobs; j++) {
        kb_doclist_release(&r.jobs[j].docs);
        free(r.jobs[j].prune_under);
    }
    free(r.jobs);
    kb_tokenizer_free(r.tok);
    kb_manifest_release(&r.manifest);
    free(r.manifest_path);
    kb_embedder_free(emb);
    if (lock >= 0)
        close(lock);
    for (size_t i = 0; tv && i < ntargets; i++)
        free(tv[i]);
    free(tv);
    return rc;
}
