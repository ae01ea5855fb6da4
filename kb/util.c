/* util.c - errors, the growable buffer, files, hashing, small helpers. */
#include "kb/kb.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utf8proc.h>

/* ------------------------------------------------------------------ errors */

void kb_err_clear(kb_err *err)
{
    if (err) {
        err->rc = KB_OK;
        err->msg[0] = '\0';
    }
}

kb_rc kb_err_set(kb_err *err, kb_rc rc, const char *fmt, ...)
{
    if (!err || err->rc != KB_OK)
        return rc;
    err->rc = rc;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof err->msg)   /* cut: not inside a character */
        err->msg[kb_utf8_cut(err->msg, sizeof err->msg - 1)] = '\0';
    return rc;
}

int kb_rc_exit_status(kb_rc rc)
{
    switch (rc) {
    case KB_OK: return 0;
    case KB_ERR_USAGE: return 2;
    case KB_ERR_PARTIAL: return 3;
    default: return 1;
    }
}

const char *kb_rc_name(kb_rc rc)
{
    static const char *names[] = {
        "ok", "usage", "io", "parse", "db", "net", "nomem", "notfound",
        "model", "mismatch", "index", "gpu", "partial", "internal",
    };
    if ((size_t)rc < sizeof names / sizeof names[0])
        return names[rc];
    return "unknown";
}

/* ------------------------------------------------------------------ buffer */

void kb_buf_init(kb_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

void kb_buf_release(kb_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void kb_buf_reset(kb_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

kb_rc kb_grow(void *arrp, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return KB_OK;
    size_t n = *cap ? *cap : 8;
    while (n < need)
        n = n > SIZE_MAX / 2 ? need : n * 2;
    if (elem && n > SIZE_MAX / elem)
        return KB_ERR_NOMEM;
    /* arrp holds a T *: copied as bytes, so no T ** is written as void ** */
    void *items;
    memcpy(&items, arrp, sizeof items);
    void *p = realloc(items, n * elem);
    if (!p)
        return KB_ERR_NOMEM;
    memcpy(arrp, &p, sizeof p);
    *cap = n;
    return KB_OK;
}

static kb_rc buf_grow(kb_buf *b, size_t extra)
{
    if (extra > SIZE_MAX - b->len - 1)
        return KB_ERR_NOMEM;
    size_t need = b->len + extra + 1;
    if (b->max && need - 1 > b->max)
        return KB_ERR_NOMEM;
    /* at least 64 bytes: short strings grow once */
    return kb_grow(&b->data, &b->cap, need < 64 ? 64 : need, 1);
}

kb_rc kb_buf_append(kb_buf *b, const void *data, size_t len)
{
    if (buf_grow(b, len) != KB_OK)
        return KB_ERR_NOMEM;
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return KB_OK;
}

kb_rc kb_buf_puts(kb_buf *b, const char *s)
{
    return kb_buf_append(b, s, strlen(s));
}

kb_rc kb_buf_putc(kb_buf *b, char c)
{
    return kb_buf_append(b, &c, 1);
}

kb_rc kb_buf_vprintf(kb_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || buf_grow(b, (size_t)n) != KB_OK)
        return KB_ERR_NOMEM;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return KB_OK;
}

kb_rc kb_buf_printf(kb_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kb_rc rc = kb_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

char *kb_buf_detach(kb_buf *b)
{
    char *p = b->data;
    if (!p)
        p = calloc(1, 1);
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}

char *kb_buf_finish(kb_buf *b, kb_rc rc)
{
    if (rc == KB_OK)
        return kb_buf_detach(b);
    kb_buf_release(b);
    return NULL;
}

/* ------------------------------------------------------------------ files */

/* 1 for a path that names a stream on purpose (/dev/stdin, /dev/fd/N,
 * /proc/self/fd/N): read as it is; any other path must be a regular file,
 * so that a FIFO planted where a file is expected never blocks kb. */
static int names_stream(const char *path)
{
    return strncmp(path, "/dev/", 5) == 0 || strncmp(path, "/proc/self/fd/", 14) == 0;
}

kb_rc kb_read_file(const char *path, size_t max_bytes, kb_buf *b, kb_err *err)
{
    /* O_NONBLOCK: opening a FIFO for reading waits for a writer */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return kb_err_set(err, KB_ERR_IO, "cannot open '%s': %s", path,
                          strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode) ||
        (!S_ISREG(st.st_mode) && !names_stream(path))) {
        int dir = S_ISDIR(st.st_mode);
        close(fd);
        return kb_err_set(err, KB_ERR_IO, "cannot read '%s': %s", path,
                          dir ? "Is a directory" : "not a regular file");
    }
    int fl = fcntl(fd, F_GETFL);
    FILE *f = fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 ? NULL
                                                                : fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return kb_err_set(err, KB_ERR_IO, "cannot open '%s': %s", path,
                          strerror(errno));
    }
    kb_rc rc = KB_OK;
    if (max_bytes && st.st_size > 0 && (size_t)st.st_size > max_bytes) {
        rc = kb_err_set(err, KB_ERR_IO,
                        "'%s' is too large (%lld bytes, limit %zu)", path,
                        (long long)st.st_size, max_bytes);
        goto out;
    }
    char chunk[65536];
    size_t n, total = 0;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        total += n;
        if (max_bytes && total > max_bytes) {
            rc = kb_err_set(err, KB_ERR_IO, "'%s' is too large (limit %zu bytes)",
                            path, max_bytes);
            goto out;
        }
        if (kb_buf_append(b, chunk, n) != KB_OK) {
            rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory reading '%s'", path);
            goto out;
        }
    }
    if (ferror(f))
        rc = kb_err_set(err, KB_ERR_IO, "cannot read '%s': %s", path,
                        strerror(errno));
out:
    fclose(f);
    return rc;
}

