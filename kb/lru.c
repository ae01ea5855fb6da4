/* lru.c - a bounded, thread-safe cache of byte strings (kb.h, "caches"):
 * a hash table of chains for the lookup, a doubly linked list in use
 * order for the eviction, one mutex around both. */
#include "kb/kb.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    struct entry *next_hash;         /* the bucket's chain */
    struct entry *prev, *next;       /* use order: head newest */
    uint64_t hash;
    size_t klen, vlen;
    unsigned char data[];            /* the key, then the value */
} entry;

/* what an entry costs besides its bytes: the header and the allocator's */
#define ENTRY_OVERHEAD (sizeof(entry) + 16)

struct kb_lru {
    pthread_mutex_t lock;
    entry **buckets;
    size_t nbuckets;                 /* a power of 2 */
    entry *head, *tail;
    size_t max_bytes;
    kb_lru_stats st;
};

static size_t cost_of(size_t klen, size_t vlen)
{
    return ENTRY_OVERHEAD + klen + vlen;
}

kb_lru *kb_lru_new(size_t max_bytes)
{
    kb_lru *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    /* a bucket for every ~2 KB of the cap: short chains for queries and
     * their embeddings, which cost about that */
    size_t n = 64;
    while (n < max_bytes / 2048 && n < (1u << 22))
        n <<= 1;
    c->buckets = calloc(n, sizeof *c->buckets);
    if (!c->buckets || pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c->buckets);
        free(c);
        return NULL;
    }
    c->nbuckets = n;
    c->max_bytes = max_bytes;
    return c;
}

/* Unlinks e from the use list (under the lock). */
static void unlink_use(kb_lru *c, entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(kb_lru *c, entry *e)
{
    e->prev = NULL;
    e->next = c->head;
    if (c->head)
        c->head->prev = e;
    c->head = e;
    if (!c->tail)
        c->tail = e;
}

/* The entry with that key, and in *link where it is chained (under the
 * lock), or NULL. */
static entry *find(kb_lru *c, const void *key, size_t klen, uint64_t h, entry ***link)
{
    entry **l = &c->buckets[h & (c->nbuckets - 1)];
    for (; *l; l = &(*l)->next_hash) {
        entry *e = *l;
        if (e->hash == h && e->klen == klen && memcmp(e->data, key, klen) == 0) {
            if (link)
                *link = l;
            return e;
        }
    }
    if (link)
        *link = l;
    return NULL;
}

/* Removes e from the table and the use list and frees it (under the
 * lock). */
static void drop(kb_lru *c, entry *e)
{
    entry **l;
    find(c, e->data, e->klen, e->hash, &l);
    *l = e->next_hash;
    unlink_use(c, e);
    c->st.bytes -= cost_of(e->klen, e->vlen);
    c->st.entries--;
    free(e);
}

void kb_lru_free(kb_lru *c)
{
    if (!c)
        return;
    for (entry *e = c->head, *next; e; e = next) {
        next = e->next;
        free(e);
    }
    pthread_mutex_destroy(&c->lock);
    free(c->buckets);
    free(c);
}

kb_rc kb_lru_get(kb_lru *c, const void *key, size_t klen, void **val, size_t *vlen)
{
    *val = NULL;
    *vlen = 0;
    uint64_t h = kb_fnv1a(KB_FNV1A_INIT, key, klen);
    kb_rc rc = KB_ERR_NOTFOUND;
    pthread_mutex_lock(&c->lock);
    entry *e = find(c, key, klen, h, NULL);
    if (e) {
        /* the copy made under the lock: a put may evict e right after */
        *val = malloc(e->vlen + 1);
        if (*val) {
            memcpy(*val, e->data + e->klen, e->vlen);
            ((char *)*val)[e->vlen] = '\0';
            *vlen = e->vlen;
            unlink_use(c, e);
            push_front(c, e);
            c->st.hits++;
            rc = KB_OK;
        } else {
            rc = KB_ERR_NOMEM;
        }
    } else {
        c->st.misses++;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

kb_rc kb_lru_put(kb_lru *c, const void *key, size_t klen, const void *val, size_t vlen)
{
    size_t cost = cost_of(klen, vlen);
    if (cost > c->max_bytes)
        return KB_OK;   /* never kept: it would evict everything else */
    entry *n = malloc(sizeof *n + klen + vlen);
    if (!n)
        return KB_ERR_NOMEM;
    n->hash = kb_fnv1a(KB_FNV1A_INIT, key, klen);
    n->klen = klen;
    n->vlen = vlen;
    memcpy(n->data, key, klen);
    if (vlen)
        memcpy(n->data + klen, val, vlen);
    pthread_mutex_lock(&c->lock);
    entry *old = find(c, key, klen, n->hash, NULL);
    if (old)
        drop(c, old);
    while (c->tail && c->st.bytes + cost > c->max_bytes) {
        drop(c, c->tail);
        c->st.evictions++;
    }
    entry **l = &c->buckets[n->hash & (c->nbuckets - 1)];
    n->next_hash = *l;
    *l = n;
    push_front(c, n);
    c->st.bytes += cost;
    c->st.entries++;
    pthread_mutex_unlock(&c->lock);
    return KB_OK;
}

void kb_lru_clear(kb_lru *c)
{
    pthread_mutex_lock(&c->lock);
    while (c->head)
        drop(c, c->head);
    pthread_mutex_unlock(&c->lock);
}

void kb_lru_stats_get(kb_lru *c, kb_lru_stats *out)
{
    pthread_mutex_lock(&c->lock);
    *out = c->st;
    pthread_mutex_unlock(&c->lock);
}
