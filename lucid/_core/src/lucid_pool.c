/*
 * lucid_pool.c -- lucid's thread pool (see include/lucid_pool.h).
 *
 * One job at a time (a trylock: a second caller runs its job alone). The pieces of a
 * job are split into one contiguous range per thread taking part (the caller's is
 * range 0, worker i's range i + 1), so consecutive jobs over arrays of one size give
 * each thread the same part of memory, which stays in its core's cache: a job that
 * reads what the last one wrote finds it there. Each range has a 64-bit counter,
 * epoch << 32 | next piece, on its own cache line. A thread claims pieces of its own
 * range first, then of the others in turn (from their fronts), each with a
 * compare-and-swap on that range's counter, so no thread ever waits for a worker
 * that has not started. Publishing job E and joining it:
 *
 *   caller:  range 0 = (E, CLOSED); release fence; fields; done = 0;
 *            ranges 1.. = (E, first piece); release: range 0 = (E, 0)
 *   worker:  s = range 0 (acquire); read fields; acquire fence;
 *            range 0's epoch still E, else give up; CAS(range q, (E, k), (E, k + 1))
 *
 * If the worker read any field of a later job, the fences order that job's CLOSED
 * store before its second look at range 0, so it gives up; fields that passed the
 * check are job E's, and only job E's caller writes counters of epoch E. A finished
 * job leaves every counter at its range's end. The caller waits only for pieces
 * that workers did claim (done), never for a worker to show up.
 *
 * Free cores. A worker helps only if it gets a core of its own. When other processes
 * keep every core busy, a woken worker lands on the caller's core (the two then take
 * turns, no faster than one thread) or on a core it shares with a busy process (the
 * caller then waits for the pieces it claimed while it is descheduled). So a job takes
 * at most as many workers as there are cores left free: on Linux, the online cores
 * minus the runnable threads of /proc/loadavg (the caller and lucid's awake workers
 * not counted), sampled at most every LP_LOAD_NS. With no core free:
 *  - if the caller has a core to itself (it seldom waits for a CPU, per
 *    /proc/thread-self/schedstat), the job runs on the caller alone and the workers
 *    sleep, so 2 threads cost what 1 does;
 *  - if the caller shares its core (it waits a quarter of the time or more), a worker
 *    elsewhere can take a share of another core: the job is "lean": workers are woken,
 *    one that finds itself on the caller's core takes no piece, and every worker goes
 *    back to sleep right after the job (a thread that slept is scheduled promptly when
 *    woken; one spinning between jobs would hold a busy core's time).
 * lucid_pool_set_dynamic(0) turns all of this off.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lucid_pool.h"

#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LP_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define LP_PAUSE() __asm__ __volatile__("yield")
#else
#define LP_PAUSE() ((void)0)
#endif

#define LP_CLOSED 0xffffffffu
/* How long an idle worker spins before it sleeps (a Python loop calling kernels
 * back to back comes back within a few microseconds). */
#define LP_SPIN_NS 50000L
/* How long the caller spins on pieces claimed by workers before yielding its core. */
#define LP_WAIT_SPINS 2000
/* How often the free cores are counted again (reading /proc/loadavg costs a few us),
 * how soon a count that found fewer is checked, and how long after going to sleep or
 * being woken a worker may still be runnable while counted as a sleeper. */
#define LP_LOAD_NS 10000000L
#define LP_CONFIRM_NS 1000000L
#define LP_SETTLE_NS 1000000L

