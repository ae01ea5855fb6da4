/* writeback.c - a kernel the loop verified faster, written back as a
 * draft skill through the skill library (kernel.cu, evidence.json from
 * its verification, a SKILL.md whose text the LLM drafted and whose
 * citations are its prompt's passages), indexed at once; and the credit
 * the runs give the skills their prompts carried (gen.h, "writeback.c"). */
#include "generator/gen.h"
#include "verify/verify.h"
#include "index/index.h"
#include "skills/skill.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SUMMARY_MAX_BYTES (64u << 20)
#define NAME_PART_MAX 40

/* ------------------------------------------------------------------ citations */

/* The task's reference kernel (task_dir/reference.cu), or NULL: what a
 * passage that helped names beyond. Caller frees. */
static char *read_reference(const kb_gen_writeback *w)
{
    char *path = w->task_dir ? kb_path_join(w->task_dir, "reference.cu") : NULL;
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_err quiet;
    kb_err_clear(&quiet);
    kb_rc rc = path ? kb_read_file(path, 0, &b, &quiet) : KB_ERR_NOMEM;
    free(path);
    return kb_buf_finish(&b, rc);
}

/* 1 if cite i is the first of its document and heading among w's cites
 * (an exemplar and its skill's text may share a file, a passage may come
 * twice). */
static int first_of_its_kind(const kb_gen_writeback *w, size_t i)
{
    const kb_gen_cite *c = &w->cites[i];
    for (size_t k = 0; k < i; k++) {
        const kb_gen_cite *o = &w->cites[k];
        if (o->url && c->url && !strcmp(o->url, c->url) &&
            !strcmp(o->heading ? o->heading : "", c->heading ? c->heading : ""))
            return 0;
    }
    return 1;
}

/* 1 if cite c helped the kernel: it is the skill refined, its passage
 * names what the kernel does beyond the reference, or the write-up (when
 * given) links it. */
static int helped(const kb_gen_writeback *w, const kb_gen_cite *c, const char *ref,
                  const char *const *sections)
{
    if (w->parent && c->skill && !strcmp(c->skill, w->parent))
        return 1;
    if (kb_gen_cite_helped(c, w->source, ref))
        return 1;
    char *link = sections ? kb_gen_cite_link(c) : NULL;
    int linked = 0;
    for (int i = 0; link && i < 3 && !linked; i++)
        linked = sections[i] && strstr(sections[i], link);
    free(link);
    return linked;
}

/* One citation as a list item: "- [title: heading](link)", or for a local
 * file that is no skill's "- title: heading (source `s`, `path`)". */
static kb_rc put_cite(kb_buf *b, const kb_gen_cite *c, int markdown)
{
    const char *title = c->title && *c->title ? c->title : c->source ? c->source : "source";
    const char *sep = c->heading && *c->heading ? (markdown ? ": " : " > ") : "";
    const char *heading = c->heading ? c->heading : "";
    char *link = kb_gen_cite_link(c);
    kb_rc rc;
    if (link && markdown)
        rc = kb_buf_printf(b, "- [%s%s%s](%s)\n", title, sep, heading, link);
    else if (link)
        rc = kb_buf_printf(b, "- %s%s%s: %s\n", title, sep, heading, link);
    else
        rc = kb_buf_printf(b, "- %s%s%s (source `%s`%s%s%s)\n", title, sep, heading,
                           c->source ? c->source : "?", *kb_gen_cite_where(c) ? ", `" : "",
                           kb_gen_cite_where(c), *kb_gen_cite_where(c) ? "`" : "");
    free(link);
    return rc;
}

/* ------------------------------------------------------------------ request */

