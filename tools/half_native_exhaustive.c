/*
 * half_native_exhaustive.c -- the check behind lucid_half.c's use of AVX512-FP16:
 * for every pair of float16 bit patterns (2**32 pairs) and each of add, sub, mul
 * and div, native float16 arithmetic gives the same bits as float32 arithmetic on
 * the widened operands rounded once to float16 (what lucid and PyTorch compute).
 * A nan result from two nan operands may carry either operand's payload; those are
 * counted apart (IEEE does not fix that payload).
 *
 *   gcc -O2 tools/half_native_exhaustive.c -o /tmp/hx && /tmp/hx
 *   (needs AVX512-FP16; about 10 s in all)
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>

#define FP16 __attribute__((target("avx512fp16,avx512bw,avx512vl,avx512f")))

FP16 static int check(int op)
{
    unsigned long long bad = 0, nan_payload = 0;
    uint16_t bv[32];
    for (uint32_t a = 0; a < 65536; a++) {
        __m512h ha = _mm512_castsi512_ph(_mm512_set1_epi16((short)a));
        __m512 fa = _mm512_cvtph_ps(_mm256_set1_epi16((short)a));
        for (uint32_t b0 = 0; b0 < 65536; b0 += 32) {
            for (int k = 0; k < 32; k++)
                bv[k] = (uint16_t)(b0 + k);
            __m512i vb = _mm512_loadu_si512(bv);
            __m512h hb = _mm512_castsi512_ph(vb), hz;
            __m512 lo = _mm512_cvtph_ps(_mm512_castsi512_si256(vb));
            __m512 hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(vb, 1)), zl, zh;
            switch (op) {
            case 0: hz = _mm512_add_ph(ha, hb); zl = _mm512_add_ps(fa, lo); zh = _mm512_add_ps(fa, hi); break;
            case 1: hz = _mm512_sub_ph(ha, hb); zl = _mm512_sub_ps(fa, lo); zh = _mm512_sub_ps(fa, hi); break;
            case 2: hz = _mm512_mul_ph(ha, hb); zl = _mm512_mul_ps(fa, lo); zh = _mm512_mul_ps(fa, hi); break;
            default: hz = _mm512_div_ph(ha, hb); zl = _mm512_div_ps(fa, lo); zh = _mm512_div_ps(fa, hi); break;
            }
            const int rn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
            __m512i ref = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtps_ph(zl, rn)),
                                             _mm512_cvtps_ph(zh, rn), 1);
            __mmask32 ne = _mm512_cmpneq_epi16_mask(ref, _mm512_castph_si512(hz));
            __mmask32 both_nan = _mm512_cmp_ph_mask(hz, hz, _CMP_UNORD_Q) &
                _mm512_cmp_ph_mask(_mm512_castsi512_ph(ref), _mm512_castsi512_ph(ref), _CMP_UNORD_Q);
            bad += (unsigned)__builtin_popcount(ne & ~both_nan);
            nan_payload += (unsigned)__builtin_popcount(ne & both_nan);
        }
    }
    printf("%s: %llu different results, %llu nan payloads differ\n",
           (const char *[]){"add", "sub", "mul", "div"}[op], bad, nan_payload);
    return bad != 0;
}

int main(void)
{
    if (!__builtin_cpu_supports("avx512fp16")) {
        printf("this CPU has no AVX512-FP16\n");
        return 2;
    }
    int fails = 0;
    for (int op = 0; op < 4; op++)
        fails += check(op);
    return fails != 0;
}
