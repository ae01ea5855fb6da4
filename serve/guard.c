/* guard.c - deadlines for reading a request (serve.h, "guard.c").
 * libmicrohttpd's own timeout is an idle timer that each byte resets, so a
 * client trickling a header byte every two seconds holds its connection
 * forever (Slowloris); it offers no deadline for a whole request. The
 * guard keeps one: http.c arms it from libmicrohttpd's connection
 * notifications and request callbacks, and a thread shuts down the
 * sockets whose deadline passed; libmicrohttpd then sees the connection
 * end and closes it the usual way. The guard never reads, writes or
 * closes a socket itself. */
#include "serve/serve.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#define SWEEP_MS 200   /* how often deadlines are looked at */

struct kb_serve_guard_conn {
    int fd;
    double deadline_ms;        /* kb_now_ms() past which it goes; 0: none */
    kb_serve_guard_conn *prev, *next;
};

struct kb_serve_guard {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    int stop;
    kb_serve_guard_conn *head;
    size_t cut;                /* connections shut down so far */
};

/* Shuts down every socket past its deadline; under the lock. An entry
 * leaves the list only through kb_serve_guard_remove, which libmicrohttpd
 * calls before it closes the socket, so fd is still the connection's. */
static void sweep(kb_serve_guard *g)
{
    double now = kb_now_ms();
    for (kb_serve_guard_conn *c = g->head; c; c = c->next)
        if (c->deadline_ms > 0 && now > c->deadline_ms) {
            shutdown(c->fd, SHUT_RDWR);
            c->deadline_ms = 0;
            g->cut++;
        }
}

static void *guard_main(void *arg)
{
    kb_serve_guard *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += SWEEP_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g->wake, &g->lock, &ts);
        if (!g->stop)
            sweep(g);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

kb_rc kb_serve_guard_start(kb_serve_guard **out, kb_err *err)
{
    *out = NULL;
    kb_serve_guard *g = calloc(1, sizeof *g);
    pthread_condattr_t ca;
    int ok = g && pthread_condattr_init(&ca) == 0;
    if (ok) {
        ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
             pthread_cond_init(&g->wake, &ca) == 0;
        pthread_condattr_destroy(&ca);
    }
    if (ok && pthread_mutex_init(&g->lock, NULL) != 0) {
        pthread_cond_destroy(&g->wake);
        ok = 0;
    }
    if (ok && pthread_create(&g->thread, NULL, guard_main, g) != 0) {
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->lock);
        ok = 0;
    }
    if (!ok) {
        free(g);
        return kb_err_set(err, KB_ERR_NOMEM, "cannot start the connection guard");
    }
    *out = g;
    return KB_OK;
}

void kb_serve_guard_stop(kb_serve_guard *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    g->stop = 1;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->thread, NULL);
    while (g->head) {   /* none once the daemon stopped; be safe */
        kb_serve_guard_conn *c = g->head;
        g->head = c->next;
        free(c);
    }
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

kb_serve_guard_conn *kb_serve_guard_add(kb_serve_guard *g, int fd, double in_ms)
{
    kb_serve_guard_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->fd = fd;
    c->deadline_ms = in_ms > 0 ? kb_now_ms() + in_ms : 0;
    pthread_mutex_lock(&g->lock);
    c->next = g->head;
    if (g->head)
        g->head->prev = c;
    g->head = c;
    pthread_mutex_unlock(&g->lock);
    return c;
}

void kb_serve_guard_set(kb_serve_guard *g, kb_serve_guard_conn *c, double in_ms)
{
    if (!c)
        return;
    double when = in_ms > 0 ? kb_now_ms() + in_ms : 0;
    pthread_mutex_lock(&g->lock);
    c->deadline_ms = when;
    pthread_mutex_unlock(&g->lock);
}

void kb_serve_guard_remove(kb_serve_guard *g, kb_serve_guard_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&g->lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        g->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&g->lock);
    free(c);
}

size_t kb_serve_guard_cut(kb_serve_guard *g)
{
    pthread_mutex_lock(&g->lock);
    size_t n = g->cut;
    pthread_mutex_unlock(&g->lock);
    return n;
}