kb_rc kb_gen_writeup_request(const kb_gen_writeback *w, kb_buf *system, kb_buf *user)
{
    const kb_verify_result *r = w->result;
    kb_rc rc = kb_buf_puts(system,
        "You document GPU kernels for a team's library of kernel skills. A skill "
        "card names one technique, says when it pays and how it works, and cites "
        "the documentation it rests on. Answer in exactly the format asked for, in "
        "plain Markdown, with no code blocks.");
    const char *task = r->task && *r->task ? r->task : "the task";
    if (rc == KB_OK)
        rc = kb_buf_printf(user, "This kernel for the task '%s' was verified by kb-verify: "
                           "%s, %.2fx its baseline (geomean).\n\n", task, r->verdict_name,
                           r->has_speedup ? r->speedup_geomean : 0.0);
    if (rc == KB_OK && r->json) {
        rc = kb_buf_puts(user, "The verification:\n");
        if (rc == KB_OK)
            rc = kb_verify_result_text(r->json, user);
        if (rc == KB_OK)
            rc = kb_buf_putc(user, '\n');
    }
    if (rc == KB_OK)
        rc = kb_buf_printf(user, "The kernel:\n```cuda\n%s%s```\n\n", w->source,
                           *w->source && w->source[strlen(w->source) - 1] == '\n' ? "" : "\n");
    /* the passages its kernel draws on, by links fit for a skill */
    char *ref = read_reference(w);
    int any = 0;
    for (size_t i = 0; rc == KB_OK && i < w->ncites; i++) {
        const kb_gen_cite *c = &w->cites[i];
        if (!c->url || !*c->url || !first_of_its_kind(w, i) || !helped(w, c, ref, NULL))
            continue;
        if (!any++)
            rc = kb_buf_puts(user, "Passages of its prompt that it draws on (cite those "
                             "the technique rests on, by their link):\n");
        if (rc == KB_OK)
            rc = put_cite(user, c, 0);
    }
    free(ref);
    if (rc == KB_OK)
        rc = kb_buf_puts(user,
            "\nWrite the skill card of the technique this kernel uses, in this format:\n"
            "NAME: a short kebab-case name of the technique (a-z, 0-9 and '-', at most "
            "40 characters), without the task's name\n"
            "DESCRIPTION: one sentence: what the technique does and when to use it, the "
            "key use first (no '<' or '>')\n"
            "## When to apply\n(the bottleneck that calls for it, and the shapes)\n"
            "## Technique\n(what the kernel does, step by step, citing the passages above "
            "as Markdown links)\n"
            "## Pitfalls\n(what goes wrong: correctness, occupancy, shapes that are no "
            "multiple of the tile)\n");
    return rc;
}

/* ------------------------------------------------------------------ the write-up */

typedef struct {
    char *name, *description;
    char *sections[3];         /* When to apply, Technique, Pitfalls */
} writeup;

static const char *const section_titles[3] = { "When to apply", "Technique", "Pitfalls" };

static void writeup_release(writeup *u)
{
    free(u->name);
    free(u->description);
    for (int i = 0; i < 3; i++)
        free(u->sections[i]);
    memset(u, 0, sizeof *u);
}

/* The value of a "KEY:" line (markup like **NAME:** tolerated), or NULL. */
static char *field(const char *text, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        const char *q = p, *end = p + len;
        while (q < end && (*q == ' ' || *q == '*' || *q == '#' || *q == '-' || *q == '_'))
            q++;
        if ((size_t)(end - q) > kl && strncasecmp(q, key, kl) == 0) {
            q += kl;
            while (q < end && (*q == '*' || *q == '_'))
                q++;
            if (q < end && *q == ':') {
                q++;
                while (q < end && (*q == ' ' || *q == '*' || *q == '_' || *q == '`'))
                    q++;
                const char *e = end;
                while (e > q && (isspace((unsigned char)e[-1]) || e[-1] == '*' ||
                                 e[-1] == '_' || e[-1] == '`'))
                    e--;
                return e > q ? kb_strndup(q, (size_t)(e - q)) : NULL;
            }
        }
        p = nl ? nl + 1 : NULL;
    }
    return NULL;
}

