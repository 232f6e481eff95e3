/*
 * lucid_half.c -- float16 / bfloat16 storage for kernels that compute in float32
 * (see include/lucid_half.h).
 *
 * Why blocks: a half op converts LH_BLOCK elements into a float32 buffer on the stack,
 * runs the float32 kernel there and rounds the block into the output. The data is read
 * and written once at half width (what makes half faster than float32 on large,
 * memory-bound arrays), and the float32 kernel sees exactly the values a float32 call
 * would (each kernel pads its own tail, so blocking never changes a result).
 * add, sub, mul and div need no buffer: with AVX-512 they widen, compute and round in
 * registers, 32 elements at a time.
 *
 * Conversions, chosen once at run time:
 * - float16: AVX-512F vcvtph2ps / vcvtps2ph (16 lanes), F16C (8 lanes), or portable C.
 *   vcvtps2ph rounds to nearest even and keeps subnormals (MXCSR's flush-to-zero is
 *   never set: lucid is never built with the fast-math flags).
 * - bfloat16: widening is a 16-bit shift; narrowing rounds to nearest even in integer
 *   arithmetic and keeps nan a (quiet) nan. Not AVX512-BF16's vcvtneps2bf16: it flushes
 *   subnormal inputs to zero, which NumPy (ml_dtypes) and PyTorch do not.
 * - float64 -> half rounds once: float64 -> float32 rounding to odd (truncate, then set
 *   the last bit if anything was cut off), then the float32 -> half rounding above.
 *   Rounding to odd into a format with at least two more bits than the target makes
 *   the second rounding give the correctly rounded result; a plain float64 -> float32
 *   -> half would round twice (1 + 2**-11 + 2**-40 would become 1, not 1 + 2**-10).
 *
 * Native float16 arithmetic (AVX512-FP16 vaddph / vsubph / vmulph / vdivph) gives the
 * same bits as float32 arithmetic rounded once to float16: float32's 24 bits are at
 * least 2 * 11 + 2, so the second rounding is innocuous for +, -, * and / (checked
 * over all 2**32 operand pairs by tools/half_native_exhaustive.c; only the payload of
 * a nan from two nan operands may differ, which no IEEE rule fixes). It is used for
 * add, sub and mul when the CPU has it.
 *
 * LUCID_HALF_ISA=c|f16c|avx512|avx512fp16 in the environment caps the instructions
 * chosen (read once, at the first half kernel; tests run every path through it).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdint.h>
#include <time.h>
#include <sched.h>

#include "lucid_half.h"
#include "lucid_simd.h"   /* LV_CLONES */

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define LH_X86 1
#include <immintrin.h>
#endif

#define LH_BLOCK 1024     /* a multiple of 32 and of LV_BLOCK; three float32 buffers = 12 KiB of stack */

/* ---- portable conversions ------------------------------------------------------ */

static inline float lh_f16_to_f32_1(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    float f;
    if (e == 0) {                       /* zero or subnormal: m * 2**-24, exact */
        f = (float)m * 0x1p-24f;
        memcpy(&u, &f, 4);
        u |= sign;
    } else if (e == 31) {
        u = sign | 0x7f800000u | (m << 13);
    } else {
        u = sign | ((e + 112u) << 23) | (m << 13);
    }
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t lh_f32_to_f16_1(float f)
{
    uint32_t u, sign;
    memcpy(&u, &f, 4);
    sign = (u >> 16) & 0x8000u;
    u &= 0x7fffffffu;
    if (u >= 0x47800000u)                    /* >= 65536, inf or nan */
        return (uint16_t)(sign | (u > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (u < 0x38800000u) {                   /* below 2**-14: a subnormal half */
        float v, magic = 0.5f;               /* adding 0.5 aligns the ulp 2**-24 to bit 0 */
        uint32_t r;
        memcpy(&v, &u, 4);
        v += magic;                          /* rounds to nearest even in hardware */
        memcpy(&r, &v, 4);
        return (uint16_t)(sign | (r - 0x3f000000u));
    }
    u += 0xc8000fffu + ((u >> 13) & 1u);     /* rebias (-112 << 23) and round to even */
    return (uint16_t)(sign | (u >> 13));     /* a carry into the exponent gives inf */
}

/* float64 -> float32 rounded to odd: the truncated value, with its last bit set when
 * the truncation was inexact (nan stays nan). */
static inline float lh_f64_to_f32_odd(double d)
{
    float f = (float)d;
    if ((double)f != d && d == d) {
        uint32_t u;
        memcpy(&u, &f, 4);
        if ((f < 0 ? -(double)f : (double)f) > (d < 0 ? -d : d))
            u -= 1;                          /* rounded away from zero: one step back */
        u |= 1u;
        memcpy(&f, &u, 4);
    }
    return f;
}

/* bfloat16 loops: plain integer code that gcc vectorises in every clone. */
LV_CLONES static void lh_bf16_to_f32(float *y, const uint16_t *x, ptrdiff_t n)
{
    uint32_t *yu = (uint32_t *)(void *)y;
    for (ptrdiff_t i = 0; i < n; i++)
        yu[i] = (uint32_t)x[i] << 16;
}

LV_CLONES static void lh_f32_to_bf16(uint16_t *y, const float *x, ptrdiff_t n)
{
    const uint32_t *xu = (const uint32_t *)(const void *)x;
    for (ptrdiff_t i = 0; i < n; i++) {
        uint32_t u = xu[i];
        uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
        uint32_t q = (u >> 16) | 0x40u;
        y[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? q : r);
    }
}

static void lh_f16_to_f32_c(float *y, const uint16_t *x, ptrdiff_t n)
{
    for (ptrdiff_t i = 0; i < n; i++)
        y[i] = lh_f16_to_f32_1(x[i]);
}

static void lh_f32_to_f16_c(uint16_t *y, const float *x, ptrdiff_t n)
{
    for (ptrdiff_t i = 0; i < n; i++)
        y[i] = lh_f32_to_f16_1(x[i]);
}

static void lh_f64_to_f32_odd_c(float *y, const double *x, ptrdiff_t n)
{
    for (ptrdiff_t i = 0; i < n; i++)
        y[i] = lh_f64_to_f32_odd(x[i]);
}

#ifdef LH_X86
/* ---- AVX2 + F16C ------------------------------------------------------------------ */

__attribute__((target("avx2,f16c")))
static void lh_f16_to_f32_f16c(float *y, const uint16_t *x, ptrdiff_t n)
{
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    if (i < n) {
        uint16_t tmp[8] = {0};
        float out[8];
        memcpy(tmp, x + i, (size_t)(n - i) * 2);
        _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)tmp)));
        memcpy(y + i, out, (size_t)(n - i) * 4);
    }
}

