/*
 * lucid's own special functions: element functions that the vector loops of
 * lucid_vforce.c inline. Included from lucid_vforce.c after the libmvec
 * declarations (log, ...), so every libm call here is a vector call.
 * Everything is branch-free (both sides of a select are computed), so gcc
 * vectorises the loops that call these functions and every lane runs the same
 * code; results do not depend on the array's length or alignment.
 */
#ifndef LUCID_SPECIAL_H
#define LUCID_SPECIAL_H

#include <math.h>

/* Always inlined: a loop is only vectorised with its element function inline, and
 * gcc's size heuristics would keep the larger ones out of line. */
#define LV_INLINE static inline __attribute__((always_inline))

/* ---- erfinv ---------------------------------------------------------------
 * With a = |x| and w = -log(1 - a^2), two polynomials fitted by
 * tools/fit_erfinv.py (mpmath; minimax in relative error; coefficients rounded
 * one at a time, the higher ones refitted after each rounding):
 *   centre, w < W:  erfinv(x) = a * P(w - c)      P ~ erfinv(a)/a, analytic in w
 *   tail,   w >= W: erfinv(x) = Q(sqrt(w) - c)    erfinv grows like sqrt(w)
 * (W = 6.25, a ~ 0.9981, c = 3.125 for float64; W = 4, a ~ 0.9908, c = 0 for
 * float32). No
 * refinement step: the polynomials are accurate to below the dtype's rounding,
 * and the constant terms are stored as hi + lo and added last, in one rounding.
 * Both pieces are computed for every lane and one is selected: with one Horner
 * chain whose coefficients were selected per lane, gcc threads the repeated
 * selects into one copy of the chain per piece anyway.
 * The argument: 1 - a^2 is 1 - a*a for a < 0.5 and (1 - a)(1 + a) above (1 - a
 * exact there), within a few units of its last place, so w is within a few ulp
 * of 1 (absolute) near 0, where P varies slowly, and within a few ulp (relative)
 * in the tail, where erfinv ~ sqrt(w) halves w's relative error.
 * Special values: erfinv(+-0) = +-0 (a * P), erfinv(+-1) = +-inf, nan for
 * |x| > 1 and nan. Subnormal x: a * P(0), one rounding. */
/* w in [0.0, 6.27], centre 3.125, degree 24: max relative error 3.53e-18 (coefficients as stored, exact arithmetic) */
static const double lv_erfinv_c64[26] = {   /* c0 hi, c0 lo, c1, c2, ... */
    1.6536545626831027, -1.8702432180720906e-17, 0.24015818242558834,
    -0.0060336708714269945, -0.0007407025341546069, 0.00018673420802051399,
    -1.388252339406978e-05, -1.3654691772249175e-06, 4.2347881696881603e-07,
    -2.907038994324403e-08, -4.11266053953819e-09, 1.0512225999029488e-09,
    -5.414299000562387e-11, -1.2978518293867266e-11, 2.630515460995074e-12,
    -8.078900880942389e-14, -4.001806913761705e-14, 6.532630496805167e-15,
    -3.962122025289251e-17, -1.2336418523457652e-16, 1.5526106621890066e-17,
    6.893550889322302e-19, -3.479552398885182e-19, 1.6807569675667202e-20,
    3.2044430792333976e-21, -3.051161326159114e-22
};
/* s in [2.495, 6.01], centre 4.25, degree 26: max relative error 7.21e-18 (coefficients as stored, exact arithmetic) */
static const double lv_erfinv_t64[28] = {   /* c0 hi, c0 lo, c1, c2, ... */
    4.092223394393914, 3.882247095758544e-16, 1.0099785187670856, 0.0007117831232483395,
    -0.0006054002508253966, 0.00020753026780751514, -5.7780822651438695e-05,
    1.4450354284509448e-05, -3.2850082779925826e-06, 6.294337320438052e-07,
    -6.053791389263007e-08, -3.0121231386022454e-08, 2.5760718152780336e-08,
    -1.2053436419047821e-08, 3.929484881237586e-09, -7.391242885465344e-10,
    -8.321664969524047e-11, 1.3333272267547334e-10, -5.446736873966527e-11,
    1.1263332648483573e-11, -8.976925004942836e-13, -5.99740249040243e-13,
    7.09420661064479e-13, -2.5049178709701304e-13, -2.320325648550313e-14,
    2.6097952827938818e-14, -1.300861634824881e-15, -6.91082911682996e-16
};
/* w in [0.0, 4.02], centre 0.0, degree 9: max relative error 1.07e-09 (coefficients as stored, exact arithmetic) */
static const float lv_erfinv_c32[11] = {   /* c0 hi, c0 lo, c1, c2, ... */
    0.8862269520759583f, -2.5767436184764847e-08f, 0.23201361298561096f,
    0.01154986023902893f, -0.0023370380513370037f, -0.00012436653196346015f,
    4.2586852941894904e-05f, 4.716468083643122e-06f, -2.1336040845199022e-06f,
    2.390256383932865e-07f, -9.64037738526713e-09f
};
/* s in [1.995, 3.995], centre 3.0, degree 8: max relative error 6.15e-09 (coefficients as stored, exact arithmetic) */
static const float lv_erfinv_t32[10] = {   /* c0 hi, c0 lo, c1, c2, ... */
    2.8328020572662354f, -5.725085472363389e-08f, 1.0026624202728271f,
    0.006843072362244129f, -0.0034454595297574997f, 0.0011466238647699356f,
    -0.00022009520034771413f, -4.6652730816276744e-05f, 5.5897824495332316e-05f,
    -1.4202342754288111e-05f
};

