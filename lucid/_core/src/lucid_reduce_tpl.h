/*
 * lucid_reduce_tpl.h -- the reduction kernels of one element type, included by
 * lucid_reduce.c once per type with
 *   T        the element type (float, double)
 *   LR(name) the name with the type's suffix
 *   LR_SUM_ID(f), LR_SUM_SQ(f), LR_SUM_ABS(f)  the pairwise sums of lucid_reduce.c's
 *            LV_SUM (of x, of (x - c)^2, of |x|): f = t for one run, rows for rows
 *   EXPT     exp of T (expf / exp: libmvec in `omp simd` loops)
 *   IT       the signed integer type of T's width (lane masks)
 *   LR_GENERIC_VEC  1: max/min runs and the exp sums' folds use gcc's generic vectors
 *            of 16 T (fast for float); 0: arrays of 16 lanes (double)
 *
 * Every sum has a fixed order given the shape: rows are summed pairwise (leaves of
 * 256 elements), columns pairwise over blocks of LR_COL_LEAF rows in double, and
 * the blocks of a full reduction are combined pairwise in double.
 */

/* ---- one contiguous run ------------------------------------------------ */

/* 16 lanes of T as gcc's generic vectors (kept in registers whatever the clone's
 * width), their lane masks, a lane select and the fold of 16 lanes into lane 0
 * (lane l op= lane l + h for h = 8, 4, 2, 1: the order LR_FOLD16 has). */
typedef T LR(vec) __attribute__((vector_size(16 * sizeof(T))));
typedef IT LR(msk) __attribute__((vector_size(16 * sizeof(T))));
typedef int64_t LR(m8) __attribute__((vector_size(8 * sizeof(int64_t))));
#define LR_SEL(k, a, b) ((LR(vec))(((k) & (LR(msk))(a)) | (~(k) & (LR(msk))(b))))
#define LR_C_ADD(a, t) ((a) += (t))
#define LR_C_MUL(a, t) ((a) *= (t))
#define LR_C_GT(a, t) ((a) = LR_SEL((t) > (a), (t), (a)))
#define LR_C_LT(a, t) ((a) = LR_SEL((t) < (a), (t), (a)))
#define LR_FOLDV(a, COMBINE)                                                     \
    do {                                                                         \
        LR(vec) t_ = __builtin_shuffle((a), (LR(msk)){8, 9, 10, 11, 12, 13, 14, 15, \
                                                      8, 9, 10, 11, 12, 13, 14, 15}); \
        COMBINE(a, t_);                                                          \
        t_ = __builtin_shuffle((a), (LR(msk)){4, 5, 6, 7, 4, 5, 6, 7,            \
                                              4, 5, 6, 7, 4, 5, 6, 7});          \
        COMBINE(a, t_);                                                          \
        t_ = __builtin_shuffle((a), (LR(msk)){2, 3, 2, 3, 2, 3, 2, 3,            \
                                              2, 3, 2, 3, 2, 3, 2, 3});          \
        COMBINE(a, t_);                                                          \
        t_ = __builtin_shuffle((a), (LR(msk)){1, 1, 1, 1, 1, 1, 1, 1,            \
                                              1, 1, 1, 1, 1, 1, 1, 1});          \
        COMBINE(a, t_);                                                          \
    } while (0)

/* The largest (CMP '>', COMB LR_C_GT) or smallest ('<', LR_C_LT) of x[0:n], n >= 1,
 * and the index of its first occurrence if at != NULL. NaN wins (the first NaN), as
 * NumPy and torch. The vector pass (16 lanes; the last 16 elements again, which an
 * extreme does not mind) also adds v - v per lane, which is NaN only if some v is inf
 * or NaN; then the exact scalar pass decides. */
#define LR_EXT_BODY(CMP, COMB)                                                   \
    T m;                                                                         \
    if (n >= 16) {                                                               \
        LR(vec) acc, v, z;                                                       \
        memcpy(&acc, x, sizeof acc);                                             \
        z = acc - acc;                                                           \
        ptrdiff_t i = 16;                                                        \
        for (; i + 16 <= n; i += 16) {                                           \
            memcpy(&v, x + i, sizeof v);                                         \
            COMB(acc, v);                                                        \
            z += v - v;                                                          \
        }                                                                        \
        if (i < n) {                                                             \
            memcpy(&v, x + n - 16, sizeof v);                                    \
            COMB(acc, v);                                                        \
            z += v - v;                                                          \
        }                                                                        \
        LR_FOLDV(acc, COMB);                                                     \
        LR_FOLDV(z, LR_C_ADD);                                                   \
        if (z[0] == z[0]) {                                                      \
            m = acc[0];                                                          \
            if (at) {                                                            \
                ptrdiff_t k = 0;                                                 \
                while (x[k] != m) k++;                                           \
                *at = k;                                                         \
            }                                                                    \
            return m;                                                            \
        }                                                                        \
    }                                                                            \
    m = x[0];                                                                    \
    ptrdiff_t k = 0;                                                             \
    if (m == m) {                                                                \
        for (ptrdiff_t i = 1; i < n; i++) {                                      \
            T v = x[i];                                                          \
            if (v != v) { m = v; k = i; break; }                                 \
            if (v CMP m) { m = v; k = i; }                                       \
        }                                                                        \
    }                                                                            \
    if (at) *at = k;                                                             \
    return m;

/* The same with 16 lanes in an array (LR_GENERIC_VEC == 0: gcc lowers generic vectors
 * of 16 doubles and their 64-bit masks badly). */
#define LR_EXT_BODY_ARR(CMP)                                                     \
    T m;                                                                         \
    if (n >= 32) {                                                               \
        T acc[16], z[16];                                                        \
        for (int l = 0; l < 16; l++) { acc[l] = x[l]; z[l] = x[l] - x[l]; }      \
        ptrdiff_t i = 16;                                                        \
        for (; i + 16 <= n; i += 16) {                                           \
            _Pragma("omp simd")                                                  \
            for (int l = 0; l < 16; l++) {                                       \
                T v = x[i + l];                                                  \
                acc[l] = v CMP acc[l] ? v : acc[l];                              \
                z[l] += v - v;                                                   \
            }                                                                    \
        }                                                                        \
        if (i < n) {                   /* the last 16 again (max is idempotent) */ \
            _Pragma("omp simd")                                                  \
            for (int l = 0; l < 16; l++) {                                       \
                T v = x[n - 16 + l];                                             \
                acc[l] = v CMP acc[l] ? v : acc[l];                              \
                z[l] += v - v;                                                   \
            }                                                                    \
        }                                                                        \
        for (int w = 8; w >= 1; w /= 2) {  /* folded in halves: no serial chain */ \
            _Pragma("omp simd")                                                  \
            for (int l = 0; l < w; l++) {                                        \
                acc[l] = acc[l + w] CMP acc[l] ? acc[l + w] : acc[l];            \
                z[l] += z[l + w];                                                \
            }                                                                    \
        }                                                                        \
        T zz = z[0];                                                             \
        m = acc[0];                                                              \
        if (zz == zz) {                                                          \
            if (at) {                                                            \
                ptrdiff_t k = 0;                                                 \
                while (x[k] != m) k++;                                           \
                *at = k;                                                         \
            }                                                                    \
            return m;                                                            \
        }                                                                        \
    }                                                                            \
    m = x[0];                                                                    \
    ptrdiff_t k = 0;                                                             \
    if (m == m) {                                                                \
        for (ptrdiff_t i = 1; i < n; i++) {                                      \
            T v = x[i];                                                          \
            if (v != v) { m = v; k = i; break; }                                 \
            if (v CMP m) { m = v; k = i; }                                       \
        }                                                                        \
    }                                                                            \
    if (at) *at = k;                                                             \
    return m;

#if LR_GENERIC_VEC
LV_CLONES static T LR(maxrun)(const T *x, ptrdiff_t n, ptrdiff_t *at) { LR_EXT_BODY(>, LR_C_GT) }
LV_CLONES static T LR(minrun)(const T *x, ptrdiff_t n, ptrdiff_t *at) { LR_EXT_BODY(<, LR_C_LT) }
/* acc += the 16 lanes of s, folded pairwise */
#define LR_FOLD_S(s, acc)                                                        \
    do {                                                                         \
        LR(vec) sv_;                                                             \
        memcpy(&sv_, s, sizeof sv_);                                             \
        LR_FOLDV(sv_, LR_C_ADD);                                                 \
        acc += sv_[0];                                                           \
    } while (0)
