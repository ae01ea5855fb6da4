/* cmd_serve.c - kb serve: the HTTP server (serve/serve.h) with the REST
 * routes and MCP's Streamable HTTP transport at /mcp, on loopback by
 * default, until SIGTERM or SIGINT drains it. */
#include "cli/cli.h"
#include "api/api.h"
#include "serve/serve.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_PORT 8377
#define TOKEN_MAX 4096

/* "ADDRESS:PORT" or "[V6]:PORT" into addr (numeric, checked by the server)
 * and port. 0 if it is neither. */
static int parse_listen(const char *s, char *addr, size_t size, int *port)
{
    const char *colon;
    const char *a = s;
    size_t n;
    if (*s == '[') {
        const char *end = strchr(s, ']');
        if (!end || end[1] != ':')
            return 0;
        a = s + 1;
        n = (size_t)(end - a);
        colon = end + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || memchr(s, ':', (size_t)(colon - s)))
            return 0;   /* a bare IPv6 address wants its brackets */
        n = (size_t)(colon - s);
    }
    long p;
    if (n == 0 || n >= size || kb_parse_long(colon + 1, 0, 65535, &p) != KB_OK)
        return 0;
    memcpy(addr, a, n);
    addr[n] = '\0';
    if (strcmp(addr, "localhost") == 0)
        snprintf(addr, size, "127.0.0.1");
    *port = (int)p;
    return 1;
}

/* A token must be printable ASCII without spaces: what an Authorization
 * header can carry as it is. */
static int token_chars_ok(const char *t)
{
    for (; *t; t++)
        if (*t <= ' ' || *t > '~')
            return 0;
    return 1;
}

/* The token from --token-file (its first line, trailing white space
 * dropped), else KB_SERVE_TOKEN; *token NULL for none. The caller frees
 * it (wiping it first). */
static kb_rc load_token(const char *file, const char *env, char **token,
                        kb_err *err)
{
    *token = NULL;
    const char *subject = "KB_SERVE_TOKEN";
    if (file) {
        kb_buf b;
        kb_buf_init(&b, 0);
        kb_rc rc = kb_read_file(file, TOKEN_MAX, &b, err);
        if (rc != KB_OK) {
            kb_buf_release(&b);
            return rc;
        }
        while (b.len && strchr(" \t\r\n", b.data[b.len - 1]))
            b.data[--b.len] = '\0';
        struct stat st;
        if (stat(file, &st) == 0 && (st.st_mode & 077))
            kb_log_warn("token file '%s' can be read by others (chmod 600 it)", file);
        *token = kb_buf_finish(&b, KB_OK);
        if (!*token)
            return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        subject = file;
    } else if (env && *env) {
        if (!(*token = kb_strdup(env)))
            return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
    } else {
        return KB_OK;
    }
    if (!**token || !token_chars_ok(*token)) {
        kb_rc rc = kb_err_set(err, KB_ERR_USAGE, **token
                              ? "the token of '%s' holds a space or a character "
                                "outside printable ASCII"
                              : "the token file '%s' is empty", subject);
        memset(*token, 0, strlen(*token));
        free(*token);
        *token = NULL;
        return rc;
    }
    return KB_OK;
}

/* Room for many connections: the soft limit on open files up to the hard
 * one. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

typedef struct {
    char address[64];
    int port;
    const char *token_file;
    kb_mcp_opts mcp;           /* --skills, --allow-verify, --tasks */
    int no_skills;
    long threads, max_body, timeout_s, max_connections, drain_s;
    long header_timeout_s, max_per_ip;
} serve_options;

/* Parses the command line into so. Returns -1 to go on, or the exit
 * status to stop with (a usage error reported, --help printed). */