__attribute__((target("avx2,f16c")))
static void lh_f32_to_f16_f16c(uint16_t *y, const float *x, ptrdiff_t n)
{
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) {
        float in[8] = {0};
        uint16_t tmp[8];
        memcpy(in, x + i, (size_t)(n - i) * 4);
        _mm_storeu_si128((__m128i *)tmp, _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT));
        memcpy(y + i, tmp, (size_t)(n - i) * 2);
    }
}

/* ---- AVX-512 (F, BW, VL): 16 float32 lanes, 32 half elements per step -------------- */

#define LH_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#define LH_INLINE static inline __attribute__((always_inline))
#define LH_TAIL16(r) ((__mmask16)((1u << (r)) - 1u))         /* r < 16 */
#define LH_TAIL32(r) ((__mmask32)((r) >= 32 ? ~0u : (1u << (r)) - 1u))
#define LH_RN (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define LH_ALL (~(__mmask32)0)

/* 32 half elements: masked only for a last partial group (plain moves are faster) */
LH_AVX512 LH_INLINE __m512i lh_load32(const uint16_t *p, __mmask32 k)
{
    return k == LH_ALL ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi16(k, p);
}

LH_AVX512 LH_INLINE void lh_store32(uint16_t *p, __mmask32 k, __m512i v)
{
    if (k == LH_ALL)
        _mm512_storeu_si512(p, v);
    else
        _mm512_mask_storeu_epi16(p, k, v);
}

/* float32 -> bfloat16, to nearest even, in the high half of each 32-bit lane (the low
 * half is left over): a nan keeps its sign and top payload bits and becomes quiet. */
LH_AVX512 LH_INLINE __m512i lh_bf16_round(__m512 v)
{
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
    return _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), u,
                                _mm512_set1_epi32(0x00400000));
}

/* bfloat16 pairs: 32 bfloat16 values in a register are, seen as 32-bit lanes, the
 * even-numbered elements in the low halves and the odd-numbered ones in the high
 * halves. Widening needs no shuffle (a shift, a mask), nor does narrowing (a merge). */
#define LH_HI16 _mm512_set1_epi32((int)0xffff0000u)

LH_AVX512 LH_INLINE __m512 lh_bf16_even(__m512i h)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
}

LH_AVX512 LH_INLINE __m512 lh_bf16_odd(__m512i h)
{
    return _mm512_castsi512_ps(_mm512_and_si512(h, LH_HI16));
}

LH_AVX512 LH_INLINE __m512i lh_bf16_pair(__m512 even, __m512 odd)
{
    /* (even >> 16) | (odd & 0xffff0000) */
    return _mm512_ternarylogic_epi32(_mm512_srli_epi32(lh_bf16_round(even), 16),
                                     lh_bf16_round(odd), LH_HI16, 0xf8);
}

/* 32 float32 values (lo: elements 0..15, hi: 16..31) rounded to 32 half elements. */
LH_AVX512 LH_INLINE __m512i lh_narrow32(int kind, __m512 lo, __m512 hi)
{
    if (kind == LH_BF16) {
        /* packus interleaves 128-bit lanes (lo0 hi0 lo1 hi1 ...): put them back in order */
        __m512i p = _mm512_packus_epi32(_mm512_srli_epi32(lh_bf16_round(lo), 16),
                                        _mm512_srli_epi32(lh_bf16_round(hi), 16));
        return _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), p);
    }
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtps_ph(lo, LH_RN)),
                              _mm512_cvtps_ph(hi, LH_RN), 1);
}

LH_AVX512 static void lh_f16_to_f32_avx512(float *y, const uint16_t *x, ptrdiff_t n)
{
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i))));
    if (i < n) {
        __mmask16 k = LH_TAIL16(n - i);
        _mm512_mask_storeu_ps(y + i, k, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, x + i)));
    }
}

/* (float16: 16 lanes at a time, stored straight from vcvtps2ph; measured faster than
 * merging two results into one 32-element store) */
LH_AVX512 static void lh_f32_to_f16_avx512(uint16_t *y, const float *x, ptrdiff_t n)
{
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(y + i), _mm512_cvtps_ph(_mm512_loadu_ps(x + i), LH_RN));
    if (i < n) {
        __mmask16 k = LH_TAIL16(n - i);
        _mm256_mask_storeu_epi16(y + i, k, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(k, x + i), LH_RN));
    }
}

