/*
 * lucid_vexpf.h -- float exp of 16 lanes of gcc's generic vectors, inline (private to
 * src/; used where libmvec's call per vector, which also spills every register, was
 * the cost: the exp sums of the softmax family and the element-wise exp).
 *
 * exp(x) = 2^n exp(r): n = rint(x / ln 2) by the 1.5 * 2^23 rounding trick (n ends up
 * in t's low bits), r = x - n ln 2 in two parts (the first product is exact), and
 * exp(r) on |r| <= ln(2)/2 by a degree-6 polynomial 1 + r + c2 r^2 + ... + c6 r^6
 * (c2..c6 fitted for the least largest relative error, 4e-9).
 *
 * Two forms, equal wherever both apply:
 * - fast (full = 0): 2^n added to the exponent bits of exp(r), exact while the
 *   result is normal, i.e. for |x| <= 86; lanes outside are flagged in *bad, and the
 *   caller redoes the run (or block) in the full form;
 * - full (full = 1): x clamped to [-104, 89] (exp is 0 and inf beyond; NaN stays
 *   NaN) and 2^n applied as two normal factors, so a subnormal result rounds once.
 *
 * Accuracy over every float (exhaustive, against double exp): at most 0.91 ulp where
 * the compiler fuses the multiply-adds (the AVX2 and AVX-512 clones), 1.17 ulp
 * without; 99.5% of results correctly rounded. glibc's libmvec expf: 2.6 ulp.
 */
#ifndef LUCID_VEXPF_H
#define LUCID_VEXPF_H

#include <stdint.h>

/* 64-byte vectors passed between always_inline functions of one translation unit: gcc's
   -Wpsabi note (such a vector's calling convention differs without AVX-512) concerns
   calls across objects, which these never are. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

typedef float lv_f16 __attribute__((vector_size(64)));
typedef int32_t lv_i16 __attribute__((vector_size(64)));

#define LV_F16(v) ((lv_f16){v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v})
/* the lanes of a where k is set, else those of b */
#define LV_SEL16(k, a, b) ((lv_f16)(((k) & (lv_i16)(a)) | (~(k) & (lv_i16)(b))))

/* the lanes the fast form does not cover: |x| > 86, or nan */
static inline __attribute__((always_inline)) lv_i16 lv_expf16_outside(lv_f16 x)
{
    return ~((lv_f16)((lv_i16)x & 0x7fffffff) <= LV_F16(86.0f));
}

static inline __attribute__((always_inline)) lv_f16 lv_expf16(lv_f16 x, lv_i16 *bad, int full)
{
    if (full) {
        x = LV_SEL16(x > LV_F16(89.0f), LV_F16(89.0f), x);
        x = LV_SEL16(x < LV_F16(-104.0f), LV_F16(-104.0f), x);
    } else {
        *bad |= lv_expf16_outside(x);
    }
    const lv_f16 magic = LV_F16(0x1.8p23f);
    lv_f16 t = x * LV_F16(0x1.715476p+0f) + magic;
    lv_f16 n = t - magic;
    lv_f16 r = x - n * LV_F16(0x1.62e4p-1f);
    r = r - n * LV_F16(0x1.7f7d1cp-20f);
    lv_f16 e = LV_F16(0x1.6a2454p-10f);
    e = e * r + LV_F16(0x1.1239d4p-7f);
    e = e * r + LV_F16(0x1.5558f2p-5f);
    e = e * r + LV_F16(0x1.555492p-3f);
    e = e * r + LV_F16(0x1.fffffcp-2f);
    e = e * r + LV_F16(1.0f);
    e = e * r + LV_F16(1.0f);
    if (!full) return (lv_f16)((lv_i16)e + ((lv_i16)t << 23));
    lv_i16 ni = (lv_i16)t - (lv_i16)magic, n1 = ni >> 1, n2 = ni - n1;
    return e * (lv_f16)((n1 + 127) << 23) * (lv_f16)((n2 + 127) << 23);
}

/* whether any lane of k is set */
static inline int lv_any16(lv_i16 k)
{
    int32_t a = 0;
    for (int l = 0; l < 16; l++) a |= k[l];
    return a != 0;
}

#endif /* LUCID_VEXPF_H */
