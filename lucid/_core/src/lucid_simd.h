/*
 * lucid_simd.h -- what lucid's C kernel files share (private to src/).
 *
 * - LV_CLONES: target_clones for baseline (SSE2), AVX2 and AVX-512 on x86-64
 *   Linux with gcc; the loader picks one clone per function once (ifunc).
 * - LV_SIMD_DECL / LV_SIMD_PAIR: re-declare a libm function with
 *   `omp declare simd notinbranch`, so that gcc calls glibc's vector math
 *   library (libmvec, glibc >= 2.35) from `omp simd` loops. glibc declares these
 *   variants itself only under the unsafe floating-point flags, which we never use.
 * - LV_BLOCK: every loop runs over blocks of this many elements and pads the last
 *   partial block through the same vector body, so no element ever goes through
 *   scalar libm and a result never depends on the array's length or on how a
 *   caller split it into pieces.
 */
#ifndef LUCID_SIMD_H
#define LUCID_SIMD_H

#include <math.h>
#include <string.h>
#include <stddef.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define LV_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define LV_CLONES
#endif

#if defined(__GLIBC__) && defined(__x86_64__)
#define LV_SIMD_DECL(ret, fn, arg) _Pragma("omp declare simd notinbranch") extern ret fn(arg);
#define LV_SIMD_DECL2(ret, fn, arg) _Pragma("omp declare simd notinbranch") extern ret fn(arg, arg);
#else   /* no libmvec: plain libm (e.g. macOS, where vForce does the heavy lifting) */
#define LV_SIMD_DECL(ret, fn, arg)
#define LV_SIMD_DECL2(ret, fn, arg)
#endif
#define LV_SIMD_PAIR(fn) LV_SIMD_DECL(float, fn##f, float) LV_SIMD_DECL(double, fn, double)
#define LV_SIMD_PAIR2(fn) LV_SIMD_DECL2(float, fn##f, float) LV_SIMD_DECL2(double, fn, double)

/* A multiple of every vector width we target (16 floats = one AVX-512 register). */
#define LV_BLOCK 16

/* Type-generic spellings, so one expression serves float and double. */
#define LV_GENERIC(v, ffn, dfn) _Generic((v), float: ffn, default: dfn)(v)
#define LV_GENERIC2(u, v, ffn, dfn) _Generic((u), float: ffn, default: dfn)(u, v)

#endif /* LUCID_SIMD_H */
