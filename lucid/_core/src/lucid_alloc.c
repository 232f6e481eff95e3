/*
 * lucid_alloc.c -- the caching allocator behind lucid's arrays (include/lucid_alloc.h).
 *
 * Why: an output buffer of a few hundred kB is above glibc's mmap threshold in a
 * fresh process, so every op mapped new pages and faulted them in, and unmapped
 * them when the array died. Keeping freed buffers and handing them out again makes
 * the first call of a loop cost what the hundredth does.
 *
 * Each buffer carries a 64-byte header (so the data stays 64-byte aligned) with its
 * size class; NumPy's size argument to free is not needed. Classes are four per
 * power of two (at most 25% slack). A freed buffer is kept when the cache stays
 * within its limit and its class within max(one buffer, limit / 8); otherwise it goes
 * back to the system. One mutex guards the lists: frees come from any thread, and
 * the lists are touched once per array, not per element.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lucid_alloc.h"

#define LA_HEADER 64
#define LA_MAGIC 0x6c756364u          /* "lucd" */
#define LA_NCLS 192
#define LA_MIN 64

typedef struct la_hdr {
    struct la_hdr *next;              /* in a free list */
    size_t cap;                       /* usable bytes (the class size) */
    uint32_t magic;
    int32_t cls;                      /* -1: never cached (beyond the largest class) */
} la_hdr;

static struct {
    pthread_mutex_t lock;
    la_hdr *head[LA_NCLS];
    size_t cls_bytes[LA_NCLS];
    size_t bytes, blocks, limit, hits, misses;
} A = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .limit = (size_t)512 << 20,
};

static pthread_once_t la_once = PTHREAD_ONCE_INIT;

static void la_prepare(void) { pthread_mutex_lock(&A.lock); }
static void la_parent(void) { pthread_mutex_unlock(&A.lock); }
/* The child keeps the cached buffers (its copy of the memory holds them) and gets a
 * fresh mutex: the forking thread held it, no other thread exists there. */
static void la_child(void) { pthread_mutex_init(&A.lock, NULL); }
static void la_init(void) { pthread_atfork(la_prepare, la_parent, la_child); }

/* The class of a request of n bytes and its size; -1 beyond the largest class. */
static int la_class(size_t n, size_t *cap)
{
    if (n <= LA_MIN) {
        *cap = LA_MIN;
        return 0;
    }
    int p = 63 - __builtin_clzll((unsigned long long)(n - 1));   /* 2^p < n <= 2^(p+1) */
    size_t step = (size_t)1 << (p - 2);
    size_t k = (n + step - 1) / step;                              /* 5..8 */
    int cls = 1 + (p - 6) * 4 + (int)(k - 5);
    if (cls >= LA_NCLS)
        return -1;
    *cap = k * step;
    return cls;
}

static void *la_system(size_t cap, int cls)
{
    void *base;
    if (cap > SIZE_MAX - LA_HEADER || posix_memalign(&base, LA_HEADER, LA_HEADER + cap) != 0)
        return NULL;
    la_hdr *h = (la_hdr *)base;
    h->next = NULL;
    h->cap = cap;
    h->magic = LA_MAGIC;
    h->cls = cls;
    return (char *)base + LA_HEADER;
}

void *lucid_alloc_malloc(void *ctx, size_t size)
{
    (void)ctx;
    pthread_once(&la_once, la_init);
    size_t cap = size;
    int cls = la_class(size, &cap);
    if (cls < 0)
        return la_system(size, -1);
    pthread_mutex_lock(&A.lock);
    la_hdr *h = A.head[cls];
    if (h) {
        A.head[cls] = h->next;
        A.cls_bytes[cls] -= h->cap;
        A.bytes -= h->cap;
        A.blocks--;
        A.hits++;
    } else {
        A.misses++;
    }
    pthread_mutex_unlock(&A.lock);
    if (h) {
        h->next = NULL;
        return (char *)h + LA_HEADER;
    }
    return la_system(cap, cls);
}

void *lucid_alloc_calloc(void *ctx, size_t nelem, size_t elsize)
{
    if (elsize && nelem > SIZE_MAX / elsize)
        return NULL;
    void *p = lucid_alloc_malloc(ctx, nelem * elsize);
    if (p)
        memset(p, 0, nelem * elsize);
    return p;
}

void lucid_alloc_free(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    (void)size;
    if (!ptr)
        return;
    la_hdr *h = (la_hdr *)((char *)ptr - LA_HEADER);
    if (h->magic != LA_MAGIC)      /* not ours: a corrupted header would be worse */
        abort();
    if (h->cls >= 0) {
        pthread_mutex_lock(&A.lock);
        size_t cb = A.cls_bytes[h->cls];
        if (A.bytes + h->cap <= A.limit && (cb == 0 || cb + h->cap <= A.limit / 8)) {
            h->next = A.head[h->cls];
            A.head[h->cls] = h;
            A.cls_bytes[h->cls] = cb + h->cap;
            A.bytes += h->cap;
            A.blocks++;
            h = NULL;
        }
        pthread_mutex_unlock(&A.lock);
        if (!h)
            return;
    }
    h->magic = 0;
    free(h);
}

void *lucid_alloc_realloc(void *ctx, void *ptr, size_t size)
{
    if (!ptr)
        return lucid_alloc_malloc(ctx, size);
    la_hdr *h = (la_hdr *)((char *)ptr - LA_HEADER);
    if (size <= h->cap && size >= h->cap / 2)
        return ptr;                /* fits, and not mostly slack */
    void *q = lucid_alloc_malloc(ctx, size);
    if (!q)
        return NULL;               /* realloc's contract: ptr stays valid */
    memcpy(q, ptr, size < h->cap ? size : h->cap);
    lucid_alloc_free(ctx, ptr, h->cap);
    return q;
}

/* Detach every list under the lock, free outside it. */
size_t lucid_alloc_release(void)
{
    la_hdr *lists[LA_NCLS];
    size_t freed;
    pthread_mutex_lock(&A.lock);
    memcpy(lists, A.head, sizeof lists);
    memset(A.head, 0, sizeof A.head);
    memset(A.cls_bytes, 0, sizeof A.cls_bytes);
    freed = A.bytes;
    A.bytes = 0;
    A.blocks = 0;
    pthread_mutex_unlock(&A.lock);
    for (int c = 0; c < LA_NCLS; c++) {
        for (la_hdr *h = lists[c], *next; h; h = next) {
            next = h->next;
            h->magic = 0;
            free(h);
        }
    }
    return freed;
}

void lucid_alloc_set_limit(size_t bytes)
{
    pthread_mutex_lock(&A.lock);
    A.limit = bytes;
    int over = A.bytes > bytes;
    pthread_mutex_unlock(&A.lock);
    if (over)
        lucid_alloc_release();
}

void lucid_alloc_stats(lucid_alloc_stats_t *out)
{
    pthread_mutex_lock(&A.lock);
    out->cached_bytes = A.bytes;
    out->cached_blocks = A.blocks;
    out->limit = A.limit;
    out->hits = A.hits;
    out->misses = A.misses;
    pthread_mutex_unlock(&A.lock);
}
