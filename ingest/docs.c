/* docs.c - the documents an ingest reads: a source's files (from the
 * folder beside the manifest or a mirror, walked once each) or its URL,
 * and the targets of the command line as ingest reads them. */
#include "ingest/ingest_int.h"
#include "skills/skill.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void kb_doclist_release(kb_doclist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].key);
        free(l->items[i].file);
        free(l->items[i].path);
        free(l->items[i].url);
        free(l->items[i].fetch);
    }
    free(l->items);
    memset(l, 0, sizeof *l);
}

kb_rc kb_doclist_add(kb_doclist *l, const char *key, const char *file,
                     const char *path, const char *url, kb_err *err)
{
    if (KB_GROW(l->items, l->n + 1, l->cap) != KB_OK)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_docref *d = &l->items[l->n++];
    d->key = kb_strdup(key);
    d->file = file ? kb_strdup(file) : NULL;
    d->path = kb_strdup(path ? path : "");
    d->url = kb_strdup(url ? url : "");
    d->fetch = NULL;
    if (!d->key || (file && !d->file) || !d->path || !d->url)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory"); /* released with the list */
    return KB_OK;
}

/* Appends path to b as a URL's path: bytes other than letters, digits,
 * "/" and "-._~!$&'()*+,;=:@" percent-encoded (a space, a line break, a
 * '#' or '?' in a file name would otherwise break the link). */
static kb_rc put_url_path(kb_buf *b, const char *path)
{
    static const char safe[] = "/-._~!$&'()*+,;=:@";
    kb_rc rc = KB_OK;
    for (const unsigned char *p = (const unsigned char *)path; *p && rc == KB_OK; p++)
        rc = isalnum(*p) || (*p < 0x80 && strchr(safe, *p))
                 ? kb_buf_putc(b, (char)*p) : kb_buf_printf(b, "%%%02X", *p);
    return rc;
}

/* base + "/" + rel as a URL, rel encoded (caller frees; NULL out of
 * memory). */
static char *url_join(const char *base, const char *rel)
{
    kb_buf u;
    kb_buf_init(&u, 0);
    size_t n = strlen(base);
    while (n && base[n - 1] == '/')
        n--;
    kb_rc rc = kb_buf_append(&u, base, n);
    if (rc == KB_OK)
        rc = kb_buf_putc(&u, '/');
    if (rc == KB_OK)
        rc = put_url_path(&u, rel);
    return kb_buf_finish(&u, rc);
}

/* "file:///abs/path" for a local path, encoded (caller frees; NULL out
 * of memory). */
char *kb_ingest_file_url(const char *path)
{
    char *abs = realpath(path, NULL);
    kb_buf url;
    kb_buf_init(&url, 0);
    kb_rc rc = kb_buf_puts(&url, "file://");
    if (rc == KB_OK)
        rc = put_url_path(&url, abs ? abs : path);
    free(abs);
    return kb_buf_finish(&url, rc);
}

int kb_ingest_is_url(const char *s)
{
    return strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0;
}

/* 1 if s starts with a URL scheme ("ftp://", "file://"). */
static int has_scheme(const char *s)
{
    if (!isalpha((unsigned char)*s))
        return 0;
    size_t n = 1;
    while (isalnum((unsigned char)s[n]) || (s[n] && strchr("+-.", s[n])))   /* strchr finds the NUL too */
        n++;
    return s[n] && strncmp(s + n, "://", 3) == 0;
}

/* A target as ingest reads it, into *out (caller frees): a file:// URL is
 * the local path it names (percent-decoded), http(s) URLs, ids and paths
 * stay as they are; any other URL (ftp://...) is an error, not a source
 * id that is not there. */
kb_rc kb_ingest_target(const char *t, char **out, kb_err *err)
{
    *out = NULL;
    if (!has_scheme(t) || kb_ingest_is_url(t)) {
        *out = kb_strdup(t);
        return *out ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    const char *p = NULL;
    if (strncmp(t, "file:///", 8) == 0)
        p = t + 7;
    else if (strncmp(t, "file://localhost/", 17) == 0)
        p = t + 16;
    if (!p)
        return kb_err_set(err, KB_ERR_USAGE, "cannot ingest '%s': kb fetches http://"
                          " and https:// URLs, and reads local files (a path, or"
                          " file:///path)", t);
    kb_buf b;
    kb_buf_init(&b, 0);
    kb_rc rc = KB_OK;
    for (; *p && *p != '?' && *p != '#' && rc == KB_OK; p++) {
        if (*p != '%') {
            rc = kb_buf_putc(&b, *p);
        } else if (isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2]) &&
                   (p[1] != '0' || p[2] != '0')) {
            char hex[3] = { p[1], p[2], '\0' };
            rc = kb_buf_putc(&b, (char)strtol(hex, NULL, 16));
            p += 2;
        } else {
            kb_buf_release(&b);
            return kb_err_set(err, KB_ERR_USAGE, "cannot ingest '%s': a bad %%-escape", t);
        }
    }
    *out = kb_buf_finish(&b, rc);
    return *out ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
}

