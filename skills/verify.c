/* verify.c - a skill verified through kb-verify (or a result of it
 * imported), and lint's checks that need kb-verify, the task model or
 * the KB. */
#include "skills/skill.h"
#include "verify/verify.h"
#include "kb/kb_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RESULTS_MAX_BYTES (64u << 20)

/* ISO 8601 UTC of t into buf[32]. */
static void iso_date(time_t t, char buf[32])
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static const char *skill_name(const kb_skill_entry *e)
{
    return e->skill.fields[KB_SKILL_NAME] ? e->skill.fields[KB_SKILL_NAME] : e->dir;
}

/* ------------------------------------------------------------------ imports */

/* The SHA-256 of the kernel a result verified: its own field when it has
 * one, else the candidate file it names (as given, then beside the
 * results file). 0 when it cannot be told. */
static int result_kernel_hash(const cJSON *r, const char *results_dir, char hex[65])
{
    const char *own = kb_skill_record_str(r, "kernel_sha256");
    if (!*own)
        own = kb_skill_record_str(r, "source_sha256");
    if (strlen(own) == 64) {
        memcpy(hex, own, 65);
        return 1;
    }
    const char *keys[] = { "candidate", "file" };
    for (size_t k = 0; k < 2; k++) {
        const char *p = kb_skill_record_str(r, keys[k]);
        if (!*p)
            continue;
        char *alt = p[0] == '/' ? NULL : kb_path_join(results_dir, p);
        kb_err e;
        kb_err_clear(&e);
        int ok = kb_sha256_file(p, hex, &e) == KB_OK ||
                 (alt && (kb_err_clear(&e), kb_sha256_file(alt, hex, &e) == KB_OK));
        free(alt);
        if (ok)
            return 1;
    }
    return 0;
}

/* The result in file for task and kernel (a copy: *out, caller frees), and
 * the file's modification time as the date of the verification. */
static kb_rc import_result(const char *file, const char *task, const char *kernel_sha,
                           cJSON **out, time_t *when, kb_err *err)
{
    *out = NULL;
    kb_buf text;
    kb_buf_init(&text, 0);
    kb_rc rc = kb_read_file(file, RESULTS_MAX_BYTES, &text, err);
    struct stat st;
    *when = rc == KB_OK && stat(file, &st) == 0 ? st.st_mtime : time(NULL);
    char *dir = kb_strdup(file);
    if (rc == KB_OK && !dir)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (dir) {
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        else
            dir[0] = '.', dir[1] = '\0';
    }
    size_t nread = 0, ntask = 0;
    /* one object, or JSON lines */
    cJSON *whole = rc == KB_OK ? cJSON_ParseWithOpts(text.data ? text.data : "", NULL, 1)
                               : NULL;
    char *save = NULL;
    char *line = whole ? NULL : rc == KB_OK && text.data ? strtok_r(text.data, "\n", &save) : NULL;
    for (cJSON *r = whole; rc == KB_OK && (r || line);) {
        cJSON *parsed = r ? NULL : cJSON_Parse(line);
        const cJSON *x = r ? r : parsed;
        char hex[65];
        if (x && *kb_skill_record_str(x, "verdict")) {
            nread++;
            if (strcmp(kb_skill_record_str(x, "task"), task) == 0) {
                ntask++;
                if (result_kernel_hash(x, dir, hex) && strcmp(hex, kernel_sha) == 0 &&
                    !(*out = cJSON_Duplicate(x, 1)))
                    rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            }
        }
        cJSON_Delete(parsed);
        if (*out || r)
            break;
        line = strtok_r(NULL, "\n", &save);
    }
    cJSON_Delete(whole);
    if (rc == KB_OK && !*out)
        rc = kb_err_set(err, KB_ERR_MISMATCH, "'%s' holds no kb-verify result for task "
                        "'%s' and this kernel.cu (sha256 %.12s...): %zu results read, "
                        "%zu for that task", file, task, kernel_sha, nread, ntask);
    free(dir);
    kb_buf_release(&text);
    return rc;
}

/* ------------------------------------------------------------------ verify */

/* kb-verify's result for e: run, or imported. *result is its JSON (caller
 * frees). */
