/*
 * test_util.h - what the unit tests share: where the tree and the mirror
 * are, temporary directories, fixture files written and read (one JSON
 * value a line too), vectors' cosine, a fresh KB,
 * appends that cannot fail unnoticed, and (after ingest/ingest_int.h) the
 * parsed document's block finders.
 *
 * Each test is one translation unit, so everything here is static inline.
 * The helpers assert: a broken fixture fails the test where it happens.
 * Paths they return are the caller's to free.
 */
#ifndef KB_TEST_UTIL_H
#define KB_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <ftw.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <time.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kb/kb_int.h"
#include "kb/kb.h"

/* ------------------------------------------------------------ loopback */

/* A socket bound to 127.0.0.1 on a free port, listening or not (a port
 * bound and never listening refuses connections); -1 on failure. */
static inline int tu_bind_local(int listening, unsigned *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        (listening && listen(fd, 8) != 0) ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

/* ------------------------------------------------------------ places */

/* The top of the tree: $KB_TOP (tests/run.sh sets it), else ".". */
static inline const char *tu_top(void)
{
    const char *t = getenv("KB_TOP");
    return t && *t ? t : ".";
}

/* tests/fixtures/ under the top of the tree, then the path that fmt
 * makes ("cuda/kernels.cu", "md/%s") (caller frees). */
static inline char *tu_fixture(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static inline char *tu_fixture(const char *fmt, ...)
{
    kb_buf p;
    kb_buf_init(&p, 0);
    assert_int_equal(kb_buf_printf(&p, "%s/tests/fixtures/", tu_top()), KB_OK);
    va_list ap;
    va_start(ap, fmt);
    kb_rc rc = kb_buf_vprintf(&p, fmt, ap);
    va_end(ap);
    assert_int_equal(rc, KB_OK);
    char *path = kb_buf_detach(&p);
    assert_non_null(path);
    return path;
}

/* The mirror of the real documents ($KB_MIRROR), or NULL when it is unset
 * or missing (the test then says "skipped: ..."). */
static inline const char *tu_mirror(void)
{
    const char *m = getenv("KB_MIRROR");
    struct stat st;
    if (!m || !*m || stat(m, &st) != 0)
        return NULL;
    return m;
}

/* REL under the mirror if it is there (caller frees), else NULL. */
static inline char *tu_mirror_path(const char *rel)
{
    const char *m = tu_mirror();
    if (!m)
        return NULL;
    char *p = kb_path_join(m, rel);
    assert_non_null(p);
    if (access(p, R_OK) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

/* The model directory as kb_config resolves it, the one rule the CLI
 * follows (caller frees; NULL, having said why, on a bad environment). */
static inline char *tu_model_dir(void)
{
    kb_config cfg;
    kb_err err;
    kb_err_clear(&err);
    if (kb_config_load(&cfg, &err) != KB_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    char *dir = kb_strdup(cfg.model_dir);
    kb_config_release(&cfg);
    return dir;
}

/* 1 (having said "skipped: ...") when KB_MODEL_DIR is set but empty: the
 * model is deliberately absent. */
static inline int tu_no_model(void)
{
    const char *env = getenv("KB_MODEL_DIR");
    if (env && !*env) {
        printf("skipped: KB_MODEL_DIR is empty\n");
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------ files */

/* A fresh directory /tmp/kb-test-NAME-XXXXXX (caller removes it with
 * tu_rmtree and frees the name). */
static inline char *tu_tmpdir(const char *name)
{
    kb_buf p;
    kb_buf_init(&p, 0);
    assert_int_equal(kb_buf_printf(&p, "/tmp/kb-test-%s-XXXXXX", name), KB_OK);
    char *dir = kb_buf_detach(&p);
    assert_non_null(dir);
    if (!mkdtemp(dir))
        fail_msg("cannot make a directory from '%s'", dir);
    return dir;
}

static inline int tu_rm_entry(const char *path, const struct stat *sb, int flag,
                              struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path) == 0 ? 0 : -1;
}

/* rm -rf dir (no shell); a missing dir is nothing to do. */
static inline void tu_rmtree(const char *dir)
{
    struct stat st;
    if (lstat(dir, &st) != 0)
        return;
    if (nftw(dir, tu_rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fail_msg("cannot remove '%s'", dir);
}

/* Writes len bytes of data to path, replacing what was there. */
static inline void tu_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        fail_msg("cannot write '%s'", path);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* Writes text to DIR/NAME; returns the path (caller frees). */
static inline char *tu_write_fixture(const char *dir, const char *name,
                                     const char *text)
{
    char *p = kb_path_join(dir, name);
    assert_non_null(p);
    tu_write_file(p, text, strlen(text));
    return p;
}

/* Appends the whole file at path to out (up to max bytes; 0: no limit). */
static inline void tu_read_file(const char *path, size_t max, kb_buf *out)
{
    kb_err err;
    kb_err_clear(&err);
    if (kb_read_file(path, max, out, &err) != KB_OK)
        fail_msg("%s", err.msg);
}

/* A fixture of one JSON value a line (parity/tokens.jsonl), read in
 * turn: tu_jsonl_next gives the next line's value (freeing the one before)
 * until NULL at the end, where the file is closed:
 *     tu_jsonl r;
 *     tu_jsonl_open(&r, "parity/tokens.jsonl");
 *     for (cJSON *j; (j = tu_jsonl_next(&r)) != NULL;) ...
 * A line that is no JSON fails the test. */
typedef struct {
    FILE *f;
    char *line;
    size_t cap;
    cJSON *j;
} tu_jsonl;

static inline void tu_jsonl_open(tu_jsonl *r, const char *rel)
{
    char *path = tu_fixture("%s", rel);
    memset(r, 0, sizeof *r);
    if (!(r->f = fopen(path, "r")))
        fail_msg("cannot open '%s'", path);
    free(path);
}

static inline cJSON *tu_jsonl_next(tu_jsonl *r)
{
    cJSON_Delete(r->j);
    r->j = NULL;
    ssize_t len = r->f ? getline(&r->line, &r->cap, r->f) : -1;
    if (len > 0) {
        if (!(r->j = cJSON_ParseWithLength(r->line, (size_t)len)))
            fail_msg("a fixture line that is no JSON: %s", r->line);
        return r->j;
    }
    if (r->f)
        fclose(r->f);
    free(r->line);
    memset(r, 0, sizeof *r);
    return NULL;
}

/* The cosine of the n-vectors a and b, summed in double. */
/* the process's CPU time in ms (every thread's, BLAS's included): a
   latency bound measured in it holds on a loaded machine, where wall
   time counts the other processes' turns */
static inline double tu_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline double tu_cosine(const float *a, const float *b, size_t n)
{
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return ab / sqrt(aa * bb);
}

/* ------------------------------------------------------------ the KB */

/* A new, empty KB in dir (created as needed); close with kb_store_close. */
static inline kb_store *tu_open_kb(const char *dir)
{
    kb_store *s = NULL;
    kb_err err;
    kb_err_clear(&err);
    if (kb_store_open(dir, KB_STORE_CREATE, &s, &err) != KB_OK)
        fail_msg("cannot open a KB in '%s': %s", dir, err.msg);
    return s;
}

/* ------------------------------------------------------------ servers */

/* Starts argv (argv[0] found on PATH) as a child whose stdout's first
 * line is what it has to say once it serves (a port, or "skipped: ...");
 * that line, without its newline, goes into line (n bytes), waiting at
 * most timeout_ms. Returns the child's pid (the caller kills and reaps
 * it). */
static inline pid_t tu_spawn_line(char *const argv[], char *line, size_t n, int timeout_ms)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(p[1]);
    size_t len = 0;
    struct pollfd pf = { p[0], POLLIN, 0 };
    while (len < n - 1 && poll(&pf, 1, timeout_ms) > 0) {
        ssize_t k = read(p[0], line + len, 1);
        if (k <= 0 || line[len] == '\n')
            break;
        len++;
    }
    line[len] = '\0';
    close(p[0]);
    return pid;
}

/* tu_spawn_line for a server that prints its port: the port, or the test
 * fails naming what the child printed instead. */
static inline unsigned tu_spawn_port(char *const argv[], pid_t *pid)
{
    char line[64] = "";
    *pid = tu_spawn_line(argv, line, sizeof line, 20000);
    long port;
    if (kb_parse_long(line, 1, 65535, &port) != KB_OK)
        fail_msg("%s did not start (it printed '%s')", argv[1] ? argv[1] : argv[0], line);
    return (unsigned)port;
}

/* ------------------------------------------------------------ buffers */

/* Appends that fail the test rather than cut the text. */
static inline void tu_puts(kb_buf *b, const char *s)
{
    assert_int_equal(kb_buf_puts(b, s), KB_OK);
}

static inline void tu_printf(kb_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void tu_printf(kb_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kb_rc rc = kb_buf_vprintf(b, fmt, ap);
    va_end(ap);
    assert_int_equal(rc, KB_OK);
}

/* ------------------------------------------------------------ documents */

#ifdef KB_INGEST_INT_H
/* Reads the file at path (the test fails if it cannot) and parses it into
 * doc (initialised here; the caller releases it) with parse, timed into
 * *ms if given. The bytes go to raw if given (the caller releases them),
 * else are freed. err may be NULL. Returns the parser's code. */
static inline kb_rc tu_parse_file(kb_parse_fn parse, const char *path, kb_doc *doc,
                                  kb_buf *raw, kb_err *err, double *ms)
{
    kb_err local;
    if (!err)
        err = &local;
    kb_buf b;
    kb_buf_init(&b, 0);
    tu_read_file(path, 0, &b);
    kb_doc_init(doc);
    kb_err_clear(err);
    double t0 = kb_now_ms();
    kb_rc rc = parse(b.data ? b.data : "", b.len, path, doc, err);
    if (ms)
        *ms = kb_now_ms() - t0;
    if (raw)
        *raw = b;
    else
        kb_buf_release(&b);
    return rc;
}

/* Parses tests/fixtures/REL into doc; the test fails on an error. */
static inline void tu_parse_fixture(kb_parse_fn parse, const char *rel, kb_doc *doc)
{
    char *path = tu_fixture("%s", rel);
    kb_err err;
    if (tu_parse_file(parse, path, doc, NULL, &err, NULL) != KB_OK)
        fail_msg("%s: %s", path, err.msg);
    free(path);
}

/* The first block whose text contains needle, or NULL. */
static inline const kb_block *tu_block_with(const kb_doc *doc, const char *needle)
{
    for (size_t i = 0; i < doc->nblocks; i++)
        if (strstr(doc->blocks[i].text, needle))
            return &doc->blocks[i];
    return NULL;
}

/* The first block of this kind whose text contains needle, or NULL. */
static inline const kb_block *tu_find(const kb_doc *doc, kb_kind kind,
                                      const char *needle)
{
    for (size_t i = 0; i < doc->nblocks; i++)
        if (doc->blocks[i].kind == kind && strstr(doc->blocks[i].text, needle))
            return &doc->blocks[i];
    return NULL;
}

/* How many blocks of this kind doc holds. */
static inline size_t tu_count_kind(const kb_doc *doc, kb_kind kind)
{
    size_t n = 0;
    for (size_t i = 0; i < doc->nblocks; i++)
        n += doc->blocks[i].kind == kind;
    return n;
}
#endif

#endif