static int parse_options(int argc, char **argv, const kb_command *self,
                         serve_options *so)
{
    static const struct { int opt; const char *name; long min, max; } nums[] = {
        { 'n', "--threads", 1, 64 },
        { 'b', "--max-body", 1024, 1L << 30 },
        { 'T', "--timeout", 1, 3600 },
        { 'c', "--max-connections", 1, 1000000 },
        { 'd', "--drain-timeout", 0, 3600 },
        { 'H', "--header-timeout", 1, 3600 },
        { 'p', "--max-connections-per-ip", 1, 1000000 },
    };
    long *slots[] = { &so->threads, &so->max_body, &so->timeout_s,
                      &so->max_connections, &so->drain_s, &so->header_timeout_s,
                      &so->max_per_ip };
    int c;
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    while ((c = kb_getopt_next(&g)) > 0) {
        if (c == KB_OPT_LONG('l')) {
            if (!parse_listen(g.arg, so->address, sizeof so->address, &so->port))
                return kb_cli_usage_error(self, "--listen wants ADDRESS:PORT "
                                          "(127.0.0.1:8377, [::1]:8377; port 0 "
                                          "picks one), not '%s'", g.arg);
            continue;
        }
        if (c == KB_OPT_LONG('t')) {
            so->token_file = g.arg;
            continue;
        }
        if (c == KB_OPT_LONG('v') || c == KB_OPT_LONG('k')) {
            if (c == KB_OPT_LONG('v'))
                so->mcp.allow_verify = 1;
            else
                so->mcp.tasks_dir = g.arg;
            continue;
        }
        if (c == KB_OPT_LONG('s') || c == KB_OPT_LONG('S')) {
            if (c == KB_OPT_LONG('s'))
                so->mcp.skills_dir = g.arg;
            else
                so->no_skills = 1;
            continue;
        }
        size_t i = 0;
        while (i < sizeof nums / sizeof nums[0] && KB_OPT_LONG(nums[i].opt) != c)
            i++;
        if (kb_parse_long(g.arg, nums[i].min, nums[i].max, slots[i]) != KB_OK)
            return kb_cli_usage_error(self, "%s wants a whole number from %ld "
                                      "to %ld, not '%s'", nums[i].name,
                                      nums[i].min, nums[i].max, g.arg);
    }
    if (c < 0)
        return g.status;
    if (kb_cli_no_operands(&g))
        return 2;
    if (so->mcp.tasks_dir && !so->mcp.allow_verify)
        return kb_cli_usage_error(self, "--tasks is verify's: it needs --allow-verify");
    if (so->no_skills && so->mcp.skills_dir)
        return kb_cli_usage_error(self, "--skills and --no-skills: pick one");
    return -1;
}

/* A loopback server without a token answers every local user: said when
 * the host has other people (accounts that can log in, or their
 * processes running), whom the KB folder's 0700 would otherwise keep out. */
static void warn_shared_host(const char *url)
{
    kb_serve_host_users u;
    kb_err err;
    kb_err_clear(&err);
    if (kb_serve_host_users_find(NULL, NULL, NULL, getuid(), &u, &err) != KB_OK ||
        (!u.accounts && !u.running))
        return;
    kb_log_warn("serving '%s' without a token on a host with other users (%zu "
                "other account%s that can log in, %zu with processes running now; "
                "'%s' one of them): any of them can read the KB through it, whatever "
                "its folder's mode; set a token (--token-file FILE or KB_SERVE_TOKEN)",
                url, u.accounts, u.accounts == 1 ? "" : "s", u.running, u.example);
}

static int loopback_address(const char *a)
{
    return strncmp(a, "127.", 4) == 0 || strcmp(a, "::1") == 0;
}

static const kb_option serve_options_table[] = {
    { "listen", KB_OPT_LONG('l'), "ADDR:PORT", "where to listen (default 127.0.0.1:8377; port 0\n"
      "picks a free one; [::1]:PORT for IPv6); the URL\nis printed on stdout" },
    { "token-file", KB_OPT_LONG('t'), "FILE", "ask for 'Authorization: Bearer TOKEN', the token\n"
      "being FILE's first line ($KB_SERVE_TOKEN)" },
    { "threads", KB_OPT_LONG('n'), "N", "worker threads, each with its own store and\n"
      "embedder (default: one per CPU kb may run on)" },
    { "max-body", KB_OPT_LONG('b'), "BYTES", "request body cap, 413 beyond (default 1048576)" },
    { "timeout", KB_OPT_LONG('T'), "S", "close a connection idle this long (default 30)" },
    { "header-timeout", KB_OPT_LONG('H'), "S", "close a connection whose request headers are\n"
      "not all in S seconds after it opened, however\nslowly they trickle (default 10)" },
    { "max-connections", KB_OPT_LONG('c'), "N", "connections held at once (default 4096)" },
    { "max-connections-per-ip", KB_OPT_LONG('p'), "N", "connections held at once from one address\n"
      "(default: a quarter of --max-connections)" },
    { "drain-timeout", KB_OPT_LONG('d'), "S", "on SIGTERM or SIGINT, wait this long for the\n"
      "requests in flight (default 10), then exit 0" },
    { "skills", KB_OPT_LONG('s'), "DIR", "the skill library /mcp serves as skill:// resources\n"
      "(default: corpus/skills where kb finds it)" },
    { "no-skills", KB_OPT_LONG('S'), NULL, "serve no skill library" },
    { "allow-verify", KB_OPT_LONG('v'), NULL, "/mcp also serves the verify tool, which runs\n"
      "candidate kernels on this machine's GPU (kb-verify;\nwith KB_QUEUE, as tasks too)" },
    { "tasks", KB_OPT_LONG('k'), "DIR", "verify's tasks (default: where kb verify finds them)" },
    { NULL, 0, NULL, NULL },
};

static int cmd_serve(int argc, char **argv, const kb_cli *cli, const kb_command *self);

/* kb_serve_opts.worker_init: each worker's store readied as /mcp's are,
 * so that REST's skill endpoints see the same library. */