/* A walk of a folder tree. Every folder is read once, known by device and
 * inode, so a link back up (`self -> .`, `sub/up -> ..`) cannot make the
 * walk endless and two ways to one folder do not store its files twice.
 * Links to folders are followed after every folder reached without one,
 * so a file is cited by its own path, not a link's. */
typedef struct {
    const char *format;      /* the source's format hint */
    const char *folder_url;  /* the URL that the tree's files hang under */
    kb_doclist *out;
    struct { dev_t dev; ino_t ino; } *dirs;
    size_t ndirs, capdirs;
    struct { char *full, *rel, *url_rel, *skill_root; } *links;
    size_t nlinks, caplinks;
    size_t failed;           /* subfolders that could not be read */
    kb_err first;            /* the first of them */
    char *skill_root;        /* in a skill folder: where its links may lead
                                (skills/files.c's rule, every reader's) */
} walk;

/* Adds st's folder to the walk: 1 if it is new, 0 if it was read
 * already, -1 on no memory. */
static int walk_enter(walk *w, const struct stat *st)
{
    for (size_t i = 0; i < w->ndirs; i++)
        if (w->dirs[i].dev == st->st_dev && w->dirs[i].ino == st->st_ino)
            return 0;
    if (KB_GROW(w->dirs, w->ndirs + 1, w->capdirs) != KB_OK)
        return -1;
    w->dirs[w->ndirs].dev = st->st_dev;
    w->dirs[w->ndirs].ino = st->st_ino;
    w->ndirs++;
    return 1;
}

/* Keeps a link to a folder for later, with the skill root its folder was
 * under (a linked folder in a skill folder keeps the skill's link rule);
 * takes the three strings. */
static kb_rc walk_defer(walk *w, char *full, char *rel, char *url_rel, kb_err *err)
{
    char *root = w->skill_root ? kb_strdup(w->skill_root) : NULL;
    if ((w->skill_root && !root) || KB_GROW(w->links, w->nlinks + 1, w->caplinks) != KB_OK) {
        free(full);
        free(rel);
        free(url_rel);
        free(root);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    }
    w->links[w->nlinks].full = full;
    w->links[w->nlinks].rel = rel;
    w->links[w->nlinks].url_rel = url_rel;
    w->links[w->nlinks].skill_root = root;
    w->nlinks++;
    return KB_OK;
}

static kb_rc walk_folder(walk *w, const char *dir, const char *rel,
                         const char *url_rel, kb_err *err);

/* The root a skill folder's links may lead into (kb_skill_root) when dir
 * holds a SKILL.md, else NULL. Caller frees. */
static char *skill_root_of(const char *dir)
{
    char *md = kb_path_join(dir, "SKILL.md");
    struct stat st;
    char *root = md && lstat(md, &st) == 0 ? kb_skill_root(dir) : NULL;
    free(md);
    return root;
}

/* walk_folder of a folder below the walk's root: one that cannot be read
 * is counted and reported, and the others proceed. */
static kb_rc walk_subfolder(walk *w, const char *dir, const char *rel,
                            const char *url_rel, kb_err *err)
{
    kb_err serr;
    kb_err_clear(&serr);
    kb_rc rc = walk_folder(w, dir, rel, url_rel, &serr);
    if (rc == KB_ERR_IO) {
        kb_log_warn("%s", serr.msg);
        if (w->failed++ == 0)
            kb_err_set(&w->first, rc, "%s", serr.msg);
        return KB_OK;
    }
    if (rc != KB_OK)
        kb_err_set(err, rc, "%s", serr.msg);
    return rc;
}

/* Adds every supported file under dir (sorted, hidden entries skipped) to
 * the walk; links to folders are kept for later. rel is dir's path
 * relative to the mirror root, url_rel its path under the folder URL. */