/* The text under "## title" up to the next "## " heading, trimmed. */
static char *section(const char *text, const char *title)
{
    size_t tl = strlen(title);
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        const char *q = p;
        while (*q == ' ')
            q++;
        if (q[0] == '#' && q[1] == '#') {
            q += 2;
            while (*q == '#')
                q++;
            while (*q == ' ')
                q++;
            if (strncasecmp(q, title, tl) == 0 && (q[tl] == '\n' || q[tl] == '\r' ||
                                                    q[tl] == '\0' || q[tl] == ' ' ||
                                                    q[tl] == ':')) {
                const char *b = nl ? nl + 1 : q + strlen(q);
                const char *e = b;
                for (const char *r = b; *r;) {
                    const char *rn = strchr(r, '\n');
                    const char *s = r;
                    while (*s == ' ')
                        s++;
                    if (s[0] == '#' && s[1] == '#')
                        break;
                    r = rn ? rn + 1 : r + strlen(r);
                    e = r;
                }
                while (b < e && isspace((unsigned char)*b))
                    b++;
                while (e > b && isspace((unsigned char)e[-1]))
                    e--;
                return e > b ? kb_strndup(b, (size_t)(e - b)) : NULL;
            }
        }
        p = nl ? nl + 1 : NULL;
    }
    return NULL;
}

/* A line of the LLM's that may stand in YAML and the format: one line, no
 * '<' or '>', at most max bytes (cut at a character boundary). */
