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
 *
 * A fresh process has nothing cached, so its first calls would still fault their pages
 * in. lucid_alloc_prefault() maps and touches an arena at start (huge pages where the
 * kernel gives them): a miss carves its block from the arena while there is room, so
 * the first call finds resident memory too. Arena blocks go back to the lists like the
 * others but never to the system one by one and do not count against the limit (the
 * arena is its own bound); lucid_alloc_release() takes them out of the lists and hands
 * the arena's pages back when none of its blocks is in use.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "lucid_alloc.h"

#define LA_HEADER 64
#define LA_MAGIC 0x6c756364u          /* "lucd" */
#define LA_NCLS 192
#define LA_MIN 64

typedef struct la_hdr {
    struct la_hdr *next;              /* in a free list */
    size_t cap;                       /* usable bytes (the class size) */
    uint32_t magic;
    int16_t cls;                      /* -1: never cached (beyond the largest class) */
    int16_t arena;                    /* 1: carved from the arena */
} la_hdr;

static struct {
    pthread_mutex_t lock;
    la_hdr *head[LA_NCLS];
    size_t cls_bytes[LA_NCLS];
    size_t bytes, blocks, limit, hits, misses;
    char *arena, *top, *end;          /* the arena [arena, end); carved up to top */
    size_t arena_live;                /* arena blocks handed out and not yet freed */
    size_t arena_cached;              /* bytes of arena blocks waiting in the lists */
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

void lucid_alloc_init(void) { pthread_once(&la_once, la_init); }

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

/* The header of a fresh block at base: not in a list, class cls, from the arena or not. */
static la_hdr *la_header(void *base, size_t cap, int cls, int arena)
{
    la_hdr *h = (la_hdr *)base;
    h->next = NULL;
    h->cap = cap;
    h->magic = LA_MAGIC;
    h->cls = (int16_t)cls;
    h->arena = (int16_t)arena;
    return h;
}

static void *la_system(size_t cap, int cls)
{
    void *base;
    if (cap > SIZE_MAX - LA_HEADER || posix_memalign(&base, LA_HEADER, LA_HEADER + cap) != 0)
        return NULL;
    return (char *)la_header(base, cap, cls, 0) + LA_HEADER;
}

/* A block of class cls carved from the arena, or NULL if it has no room (or the block
 * would take more than a quarter of it). Called with the lock held. */
static la_hdr *la_carve(size_t cap, int cls)
{
    size_t room = (size_t)(A.end - A.top), whole = (size_t)(A.end - A.arena);
    if (!A.arena || cap > room || room - cap < LA_HEADER || cap > whole / 4)
        return NULL;
    la_hdr *h = la_header(A.top, cap, cls, 1);
    A.top += LA_HEADER + cap;
    return h;
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
        if (h->arena) {
            A.arena_cached -= h->cap;
        } else {
            A.cls_bytes[cls] -= h->cap;
            A.bytes -= h->cap;
            A.blocks--;
        }
        A.hits++;
    } else {
        A.misses++;
        h = la_carve(cap, cls);
    }
    if (h && h->arena)
        A.arena_live++;
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
    if (h->arena) {
        pthread_mutex_lock(&A.lock);
        h->next = A.head[h->cls];
        A.head[h->cls] = h;
        A.arena_cached += h->cap;
        A.arena_live--;
        pthread_mutex_unlock(&A.lock);
        return;
    }
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

/* Detach every system block under the lock, free them outside it. Arena blocks stay
 * listed while some arena block is in use; otherwise they leave the lists, the arena
 * starts empty again and its pages go back to the system (the mapping stays). */
size_t lucid_alloc_release(void)
{
    la_hdr *lists[LA_NCLS];
    size_t freed = 0;
    int reset;
    pthread_mutex_lock(&A.lock);
    reset = A.arena && A.arena_live == 0;
    for (int c = 0; c < LA_NCLS; c++) {
        la_hdr *keep = NULL, *drop = NULL;
        for (la_hdr *h = A.head[c], *next; h; h = next) {
            next = h->next;
            if (h->arena && !reset) {
                h->next = keep;
                keep = h;
            } else if (!h->arena) {
                h->next = drop;
                drop = h;
            }
        }
        A.head[c] = keep;
        lists[c] = drop;
    }
    memset(A.cls_bytes, 0, sizeof A.cls_bytes);
    freed = A.bytes;
    A.bytes = 0;
    A.blocks = 0;
    if (reset && A.top != A.arena) {
        A.arena_cached = 0;
        freed += (size_t)(A.top - A.arena);
        madvise(A.arena, (size_t)(A.top - A.arena), MADV_DONTNEED);
        A.top = A.arena;
    }
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

/* Map an arena of `bytes` (rounded up to 2 MiB, aligned to 2 MiB so the kernel can
 * back it with huge pages) and touch every page. Once per process; 0 on success. */
int lucid_alloc_prefault(size_t bytes)
{
    const size_t huge = (size_t)2 << 20;
    int rc = 0;
    if (bytes == 0)
        return 0;
    bytes = (bytes + huge - 1) / huge * huge;
    pthread_mutex_lock(&A.lock);
    if (A.arena) {
        pthread_mutex_unlock(&A.lock);
        return 0;
    }
    char *raw = mmap(NULL, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (raw == MAP_FAILED) {
        rc = -1;
    } else {
        char *base = (char *)(((uintptr_t)raw + huge - 1) / huge * huge);
        if (base > raw)
            munmap(raw, (size_t)(base - raw));
        munmap(base + bytes, (size_t)(raw + huge - base));
#ifdef MADV_HUGEPAGE
        madvise(base, bytes, MADV_HUGEPAGE);
#endif
        for (size_t off = 0; off < bytes; off += 4096)
            base[off] = 0;
        A.arena = A.top = base;
        A.end = base + bytes;
    }
    pthread_mutex_unlock(&A.lock);
    return rc;
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
    out->arena_bytes = (size_t)(A.end - A.arena);
    out->arena_carved = (size_t)(A.top - A.arena);
    out->arena_cached = A.arena_cached;
    out->arena_live = A.arena_live;
    pthread_mutex_unlock(&A.lock);
}
