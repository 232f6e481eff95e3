/* Window kernels of lucid.nn (see lucid_nn.h): im2col / col2im for convolutions and
 * max pooling with its backward, over C-contiguous (N, C, H, W) arrays. Padding is
 * implicit (positions outside the input read as 0, or are skipped by the max), so no
 * padded copy of the input is made. Each output element is computed by the plain
 * scalar code below, in a fixed order.
 *
 * The geometry is copied into locals first: stores through the output pointers could
 * otherwise alias its fields, and the compiler would reload them in every inner loop. */
#include <math.h>
#include <stdint.h>
#include "lucid_nn.h"

#define WIN_LOCALS(g)                                                                    \
    const ptrdiff_t N = (g)->n, C = (g)->c, H = (g)->h, W = (g)->w, KH = (g)->kh,         \
                    KW = (g)->kw, SH = (g)->sh, SW = (g)->sw, DH = (g)->dh, DW = (g)->dw, \
                    PH = (g)->ph, PW = (g)->pw, OH = (g)->oh, OW = (g)->ow

/* The outputs o in [lo, hi) whose input position o s - p + k d lies in [0, n). */
static void valid_range(ptrdiff_t n, ptrdiff_t s, ptrdiff_t p, ptrdiff_t kd, ptrdiff_t nout,
                        ptrdiff_t *lo, ptrdiff_t *hi)
{
    ptrdiff_t off = kd - p;                     /* position of output 0 */
    ptrdiff_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    ptrdiff_t b = off > n - 1 ? 0 : (n - 1 - off) / s + 1;
    *lo = a < nout ? a : nout;
    *hi = b < nout ? b : nout;
    if (*hi < *lo) *hi = *lo;
}

/* cols[(c, ki, kj), (n, i, j)] = x[n, c, i SH - PH + ki DH, j SW - PW + kj DW], 0 outside. */
#define DEFINE_IM2COL(T, SFX)                                                            \
void lucid_im2col_##SFX(const T *x, T *cols, const lucid_win *g)                         \
{                                                                                        \
    WIN_LOCALS(g);                                                                       \
    for (ptrdiff_t ki = 0; ki < KH; ki++) {                                              \
        ptrdiff_t i0, i1;                                                                \
        valid_range(H, SH, PH, ki * DH, OH, &i0, &i1);                                   \
        for (ptrdiff_t kj = 0; kj < KW; kj++) {                                          \
            ptrdiff_t j0, j1;                                                            \
            valid_range(W, SW, PW, kj * DW, OW, &j0, &j1);                               \
            for (ptrdiff_t c = 0; c < C; c++)                                            \
                for (ptrdiff_t n = 0; n < N; n++) {                                      \
                    const T *plane = x + (n * C + c) * H * W;                            \
                    T *out = cols + ((((c * KH + ki) * KW + kj) * N + n) * OH) * OW;     \
                    for (ptrdiff_t i = 0; i < OH; i++) {                                 \
                        T *o = out + i * OW;                                             \
                        if (i < i0 || i >= i1) {                                         \
                            for (ptrdiff_t j = 0; j < OW; j++) o[j] = 0;                 \
                            continue;                                                    \
                        }                                                                \
                        const T *xr = plane + (i * SH - PH + ki * DH) * W - PW + kj * DW; \
                        for (ptrdiff_t j = 0; j < j0; j++) o[j] = 0;                     \
                        for (ptrdiff_t j = j0; j < j1; j++) o[j] = xr[j * SW];           \
                        for (ptrdiff_t j = j1; j < OW; j++) o[j] = 0;                    \
                    }                                                                    \
                }                                                                        \
        }                                                                                \
    }                                                                                    \
}

/* The adjoint: gx (zeroed by the caller) += each column entry at the position it was
 * read from, kernel offsets in order. */