kb_rc kb_write_file_atomic(const char *path, const void *data, size_t len,
                           kb_err *err)
{
    kb_buf tmp;
    kb_buf_init(&tmp, 0);
    kb_rc rc = KB_OK;
    int fd = -1;
    /* a fresh name, O_EXCL: nothing planted there (a link to elsewhere) is
     * written through; hidden, and naming its writer, so that readers of
     * the folder pass over it and kb_sweep_temp removes it once the writer
     * is gone (killed) */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (kb_buf_printf(&tmp, "%.*s.%s" KB_TEMP_MARK "%ld.XXXXXX", (int)(base - path), path,
                      base, (long)getpid()) != KB_OK) {
        rc = kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        goto out;
    }
    fd = mkostemp(tmp.data, O_CLOEXEC);
    if (fd < 0) {
        rc = kb_err_set(err, KB_ERR_IO, "cannot create '%s': %s", tmp.data,
                        strerror(errno));
        kb_buf_release(&tmp);   /* not ours to unlink */
        goto out;
    }
    /* the folder's permissions, less execute: private in a private KB */
    char *slash = strrchr(tmp.data, '/');
    struct stat dst;
    int ok;
    if (slash) {
        *slash = '\0';
        ok = stat(slash == tmp.data ? "/" : tmp.data, &dst) == 0;
        *slash = '/';
    } else {
        ok = stat(".", &dst) == 0;
    }
    if (ok && fchmod(fd, dst.st_mode & 0666) != 0) {
        rc = kb_err_set(err, KB_ERR_IO, "cannot set the mode of '%s': %s", tmp.data,
                        strerror(errno));
        goto out;
    }
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            rc = kb_err_set(err, KB_ERR_IO, "cannot write '%s': %s", tmp.data,
                            strerror(errno));
            goto out;
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        fd = -1;
        rc = kb_err_set(err, KB_ERR_IO, "cannot write '%s': %s", tmp.data,
                        strerror(errno));
        goto out;
    }
    fd = -1;
    /* rename replaces a link at path, never what it points to */
    if (rename(tmp.data, path) != 0)
        rc = kb_err_set(err, KB_ERR_IO, "cannot rename '%s' to '%s': %s",
                        tmp.data, path, strerror(errno));
out:
    if (fd >= 0)
        close(fd);
    if (rc != KB_OK && tmp.data)
        unlink(tmp.data);
    kb_buf_release(&tmp);
    return rc;
}

/* ------------------------------------------------------------------ temp names */

