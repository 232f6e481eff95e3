/*
 * lucid_half.h -- half-precision storage (IEEE float16 and bfloat16) for kernels that
 * compute in float32.
 *
 * A half kernel reads a block of half values into a float32 buffer on the stack, runs
 * the float32 kernel on it, and rounds the block once (round to nearest even) into the
 * output: results are correctly rounded float32 results rounded to half, and no full
 * float32 copy of an array is ever made. The conversions are AVX-512 (vcvtph2ps /
 * vcvtps2ph for float16, integer rounding for bfloat16), AVX2 + F16C, or portable C,
 * chosen once at run time. A unary forward reads a table of its 65536 results once it
 * has seen enough elements. float16 add, sub, mul and div use AVX512-FP16 arithmetic
 * where the CPU has it (the same bits: see src/lucid_half.c).
 */
#ifndef LUCID_HALF_H
#define LUCID_HALF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { LH_F16 = 0, LH_BF16 = 1 };

/* Conversions of n contiguous elements; kind is LH_F16 or LH_BF16. */
void lucid_half_to_f32(int kind, float *y, const uint16_t *x, ptrdiff_t n);
void lucid_f32_to_half(int kind, uint16_t *y, const float *x, ptrdiff_t n);
/* float64 -> half, rounded once (to nearest even) from the float64 value. */
void lucid_f64_to_half(int kind, uint16_t *y, const double *x, ptrdiff_t n);

/* y = f(x) over n half elements, through f's float32 kernel. f must be a pure function
 * of its input (it is called with the same f for the same op): once f has mapped
 * enough elements, its results for all 65536 half patterns are kept in a table and read
 * from there (the same bits; see src/lucid_half.c). */
typedef void (*lucid_f32_map)(float *y, const float *x, const int *n);
void lucid_half_map(int kind, lucid_f32_map f, uint16_t *y, const uint16_t *x, ptrdiff_t n);

/* The tables of lucid_half_map: off, on when they win (the default), or built on first
 * use without timing (tests). lucid_half_tables(mode) sets the mode (any other value
 * only reads it) and returns the previous one; LUCID_HALF_TABLES=0|1|2 in the
 * environment sets it at the first half kernel. */
enum { LH_TABLES_OFF = 0, LH_TABLES_AUTO = 1, LH_TABLES_ALWAYS = 2 };
int lucid_half_tables(int mode);
int lucid_half_table_count(void);       /* tables held now */
void lucid_half_tables_release(void);   /* frees every table (rebuilt when due again) */

/* relu over n half elements, on the bit patterns (relu of a half value is exact). */
void lucid_half_relu(int kind, uint16_t *y, const uint16_t *x, ptrdiff_t n);

/* gx = f(g, s) over n half elements (a unary op's fused backward). */
typedef void (*lucid_f32_grad)(float *gx, const float *g, const float *s, const int *n);
void lucid_half_grad(int kind, lucid_f32_grad f, uint16_t *gx, const uint16_t *g,
                     const uint16_t *s, ptrdiff_t n);

/* z = a op b over n half elements, op one of LH_ADD..LH_DIV; a single value is
 * broadcast when its stride flag (sa / sb) is 0. z may be a or b (in place). */
enum { LH_ADD = 0, LH_SUB = 1, LH_MUL = 2, LH_DIV = 3 };
void lucid_half_binary(int kind, int op, uint16_t *z, const uint16_t *a, int sa,
                       const uint16_t *b, int sb, ptrdiff_t n);

/* z = x op s (s_first: s op x) over n half elements, s a float32 scalar. */
void lucid_half_binary_scalar(int kind, int op, uint16_t *z, const uint16_t *x, float s,
                              int s_first, ptrdiff_t n);

/* The instructions chosen at run time: "avx512fp16", "avx512", "f16c" or "c" (capped
 * by LUCID_HALF_ISA in the environment, read once). */
const char *lucid_half_isa(void);

#ifdef __cplusplus
}
#endif
#endif /* LUCID_HALF_H */
