/* library.c - a folder of skill folders: loading, dominance between skills
 * of one task and architecture, near-duplicates. */
#include "skills/skill.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void kb_skill_lib_init(kb_skill_lib *lib)
{
    memset(lib, 0, sizeof *lib);
}

void kb_skill_lib_release(kb_skill_lib *lib)
{
    for (size_t i = 0; i < lib->n; i++) {
        free(lib->items[i].dir);
        free(lib->items[i].root);
        kb_skill_files_release(&lib->items[i].files);
        kb_skill_release(&lib->items[i].skill);
        kb_skill_evidence_release(&lib->items[i].evidence);
    }
    free(lib->items);
    free(lib->dir);
    kb_skill_lib_init(lib);
}

/* The folder of path: path itself, or the folder of a SKILL.md. */
static char *skill_dir(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    if (n >= 8 && strncmp(path + n - 8, "SKILL.md", 8) == 0 &&
        (n == 8 || path[n - 9] == '/'))
        return n == 8 ? kb_strdup(".") : kb_strndup(path, n - 9);
    return kb_strndup(path, n);
}

/* The folder's SKILL.md, kernel.cu and evidence.json, as the walk of the
 * folder allows them: a refused one (a link out of the repository) makes
 * the skill unreadable, as one that does not parse. 1 if e may be read. */
static int files_allowed(kb_skill_entry *e, const char *md, kb_skill_diags *diags,
                         kb_rc *rc)
{
    const kb_skill_file *f = kb_skill_files_find(&e->files, "SKILL.md");
    struct stat st;
    if (e->files.over)
        return 0;
    if (!f || (lstat(md, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)))
        return 0;     /* its finding is the walk's */
    if (f->size > KB_SKILL_MD_MAX) {
        *rc = kb_skill_diag_add(diags, md, 0, KB_SKILL_ERROR, "size", "SKILL.md is "
                                "%zu bytes, over the limit of %u: skipped", f->size,
                                KB_SKILL_MD_MAX);
        return 0;
    }
    char *ev = kb_path_join(e->dir, "evidence.json");
    int ev_refused = ev && lstat(ev, &st) == 0 && !kb_skill_files_find(&e->files,
                                                                       "evidence.json");
    free(ev);
    return !ev_refused;
}

kb_rc kb_skill_lib_add(kb_skill_lib *lib, const char *path, kb_skill_diags *diags,
                       kb_err *err)
{
    char *dir = skill_dir(path);
    char *md = dir ? kb_path_join(dir, "SKILL.md") : NULL;
    kb_rc rc = KB_OK;
    struct stat st;
    if (!md)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    else if (stat(md, &st) != 0 && lstat(md, &st) != 0)
        rc = kb_err_set(err, KB_ERR_NOTFOUND, "no skill at '%s': cannot open '%s': %s",
                        path, md, strerror(errno));
    else if (KB_GROW(lib->items, lib->n + 1, lib->cap) != KB_OK)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc != KB_OK)
        goto out;
    kb_skill_entry *e = &lib->items[lib->n++];
    memset(e, 0, sizeof *e);
    kb_skill_init(&e->skill);
    kb_skill_evidence_init(&e->evidence);
    kb_skill_files_init(&e->files);
    e->dir = dir;
    dir = NULL;
    e->root = kb_skill_root(e->dir);
    if (!e->root && !(e->root = kb_strdup(e->dir))) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((rc = kb_skill_files_list(e->dir, e->root, &e->files, diags, err)) != KB_OK ||
        !files_allowed(e, md, diags, &rc)) {
        if (rc != KB_OK)
            rc = kb_err_set(err, rc, "out of memory");
        goto out;     /* e->ok 0: skipped, as a skill that does not parse */
    }
    kb_err perr;
    kb_err_clear(&perr);
    kb_rc prc = kb_skill_load(md, &e->skill, diags, &perr);
    if (prc == KB_ERR_NOMEM) {
        rc = kb_err_set(err, prc, "%s", perr.msg);
        goto out;
    }
    if (prc == KB_ERR_IO &&   /* changed since it was listed: a finding */
        (rc = kb_skill_diag_add(diags, md, 0, KB_SKILL_ERROR, "file", "%s", perr.msg)) != KB_OK)
        goto out;
    e->ok = prc == KB_OK;
    const kb_skill_file *cu = kb_skill_files_find(&e->files, "kernel.cu");
    kb_err_clear(&perr);
    if (cu && !cu->dir && kb_sha256_file(cu->path, e->kernel_sha256, &perr) != KB_OK) {
        rc = kb_err_set(err, perr.rc, "%s", perr.msg);
        goto out;
    }
    kb_err_clear(&perr);
    prc = kb_skill_evidence_load(e->dir, e->ok ? e->skill.fields[KB_SKILL_NAME] : NULL,
                                 &e->evidence, diags, &perr);
    if (prc == KB_ERR_NOMEM || prc == KB_ERR_IO)
        rc = kb_err_set(err, prc, "%s", perr.msg);
    if (prc != KB_OK && !e->evidence.root)
        e->ok = 0;    /* evidence that cannot be read: nothing to judge it by */