static kb_rc get_result(const kb_skill_entry *e, const kb_skill_verify_opts *o,
                        const char *task_dir, const char *kernel, const char *sha,
                        cJSON **result, time_t *when, kb_err *err)
{
    const char *task = kb_skill_get(&e->skill, "kb-task");
    if (o->from_result)
        return import_result(o->from_result, task, sha, result, when, err);
    *when = time(NULL);
    kb_verify_result r;
    kb_verify_result_init(&r);
    kb_rc rc = kb_jobq_verify(o->verifier, task_dir, kernel, &r, err);
    if (rc == KB_OK && r.verdict == KB_VERIFY_ERROR)
        rc = kb_err_set(err, KB_ERR_GPU, "cannot verify '%s': %s; nothing changed",
                        skill_name(e), *r.reason ? r.reason : "kb-verify gave no verdict");
    if (rc == KB_OK) {
        *result = r.json;
        r.json = NULL;
    }
    kb_verify_result_release(&r);
    return rc;
}

/* The checks before anything runs: a skill that may be verified, its
 * task and kernel there. */
static kb_rc before_run(const kb_skill_entry *e, const char *tasks_dir, char **task_dir,
                        char **kernel, kb_err *err)
{
    const char *name = skill_name(e);
    const char *task = kb_skill_get(&e->skill, "kb-task");
    if (!e->ok)
        return kb_err_set(err, KB_ERR_PARSE, "'%s' does not parse: see 'kb skill lint %s'",
                          e->dir, e->dir);
    if (kb_skill_status_of(&e->skill) == KB_SKILL_RETIRED)
        return kb_err_set(err, KB_ERR_MISMATCH, "'%s' is retired: a retired skill is not "
                          "verified again (make its kernel a new skill with 'kb skill new "
                          "--from')", name);
    if (!task)
        return kb_err_set(err, KB_ERR_MISMATCH, "'%s' has no kb-task to verify against", name);
    *task_dir = kb_path_join(tasks_dir, task);
    *kernel = kb_path_join(e->dir, "kernel.cu");
    char *tj = *task_dir ? kb_path_join(*task_dir, "task.json") : NULL;
    kb_rc rc = KB_OK;
    if (!*task_dir || !*kernel || !tj)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    else if (access(tj, R_OK) != 0)
        rc = kb_err_set(err, KB_ERR_NOTFOUND, "'%s''s kb-task '%s' is no task: cannot open "
                        "'%s': %s", name, task, tj, strerror(errno));
    else if (!kb_skill_files_find(&e->files, "kernel.cu") || access(*kernel, R_OK) != 0)
        rc = kb_err_set(err, KB_ERR_NOTFOUND, "'%s' has no kernel to verify: cannot "
                        "read '%s'%s", name, *kernel, kb_skill_files_find(&e->files,
                        "kernel.cu") ? "" : " (missing, or a link out of the repository)");
    free(tj);
    return rc;
}

kb_rc kb_skill_verify(kb_skill_entry *e, const kb_skill_verify_opts *o, kb_buf *what,
                          kb_buf *verdict, kb_err *err)
{
    char *task_dir = NULL, *kernel = NULL;
    cJSON *result = NULL, *shapes = NULL, *rec = NULL;
    kb_task *task = NULL;
    char sha[65];
    time_t when = 0;
    kb_rc rc = before_run(e, o->tasks_dir, &task_dir, &kernel, err);
    if (rc == KB_OK)
        rc = kb_sha256_file(kernel, sha, err);
    if (rc == KB_OK)
        rc = kb_task_load(task_dir, &task, err);
    if (rc == KB_OK && !(shapes = kb_task_shapes_json(task)))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK)
        rc = get_result(e, o, task_dir, kernel, sha, &result, &when, err);
    if (rc != KB_OK)
        goto out;
    char date[32];
    iso_date(when, date);
    kb_buf how;
    kb_buf_init(&how, 0);
    if (o->from_result) {
        const char *base = strrchr(o->from_result, '/');
        rc = kb_buf_printf(&how, "kb-verify, imported from '%s'", base ? base + 1
                                                                       : o->from_result);
    } else {
        rc = kb_buf_puts(&how, "kb-verify");
    }
    kb_skill_record_in in = { .result = result, .device = o->device, .shapes = shapes,
                              .kernel_sha256 = sha, .how = how.data, .date = date };
    if (rc != KB_OK)
        rc = kb_err_set(err, rc, "out of memory");
    else
        rc = kb_skill_record_make(&in, &rec, err);
    kb_buf_release(&how);
    if (rc == KB_OK && verdict)
        rc = kb_buf_puts(verdict, kb_skill_record_str(rec, "verdict"));
    /* well above the library's best for the task: flagged for review */
    int review = rc == KB_OK ? kb_skill_record_review(rec, kb_skill_lib_best_speedup(
        o->lib, kb_skill_record_str(rec, "task"), kb_skill_record_str(
            cJSON_GetObjectItemCaseSensitive(rec, "device"), "arch"), sha)) : 0;
    if (review < 0)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    char why[256] = "";
    if (review > 0)
        snprintf(why, sizeof why, "%s", kb_skill_record_str(rec, "review"));
    if (rc == KB_OK) {
        rc = kb_skill_apply_record(&e->skill, &e->evidence, rec, sha, what, err);
        rec = NULL;     /* taken */
    }
    if (rc == KB_OK && review > 0)
        rc = kb_buf_printf(what, "; review: %s", why);
    /* both files in one step: a kill leaves the skill before or after */
    if (rc == KB_OK)
        rc = kb_skill_commit(e, err);
    if (rc == KB_OK)
        memcpy(e->kernel_sha256, sha, sizeof sha);