#else
LV_CLONES static T LR(maxrun)(const T *x, ptrdiff_t n, ptrdiff_t *at) { LR_EXT_BODY_ARR(>) }
LV_CLONES static T LR(minrun)(const T *x, ptrdiff_t n, ptrdiff_t *at) { LR_EXT_BODY_ARR(<) }
#define LR_FOLD_S(s, acc)                                                        \
    do {                                                                         \
        LR_FOLD16(s);                                                            \
        acc += s[0];                                                             \
    } while (0)
#endif

/* The shift of the exp-sums. logsumexp: the max if finite, else 0 (then the sums give
 * inf, nan or log(0) = -inf exactly as the unshifted formula does). softmax and
 * log_softmax: the max itself, so that a row holding +inf, or only -inf, gives nan
 * (inf - inf), as PyTorch. */
static T LR(shift)(T m) { return isfinite(m) ? m : (T)0; }
static T LR(shift_op)(T m, int op) { return op == LR_LSE ? LR(shift)(m) : m; }

/* exp(x - m) over x[0:n], summed, and STORE(k) per element (d = x - m, v = exp(d)):
 * 16 lanes in T, each block of 256 folded pairwise and added in double. Every exp
 * goes through the vector body (the last partial vector is padded with m), so the
 * sum's order and each value depend on n only, not on the clone that runs. over:
 * x[n:n + 16] may be read, so the padded vector is one load and a select (16 scalar
 * copies then a vector load cost a store-forwarding stall per row). */
#define LR_EXPSUM_BODY(STORE)                                                    \
    double acc = 0;                                                              \
    ptrdiff_t nfull = n - n % 16;                                                \
    for (ptrdiff_t b = 0; b < nfull; b += 256) {                                 \
        ptrdiff_t e = nfull - b < 256 ? b + (nfull - b) : b + 256;               \
        T s[16] = {0};                                                           \
        for (ptrdiff_t i = b; i < e; i += 16) {                                  \
            _Pragma("omp simd")                                                  \
            for (int l = 0; l < 16; l++) {                                       \
                T d = x[i + l] - m, v = EXPT(d);                                 \
                STORE(i + l);                                                    \
                s[l] += v;                                                       \
            }                                                                    \
        }                                                                        \
        LR_FOLD_S(s, acc);                                                       \
    }                                                                            \
    if (nfull < n) {                                                             \
        int rest = (int)(n - nfull);                                             \
        T xb[16], eb[16], s[16] = {0};                                           \
        if (over) {                                                              \
            memcpy(xb, x + nfull, sizeof xb);                                    \
            _Pragma("omp simd")                                                  \
            for (int l = 0; l < 16; l++) xb[l] = l < rest ? xb[l] : m;           \
        } else {                                                                 \
            for (int l = 0; l < 16; l++) xb[l] = l < rest ? x[nfull + l] : m;    \
        }                                                                        \
        _Pragma("omp simd")                                                      \
        for (int l = 0; l < 16; l++) eb[l] = EXPT(xb[l] - m);                    \
        for (int l = 0; l < rest; l++) {                                         \
            T d = xb[l] - m, v = eb[l];                                          \
            (void)d;                                                             \
            (void)v;                                                             \
            STORE(nfull + l);                                                    \
        }                                                                        \
        _Pragma("omp simd")                                                      \
        for (int l = 0; l < 16; l++) s[l] = l < rest ? eb[l] : 0;               \
        LR_FOLD_S(s, acc);                                                       \
    }                                                                            \
    return acc;

#define LR_STORE_NONE(k) (void)d
#define LR_STORE_EXP(k) y[k] = v
#define LR_STORE_SHIFT(k) y[k] = d

#if LR_POLY_EXP
/* float: exp inline (lucid_vexpf.h). x[0:rest] (rest < 16) padded with pad to 16 lanes. over: x[rest:16] may be read, so
 * it is one load and a select (16 scalar copies then a vector load cost a
 * store-forwarding stall). */
static inline __attribute__((always_inline)) LR(vec) LR(ptail)(const T *x, int rest, T pad,
                                                               int over)
{
    const LR(msk) lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    LR(vec) v;
    if (over) {
        memcpy(&v, x, sizeof v);
        return LR_SEL(lane < rest, v, LV_F16(pad));
    }
    T b[16];
    for (int l = 0; l < 16; l++) b[l] = l < rest ? x[l] : pad;
    memcpy(&v, b, sizeof v);
    return v;
}

/* The exp sum of LR_EXPSUM_BODY (store: 0 none, 1 y = exp(x - m), 2 y = x - m) in
 * the same order: 16 lanes, each block of 256 folded pairwise and added in double; the
 * last partial vector, padded with m, joins the last block's lanes (its padding
 * masked to 0). */
static inline __attribute__((always_inline)) double LR(pexpsum)(const T *x, T *y,
                                                                ptrdiff_t n, T m, int over,
                                                                int store, int full,
                                                                LR(msk) *bad)
{
    const LR(msk) lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const LR(vec) mv = LV_F16(m);
    double acc = 0;
    for (ptrdiff_t b = 0; b < n; b += 256) {
        ptrdiff_t e = n - b < 256 ? n : b + 256, i = b;
        LR(vec) s = LV_F16(0.0f), v, d, ev;
        for (; i + 16 <= e; i += 16) {
            memcpy(&v, x + i, sizeof v);
            d = v - mv;
            ev = lv_expf16(d, bad, full);
            if (store == 1) memcpy(y + i, &ev, sizeof ev);
            if (store == 2) memcpy(y + i, &d, sizeof d);
            s += ev;
        }
        if (i < e) {
            int rest = (int)(e - i);
            d = LR(ptail)(x + i, rest, m, over) - mv;
            ev = lv_expf16(d, bad, full);
            for (int l = 0; l < rest && store; l++) y[i + l] = store == 1 ? ev[l] : d[l];
            s += LR_SEL(lane < rest, ev, LV_F16(0.0f));
        }
        LR_FOLDV(s, LR_C_ADD);
        acc += s[0];
    }
    return acc;
}

#define LR_PEXP_BODY(y, store)                                                   \
    LR(msk) bad = {0};                                                           \
    double s = LR(pexpsum)(x, y, n, m, over, store, 0, &bad);                    \
    if (lv_any16(bad)) s = LR(pexpsum)(x, y, n, m, over, store, 1, &bad);       \
    return s;
#define LR_EXPSUM_NONE LR_PEXP_BODY(NULL, 0)
#define LR_EXPSUM_EXP LR_PEXP_BODY(y, 1)
#define LR_EXPSUM_SHIFT LR_PEXP_BODY(y, 2)
#else
#define LR_EXPSUM_NONE LR_EXPSUM_BODY(LR_STORE_NONE)
#define LR_EXPSUM_EXP LR_EXPSUM_BODY(LR_STORE_EXP)
#define LR_EXPSUM_SHIFT LR_EXPSUM_BODY(LR_STORE_SHIFT)
#endif

/* sum(exp(x - m)). */
LV_CLONES static double LR(sumexp)(const T *x, ptrdiff_t n, T m, int over)
{
    LR_EXPSUM_NONE
}

/* y = exp(x - m); returns sum(y), summed as sumexp does. */
LV_CLONES static double LR(expwrite)(const T *x, T *y, ptrdiff_t n, T m, int over)
{
    LR_EXPSUM_EXP
}

/* y = x - m; returns sum(exp(y)), summed as sumexp does. */
LV_CLONES static double LR(shiftwrite)(const T *x, T *y, ptrdiff_t n, T m, int over)
{
    LR_EXPSUM_SHIFT
}
#undef LR_EXPSUM_NONE
#undef LR_EXPSUM_EXP
#undef LR_EXPSUM_SHIFT

/* The product of x[0:n] in double: 16 lanes (two vectors of 8 doubles, kept in
 * registers), the last partial 16 padded with 1, folded pairwise. over: x[n:n + 16]
 * may be read, so the tail is one load and a select (a copy through the stack costs
 * a store-forwarding stall per row). */
typedef double LR(dv8) __attribute__((vector_size(8 * sizeof(double))));
typedef T LR(tv8) __attribute__((vector_size(8 * sizeof(T))));
/* x[0:16] in double, as lanes 0-7 (*lo) and 8-15 (*hi). Floats are widened as one
 * vector of 16 (gcc widens a vector of 8 floats in two halves and a join). */
static inline __attribute__((always_inline)) void LR(load16d)(const T *x, LR(dv8) *lo,
                                                               LR(dv8) *hi)
{
#if LR_GENERIC_VEC
    typedef double dv16_ __attribute__((vector_size(16 * sizeof(double))));
    LR(vec) v;
    memcpy(&v, x, sizeof v);
    dv16_ d = __builtin_convertvector(v, dv16_);
    memcpy(lo, &d, sizeof *lo);
    memcpy(hi, (const char *)&d + sizeof *lo, sizeof *hi);
#else
    memcpy(lo, x, sizeof *lo);
    memcpy(hi, x + 8, sizeof *hi);
#endif
}

