/*
 * lucid_pool.h -- lucid's thread pool (src/lucid_pool.c, compiled into core only;
 * the family modules reach it through core's _parallel_for).
 *
 * A job is `npieces` calls fn(ctx, i), i = 0..npieces-1, in any order and on any
 * thread. The calling thread takes part: each thread claims pieces of its own
 * contiguous range first (the caller's holds the first pieces), then of the others,
 * through one atomic counter per range, so a worker the OS has not scheduled yet
 * simply finds no piece left, and the caller never waits for a worker that has not
 * started. It only waits for pieces a worker has already claimed. Workers spin
 * briefly after a job, then sleep (futex on Linux, a condition variable elsewhere).
 *
 * The pool is created lazily (first parallel job), resized by lucid_pool_resize, and
 * survives fork(): the child starts with no workers and creates its own on demand.
 * A second job submitted while one runs (another Python thread with the GIL
 * released, or a kernel nested in a piece) runs on its caller alone.
 */
#ifndef LUCID_POOL_H
#define LUCID_POOL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*lucid_piece_fn)(void *ctx, ptrdiff_t piece);

/* The most threads (caller included) a job may use. */
#define LUCID_POOL_MAX_THREADS 256

/* Register the pool's fork handlers (once; safe to call again): call it at load time,
 * before any thread can hold the pool's lock. 0, or pthread_atfork's error. */
int lucid_pool_init(void);

/* Run fn(ctx, 0..npieces-1) on up to nthreads threads (the caller included). */
void lucid_pool_run(lucid_piece_fn fn, void *ctx, ptrdiff_t npieces, int nthreads);

/* Keep nthreads - 1 workers: stops (joins) the extra ones now; missing ones are
 * created at the next job. 0 on success, -1 if nthreads is out of range. */
int lucid_pool_resize(int nthreads);

/* Start workers now so that nthreads threads exist; 0, or the pthread_create error. */
int lucid_pool_start(int nthreads);

/* Workers currently alive in this process (0 in a fresh fork child). */
int lucid_pool_workers(void);

/* 1 (the default): a job takes only as many workers as other processes leave cores
 * free (Linux: /proc/loadavg's runnable count); with none free it runs on the caller
 * alone, or "lean" when the caller itself waits for its core (see lucid_pool.c).
 * 0: always up to nthreads - 1 workers. Results are the same either way. */
void lucid_pool_set_dynamic(int on);

/* Jobs given workers so far: run with them, run by the caller alone because no core
 * was free, and run lean. */
void lucid_pool_counts(long long *parallel, long long *alone, long long *lean);

#ifdef __cplusplus
}
#endif

#endif /* LUCID_POOL_H */