static kb_rc walk_folder(walk *w, const char *dir, const char *rel,
                         const char *url_rel, kb_err *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return kb_err_set(err, KB_ERR_IO, "cannot open folder '%s': %s", dir,
                          strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (KB_GROW(names, n + 1, cap) != KB_OK)
            break;
        if ((names[n] = kb_strdup(e->d_name)) == NULL)
            break;
        n++;
    }
    closedir(d);
    if (e) {
        /* a short listing would let the prune remove documents */
        for (size_t i = 0; i < n; i++)
            free(names[i]);
        free(names);
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory listing '%s'", dir);
    }
    qsort(names, n, sizeof *names, kb_cmp_str);
    kb_rc rc = KB_OK;
    /* a skill folder (contributed through git: untrusted): its links are
     * followed only into the repository that holds it */
    char *own_root = w->skill_root ? NULL : skill_root_of(dir);
    if (own_root)
        w->skill_root = own_root;
    for (size_t i = 0; i < n; i++) {
        char *full = kb_path_join(dir, names[i]);
        char *r = kb_path_join(rel, names[i]);
        char *ur = *url_rel ? kb_path_join(url_rel, names[i]) : kb_strdup(names[i]);
        struct stat lst, st;
        const char *why = NULL;
        if (!full || !r || !ur) {
            if (rc == KB_OK)
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        } else if (rc != KB_OK || lstat(full, &lst) != 0 || stat(full, &st) != 0) {
            /* after a failure, or a dangling link: nothing to add */
        } else if (w->skill_root && (why = kb_skill_path_check(w->skill_root, full, &st))) {
            kb_log_warn("skipping '%s': %s (a skill's links are followed only into "
                        "'%s')", full, why, w->skill_root);
        } else if (S_ISDIR(st.st_mode) && S_ISLNK(lst.st_mode)) {
            rc = walk_defer(w, full, r, ur, err);
            full = r = ur = NULL;
        } else if (S_ISDIR(st.st_mode)) {
            int added = walk_enter(w, &st);
            if (added < 0)
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            else if (added)
                rc = walk_subfolder(w, full, r, ur, err);
        } else if (S_ISREG(st.st_mode) && kb_parser_for(full, w->format)) {
            char *url = *w->folder_url ? url_join(w->folder_url, ur) : kb_strdup("");
            rc = url ? kb_doclist_add(w->out, r, full, r, url, err)
                     : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            free(url);
        }
        free(full);
        free(r);
        free(ur);
        free(names[i]);
    }
    free(names);
    if (own_root) {
        w->skill_root = NULL;
        free(own_root);
    }
    return rc;
}

/* Every supported file of the tree at dir (a folder: st, from stat), its
 * own folders first, then those reached through links, each once. A
 * subfolder that cannot be read is counted in out->failed (out->first
 * says why) and the rest is listed. */
kb_rc kb_doclist_tree(const char *dir, const struct stat *st, const char *rel,
                      const char *format, const char *folder_url, kb_doclist *out,
                      kb_err *err)
{
    walk w = { .format = format, .folder_url = folder_url, .out = out };
    kb_err_clear(&w.first);
    kb_rc rc = walk_enter(&w, st) < 0
                   ? kb_err_set(err, KB_ERR_NOMEM, "out of memory")
                   : walk_folder(&w, dir, rel, "", err);
    /* links found while following links are appended: read them too */
    for (size_t i = 0; i < w.nlinks && rc == KB_OK; i++) {
        const char *full = w.links[i].full;
        struct stat lst;
        int added = stat(full, &lst) == 0 ? walk_enter(&w, &lst) : 0;
        if (added < 0)
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        else if (added) {
            w.skill_root = w.links[i].skill_root;   /* the rule of the folder it is in */
            rc = walk_subfolder(&w, full, w.links[i].rel, w.links[i].url_rel, err);
            w.skill_root = NULL;
        } else
            kb_log_warn("skipping '%s': a link to a folder already read", full);
    }
    if (w.failed && out->failed == 0)
        kb_err_set(&out->first, w.first.rc, "%s", w.first.msg);
    out->failed += w.failed;
    for (size_t i = 0; i < w.nlinks; i++) {
        free(w.links[i].full);
        free(w.links[i].rel);
        free(w.links[i].url_rel);
        free(w.links[i].skill_root);
    }
    free(w.links);
    free(w.dirs);
    return rc;
}

