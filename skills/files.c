/* files.c - the files of a skill folder, by the one rule every reader
 * follows (lint, list, export, the servers, ingest): a skill folder comes
 * through git from a team's contributors, so it is untrusted input. A link
 * is followed only when its real path stays inside the repository that
 * holds the library (a seed skill's kernel.cu is a link to the candidate
 * in corpus/tasks it was verified as); one that leaves it (a link to
 * ~/.ssh/id_rsa), dangles or loops is an error and never read. Hidden
 * names (kb's temp files among them) are not the skill's. */
#include "skills/skill.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* folders below a skill folder: deeper is no skill's layout */
#define WALK_DEPTH 8

char *kb_skill_root(const char *dir)
{
    char *real = realpath(dir, NULL);
    if (!real)
        return NULL;
    /* the nearest folder holding .git: the repository */
    size_t n = strlen(real);
    char *probe = malloc(n + 6);
    if (!probe) {
        free(real);
        return NULL;
    }
    for (size_t end = n; end > 0;) {
        struct stat st;
        memcpy(probe, real, end);
        memcpy(probe + end, "/.git", 6);
        if (lstat(probe, &st) == 0) {
            free(probe);
            real[end] = '\0';
            return real;
        }
        while (end > 0 && real[end - 1] != '/')
            end--;
        if (end > 0)
            end--;       /* the '/' itself */
    }
    free(probe);
    /* none: the folder that holds the library (dir's grandparent) */
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(real, '/');
        if (!slash || slash == real) {
            real[0] = '/', real[1] = '\0';
            break;
        }
        *slash = '\0';
    }
    return real;
}

const char *kb_skill_path_check(const char *root, const char *path, struct stat *st)
{
    char *real = realpath(path, NULL);
    if (!real) {
        if (errno == ELOOP)
            return "a link loop";
        if (errno == ENOENT)
            return "a dangling link";
        return "cannot be resolved";
    }
    size_t n = strlen(root);
    int inside = strcmp(root, "/") == 0 ||
                 (strncmp(real, root, n) == 0 && (real[n] == '/' || real[n] == '\0'));
    int ok = inside && stat(real, st) == 0;
    free(real);
    if (!inside)
        return "a link that leaves the repository";
    return ok ? NULL : "cannot be read";
}

void kb_skill_files_init(kb_skill_files *f)
{
    memset(f, 0, sizeof *f);
}

void kb_skill_files_release(kb_skill_files *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->items[i].rel);
        free(f->items[i].path);
    }
    free(f->items);
    kb_skill_files_init(f);
}

/* One walk: the folders on the way down (a loop closes on one of them). */
typedef struct {
    const char *root, *top;
    kb_skill_files *out;
    kb_skill_diags *d;
    struct { dev_t dev; ino_t ino; } stack[WALK_DEPTH + 1];
    int depth;
    kb_rc rc;
} walk;

static void finding(walk *w, const char *path, kb_skill_severity sev, const char *rule,
                    const char *what)
{
    if (w->rc == KB_OK)
        w->rc = kb_skill_diag_add(w->d, path, 0, sev, rule, "%s", what);
}

static kb_rc add_file(walk *w, const char *rel, const char *path, const struct stat *st)
{
    kb_skill_files *f = w->out;
    if (KB_GROW(f->items, f->n + 1, f->cap) != KB_OK)
        return KB_ERR_NOMEM;
    kb_skill_file *x = &f->items[f->n];
    x->rel = kb_strdup(rel);
    x->path = kb_strdup(path);
    x->size = (size_t)st->st_size;
    x->mode = st->st_mode;
    x->dir = S_ISDIR(st->st_mode);
    if (!x->rel || !x->path) {
        free(x->rel);
        free(x->path);
        return KB_ERR_NOMEM;
    }
    f->n++;
    if (!x->dir) {
        f->nfiles++;
        f->bytes += x->size;
    }
    return KB_OK;
}

static void walk_dir(walk *w, const char *dir, const char *rel);