kb_rc kb_temp_dir(const char *path, kb_buf *out, kb_err *err)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t at = out->len;
    if (kb_buf_printf(out, "%.*s.%s" KB_TEMP_MARK "%ld.XXXXXX", (int)(base - path), path,
                      base, (long)getpid()) != KB_OK)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    if (!mkdtemp(out->data + at)) {
        kb_rc rc = kb_err_set(err, KB_ERR_IO, "cannot make a folder beside '%s': %s",
                              path, strerror(errno));
        out->data[out->len = at] = '\0';
        return rc;
    }
    chmod(out->data + at, 0755);
    return KB_OK;
}

int kb_temp_name(const char *name, long *pid)
{
    if (name[0] != '.')
        return 0;
    /* the last mark: NAME itself may hold one */
    const char *m = NULL;
    for (const char *q = name; (q = strstr(q, KB_TEMP_MARK)) != NULL; q++)
        m = q;
    if (!m || m == name)
        return 0;
    const char *d = m + strlen(KB_TEMP_MARK), *e = d;
    long v = 0;
    while (*e >= '0' && *e <= '9' && e - d < 10)
        v = v * 10 + (*e++ - '0');
    if (e == d || *e != '.' || strlen(e + 1) != 6)
        return 0;
    if (pid)
        *pid = v;
    return 1;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

int kb_rename_noreplace(const char *from, const char *to)
{
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
    /* a file system without the flag (NFS, CIFS, Lustre): a folder's plain
     * rename refuses a folder that holds anything; a file is linked (which
     * never replaces) and its old name removed */
    struct stat st;
    if (lstat(from, &st) != 0)
        return -1;
    if (S_ISDIR(st.st_mode))
        return rename(from, to);
    return link(from, to) == 0 ? unlink(from) : -1;
}

int kb_rmtree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

size_t kb_sweep_temp(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long pid = 0;
        if (!kb_temp_name(e->d_name, &pid) || pid <= 0 || pid == (long)getpid())
            continue;
        /* alive, or someone else's (EPERM): not ours to remove */
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char *p = kb_path_join(dir, e->d_name);
        if (p && kb_rmtree(p) == 0)
            n++;
        free(p);
    }
    closedir(d);
    return n;
}

kb_rc kb_mkdirs(const char *path, kb_err *err)
{
    char *p = kb_strdup(path);
    if (!p)
        return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    kb_rc rc = KB_OK;
    for (char *s = p + 1; ; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            /* 0755, never more open than the folder it is made in (a
             * cache inside a private KB is private) */
            mode_t mode = 0755;
            struct stat up;
            char *slash = strrchr(p, '/');
            if (slash && slash > p) {
                *slash = '\0';
                if (stat(p, &up) == 0)
                    mode &= up.st_mode & 0777;
                *slash = '/';
            }
            if (mkdir(p, mode) != 0 && errno != EEXIST) {
                rc = kb_err_set(err, KB_ERR_IO, "cannot create directory '%s': %s",
                                p, strerror(errno));
                break;
            }
            *s = c;
            if (c == '\0')
                break;
        }
    }
    free(p);
    return rc;
}

