/* fuzz_skill_dir.c - a skill folder as a contributor could make it, read
 * by every reader of the library (issue 28 items 1-3): the input is a
 * script of entries, each "=== KIND PATH [ARG]" then its bytes up to the
 * next such line - file PATH (the bytes), dir PATH, link PATH TARGET (any
 * target), big PATH MIB (a sparse file), many PATH N (N small files),
 * fifo PATH - made in a skill
 * folder of a library inside a repository (a .git), beside a secret file
 * outside it. The library is loaded (lint's checks), served (the
 * servers' resources) and exported; whatever the folder holds, nothing
 * outside the repository is read or exported, nothing over the limits is
 * served, a FIFO never blocks, and each reader returns. */
#include "tests/fuzz/fuzz.h"
#include "skills/skill.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>

#define SECRET "SECRET-fuzz-marker-28"
#define ENTRIES_MAX 64

static char top[128], lib[192], skill[256], out[192];

static void setup(void)
{
    if (top[0])
        return;
    /* tmpfs where there is one: export's fsyncs cost nothing there */
    snprintf(top, sizeof top, "%s/kb-fuzz-skill-%ld",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (long)getpid());
    snprintf(lib, sizeof lib, "%s/repo/corpus/skills", top);
    snprintf(skill, sizeof skill, "%s/s1", lib);
    snprintf(out, sizeof out, "%s/out", top);
    char p[256];
    kb_err err;
    kb_err_clear(&err);
    fuzz_check(kb_mkdirs(lib, &err) == KB_OK);
    snprintf(p, sizeof p, "%s/repo/.git", top);
    fuzz_check(mkdir(p, 0700) == 0 || access(p, F_OK) == 0);
    snprintf(p, sizeof p, "%s/secret", top);
    fuzz_check(kb_write_file_atomic(p, SECRET "\n", strlen(SECRET) + 1, &err) == KB_OK);
    snprintf(p, sizeof p, "%s/repo/corpus/inside.txt", top);
    fuzz_check(kb_write_file_atomic(p, "inside\n", 7, &err) == KB_OK);
}

static void cleanup(void)
{
    if (top[0])
        kb_rmtree(top);
}

/* A path inside the skill folder: [a-zA-Z0-9._-] parts, no "..", at most
 * three deep; 0 if name is not one. */
static int safe_path(const char *name, char *path, size_t cap)
{
    if (!*name || strlen(name) > 80 || name[0] == '/' || strstr(name, ".."))
        return 0;
    int depth = 0;
    for (const char *c = name; *c; c++) {
        if (*c == '/')
            depth++;
        else if (!(*c == '.' || *c == '_' || *c == '-' || (*c >= '0' && *c <= '9') ||
                   (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
            return 0;
    }
    snprintf(path, cap, "%s/%s", skill, name);
    return depth <= 3;
}

/* Makes one entry: its header line [h, he), its bytes [b, be). */
static void make_entry(const char *h, const char *he, const char *b, const char *be)
{
    char line[256], kind[16] = "", name[128] = "", arg[256] = "", path[512];
    size_t n = (size_t)(he - h) < sizeof line - 1 ? (size_t)(he - h) : sizeof line - 1;
    memcpy(line, h, n);
    line[n] = '\0';
    if (sscanf(line, "%15s %127s %255s", kind, name, arg) < 2 ||
        !safe_path(name, path, sizeof path))
        return;
    /* its folders, made as needed, never through a link: an entry must
     * not write through a link it made (to /etc) */
    for (char *q = path + strlen(skill) + 1; (q = strchr(q, '/')) != NULL; q++) {
        struct stat st;
        *q = '\0';
        int ok = (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) ||
                 (errno == ENOENT && mkdir(path, 0755) == 0);
        *q = '/';
        if (!ok)
            return;
    }
    if (strcmp(kind, "file") == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK, 0644);
        if (fd >= 0) {
            if (write(fd, b, (size_t)(be - b)) < 0)
                (void)0;
            close(fd);
        }
    } else if (strcmp(kind, "dir") == 0) {
        mkdir(path, 0755);
    } else if (strcmp(kind, "link") == 0 && arg[0]) {
        if (symlink(arg, path) != 0)
            (void)0;
    } else if (strcmp(kind, "big") == 0) {
        long mib = atol(arg);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK, 0644);
        if (fd >= 0) {
            if (ftruncate(fd, (off_t)(mib < 0 ? 0 : mib > 24 ? 24 : mib) << 20) != 0)
                (void)0;
            close(fd);
        }
    } else if (strcmp(kind, "fifo") == 0) {
        mkfifo(path, 0644);
    } else if (strcmp(kind, "many") == 0) {
        long k = atol(arg);                 /* PATH0 .. PATHk-1, one byte each */
        for (long i = 0; i < (k < 0 ? 0 : k > 600 ? 600 : k); i++) {
            char f[600];
            snprintf(f, sizeof f, "%s%ld", path, i);
            int fd = open(f, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK, 0644);
            if (fd >= 0 && write(fd, "x", 1) < 0)
                (void)0;
            if (fd >= 0)
                close(fd);
        }
    }
}

static void build(const char *data, size_t size)
{
    kb_rmtree(skill);
    kb_rmtree(out);
    mkdir(skill, 0755);
    const char *end = data + size, *h = NULL, *he = NULL, *p = data;
    int entries = 0;
    while (p <= end && entries < ENTRIES_MAX) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        if (le - p >= 4 && memcmp(p, "=== ", 4) == 0) {
            if (h) {
                make_entry(h, he, he + 1 <= p ? he + 1 : p, p > he + 1 ? p - 1 : p);
                entries++;
            }
            h = p + 4;
            he = le;
        }
        if (!nl)
            break;
        p = nl + 1;
    }
    if (h && entries < ENTRIES_MAX)
        make_entry(h, he, he < end ? he + 1 : end, end);
}

