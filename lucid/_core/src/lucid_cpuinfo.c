/*
 * lucid_cpuinfo.c -- what the loader chose for the kernels' target clones, and the math
 * library in use (lucid.backend_info()).
 */
#include "lucid_vforce.h"

/* ---- what was chosen at load time ---------------------------------------- */

const char *lucid_isa(void)
{
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return "avx512";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "avx2";
    return "sse2";
#else
    return "baseline";
#endif
}

const char *lucid_mathlib(void)
{
#if defined(__GLIBC__)
    return "glibc-libmvec";
#else
    return "libm";
#endif
}
