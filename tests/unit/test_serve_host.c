/* test_serve_host.c - who else uses this host (serve/host.c,
 * kb_serve_host_users_find), on passwd, login.defs and /proc trees made
 * here: the accounts that count (a person's uid, a login shell, not self,
 * not nobody, a login service running), UID_MIN read from login.defs, and
 * the processes of users the passwd database does not list. */
#include "serve/serve.h"
#include "test_util.h"

#include <sys/stat.h>

static char *dir;

static int setup(void **state)
{
    (void)state;
    dir = tu_tmpdir("host");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rmtree(dir);
    free(dir);
    return 0;
}

typedef struct {
    int pid;             /* 0 ends a list */
    const char *name;
    unsigned uid;
} process;

/* dir/name as a /proc holding ps. Caller frees. */
static char *proc_tree(const char *name, const process *ps)
{
    char *proc = kb_path_join(dir, name);
    assert_int_equal(mkdir(proc, 0755), 0);
    for (; ps->pid; ps++) {
        char path[512], text[256];
        snprintf(path, sizeof path, "%s/%d", proc, ps->pid);
        assert_int_equal(mkdir(path, 0755), 0);
        snprintf(text, sizeof text, "Name:\t%s\nState:\tS\nUid:\t%u\t%u\t%u\t%u\n",
                 ps->name, ps->uid, ps->uid, ps->uid, ps->uid);
        free(tu_write_fixture(path, "status", text));
    }
    return proc;
}

/* kb_serve_host_users_find, which must succeed. */
static kb_serve_host_users find(const char *pw, const char *proc, const char *defs,
                                uid_t self)
{
    kb_serve_host_users u;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_serve_host_users_find(pw, proc, defs, self, &u, &err), KB_OK);
    return u;
}

static const char passwd_shared[] =
    "root:x:0:0:root:/root:/bin/bash\n"
    "me:x:1000:1000::/home/me:/bin/bash\n"
    "alice:x:1002:1002::/home/alice:/bin/zsh\n"
    "bob:x:1003:1003::/home/bob:\n";

static void test_alone(void **state)
{
    (void)state;
    /* root, daemons, nobody, self and a locked-out person: nobody else */
    char *pw = tu_write_fixture(dir, "passwd",
        "root:x:0:0:root:/root:/bin/bash\n"
        "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        "me:x:1000:1000::/home/me:/bin/bash\n"
        "gone:x:1001:1001::/home/gone:/bin/false\n");
    char *proc = proc_tree("proc", (const process[]){
        { 1, "systemd", 0 }, { 2, "sshd", 0 }, { 20, "bash", 1000 }, { 21, "sh", 65534 },
        { 0, NULL, 0 } });
    kb_serve_host_users u = find(pw, proc, "/nonexistent", 1000);
    assert_int_equal(u.accounts, 0);
    assert_int_equal(u.running, 0);
    assert_string_equal(u.example, "");
    free(pw);
    free(proc);
}

static void test_shared(void **state)
{
    (void)state;
    char *pw = tu_write_fixture(dir, "passwd2", passwd_shared);
    char *proc = proc_tree("proc2", (const process[]){
        { 1, "systemd", 0 }, { 9, "systemd-logind", 0 }, { 30, "zsh", 1002 },
        { 31, "vim", 1002 },
        { 32, "sh", 4242 },   /* a user the passwd database does not list */
        { 0, NULL, 0 } });
    kb_serve_host_users u = find(pw, proc, "/nonexistent", 1000);
    assert_int_equal(u.accounts, 2);   /* alice, and bob's empty shell is /bin/sh */
    assert_int_equal(u.running, 2);    /* alice's two processes count once */
    assert_string_equal(u.example, "alice");
    /* root on the same host sees me too */
    u = find(pw, proc, "/nonexistent", 0);
    assert_int_equal(u.accounts, 3);
    /* UID_MIN from login.defs: people from 2000 on, so only uid 4242 */
    char *defs = tu_write_fixture(dir, "login.defs", "# comment\nUID_MIN\t\t 2000\nUID_MAX 60000\n");
    u = find(pw, proc, defs, 1000);
    assert_int_equal(u.accounts, 0);
    assert_int_equal(u.running, 1);
    assert_string_equal(u.example, "uid 4242");
    /* an unreadable passwd file is an error that names it */
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_serve_host_users_find("/nonexistent/passwd", proc, NULL, 0, &u, &err),
                     KB_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/passwd"));
    free(pw);
    free(proc);
    free(defs);
}

/* A container (a CI job's, run as root): its image's accounts are no one's
 * while nothing there logs people in; its processes of others still count,
 * and so do the accounts once sshd runs or /proc cannot say (process 1
 * hidden from this user, hidepid). */
static void test_container(void **state)
{
    (void)state;
    char *pw = tu_write_fixture(dir, "passwd3", passwd_shared);
    char *ci = proc_tree("ci", (const process[]){
        { 1, "sh", 0 }, { 7, "make", 0 }, { 0, NULL, 0 } });
    kb_serve_host_users u = find(pw, ci, "/nonexistent", 0);
    assert_int_equal(u.accounts, 0);
    assert_int_equal(u.running, 0);
    assert_string_equal(u.example, "");
    char *busy = proc_tree("ci-busy", (const process[]){
        { 1, "sh", 0 }, { 8, "sh", 4242 }, { 0, NULL, 0 } });
    u = find(pw, busy, "/nonexistent", 0);
    assert_int_equal(u.accounts, 0);
    assert_int_equal(u.running, 1);
    assert_string_equal(u.example, "uid 4242");
    char *ssh = proc_tree("ci-ssh", (const process[]){
        { 1, "sh", 0 }, { 5, "sshd", 0 }, { 0, NULL, 0 } });
    u = find(pw, ssh, "/nonexistent", 0);
    assert_int_equal(u.accounts, 3);
    assert_string_equal(u.example, "me");
    char *hidden = proc_tree("hidepid", (const process[]){
        { 40, "bash", 1000 }, { 0, NULL, 0 } });
    u = find(pw, hidden, "/nonexistent", 1000);
    assert_int_equal(u.accounts, 2);
    assert_int_equal(u.running, 0);
    free(pw);
    free(ci);
    free(busy);
    free(ssh);
    free(hidden);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alone),
        cmocka_unit_test(test_shared),
        cmocka_unit_test(test_container),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
