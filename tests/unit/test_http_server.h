/* test_http_server.h - a libmicrohttpd server on loopback for the unit
 * tests of kb's HTTP clients (fetch, the HTTP client, the remote embedder
 * and reranker): each test brings its own handler. */
#ifndef KB_TEST_HTTP_SERVER_H
#define KB_TEST_HTTP_SERVER_H

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>

/* Starts a server on 127.0.0.1 at a free port (into *port), a thread per
 * connection, calling handler for each request and completed (NULL: none)
 * when one ends; NULL if it cannot start. Requests from this process
 * bypass any proxy the environment names. */
static inline struct MHD_Daemon *tu_http_server(MHD_AccessHandlerCallback handler,
                                                MHD_RequestCompletedCallback completed,
                                                unsigned *port)
{
    setenv("NO_PROXY", "*", 1);
    setenv("no_proxy", "*", 1);
    struct sockaddr_in a = { .sin_family = AF_INET };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD |
                                            MHD_USE_THREAD_PER_CONNECTION,
                                            0, NULL, NULL, handler, NULL,
                                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&a,
                                            MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
                                            MHD_OPTION_END);
    if (d)
        *port = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port;
    return d;
}

#endif
