/* origin.c - where a request may come from (serve.h, "origin.c"): the
 * loopback names a Host and an Origin may carry, and the CORS headers that
 * let a page of such an origin (a browser-based MCP client, a local web
 * UI) call the server: those of a preflight's answer and of every reply
 * to it. Other origins are refused before this (http.c, 403), so
 * nothing here ever admits a page from elsewhere. */
#include "serve/serve.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>

/* What a page's script may send: the transport's headers and the token. */
#define ALLOW_HEADERS "Authorization, Content-Type, Accept, Mcp-Session-Id, " \
                      "MCP-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID"
/* What it may read of a reply beyond the simple headers. */
#define EXPOSE_HEADERS "Mcp-Session-Id, WWW-Authenticate, Allow"
/* How long a browser may keep a preflight's answer (seconds). */
#define PREFLIGHT_MAX_AGE "600"

int kb_serve_loopback_host(const char *host, size_t len)
{
    char h[64];
    if (len && host[0] == '[') {              /* [v6]:port */
        const char *end = memchr(host, ']', len);
        if (!end || (size_t)(end - host - 1) >= sizeof h)
            return 0;
        size_t n = (size_t)(end - host - 1);
        memcpy(h, host + 1, n);
        h[n] = '\0';
        size_t rest = len - (size_t)(end + 1 - host);
        if (rest && end[1] != ':')
            return 0;
        struct in6_addr a6;
        return inet_pton(AF_INET6, h, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
    }
    const char *colon = memchr(host, ':', len);
    size_t n = colon ? (size_t)(colon - host) : len;
    if (n == 0 || n >= sizeof h)
        return 0;
    memcpy(h, host, n);
    h[n] = '\0';
    for (const char *p = colon ? colon + 1 : host + len; p < host + len; p++)
        if (*p < '0' || *p > '9')
            return 0;
    if (strcasecmp(h, "localhost") == 0)
        return 1;
    if (n > 10 && strcasecmp(h + n - 10, ".localhost") == 0)
        return 1;
    struct in_addr a4;
    return inet_pton(AF_INET, h, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

int kb_serve_loopback_origin(const char *origin)
{
    const char *host = NULL;
    if (strncasecmp(origin, "http://", 7) == 0)
        host = origin + 7;
    else if (strncasecmp(origin, "https://", 8) == 0)
        host = origin + 8;
    return host && !strchr(host, '/') && kb_serve_loopback_host(host, strlen(host));
}

size_t kb_serve_cors_headers(const char *origin, const char *allow,
                            kb_serve_header out[KB_SERVE_CORS_MAX])
{
    size_t n = 0;
    out[n++] = (kb_serve_header){ "Access-Control-Allow-Origin", origin };
    out[n++] = (kb_serve_header){ "Vary", "Origin" };
    if (!allow) {
        out[n++] = (kb_serve_header){ "Access-Control-Expose-Headers", EXPOSE_HEADERS };
        return n;
    }
    out[n++] = (kb_serve_header){ "Access-Control-Allow-Methods", allow };
    out[n++] = (kb_serve_header){ "Access-Control-Allow-Headers", ALLOW_HEADERS };
    out[n++] = (kb_serve_header){ "Access-Control-Max-Age", PREFLIGHT_MAX_AGE };
    return n;
}