LV_INLINE double lv_erfinv(double x)
{
    double a = fabs(x);
    double z = a < 0.5 ? 1.0 - a * a : (1.0 - a) * (1.0 + a);
    double w = -log(z);                  /* +inf at a = 1, nan for a > 1 */
    double t = sqrt(w) - 4.25;           /* exact in the tail (s in [2.5, 6.01]) */
    /* The centre's polynomial is in tc = w - 3.125: expanded at w = 0 it would be
     * ill-conditioned near w = 6 (erfinv(a)/a has singularities at w = +-2 pi i).
     * tc is exact for w >= 1.5625; below, ec is its rounding error (Fast2Sum),
     * added back as P'(tc) * ec with P' to first order. */
    double tc = w - 3.125;
    double ec = w - (tc + 3.125);
    double p, q;
    p = lv_erfinv_c64[25];
    p = p * tc + lv_erfinv_c64[24]; p = p * tc + lv_erfinv_c64[23]; p = p * tc + lv_erfinv_c64[22];
    p = p * tc + lv_erfinv_c64[21]; p = p * tc + lv_erfinv_c64[20]; p = p * tc + lv_erfinv_c64[19];
    p = p * tc + lv_erfinv_c64[18]; p = p * tc + lv_erfinv_c64[17]; p = p * tc + lv_erfinv_c64[16];
    p = p * tc + lv_erfinv_c64[15]; p = p * tc + lv_erfinv_c64[14]; p = p * tc + lv_erfinv_c64[13];
    p = p * tc + lv_erfinv_c64[12]; p = p * tc + lv_erfinv_c64[11]; p = p * tc + lv_erfinv_c64[10];
    p = p * tc + lv_erfinv_c64[9]; p = p * tc + lv_erfinv_c64[8]; p = p * tc + lv_erfinv_c64[7];
    p = p * tc + lv_erfinv_c64[6]; p = p * tc + lv_erfinv_c64[5]; p = p * tc + lv_erfinv_c64[4];
    p = p * tc + lv_erfinv_c64[3]; p = p * tc + lv_erfinv_c64[2];
    p = p * tc + (lv_erfinv_c64[1] + (lv_erfinv_c64[2] + 2.0 * lv_erfinv_c64[3] * tc) * ec);
    p = lv_erfinv_c64[0] + p;
    q = lv_erfinv_t64[27];
    q = q * t + lv_erfinv_t64[26]; q = q * t + lv_erfinv_t64[25]; q = q * t + lv_erfinv_t64[24];
    q = q * t + lv_erfinv_t64[23]; q = q * t + lv_erfinv_t64[22]; q = q * t + lv_erfinv_t64[21];
    q = q * t + lv_erfinv_t64[20]; q = q * t + lv_erfinv_t64[19]; q = q * t + lv_erfinv_t64[18];
    q = q * t + lv_erfinv_t64[17]; q = q * t + lv_erfinv_t64[16]; q = q * t + lv_erfinv_t64[15];
    q = q * t + lv_erfinv_t64[14]; q = q * t + lv_erfinv_t64[13]; q = q * t + lv_erfinv_t64[12];
    q = q * t + lv_erfinv_t64[11]; q = q * t + lv_erfinv_t64[10]; q = q * t + lv_erfinv_t64[9];
    q = q * t + lv_erfinv_t64[8]; q = q * t + lv_erfinv_t64[7]; q = q * t + lv_erfinv_t64[6];
    q = q * t + lv_erfinv_t64[5]; q = q * t + lv_erfinv_t64[4]; q = q * t + lv_erfinv_t64[3];
    q = q * t + lv_erfinv_t64[2]; q = q * t + lv_erfinv_t64[1];
    q = lv_erfinv_t64[0] + q;
    double y = w < 6.25 ? a * p : q;
    y = a < 1.0 ? y : (a == 1.0 ? INFINITY : NAN);   /* nan stays nan */
    return copysign(y, x);
}

/* float32 in float: the polynomials' error is ~1e-9 relative, the rest is the
 * float rounding of w and of the Horner steps. */
LV_INLINE float lv_erfinvf(float x)
{
    float a = fabsf(x);
    float z = a < 0.5f ? 1.0f - a * a : (1.0f - a) * (1.0f + a);
    float w = -logf(z);
    float t = sqrtf(w) - 3.0f;           /* exact in the tail (s in [2, 3.993]) */
    float p, q;
    p = lv_erfinv_c32[10];
    p = p * w + lv_erfinv_c32[9]; p = p * w + lv_erfinv_c32[8]; p = p * w + lv_erfinv_c32[7];
    p = p * w + lv_erfinv_c32[6]; p = p * w + lv_erfinv_c32[5]; p = p * w + lv_erfinv_c32[4];
    p = p * w + lv_erfinv_c32[3]; p = p * w + lv_erfinv_c32[2]; p = p * w + lv_erfinv_c32[1];
    p = lv_erfinv_c32[0] + p;
    q = lv_erfinv_t32[9];
    q = q * t + lv_erfinv_t32[8]; q = q * t + lv_erfinv_t32[7]; q = q * t + lv_erfinv_t32[6];
    q = q * t + lv_erfinv_t32[5]; q = q * t + lv_erfinv_t32[4]; q = q * t + lv_erfinv_t32[3];
    q = q * t + lv_erfinv_t32[2]; q = q * t + lv_erfinv_t32[1];
    q = lv_erfinv_t32[0] + q;
    float y = w < 4.0f ? a * p : q;
    y = a < 1.0f ? y : (a == 1.0f ? INFINITY : NAN);
    return copysignf(y, x);
}

#endif /* LUCID_SPECIAL_H */