void kb_hex_encode(const void *bytes, size_t n, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *md = bytes;
    for (size_t i = 0; i < n; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[2 * n] = '\0';
}

void kb_sha256_hex(const void *data, size_t len, char hex[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
    kb_hex_encode(md, n, hex);
}

typedef struct {
    const unsigned char *data;
    size_t len, block, from;     /* blocks from, from + 2, ... */
    unsigned char (*md)[32];
} blocks_job;

static void *hash_blocks(void *arg)
{
    blocks_job *j = arg;
    for (size_t off = j->from * j->block; off < j->len; off += 2 * j->block) {
        size_t n = j->len - off < j->block ? j->len - off : j->block;
        unsigned mdlen = 0;
        EVP_Digest(j->data + off, n, j->md[off / j->block], &mdlen, EVP_sha256(), NULL);
    }
    return NULL;
}

void kb_sha256_blocks(const void *data, size_t len, size_t block,
                      unsigned char (*md)[32])
{
    blocks_job jobs[2] = { { data, len, block, 0, md }, { data, len, block, 1, md } };
    pthread_t helper;
    int threaded = len > block &&
                   pthread_create(&helper, NULL, hash_blocks, &jobs[1]) == 0;
    hash_blocks(&jobs[0]);
    if (threaded)
        pthread_join(helper, NULL);
    else
        hash_blocks(&jobs[1]);
}

kb_rc kb_sha256_file(const char *path, char hex[65], kb_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return kb_err_set(err, KB_ERR_IO, "cannot open '%s': %s", path,
                          strerror(errno));
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    kb_rc rc = KB_OK;
    if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
        rc = kb_err_set(err, KB_ERR_INTERNAL, "cannot start SHA-256");
        goto out;
    }
    unsigned char chunk[1 << 16];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        EVP_DigestUpdate(ctx, chunk, n);
    if (ferror(f)) {
        rc = kb_err_set(err, KB_ERR_IO, "cannot read '%s': %s", path,
                        strerror(errno));
        goto out;
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_DigestFinal_ex(ctx, md, &len);
    kb_hex_encode(md, len, hex);
out:
    EVP_MD_CTX_free(ctx);
    fclose(f);
    return rc;
}

/* ------------------------------------------------------------------ small */

char *kb_strdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

char *kb_strndup(const char *s, size_t n)
{
    return s ? strndup(s, n) : NULL;
}

int kb_utf8_cut(const char *s, size_t max)
{
    size_t n = strnlen(s, max);
    /* the last character's lead byte, within 4 bytes of the end */
    size_t start = n;
    while (start > 0 && n - start < 3 && ((unsigned char)s[start - 1] & 0xC0) == 0x80)
        start--;
    unsigned char lead = start > 0 ? (unsigned char)s[start - 1] : 0;
    size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
    if (lead >= 0xC0 && n - (start - 1) < want)
        n = start - 1;   /* its continuation bytes are past the end */
    return n > INT_MAX ? INT_MAX : (int)n;
}

char *kb_path_join(const char *a, const char *b)
{
    kb_buf p;
    kb_buf_init(&p, 0);
    size_t la = strlen(a);
    kb_rc rc = kb_buf_append(&p, a, la);
    if (rc == KB_OK && la && a[la - 1] != '/')
        rc = kb_buf_putc(&p, '/');
    while (*b == '/')
        b++;
    if (rc == KB_OK)
        rc = kb_buf_puts(&p, b);
    return kb_buf_finish(&p, rc);
}

char *kb_exe_dir(void)
{
    /* readlink does not say how long the target is: grow until it fits */
    for (size_t size = 256; size <= ((size_t)1 << 20); size *= 2) {
        char *path = malloc(size);
        if (!path)
            return NULL;
        ssize_t n = readlink("/proc/self/exe", path, size);
        if (n <= 0) {
            free(path);
            return NULL;
        }
        if ((size_t)n < size) {
            path[n] = '\0';
            char *slash = strrchr(path, '/');
            if (!slash) {
                free(path);
                return NULL;
            }
            if (slash == path)
                slash++;        /* "/kb" lives in "/", not "" */
            *slash = '\0';
            return path;
        }
        free(path);
    }
    return NULL;
}

/* The folder that holds path (a file), or NULL for no path. */
static char *dir_of(const char *path)
{
    if (!path || !*path)
        return NULL;
    const char *slash = strrchr(path, '/');
    if (!slash)
        return kb_strdup(".");
    return kb_strndup(path, slash == path ? 1 : (size_t)(slash - path));
}

size_t kb_data_dirs(const char *manifest, const char *built, char *dirs[KB_DATA_DIRS])
{
    char *exe = kb_exe_dir();
    char *cand[KB_DATA_DIRS] = {
        dir_of(manifest), kb_strdup("corpus"), dir_of(built),
        exe ? kb_path_join(exe, "../corpus") : NULL,
        exe ? kb_path_join(exe, "../share/kb") : NULL,
    };
    free(exe);
    size_t n = 0;
    for (size_t i = 0; i < KB_DATA_DIRS; i++) {
        /* beside the executable: a path without "..", for messages */
        char *real = i >= 3 && cand[i] ? realpath(cand[i], NULL) : NULL;
        if (real) {
            free(cand[i]);
            cand[i] = real;
        } else if (i >= 3) {
            free(cand[i]);      /* not there */
            cand[i] = NULL;
        }
        /* the same folder twice is looked at once */
        for (size_t j = 0; cand[i] && j < n; j++)
            if (strcmp(dirs[j], cand[i]) == 0) {
                free(cand[i]);
                cand[i] = NULL;
            }
        if (cand[i])
            dirs[n++] = cand[i];
    }
    return n;
}

char *kb_data_find(const char *name, const char *manifest, const char *built)
{
    char *dirs[KB_DATA_DIRS];
    size_t n = kb_data_dirs(manifest, built, dirs);
    char *found = NULL;
    for (size_t i = 0; i < n; i++) {
        char *p = found ? NULL : kb_path_join(dirs[i], name);
        if (p && access(p, F_OK) == 0)
            found = p;
        else
            free(p);
        free(dirs[i]);
    }
    return found;
}

double kb_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int kb_cpu_count(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 4096 ? 4096 : (int)n;
}

kb_rc kb_parse_long(const char *s, long min, long max, long *out)
{
    if (!s || !*s)
        return KB_ERR_USAGE;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end != '\0' || v < min || v > max)
        return KB_ERR_USAGE;
    *out = v;
    return KB_OK;
}

/* ------------------------------------------------------------------ logging */

static kb_log_level log_level = KB_LOG_INFO;
static char log_name[64];   /* "kb query": before a warning's "warning: " */

void kb_log_set_name(const char *name)
{
    snprintf(log_name, sizeof log_name, "%s", name ? name : "");
}

void kb_log_set_level(kb_log_level level) { log_level = level; }
kb_log_level kb_log_get_level(void) { return log_level; }

void kb_fput_line_safe(FILE *f, const char *s)
{
    for (const char *run = s;; s++) {
        unsigned char c = (unsigned char)*s;
        if (c && (c >= 0x20 || c == '\t') && c != 0x7F)
            continue;
        fwrite(run, 1, (size_t)(s - run), f);
        if (!c)
            return;
        if (c == '\n')
            fputs("\\n", f);
        else
            fprintf(f, "\\x%02x", c);
        run = s + 1;
    }
}

/* One line on stderr: what it quotes (a file name holding a line feed or
 * an escape sequence) is escaped, never obeyed by the terminal. */
static void log_v(const char *prefix, const char *fmt, va_list ap)
{
    char small[1024];
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(small, sizeof small, fmt, aq);
    va_end(aq);
    char *big = n >= (int)sizeof small ? malloc((size_t)n + 1) : NULL;
    if (big)
        vsnprintf(big, (size_t)n + 1, fmt, ap);
    fputs(prefix, stderr);
    kb_fput_line_safe(stderr, big ? big : small);
    fputc('\n', stderr);
    free(big);
}

void kb_log_info(const char *fmt, ...)
{
    if (log_level < KB_LOG_INFO)
        return;
    va_list ap;
    va_start(ap, fmt);
    log_v("", fmt, ap);
    va_end(ap);
}

void kb_log_debug(const char *fmt, ...)
{
    if (log_level < KB_LOG_DEBUG)
        return;
    va_list ap;
    va_start(ap, fmt);
    log_v("debug: ", fmt, ap);
    va_end(ap);
}

void kb_log_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (log_name[0])
        fprintf(stderr, "%s: ", log_name);
    log_v("warning: ", fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------ UTF-8 */

/* The length of the valid UTF-8 sequence at s (n bytes left), 0 if none. */
static size_t utf8_step(const char *s, size_t n)
{
    utf8proc_int32_t c;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s,
                                          (utf8proc_ssize_t)n, &c);
    return k > 0 ? (size_t)k : 0;
}

int kb_utf8_valid(const char *s, size_t n)
{
    for (size_t k; n; s += k, n -= k)
        if (!(k = utf8_step(s, n)))
            return 0;
    return 1;
}

kb_rc kb_utf8_repair(const char *s, size_t n, kb_buf *out, size_t *replaced)
{
    kb_rc rc = KB_OK;
    size_t bad = 0;
    while (n && rc == KB_OK) {
        size_t run = 0, k;   /* the valid bytes, appended in one go */
        while (run < n && (k = utf8_step(s + run, n - run)) != 0)
            run += k;
        rc = kb_buf_append(out, s, run);
        s += run;
        n -= run;
        if (n && rc == KB_OK) {
            rc = kb_buf_puts(out, "\xef\xbf\xbd");
            bad++;
            s++;
            n--;
        }
    }
    if (replaced)
        *replaced = bad;
    return rc;
}

int kb_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

uint64_t kb_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ULL;
    }
    return h;
}