static void tame(char *s, size_t max)
{
    if (!s)
        return;
    for (char *p = s; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t')
            *p = ' ';
        else if (*p == '<')
            *p = '(';
        else if (*p == '>')
            *p = ')';
    size_t n = strlen(s);
    if (n > max) {
        n = max;
        while (n && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
        s[n] = '\0';
    }
}

static kb_rc parse_writeup(const char *text, writeup *u)
{
    memset(u, 0, sizeof *u);
    if (!text)
        return KB_OK;
    u->name = field(text, "NAME");
    u->description = field(text, "DESCRIPTION");
    tame(u->description, KB_SKILL_DESCRIPTION_MAX);
    /* its control bytes (an escape sequence, a NUL, a lone CR) visible:
     * SKILL.md is text a reviewer reads in a terminal */
    u->description = kb_skill_escape_controls(u->description);
    kb_rc rc = kb_gen_scrub_paths(&u->description);   /* no machine's path */
    for (int i = 0; i < 3; i++) {
        u->sections[i] = kb_skill_escape_controls(section(text, section_titles[i]));
        if (rc == KB_OK)
            rc = kb_gen_scrub_paths(&u->sections[i]);
    }
    return rc;
}

/* ------------------------------------------------------------------ names */

/* text as a name part: lower case, runs of other characters one '-',
 * none leading or trailing, at most max bytes. Into out (max + 1). */
static void slug(const char *text, char *out, size_t max)
{
    size_t n = 0;
    int dash = 0;
    for (const char *p = text ? text : ""; *p && n < max; p++) {
        unsigned char c = (unsigned char)*p;
        if (isalnum(c) && c < 128) {
            if (dash && n)
                out[n++] = '-';
            if (n < max)
                out[n++] = (char)tolower(c);
            dash = 0;
        } else {
            dash = 1;
        }
    }
    while (n && out[n - 1] == '-')
        n--;
    out[n] = '\0';
}

/* The skill's folder name: TASK-NAME from the write-up, else
 * TASK-gen-RUN; a folder already there gets -2, -3, ... */
static kb_rc pick_name(const kb_gen_writeback *w, const char *task, const writeup *u,
                       char **name, kb_err *err)
{
    char t[NAME_PART_MAX + 1], n[NAME_PART_MAX + 1], base[2 * NAME_PART_MAX + 16];
    slug(task, t, NAME_PART_MAX);
    slug(u->name, n, NAME_PART_MAX);
    if (n[0] && strncmp(n, t, strlen(t)) == 0 && (n[strlen(t)] == '-' || !n[strlen(t)]))
        snprintf(base, sizeof base, "%s", n);   /* it has the task's name already */
    else if (n[0])
        snprintf(base, sizeof base, "%s-%s", t, n);
    else {
        char id[NAME_PART_MAX + 1];
        slug(w->run_id, id, NAME_PART_MAX);
        size_t l = strlen(id);
        snprintf(base, sizeof base, "%s-gen-%s", t, l > 6 ? id + l - 6 : id);
    }
    size_t bl = strlen(base);
    if (bl > KB_SKILL_NAME_MAX)
        base[bl = KB_SKILL_NAME_MAX] = '\0';
    while (bl && base[bl - 1] == '-')
        base[--bl] = '\0';
    for (int k = 1; k < 1000; k++) {
        char cand[sizeof base + 8];
        if (k == 1)
            snprintf(cand, sizeof cand, "%s", base);
        else {
            char suf[8];
            snprintf(suf, sizeof suf, "-%d", k);
            size_t keep = bl + strlen(suf) > KB_SKILL_NAME_MAX
                          ? KB_SKILL_NAME_MAX - strlen(suf) : bl;
            snprintf(cand, sizeof cand, "%.*s%s", (int)keep, base, suf);
        }
        if (!kb_skill_name_ok(cand))
            continue;
        char *dir = kb_path_join(w->skills_dir, cand);
        if (!dir)
            return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        struct stat st;
        int taken = lstat(dir, &st) == 0;
        free(dir);
        if (!taken) {
            *name = kb_strdup(cand);
            return *name ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        }
    }
    return kb_err_set(err, KB_ERR_IO, "no free skill name for '%s' in '%s'", base,
                      w->skills_dir);
}

/* ------------------------------------------------------------------ the skill */

/* The Evidence section's citations: the passages of the prompt that
 * helped (helped), each once, by links that hold no machine's path. */
static kb_rc put_cites(const kb_gen_writeback *w, const writeup *u, const char *ref,
                       kb_buf *b)
{
    size_t all = 0, cited = 0;
    for (size_t i = 0; i < w->ncites; i++)
        all += w->cites[i].url && *w->cites[i].url && first_of_its_kind(w, i);
    kb_rc rc = KB_OK;
    for (size_t i = 0; rc == KB_OK && i < w->ncites; i++) {
        const kb_gen_cite *c = &w->cites[i];
        if (!c->url || !*c->url || !first_of_its_kind(w, i) ||
            !helped(w, c, ref, (const char *const *)u->sections))
            continue;
        if (!cited++)
            rc = kb_buf_puts(b, "\nThe passages of its prompt that it draws on (those "
                             "that name what it does beyond the task's reference "
                             "kernel, the skill it refines, those the text links):\n\n");
        if (rc == KB_OK)
            rc = put_cite(b, c, 1);
    }
    if (rc == KB_OK && all && !cited)
        rc = kb_buf_printf(b, "\nNone of the %zu passages of its prompt names what it "
                           "does beyond the task's reference kernel: none is cited.\n", all);
    else if (rc == KB_OK && cited < all)
        rc = kb_buf_printf(b, "\n(%zu other passage%s of its prompt did not bear on it.)\n",
                           all - cited, all - cited == 1 ? "" : "s");
    return rc;
}

/* SKILL.md's body. */
static kb_rc make_body(const kb_gen_writeback *w, const char *name, const writeup *u,
                       const kb_verify_result *r, const char *ref, kb_buf *b)
{
    static const char *const todo[3] = {
        "TODO (the write-up did not say): the bottleneck that calls for it.",
        "TODO (the write-up did not say): what kernel.cu does, step by step.",
        "TODO (the write-up did not say): what goes wrong.",
    };
    kb_rc rc = kb_buf_printf(b, "\n# %s\n\n", name);
    for (int i = 0; i < 3 && rc == KB_OK; i++)
        rc = kb_buf_printf(b, "## %s\n\n%s\n\n", section_titles[i],
                           u->sections[i] ? u->sections[i] : todo[i]);
    const cJSON *dev = w->device ? w->device : cJSON_GetObjectItemCaseSensitive(r->json,
                                                                               "device");
    const cJSON *dn = cJSON_GetObjectItemCaseSensitive(dev, "name");
    const char *baseline = r->ntimings ? r->timings[0].baseline : "its baseline";
    if (rc == KB_OK)
        rc = kb_buf_printf(b, "## Evidence\n\nWritten by `kb generate` (run %s, model %s, "
                           "prompt sha256 %.12s) from a kernel that kb-verify verified on "
                           "%s: %s, %.2fx %s (geomean); the record is in evidence.json. "
                           "A draft: an LLM wrote the text above. Review it, then `kb skill "
                           "verify %s` and `kb skill approve %s --reviewer WHO`.\n",
                           w->run_id ? w->run_id : "?", w->model && *w->model ? w->model : "?",
                           w->prompt_hash ? w->prompt_hash : "", cJSON_IsString(dn)
                           ? dn->valuestring : "the GPU", r->verdict_name,
                           r->has_speedup ? r->speedup_geomean : 0.0, baseline, name, name);
    if (rc == KB_OK && w->parent)
        rc = kb_buf_printf(b, "\nIt refines the skill `%s`.\n", w->parent);
    if (rc == KB_OK)
        rc = put_cites(w, u, ref, b);
    return rc;
}

/* The skill's folder: skills_dir/name (*dir), made under a hidden temp
 * name (*tmp: kb_temp_dir's, swept after a kill) and renamed into place
 * whole. Both the caller's. */
static kb_rc make_folder(const kb_gen_writeback *w, const char *name, char **dir, char **tmp,
                         kb_err *err)
{
    kb_buf tmpl;
    kb_buf_init(&tmpl, 0);
    kb_rc rc = KB_OK;
    if (!(*dir = kb_path_join(w->skills_dir, name)))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    else if ((rc = kb_temp_dir(*dir, &tmpl, err)) == KB_OK &&
             !(*tmp = kb_buf_detach(&tmpl)))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_buf_release(&tmpl);
    return rc;
}

/* The best speedup of a verified skill of skills_dir for the task on the
 * record's architecture (0: none, or no library there): a generated
 * kernel well above it is flagged for review. */
static double best_skill(const kb_gen_writeback *w, const kb_task *task, const cJSON *rec)
{
    kb_skill_lib lib;
    kb_skill_diags d;
    kb_err e;
    kb_skill_lib_init(&lib);
    kb_skill_diags_init(&d);
    kb_err_clear(&e);
    double best = kb_skill_lib_load(w->skills_dir, &lib, &d, &e) == KB_OK
        ? kb_skill_lib_best_speedup(&lib, task->name, kb_skill_record_str(
              cJSON_GetObjectItemCaseSensitive(rec, "device"), "arch"), NULL)
        : 0;
    kb_skill_lib_release(&lib);
    kb_skill_diags_release(&d);
    return best;
}

/* kernel.cu in tmp (its SHA-256 into sha), and the evidence record of the
 * verification the loop ran (*rec, the caller's). */
static kb_rc write_kernel_record(const kb_gen_writeback *w, const kb_task *task,
                                 const char *tmp, char sha[65], cJSON **rec, kb_err *err)
{
    char *cu = kb_path_join(tmp, "kernel.cu");
    if (!cu)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_rc rc = kb_write_file_atomic(cu, w->source, strlen(w->source), err);
    free(cu);
    kb_sha256_hex(w->source, strlen(w->source), sha);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    cJSON *shapes = NULL;
    if (rc == KB_OK && !(shapes = kb_task_shapes_json(task)))
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_buf how;
    kb_buf_init(&how, 0);
    if (rc == KB_OK && kb_buf_printf(&how, "kb-verify, in kb generate run %s",
                                     w->run_id ? w->run_id : "?") != KB_OK)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    /* the prompt showed the target shape alone */
    const kb_shape *target = kb_gen_target_shape(task);
    const char *shown = target ? target->name : NULL;
    kb_skill_record_in in = { .result = w->result->json, .device = w->device,
                              .shapes = shapes, .kernel_sha256 = sha, .how = how.data,
                              .date = date, .shown_shape = shown };
    if (rc == KB_OK)
        rc = kb_skill_record_make(&in, rec, err);
    if (rc == KB_OK && kb_skill_record_review(*rec, best_skill(w, task, *rec)) < 0)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_buf_release(&how);
    cJSON_Delete(shapes);
    return rc;
}

/* The front matter (a draft, its task, ops, arch, dtype, author, parent,
 * provenance) and the body of s, SKILL.md in tmp. */
static kb_rc set_skill(const kb_gen_writeback *w, const kb_task *task, const writeup *u,
                       const char *name, const char *tmp, kb_skill *s, kb_err *err)
{
    char *ref = read_reference(w);
    const kb_verify_result *r = w->result;
    kb_buf body, prov;
    kb_buf_init(&body, 0);
    kb_buf_init(&prov, 0);
    kb_rc r2 = kb_skill_set_field(s, KB_SKILL_NAME, name);
    if (r2 == KB_OK)
        r2 = kb_skill_set_field(s, KB_SKILL_DESCRIPTION, u->description && *u->description
                                ? u->description
                                : "TODO (the write-up did not say): what the technique "
                                  "does and when to use it, the key use first.");
    if (r2 == KB_OK)
        r2 = kb_skill_set(s, "kb-status", "draft");
    if (r2 == KB_OK)
        r2 = kb_skill_set(s, "kb-task", task->name);
    if (r2 == KB_OK && task->ops && *task->ops)
        r2 = kb_skill_set(s, "kb-ops", task->ops);
    if (r2 == KB_OK && r->compile.arch && *r->compile.arch)
        r2 = kb_skill_set(s, "kb-arch", r->compile.arch);
    if (r2 == KB_OK)
        r2 = kb_skill_set(s, "kb-dtype", kb_dtype_name(task->dtype));
    if (r2 == KB_OK)
        r2 = kb_skill_set(s, "kb-author", "kb generate");
    if (r2 == KB_OK && w->parent)
        r2 = kb_skill_set(s, "kb-parent", w->parent);
    if (r2 == KB_OK)
        r2 = kb_buf_printf(&prov, "kb generate run=%s model=%s prompt=sha256:%s",
                           w->run_id ? w->run_id : "?",
                           w->model && *w->model ? w->model : "?",
                           w->prompt_hash ? w->prompt_hash : "");
    if (r2 == KB_OK)
        r2 = kb_skill_set(s, "kb-provenance", prov.data);
    if (r2 == KB_OK)
        r2 = make_body(w, name, u, r, ref, &body);
    if (r2 == KB_OK)
        r2 = kb_skill_set_body(s, body.data);
    if (r2 == KB_OK && !(s->path = kb_path_join(tmp, "SKILL.md")))
        r2 = KB_ERR_NOMEM;
    if (r2 == KB_OK && !(s->dir = kb_strdup(tmp)))
        r2 = KB_ERR_NOMEM;
    kb_buf_release(&body);
    kb_buf_release(&prov);
    free(ref);
    return r2 == KB_OK ? KB_OK : kb_err_set(err, r2, "out of memory");
}

/* Indexed at once, as `kb ingest --source skill-drafts DIR` would: an id
 * of its own, since ad-hoc files may not join the manifest's 'skills'
 * source (its next ingest would remove them; it then holds the draft
 * under its own key as well). */
static kb_rc index_skill(const kb_gen_writeback *w, char *dir, kb_err *err)
{
    if (!w->store || !w->config)
        return KB_OK;
    kb_ingest_opts io = { .adhoc_source = "skill-drafts",
                          .embed = kb_vec_any(w->store), .config = w->config };
    kb_ingest_stats stats;
    memset(&stats, 0, sizeof stats);
    char *targets[1] = { dir };
    kb_err ierr;
    kb_err_clear(&ierr);
    if (kb_ingest_run(w->store, &io, targets, 1, &stats, &ierr) != KB_OK)
        return kb_err_set(err, ierr.rc, "'%s' was written but not indexed: %s", dir,
                          ierr.msg);
    return KB_OK;
}

/* One try at writing the skill: a free name picked, the folder made under
 * a temp name and renamed to it without replacing anything. *taken: the
 * name was taken between the pick and the rename (another write-back,
 * racing): nothing written, try again. On success *name and *dir are the
 * caller's. */
static kb_rc write_once(const kb_gen_writeback *w, const kb_task *task, const writeup *u,
                        char **name, char **dir, int *taken, kb_err *err)
{
    kb_skill s;
    kb_skill_init(&s);
    kb_skill_evidence ev;
    kb_skill_evidence_init(&ev);
    kb_buf what;
    kb_buf_init(&what, 0);
    char *tmp = NULL, sha[65];
    cJSON *rec = NULL;
    *taken = 0;
    kb_rc rc = pick_name(w, task->name, u, name, err);
    if (rc == KB_OK)
        rc = make_folder(w, *name, dir, &tmp, err);
    if (rc == KB_OK)
        rc = write_kernel_record(w, task, tmp, sha, &rec, err);
    if (rc == KB_OK)
        rc = kb_skill_evidence_load(tmp, *name, &ev, NULL, err);
    if (rc == KB_OK)
        rc = set_skill(w, task, u, *name, tmp, &s, err);
    /* the lifecycle sets kb-speedup, kb-evidence and kb-when-not from the
     * record; the skill stays a draft: an LLM wrote its text, a person
     * reviews it */
    if (rc == KB_OK) {
        rc = kb_skill_apply_record(&s, &ev, rec, sha, &what, err);
        rec = NULL;
    }
    if (rc == KB_OK && kb_skill_set(&s, "kb-status", "draft") != KB_OK)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK)
        rc = kb_skill_evidence_save(&ev, err);
    if (rc == KB_OK)
        rc = kb_skill_save(&s, err);
    /* never replacing: a plain rename would also replace an empty folder */
    if (rc == KB_OK && kb_rename_noreplace(tmp, *dir) != 0) {
        if (errno == EEXIST || errno == ENOTEMPTY)
            *taken = 1;
        else
            rc = kb_err_set(err, KB_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, *dir,
                            strerror(errno));
    }
    if (tmp && (rc != KB_OK || *taken))
        kb_rmtree(tmp);
    if (rc != KB_OK || *taken) {
        free(*name);
        free(*dir);
        *name = *dir = NULL;
    }
    free(tmp);
    cJSON_Delete(rec);
    kb_skill_release(&s);
    kb_skill_evidence_release(&ev);
    kb_buf_release(&what);
    return rc;
}

kb_rc kb_gen_write_skill(const kb_gen_writeback *w, char **name_out, char **dir_out,
                         kb_err *err)
{
    *name_out = *dir_out = NULL;
    const kb_verify_result *r = w->result;
    if (!w->skills_dir || !w->source || !r || !r->json)
        return kb_err_set(err, KB_ERR_USAGE, "kb_gen_write_skill: a library, a kernel and "
                          "its verification are needed");
    if (r->verdict != KB_VERIFY_FASTER)
        return kb_err_set(err, KB_ERR_MISMATCH, "only a kernel verified faster is written "
                          "back, not one that is '%s'", r->verdict_name);
    kb_task *task = NULL;
    writeup u;
    memset(&u, 0, sizeof u);
    char *name = NULL, *dir = NULL;
    kb_rc rc = kb_task_load(w->task_dir, &task, err);
    if (rc == KB_OK && (rc = parse_writeup(w->writeup, &u)) != KB_OK)
        kb_err_set(err, rc, "out of memory");
    if (rc == KB_OK)
        rc = kb_mkdirs(w->skills_dir, err);
    if (rc == KB_OK)
        kb_sweep_temp(w->skills_dir);     /* what killed write-backs left */
    int taken = 1;
    for (int tries = 0; rc == KB_OK && taken && tries < 100; tries++)
        rc = write_once(w, task, &u, &name, &dir, &taken, err);
    if (rc == KB_OK && taken)
        rc = kb_err_set(err, KB_ERR_IO, "no free skill name in '%s': other write-backs "
                        "took each one picked", w->skills_dir);
    if (rc == KB_OK) {
        rc = index_skill(w, dir, err);
        *name_out = name;
        *dir_out = dir;
        name = dir = NULL;
    }
    free(name);
    free(dir);
    writeup_release(&u);
    kb_task_free(task);
    return rc;
}

/* ------------------------------------------------------------------ credit */

void kb_gen_credit_free(kb_gen_credit *c, size_t n)
{
    for (size_t i = 0; c && i < n; i++)
        free(c[i].skill);
    free(c);
}

/* Adds one to skill's used or won count. */
static kb_rc credit_add(kb_gen_credit **c, size_t *n, size_t *cap, const char *skill, int won)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*c)[i].skill, skill) == 0) {
            if (won)
                (*c)[i].won++;
            else
                (*c)[i].used++;
            return KB_OK;
        }
    char *s = kb_strdup(skill);
    if (!s || KB_GROW(*c, *n + 1, *cap) != KB_OK) {
        free(s);
        return KB_ERR_NOMEM;
    }
    (*c)[*n].skill = s;
    (*c)[*n].used = won ? 0 : 1;
    (*c)[*n].won = won ? 1 : 0;
    (*n)++;
    return KB_OK;
}