/* One entry of a folder: checked, added, a folder walked. */
static void walk_entry(walk *w, const char *path, const char *rel)
{
    struct stat st;
    const char *why = kb_skill_path_check(w->root, path, &st);
    if (why) {
        kb_buf m;
        kb_buf_init(&m, 0);
        kb_rc rc = kb_buf_printf(&m, "'%s' is %s (only links into '%s' are followed): "
                                 "not read", rel, why, w->root);
        w->out->refused++;
        if (rc == KB_OK)
            finding(w, path, KB_SKILL_ERROR, "link", m.data);
        else
            w->rc = rc;
        kb_buf_release(&m);
        return;
    }
    if (S_ISDIR(st.st_mode)) {
        for (int i = 0; i <= w->depth; i++)
            if (w->stack[i].dev == st.st_dev && w->stack[i].ino == st.st_ino) {
                w->out->refused++;
                finding(w, path, KB_SKILL_ERROR, "link",
                        "a folder that holds itself (a link loop): not read");
                return;
            }
        if (w->depth == WALK_DEPTH) {
            w->out->refused++;
            finding(w, path, KB_SKILL_ERROR, "size", "folders nested too deep: not read");
            return;
        }
        if ((w->rc = add_file(w, rel, path, &st)) != KB_OK)
            return;
        w->depth++;
        w->stack[w->depth].dev = st.st_dev;
        w->stack[w->depth].ino = st.st_ino;
        walk_dir(w, path, rel);
        w->depth--;
    } else if (S_ISREG(st.st_mode)) {
        w->rc = add_file(w, rel, path, &st);
    } else {
        finding(w, path, KB_SKILL_WARNING, "file",
                "neither a file nor a folder (a FIFO, socket or device): not read");
    }
}

static void walk_dir(walk *w, const char *dir, const char *rel)
{
    DIR *d = opendir(dir);
    if (!d) {
        finding(w, dir, KB_SKILL_ERROR, "file", "the folder cannot be read");
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while (w->rc == KB_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;      /* hidden: kb's temp files, .git, editors' */
        if (KB_GROW(names, n + 1, cap) != KB_OK || !(names[n] = kb_strdup(e->d_name)))
            w->rc = KB_ERR_NOMEM;
        else
            n++;
        /* far over the limit: stop listing, the skill is refused anyway */
        if (w->out->n + n > 4 * KB_SKILL_FILES_MAX)
            break;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, kb_cmp_str);
    for (size_t i = 0; i < n; i++) {
        char *path = kb_path_join(dir, names[i]);
        char *r = *rel ? kb_path_join(rel, names[i]) : kb_strdup(names[i]);
        if (!path || !r)
            w->rc = KB_ERR_NOMEM;
        if (w->rc == KB_OK && w->out->nfiles <= KB_SKILL_FILES_MAX &&
            w->out->bytes <= KB_SKILL_BYTES_MAX)
            walk_entry(w, path, r);
        free(path);
        free(r);
        free(names[i]);
    }
    free(names);
}

kb_rc kb_skill_files_list(const char *dir, const char *root, kb_skill_files *out,
                          kb_skill_diags *d, kb_err *err)
{
    kb_skill_files_release(out);
    walk w = { .root = root, .top = dir, .out = out, .d = d };
    struct stat st;
    const char *why = kb_skill_path_check(root, dir, &st);
    if (why || !S_ISDIR(st.st_mode)) {
        kb_rc rc = kb_skill_diag_add(d, dir, 0, KB_SKILL_ERROR, "link", "the skill folder "
                                     "is %s (only links into '%s' are followed): not read",
                                     why ? why : "not a folder", root);
        out->over = 1;
        return rc == KB_OK ? KB_OK : kb_err_set(err, rc, "out of memory");
    }
    w.stack[0].dev = st.st_dev;
    w.stack[0].ino = st.st_ino;
    walk_dir(&w, dir, "");
    if (w.rc == KB_OK && (out->nfiles > KB_SKILL_FILES_MAX || out->bytes > KB_SKILL_BYTES_MAX)) {
        out->over = 1;
        w.rc = kb_skill_diag_add(d, dir, 0, KB_SKILL_ERROR, "size", "the skill is over "
                                 "the Skills extension's limits (%d files, %u bytes): "
                                 "skipped", KB_SKILL_FILES_MAX, KB_SKILL_BYTES_MAX);
    }
    if (w.rc != KB_OK)
        return kb_err_set(err, w.rc, "out of memory listing '%s'", dir);
    return KB_OK;
}

const kb_skill_file *kb_skill_files_find(const kb_skill_files *f, const char *rel)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->items[i].rel, rel) == 0)
            return &f->items[i];
    return NULL;
}