static struct {
    pthread_mutex_t submit;        /* held while a job runs, and to resize the pool */
    _Atomic(lucid_piece_fn) fn;
    _Atomic(void *) ctx;
    _Atomic ptrdiff_t npieces;
    _Atomic int helpers;           /* workers with id < helpers take part (helpers + 1 ranges) */
    _Atomic ptrdiff_t done;        /* pieces finished by workers */
    _Atomic uint32_t wake;         /* bumped for every job and resize; the futex word */
    _Atomic int sleepers;
    _Atomic int lean;              /* this job: workers skip the caller's core, then sleep */
    _Atomic int caller_cpu;
    _Atomic long idle_t;           /* when a worker last went to sleep or was woken */
    _Atomic int limit;             /* workers with id >= limit exit */
    uint32_t epoch;
    int nworkers;
    int dynamic;                   /* use free cores only (lucid_pool_set_dynamic) */
    int free_cores;                /* the last count, taken at load_t */
    int confirming;                /* the count at load_t found fewer: recount soon */
    int caller_waits;              /* no core free, and the caller waits for its own */
    long sched_tid;                /* the thread of the last schedstat reading, */
    long long sched_run, sched_wait;   /* its time on a CPU and waiting for one (ns) */
    long load_t;
    long ncpu;                     /* online cores, read once */
    long long jobs_parallel, jobs_alone, jobs_lean;   /* how parallel jobs ran */
    pthread_t tid[LUCID_POOL_MAX_THREADS];
#ifndef __linux__
    pthread_mutex_t wm;
    pthread_cond_t wc;
#endif
} P = {
    .submit = PTHREAD_MUTEX_INITIALIZER,
    .dynamic = 1,
    .free_cores = INT_MAX,
#ifndef __linux__
    .wm = PTHREAD_MUTEX_INITIALIZER,
    .wc = PTHREAD_COND_INITIALIZER,
#endif
};

/* Each range's counter, epoch << 32 | next piece, on a cache line of its own (range
 * 0's reads LP_CLOSED while a job is published). */
#define LP_EPOCH_MASK 0xffffffff00000000ull
static struct {
    _Alignas(64) _Atomic uint64_t v;
} NEXT[LUCID_POOL_MAX_THREADS] = {{LP_CLOSED}};

