/*
 * lucid_half.c -- float16 / bfloat16 storage for kernels that compute in float32
 * (see include/lucid_half.h).
 *
 * Why blocks: a half op converts LH_BLOCK elements into a float32 buffer on the stack,
 * runs the float32 kernel there and rounds the block into the output. The data is read
 * and written once at half width (what makes half faster than float32 on large,
 * memory-bound arrays), and the float32 kernel sees exactly the values a float32 call
 * would (each kernel pads its own tail, so blocking never changes a result).
 *
 * Conversions, chosen once at run time:
 * - float16: AVX-512F vcvtph2ps / vcvtps2ph (16 lanes), F16C (8 lanes), or portable C.
 *   vcvtps2ph rounds to nearest even and keeps subnormals (MXCSR's flush-to-zero is
 *   never set: lucid is never built with the fast-math flags).
 * - bfloat16: widening is a 16-bit shift; narrowing rounds to nearest even in integer
 *   arithmetic and keeps nan a (quiet) nan. Not AVX512-BF16's vcvtneps2bf16: it flushes
 *   subnormal inputs to zero, which NumPy (ml_dtypes) and PyTorch do not.
 */
#include <string.h>
#include <stdint.h>

#include "lucid_half.h"
#include "lucid_simd.h"   /* LV_CLONES */

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define LH_X86 1
#include <immintrin.h>
#endif

#define LH_BLOCK 1024     /* a multiple of LV_BLOCK; three float32 buffers = 12 KiB of stack */

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

static inline float lh_bf16_to_f32_1(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t lh_f32_to_bf16_1(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);      /* nan stays a quiet nan */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
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

#ifdef LH_X86
__attribute__((target("avx512f")))
static void lh_f16_to_f32_avx512(float *y, const uint16_t *x, ptrdiff_t n)
{
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i))));
    if (i < n) {
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1u);
        uint16_t tmp[16] = {0};
        memcpy(tmp, x + i, (size_t)(n - i) * 2);
        _mm512_mask_storeu_ps(y + i, k, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)tmp)));
    }
}

__attribute__((target("avx512f")))
static void lh_f32_to_f16_avx512(uint16_t *y, const float *x, ptrdiff_t n)
{
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(y + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) {
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1u);
        uint16_t tmp[16];
        _mm256_storeu_si256((__m256i *)tmp,
                            _mm512_cvtps_ph(_mm512_maskz_loadu_ps(k, x + i), _MM_FROUND_TO_NEAREST_INT));
        memcpy(y + i, tmp, (size_t)(n - i) * 2);
    }
}

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
#endif

/* ---- run-time choice ------------------------------------------------------------ */

typedef void (*lh_widen_fn)(float *, const uint16_t *, ptrdiff_t);
typedef void (*lh_narrow_fn)(uint16_t *, const float *, ptrdiff_t);

static lh_widen_fn lh_f16_widen;      /* set once by lh_init (idempotent, so a race is benign) */
static lh_narrow_fn lh_f16_narrow;
static const char *lh_isa = "c";

static void lh_init(void)
{
    lh_widen_fn w = lh_f16_to_f32_c;
    lh_narrow_fn nw = lh_f32_to_f16_c;
    const char *isa = "c";
#ifdef LH_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        w = lh_f16_to_f32_avx512;
        nw = lh_f32_to_f16_avx512;
        isa = "avx512";
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) {
        w = lh_f16_to_f32_f16c;
        nw = lh_f32_to_f16_f16c;
        isa = "f16c";
    }
#endif
    lh_isa = isa;
    lh_f16_narrow = nw;
    __atomic_store_n(&lh_f16_widen, w, __ATOMIC_RELEASE);
}

static inline void lh_ready(void)
{
    if (__atomic_load_n(&lh_f16_widen, __ATOMIC_ACQUIRE) == NULL)
        lh_init();
}

const char *lucid_half_isa(void)
{
    lh_ready();
    return lh_isa;
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
        lh_f32_to_bf16(y, x, n);
    else
        lh_f16_narrow(y, x, n);
}

/* ---- kernels ----------------------------------------------------------------------- */

void lucid_half_map(int kind, lucid_f32_map f, uint16_t *y, const uint16_t *x, ptrdiff_t n)
{
    float xb[LH_BLOCK] __attribute__((aligned(64)));
    float yb[LH_BLOCK] __attribute__((aligned(64)));
    for (ptrdiff_t i = 0; i < n; i += LH_BLOCK) {
        int m = (int)(n - i < LH_BLOCK ? n - i : LH_BLOCK);
        lucid_half_to_f32(kind, xb, x + i, m);
        f(yb, xb, &m);
        lucid_f32_to_half(kind, y + i, yb, m);
    }
}

void lucid_half_grad(int kind, lucid_f32_grad f, uint16_t *gx, const uint16_t *g,
                     const uint16_t *s, ptrdiff_t n)
{
    float gb[LH_BLOCK] __attribute__((aligned(64)));
    float sb[LH_BLOCK] __attribute__((aligned(64)));
    float ob[LH_BLOCK] __attribute__((aligned(64)));
    for (ptrdiff_t i = 0; i < n; i += LH_BLOCK) {
        int m = (int)(n - i < LH_BLOCK ? n - i : LH_BLOCK);
        lucid_half_to_f32(kind, gb, g + i, m);
        lucid_half_to_f32(kind, sb, s + i, m);
        f(ob, gb, sb, &m);
        lucid_f32_to_half(kind, gx + i, ob, m);
    }
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

void lucid_half_binary_scalar(int kind, int op, uint16_t *z, const uint16_t *x, float s,
                              int s_first, ptrdiff_t n)
{
    float xb[LH_BLOCK] __attribute__((aligned(64)));
    float zb[LH_BLOCK] __attribute__((aligned(64)));
    for (ptrdiff_t i = 0; i < n; i += LH_BLOCK) {
        int m = (int)(n - i < LH_BLOCK ? n - i : LH_BLOCK);
        lucid_half_to_f32(kind, xb, x + i, m);
        if (s_first)
            lh_arith(op, zb, &s, 0, xb, 1, m);
        else
            lh_arith(op, zb, xb, 1, &s, 0, m);
        lucid_f32_to_half(kind, z + i, zb, m);
    }
}

void lucid_half_binary(int kind, int op, uint16_t *z, const uint16_t *a, int sa,
                       const uint16_t *b, int sb, ptrdiff_t n)
{
    float ab[LH_BLOCK] __attribute__((aligned(64)));
    float bb[LH_BLOCK] __attribute__((aligned(64)));
    float zb[LH_BLOCK] __attribute__((aligned(64)));
    if (!sa)
        lucid_half_to_f32(kind, ab, a, 1);
    if (!sb)
        lucid_half_to_f32(kind, bb, b, 1);
    for (ptrdiff_t i = 0; i < n; i += LH_BLOCK) {
        int m = (int)(n - i < LH_BLOCK ? n - i : LH_BLOCK);
        if (sa)
            lucid_half_to_f32(kind, ab, a + i, m);
        if (sb)
            lucid_half_to_f32(kind, bb, b + i, m);
        lh_arith(op, zb, ab, sa, bb, sb, m);
        lucid_f32_to_half(kind, z + i, zb, m);
    }
}
