/* test_serve_host.c - who else uses this host (serve/host.c,
 * kb_serve_host_users_find), on passwd, login.defs and /proc trees made
 * here: the accounts that count (a person's uid, a login shell, not self,
 * not nobody), UID_MIN read from login.defs, and the processes of users
 * the passwd database does not list. */
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

/* A process of uid under dir/proc/pid/status. */
static void process(const char *proc, int pid, unsigned uid)
{
    char path[512], text[256];
    snprintf(path, sizeof path, "%s/%d", proc, pid);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(text, sizeof text, "Name:\tsh\nState:\tS\nUid:\t%u\t%u\t%u\t%u\n", uid, uid,
             uid, uid);
    free(tu_write_fixture(path, "status", text));
}

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
    char *proc = kb_path_join(dir, "proc");
    assert_int_equal(mkdir(proc, 0755), 0);
    process(proc, 1, 0);
    process(proc, 20, 1000);
    process(proc, 21, 65534);
    kb_serve_host_users u;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_serve_host_users_find(pw, proc, "/nonexistent", 1000, &u, &err),
                     KB_OK);
    assert_int_equal(u.accounts, 0);
    assert_int_equal(u.running, 0);
    assert_string_equal(u.example, "");
    free(pw);
    free(proc);
}

static void test_shared(void **state)
{
    (void)state;
    char *pw = tu_write_fixture(dir, "passwd2",
        "root:x:0:0:root:/root:/bin/bash\n"
        "me:x:1000:1000::/home/me:/bin/bash\n"
        "alice:x:1002:1002::/home/alice:/bin/zsh\n"
        "bob:x:1003:1003::/home/bob:\n");
    char *proc = kb_path_join(dir, "proc2");
    assert_int_equal(mkdir(proc, 0755), 0);
    process(proc, 30, 1002);
    process(proc, 31, 1002);
    process(proc, 32, 4242);   /* a user the passwd database does not list */
    kb_serve_host_users u;
    kb_err err;
    kb_err_clear(&err);
    assert_int_equal(kb_serve_host_users_find(pw, proc, "/nonexistent", 1000, &u, &err),
                     KB_OK);
    assert_int_equal(u.accounts, 2);   /* alice, and bob's empty shell is /bin/sh */
    assert_int_equal(u.running, 2);    /* alice's two processes count once */
    assert_string_equal(u.example, "alice");
    /* root on the same host sees me too */
    assert_int_equal(kb_serve_host_users_find(pw, proc, "/nonexistent", 0, &u, &err), KB_OK);
    assert_int_equal(u.accounts, 3);
    /* UID_MIN from login.defs: people from 2000 on, so only uid 4242 */
    char *defs = tu_write_fixture(dir, "login.defs", "# comment\nUID_MIN\t\t 2000\nUID_MAX 60000\n");
    assert_int_equal(kb_serve_host_users_find(pw, proc, defs, 1000, &u, &err), KB_OK);
    assert_int_equal(u.accounts, 0);
    assert_int_equal(u.running, 1);
    assert_string_equal(u.example, "uid 4242");
    /* an unreadable passwd file is an error that names it */
    assert_int_equal(kb_serve_host_users_find("/nonexistent/passwd", proc, NULL, 0, &u, &err),
                     KB_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/passwd"));
    free(pw);
    free(proc);
    free(defs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alone),
        cmocka_unit_test(test_shared),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
