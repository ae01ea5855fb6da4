/* export.c - a folder of skills an agent loads as they are (a project's
 * .claude/skills/ or .agents/skills/), evidence and kernels with them.
 * Each skill is copied under a temporary name and renamed into place, so
 * a failed export leaves the previous one whole. */
#include "skills/skill.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXPORT_FILE_MAX (32u << 20)

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path) == 0 ? 0 : -1;
}

/* rm -rf path; a missing path is nothing to do. */
static void rmtree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) == 0)
        nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static kb_rc copy_file(const char *from, const char *to, mode_t mode, kb_err *err)
{
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = kb_read_file(from, EXPORT_FILE_MAX, &b, err);
    if (rc == KB_OK)
        rc = kb_write_file_atomic(to, b.data ? b.data : "", b.len, err);
    if (rc == KB_OK && chmod(to, mode & 0777) != 0)
        rc = kb_err_set(err, KB_ERR_IO, "cannot set the mode of '%s': %s", to,
                        strerror(errno));
    kb_buf_release(&b);
    return rc;
}

/* Copies the files and folders of from (not hidden ones) into to, which
 * exists. */
static kb_rc copy_tree(const char *from, const char *to, kb_err *err)
{
    DIR *d = opendir(from);
    if (!d)
        return kb_err_set(err, KB_ERR_IO, "cannot open folder '%s': %s", from,
                          strerror(errno));
    kb_rc rc = KB_OK;
    struct dirent *e;
    while (rc == KB_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char *src = kb_path_join(from, e->d_name), *dst = kb_path_join(to, e->d_name);
        struct stat st;
        if (!src || !dst)
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        else if (stat(src, &st) != 0)
            rc = kb_err_set(err, KB_ERR_IO, "cannot read '%s': %s", src, strerror(errno));
        else if (S_ISDIR(st.st_mode))
            rc = mkdir(dst, 0755) == 0 ? copy_tree(src, dst, err)
                 : kb_err_set(err, KB_ERR_IO, "cannot make '%s': %s", dst, strerror(errno));
        else if (S_ISREG(st.st_mode))
            rc = copy_file(src, dst, st.st_mode, err);
        free(src);
        free(dst);
    }
    closedir(d);
    return rc;
}

/* Exports one skill folder: copied into dir/.NAME.XXXXXX, then renamed to
 * dir/NAME (an older dir/NAME moved aside first, removed after). */
static kb_rc export_one(const kb_skill_entry *e, const char *dir, kb_err *err)
{
    const char *name = e->skill.fields[KB_SKILL_NAME];
    kb_buf tmp, old;
    kb_buf_init(&tmp, 0);
    kb_buf_init(&old, 0);
    char *dst = kb_path_join(dir, name);
    kb_rc rc = dst ? kb_buf_printf(&tmp, "%s/.%s.XXXXXX", dir, name) : KB_ERR_NOMEM;
    if (rc == KB_OK)
        rc = kb_buf_printf(&old, "%s/.%s.old.XXXXXX", dir, name);
    if (rc != KB_OK) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (!mkdtemp(tmp.data)) {
        rc = kb_err_set(err, KB_ERR_IO, "cannot make a folder in '%s': %s", dir,
                        strerror(errno));
        goto out;
    }
    chmod(tmp.data, 0755);
    if ((rc = copy_tree(e->dir, tmp.data, err)) != KB_OK)
        goto out;
    struct stat st;
    int had = lstat(dst, &st) == 0;
    if (had && (!mkdtemp(old.data) || rename(dst, old.data) != 0)) {
        rc = kb_err_set(err, KB_ERR_IO, "cannot move the old '%s' aside: %s", dst,
                        strerror(errno));
        goto out;
    }
    if (rename(tmp.data, dst) != 0) {
        rc = kb_err_set(err, KB_ERR_IO, "cannot rename '%s' to '%s': %s", tmp.data, dst,
                        strerror(errno));
        if (had)
            rename(old.data, dst);   /* the old export back in place */
        goto out;
    }
    if (had)
        rmtree(old.data);
out:
    if (rc != KB_OK && tmp.data)
        rmtree(tmp.data);
    free(dst);
    kb_buf_release(&tmp);
    kb_buf_release(&old);
    return rc;
}

/* verified: verified and approved skills; approved: approved ones */
static int exported(kb_skill_status st, kb_skill_status min)
{
    return st == KB_SKILL_APPROVED || (min == KB_SKILL_VERIFIED && st == KB_SKILL_VERIFIED);
}

kb_rc kb_skill_export(const kb_skill_lib *lib, const char *dir, kb_skill_status min,
                      size_t *n, kb_skill_diags *d, kb_err *err)
{
    *n = 0;
    kb_rc rc = kb_mkdirs(dir, err);
    int skipped = 0;
    for (size_t i = 0; i < lib->n && rc == KB_OK; i++) {
        const kb_skill_entry *e = &lib->items[i];
        if (!e->ok || !exported(kb_skill_status_of(&e->skill), min))
            continue;
        size_t errors = d->errors;
        if ((rc = kb_skill_check(&e->skill, d)) != KB_OK) {
            rc = kb_err_set(err, rc, "out of memory");
            break;
        }
        if (d->errors > errors) {
            skipped++;
            continue;
        }
        if ((rc = export_one(e, dir, err)) == KB_OK)
            (*n)++;
    }
    if (rc == KB_OK && skipped)
        rc = kb_err_set(err, KB_ERR_PARTIAL, "%d skill%s not exported: %s", skipped,
                        skipped == 1 ? "" : "s", "fix the errors above ('kb skill lint')");
    return rc;
}