LH_AVX512 static void lh_f32_to_bf16_avx512(uint16_t *y, const float *x, ptrdiff_t n)
{
    ptrdiff_t i = 0;
    for (; i + 32 <= n; i += 32)
        _mm512_storeu_si512(y + i, lh_narrow32(LH_BF16, _mm512_loadu_ps(x + i),
                                               _mm512_loadu_ps(x + i + 16)));
    if (i < n) {
        ptrdiff_t r = n - i;
        __mmask16 k0 = r >= 16 ? (__mmask16)0xffff : LH_TAIL16(r);
        __mmask16 k1 = r > 16 ? LH_TAIL16(r - 16) : 0;
        _mm512_mask_storeu_epi16(y + i, LH_TAIL32(r),
                                 lh_narrow32(LH_BF16, _mm512_maskz_loadu_ps(k0, x + i),
                                             _mm512_maskz_loadu_ps(k1, x + i + 16)));
    }
}

/* bfloat16 <-> float32 in pair order: each 32 elements become their 16 even-numbered
 * ones, then their 16 odd-numbered ones. A float32 kernel is element-wise, so it may
 * see its inputs in that order; a last partial group is padded with zeros (n is rounded
 * up to 32 on the float32 side, which has room for it). */
LH_AVX512 LH_INLINE void lh_bf16_to_pairs_step(float *y, const uint16_t *x, __mmask32 k)
{
    __m512i h = lh_load32(x, k);
    _mm512_store_ps(y, lh_bf16_even(h));
    _mm512_store_ps(y + 16, lh_bf16_odd(h));
}

LH_AVX512 static void lh_bf16_to_pairs(float *y, const uint16_t *x, ptrdiff_t n)
{
    ptrdiff_t i = 0;
    for (; i + 32 <= n; i += 32)
        lh_bf16_to_pairs_step(y + i, x + i, LH_ALL);
    if (i < n)
        lh_bf16_to_pairs_step(y + i, x + i, LH_TAIL32(n - i));
}

LH_AVX512 static void lh_pairs_to_bf16(uint16_t *y, const float *x, ptrdiff_t n)
{
    ptrdiff_t i = 0;
    for (; i + 32 <= n; i += 32)
        lh_store32(y + i, LH_ALL, lh_bf16_pair(_mm512_load_ps(x + i), _mm512_load_ps(x + i + 16)));
    if (i < n)
        lh_store32(y + i, LH_TAIL32(n - i),
                   lh_bf16_pair(_mm512_load_ps(x + i), _mm512_load_ps(x + i + 16)));
}

/* float64 -> float32 rounded to odd, 8 lanes at a time (see lh_f64_to_f32_odd). */
LH_AVX512 static void lh_f64_to_f32_odd_avx512(float *y, const double *x, ptrdiff_t n)
{
    for (ptrdiff_t i = 0; i < n; i += 8) {
        __mmask8 k = (__mmask8)(n - i >= 8 ? 0xff : (1u << (n - i)) - 1u);
        __m512d d = _mm512_maskz_loadu_pd(k, x + i);
        __m256 t = _mm512_cvt_roundpd_ps(d, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
        __mmask8 inexact = _mm512_cmp_pd_mask(_mm512_cvtps_pd(t), d, _CMP_NEQ_UQ);
        __m256i u = _mm256_mask_or_epi32(_mm256_castps_si256(t), inexact, _mm256_castps_si256(t),
                                         _mm256_set1_epi32(1));
        _mm256_mask_storeu_ps(y + i, k, _mm256_castsi256_ps(u));
    }
}

LH_AVX512 LH_INLINE __m512 lh_op16(int op, __m512 x, __m512 y)
{
    switch (op) {
    case LH_ADD: return _mm512_add_ps(x, y);
    case LH_SUB: return _mm512_sub_ps(x, y);
    case LH_MUL: return _mm512_mul_ps(x, y);
    default:     return _mm512_div_ps(x, y);
    }
}

/* One step of 32 elements of z = a op b under mask k (a or b is the broadcast float32
 * value s when `mode` says so: LH_SCALAR_A / LH_SCALAR_B). */
enum { LH_ARRAYS = 0, LH_SCALAR_A = 1, LH_SCALAR_B = 2 };

LH_AVX512 LH_INLINE void lh_bin_step(int kind, int op, int mode, uint16_t *z, const uint16_t *a,
                                     const uint16_t *b, __m512 vs, __mmask32 k)
{
    __m512 a0 = vs, a1 = vs, b0 = vs, b1 = vs;
    __m512i ha = _mm512_setzero_si512(), hb = _mm512_setzero_si512();
    if (mode != LH_SCALAR_A)
        ha = lh_load32(a, k);
    if (mode != LH_SCALAR_B)
        hb = lh_load32(b, k);
    if (kind == LH_BF16) {          /* (a0, a1): the even and the odd elements */
        if (mode != LH_SCALAR_A)
            a0 = lh_bf16_even(ha), a1 = lh_bf16_odd(ha);
        if (mode != LH_SCALAR_B)
            b0 = lh_bf16_even(hb), b1 = lh_bf16_odd(hb);
        lh_store32(z, k, lh_bf16_pair(lh_op16(op, a0, b0), lh_op16(op, a1, b1)));
        return;
    }
    if (mode != LH_SCALAR_A) {      /* (a0, a1): elements 0..15 and 16..31 */
        a0 = _mm512_cvtph_ps(_mm512_castsi512_si256(ha));
        a1 = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(ha, 1));
    }
    if (mode != LH_SCALAR_B) {
        b0 = _mm512_cvtph_ps(_mm512_castsi512_si256(hb));
        b1 = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(hb, 1));
    }
    lh_store32(z, k, lh_narrow32(LH_F16, lh_op16(op, a0, b0), lh_op16(op, a1, b1)));
}

