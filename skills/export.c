/* export.c - a folder of skills an agent loads as they are (a project's
 * .claude/skills/ or .agents/skills/), evidence and kernels with them.
 * Each skill is copied into a hidden temp folder beside its place and
 * swapped in with one renameat2(RENAME_EXCHANGE), so a kill at any point
 * leaves the agent's folder with the old export or the new one, never
 * neither; the temp folders a kill leaves are hidden and swept by the next
 * export. Only what the library's rule lets be read is copied
 * (skills/files.c): a skill whose folder holds a link out of the
 * repository or a loop is not exported. */
#include "skills/skill.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXPORT_FILE_MAX (32u << 20)

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

/* Copies the listed files and folders of e into to, which exists. */
static kb_rc copy_files(const kb_skill_entry *e, const char *to, kb_err *err)
{
    kb_rc rc = KB_OK;
    for (size_t i = 0; rc == KB_OK && i < e->files.n; i++) {
        const kb_skill_file *f = &e->files.items[i];
        char *dst = kb_path_join(to, f->rel);
        if (!dst)
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        else if (f->dir && mkdir(dst, 0755) != 0)
            rc = kb_err_set(err, KB_ERR_IO, "cannot make '%s': %s", dst, strerror(errno));
        else if (!f->dir)
            rc = copy_file(f->path, dst, f->mode, err);
        free(dst);
    }
    return rc;
}

/* Puts the folder tmp at dst in one step: exchanged with what is there
 * (then in tmp, removed), or renamed when nothing is. A file system
 * without RENAME_EXCHANGE gets two renames. */
static kb_rc swap_in(const char *tmp, const char *dst, kb_err *err)
{
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dst, RENAME_EXCHANGE) == 0) {
        kb_rmtree(tmp);          /* the old export; a kill leaves it to the sweep */
        return KB_OK;
    }
    /* nothing at dst (ENOENT; a file system without the flag says EINVAL
     * whether or not there is) */
    if ((errno == ENOENT || errno == EINVAL || errno == ENOSYS) &&
        kb_rename_noreplace(tmp, dst) == 0)
        return KB_OK;
    if (errno != EEXIST && errno != ENOTEMPTY)
        return kb_err_set(err, KB_ERR_IO, "cannot put '%s' in place: %s", dst,
                          strerror(errno));
    kb_buf old;
    kb_buf_init(&old, 0);
    kb_rc rc = kb_temp_dir(dst, &old, err);
    if (rc == KB_OK && (rmdir(old.data) != 0 || rename(dst, old.data) != 0))
        rc = kb_err_set(err, KB_ERR_IO, "cannot move the old '%s' aside: %s", dst,
                        strerror(errno));
    if (rc == KB_OK && rename(tmp, dst) != 0) {
        rc = kb_err_set(err, KB_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, dst,
                        strerror(errno));
        rename(old.data, dst);   /* the old export back in place */
    } else if (rc == KB_OK) {
        kb_rmtree(old.data);
    }
    kb_buf_release(&old);
    return rc;
}

/* Exports one skill folder: copied into a temp folder beside dir/NAME,
 * then swapped in. */
static kb_rc export_one(const kb_skill_entry *e, const char *dir, kb_err *err)
{
    kb_buf tmp;
    kb_buf_init(&tmp, 0);
    char *dst = kb_path_join(dir, e->skill.fields[KB_SKILL_NAME]);
    kb_rc rc = dst ? kb_temp_dir(dst, &tmp, err)
                   : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK && (rc = copy_files(e, tmp.data, err)) == KB_OK)
        rc = swap_in(tmp.data, dst, err);
    if (rc != KB_OK && tmp.len)
        kb_rmtree(tmp.data);
    free(dst);
    kb_buf_release(&tmp);
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
    if (rc == KB_OK)
        kb_sweep_temp(dir);      /* what a killed export left */
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
        if (d->errors > errors || e->files.refused) {
            skipped++;           /* its findings say why */
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