out:
    cJSON_Delete(rec);
    cJSON_Delete(result);
    cJSON_Delete(shapes);
    kb_task_free(task);
    free(task_dir);
    free(kernel);
    return rc;
}

/* ------------------------------------------------------------------ lint */

kb_rc kb_skill_check_task(const kb_skill_entry *e, const char *tasks_dir,
                              kb_skill_diags *d)
{
    const char *task = kb_skill_get(&e->skill, "kb-task");
    if (!e->ok || !task)
        return KB_OK;
    char *dir = kb_path_join(tasks_dir, task);
    if (!dir)
        return KB_ERR_NOMEM;
    kb_task *t = NULL;
    kb_err err;
    kb_err_clear(&err);
    kb_rc rc = KB_OK;
    int line = 0;
    for (size_t i = 0; i < e->skill.nmeta; i++)
        if (strcmp(e->skill.meta[i].key, "kb-task") == 0)
            line = e->skill.meta[i].line;
    if (kb_task_load(dir, &t, &err) != KB_OK)
        rc = kb_skill_diag_add(d, e->skill.path, line, KB_SKILL_ERROR, "task",
                               "kb-task '%s' is no task of '%s': %s", task, tasks_dir,
                               err.msg);
    kb_task_free(t);
    free(dir);
    return rc;
}

/* The first lines of a compiler log, for a finding. */
static kb_rc log_head(kb_buf *b, const char *log)
{
    kb_rc rc = KB_OK;
    int lines = 0;
    for (const char *p = log; *p && lines < 3 && rc == KB_OK; lines++) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        rc = kb_buf_printf(b, "%s%.*s", lines ? " | " : ": ", (int)n, p);
        p = nl ? nl + 1 : p + n;
    }
    return rc;
}

kb_rc kb_skill_check_compile(const kb_skill_entry *e, const char *tasks_dir,
                                 kb_verifier *v, kb_skill_diags *d, kb_err *err)
{
    const char *task = kb_skill_get(&e->skill, "kb-task");
    if (!e->ok || !task)
        return KB_OK;
    if (access(kb_verifier_path(v), X_OK) != 0)
        return kb_err_set(err, KB_ERR_NOTFOUND, "kb-verify '%s' is not there",
                          kb_verifier_path(v));
    char *dir = kb_path_join(tasks_dir, task);
    kb_rc rc = dir ? KB_OK : KB_ERR_NOMEM;
    static const char *const files[] = { "kernel.cu", "baseline.cu" };
    for (size_t f = 0; f < 2 && rc == KB_OK; f++) {
        char *src = kb_path_join(e->dir, files[f]);
        char *tj = kb_path_join(dir, "task.json");
        if (!src || !tj)
            rc = KB_ERR_NOMEM;
        if (rc != KB_OK || !kb_skill_files_find(&e->files, files[f]) ||
            access(src, R_OK) != 0 || access(tj, R_OK) != 0) {
            free(src);
            free(tj);
            continue;
        }
        kb_verify_result r;
        kb_verify_result_init(&r);
        kb_err rerr;
        kb_err_clear(&rerr);
        rc = kb_jobq_verify(v, dir, src, &r, &rerr);
        kb_buf msg;
        kb_buf_init(&msg, 0);
        if (rc == KB_OK && r.verdict != KB_VERIFY_COMPILED) {
            rc = kb_buf_printf(&msg, "%s does not compile for task '%s' (kb-verify "
                               "--compile-only: %s)", files[f], task, r.verdict_name);
            if (rc == KB_OK && *r.reason)
                rc = kb_buf_printf(&msg, ": %s", r.reason);
            if (rc == KB_OK && r.verdict == KB_VERIFY_COMPILE_ERROR)
                rc = log_head(&msg, r.compile.log);
            if (rc == KB_OK)
                rc = kb_skill_diag_add(d, src, 0, KB_SKILL_ERROR, "compile", "%s", msg.data);
        }
        kb_buf_release(&msg);
        kb_verify_result_release(&r);
        free(src);
        free(tj);
    }
    free(dir);
    if (rc != KB_OK)
        return kb_err_set(err, rc, "out of memory");
    return KB_OK;
}