LH_AVX512 LH_INLINE void lh_bin_loop(int kind, int op, int mode, uint16_t *z, const uint16_t *a,
                                     const uint16_t *b, float s, ptrdiff_t n)
{
    __m512 vs = _mm512_set1_ps(s);
    ptrdiff_t i = 0;
    for (; i + 32 <= n; i += 32)
        lh_bin_step(kind, op, mode, z + i, a + i, b + i, vs, LH_ALL);
    if (i < n)
        lh_bin_step(kind, op, mode, z + i, a + i, b + i, vs, LH_TAIL32(n - i));
}

/* Every (kind, op, mode) gets its own loop, so nothing is decided per element. */
#define LH_MODES(K, O)                                                                \
    case (K) * 4 + (O):                                                               \
        if (mode == LH_ARRAYS) lh_bin_loop(K, O, LH_ARRAYS, z, a, b, s, n);          \
        else if (mode == LH_SCALAR_A) lh_bin_loop(K, O, LH_SCALAR_A, z, a, b, s, n); \
        else lh_bin_loop(K, O, LH_SCALAR_B, z, a, b, s, n);                          \
        break;

LH_AVX512 static void lh_binary_avx512(int kind, int op, int mode, uint16_t *z, const uint16_t *a,
                                       const uint16_t *b, float s, ptrdiff_t n)
{
    switch (kind * 4 + op) {
    LH_MODES(LH_F16, LH_ADD) LH_MODES(LH_F16, LH_SUB) LH_MODES(LH_F16, LH_MUL) LH_MODES(LH_F16, LH_DIV)
    LH_MODES(LH_BF16, LH_ADD) LH_MODES(LH_BF16, LH_SUB) LH_MODES(LH_BF16, LH_MUL) LH_MODES(LH_BF16, LH_DIV)
    default: break;
    }
}

/* ---- AVX512-FP16: native float16 arithmetic, 32 lanes ------------------------------ */

#define LH_FP16 __attribute__((target("avx512fp16,avx512f,avx512bw,avx512vl")))

LH_FP16 LH_INLINE __m512h lh_op32h(int op, __m512h x, __m512h y)
{
    switch (op) {
    case LH_ADD: return _mm512_add_ph(x, y);
    case LH_SUB: return _mm512_sub_ph(x, y);
    default:     return _mm512_mul_ph(x, y);
    }
}

LH_FP16 LH_INLINE void lh_ph_step(int op, int mode, uint16_t *z, const uint16_t *a,
                                  const uint16_t *b, __m512h vs, __mmask32 k)
{
    __m512h x = mode == LH_SCALAR_A ? vs : _mm512_castsi512_ph(lh_load32(a, k));
    __m512h y = mode == LH_SCALAR_B ? vs : _mm512_castsi512_ph(lh_load32(b, k));
    lh_store32(z, k, _mm512_castph_si512(lh_op32h(op, x, y)));
}

LH_FP16 LH_INLINE void lh_ph_loop(int op, int mode, uint16_t *z, const uint16_t *a,
                                  const uint16_t *b, uint16_t s, ptrdiff_t n)
{
    __m512h vs = _mm512_castsi512_ph(_mm512_set1_epi16((short)s));
    ptrdiff_t i = 0;
    for (; i + 64 <= n; i += 64) {
        lh_ph_step(op, mode, z + i, a + i, b + i, vs, LH_ALL);
        lh_ph_step(op, mode, z + i + 32, a + i + 32, b + i + 32, vs, LH_ALL);
    }
    for (; i < n; i += 32)
        lh_ph_step(op, mode, z + i, a + i, b + i, vs, LH_TAIL32(n - i));
}

#define LH_PH_MODES(O)                                                           \
    case (O):                                                                    \
        if (mode == LH_ARRAYS) lh_ph_loop(O, LH_ARRAYS, z, a, b, s, n);         \
        else if (mode == LH_SCALAR_A) lh_ph_loop(O, LH_SCALAR_A, z, a, b, s, n);\
        else lh_ph_loop(O, LH_SCALAR_B, z, a, b, s, n);                         \
        break;

LH_FP16 static void lh_binary_fp16(int op, int mode, uint16_t *z, const uint16_t *a,
                                   const uint16_t *b, uint16_t s, ptrdiff_t n)
{
    switch (op) {
    LH_PH_MODES(LH_ADD) LH_PH_MODES(LH_SUB) LH_PH_MODES(LH_MUL)
    default: break;
    }
}
#endif /* LH_X86 */

/* ---- run-time choice ------------------------------------------------------------ */

enum { LH_ISA_C = 0, LH_ISA_F16C = 1, LH_ISA_AVX512 = 2, LH_ISA_FP16 = 3 };
static const char *const lh_isa_names[] = {"c", "f16c", "avx512", "avx512fp16"};

typedef void (*lh_widen_fn)(float *, const uint16_t *, ptrdiff_t);
typedef void (*lh_narrow_fn)(uint16_t *, const float *, ptrdiff_t);
typedef void (*lh_odd_fn)(float *, const double *, ptrdiff_t);

/* Set once by lh_init (idempotent, so a race is benign); lh_level is published last. */
static lh_widen_fn lh_f16_widen;
static lh_narrow_fn lh_f16_narrow, lh_bf16_narrow;
static lh_odd_fn lh_odd;
static int lh_level = -1;
static int lh_tables_mode = LH_TABLES_AUTO;   /* lookup tables (see lh_table_map) */

static int lh_detect(void)
{
#ifdef LH_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        return __builtin_cpu_supports("avx512fp16") ? LH_ISA_FP16 : LH_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c"))
        return LH_ISA_F16C;
#endif
    return LH_ISA_C;
}

