/* host.c - who else uses this machine (serve.h, "host.c"): a server on a
 * loopback address without a token answers every local user, so `kb serve`
 * says so when the host has others - people who can log in, or who run
 * processes now; not the accounts of a container's image. */
#include "serve/serve.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UID_MIN_DEFAULT 1000u
#define UID_NOBODY 65534u

/* UID_MIN of login.defs(5) at path: where the accounts of people begin
 * (1000 when the file or the line is not there). */
static unsigned uid_min(const char *path)
{
    FILE *f = fopen(path, "re");
    unsigned v = UID_MIN_DEFAULT;
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        const char *p = line + strspn(line, " \t");
        if (strncmp(p, "UID_MIN", 7) != 0 || !isspace((unsigned char)p[7]))
            continue;
        char *end;
        unsigned long n = strtoul(p + 7, &end, 10);
        if (end != p + 7 && n > 0 && n < UID_NOBODY)
            v = (unsigned)n;
    }
    if (f)
        fclose(f);
    return v;
}

/* 1 for a uid that belongs to another person: at least min, not nobody,
 * not self. */
static int other_person(uid_t uid, uid_t self, unsigned min)
{
    return uid != self && uid >= min && uid != UID_NOBODY;
}

/* 1 if shell lets its account log in (not nologin, not false). */
static int login_shell(const char *shell)
{
    if (!shell || !*shell)
        return 1;   /* passwd(5): empty is /bin/sh */
    const char *base = strrchr(shell, '/');
    base = base ? base + 1 : shell;
    return strcmp(base, "nologin") != 0 && strcmp(base, "false") != 0;
}

static void note(kb_serve_host_users *out, const char *name)
{
    if (!out->example[0] && name)
        snprintf(out->example, sizeof out->example, "%s", name);
}

/* The accounts of the passwd database: the system's (NSS) or a file. */
static kb_rc count_accounts(const char *passwd, uid_t self, unsigned min,
                            kb_serve_host_users *out, kb_err *err)
{
    FILE *f = NULL;
    if (passwd && !(f = fopen(passwd, "re")))
        return kb_err_set(err, KB_ERR_IO, "cannot open '%s': %s", passwd, strerror(errno));
    if (!f)
        setpwent();
    for (struct passwd *pw; (pw = f ? fgetpwent(f) : getpwent());)
        if (other_person(pw->pw_uid, self, min) && login_shell(pw->pw_shell)) {
            out->accounts++;
            note(out, pw->pw_name);
        }
    if (f)
        fclose(f);
    else
        endpwent();
    return KB_OK;
}

/* What logs people in: a process of one of these names means the accounts
 * of the passwd database can be used (sshd's listener and its sessions,
 * systemd-logind, a getty, login, a display manager). A container runs
 * none, and its image's accounts (ubuntu, node, ...) are no one's. */
static const char *const login_services[] = {
    "sshd", "sshd-session", "dropbear", "systemd-logind", "login", "agetty", "getty",
    "mingetty", "gdm", "gdm3", "lightdm", "sddm", "xrdp", "in.telnetd", NULL
};

/* The name and real uid of the process whose status file is path; 0 if
 * unread. */
static int read_status(const char *path, char name[16], long *uid)
{
    FILE *f = fopen(path, "re");
    char line[256];
    name[0] = '\0';
    *uid = -1;
    while (f && *uid < 0 && fgets(line, sizeof line, f))
        if (strncmp(line, "Name:", 5) == 0) {
            const char *v = line + 5 + strspn(line + 5, " \t");
            snprintf(name, 16, "%.*s", (int)strcspn(v, "\n"), v);
        } else if (strncmp(line, "Uid:", 4) == 0) {
            *uid = strtol(line + 4, NULL, 10);
        }
    if (f)
        fclose(f);
    return *uid >= 0;
}

static int login_service(const char *name)
{
    for (size_t i = 0; login_services[i]; i++)
        if (strcmp(name, login_services[i]) == 0)
            return 1;
    return 0;
}

/* The other people with processes under proc now (distinct uids). Returns
 * 1 when people can log in: a login service runs, or proc cannot tell
 * (not there, or process 1 hidden from this user: hidepid). */
static int count_running(const char *proc, uid_t self, unsigned min,
                         kb_serve_host_users *out)
{
    DIR *d = opendir(proc);
    if (!d)
        return 1;   /* no /proc: nothing to add, nothing known */
    uid_t seen[64];
    size_t nseen = 0;
    int logins = 0, init_seen = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        char path[512], name[16];
        long uid;
        snprintf(path, sizeof path, "%s/%s/status", proc, e->d_name);
        if (!read_status(path, name, &uid))
            continue;
        init_seen |= strcmp(e->d_name, "1") == 0;
        logins |= login_service(name);
        if (!other_person((uid_t)uid, self, min))
            continue;
        size_t i = 0;
        while (i < nseen && seen[i] != (uid_t)uid)
            i++;
        if (i < nseen)
            continue;
        if (nseen < sizeof seen / sizeof seen[0])
            seen[nseen++] = (uid_t)uid;
        out->running++;
        if (!out->example[0]) {
            struct passwd *pw = getpwuid((uid_t)uid);
            char num[32];
            snprintf(num, sizeof num, "uid %ld", uid);
            note(out, pw ? pw->pw_name : num);
        }
    }
    closedir(d);
    return logins || !init_seen;
}

kb_rc kb_serve_host_users_find(const char *passwd, const char *proc,
                               const char *login_defs, uid_t self,
                               kb_serve_host_users *out, kb_err *err)
{
    memset(out, 0, sizeof *out);
    unsigned min = uid_min(login_defs ? login_defs : "/etc/login.defs");
    kb_serve_host_users accounts = { 0 }, running = { 0 };
    kb_rc rc = count_accounts(passwd, self, min, &accounts, err);
    if (rc != KB_OK)
        return rc;
    if (count_running(proc ? proc : "/proc", self, min, &running)) {
        out->accounts = accounts.accounts;
        note(out, accounts.example);
    }
    out->running = running.running;
    note(out, running.example);
    return KB_OK;
}