/* The http(s) links of the body (Markdown inline links and autolinks, bare
 * URLs) with their lines; code spans and fenced code are not looked at. */
typedef struct {
    char **urls;
    int *lines;
    size_t n, cap, capl;
} link_list;

static void links_release(link_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->urls[i]);
    free(l->urls);
    free(l->lines);
}

static kb_rc links_add(link_list *l, const char *p, size_t n, int line)
{
    /* trailing punctuation of the sentence is not the URL's */
    while (n && strchr(".,;:!?'\"", p[n - 1]))
        n--;
    if (KB_GROW(l->urls, l->n + 1, l->cap) != KB_OK ||
        KB_GROW(l->lines, l->n + 1, l->capl) != KB_OK)
        return KB_ERR_NOMEM;
    if (!(l->urls[l->n] = kb_strndup(p, n)))
        return KB_ERR_NOMEM;
    l->lines[l->n++] = line;
    return KB_OK;
}

static kb_rc find_links(const kb_skill *s, link_list *l)
{
    const char *b = s->body ? s->body : "";
    int line = s->body_line, fenced = 0, code = 0;
    kb_rc rc = KB_OK;
    for (const char *p = b; *p && rc == KB_OK; p++) {
        if (p == b || p[-1] == '\n') {
            const char *q = p;
            while (*q == ' ')
                q++;
            if (strncmp(q, "```", 3) == 0 || strncmp(q, "~~~", 3) == 0)
                fenced = !fenced;
        }
        if (*p == '\n') {
            line++;
            code = 0;
            continue;
        }
        if (fenced)
            continue;
        if (*p == '`') {
            code = !code;
            continue;
        }
        if (code || (strncmp(p, "https://", 8) != 0 && strncmp(p, "http://", 7) != 0))
            continue;
        size_t n = strcspn(p, " \t\n)>]`");
        rc = links_add(l, p, n, line);
        p += n - 1;
    }
    return rc;
}

kb_rc kb_skill_check_links(const kb_skill_entry *e, kb_store *store,
                               kb_skill_diags *d, kb_err *err)
{
    if (!e->ok)
        return KB_OK;
    link_list l = { 0 };
    kb_rc rc = find_links(&e->skill, &l);
    if (rc != KB_OK)
        rc = kb_err_set(err, rc, "out of memory");
    for (size_t i = 0; i < l.n && rc == KB_OK; i++) {
        /* the document, and with #anchor a section of it with that anchor */
        const char *url = l.urls[i], *hash = strchr(url, '#');
        int doc = 0, section = 0;
        rc = kb_store_link_lookup(store, url, hash ? (size_t)(hash - url) : strlen(url),
                                  hash ? hash + 1 : NULL, &doc, &section, err);
        if (rc == KB_OK && !section && (hash || doc))
            rc = kb_skill_diag_add(d, e->skill.path, l.lines[i], KB_SKILL_ERROR, "links",
                                   doc ? "link '%s': the KB has the document but no "
                                         "section with that anchor"
                                       : "link '%s' resolves to no chunk of the KB",
                                   url);
    }
    links_release(&l);
    return rc;
}