static void lh_init(void)
{
    int level = lh_detect();
    const char *cap = getenv("LUCID_HALF_ISA"), *tables;
    for (int i = 0; cap != NULL && i < (int)(sizeof lh_isa_names / sizeof *lh_isa_names); i++)
        if (strcasecmp(cap, lh_isa_names[i]) == 0 && i < level)
            level = i;
    lh_f16_widen = lh_f16_to_f32_c;
    lh_f16_narrow = lh_f32_to_f16_c;
    lh_bf16_narrow = lh_f32_to_bf16;
    lh_odd = lh_f64_to_f32_odd_c;
    tables = getenv("LUCID_HALF_TABLES");
    if (tables != NULL && (strcmp(tables, "0") == 0 || strcmp(tables, "2") == 0))
        __atomic_store_n(&lh_tables_mode, tables[0] - '0', __ATOMIC_RELAXED);
#ifdef LH_X86
    if (level >= LH_ISA_AVX512) {
        lh_f16_widen = lh_f16_to_f32_avx512;
        lh_f16_narrow = lh_f32_to_f16_avx512;
        lh_bf16_narrow = lh_f32_to_bf16_avx512;
        lh_odd = lh_f64_to_f32_odd_avx512;
    } else if (level == LH_ISA_F16C) {
        lh_f16_widen = lh_f16_to_f32_f16c;
        lh_f16_narrow = lh_f32_to_f16_f16c;
    }
#endif
    __atomic_store_n(&lh_level, level, __ATOMIC_RELEASE);
}

static inline int lh_ready(void)
{
    int level = __atomic_load_n(&lh_level, __ATOMIC_ACQUIRE);
    if (level < 0) {
        lh_init();
        level = lh_level;
    }
    return level;
}

const char *lucid_half_isa(void)
{
    return lh_isa_names[lh_ready()];
}

void lucid_half_to_f32(int kind, float *y, const uint16_t *x, ptrdiff_t n)
{
    lh_ready();
    if (kind == LH_BF16)
        lh_bf16_to_f32(y, x, n);
    else
        lh_f16_widen(y, x, n);
}

void lucid_f32_to_half(int kind, uint16_t *y, const float *x, ptrdiff_t n)
{
    lh_ready();
    if (kind == LH_BF16)
        lh_bf16_narrow(y, x, n);
    else
        lh_f16_narrow(y, x, n);
}

void lucid_f64_to_half(int kind, uint16_t *y, const double *x, ptrdiff_t n)
{
    float t[LH_BLOCK] __attribute__((aligned(64)));
    lh_ready();
    for (ptrdiff_t i = 0; i < n; i += LH_BLOCK) {
        ptrdiff_t m = n - i < LH_BLOCK ? n - i : LH_BLOCK;
        lh_odd(t, x + i, m);
        lucid_f32_to_half(kind, y + i, t, m);
    }
}

/* ---- kernels ----------------------------------------------------------------------- */

/* bfloat16 through pair-ordered buffers (lh_bf16_to_pairs) where AVX-512 is in use. */
static inline int lh_pairs(int kind)
{
#ifdef LH_X86
    return kind == LH_BF16 && lh_ready() >= LH_ISA_AVX512;
#else
    (void)kind;
    return 0;
#endif
}

/* y = f(x) the long way: widen a block, run f's float32 kernel, round the block. */
static void lh_compute_map(int kind, lucid_f32_map f, uint16_t *y, const uint16_t *x, ptrdiff_t n)
{
    float xb[LH_BLOCK] __attribute__((aligned(64)));
    float yb[LH_BLOCK] __attribute__((aligned(64)));
#ifdef LH_X86
    if (lh_pairs(kind)) {
        for (ptrdiff_t i = 0; i < n; i += LH_BLOCK) {
            int m = (int)(n - i < LH_BLOCK ? n - i : LH_BLOCK), m32 = (m + 31) & ~31;
            lh_bf16_to_pairs(xb, x + i, m);
            f(yb, xb, &m32);
            lh_pairs_to_bf16(y + i, yb, m);
        }
        return;
    }
#endif
    for (ptrdiff_t i = 0; i < n; i += LH_BLOCK) {
        int m = (int)(n - i < LH_BLOCK ? n - i : LH_BLOCK);
        lucid_half_to_f32(kind, xb, x + i, m);
        f(yb, xb, &m);
        lucid_f32_to_half(kind, y + i, yb, m);
    }
}

/* ---- lookup tables for unary forwards -------------------------------------------------
 *
 * A half input has 65536 bit patterns, so f over half values is a table of 65536 half
 * results. The table is filled by lh_compute_map itself (all 65536 patterns through the
 * float32 kernel, rounded once), so reading it gives bitwise the results computing
 * gives. Reading is a gather (AVX-512 vpgatherdd: each 32-bit lane loads the 4 bytes at
 * table + 2 * index, whose low half is the entry; the table has 2 bytes of padding) or a
 * scalar load per element. Measured on an AVX512-FP16 Xeon (2 cores, shared) at 1e5
 * elements, one thread: a gather pass costs ~0.25-0.45 ns per element whatever the
 * function, 0.5-0.95x of float32 tanh, sin or gelu (bench/test_half_bench.py), where
 * widening + float32 + rounding costs 1.15-1.4x (the conversions compete with the math
 * for the same ports). Scalar loads were ~1.5x slower than the gathers, still a win.
 *
 * When: a (function, half kind) pair gets a table once LH_TABLE_AFTER elements have gone
 * through it (one call of that size, or many small ones), so the build -- the price of
 * computing 65536 elements -- costs about what was computed before it. At
 * build time the lookup is timed against the compute path on LH_PROBE ordinary values
 * (|x| in [2**-6, 4), best of 5); when it does not win (square and other kernels whose
 * float32 loop is as cheap as the gather), the table is dropped and the pair keeps
 * computing. Timing only picks between two paths with identical results.
 *
 * Memory: at most LH_SLOTS pairs per kind, 128 KiB each, only for functions used;
 * lucid.empty_cache() frees them (lucid_half_tables_release). LUCID_HALF_TABLES=0 in the
 * environment (read once) turns tables off, =2 builds them on first use without the
 * timing (what the tests use to check every row's table against the compute path).
 *
 * Threads: a slot's `table` word is the whole state -- NULL (counting), LH_BUILDING,
 * LH_NEVER, or the table -- changed only by compare-and-swap (one builder per pair; the
 * others keep computing meanwhile) and by release (table -> NULL). Readers announce
 * themselves in lh_readers before loading the word, and release frees only after it saw
 * lh_readers at zero following its swaps, so no reader ever holds a freed table. */