out:
    free(dir);
    free(md);
    return rc;
}

kb_rc kb_skill_lib_load(const char *dir, kb_skill_lib *lib, kb_skill_diags *diags,
                        kb_err *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return kb_err_set(err, errno == ENOENT ? KB_ERR_NOTFOUND : KB_ERR_IO,
                          "cannot open the skill library '%s': %s", dir, strerror(errno));
    if (!lib->dir && !(lib->dir = kb_strdup(dir))) {
        closedir(d);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    kb_rc rc = KB_OK;
    struct dirent *de;
    while (rc == KB_OK && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char *sub = kb_path_join(dir, de->d_name);
        char *md = sub ? kb_path_join(sub, "SKILL.md") : NULL;
        struct stat st;
        if (!md || (stat(md, &st) == 0 && (KB_GROW(names, n + 1, cap) != KB_OK ||
                                           !(names[n++] = kb_strdup(sub)))))
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory listing '%s'", dir);
        free(sub);
        free(md);
    }
    closedir(d);
    if (rc == KB_OK && n)   /* qsort is given no NULL, even with nothing to sort */
        qsort(names, n, sizeof *names, kb_cmp_str);
    for (size_t i = 0; i < n; i++) {
        if (rc == KB_OK && names[i])
            rc = kb_skill_lib_add(lib, names[i], diags, err);
        free(names[i]);
    }
    free(names);
    return rc;
}

kb_skill_entry *kb_skill_lib_find(kb_skill_lib *lib, const char *name)
{
    for (size_t i = 0; i < lib->n; i++)
        if (lib->items[i].ok && lib->items[i].skill.fields[KB_SKILL_NAME] &&
            strcmp(lib->items[i].skill.fields[KB_SKILL_NAME], name) == 0)
            return &lib->items[i];
    return NULL;
}

/* ------------------------------------------------------------------ dominance */

/* The latest record, when it backs the entry's current kernel. */
static const cJSON *backing(const kb_skill_entry *e)
{
    size_t n = kb_skill_evidence_count(&e->evidence);
    const cJSON *r = n ? kb_skill_evidence_at(&e->evidence, n - 1) : NULL;
    if (!r || !*e->kernel_sha256 ||
        strcmp(kb_skill_record_str(r, "kernel_sha256"), e->kernel_sha256) != 0 ||
        kb_skill_record_outcome(r) != KB_SKILL_BACKS)
        return NULL;
    return r;
}

const char *kb_skill_entry_arch(const kb_skill_entry *e)
{
    const cJSON *r = e->ok ? backing(e) : NULL;
    return r ? kb_skill_record_str(cJSON_GetObjectItemCaseSensitive(r, "device"), "arch")
             : "";
}

static int live(const kb_skill_entry *e)
{
    kb_skill_status st = kb_skill_status_of(&e->skill);
    return e->ok && (st == KB_SKILL_VERIFIED || st == KB_SKILL_APPROVED);
}

static const cJSON *timing_of(const cJSON *rec, const char *shape)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(rec, "timings"))
        if (strcmp(kb_skill_record_str(t, "shape"), shape) == 0)
            return t;
    return NULL;
}

static double stat_of(const cJSON *t, const char *key)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(t, "candidate_ms");
    const cJSON *v = c ? cJSON_GetObjectItemCaseSensitive(c, key) : NULL;
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