/* 1 if the file at path (not followed) holds the secret. */
static int holds_secret(const char *path)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    int found = 0;
    if (fd >= 0) {
        char buf[4096];
        ssize_t n;
        while (!found && (n = read(fd, buf, sizeof buf - 1)) > 0) {
            buf[n] = '\0';
            found = memmem(buf, (size_t)n, SECRET, strlen(SECRET)) != NULL;
        }
        close(fd);
    }
    return found;
}

/* Nothing in the export tree at dir holds the secret (unless the input
 * wrote it itself: marked), and nothing is a link. */
static void check_export(const char *dir, int marked)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        fuzz_check(lstat(p, &st) == 0);
        fuzz_check(!S_ISLNK(st.st_mode));
        if (S_ISDIR(st.st_mode))
            check_export(p, marked);
        else
            fuzz_check(marked || !holds_secret(p));
    }
    closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    static int registered;
    if (!registered++)
        atexit(cleanup);
    build((const char *)data, size);
    /* an input may write the marker into a skill file itself (libFuzzer
     * learns it from the checks' memmem): then where a copy came from
     * cannot be told, and the files' real paths below are what check it */
    int marked = memmem(data, size, SECRET, strlen(SECRET)) != NULL;
    kb_err err;
    kb_err_clear(&err);
    kb_skill_lib l;
    kb_skill_lib_init(&l);
    kb_skill_diags d;
    kb_skill_diags_init(&d);
    fuzz_check(kb_skill_lib_load(lib, &l, &d, &err) == KB_OK);
    for (size_t i = 0; i < l.n; i++) {
        const kb_skill_entry *e = &l.items[i];
        if (!e->files.over) {
            fuzz_check(e->files.nfiles <= KB_SKILL_FILES_MAX);
            fuzz_check(e->files.bytes <= KB_SKILL_BYTES_MAX);
        }
        for (size_t j = 0; j < e->files.n; j++) {
            char *real = realpath(e->files.items[j].path, NULL);
            fuzz_check(real && strncmp(real, top, strlen(top)) == 0 &&
                       strncmp(real + strlen(top), "/repo/", 6) == 0);
            free(real);
        }
        if (e->ok)
            fuzz_check(kb_skill_check(&e->skill, &d) == KB_OK);
    }
    fuzz_check(kb_skill_lib_check(&l, &d) == KB_OK);
    kb_skill_pub *pub = NULL;
    kb_err_clear(&err);
    fuzz_check(kb_skill_pub_load(lib, &pub, &err) == KB_OK);
    for (size_t i = 0; i < pub->n; i++) {
        size_t total = 0;
        fuzz_check(pub->items[i].nfiles <= KB_SKILL_FILES_MAX);
        for (size_t j = 0; j < pub->items[i].nfiles; j++) {
            const kb_skill_pub_file *f = &pub->items[i].files[j];
            total += f->size;
            fuzz_check(marked || !memmem(f->data, f->size, SECRET, strlen(SECRET)));
        }
        fuzz_check(total <= KB_SKILL_BYTES_MAX);
    }
    kb_skill_pub_free(pub);
    size_t n = 0;
    kb_err_clear(&err);
    kb_rc rc = kb_skill_export(&l, out, KB_SKILL_VERIFIED, &n, &d, &err);
    fuzz_check(rc == KB_OK || rc == KB_ERR_PARTIAL || rc == KB_ERR_IO);
    check_export(out, marked);
    kb_skill_diags_release(&d);
    kb_skill_lib_release(&l);
    return 0;
}