#define LH_SLOTS 64                 /* (function, kind) pairs with a table, per kind */
#define LH_TABLE_AFTER 65536        /* elements through a function before it gets a table */
#define LH_PROBE 16384              /* elements timed at build time */
#define LH_TABLE_LEN (65536 + 32)   /* entries, with padding for the 4-byte gather */

typedef struct {
    lucid_f32_map fn;               /* the key, claimed once (compare-and-swap from NULL) */
    ptrdiff_t seen;                 /* elements mapped through fn without a table */
    uint16_t *table;                /* NULL, LH_BUILDING, LH_NEVER or the table */
} lh_slot;

static lh_slot lh_slots[2][LH_SLOTS];
static int lh_readers;
static char lh_building_tag, lh_never_tag;
#define LH_BUILDING ((uint16_t *)(void *)&lh_building_tag)
#define LH_NEVER ((uint16_t *)(void *)&lh_never_tag)
#define LH_IS_TABLE(p) ((p) != NULL && (p) != LH_BUILDING && (p) != LH_NEVER)

static void lh_lookup_c(uint16_t *y, const uint16_t *x, const uint16_t *t, ptrdiff_t n)
{
    for (ptrdiff_t i = 0; i < n; i++)
        y[i] = t[x[i]];
}

#ifdef LH_X86
/* 32 elements per step: the even-numbered ones are the low halves of the 32-bit lanes,
 * the odd-numbered ones the high halves; one gather each, merged by a word blend. A
 * last partial group loads zeros (index 0, a valid entry) and stores under its mask. */
LH_AVX512 static void lh_lookup_avx512(uint16_t *y, const uint16_t *x, const uint16_t *t,
                                       ptrdiff_t n)
{
    const __m512i lo16 = _mm512_set1_epi32(0xffff);
    for (ptrdiff_t i = 0; i < n; i += 32) {
        __mmask32 k = n - i >= 32 ? LH_ALL : LH_TAIL32(n - i);
        __m512i h = lh_load32(x + i, k);
        __m512i even = _mm512_i32gather_epi32(_mm512_and_si512(h, lo16), (const void *)t, 2);
        __m512i odd = _mm512_i32gather_epi32(_mm512_srli_epi32(h, 16), (const void *)t, 2);
        lh_store32(y + i, k, _mm512_mask_blend_epi16((__mmask32)0xaaaaaaaau, even,
                                                     _mm512_slli_epi32(odd, 16)));
    }
}
#endif

static void lh_lookup(uint16_t *y, const uint16_t *x, const uint16_t *t, ptrdiff_t n)
{
#ifdef LH_X86
    if (lh_ready() >= LH_ISA_AVX512) {
        lh_lookup_avx512(y, x, t, n);
        return;
    }
#endif
    lh_lookup_c(y, x, t, n);
}

