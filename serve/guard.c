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

#define SWEEP_MS 200   /* how often deadlines are looked at, while there
                          are connections */

struct kb_serve_guard_conn {
    int fd;
    size_t owner;              /* the pool thread that reads it */
    double armed_ms;           /* when its deadline was set */
    double budget_ms;          /* how long it may take; 0: no deadline */
    double busy_at_arm;        /* its owner's busy time then */
    kb_serve_guard_conn *prev, *next;
};

/* One pool thread's time in handlers: while a handler runs, its thread
 * reads none of its other connections, so that time is the server's,
 * not theirs, and does not count against their deadlines. */
typedef struct {
    double busy_ms;            /* handlers' time, finished ones */
    double since_ms;           /* when the running one began; 0: none */
} guard_thread;

struct kb_serve_guard {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    int stop;
    kb_serve_guard_conn *head;
    size_t cut;                /* connections shut down so far */
    guard_thread *threads;
    size_t nthreads;
};

/* Thread i's busy time up to now (0 for a thread out of range). Under
 * the lock. */
static double busy_now(const kb_serve_guard *g, size_t i, double now)
{
    if (i >= g->nthreads)
        return 0;
    const guard_thread *t = &g->threads[i];
    return t->busy_ms + (t->since_ms > 0 ? now - t->since_ms : 0);
}

/* Shuts down every socket past its deadline; under the lock. An entry
 * leaves the list only through kb_serve_guard_remove, which libmicrohttpd
 * calls before it closes the socket, so fd is still the connection's. */
static void sweep(kb_serve_guard *g)
{
    double now = kb_now_ms();
    for (kb_serve_guard_conn *c = g->head; c; c = c->next) {
        if (c->budget_ms <= 0)
            continue;
        double waited = now - c->armed_ms - (busy_now(g, c->owner, now) - c->busy_at_arm);
        if (waited > c->budget_ms) {
            shutdown(c->fd, SHUT_RDWR);
            c->budget_ms = 0;
            g->cut++;
        }
    }
}

static void *guard_main(void *arg)
{
    kb_serve_guard *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->stop) {
        if (!g->head) {   /* no connection: sleep until one comes */
            pthread_cond_wait(&g->wake, &g->lock);
            continue;
        }
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

kb_rc kb_serve_guard_start(size_t nthreads, kb_serve_guard **out, kb_err *err)
{
    *out = NULL;
    kb_serve_guard *g = calloc(1, sizeof *g);
    if (g && !(g->threads = calloc(nthreads ? nthreads : 1, sizeof *g->threads))) {
        free(g);
        g = NULL;
    }
    if (g)
        g->nthreads = nthreads;
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
        if (g)
            free(g->threads);
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
    free(g->threads);
    free(g);
}

/* Arms c's deadline: in_ms of its owner's free time from now. Under the
 * lock. */
static void arm(kb_serve_guard *g, kb_serve_guard_conn *c, double in_ms)
{
    double now = kb_now_ms();
    c->armed_ms = now;
    c->budget_ms = in_ms > 0 ? in_ms : 0;
    c->busy_at_arm = busy_now(g, c->owner, now);
}

kb_serve_guard_conn *kb_serve_guard_add(kb_serve_guard *g, int fd, size_t owner,
                                        double in_ms)
{
    kb_serve_guard_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->fd = fd;
    c->owner = owner;
    pthread_mutex_lock(&g->lock);
    arm(g, c, in_ms);
    c->next = g->head;
    if (g->head)
        g->head->prev = c;
    else
        pthread_cond_signal(&g->wake);   /* the guard sleeps while it has none */
    g->head = c;
    pthread_mutex_unlock(&g->lock);
    return c;
}

void kb_serve_guard_set(kb_serve_guard *g, kb_serve_guard_conn *c, double in_ms)
{
    if (!c)
        return;
    pthread_mutex_lock(&g->lock);
    arm(g, c, in_ms);
    pthread_mutex_unlock(&g->lock);
}

void kb_serve_guard_busy(kb_serve_guard *g, size_t thread, int busy)
{
    if (thread >= g->nthreads)
        return;
    pthread_mutex_lock(&g->lock);
    guard_thread *t = &g->threads[thread];
    double now = kb_now_ms();
    if (busy && t->since_ms <= 0)
        t->since_ms = now;
    else if (!busy && t->since_ms > 0) {
        t->busy_ms += now - t->since_ms;
        t->since_ms = 0;
    }
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