kb_rc kb_gen_credit_load(const char *runs_dir, kb_gen_credit **out, size_t *nout,
                         kb_err *err)
{
    *out = NULL;
    *nout = 0;
    DIR *d = runs_dir ? opendir(runs_dir) : NULL;
    if (!d)
        return KB_OK;
    kb_gen_credit *c = NULL;
    size_t n = 0, cap = 0;
    kb_rc rc = KB_OK;
    struct dirent *e;
    while (rc == KB_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *rd = kb_path_join(runs_dir, e->d_name);
        char *sp = rd ? kb_path_join(rd, "summary.json") : NULL;
        free(rd);
        if (!sp) {
            rc = KB_ERR_NOMEM;
            break;
        }
        kb_buf b;
        kb_buf_init(&b, 0);
        kb_err ferr;
        kb_err_clear(&ferr);
        cJSON *j = kb_read_file(sp, SUMMARY_MAX_BYTES, &b, &ferr) == KB_OK && b.data
                   ? cJSON_Parse(b.data) : NULL;
        kb_buf_release(&b);
        free(sp);
        const cJSON *cr = cJSON_GetObjectItemCaseSensitive(j, "credit"), *x;
        /* a replay's credit is its original's: counted once */
        const cJSON *rp = cJSON_GetObjectItemCaseSensitive(j, "replay");
        if (cJSON_IsObject(rp))
            cr = NULL;
        cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(cr, "used"))
            if (rc == KB_OK && cJSON_IsString(x))
                rc = credit_add(&c, &n, &cap, x->valuestring, 0);
        cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(cr, "won"))
            if (rc == KB_OK && cJSON_IsString(x))
                rc = credit_add(&c, &n, &cap, x->valuestring, 1);
        cJSON_Delete(j);
    }
    closedir(d);
    if (rc != KB_OK) {
        kb_gen_credit_free(c, n);
        return kb_err_set(err, rc, "out of memory reading the runs in '%s'", runs_dir);
    }
    *out = c;
    *nout = n;
    return KB_OK;
}