static double lh_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The slot of (kind, f), claimed on first use; NULL when all LH_SLOTS are taken. */
static lh_slot *lh_slot_of(int kind, lucid_f32_map f)
{
    size_t h = (size_t)(((uintptr_t)f >> 4) * 0x9e3779b1u);
    for (size_t i = 0; i < LH_SLOTS; i++) {
        lh_slot *s = &lh_slots[kind][(h + i) % LH_SLOTS];
        lucid_f32_map cur = __atomic_load_n(&s->fn, __ATOMIC_ACQUIRE);
        if (cur == NULL &&
            __atomic_compare_exchange_n(&s->fn, &cur, f, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return s;
        if (cur == f)
            return s;
    }
    return NULL;
}

/* f's table (every pattern through lh_compute_map), LH_NEVER when `timed` and the
 * lookup does not beat computing, NULL when out of memory. */
static uint16_t *lh_build(int kind, lucid_f32_map f, int timed)
{
    uint16_t idx[LH_BLOCK];
    uint16_t *t = malloc((LH_TABLE_LEN + 2 * LH_PROBE) * sizeof *t);
    uint16_t *px = t + LH_TABLE_LEN, *py = px + LH_PROBE;
    double compute = 1e30, lookup = 1e30;
    if (t == NULL)
        return NULL;
    for (int i = 0; i < 65536; i += LH_BLOCK) {
        for (int j = 0; j < LH_BLOCK; j++)
            idx[j] = (uint16_t)(i + j);
        lh_compute_map(kind, f, t + i, idx, LH_BLOCK);
    }
    memset(t + 65536, 0, (LH_TABLE_LEN - 65536) * sizeof *t);
    if (!timed)
        return t;
    /* ordinary values: any sign, exponents 2**-6 .. 2**1, scrambled mantissas */
    int mbits = kind == LH_BF16 ? 7 : 10, bias = kind == LH_BF16 ? 127 : 15;
    for (uint32_t i = 0; i < LH_PROBE; i++) {
        uint32_t r = (i * 2654435761u) >> 7;
        uint32_t e = (uint32_t)bias - 6 + (r >> mbits) % 8;
        px[i] = (uint16_t)(((r >> 20) & 1u) << 15 | e << mbits | (r & ((1u << mbits) - 1)));
    }
    for (int rep = 0; rep < 5; rep++) {
        double t0 = lh_now(), t1, t2;
        lh_compute_map(kind, f, py, px, LH_PROBE);
        t1 = lh_now();
        lh_lookup(py, px, t, LH_PROBE);
        t2 = lh_now();
        compute = t1 - t0 < compute ? t1 - t0 : compute;
        lookup = t2 - t1 < lookup ? t2 - t1 : lookup;
    }
    if (lookup < compute)
        return t;
    free(t);
    return LH_NEVER;
}

/* y = f(x) from f's table when it has one (built here when it is due); 0 when the
 * caller must compute. */
static int lh_table_map(int kind, lucid_f32_map f, uint16_t *y, const uint16_t *x, ptrdiff_t n)
{
    int mode;
    lh_slot *s;
    lh_ready();
    mode = __atomic_load_n(&lh_tables_mode, __ATOMIC_RELAXED);
    if (mode == LH_TABLES_OFF || n <= 0 || (s = lh_slot_of(kind, f)) == NULL)
        return 0;
    for (int built = 0;; built = 1) {
        uint16_t *p;
        __atomic_add_fetch(&lh_readers, 1, __ATOMIC_SEQ_CST);
        p = __atomic_load_n(&s->table, __ATOMIC_SEQ_CST);
        if (LH_IS_TABLE(p))
            lh_lookup(y, x, p, n);
        __atomic_sub_fetch(&lh_readers, 1, __ATOMIC_SEQ_CST);
        if (LH_IS_TABLE(p))
            return 1;
        if (built || p == LH_BUILDING || (p == LH_NEVER && mode != LH_TABLES_ALWAYS))
            return 0;
        if (mode != LH_TABLES_ALWAYS &&
            __atomic_add_fetch(&s->seen, n, __ATOMIC_RELAXED) < LH_TABLE_AFTER)
            return 0;
        if (!__atomic_compare_exchange_n(&s->table, &p, LH_BUILDING, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            return 0;                               /* another thread builds it */
        p = lh_build(kind, f, mode != LH_TABLES_ALWAYS);
        __atomic_store_n(&s->table, p, __ATOMIC_RELEASE);
    }
}

void lucid_half_tables_release(void)
{
    uint16_t *old[2 * LH_SLOTS];
    int m = 0;
    for (int kind = 0; kind < 2; kind++)
        for (int i = 0; i < LH_SLOTS; i++) {
            lh_slot *s = &lh_slots[kind][i];
            uint16_t *p = __atomic_load_n(&s->table, __ATOMIC_SEQ_CST);
            if (LH_IS_TABLE(p) &&
                __atomic_compare_exchange_n(&s->table, &p, NULL, 0, __ATOMIC_SEQ_CST,
                                            __ATOMIC_SEQ_CST)) {
                old[m++] = p;
                __atomic_store_n(&s->seen, 0, __ATOMIC_RELAXED);
            }
        }
    while (m > 0 && __atomic_load_n(&lh_readers, __ATOMIC_SEQ_CST) != 0)
        sched_yield();                              /* a lookup in flight: it ends soon */
    while (m > 0)
        free(old[--m]);
}

int lucid_half_tables(int mode)
{
    int old;
    lh_ready();
    old = __atomic_load_n(&lh_tables_mode, __ATOMIC_RELAXED);
    if (mode >= LH_TABLES_OFF && mode <= LH_TABLES_ALWAYS)
        __atomic_store_n(&lh_tables_mode, mode, __ATOMIC_RELAXED);
    return old;
}

int lucid_half_table_count(void)
{
    int c = 0;
    for (int kind = 0; kind < 2; kind++)
        for (int i = 0; i < LH_SLOTS; i++) {
            uint16_t *p = __atomic_load_n(&lh_slots[kind][i].table, __ATOMIC_ACQUIRE);
            c += LH_IS_TABLE(p);
        }
    return c;
}

void lucid_half_map(int kind, lucid_f32_map f, uint16_t *y, const uint16_t *x, ptrdiff_t n)
{
    if (!lh_table_map(kind, f, y, x, n))
        lh_compute_map(kind, f, y, x, n);
}

void lucid_half_grad(int kind, lucid_f32_grad f, uint16_t *gx, const uint16_t *g,
                     const uint16_t *s, ptrdiff_t n)
{
    float gb[LH_BLOCK] __attribute__((aligned(64)));
    float sb[LH_BLOCK] __attribute__((aligned(64)));
    float ob[LH_BLOCK] __attribute__((aligned(64)));
#ifdef LH_X86
    if (lh_pairs(kind)) {
        for (ptrdiff_t i = 0; i < n; i += LH_BLOCK) {
            int m = (int)(n - i < LH_BLOCK ? n - i : LH_BLOCK), m32 = (m + 31) & ~31;
            lh_bf16_to_pairs(gb, g + i, m);
            lh_bf16_to_pairs(sb, s + i, m);
            f(ob, gb, sb, &m32);
            lh_pairs_to_bf16(gx + i, ob, m);
        }
        return;
    }
#endif
    for (ptrdiff_t i = 0; i < n; i += LH_BLOCK) {
        int m = (int)(n - i < LH_BLOCK ? n - i : LH_BLOCK);
        lucid_half_to_f32(kind, gb, g + i, m);
        lucid_half_to_f32(kind, sb, s + i, m);
        f(ob, gb, sb, &m);
        lucid_f32_to_half(kind, gx + i, ob, m);
    }
}

/* relu of a half value is that half value or +0, so it needs no widening: one pass
 * over the 16-bit patterns. Negative values (sign set, not -0, not nan) become +0;
 * a nan comes back quiet with its payload, as through float32 (vcvtph2ps quiets it,
 * the bfloat16 narrowing sets the quiet bit). */
LV_CLONES static void lh_relu_bits(uint16_t *restrict y, const uint16_t *restrict x, ptrdiff_t n,
                                   uint16_t inf, uint16_t quiet)
{
    for (ptrdiff_t i = 0; i < n; i++) {
        uint16_t h = x[i], mag = h & 0x7fffu;
        uint16_t r = (h & 0x8000u) && mag != 0 ? 0 : h;
        y[i] = mag > inf ? (uint16_t)(h | quiet) : r;
    }
}

void lucid_half_relu(int kind, uint16_t *y, const uint16_t *x, ptrdiff_t n)
{
    if (kind == LH_BF16)
        lh_relu_bits(y, x, n, 0x7f80u, 0x0040u);
    else
        lh_relu_bits(y, x, n, 0x7c00u, 0x0200u);
}

/* One block of z = a op b in float32 (a or b may be one value: its stride is 0). */
LV_CLONES static void lh_arith(int op, float *restrict z, const float *restrict a, int sa,
                               const float *restrict b, int sb, int n)
{
    if (sa && sb) {
        switch (op) {
        case LH_ADD: for (int i = 0; i < n; i++) z[i] = a[i] + b[i]; break;
        case LH_SUB: for (int i = 0; i < n; i++) z[i] = a[i] - b[i]; break;
        case LH_MUL: for (int i = 0; i < n; i++) z[i] = a[i] * b[i]; break;
        default:     for (int i = 0; i < n; i++) z[i] = a[i] / b[i]; break;
        }
    } else if (sa) {
        float v = b[0];
        switch (op) {
        case LH_ADD: for (int i = 0; i < n; i++) z[i] = a[i] + v; break;
        case LH_SUB: for (int i = 0; i < n; i++) z[i] = a[i] - v; break;
        case LH_MUL: for (int i = 0; i < n; i++) z[i] = a[i] * v; break;
        default:     for (int i = 0; i < n; i++) z[i] = a[i] / v; break;
        }
    } else {
        float v = a[0];
        switch (op) {
        case LH_ADD: for (int i = 0; i < n; i++) z[i] = v + b[i]; break;
        case LH_SUB: for (int i = 0; i < n; i++) z[i] = v - b[i]; break;
        case LH_MUL: for (int i = 0; i < n; i++) z[i] = v * b[i]; break;
        default:     for (int i = 0; i < n; i++) z[i] = v / b[i]; break;
        }
    }
}

/* z = a op b, a or b the float32 value s when mode says so; z may be a or b. */
static void lh_binary(int kind, int op, int mode, uint16_t *z, const uint16_t *a,
                      const uint16_t *b, float s, ptrdiff_t n)
{
    int level = lh_ready();
    float ab[LH_BLOCK] __attribute__((aligned(64)));
    float bb[LH_BLOCK] __attribute__((aligned(64)));
    float zb[LH_BLOCK] __attribute__((aligned(64)));
#ifdef LH_X86
    /* Native float16 for add, sub and mul, and only when s is a float16 value (then both
     * roundings agree). Not for div: vdivph (measured on an AVX512-FP16 Xeon) is slower
     * than widening, vdivps and rounding. */
    if (level >= LH_ISA_FP16 && kind == LH_F16 && op != LH_DIV) {
        uint16_t hs = lh_f32_to_f16_1(s);
        float back = lh_f16_to_f32_1(hs);
        if (mode == LH_ARRAYS || memcmp(&back, &s, 4) == 0) {
            lh_binary_fp16(op, mode, z, a, b, hs, n);
            return;
        }
    }
    if (level >= LH_ISA_AVX512) {
        lh_binary_avx512(kind, op, mode, z, a, b, s, n);
        return;
    }
#else
    (void)level;
#endif
    if (mode == LH_SCALAR_A)
        ab[0] = s;
    if (mode == LH_SCALAR_B)
        bb[0] = s;
    for (ptrdiff_t i = 0; i < n; i += LH_BLOCK) {
        int m = (int)(n - i < LH_BLOCK ? n - i : LH_BLOCK);
        if (mode != LH_SCALAR_A)
            lucid_half_to_f32(kind, ab, a + i, m);
        if (mode != LH_SCALAR_B)
            lucid_half_to_f32(kind, bb, b + i, m);
        lh_arith(op, zb, ab, mode != LH_SCALAR_A, bb, mode != LH_SCALAR_B, m);
        lucid_f32_to_half(kind, z + i, zb, m);
    }
}

void lucid_half_binary_scalar(int kind, int op, uint16_t *z, const uint16_t *x, float s,
                              int s_first, ptrdiff_t n)
{
    /* (the scalar's pointer is never read: x stands in for it) */
    lh_binary(kind, op, s_first ? LH_SCALAR_A : LH_SCALAR_B, z, x, x, s, n);
}

void lucid_half_binary(int kind, int op, uint16_t *z, const uint16_t *a, int sa,
                       const uint16_t *b, int sb, ptrdiff_t n)
{
    float v;
    if (!sa) {
        lucid_half_to_f32(kind, &v, a, 1);
        lh_binary(kind, op, LH_SCALAR_A, z, b, b, v, n);
    } else if (!sb) {
        lucid_half_to_f32(kind, &v, b, 1);
        lh_binary(kind, op, LH_SCALAR_B, z, a, a, v, n);
    } else {
        lh_binary(kind, op, LH_ARRAYS, z, a, b, 0.0f, n);
    }
}