int kb_skill_dominates(const kb_skill_entry *a, const kb_skill_entry *b)
{
    if (a == b || !live(a) || !live(b))
        return 0;
    /* one kernel measured twice differs by noise only: no dominance */
    if (*a->kernel_sha256 && strcmp(a->kernel_sha256, b->kernel_sha256) == 0)
        return 0;
    const char *ta = kb_skill_get(&a->skill, "kb-task");
    const char *tb = kb_skill_get(&b->skill, "kb-task");
    const cJSON *ra = backing(a), *rb = backing(b);
    if (!ta || !tb || strcmp(ta, tb) != 0 || !ra || !rb ||
        strcmp(kb_skill_entry_arch(a), kb_skill_entry_arch(b)) != 0)
        return 0;
    int shared = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(ra, "timings")) {
        const cJSON *u = timing_of(rb, kb_skill_record_str(t, "shape"));
        if (!u)
            continue;
        shared++;
        double hi = stat_of(t, "ci95_hi"), lo = stat_of(u, "ci95_lo");
        if (hi < 0 || lo < 0 || !(hi < lo))
            return 0;
    }
    return shared > 0;
}

double kb_skill_lib_best_speedup(const kb_skill_lib *lib, const char *task, const char *arch,
                                 const char *except_sha256)
{
    double best = 0;
    for (size_t i = 0; lib && task && i < lib->n; i++) {
        const kb_skill_entry *e = &lib->items[i];
        const char *t = e->ok ? kb_skill_get(&e->skill, "kb-task") : NULL;
        const cJSON *r = live(e) ? backing(e) : NULL;
        if (!r || !t || strcmp(t, task) != 0 ||
            (except_sha256 && strcmp(e->kernel_sha256, except_sha256) == 0) ||
            (arch && *arch && strcmp(kb_skill_entry_arch(e), arch) != 0))
            continue;
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(r, "speedup");
        if (cJSON_IsNumber(sp) && sp->valuedouble > best)
            best = sp->valuedouble;
    }
    return best;
}

/* 1 when the library holds a skill called name: loaded, or, where only
 * some of lib->dir's skills were loaded (kb skill lint --dir LIB NAME),
 * a folder of that name with a SKILL.md in lib->dir (a skill's name is
 * its folder's, lint's rule). */
static int lib_has(const kb_skill_lib *lib, const char *name)
{
    if (kb_skill_lib_find((kb_skill_lib *)lib, name))
        return 1;
    if (!lib->dir || !*name || name[0] == '.' || strchr(name, '/'))
        return 0;
    char *dir = kb_path_join(lib->dir, name);
    char *md = dir ? kb_path_join(dir, "SKILL.md") : NULL;
    struct stat st;
    int there = md && stat(md, &st) == 0 && S_ISREG(st.st_mode);
    free(dir);
    free(md);
    return there;
}

kb_rc kb_skill_lib_check(const kb_skill_lib *lib, kb_skill_diags *d)
{
    kb_rc rc = KB_OK;
    for (size_t i = 0; i < lib->n && rc == KB_OK; i++) {
        const kb_skill_entry *a = &lib->items[i];
        if (!a->ok)
            continue;
        const kb_skill *s = &a->skill;
        const char *parent = kb_skill_get(s, "kb-parent");
        if (parent && !lib_has(lib, parent))
            rc = kb_skill_diag_add(d, s->path, 0, KB_SKILL_WARNING, "parent",
                                   "kb-parent '%s' is no skill of the library", parent);
        for (size_t j = 0; j < lib->n && rc == KB_OK; j++) {
            const kb_skill_entry *b = &lib->items[j];
            if (j == i || !b->ok)
                continue;
            if (kb_skill_dominates(b, a))
                rc = kb_skill_diag_add(d, s->path, 0, KB_SKILL_WARNING, "dominance",
                                       "'%s' dominates it on %s (%s): faster on every "
                                       "timed shape; retire one ('kb skill retire')",
                                       b->skill.fields[KB_SKILL_NAME],
                                       kb_skill_get(s, "kb-task"), kb_skill_entry_arch(a));
            /* the same kernel for the same task and bottleneck: one skill */
            const char *ba = kb_skill_get(s, "kb-bottleneck");
            const char *bb = kb_skill_get(&b->skill, "kb-bottleneck");
            const char *ta = kb_skill_get(s, "kb-task");
            const char *tb = kb_skill_get(&b->skill, "kb-task");
            if (rc == KB_OK && j > i && *a->kernel_sha256 &&
                strcmp(a->kernel_sha256, b->kernel_sha256) == 0 && ta && tb &&
                strcmp(ta, tb) == 0 && (ba ? bb && strcmp(ba, bb) == 0 : !bb))
                rc = kb_skill_diag_add(d, b->skill.path, 0, KB_SKILL_WARNING,
                                       "duplicate", "a near-duplicate of '%s': the same "
                                       "kernel.cu for the same task and kb-bottleneck",
                                       s->fields[KB_SKILL_NAME]);
        }
    }
    return rc;
}
