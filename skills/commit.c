/* commit.c - a skill's SKILL.md and evidence.json changed as one step
 * (skill.h, "commit.c"). A verification changes both: the record goes
 * into evidence.json, and SKILL.md names it (kb-evidence, kb-speedup,
 * kb-status). Two renames would let a kill leave them disagreeing; so the
 * folder is made again beside itself under a hidden temp name (its other
 * files hard links to the same bytes, its links made again), the two
 * files are written there, and one renameat2(RENAME_EXCHANGE) puts the
 * new folder where the old one was. A kill leaves the old folder or the
 * new one; the temp folder it leaves is hidden and swept next time. */
#include "skills/skill.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* folders below a skill folder that are made again: deeper is refused */
#define CLONE_DEPTH 8

static kb_rc clone_dir(const char *from, const char *to, int depth, kb_err *err);

/* One entry of a folder made again in to: a file hard-linked (copied when
 * the file system will not link), a link made again with its target as
 * it is (relative targets stay right: the new folder stands where the old
 * one does), a folder made again. Other kinds are left out. */
static kb_rc clone_entry(const char *src, const char *dst, int depth, kb_err *err)
{
    struct stat st;
    if (lstat(src, &st) != 0)
        return kb_err_set(err, KB_ERR_IO, "cannot read '%s': %s", src, strerror(errno));
    if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlink(src, target, sizeof target - 1);
        if (n < 0)
            return kb_err_set(err, KB_ERR_IO, "cannot read the link '%s': %s", src,
                              strerror(errno));
        target[n] = '\0';
        if (symlink(target, dst) != 0)
            return kb_err_set(err, KB_ERR_IO, "cannot make the link '%s': %s", dst,
                              strerror(errno));
        return KB_OK;
    }
    if (S_ISDIR(st.st_mode)) {
        if (depth >= CLONE_DEPTH)
            return kb_err_set(err, KB_ERR_IO, "'%s': folders nested too deep", src);
        if (mkdir(dst, st.st_mode & 0777) != 0)
            return kb_err_set(err, KB_ERR_IO, "cannot make '%s': %s", dst, strerror(errno));
        return clone_dir(src, dst, depth + 1, err);
    }
    if (!S_ISREG(st.st_mode) || link(src, dst) == 0)
        return KB_OK;
    kb_buf b;             /* another file system under the folder: a copy */
    kb_buf_init(&b, 0);
    kb_rc rc = kb_read_file(src, 0, &b, err);
    if (rc == KB_OK)
        rc = kb_write_file_atomic(dst, b.data ? b.data : "", b.len, err);
    if (rc == KB_OK)
        chmod(dst, st.st_mode & 0777);
    kb_buf_release(&b);
    return rc;
}

/* Makes every entry of from again in to (which exists), hidden ones too
 * but for kb's temp files. */
static kb_rc clone_dir(const char *from, const char *to, int depth, kb_err *err)
{
    DIR *d = opendir(from);
    if (!d)
        return kb_err_set(err, KB_ERR_IO, "cannot open folder '%s': %s", from,
                          strerror(errno));
    kb_rc rc = KB_OK;
    struct dirent *e;
    while (rc == KB_OK && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            kb_temp_name(e->d_name, NULL))
            continue;
        char *src = kb_path_join(from, e->d_name), *dst = kb_path_join(to, e->d_name);
        rc = src && dst ? clone_entry(src, dst, depth, err)
                        : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        free(src);
        free(dst);
    }
    closedir(d);
    return rc;
}

/* SKILL.md and evidence.json of s and ev written into folder dir. */
static kb_rc write_pair(const kb_skill *s, const kb_skill_evidence *ev, const char *dir,
                        kb_err *err)
{
    kb_skill s2 = *s;                 /* shallow: the same skill at another path */
    kb_skill_evidence ev2 = *ev;
    s2.path = kb_path_join(dir, "SKILL.md");
    ev2.path = kb_path_join(dir, "evidence.json");
    kb_rc rc = s2.path && ev2.path ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (rc == KB_OK)
        rc = kb_skill_evidence_save(&ev2, err);
    if (rc == KB_OK)
        rc = kb_skill_save(&s2, err);
    free(s2.path);
    free(ev2.path);
    return rc;
}

/* dir made again beside itself with the two files written, and exchanged
 * with it. *done 0 with KB_OK: the file system has no RENAME_EXCHANGE
 * (NFS, CIFS), nothing changed. */
static kb_rc exchange(const char *dir, mode_t mode, const kb_skill *s,
                      const kb_skill_evidence *ev, int *done, kb_err *err)
{
    char *parent = kb_strdup(dir);
    if (!parent)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    char *slash = strrchr(parent, '/');
    if (slash)
        slash[slash == parent] = '\0';
    kb_sweep_temp(slash ? parent : ".");   /* what a killed one left */
    free(parent);
    kb_buf tmp;
    kb_buf_init(&tmp, 0);
    kb_rc rc = kb_temp_dir(dir, &tmp, err);
    if (rc != KB_OK)
        return rc;
    chmod(tmp.data, mode & 0777);
    if ((rc = clone_dir(dir, tmp.data, 0, err)) == KB_OK &&
        (rc = write_pair(s, ev, tmp.data, err)) == KB_OK) {
        *done = renameat2(AT_FDCWD, tmp.data, AT_FDCWD, dir, RENAME_EXCHANGE) == 0;
        if (!*done && errno != EINVAL && errno != ENOSYS)
            rc = kb_err_set(err, KB_ERR_IO, "cannot put '%s' in place: %s", dir,
                            strerror(errno));
    }
    kb_rmtree(tmp.data);     /* the old folder, or the new one not put in place */
    kb_buf_release(&tmp);
    return rc;
}

kb_rc kb_skill_commit(const kb_skill_entry *e, kb_err *err)
{
    size_t n = strlen(e->dir);
    while (n > 1 && e->dir[n - 1] == '/')
        n--;
    char *dir = kb_strndup(e->dir, n);
    if (!dir)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    struct stat st;
    int done = 0;
    kb_rc rc = KB_OK;
    if (lstat(dir, &st) == 0 && S_ISDIR(st.st_mode))
        rc = exchange(dir, st.st_mode, &e->skill, &e->evidence, &done, err);
    /* else the two writes, evidence first (SKILL.md never names a record
     * that is not written): a skill folder that is a link (exchanging
     * would replace the link), a file system without RENAME_EXCHANGE */
    if (rc == KB_OK && !done)
        rc = kb_skill_evidence_save(&e->evidence, err);
    if (rc == KB_OK && !done)
        rc = kb_skill_save(&e->skill, err);
    free(dir);
    return rc;
}