/* The documents of a local source: its paths in the folder that holds the
 * manifest, each reported (and keyed) from the folder above it
 * ("corpus/skills/x/SKILL.md" for corpus/sources.json, whatever the working
 * directory), cited under files_url when the source has one, else by
 * file:// URL. */
static kb_rc list_local_docs(const kb_source *src, const char *manifest_path,
                             kb_doclist *out, kb_err *err)
{
    const char *slash = strrchr(manifest_path, '/');
    char *mdir = slash ? kb_strndup(manifest_path, (size_t)(slash - manifest_path))
                       : kb_strdup(".");
    char *real = mdir ? realpath(*mdir ? mdir : "/", NULL) : NULL;
    const char *top = real ? kb_ingest_basename(real) : "";
    kb_rc rc = mdir ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < src->nlocal && rc == KB_OK; i++) {
        const char *l = src->local[i];
        size_t ll = strlen(l);
        while (ll > 1 && l[ll - 1] == '/')
            ll--;
        char *lp = kb_strndup(l, ll);
        char *full = lp ? kb_path_join(mdir, lp) : NULL;
        char *rel = lp && *top && strcmp(top, "/") ? kb_path_join(top, lp)
                                                   : (lp ? kb_strdup(lp) : NULL);
        struct stat st;
        if (!full || !rel) {
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        } else if (stat(full, &st) != 0) {
            rc = kb_err_set(err, KB_ERR_IO, "cannot find '%s' beside the manifest "
                            "'%s': %s", l, manifest_path, strerror(errno));
        } else {
            char *url = *src->files_url ? (S_ISDIR(st.st_mode) ? kb_strdup(src->files_url)
                                                                : url_join(src->files_url, lp))
                                        : kb_ingest_file_url(full);
            if (!url)
                rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
            else if (S_ISDIR(st.st_mode))
                rc = kb_doclist_tree(full, &st, rel, src->format, url, out, err);
            else
                rc = kb_doclist_add(out, rel, full, rel, url, err);
            free(url);
        }
        free(lp);
        free(full);
        free(rel);
    }
    free(real);
    free(mdir);
    return rc;
}

/* The documents of a manifest source: its local files (beside the
 * manifest), its mirror files when a mirror is given, else its URL. */
kb_rc kb_doclist_source(const kb_source *src, const char *manifest_path,
                        const char *mirror, kb_doclist *out, kb_err *err)
{
    if (src->nlocal > 0)
        return list_local_docs(src, manifest_path, out, err);
    if (mirror && src->nmirror > 0) {
        for (size_t i = 0; i < src->nmirror; i++) {
            const char *m = src->mirror[i];
            char *full = kb_path_join(mirror, m);
            size_t ml = strlen(m);
            kb_rc rc = KB_OK;
            struct stat st;
            if (stat(full, &st) != 0) {
                rc = kb_err_set(err, KB_ERR_IO, "cannot find '%s' in the mirror "
                                "'%s': %s", m, mirror, strerror(errno));
            } else if (m[ml - 1] == '/' || S_ISDIR(st.st_mode)) {
                char *rel = kb_strndup(m, m[ml - 1] == '/' ? ml - 1 : ml);
                rc = kb_doclist_tree(full, &st, rel, src->format,
                                     *src->files_url ? src->files_url : src->url,
                                     out, err);
                free(rel);
            } else {
                rc = kb_doclist_add(out, m, full, m, src->url, err);
            }
            free(full);
            if (rc != KB_OK)
                return rc;
        }
        return KB_OK;
    }
    if (!*src->url)
        return kb_err_set(err, KB_ERR_USAGE, "source '%s' has no URL and no "
                          "mirror was given (--mirror DIR or KB_MIRROR)", src->id);
    /* a folder's URL is a repository's web page, not its files: ingesting
     * that page would fill the KB with the site's navigation */
    for (size_t i = 0; i < src->nmirror; i++) {
        size_t ml = strlen(src->mirror[i]);
        if (ml && src->mirror[i][ml - 1] == '/')
            return kb_err_set(err, KB_ERR_USAGE, "source '%s' is a folder ('%s'): "
                              "it is read from a mirror (--mirror DIR or "
                              "KB_MIRROR), not fetched", src->id, src->mirror[i]);
    }
    kb_rc rc = kb_doclist_add(out, src->url, NULL, "", src->url, err);
    if (rc == KB_OK && *src->fetch_url &&
        (out->items[out->n - 1].fetch = kb_strdup(src->fetch_url)) == NULL)
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    return rc;
}