/* The first piece of range q of `parts` ranges over np pieces (q = parts: np). */
static inline uint32_t range_start(ptrdiff_t np, int parts, int q)
{
    return (uint32_t)((unsigned long long)np * (unsigned)q / (unsigned)parts);
}

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void sleep_until_changed(uint32_t seen)
{
    atomic_store_explicit(&P.idle_t, now_ns(), memory_order_relaxed);
    atomic_fetch_add(&P.sleepers, 1);
#ifdef __linux__
    while (atomic_load(&P.wake) == seen)
        syscall(SYS_futex, (uint32_t *)&P.wake, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
#else
    pthread_mutex_lock(&P.wm);
    while (atomic_load(&P.wake) == seen) pthread_cond_wait(&P.wc, &P.wm);
    pthread_mutex_unlock(&P.wm);
#endif
    atomic_fetch_sub(&P.sleepers, 1);
}

static void wake_all(void)
{
    atomic_fetch_add(&P.wake, 1);
    if (atomic_load(&P.sleepers) > 0) {
        atomic_store_explicit(&P.idle_t, now_ns(), memory_order_relaxed);
#ifdef __linux__
        syscall(SYS_futex, (uint32_t *)&P.wake, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
        pthread_mutex_lock(&P.wm);
        pthread_cond_broadcast(&P.wc);
        pthread_mutex_unlock(&P.wm);
#endif
    }
}

/* The CPU the calling thread runs on, or -1 where the OS does not say. */
static int current_cpu(void)
{
#ifdef __linux__
    return sched_getcpu();
#else
    return -1;
#endif
}

/* Claim and run pieces of job e (its epoch << 32) of np pieces in `parts` ranges: range
 * `me` first, then the others in turn. A worker (done != NULL) counts each piece it
 * runs in *done, stops at a counter of another job, and in a lean job takes no piece
 * while it runs on the caller's core. The pieces run. */
static ptrdiff_t sweep(uint64_t e, lucid_piece_fn fn, void *ctx, ptrdiff_t np, int parts,
                       int me, _Atomic ptrdiff_t *done)
{
    ptrdiff_t ran = 0;
    for (int r = 0; r < parts; r++) {
        int q = me + r < parts ? me + r : me + r - parts;
        uint32_t end = range_start(np, parts, q + 1);
        uint64_t s = atomic_load_explicit(&NEXT[q].v, memory_order_relaxed);
        for (;;) {
            if ((s & LP_EPOCH_MASK) != e) return ran;
            uint32_t k = (uint32_t)s;
            if (k >= end) break;
            if (done && atomic_load_explicit(&P.lean, memory_order_relaxed) &&
                current_cpu() == atomic_load_explicit(&P.caller_cpu, memory_order_relaxed))
                return ran;            /* taking turns with the caller gains nothing */
            if (atomic_compare_exchange_weak_explicit(&NEXT[q].v, &s, s + 1,
                                                      memory_order_acq_rel,
                                                      memory_order_relaxed)) {
                fn(ctx, (ptrdiff_t)k);
                ran++;
                if (done) atomic_fetch_add_explicit(done, 1, memory_order_release);
                s++;
            }
        }
    }
    return ran;
}

/* Take part in the current job, if worker `id` is one of its helpers. */
static void help(int id)
{
    uint64_t s = atomic_load_explicit(&NEXT[0].v, memory_order_acquire);
    if ((uint32_t)s == LP_CLOSED) return;
    lucid_piece_fn fn = atomic_load_explicit(&P.fn, memory_order_relaxed);
    void *ctx = atomic_load_explicit(&P.ctx, memory_order_relaxed);
    ptrdiff_t np = atomic_load_explicit(&P.npieces, memory_order_relaxed);
    int helpers = atomic_load_explicit(&P.helpers, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    uint64_t e = s & LP_EPOCH_MASK;
    if ((atomic_load_explicit(&NEXT[0].v, memory_order_relaxed) & LP_EPOCH_MASK) != e)
        return;                        /* the fields may be a later job's */
    if (id >= helpers) return;
    sweep(e, fn, ctx, np, helpers + 1, id + 1, &P.done);
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (;;) {
        uint32_t seen = atomic_load(&P.wake);
        if (id >= atomic_load(&P.limit)) return NULL;
        help(id);
        if (atomic_load_explicit(&P.lean, memory_order_relaxed)) {
            sleep_until_changed(seen); /* do not hold a busy core between jobs */
            continue;
        }
        long t0 = now_ns();
        int spins = 0;
        while (atomic_load_explicit(&P.wake, memory_order_relaxed) == seen) {
            LP_PAUSE();
            if (++spins % 64 == 0 && now_ns() - t0 > LP_SPIN_NS) {
                sleep_until_changed(seen);
                break;
            }
        }
    }
}

static void atfork_prepare(void) { pthread_mutex_lock(&P.submit); }
static void atfork_parent(void) { pthread_mutex_unlock(&P.submit); }

/* The child has the forking thread only: forget the parent's workers. */
static void atfork_child(void)
{
    P.nworkers = 0;
    atomic_store(&P.sleepers, 0);
    atomic_store(&NEXT[0].v, ((uint64_t)P.epoch << 32) | LP_CLOSED);
#ifndef __linux__
    pthread_mutex_init(&P.wm, NULL);
    pthread_cond_init(&P.wc, NULL);
#endif
    pthread_mutex_unlock(&P.submit);   /* locked by this thread in atfork_prepare */
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static int atfork_rc;
static void atfork_register(void)
{
    atfork_rc = pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

int lucid_pool_init(void)
{
    pthread_once(&atfork_once, atfork_register);
    return atfork_rc;
}

/* With P.submit held: make sure `want` workers exist. 0 or pthread_create's error. */
static int start_locked(int want)
{
    if (want > LUCID_POOL_MAX_THREADS - 1) want = LUCID_POOL_MAX_THREADS - 1;
    if (want <= P.nworkers) return 0;
    int rc = lucid_pool_init();
    if (rc != 0) return rc;
    atomic_store(&P.limit, want);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);   /* signals stay with Python's threads */
    rc = 0;
    while (P.nworkers < want) {
        rc = pthread_create(&P.tid[P.nworkers], NULL, worker, (void *)(intptr_t)P.nworkers);
        if (rc != 0) break;
        P.nworkers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int lucid_pool_start(int nthreads)
{
    if (nthreads < 1 || nthreads > LUCID_POOL_MAX_THREADS) return EINVAL;
    pthread_mutex_lock(&P.submit);
    int rc = start_locked(nthreads - 1);
    pthread_mutex_unlock(&P.submit);
    return rc;
}

int lucid_pool_resize(int nthreads)
{
    if (nthreads < 1 || nthreads > LUCID_POOL_MAX_THREADS) return -1;
    int want = nthreads - 1;
    pthread_mutex_lock(&P.submit);
    atomic_store(&P.limit, want);
    if (want < P.nworkers) {
        wake_all();
        for (int i = want; i < P.nworkers; i++) pthread_join(P.tid[i], NULL);
        P.nworkers = want;
    }
    pthread_mutex_unlock(&P.submit);
    return 0;
}

int lucid_pool_workers(void)
{
    pthread_mutex_lock(&P.submit);
    int n = P.nworkers;
    pthread_mutex_unlock(&P.submit);
    return n;
}

void lucid_pool_set_dynamic(int on)
{
    pthread_mutex_lock(&P.submit);
    P.dynamic = on != 0;
    P.load_t = 0;
    P.confirming = 0;
    P.free_cores = INT_MAX;
    pthread_mutex_unlock(&P.submit);
}

void lucid_pool_counts(long long *parallel, long long *alone, long long *lean)
{
    pthread_mutex_lock(&P.submit);
    *parallel = P.jobs_parallel;
    *alone = P.jobs_alone;
    *lean = P.jobs_lean;
    pthread_mutex_unlock(&P.submit);
}

#ifdef __linux__
/* The text of a small /proc file into buf (NUL-terminated): its length, or -1. */
static ssize_t read_proc(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    return n;
}
#endif

/* Runnable threads on the whole machine now (the caller included), or -1. */
static int runnable_threads(void)
{
#ifdef __linux__
    char buf[160];
    if (read_proc("/proc/loadavg", buf, sizeof buf) < 0) return -1;
    char *p = buf;                        /* "0.52 0.58 0.59 3/467 12345" */
    for (int i = 0; i < 3 && p; i++) {
        p = strchr(p, ' ');
        if (p) p++;
    }
    if (!p) return -1;
    char *end;
    long r = strtol(p, &end, 10);
    return end != p && *end == '/' && r > 0 && r < INT_MAX ? (int)r : -1;
#else
    return -1;
#endif
}

/* With P.submit held, on a machine with no core free: does the calling thread wait
 * for a CPU a quarter of the time it wants one or more (it shares its core)? Read
 * from /proc/thread-self/schedstat (time on a CPU, time runnable but waiting). */
static void update_caller_waits(void)
{
#ifdef __linux__
    char buf[128];
    if (read_proc("/proc/thread-self/schedstat", buf, sizeof buf) < 0) return;
    char *end;
    long long run = strtoll(buf, &end, 10), wait = strtoll(end, NULL, 10);
    long tid = (long)syscall(SYS_gettid);
    if (tid == P.sched_tid) {
        long long dr = run - P.sched_run, dw = wait - P.sched_wait;
        if (dr + dw > 500000) P.caller_waits = 4 * dw > dr + dw;
    }
    P.sched_tid = tid;
    P.sched_run = run;
    P.sched_wait = wait;
#endif
}

/* With P.submit held: cores left free by other processes (a large number when unknown).
 * Fewer free cores than before is taken only when a second count LP_CONFIRM_NS later
 * agrees: a process that runs for a moment does not make the next 10 ms serial. */
static int free_cores_locked(void)
{
    if (!P.dynamic) return INT_MAX;
    long t = now_ns();
    if (P.load_t != 0 && t - P.load_t < (P.confirming ? LP_CONFIRM_NS : LP_LOAD_NS))
        return P.free_cores;
    int running = runnable_threads();
    if (P.ncpu == 0) P.ncpu = sysconf(_SC_NPROCESSORS_ONLN);   /* it reads a file too */
    long ncpu = P.ncpu;
    int free = INT_MAX;
    if (running >= 0 && ncpu >= 1) {
        /* A worker that is going to sleep or was just woken may be runnable while
         * counted as a sleeper: within LP_SETTLE_NS of either, count every worker. */
        int mine = P.nworkers;
        if (t - atomic_load_explicit(&P.idle_t, memory_order_relaxed) > LP_SETTLE_NS)
            mine -= atomic_load(&P.sleepers);
        int others = running - 1 - (mine > 0 ? mine : 0);
        free = (int)ncpu - 1 - (others > 0 ? others : 0);
    }
    P.load_t = t;
    if (free <= 0) update_caller_waits();
    if (free < P.free_cores && !P.confirming) {
        P.confirming = 1;              /* look again soon; keep the old count till then */
    } else {
        P.confirming = 0;
        P.free_cores = free;
    }
    return P.free_cores;
}

static void run_serial(lucid_piece_fn fn, void *ctx, ptrdiff_t npieces)
{
    for (ptrdiff_t i = 0; i < npieces; i++) fn(ctx, i);
}

void lucid_pool_run(lucid_piece_fn fn, void *ctx, ptrdiff_t npieces, int nthreads)
{
    if (npieces <= 0) return;
    if (nthreads <= 1 || npieces == 1 || npieces >= (ptrdiff_t)LP_CLOSED ||
        pthread_mutex_trylock(&P.submit) != 0) {
        run_serial(fn, ctx, npieces);
        return;
    }
    if (nthreads > LUCID_POOL_MAX_THREADS) nthreads = LUCID_POOL_MAX_THREADS;
    (void)start_locked(nthreads - 1);   /* fewer workers if the OS refuses more */
    int helpers = nthreads - 1 < P.nworkers ? nthreads - 1 : P.nworkers;
    int free = free_cores_locked();
    int lean = free <= 0 && P.caller_waits;
    if (lean)
        atomic_store_explicit(&P.caller_cpu, current_cpu(), memory_order_relaxed);
    else if (helpers > free)
        helpers = free > 0 ? free : 0;
    atomic_store_explicit(&P.lean, lean, memory_order_relaxed);
    if (helpers == 0) {
        P.jobs_alone++;
        pthread_mutex_unlock(&P.submit);
        run_serial(fn, ctx, npieces);
        return;
    }
    if (lean) P.jobs_lean++;
    else P.jobs_parallel++;
    uint64_t e = (uint64_t)(++P.epoch) << 32;
    int parts = helpers + 1;
    atomic_store_explicit(&NEXT[0].v, e | LP_CLOSED, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&P.fn, fn, memory_order_relaxed);
    atomic_store_explicit(&P.ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&P.npieces, npieces, memory_order_relaxed);
    atomic_store_explicit(&P.helpers, helpers, memory_order_relaxed);
    atomic_store_explicit(&P.done, 0, memory_order_relaxed);
    for (int q = parts - 1; q > 0; q--)
        atomic_store_explicit(&NEXT[q].v, e | range_start(npieces, parts, q),
                              memory_order_relaxed);
    atomic_store_explicit(&NEXT[0].v, e, memory_order_release);
    wake_all();

    ptrdiff_t mine = sweep(e, fn, ctx, npieces, parts, 0, NULL);
    /* Only pieces a worker has claimed are left; wait for those. */
    int spins = 0;
    while (atomic_load_explicit(&P.done, memory_order_acquire) + mine < npieces) {
        if (++spins < LP_WAIT_SPINS) LP_PAUSE();
        else sched_yield();
    }
    pthread_mutex_unlock(&P.submit);
}
