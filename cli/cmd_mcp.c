/* cmd_mcp.c - kb mcp: the MCP server over stdio, one JSON-RPC message a
 * line in, one a line out, nothing else on stdout; logs on stderr; exit
 * 0 at the end of input. The protocol is serve/mcp.c's; a tool call may
 * ask the client (sampling) and read its answer from stdin meanwhile. */
#include "cli/cli.h"
#include "api/api.h"
#include "serve/serve.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* stdin read into lines: what was read and not yet split, the line
 * being put together, whether it is over KB_MCP_MESSAGE_MAX (then only its
 * bytes are counted), the end of input. */
typedef struct {
    char chunk[65536];
    size_t at, len;
    kb_buf line;
    int skipping;
    size_t oversized;
    int eof;
    int done;   /* line holds a whole line, handed out: the next starts afresh */
} line_reader;

/* The server and what one line's handling needs. */
typedef struct {
    kb_mcp *server;
    kb_mcp_session *session;
    kb_tool_ctx ctx;
    line_reader in;
    char **pending;           /* lines that came while kb waited on the
                                 client (sampling), served next, in order */
    size_t npending, cap;
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

/* The next line of stdin, its newline gone: *got 1 with the line in
 * r->line, or with *oversized its length when it was over the limit (and
 * skipped); *got 0 at the end of input (a last line without a newline is
 * still a line) or when timeout_ms (< 0: none) passed first. */
static kb_rc next_line(line_reader *r, long timeout_ms, int *got, size_t *oversized,
                       kb_err *err)
{
    *got = 0;
    *oversized = 0;
    if (r->done)   /* else a line cut by a timeout goes on */
        kb_buf_reset(&r->line);
    r->done = 0;
    double deadline = kb_now_ms() + (double)timeout_ms;
    for (;;) {
        while (r->at < r->len) {
            const char *p = r->chunk + r->at, *nl = memchr(p, '\n', r->len - r->at);
            size_t part = (size_t)((nl ? nl : r->chunk + r->len) - p);
            if (!r->skipping && kb_buf_append(&r->line, p, part) != KB_OK) {
                r->skipping = 1;
                r->oversized = r->line.len;
                kb_buf_reset(&r->line);
            }
            if (r->skipping)
                r->oversized += part;
            r->at += part + (nl != NULL);
            if (nl)
                goto line;
        }
        if (r->eof)
            break;
        if (timeout_ms >= 0) {
            double left = deadline - kb_now_ms();
            struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
            int pr = left > 0 ? poll(&pfd, 1, (int)left + 1) : 0;
            if (pr < 0 && errno == EINTR)
                continue;
            if (pr == 0)
                return KB_OK;   /* timed out: what was read stays */
        }
        ssize_t n = read(STDIN_FILENO, r->chunk, sizeof r->chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return kb_err_set(err, KB_ERR_IO, "cannot read stdin: %s", strerror(errno));
        r->at = 0;
        r->len = (size_t)n;
        r->eof = n == 0;
    }
    if (!r->skipping && !r->line.len)
        return KB_OK;   /* the end of input */
line:
    *got = r->done = 1;
    *oversized = r->skipping ? r->oversized : 0;
    r->skipping = 0;
    r->oversized = 0;
    return KB_OK;
}

/* Answers one message (len bytes, a '\r' before its newline is whitespace
 * to JSON). */
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

/* 1 when line is the client's response to request id. */
static int response_to(const char *line, size_t len, const char *id)
{
    cJSON *m = cJSON_ParseWithLength(line, len);
    const char *got = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "id"));
    int yes = got && !strcmp(got, id) && !cJSON_GetObjectItemCaseSensitive(m, "method");
    cJSON_Delete(m);
    return yes;
}

/* kb_mcp_request_fn over stdio: the request out, then lines in until its
 * response; the others are kept for the loop, in order. */
static kb_rc ask_client(void *ctx, const char *id, const char *request, long timeout_ms,
                        char **response, kb_err *err)
{
    stdio_server *srv = ctx;
    *response = NULL;
    kb_rc rc = write_line(request, err);
    double deadline = kb_now_ms() + (double)timeout_ms;
    while (rc == KB_OK) {
        double left = deadline - kb_now_ms();
        int got = 0;
        size_t oversized = 0;
        if (left > 0 && (rc = next_line(&srv->in, (long)left, &got, &oversized, err)) != KB_OK)
            break;
        if (!got && srv->in.eof)
            return kb_err_set(err, KB_ERR_NET, "the client closed its input before "
                              "answering the sampling request");
        if (!got) {   /* it is not coming: say so, as MCP asks */
            char note[160];
            snprintf(note, sizeof note, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/"
                     "cancelled\",\"params\":{\"requestId\":\"%s\",\"reason\":\"timeout\"}}", id);
            write_line(note, err);
            return kb_err_set(err, KB_ERR_NET, "no sampling response within %ld ms "
                              "(KB_RERANK_TIMEOUT_MS)", timeout_ms);
        }
        if (oversized) {
            rc = refuse_line(srv, oversized);
            continue;
        }
        if (response_to(srv->in.line.data, srv->in.line.len, id))
            return (*response = kb_strdup(srv->in.line.data))
                       ? KB_OK : kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        char *keep = kb_strdup(srv->in.line.data);
        if (!keep || KB_GROW(srv->pending, srv->npending + 1, srv->cap) != KB_OK) {
            free(keep);
            return kb_err_set(err, KB_ERR_NOMEM, "out of memory");
        }
        srv->pending[srv->npending++] = keep;
    }
    return rc;
}

/* Serves stdin to its end, one message a line: the lines kept while a
 * tool waited on the client first; a line over KB_MCP_MESSAGE_MAX is
 * skipped to its newline and answered -32600. */
static kb_rc serve_stdin(stdio_server *srv)
{
    kb_buf_init(&srv->in.line, KB_MCP_MESSAGE_MAX);
    kb_buf msg;
    kb_buf_init(&msg, 0);
    kb_rc rc = KB_OK;
    while (rc == KB_OK) {
        if (srv->npending) {   /* the oldest kept line */
            char *line = srv->pending[0];
            memmove(srv->pending, srv->pending + 1, --srv->npending * sizeof *srv->pending);
            rc = serve_line(srv, line, strlen(line));
            free(line);
            continue;
        }
        int got;
        size_t oversized;
        if ((rc = next_line(&srv->in, -1, &got, &oversized, &srv->err)) != KB_OK || !got)
            break;
        kb_buf_reset(&msg);   /* a copy: a tool that asks the client reads on */
        if (oversized)
            rc = refuse_line(srv, oversized);
        else if (kb_buf_append(&msg, srv->in.line.data, srv->in.line.len) != KB_OK)
            rc = kb_err_set(&srv->err, KB_ERR_NOMEM, "out of memory");
        else
            rc = serve_line(srv, msg.data, msg.len);
    }
    kb_buf_release(&msg);
    kb_buf_release(&srv->in.line);
    for (size_t i = 0; i < srv->npending; i++)
        free(srv->pending[i]);
    free(srv->pending);
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
    if (rc == KB_OK)   /* a client that offers sampling lends its model */
        kb_mcp_session_set_requester(srv.session, ask_client, &srv);
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
