/* cmd_mcp.c - kb mcp: the MCP server over stdio, one JSON-RPC message a
 * line in, one a line out, nothing else on stdout; logs on stderr; exit
 * 0 at the end of input. The protocol is serve/mcp.c's. */
#include "cli/cli.h"
#include "api/api.h"
#include "serve/serve.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The server and what one line's handling needs. */
typedef struct {
    kb_mcp *server;
    kb_mcp_session *session;
    kb_tool_ctx ctx;
    kb_err err;               /* why the loop stopped, when it failed */
} stdio_server;

/* Writes one message and its newline to stdout, whole. */
static kb_rc write_line(const char *text, kb_err *err)
{
    size_t len = strlen(text);
    for (size_t done = 0; done <= len;) {
        const char *p = done < len ? text + done : "\n";
        size_t n = done < len ? len - done : 1;
        ssize_t w = write(STDOUT_FILENO, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return kb_err_set(err, KB_ERR_IO, "cannot write to stdout: %s",
                              w < 0 ? strerror(errno) : "nothing written");
        done += (size_t)w;
    }
    return KB_OK;
}

/* Answers one line, its newline gone (a '\r' before it is whitespace to
 * JSON). */
static kb_rc serve_line(stdio_server *srv, const char *line, size_t len)
{
    size_t i = 0;
    while (i < len && strchr(" \t\r", line[i]))
        i++;
    if (i == len)   /* a blank line: nothing was sent */
        return KB_OK;
    kb_mcp_reply reply;
    kb_rc rc = kb_mcp_handle(srv->server, srv->session, &srv->ctx, line, len, NULL,
                             &reply, &srv->err);
    if (rc == KB_OK && reply.text)
        rc = write_line(reply.text, &srv->err);
    free(reply.text);
    return rc;
}

/* Answers a line of len bytes that was over the limit, and skipped. */
static kb_rc refuse_line(stdio_server *srv, size_t len)
{
    kb_log_warn("a message of %zu bytes refused (the limit is %u)", len,
                KB_MCP_MESSAGE_MAX);
    char *text = kb_mcp_oversized_reply(len);
    kb_rc rc = text ? write_line(text, &srv->err)
                    : kb_err_set(&srv->err, KB_ERR_NOMEM, "out of memory");
    free(text);
    return rc;
}

/* Reads stdin to its end, one message a line: a line over
 * KB_MCP_MESSAGE_MAX is skipped to its newline and answered -32600; a
 * last line without a newline is still a message. */
static kb_rc serve_stdin(stdio_server *srv)
{
    kb_buf line;
    kb_buf_init(&line, KB_MCP_MESSAGE_MAX);
    int skipping = 0;       /* the line is over the limit: read to its end */
    size_t oversized = 0;   /* its bytes */
    char chunk[65536];
    kb_rc rc = KB_OK;
    for (;;) {
        ssize_t n = read(STDIN_FILENO, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = kb_err_set(&srv->err, KB_ERR_IO, "cannot read stdin: %s", strerror(errno));
            break;
        }
        if (n == 0)
            break;
        const char *p = chunk, *end = chunk + n;
        while (rc == KB_OK && p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t part = (size_t)((nl ? nl : end) - p);
            if (!skipping && kb_buf_append(&line, p, part) != KB_OK) {
                skipping = 1;
                oversized = line.len;
                kb_buf_reset(&line);
            }
            if (skipping)
                oversized += part;
            p += part;
            if (!nl)
                break;
            p++;
            if (skipping) {
                rc = refuse_line(srv, oversized);
                skipping = 0;
                oversized = 0;
            } else {
                rc = serve_line(srv, line.data, line.len);
                kb_buf_reset(&line);
            }
        }
        if (rc != KB_OK)
            break;
    }
    if (rc == KB_OK && skipping)
        rc = refuse_line(srv, oversized);
    else if (rc == KB_OK && line.len)
        rc = serve_line(srv, line.data, line.len);
    kb_buf_release(&line);
    return rc;
}

static const kb_option mcp_options[] = {
    { "allow-verify", KB_OPT_LONG('v'), NULL, "also serve the verify tool, which runs candidate\n"
      "kernels on this machine's GPU (kb-verify)" },
    { "tasks", KB_OPT_LONG('t'), "DIR", "verify's tasks (default: where kb verify finds them)" },
    { "timeout", KB_OPT_LONG('T'), "S", "verify's wall-clock limit per candidate (default 120)" },
    { "skills", KB_OPT_LONG('s'), "DIR", "the skill library served as skill:// resources and\n"
      "to skill_get (default: corpus/skills where kb finds it)" },
    { "no-skills", KB_OPT_LONG('S'), NULL, "serve no skill library" },
    { NULL, 0, NULL, NULL },
};

static int cmd_mcp(int argc, char **argv, const kb_cli *cli, const kb_command *self);

const kb_command kb_cmd_mcp = {
    .name = "mcp",
    .fn = cmd_mcp,
    .usage = "kb mcp [--skills DIR|--no-skills] [--allow-verify [--tasks DIR] [--timeout S]]",
    .summary = "serve the KB to coding agents over MCP (stdio; see docs/serve.md)",
    .options = mcp_options,
};

static int cmd_mcp(int argc, char **argv, const kb_cli *cli, const kb_command *self)
{
    kb_mcp_opts opts;
    kb_mcp_opts_init(&opts);
    long timeout = 0;
    int no_skills = 0;
    int c;
    kb_getopt g;
    kb_getopt_init(&g, self, argc, argv);
    while ((c = kb_getopt_next(&g)) > 0) {
        switch (c) {
        case KB_OPT_LONG('v'): opts.allow_verify = 1; break;
        case KB_OPT_LONG('t'): opts.tasks_dir = g.arg; break;
        case KB_OPT_LONG('s'): opts.skills_dir = g.arg; break;
        case KB_OPT_LONG('S'): no_skills = 1; break;
        case KB_OPT_LONG('T'):
            if (kb_parse_long(g.arg, 1, 86400, &timeout) != KB_OK)
                return kb_cli_usage_error(self, "--timeout wants seconds from 1 to "
                                          "86400, not '%s'", g.arg);
            opts.verify_timeout_s = (double)timeout;
            break;
        }
    }
    if (c < 0)
        return g.status;
    if (kb_cli_no_operands(&g))
        return 2;
    if ((opts.tasks_dir || timeout) && !opts.allow_verify)
        return kb_cli_usage_error(self, "--tasks and --timeout are verify's: they "
                                  "need --allow-verify");
    if (no_skills && opts.skills_dir)
        return kb_cli_usage_error(self, "--skills and --no-skills: pick one");
    /* the library where kb finds it: an agent host starts kb mcp in its
     * user's project, where corpus/skills is not */
    char *found = opts.skills_dir || no_skills
                      ? NULL : kb_store_data_find(cli->config, cli->kb_dir, "skills");
    if (found)
        opts.skills_dir = found;

    /* a reader that went away is a write error, not a signal */
    signal(SIGPIPE, SIG_IGN);
    double t0 = kb_now_ms();
    stdio_server srv = { 0 };
    kb_err_clear(&srv.err);
    kb_store *store = NULL;
    kb_result_cache *results = NULL;
    /* the store now, so that the first call answers at once; the model
     * waits for the first search that needs it */
    kb_rc rc = kb_cli_open_store(cli, KB_STORE_READONLY, &store, &srv.err);
    if (rc == KB_OK)
        rc = kb_mcp_open(&opts, &srv.server, &srv.err);
    if (rc == KB_OK)
        rc = kb_mcp_session_open(&srv.session, &srv.err);
    if (rc == KB_OK)   /* an agent asks again what it asked before */
        rc = kb_result_cache_new(KB_RESULT_CACHE_BYTES, &results, &srv.err);
    if (rc == KB_OK) {
        srv.ctx = (kb_tool_ctx){ .store = store, .config = cli->config,
                                 .budget_tokens = KB_TOOL_BUDGET_DEFAULT,
                                 .results = results };
        kb_log_info("kb mcp: serving %s (tools: %s; %zu skills as resources) on "
                    "stdio, ready in %.1f ms", kb_store_dir(store),
                    kb_mcp_tool_names(srv.server), kb_mcp_skill_count(srv.server),
                    kb_now_ms() - t0);
        rc = serve_stdin(&srv);
    }
    kb_mcp_session_free(srv.session);
    kb_mcp_free(srv.server);
    kb_store_close(store);
    kb_result_cache_free(results);
    free(found);
    return rc == KB_OK ? 0 : kb_cli_fail(&srv.err);
}