static inline __attribute__((always_inline)) LR(dv8) LR(prod_lanes)(const T *x, ptrdiff_t n,
                                                                     int over)
{
    const LR(dv8) one = {1, 1, 1, 1, 1, 1, 1, 1};
    LR(dv8) a0 = one, a1 = one, d0, d1;
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        LR(load16d)(x + i, &d0, &d1);
        a0 *= d0;
        a1 *= d1;
    }
    if (i < n) {
        if (over) {
            const LR(m8) lane = {0, 1, 2, 3, 4, 5, 6, 7};
            LR(m8) k0 = lane < n - i, k1 = lane + 8 < n - i;
            LR(load16d)(x + i, &d0, &d1);
            a0 *= (LR(dv8))((k0 & (LR(m8))d0) | (~k0 & (LR(m8))one));
            a1 *= (LR(dv8))((k1 & (LR(m8))d1) | (~k1 & (LR(m8))one));
        } else {
            T t[16];
            for (int l = 0; l < 16; l++) t[l] = i + l < n ? x[i + l] : (T)1;
            LR(load16d)(t, &d0, &d1);
            a0 *= d0;
            a1 *= d1;
        }
    }
    return a0 * a1;
}

/* A row's 8 lanes folded pairwise: lane i with i + 4, then i with i + 2, then 0 with 1. */
static inline __attribute__((always_inline)) double LR(prod_body)(const T *x, ptrdiff_t n,
                                                                  int over)
{
    LR(dv8) a = LR(prod_lanes)(x, n, over);
    a *= __builtin_shuffle(a, (LR(m8)){4, 5, 6, 7, 4, 5, 6, 7});
    a *= __builtin_shuffle(a, (LR(m8)){2, 3, 2, 3, 2, 3, 2, 3});
    return a[0] * a[1];
}

/* Eight rows' lanes folded at once, each row with the pairs of LR(prod_body) (so the
 * same bits), its product in lane k for row k: three multiplies of interleaved halves
 * instead of eight rows' serial folds (a row of 100 spent half its time there). */
static inline __attribute__((always_inline)) LR(dv8) LR(prod_fold8)(const LR(dv8) *v)
{
    const LR(m8) lo4 = {0, 1, 2, 3, 8, 9, 10, 11}, hi4 = {4, 5, 6, 7, 12, 13, 14, 15};
    const LR(m8) lo2 = {0, 1, 4, 5, 8, 9, 12, 13}, hi2 = {2, 3, 6, 7, 10, 11, 14, 15};
    const LR(m8) lo1 = {0, 2, 4, 6, 8, 10, 12, 14}, hi1 = {1, 3, 5, 7, 9, 11, 13, 15};
    LR(dv8) w[4], u[2];
    for (int k = 0; k < 4; k++)        /* rows 2k, 2k + 1: lanes i * (i + 4), i < 4 */
        w[k] = __builtin_shuffle(v[2 * k], v[2 * k + 1], lo4) *
               __builtin_shuffle(v[2 * k], v[2 * k + 1], hi4);
    for (int k = 0; k < 2; k++)        /* rows 4k..4k + 3: then i * (i + 2), i < 2 */
        u[k] = __builtin_shuffle(w[2 * k], w[2 * k + 1], lo2) *
               __builtin_shuffle(w[2 * k], w[2 * k + 1], hi2);
    return __builtin_shuffle(u[0], u[1], lo1) * __builtin_shuffle(u[0], u[1], hi1);
}

LV_CLONES static double LR(prodrun)(const T *x, ptrdiff_t n) { return LR(prod_body)(x, n, 0); }

/* The products of the rows r0 <= r < r1 (rows of n, nrows in all), inline, eight rows
 * folded together: rows that have 16 elements after them in x read their tail in
 * place. */
LV_CLONES static void LR(prodrows)(const T *x, T *y, ptrdiff_t r0, ptrdiff_t r1, ptrdiff_t n,
                                   ptrdiff_t nrows)
{
    ptrdiff_t safe_end = lr_over_end(nrows, n), r = r0;
    for (; r + 8 <= r1 && r + 8 <= safe_end; r += 8) {
        LR(dv8) v[8];
        for (int k = 0; k < 8; k++) v[k] = LR(prod_lanes)(x + (r + k) * n, n, 1);
        LR(dv8) p = LR(prod_fold8)(v);
        for (int k = 0; k < 8; k++) y[r + k] = (T)p[k];
    }
    for (; r < r1 && r < safe_end; r++) y[r] = (T)LR(prod_body)(x + r * n, n, 1);
    for (; r < r1; r++) y[r] = (T)LR(prod_body)(x + r * n, n, 0);
}

/* The transformed pairwise sums (LR_SUM, LR_SUMSQ, LR_ASUM) of one run / of rows. */
static double LR(tsum)(int op, const T *x, ptrdiff_t n, T c)
{
    return op == LR_SUMSQ ? LR_SUM_SQ(t)(x, n, c) : op == LR_ASUM ? LR_SUM_ABS(t)(x, n, c)
                                                                : LR_SUM_ID(t)(x, n, c);
}

static void LR(tsumrows)(int op, const T *x, T *y, ptrdiff_t r0, ptrdiff_t r1, ptrdiff_t n,
                         ptrdiff_t nrows, const T *c)
{
    if (op == LR_SUMSQ) LR_SUM_SQ(rows)(x, y, r0, r1, n, nrows, c);
    else if (op == LR_ASUM) LR_SUM_ABS(rows)(x, y, r0, r1, n, nrows, NULL);
    else LR_SUM_ID(rows)(x, y, r0, r1, n, nrows, NULL);
}

LV_CLONES static void LR(scale)(T *y, ptrdiff_t n, T a)
{
    _Pragma("omp simd")
    for (ptrdiff_t i = 0; i < n; i++) y[i] *= a;
}

LV_CLONES static void LR(addc)(T *y, ptrdiff_t n, T c)
{
    _Pragma("omp simd")
    for (ptrdiff_t i = 0; i < n; i++) y[i] += c;
}

/* The max *mp of x[0:n] and s = sum(exp(x - max)) in one pass over memory: blocks of
 * up to LR_EXP_BLOCK elements are read twice while in cache (their max, then their
 * exp-sum), the running sum rescaled (in double) when the max grows; a row of one
 * block is the two-pass formula itself. Returns 0, or -1 when some block's max is
 * not finite (the caller then runs the exact two-pass formula, whose shift rules
 * give inf and nan as PyTorch). The order of everything depends on n only. */
#define LR_EXP_BLOCK 256
static int LR(maxsumexp)(const T *x, ptrdiff_t n, T *mp, double *sp, int over)
{
    T M = 0;
    double S = 0;
    for (ptrdiff_t b = 0; b < n; b += LR_EXP_BLOCK) {
        ptrdiff_t len = n - b < LR_EXP_BLOCK ? n - b : LR_EXP_BLOCK;
        T mb = LR(maxrun)(x + b, len, NULL);
        if (!isfinite(mb)) return -1;
        if (b == 0 || mb > M) {
            if (b) S *= exp((double)M - (double)mb);
            M = mb;
        }
        S += LR(sumexp)(x + b, len, M, over);
    }
    *mp = M;
    *sp = S;
    return 0;
}

/* y = x - (m + log s) (log_softmax's write pass), as (x - m) - log s in T. */
LV_CLONES static void LR(lsmwrite)(const T *x, T *y, ptrdiff_t n, T m, T ls)
{
    _Pragma("omp simd")
    for (ptrdiff_t i = 0; i < n; i++) y[i] = (x[i] - m) - ls;
}

/* y *= f, the product in double (f may be tiny). */
LV_CLONES static void LR(scaled)(T *y, ptrdiff_t n, double f)
{
    _Pragma("omp simd")
    for (ptrdiff_t i = 0; i < n; i++) y[i] = (T)((double)y[i] * f);
}

/* softmax of one row in two passes over memory: per block (LR_EXP_BLOCK elements or
 * more, at most LR_SMX_BLOCKS blocks) its max mb, y = exp(x - mb) and the block's sum
 * (the block read twice while in cache); then each block scaled by
 * exp(mb - max) / sum. A row with a non-finite block max runs the three-pass formula
 * (x - max, whose nan for a row holding +inf or only -inf is PyTorch's). */