static kb_rc attach_worker(kb_store *store, void *mcp, kb_err *err)
{
    return kb_mcp_attach(mcp, store, err);
}

const kb_command kb_cmd_serve = {
    .name = "serve",
    .fn = cmd_serve,
    .usage = "kb serve [options]",
    .summary = "serve the KB over HTTP: REST endpoints and MCP (Streamable HTTP at /mcp)",
    .options = serve_options_table,
    .notes = "With -q (a global option) no access log: one line per request on stderr.\n",
};

static int cmd_serve(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    serve_options so = { .address = "127.0.0.1", .port = DEFAULT_PORT,
                         .drain_s = 10 };
    kb_mcp_opts_init(&so.mcp);
    int done = parse_options(argc, argv, self, &so);
    if (done >= 0)
        return done;

    kb_err err;
    kb_err_clear(&err);
    char *token = NULL, *dir = NULL, *found = NULL;
    kb_server *srv = NULL;
    kb_mcp *mcp = NULL;
    kb_mcp_http *mcp_http = NULL;
    kb_result_cache *results = NULL;
    kb_rc rc = load_token(so.token_file, cli->config->serve_token, &token, &err);
    if (rc == KB_OK && !(dir = kb_store_default_dir(cli->kb_dir)))
        rc = kb_err_set(&err, KB_ERR_NOMEM, "out of memory");

    /* SIGTERM and SIGINT wait for sigwait below: blocked before the pool
     * threads start, so that they inherit the mask */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();

    if (rc == KB_OK) {
        size_t n;
        kb_serve_opts o;
        kb_serve_opts_init(&o);
        o.address = so.address;
        o.port = so.port;
        o.threads = (int)so.threads;
        o.max_body = (size_t)so.max_body;
        o.timeout_s = (unsigned)so.timeout_s;
        o.max_connections = (unsigned)so.max_connections;
        o.header_timeout_s = (unsigned)so.header_timeout_s;
        o.max_per_ip = (unsigned)so.max_per_ip;
        o.token = token;
        o.access_log = !cli->quiet;
        o.kb_dir = dir;
        o.config = cli->config;
        /* the tables served: REST's, then the MCP transport's /mcp */
        kb_mcp_opts mo = so.mcp;
        if (!mo.skills_dir && !so.no_skills)
            mo.skills_dir = found = kb_store_data_find(cli->config, cli->kb_dir, "skills");
        const kb_serve_route *rest = kb_rest_routes(&n);
        if (kb_serve_opts_add(&o, rest, n) != KB_OK)
            rc = kb_err_set(&err, KB_ERR_INTERNAL, "too many route tables");
        if (rc == KB_OK)
            rc = kb_mcp_open(&mo, &mcp, &err);
        o.worker_init = attach_worker;
        o.worker_arg = mcp;
        if (rc == KB_OK)   /* agents ask the same questions: answered once */
            rc = kb_result_cache_new(KB_RESULT_CACHE_BYTES, &results, &err);
        o.results = results;
        if (rc == KB_OK)
            rc = kb_mcp_http_open(mcp, &mcp_http, &err);
        const kb_serve_route *mr = rc == KB_OK ? kb_mcp_http_routes(mcp_http, &n) : NULL;
        if (rc == KB_OK && kb_serve_opts_add(&o, mr, n) != KB_OK)
            rc = kb_err_set(&err, KB_ERR_INTERNAL, "too many route tables");
        if (rc == KB_OK)
            rc = kb_serve_start(&o, &srv, &err);
    }
    if (rc != KB_OK)
        goto out;
    if (!token && !loopback_address(so.address))
        kb_log_warn("serving '%s' beyond this machine without a token: anyone "
                    "who reaches it can read the KB (--token-file)", kb_serve_url(srv));
    else if (!token)
        warn_shared_host(kb_serve_url(srv));
    printf("listening on %s\n", kb_serve_url(srv));
    fflush(stdout);
    kb_log_info("kb serve: KB '%s', %s; MCP at %s/mcp (tools: %s; %zu skills as "
                "resources); SIGTERM or ^C stops", dir,
                token ? "a bearer token required" : "no token", kb_serve_url(srv),
                kb_mcp_tool_names(mcp), kb_mcp_skill_count(mcp));

    int sig = 0;
    sigwait(&stop, &sig);
    kb_log_info("kb serve: %s: draining", sig == SIGINT ? "interrupt" : "terminated");
    size_t left = kb_serve_drain(srv, so.drain_s * 1000);
    if (left)
        kb_log_warn("%zu request%s still running after %lds: cut off", left,
                    left == 1 ? "" : "s", so.drain_s);
out:
    kb_serve_stop(srv);
    kb_mcp_http_free(mcp_http);
    kb_mcp_free(mcp);
    kb_result_cache_free(results);
    if (token) {
        memset(token, 0, strlen(token));
        free(token);
    }
    free(dir);
    free(found);
    return rc == KB_OK ? 0 : kb_cli_fail(&err);
}
