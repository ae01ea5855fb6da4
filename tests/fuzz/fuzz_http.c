/* fuzz_http.c - raw HTTP requests through kb serve's request handling: a
 * real server (libmicrohttpd, the REST routes and /mcp over a small real
 * KB and the skill library) on a loopback port in this process, each input
 * sent as it is on a new connection. Whatever comes back is an HTTP/1.x
 * reply or nothing, and the server keeps serving (a crash in a handler is
 * this process's, for ASan to see). */
#include "serve/serve.h"
#include "kb/kb_int.h"
#include "tests/fuzz/fuzz.h"

#include <arpa/inet.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>

static char kb_path[64];
static kb_config config;
static kb_mcp *mcp;
static kb_mcp_http *mcp_http;
static kb_server *srv;
static int port;

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(p);
}

static void cleanup(void)
{
    kb_serve_stop(srv);
    kb_mcp_http_free(mcp_http);
    kb_mcp_free(mcp);
    kb_config_release(&config);
    if (kb_path[0])
        nftw(kb_path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void setup(void)
{
    kb_err err;
    kb_err_clear(&err);
    kb_log_set_level(KB_LOG_QUIET);
    signal(SIGPIPE, SIG_IGN);
    snprintf(kb_path, sizeof kb_path, "/tmp/kb-fuzz-http.XXXXXX");
    fuzz_check(mkdtemp(kb_path) != NULL);
    atexit(cleanup);
    fuzz_check(kb_config_load(&config, &err) == KB_OK);
    const char *top = getenv("KB_TOP") ? getenv("KB_TOP") : ".";
    char md[1024], skills[1024];
    snprintf(md, sizeof md, "%s/tests/fixtures/md", top);
    snprintf(skills, sizeof skills, "%s/corpus/skills", top);
    kb_store *store = NULL;
    fuzz_check(kb_store_open(kb_path, KB_STORE_CREATE, &store, &err) == KB_OK);
    char *targets[] = { md };
    kb_ingest_opts io = { .config = &config };   /* embed off: lexical */
    kb_ingest_stats stats;
    fuzz_check(kb_ingest_run(store, &io, targets, 1, &stats, &err) == KB_OK);
    kb_store_close(store);

    kb_mcp_opts mo;
    kb_mcp_opts_init(&mo);
    mo.skills_dir = skills;
    fuzz_check(kb_mcp_open(&mo, &mcp, &err) == KB_OK);
    fuzz_check(kb_mcp_http_open(mcp, &mcp_http, &err) == KB_OK);
    kb_serve_opts o;
    kb_serve_opts_init(&o);
    o.threads = 2;
    o.timeout_s = 2;
    o.max_body = 65536;
    o.access_log = 0;
    o.kb_dir = kb_path;
    o.config = &config;
    size_t n;
    const kb_serve_route *rest = kb_rest_routes(&n);
    fuzz_check(kb_serve_opts_add(&o, rest, n) == KB_OK);
    const kb_serve_route *mr = kb_mcp_http_routes(mcp_http, &n);
    fuzz_check(kb_serve_opts_add(&o, mr, n) == KB_OK);
    fuzz_check(kb_serve_start(&o, &srv, &err) == KB_OK);
    port = kb_serve_port(srv);
}

/* Waits up to ms for fd to be readable: 1 readable, 0 not. */
static int readable(int fd, int ms)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    return poll(&p, 1, ms) == 1;
}

/* 1 when got holds a whole reply: its head, and the body its
 * Content-Length counts (none for 1xx, 204 and 304). */
static int complete(const char *got, size_t len)
{
    const char *end = strstr(got, "\r\n\r\n");
    if (!end)
        return 0;
    size_t head = (size_t)(end - got) + 4;
    if (len >= 12 && (got[9] == '1' || strncmp(got + 9, "204", 3) == 0 ||
                      strncmp(got + 9, "304", 3) == 0))
        return 1;
    for (const char *p = got; p < end; p++)
        if ((p == got || p[-1] == '\n') && strncasecmp(p, "Content-Length:", 15) == 0)
            return len >= head + strtoul(p + 15, NULL, 10);
    return 0;
}

/* Sends the request and reads what comes back into got (at most cap - 1
 * bytes, NUL-terminated); returns its length. A reply is read to the
 * server's close or to a pause; a request the server waits on for more is
 * ended by closing our side. */
static size_t exchange(const uint8_t *data, size_t size, char *got, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    fuzz_check(fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fuzz_check(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    for (size_t done = 0; done < size;) {
        ssize_t w = send(fd, data + done, size - done, MSG_NOSIGNAL);
        if (w <= 0)
            break;   /* the server closed on a bad request: fine */
        done += (size_t)w;
    }
    size_t len = 0;
    int shut = 0;
    for (;;) {
        if (!readable(fd, len ? 200 : 50)) {
            if (len || shut)
                break;
            shutdown(fd, SHUT_WR);   /* incomplete: the server ends it */
            shut = 1;
            if (!readable(fd, 3000))
                break;
        }
        ssize_t r = recv(fd, got + len, cap - 1 - len, 0);
        if (r <= 0)
            break;
        len += (size_t)r;
        got[len] = '\0';
        if (len == cap - 1 || complete(got, len))
            break;
    }
    got[len] = '\0';
    close(fd);
    return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!srv)
        setup();
    static char got[1 << 20];
    size_t len = exchange(data, size, got, sizeof got);
    fuzz_check(len == 0 || strncmp(got, "HTTP/1.", 7) == 0);
    /* the server still answers */
    static const char probe[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                "Connection: close\r\n\r\n";
    static unsigned calls;
    if (++calls % 64 == 0) {
        len = exchange((const uint8_t *)probe, sizeof probe - 1, got, sizeof got);
        fuzz_check(len > 12 && strncmp(got + 9, "200", 3) == 0);
    }
    return 0;
}