#define DEFINE_COL2IM(T, SFX)                                                            \
void lucid_col2im_##SFX(const T *cols, T *gx, const lucid_win *g)                        \
{                                                                                        \
    WIN_LOCALS(g);                                                                       \
    for (ptrdiff_t ki = 0; ki < KH; ki++) {                                              \
        ptrdiff_t i0, i1;                                                                \
        valid_range(H, SH, PH, ki * DH, OH, &i0, &i1);                                   \
        for (ptrdiff_t kj = 0; kj < KW; kj++) {                                          \
            ptrdiff_t j0, j1;                                                            \
            valid_range(W, SW, PW, kj * DW, OW, &j0, &j1);                               \
            for (ptrdiff_t c = 0; c < C; c++)                                            \
                for (ptrdiff_t n = 0; n < N; n++) {                                      \
                    T *plane = gx + (n * C + c) * H * W;                                 \
                    const T *in = cols + ((((c * KH + ki) * KW + kj) * N + n) * OH) * OW; \
                    for (ptrdiff_t i = i0; i < i1; i++) {                                \
                        T *gr = plane + (i * SH - PH + ki * DH) * W - PW + kj * DW;      \
                        const T *gi = in + i * OW;                                       \
                        for (ptrdiff_t j = j0; j < j1; j++) gr[j * SW] += gi[j];         \
                    }                                                                    \
                }                                                                        \
        }                                                                                \
    }                                                                                    \
}

/* y = the max of each window (positions outside the input take no part); arg = the
 * flat index in the input plane of its first maximum, or of its last NaN (a NaN counts
 * as the maximum, and a later NaN replaces an earlier one, as in torch).
 * The comparisons select without branching (random data would mispredict them). */
#define DEFINE_MAXPOOL(T, SFX)                                                           \
void lucid_maxpool_##SFX(const T *x, T *y, int64_t *arg, const lucid_win *g)            \
{                                                                                        \
    WIN_LOCALS(g);                                                                       \
    for (ptrdiff_t i = 0; i < OH; i++) {                                                 \
        ptrdiff_t r0 = i * SH - PH, ka = 0, kb = KH;                                     \
        while (ka < KH && r0 + ka * DH < 0) ka++;                                        \
        while (kb > ka && r0 + (kb - 1) * DH >= H) kb--;                                 \
        for (ptrdiff_t j = 0; j < OW; j++) {                                             \
            ptrdiff_t q0 = j * SW - PW, la = 0, lb = KW;                                 \
            while (la < KW && q0 + la * DW < 0) la++;                                    \
            while (lb > la && q0 + (lb - 1) * DW >= W) lb--;                             \
            if (ka >= kb || la >= lb) {         /* no input in the window */             \
                for (ptrdiff_t p = 0; p < N * C; p++) {                                  \
                    y[(p * OH + i) * OW + j] = -INFINITY;                                \
                    arg[(p * OH + i) * OW + j] = -1;                                     \
                }                                                                        \
                continue;                                                                \
            }                                                                            \
            int64_t first = (r0 + ka * DH) * W + q0 + la * DW;                           \
            for (ptrdiff_t p = 0; p < N * C; p++) {                                      \
                const T *plane = x + p * H * W;                                          \
                T best = plane[first];                                                   \
                int64_t at = first;                                                      \
                for (ptrdiff_t ki = ka; ki < kb; ki++)                                   \
                    for (ptrdiff_t kj = la; kj < lb; kj++) {                             \
                        int64_t idx = (r0 + ki * DH) * W + q0 + kj * DW;                 \
                        T v = plane[idx];                                                \
                        int take = (v > best) | (v != v);             \
                        best = take ? v : best;                                          \
                        at = take ? idx : at;                                            \
                    }                                                                    \
                y[(p * OH + i) * OW + j] = best;                                         \
                arg[(p * OH + i) * OW + j] = at;                                         \
            }                                                                            \
        }                                                                                \
    }                                                                                    \
}

/* gx (zeroed by the caller) += g at each window's argmax, windows in order. */
#define DEFINE_MAXPOOL_GRAD(T, SFX)                                                      \
void lucid_maxpool_grad_##SFX(const T *gy, const int64_t *arg, T *gx, const lucid_win *g) \
{                                                                                        \
    const ptrdiff_t L = g->oh * g->ow, HW = g->h * g->w;                                 \
    for (ptrdiff_t p = 0; p < g->n * g->c; p++) {                                        \
        T *plane = gx + p * HW;                                                          \
        for (ptrdiff_t l = 0; l < L; l++)                                                \
            if (arg[p * L + l] >= 0) plane[arg[p * L + l]] += gy[p * L + l];             \
    }                                                                                    \
}

DEFINE_IM2COL(float, f32)
DEFINE_IM2COL(double, f64)
DEFINE_COL2IM(float, f32)
DEFINE_COL2IM(double, f64)
DEFINE_MAXPOOL(float, f32)
DEFINE_MAXPOOL(double, f64)
DEFINE_MAXPOOL_GRAD(float, f32)
DEFINE_MAXPOOL_GRAD(double, f64)