#define LR_SMX_BLOCKS 64
static void LR(softmax_row)(const T *x, T *y, ptrdiff_t n, int over)
{
    ptrdiff_t B = LR_EXP_BLOCK;
    while ((n + B - 1) / B > LR_SMX_BLOCKS) B *= 2;
    T mb[LR_SMX_BLOCKS];
    double sb[LR_SMX_BLOCKS];
    int nb = 0, finite = 1;
    T M = 0;
    for (ptrdiff_t b = 0; b < n; b += B, nb++) {
        ptrdiff_t len = n - b < B ? n - b : B;
        T m = LR(maxrun)(x + b, len, NULL);
        if (!isfinite(m)) { finite = 0; break; }
        mb[nb] = m;
        sb[nb] = LR(expwrite)(x + b, y + b, len, m, over);
        if (nb == 0 || m > M) M = m;
    }
    if (!finite) {
        T m = LR(maxrun)(x, n, NULL);
        double s = LR(expwrite)(x, y, n, m, over);
        LR(scale)(y, n, (T)(1.0 / s));
        return;
    }
    if (nb == 1) {              /* the row is one block: y / sum, as the 3-pass formula */
        LR(scale)(y, n, (T)(1.0 / sb[0]));
        return;
    }
    double S = 0, f[LR_SMX_BLOCKS];
    for (int k = 0; k < nb; k++) {
        f[k] = exp((double)mb[k] - (double)M);
        S += sb[k] * f[k];
    }
    for (int k = 0; k < nb; k++) {
        ptrdiff_t b = (ptrdiff_t)k * B, len = n - b < B ? n - b : B;
        LR(scaled)(y + b, len, f[k] / S);
    }
}

/* sum(a b) over [0:n] (b == NULL: sum(a)) in double: 16 lanes (two vectors of 8
 * doubles), the last partial 16 padded with 0, folded pairwise; the order depends on
 * n only. over: a[n:n + 16] and b[n:n + 16] may be read (the last vector is read in
 * place; a copy through the stack costs a store-forwarding stall per row). */
LV_CLONES static double LR(dot)(const T *a, const T *b, ptrdiff_t n, int over)
{
    const LR(m8) lane = {0, 1, 2, 3, 4, 5, 6, 7};
    const LR(dv8) zero = {0, 0, 0, 0, 0, 0, 0, 0}, one = {1, 1, 1, 1, 1, 1, 1, 1};
    LR(dv8) s0 = zero, s1 = zero, u0, u1, v0 = one, v1 = one;
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        LR(load16d)(a + i, &u0, &u1);
        if (b) LR(load16d)(b + i, &v0, &v1);
        s0 += u0 * v0;
        s1 += u1 * v1;
    }
    if (i < n) {
        ptrdiff_t rest = n - i;
        if (over) {
            LR(load16d)(a + i, &u0, &u1);
            if (b) LR(load16d)(b + i, &v0, &v1);
        } else {
            T t[16], w[16];
            for (int l = 0; l < 16; l++) {
                t[l] = l < rest ? a[i + l] : 0;
                w[l] = l < rest && b ? b[i + l] : 1;
            }
            LR(load16d)(t, &u0, &u1);
            LR(load16d)(w, &v0, &v1);
        }
        LR(m8) k0 = lane < rest, k1 = lane + 8 < rest;
        s0 += (LR(dv8))(k0 & (LR(m8))(u0 * v0));
        s1 += (LR(dv8))(k1 & (LR(m8))(u1 * v1));
    }
    s0 += s1;
    s0 += __builtin_shuffle(s0, (LR(m8)){4, 5, 6, 7, 4, 5, 6, 7});
    s0 += __builtin_shuffle(s0, (LR(m8)){2, 3, 2, 3, 2, 3, 2, 3});
    return s0[0] + s0[1];
}

/* The fused backward of a row: softmax (y = the output): y (g - sum(g y));
 * log_softmax (y = the output): g - exp(y) sum(g); logsumexp: g exp(x - lse) with
 * the row's scalars g, lse. */
LV_CLONES static void LR(smxbwd)(const T *y, const T *g, T *out, ptrdiff_t n, int over)
{
    T d = (T)LR(dot)(g, y, n, over);
    _Pragma("omp simd")
    for (ptrdiff_t i = 0; i < n; i++) out[i] = y[i] * (g[i] - d);
}

#if LR_POLY_EXP
/* out = gv + a exp(x - c) (gv == NULL: a exp(x - c)) over [0:n] with lv_expf16. The
 * last partial vector through LR(ptail) (over: x and gv may be read past n). The caller
 * redoes the run with full = 1 when *bad flags a lane (out is never x or gv: the
 * kernels write fresh arrays). */
static inline __attribute__((always_inline)) void LR(pexpmap)(const T *x, const T *gv, T a,
                                                              T c, T *out, ptrdiff_t n,
                                                              int over, int full,
                                                              LR(msk) *bad)
{
    const LR(vec) av = LV_F16(a), cv = LV_F16(c);
    LR(vec) v, g = LV_F16(0.0f), e;
    for (ptrdiff_t i = 0; i < n; i += 16) {
        int rest = n - i < 16 ? (int)(n - i) : 16;
        if (rest == 16) {
            memcpy(&v, x + i, sizeof v);
            if (gv) memcpy(&g, gv + i, sizeof g);
        } else {
            v = LR(ptail)(x + i, rest, c, over);
            if (gv) g = LR(ptail)(gv + i, rest, 0, over);
        }
        e = lv_expf16(v - cv, bad, full);
        e = gv ? g + av * e : av * e;
        if (rest == 16) memcpy(out + i, &e, sizeof e);
        else for (int l = 0; l < rest; l++) out[i + l] = e[l];
    }
}
#define LR_EXPMAP(x, gv, a, c, out, n, over)                                     \
    do {                                                                         \
        LR(msk) bad_ = {0};                                                      \
        LR(pexpmap)(x, gv, a, c, out, n, over, 0, &bad_);                        \
        if (lv_any16(bad_)) LR(pexpmap)(x, gv, a, c, out, n, over, 1, &bad_);    \
    } while (0)
#endif

LV_CLONES static void LR(lsmbwd)(const T *y, const T *g, T *out, ptrdiff_t n, int over)
{
    T sg = (T)LR(dot)(g, NULL, n, over);
#if LR_POLY_EXP
    LR_EXPMAP(y, g, -sg, (T)0, out, n, over);
#else
    _Pragma("omp simd")
    for (ptrdiff_t i = 0; i < n; i++) out[i] = g[i] - EXPT(y[i]) * sg;
#endif
}

LV_CLONES static void LR(lsebwd)(const T *x, T g, T lse, T *out, ptrdiff_t n, int over)
{
    (void)over;
#if LR_POLY_EXP
    LR_EXPMAP(x, NULL, g, lse, out, n, over);
#else
    _Pragma("omp simd")
    for (ptrdiff_t i = 0; i < n; i++) out[i] = g * EXPT(x[i] - lse);
#endif
}

/* An 8x8 block of doubles transposed in place (v[j][k] <-> v[k][j]): three rounds
 * of two-vector shuffles, pairing blocks of 1, 2 and 4 lanes. */
static inline __attribute__((always_inline)) void LR(tr8)(LR(dv8) *v)
{
#define LR_TR_ROUND(S, LO, HI)                                                   \
    for (int a_ = 0; a_ < 8; a_++) {                                             \
        if (a_ & S) continue;                                                    \
        LR(dv8) lo_ = __builtin_shuffle(v[a_], v[a_ + S], LO);                   \
        LR(dv8) hi_ = __builtin_shuffle(v[a_], v[a_ + S], HI);                   \
        v[a_] = lo_;                                                             \
        v[a_ + S] = hi_;                                                         \
    }
    const LR(m8) lo1 = {0, 8, 2, 10, 4, 12, 6, 14}, hi1 = {1, 9, 3, 11, 5, 13, 7, 15};
    const LR(m8) lo2 = {0, 1, 8, 9, 4, 5, 12, 13}, hi2 = {2, 3, 10, 11, 6, 7, 14, 15};
    const LR(m8) lo4 = {0, 1, 2, 3, 8, 9, 10, 11}, hi4 = {4, 5, 6, 7, 12, 13, 14, 15};
    LR_TR_ROUND(1, lo1, hi1)
    LR_TR_ROUND(2, lo2, hi2)
    LR_TR_ROUND(4, lo4, hi4)
#undef LR_TR_ROUND
}

/* cumsum / cumprod of the rows r0 <= r < r1 (rows of L), in sequence and in double
 * as the definition reads. Eight rows at a time: each 8x8 block (8 rows, 8 columns)
 * is transposed so that a lane holds one row, the 8 steps run on whole vectors (the
 * same additions, in the same order, as one row at a time), and the results are
 * transposed back and stored as full vectors (scalar stores were the bottleneck).
 * Columns past the last multiple of 16, and the last rows, go one by one. */
LV_CLONES static void LR(cumrows)(const T *restrict x, T *restrict y, ptrdiff_t r0,
                                  ptrdiff_t r1, ptrdiff_t L, int prod)
{
    ptrdiff_t r = r0, L16 = L - L % 16;
    for (; r + 8 <= r1; r += 8) {
        const T *xr = x + r * L;
        T *yr = y + r * L;
        LR(dv8) acc = {prod, prod, prod, prod, prod, prod, prod, prod};
        for (ptrdiff_t i = 0; i < L16; i += 16) {
            LR(dv8) v[8], u[8];
            for (int j = 0; j < 8; j++) LR(load16d)(xr + j * L + i, &v[j], &u[j]);
            LR(tr8)(v);
            LR(tr8)(u);
            for (int k = 0; k < 8; k++) {
                if (prod) acc *= v[k];
                else acc += v[k];
                v[k] = acc;
            }
            for (int k = 0; k < 8; k++) {
                if (prod) acc *= u[k];
                else acc += u[k];
                u[k] = acc;
            }
            LR(tr8)(v);
            LR(tr8)(u);
            for (int j = 0; j < 8; j++) {
                LR(tv8) t = __builtin_convertvector(v[j], LR(tv8));
                memcpy(yr + j * L + i, &t, sizeof t);
                t = __builtin_convertvector(u[j], LR(tv8));
                memcpy(yr + j * L + i + 8, &t, sizeof t);
            }
        }
        for (int j = 0; j < 8; j++) {
            double a = acc[j];
            const T *xj = xr + j * L;
            T *yj = yr + j * L;
            if (prod)
                for (ptrdiff_t i = L16; i < L; i++) { a *= (double)xj[i]; yj[i] = (T)a; }
            else
                for (ptrdiff_t i = L16; i < L; i++) { a += (double)xj[i]; yj[i] = (T)a; }
        }
    }
    for (; r < r1; r++) {
        const T *xr = x + r * L;
        T *yr = y + r * L;
        double acc = prod;
        if (prod)
            for (ptrdiff_t i = 0; i < L; i++) { acc *= (double)xr[i]; yr[i] = (T)acc; }
        else
            for (ptrdiff_t i = 0; i < L; i++) { acc += (double)xr[i]; yr[i] = (T)acc; }
    }
}

/* ---- rows (I == 1) ----------------------------------------------------- */

static void LR(row)(const lucid_red_plan *p, ptrdiff_t r)
{
    ptrdiff_t L = p->red;
    const T *x = (const T *)p->x + r * L;
    T *y = (T *)p->y;
    ptrdiff_t at;
    int over = r < lr_over_end(p->outer, L);   /* x[L:L + 16] may be read */
    switch (p->op) {
    case LR_MAX:
    case LR_MIN:
        y[r] = p->op == LR_MAX ? LR(maxrun)(x, L, p->idx ? &at : NULL)
                               : LR(minrun)(x, L, p->idx ? &at : NULL);
        if (p->idx) p->idx[r] = at;
        break;
    case LR_SOFTMAX:
        LR(softmax_row)(x, y + r * L, L, over);
        break;
    case LR_SOFTMAX_BWD:
        LR(smxbwd)(x, (const T *)p->g + r * L, y + r * L, L, over);
        break;
    case LR_LOGSOFTMAX_BWD:
        LR(lsmbwd)(x, (const T *)p->g + r * L, y + r * L, L, over);
        break;
    case LR_LSE_BWD:
        LR(lsebwd)(x, ((const T *)p->g)[r], ((const T *)p->center)[r], y + r * L, L, over);
        break;
    }
}

/* MEAN and NORM2 from the sums of y[k0:k1] in place: the sum / R in T (as the
 * sum's dtype divides); sqrt, and the flag where the result is so small that the
 * squares reached the subnormal range, or not finite. */
static void LR(finish)(lucid_red_plan *p, T *y, ptrdiff_t n)
{
    if (p->op == LR_MEAN) {
        T c = (T)p->red;
        for (ptrdiff_t k = 0; k < n; k++) y[k] = y[k] / c;
    } else if (p->op == LR_NORM2) {
        const T lo = (T)(sizeof(T) == 4 ? 1e-15 : 1e-145);
        int bad = 0;
        for (ptrdiff_t k = 0; k < n; k++) {
            y[k] = (T)sqrt((double)y[k]);
            bad |= !(y[k] >= lo && y[k] < (T)INFINITY);
        }
        if (bad) __atomic_store_n(&p->flag, 1, __ATOMIC_RELAXED);
    }
}

/* The sum a MEAN or NORM2 starts from. */
static int LR(base_op)(int op)
{
    return op == LR_MEAN ? LR_SUM : op == LR_NORM2 ? LR_SUMSQ : op;
}

/* ---- columns (I > 1): w <= LR_COL_W columns at x, rows I apart ------------ */

/* Column sums of XF(x, c[col]): blocks of LR_COL_LEAF rows summed in sequence in T
 * (NumPy sums all rows so), the blocks combined pairwise in double (XF in T: the
 * elements, their squared deviations from c, their absolute values). */
#define LR_XS_ID(v, c) (v)
#define LR_XS_SQ(v, c) (((v) - (c)) * ((v) - (c)))
#define LR_XS_ABS(v, c) ((v) < 0 ? -(v) : (v))
#define LR_COLSUM(name, XF)                                                      \
LV_CLONES static void LR(name)(const T *x, ptrdiff_t I, ptrdiff_t R, int w, const T *cc, \
                               double *out)                                      \
{                                                                                \
    if (R <= LR_COL_LEAF) {                                                      \
        int c0 = 0;                                                              \
        /* groups of 16 columns: the accumulators stay in registers */           \
        for (; c0 + 16 <= w; c0 += 16) {                                         \
            T acc[16] = {0};                                                     \
            for (ptrdiff_t r = 0; r < R; r++) {                                  \
                const T *xr = x + r * I + c0;                                    \
                _Pragma("omp simd")                                              \
                for (int l = 0; l < 16; l++) acc[l] += XF(xr[l], cc[c0 + l]);    \
            }                                                                    \
            for (int l = 0; l < 16; l++) out[c0 + l] = acc[l];                   \
        }                                                                        \
        if (c0 < w) {                                                            \
            T acc[16] = {0};                                                     \
            for (ptrdiff_t r = 0; r < R; r++) {                                  \
                const T *xr = x + r * I + c0;                                    \
                _Pragma("omp simd")                                              \
                for (int c = 0; c < w - c0; c++) acc[c] += XF(xr[c], cc[c0 + c]); \
            }                                                                    \
            for (int c = c0; c < w; c++) out[c] = acc[c - c0];                   \
        }                                                                        \
        return;                                                                  \
    }                                                                            \
    ptrdiff_t h = (R / 2 / LR_COL_LEAF) * LR_COL_LEAF;                           \
    if (h == 0) h = LR_COL_LEAF;                                                 \
    double tmp[LR_COL_W];                                                        \
    LR(name)(x, I, h, w, cc, out);                                               \
    LR(name)(x + h * I, I, R - h, w, cc, tmp);                                   \
    for (int c = 0; c < w; c++) out[c] += tmp[c];                                \
}
LR_COLSUM(colsum, LR_XS_ID)
LR_COLSUM(colsumsq, LR_XS_SQ)
LR_COLSUM(colasum, LR_XS_ABS)

/* Cumulative sums and products down w columns, vectorised across the columns,
 * accumulated in double. */
LV_CLONES static void LR(cumcols)(const T *x, T *y, ptrdiff_t I, ptrdiff_t R, int w, int prod)
{
    double acc[LR_COL_W];
    for (int c = 0; c < w; c++) acc[c] = prod ? 1 : 0;
    for (ptrdiff_t r = 0; r < R; r++) {
        const T *xr = x + r * I;
        T *yr = y + r * I;
        if (prod) {
            _Pragma("omp simd")
            for (int c = 0; c < w; c++) { acc[c] *= (double)xr[c]; yr[c] = (T)acc[c]; }
        } else {
            _Pragma("omp simd")
            for (int c = 0; c < w; c++) { acc[c] += (double)xr[c]; yr[c] = (T)acc[c]; }
        }
    }
}

/* Column products in double, row after row. */
LV_CLONES static void LR(colprod)(const T *x, ptrdiff_t I, ptrdiff_t R, int w, double *out)
{
    for (int c = 0; c < w; c++) out[c] = 1;
    for (ptrdiff_t r = 0; r < R; r++) {
        const T *xr = x + r * I;
        _Pragma("omp simd")
        for (int c = 0; c < w; c++) out[c] *= (double)xr[c];
    }
}

/* Column extremes (and first indices); columns holding inf or NaN are redone
 * exactly (a strided walk, for those columns only). LR(v64): 64 bytes of T. */
typedef T LR(v64) __attribute__((vector_size(64)));
typedef IT LR(i64v) __attribute__((vector_size(64)));
#define LR_L64 (int)(64 / sizeof(T))              /* lanes of an LR(v64) */
#define LR_NV64 (int)(LR_COL_W * sizeof(T) / 64)  /* LR(v64)s per full piece */
#define LR_COLEXT_BODY(CMP)                                                      \
    T z[LR_COL_W];                                                               \
    if (w == LR_COL_W) {                                                         \
        /* a full piece: the running extremes and inf/nan sums in registers     \
         * (gcc keeps m[] in memory otherwise, m being the caller's array) */    \
        LR(v64) mv[LR_NV64], zv[LR_NV64];                                        \
        for (int j = 0; j < LR_NV64; j++) {                                      \
            memcpy(&mv[j], x + j * LR_L64, sizeof mv[j]);                        \
            zv[j] = mv[j] - mv[j];                                               \
        }                                                                        \
        for (ptrdiff_t r = 1; r < R; r++) {                                      \
            const T *xr = x + r * I;                                             \
            for (int j = 0; j < LR_NV64; j++) {                                  \
                LR(v64) v;                                                       \
                memcpy(&v, xr + j * LR_L64, sizeof v);                           \
                LR(i64v) k = v CMP mv[j];                                        \
                mv[j] = (LR(v64))((k & (LR(i64v))v) | (~k & (LR(i64v))mv[j]));   \
                zv[j] += v - v;                                                  \
            }                                                                    \
        }                                                                        \
        for (int j = 0; j < LR_NV64; j++) {                                      \
            memcpy(m + j * LR_L64, &mv[j], sizeof mv[j]);                        \
            memcpy(z + j * LR_L64, &zv[j], sizeof zv[j]);                        \
        }                                                                        \
    } else {                                                                     \
        for (int c = 0; c < w; c++) { m[c] = x[c]; z[c] = x[c] - x[c]; }         \
        for (ptrdiff_t r = 1; r < R; r++) {                                      \
            const T *xr = x + r * I;                                             \
            _Pragma("omp simd")                                                  \
            for (int c = 0; c < w; c++) {                                        \
                T v = xr[c];                                                     \
                m[c] = v CMP m[c] ? v : m[c];                                    \
                z[c] += v - v;                                                   \
            }                                                                    \
        }                                                                        \
    }                                                                            \
    if (at) {                                                                    \
        for (int c = 0; c < w; c++) at[c] = -1;                                  \
        for (ptrdiff_t r = 0; r < R; r++) {                                      \
            const T *xr = x + r * I;                                             \
            _Pragma("omp simd")                                                  \
            for (int c = 0; c < w; c++)                                          \
                at[c] = (at[c] < 0 && xr[c] == m[c]) ? (int64_t)r : at[c];       \
        }                                                                        \
    }                                                                            \
    for (int c = 0; c < w; c++) {                                                \
        if (z[c] == z[c]) continue;                                              \
        T v0 = x[c];                                                             \
        ptrdiff_t k = 0;                                                         \
        if (v0 == v0) {                                                          \
            for (ptrdiff_t r = 1; r < R; r++) {                                  \
                T v = x[r * I + c];                                              \
                if (v != v) { v0 = v; k = r; break; }                            \
                if (v CMP v0) { v0 = v; k = r; }                                 \
            }                                                                    \
        }                                                                        \
        m[c] = v0;                                                               \
        if (at) at[c] = k;                                                       \
    }

LV_CLONES static void LR(colmax)(const T *x, ptrdiff_t I, ptrdiff_t R, int w, T *m,
                                 int64_t *at) { LR_COLEXT_BODY(>) }
LV_CLONES static void LR(colmin)(const T *x, ptrdiff_t I, ptrdiff_t R, int w, T *m,
                                 int64_t *at) { LR_COLEXT_BODY(<) }

/* lse / softmax / log_softmax down the columns: the max, then one pass computing
 * exp (and writing y for the row-wise ops) with column sums in double, then y
 * scaled or shifted in place. */
LV_CLONES static void LR(colexp)(const T *x, T *y, ptrdiff_t I, ptrdiff_t R, int w, int op,
                                 T *out)
{
    T m[LR_COL_W];
    double s[LR_COL_W];
    LR(colmax)(x, I, R, w, m, NULL);
    for (int c = 0; c < w; c++) { m[c] = LR(shift_op)(m[c], op); s[c] = 0; }
    for (ptrdiff_t r = 0; r < R; r++) {
        const T *xr = x + r * I;
        if (op == LR_LSE) {
            _Pragma("omp simd")
            for (int c = 0; c < w; c++) s[c] += EXPT(xr[c] - m[c]);
        } else if (op == LR_SOFTMAX) {
            T *yr = y + r * I;
            _Pragma("omp simd")
            for (int c = 0; c < w; c++) { T v = EXPT(xr[c] - m[c]); yr[c] = v; s[c] += v; }
        } else {
            T *yr = y + r * I;
            _Pragma("omp simd")
            for (int c = 0; c < w; c++) { T v = xr[c] - m[c]; yr[c] = v; s[c] += EXPT(v); }
        }
    }
    if (op == LR_LSE) {
        for (int c = 0; c < w; c++) out[c] = (T)(log(s[c]) + (double)m[c]);
        return;
    }
    T k[LR_COL_W];
    for (int c = 0; c < w; c++) k[c] = op == LR_SOFTMAX ? (T)(1.0 / s[c]) : (T)(-log(s[c]));
    for (ptrdiff_t r = 0; r < R; r++) {
        T *yr = y + r * I;
        if (op == LR_SOFTMAX) {
            _Pragma("omp simd")
            for (int c = 0; c < w; c++) yr[c] *= k[c];
        } else {
            _Pragma("omp simd")
            for (int c = 0; c < w; c++) yr[c] += k[c];
        }
    }
}

/* The fused backward ops down w columns (see LR(smxbwd)): the column sums in double,
 * row after row, then one write pass. */
LV_CLONES static void LR(colbwd)(const T *x, const T *g, T *out, ptrdiff_t I, ptrdiff_t R,
                                 int w, int op, const T *gr, const T *lse)
{
    if (op == LR_LSE_BWD) {
        for (ptrdiff_t r = 0; r < R; r++) {
            const T *xr = x + r * I;
            T *o = out + r * I;
            _Pragma("omp simd")
            for (int c = 0; c < w; c++) o[c] = gr[c] * EXPT(xr[c] - lse[c]);
        }
        return;
    }
    double s[LR_COL_W];
    T d[LR_COL_W];
    for (int c = 0; c < w; c++) s[c] = 0;
    for (ptrdiff_t r = 0; r < R; r++) {
        const T *xr = x + r * I, *gg = g + r * I;
        if (op == LR_SOFTMAX_BWD) {
            _Pragma("omp simd")
            for (int c = 0; c < w; c++) s[c] += (double)gg[c] * (double)xr[c];
        } else {
            _Pragma("omp simd")
            for (int c = 0; c < w; c++) s[c] += (double)gg[c];
        }
    }
    for (int c = 0; c < w; c++) d[c] = (T)s[c];
    for (ptrdiff_t r = 0; r < R; r++) {
        const T *xr = x + r * I, *gg = g + r * I;
        T *o = out + r * I;
        if (op == LR_SOFTMAX_BWD) {
            _Pragma("omp simd")
            for (int c = 0; c < w; c++) o[c] = xr[c] * (gg[c] - d[c]);
        } else {
            _Pragma("omp simd")
            for (int c = 0; c < w; c++) o[c] = gg[c] - EXPT(xr[c]) * d[c];
        }
    }
}

static void LR(cols)(const lucid_red_plan *p, ptrdiff_t piece)
{
    ptrdiff_t nch = (p->inner + LR_COL_W - 1) / LR_COL_W;
    ptrdiff_t o = piece / nch, c0 = (piece % nch) * LR_COL_W;
    int w = (int)(p->inner - c0 < LR_COL_W ? p->inner - c0 : LR_COL_W);
    const T *x = (const T *)p->x + o * p->red * p->inner + c0;
    T *y = (T *)p->y;
    ptrdiff_t oi = o * p->inner + c0;
    double s[LR_COL_W];
    T cc[LR_COL_W];
    for (int c = 0; c < w; c++) cc[c] = p->center ? ((const T *)p->center)[oi + c] : 0;
    int op = LR(base_op)(p->op);
    switch (p->op) {
    case LR_SUM:
    case LR_SUMSQ:
    case LR_ASUM:
    case LR_PROD:
    case LR_MEAN:
    case LR_NORM2:
        if (op == LR_SUM) LR(colsum)(x, p->inner, p->red, w, cc, s);
        else if (op == LR_SUMSQ) LR(colsumsq)(x, p->inner, p->red, w, cc, s);
        else if (op == LR_ASUM) LR(colasum)(x, p->inner, p->red, w, cc, s);
        else LR(colprod)(x, p->inner, p->red, w, s);
        for (int c = 0; c < w; c++) y[oi + c] = (T)s[c];
        LR(finish)((lucid_red_plan *)p, y + oi, w);
        break;
    case LR_SOFTMAX_BWD:
    case LR_LOGSOFTMAX_BWD:
    case LR_LSE_BWD: {
        ptrdiff_t base = o * p->red * p->inner + c0;
        const T *g = (const T *)p->g;
        if (p->op == LR_LSE_BWD)
            LR(colbwd)(x, NULL, y + base, p->inner, p->red, w, p->op, g + oi,
                       (const T *)p->center + oi);
        else
            LR(colbwd)(x, g + base, y + base, p->inner, p->red, w, p->op, NULL, NULL);
        break;
    }
    case LR_MAX:
        LR(colmax)(x, p->inner, p->red, w, y + oi, p->idx ? p->idx + oi : NULL);
        break;
    case LR_MIN:
        LR(colmin)(x, p->inner, p->red, w, y + oi, p->idx ? p->idx + oi : NULL);
        break;
    case LR_LSE:
        LR(colexp)(x, NULL, p->inner, p->red, w, p->op, y + oi);
        break;
    case LR_CUMSUM:
    case LR_CUMPROD:
        LR(cumcols)(x, y + o * p->red * p->inner + c0, p->inner, p->red, w, p->op == LR_CUMPROD);
        break;
    default:
        LR(colexp)(x, y + o * p->red * p->inner + c0, p->inner, p->red, w, p->op, NULL);
        break;
    }
}

/* ---- full (O == I == 1): blocks of LR_BLOCK, combined in lucid_red_step ---- */

static void LR(block)(lucid_red_plan *p, ptrdiff_t b)
{
    ptrdiff_t s0 = b * LR_BLOCK;
    ptrdiff_t n = p->red - s0 < LR_BLOCK ? p->red - s0 : LR_BLOCK;
    const T *x = (const T *)p->x + s0;
    T *y = (T *)p->y + s0;
    ptrdiff_t at = 0;
    int op = LR(base_op)(p->op);
    if (op == LR_SUM || op == LR_SUMSQ || op == LR_ASUM) {
        p->part[b] = LR(tsum)(op, x, n, p->center ? ((const T *)p->center)[0] : 0);
    } else if (p->op == LR_PROD) {
        p->part[b] = LR(prodrun)(x, n);
    } else if (p->op == LR_MAX || p->op == LR_MIN || p->phase == 0) {
        int mx = p->op != LR_MIN;
        ptrdiff_t *pa = p->idx ? &at : NULL;
        p->part[b] = mx ? LR(maxrun)(x, n, pa) : LR(minrun)(x, n, pa);
        p->ipart[b] = s0 + at;
    } else if (p->phase == 1) {
        T m = (T)p->shift;
        int over = s0 + n + 16 <= p->red;
        if (p->op == LR_LSE) p->part[b] = LR(sumexp)(x, n, m, over);
        else if (p->op == LR_SOFTMAX) p->part[b] = LR(expwrite)(x, y, n, m, over);
        else p->part[b] = LR(shiftwrite)(x, y, n, m, over);
    } else {
        if (p->op == LR_SOFTMAX) LR(scale)(y, n, (T)(1.0 / p->total));
        else LR(addc)(y, n, (T)(-log(p->total)));
    }
}

/* The logs of s[0:16] in double (libmvec: one call for 8 of them). */
LV_CLONES static void LR(logs16)(const double *s, double *ls)
{
    _Pragma("omp simd")
    for (int k = 0; k < 16; k++) ls[k] = log(s[k]);
}

/* logsumexp and log_softmax of the rows r0 <= r < r1, as LR(row) does them, in groups
 * of up to 16 rows (as many as fit 16 KiB of x, so the write pass finds them in
 * cache): every row's max and exp sum, then the group's logs in one vector call (a
 * scalar log per row costs as much as the exps of a row of 100), then the writes. */
static void LR(lserows)(const lucid_red_plan *p, ptrdiff_t r0, ptrdiff_t r1)
{
    ptrdiff_t L = p->red, G = (16384 / (ptrdiff_t)sizeof(T)) / (L > 0 ? L : 1);
    G = G < 1 ? 1 : G > 16 ? 16 : G;
    T *y = (T *)p->y;
    for (ptrdiff_t g0 = r0; g0 < r1; g0 += G) {
        int ng = (int)(r1 - g0 < G ? r1 - g0 : G);
        T m[16];
        double s[16], ls[16];
        unsigned char exact[16];
        for (int k = 0; k < 16; k++) s[k] = 1;
        for (int k = 0; k < ng; k++) {
            ptrdiff_t r = g0 + k;
            const T *x = (const T *)p->x + r * L;
            int over = r < lr_over_end(p->outer, L);
            exact[k] = LR(maxsumexp)(x, L, &m[k], &s[k], over) != 0;
            if (!exact[k]) continue;
            if (p->op == LR_LSE) {
                m[k] = LR(shift)(LR(maxrun)(x, L, NULL));
                s[k] = LR(sumexp)(x, L, m[k], over);
            } else {
                m[k] = LR(maxrun)(x, L, NULL);
                s[k] = LR(shiftwrite)(x, y + r * L, L, m[k], over);
            }
        }
        LR(logs16)(s, ls);
        for (int k = 0; k < ng; k++) {
            ptrdiff_t r = g0 + k;
            if (p->op == LR_LSE)
                y[r] = (T)(ls[k] + (double)m[k]);
            else if (exact[k])
                LR(addc)(y + r * L, L, (T)(-ls[k]));
            else
                LR(lsmwrite)((const T *)p->x + r * L, y + r * L, L, m[k], (T)ls[k]);
        }
    }
}

static void LR(piece)(lucid_red_plan *p, ptrdiff_t piece)
{
    if (p->kind == LR_KIND_ROWS) {
        ptrdiff_t r0 = piece * p->per, r1 = r0 + p->per < p->outer ? r0 + p->per : p->outer;
        int op = LR(base_op)(p->op);
        if (op == LR_SUM || op == LR_SUMSQ || op == LR_ASUM) {
            LR(tsumrows)(op, (const T *)p->x, (T *)p->y, r0, r1, p->red, p->outer,
                         (const T *)p->center);
            LR(finish)(p, (T *)p->y + r0, r1 - r0);
        } else if (op == LR_PROD) {
            LR(prodrows)((const T *)p->x, (T *)p->y, r0, r1, p->red, p->outer);
        } else if (op == LR_CUMSUM || op == LR_CUMPROD) {
            LR(cumrows)((const T *)p->x, (T *)p->y, r0, r1, p->red, op == LR_CUMPROD);
        } else if (p->op == LR_LSE || p->op == LR_LOGSOFTMAX) {
            LR(lserows)(p, r0, r1);
        } else {
            for (ptrdiff_t r = r0; r < r1; r++) LR(row)(p, r);
        }
    } else if (p->kind == LR_KIND_COLS) {
        LR(cols)(p, piece);
    } else {
        LR(block)(p, piece);
    }
}

/* The extreme over the blocks' partial results: first NaN, else first best. */
static void LR(ext_combine)(lucid_red_plan *p, int mx, T *val, int64_t *at)
{
    T m = (T)p->part[0];
    int64_t k = p->ipart[0];
    for (ptrdiff_t b = 1; b < p->nblocks && m == m; b++) {
        T v = (T)p->part[b];
        if (v != v || (mx ? v > m : v < m)) { m = v; k = p->ipart[b]; }
    }
    *val = m;
    *at = k;
}

static void LR(step)(lucid_red_plan *p)
{
    T *y = (T *)p->y;
    if (p->kind != LR_KIND_FULL) { p->phase++; return; }
    if (LR(base_op)(p->op) == LR_SUM || LR(base_op)(p->op) == LR_SUMSQ || p->op == LR_ASUM) {
        y[0] = (T)lr_pairwise(p->part, p->nblocks);
        LR(finish)(p, y, 1);
    } else if (p->op == LR_PROD) {
        y[0] = (T)lr_product(p->part, p->nblocks);
    } else if (p->op == LR_MAX || p->op == LR_MIN) {
        int64_t k;
        LR(ext_combine)(p, p->op == LR_MAX, y, &k);
        if (p->idx) p->idx[0] = k;
    } else if (p->phase == 0) {
        T m;
        int64_t k;
        LR(ext_combine)(p, 1, &m, &k);
        p->shift = (double)LR(shift_op)(m, p->op);
    } else if (p->phase == 1) {
        p->total = lr_pairwise(p->part, p->nblocks);
        if (p->op == LR_LSE) y[0] = (T)(log(p->total) + p->shift);
    }
    p->phase++;
}

/* ---- cross entropy fused with its gradient (lucid_xent_plan) ------------- */

/* e = exp(x - m) over x[0:n]; returns sum(e). Every element goes through the same
 * vector body (the last partial block is padded) and is added to a fixed lane, so
 * the sum depends on the values only. */
LV_CLONES static double LR(xexp)(const T *x, T *e, ptrdiff_t n, T m)
{
    double acc[LV_BLOCK] = {0};
    ptrdiff_t nfull = n - n % LV_BLOCK;
    for (ptrdiff_t i = 0; i < nfull; i += LV_BLOCK) {
        _Pragma("omp simd")
        for (int l = 0; l < LV_BLOCK; l++) {
            T v = EXPT(x[i + l] - m);
            e[i + l] = v;
            acc[l] += v;
        }
    }
    if (nfull < n) {
        int rest = (int)(n - nfull);
        T xb[LV_BLOCK], eb[LV_BLOCK];
        for (int l = 0; l < LV_BLOCK; l++) xb[l] = l < rest ? x[nfull + l] : m;
        _Pragma("omp simd")
        for (int l = 0; l < LV_BLOCK; l++) eb[l] = EXPT(xb[l] - m);
        for (int l = 0; l < rest; l++) {
            e[nfull + l] = eb[l];
            acc[l] += eb[l];
        }
    }
    for (int h = LV_BLOCK / 2; h >= 1; h /= 2)
        for (int l = 0; l < h; l++) acc[l] += acc[l + h];
    return acc[0];
}

/* sum(w (x - m)) over x[0:n] (w == NULL: weights 1), lanes as in xexp. */
LV_CLONES static double LR(wdot)(const T *w, const T *x, ptrdiff_t n, T m)
{
    double acc[LV_BLOCK] = {0};
    ptrdiff_t i = 0;
    for (; i + LV_BLOCK <= n; i += LV_BLOCK) {
        _Pragma("omp simd")
        for (int l = 0; l < LV_BLOCK; l++)
            acc[l] += (w ? (double)w[i + l] : 1.0) * (double)(x[i + l] - m);
    }
    for (int l = 0; i + l < n; l++) acc[l] += (w ? (double)w[i + l] : 1.0) * (double)(x[i + l] - m);
    for (int h = LV_BLOCK / 2; h >= 1; h /= 2)
        for (int l = 0; l < h; l++) acc[l] += acc[l + h];
    return acc[0];
}

/* One position: logits x[0:C], probabilities q (or NULL: class index k), e[0:C]
 * scratch that ends up holding the gradient when want_grad. Returns the loss;
 * *den gets the target's weight (index targets). */
LV_CLONES static double LR(xent_row)(const lucid_xent_plan *p, const T *x, const T *q,
                                     int64_t k, T *e, int want_grad, double *den)
{
    ptrdiff_t C = p->c;
    const T *w = (const T *)p->weight;
    double ls = p->smoothing, u = ls / (double)C;
    T m = LR(maxrun)(x, C, NULL);
    double s = LR(xexp)(x, e, C, m);
    double A, ax;
    if (q == NULL) {
        double wk = w ? (double)w[k] : 1.0;
        A = (1.0 - ls) * wk;
        ax = A * (double)(x[k] - m);
        if (ls > 0) {
            A += u * p->wsum;
            ax += u * LR(wdot)(w, x, C, m);
        }
        *den = wk;
        if (want_grad) {
            double f = A / s, ek = (double)e[k];
            _Pragma("omp simd")
            for (ptrdiff_t j = 0; j < C; j++)
                e[j] = (T)((double)e[j] * f - u * (w ? (double)w[j] : 1.0));
            e[k] = (T)(ek * f - u * wk - (1.0 - ls) * wk);
        }
    } else {
        double acc[LV_BLOCK] = {0}, accx[LV_BLOCK] = {0};
        for (ptrdiff_t j = 0; j < C; j++) {
            double a = (w ? (double)w[j] : 1.0) * ((1.0 - ls) * (double)q[j] + u);
            acc[j % LV_BLOCK] += a;
            accx[j % LV_BLOCK] += a * (double)(x[j] - m);
        }
        for (int h = LV_BLOCK / 2; h >= 1; h /= 2)
            for (int l = 0; l < h; l++) { acc[l] += acc[l + h]; accx[l] += accx[l + h]; }
        A = acc[0];
        ax = accx[0];
        *den = 1.0;
        if (want_grad) {
            double f = A / s;
            _Pragma("omp simd")
            for (ptrdiff_t j = 0; j < C; j++)
                e[j] = (T)((double)e[j] * f
                           - (w ? (double)w[j] : 1.0) * ((1.0 - ls) * (double)q[j] + u));
        }
    }
    return A * log(s) - ax;
}

#define LR_XENT_STACK 256    /* classes gathered on the stack; more are malloc'ed */

static void LR(xent_piece)(lucid_xent_plan *p, ptrdiff_t piece)
{
    ptrdiff_t C = p->c, I = p->inner, P = p->n * I;
    ptrdiff_t r0 = piece * p->per, r1 = r0 + p->per < P ? r0 + p->per : P;
    const T *X = (const T *)p->x, *Q = (const T *)p->prob;
    T *G = (T *)p->grad, *loss = (T *)p->loss;
    T stack[3 * LR_XENT_STACK];
    T *buf = stack;
    if (C > LR_XENT_STACK) {
        buf = malloc(sizeof(T) * 3 * (size_t)C);
        if (!buf) {
            __atomic_store_n(&p->oom, 1, __ATOMIC_RELAXED);
            return;
        }
    }
    T *xs = buf, *qs = buf + C, *es = buf + 2 * C;
    for (ptrdiff_t pos = r0; pos < r1; pos++) {
        ptrdiff_t base = (pos / I) * C * I + pos % I;
        int64_t k = -1;
        double den = 0;
        if (p->target) {
            k = p->target[pos];
            if (k == p->ignore_index || k < 0 || k >= C) {
                if (k != p->ignore_index) __atomic_store_n(&p->bad, 1, __ATOMIC_RELAXED);
                loss[pos] = 0;
                if (p->denom) p->denom[pos] = 0;
                if (G) for (ptrdiff_t j = 0; j < C; j++) G[base + j * I] = 0;
                continue;
            }
        }
        const T *xr = X + base, *qr = Q ? Q + base : NULL;
        T *er = G && I == 1 ? G + base : es;
        if (I > 1) {
            for (ptrdiff_t j = 0; j < C; j++) xs[j] = X[base + j * I];
            if (Q) for (ptrdiff_t j = 0; j < C; j++) qs[j] = Q[base + j * I];
            xr = xs;
            qr = Q ? qs : NULL;
        }
        loss[pos] = (T)LR(xent_row)(p, xr, qr, k, er, G != NULL, &den);
        if (p->denom) p->denom[pos] = den;
        if (G && I > 1) for (ptrdiff_t j = 0; j < C; j++) G[base + j * I] = er[j];
    }
    if (buf != stack) free(buf);
}

#undef LR_EXT_BODY
#undef LR_EXT_BODY_ARR
#undef LR_FOLD_S
#undef LR_SEL
#undef LR_C_ADD
#undef LR_C_MUL
#undef LR_C_GT
#undef LR_C_LT
#undef LR_FOLDV
#undef LR_COLEXT_BODY
#undef LR_L64
#undef LR_NV64
#undef LR_EXPSUM_BODY
#undef LR_PEXP_BODY
#undef LR_EXPMAP
#undef LR_STORE_NONE
#undef LR_STORE_EXP
#undef LR_STORE_SHIFT
#undef LR_XS_ID
#undef LR_XS_SQ
#undef LR_XS_ABS
#undef LR_COLSUM
