/*
 * lucid_alloc.h -- a caching allocator for the arrays lucid creates.
 *
 * NumPy calls these through a PyDataMem_Handler (core.pyx installs it, scoped to
 * lucid's own ops). Freed buffers wait in per-size-class free lists and are handed
 * out again, so a repeated op does not fault fresh pages in each time. The cache is
 * bounded (lucid_alloc_set_limit) and lucid_alloc_release() hands it all back.
 * Every function is thread-safe and fork-safe; ctx is unused.
 */
#ifndef LUCID_ALLOC_H
#define LUCID_ALLOC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void *lucid_alloc_malloc(void *ctx, size_t size);
void *lucid_alloc_calloc(void *ctx, size_t nelem, size_t elsize);
void *lucid_alloc_realloc(void *ctx, void *ptr, size_t size);
void lucid_alloc_free(void *ctx, void *ptr, size_t size);

/* Register the fork handlers (once; safe to call again). Call it at load time, before
 * any thread can hold the allocator's lock, so that a fork never copies a held lock. */
void lucid_alloc_init(void);
/* Free every cached buffer; returns the number of bytes released. */
size_t lucid_alloc_release(void);
/* The total bytes the cache may hold (each size class at most max(one buffer, limit / 8)). */
void lucid_alloc_set_limit(size_t bytes);
/* Map and touch an arena of about `bytes` from which cache misses are served while it
 * has room, so a new process's first calls do not fault pages in. Once per process;
 * returns 0, or -1 if the memory could not be mapped (lucid then runs without it). */
int lucid_alloc_prefault(size_t bytes);

typedef struct {
    size_t cached_bytes, cached_blocks, limit;  /* buffers from the system (not the arena) */
    size_t hits, misses;           /* allocations served from the cache / from malloc */
    size_t arena_bytes, arena_carved;  /* the prefaulted arena, and how much of it is carved */
    size_t arena_cached;               /* bytes of freed arena blocks waiting for reuse */
    size_t arena_live;                 /* arena blocks in use */
} lucid_alloc_stats_t;
void lucid_alloc_stats(lucid_alloc_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif
