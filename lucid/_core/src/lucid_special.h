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

/* c[n-1] x^(n-1) + ... + c[1] x + c[0] by Horner's rule, p = p * x + c[k] from the top:
 * the same operations, in the same order, as the chain written out. n is a constant at
 * every call, and the loop is unrolled, so the chain vectorises as the written-out one. */
LV_INLINE double lv_horner(const double *c, int n, double x)
{
    double p = c[n - 1];
    _Pragma("GCC unroll 64")
    for (int k = n - 2; k >= 0; k--)
        p = p * x + c[k];
    return p;
}
LV_INLINE float lv_hornerf(const float *c, int n, float x)
{
    float p = c[n - 1];
    _Pragma("GCC unroll 64")
    for (int k = n - 2; k >= 0; k--)
        p = p * x + c[k];
    return p;
}

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

/* erfinv(a) for a in [0, 1), given w = -log(1 - a^2) (also the core of ndtri, which
 * computes w from its own argument without cancellation). */
LV_INLINE double lv_erfinv_aw(double a, double w)
{
    double t = sqrt(w) - 4.25;           /* exact in the tail (s in [2.5, 6.01]) */
    /* The centre's polynomial is in tc = w - 3.125: expanded at w = 0 it would be
     * ill-conditioned near w = 6 (erfinv(a)/a has singularities at w = +-2 pi i).
     * tc is exact for w >= 1.5625; below, ec is its rounding error (Fast2Sum),
     * added back as P'(tc) * ec with P' to first order. */
    double tc = w - 3.125;
    double ec = w - (tc + 3.125);
    double p, q;
    p = lv_horner(lv_erfinv_c64 + 2, 24, tc);
    p = p * tc + (lv_erfinv_c64[1] + (lv_erfinv_c64[2] + 2.0 * lv_erfinv_c64[3] * tc) * ec);
    p = lv_erfinv_c64[0] + p;
    q = lv_horner(lv_erfinv_t64 + 1, 27, t);
    q = lv_erfinv_t64[0] + q;
    return w < 6.25 ? a * p : q;
}

LV_INLINE double lv_erfinv(double x)
{
    double a = fabs(x);
    double z = a < 0.5 ? 1.0 - a * a : (1.0 - a) * (1.0 + a);
    double w = -log(z);                  /* +inf at a = 1, nan for a > 1 */
    double y = lv_erfinv_aw(a, w);
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
    p = lv_hornerf(lv_erfinv_c32 + 1, 10, w);
    p = lv_erfinv_c32[0] + p;
    q = lv_hornerf(lv_erfinv_t32 + 1, 9, t);
    q = lv_erfinv_t32[0] + q;
    float y = w < 4.0f ? a * p : q;
    y = a < 1.0f ? y : (a == 1.0f ? INFINITY : NAN);
    return copysignf(y, x);
}


/* ==== The gamma family, sinc, i0, erfcx, log_ndtr, ndtri =======================
 * Coefficients from tools/fit_special.py (mpmath, 40 digits). float32 goes through the
 * double functions and is rounded once. The loops are fixed-length and branch-free (the
 * pieces of a function are all computed, one is selected), so they vectorise; polygamma
 * of order n >= 2 is a scalar loop (its length depends on n and x). */

/* sin(pi x) and cos(pi x) with the argument reduced exactly: x = n + r, |r| <= 1/2,
 * so pi r is rounded once and the result keeps its relative accuracy near the zeros.
 * cos(pi r) is sin(pi (1/2 - |r|)) (1/2 - |r| exact where it matters, |r| >= 1/4): exact
 * zeros at the half-integers, and two sin calls where sin and cos of one argument would
 * become one scalar sincos call, which has no vector version (the loop would not vectorise). */
LV_INLINE void lv_sincospi(double x, double *s, double *c)
{
    double n = rint(x);
    double r = x - n;                    /* exact; nan at +-inf */
    double h = n * 0.5;
    double sg = h != rint(h) ? -1.0 : 1.0;   /* (-1)^n (n even above 2^53) */
    *s = sg * sin(3.141592653589793 * r);
    *c = sg * sin(3.141592653589793 * (0.5 - fabs(r)));
}

/* ---- lgamma ------------------------------------------------------------------
 * a >= 10: Stirling's series (8 terms, < 1e-18 relative at 10).
 * a < 10: shifted to t in [0, 2.5) (lgamma(t + 1) = lgamma(t) + log t, one log of the
 * product), then lgamma(2 + z), |z| <= 1/2, from its Taylor series, whose coefficients
 * (-1)^k (zeta(k) - 1) / k fall like 2^-k:
 *   t in [1.5, 2.5): z = t - 2;  [0.5, 1.5): z = t - 1 (exact), minus log t;
 *   [0, 0.5): z = t (exact), minus log(t (t + 1)).
 * So lgamma keeps its relative accuracy at its zeros 1 and 2 (z is exact there).
 * x < 0: the reflection lgamma(x) = log(pi) - log(|sin(pi x)| |x|) - lgamma(|x|);
 * +inf at 0 and at the negative integers (and at -inf), as torch. */
static const double lv_lgamma2_c[30] = {
    0.42278433509846713, 0.3224670334241132, -0.0673523010531981,
    0.020580808427784546, -0.007385551028673986, 0.0028905103307415234,
    -0.001192753911703261, 0.0005096695247430425, -0.00022315475845357939,
    9.945751278180853e-05, -4.492623673813314e-05, 2.050721277567069e-05,
    -9.439488275268397e-06, 4.374866789907488e-06, -2.039215753801366e-06,
    9.55141213040742e-07, -4.492469198764566e-07, 2.1207184805554665e-07,
    -1.0043224823968099e-07, 4.7698101693639804e-08, -2.2711094608943164e-08,
    1.0838659214896955e-08, -5.183475041970047e-09, 2.4836745438024785e-09,
    -1.1921401405860912e-09, 5.731367241678862e-10, -2.7595228851242334e-10,
    1.330476437424449e-10, -6.4229645638381e-11, 3.1044247747322276e-11
};
LV_INLINE double lv_lgamma_pos(double a)
{
    double t = a < 10.0 ? a : 2.0;
    double prod = 1.0;
    for (int j = 0; j < 8; j++) {
        int c = t >= 2.5;
        prod = c ? prod * (t - 1.0) : prod;
        t = c ? t - 1.0 : t;
    }
    double z = t >= 1.5 ? t - 2.0 : (t >= 0.5 ? t - 1.0 : t);
    double la = t >= 1.5 ? prod : (t >= 0.5 ? t : t * (t + 1.0));
    double p = lv_horner(lv_lgamma2_c, 30, z);
    double L = z * p;
    double small = t >= 1.5 ? L + log(la) : L - log(la);
    double b = a < 10.0 ? 10.0 : a;     /* nan stays */
    double ib = 1.0 / b, ib2 = ib * ib;
    double ser = -3617.0 / 122400.0;
    ser = ser * ib2 + 1.0 / 156.0;  ser = ser * ib2 + -691.0 / 360360.0;
    ser = ser * ib2 + 1.0 / 1188.0; ser = ser * ib2 + -1.0 / 1680.0;
    ser = ser * ib2 + 1.0 / 1260.0; ser = ser * ib2 + -1.0 / 360.0;
    ser = ser * ib2 + 1.0 / 12.0;
    /* (b - 1/2) log b - b + log(2 pi)/2 = (b - 1/2)(log b - 1) - 1/2 + log(2 pi)/2 */
    double big = (b - 0.5) * (log(b) - 1.0) + (0.41893853320467274 + ser * ib);
    return a < 10.0 ? small : big;
}

LV_INLINE double lv_lgamma(double x)
{
    double a = fabs(x);
    double lp = lv_lgamma_pos(a);
    double s, c;
    lv_sincospi(x, &s, &c);
    double ln = 1.1447298858494002 - log(fabs(s)) - log(a) - lp;
    ln = s == 0.0 ? INFINITY : ln;        /* the negative integers */
    /* |x| < 1e-17: lgamma(x) = -log|x| - gamma x to double precision, so lgamma(|x|)
     * (and sin(pi x) is not formed where it would be subnormal) */
    double r = x < 0 && a > 1e-17 ? ln : lp;
    return a == INFINITY ? INFINITY : r;
}
LV_INLINE float lv_lgammaf(float x) { return (float)lv_lgamma((double)x); }

/* ---- digamma -----------------------------------------------------------------
 * a >= 10: the asymptotic series (8 terms). a < 10: a < 1 moves up one step
 * (psi(a) = psi(a + 1) - 1/a), then down to u in [1, 2) (psi(u + 1) = psi(u) + 1/u,
 * the sum of the 1/u kept as one fraction), and psi(u) = (u - x0) P(u - 1.5) with x0
 * psi's positive root in two parts and P a Chebyshev fit (tools/fit_special.py), so
 * psi keeps its relative accuracy at x0. x <= 0: psi(x) = psi(1 - x) - pi cot(pi x).
 * As torch: psi(+0) = -inf, psi(-0) = +inf, nan at the negative integers and -inf. */
static const double lv_digamma_c[25] = {
    0.9510558760318328, -0.42362742128146047, 0.24054248424078692,
    -0.14840492305391953, 0.09498872445291612, -0.06192213327145426,
    0.040760833938156715, -0.026975796854253855, 0.01790724844695774,
    -0.01190821490033334, 0.007927018326452989, -0.005280022351185788,
    0.0035181632941984173, -0.002344601745374014, 0.0015627743022023645,
    -0.0010425991453131233, 0.0006950193490143479, -0.00045842727013976626,
    0.00030561071865924984, -0.00022224698859478392, 0.00014816346358409744,
    -5.40441461712304e-05, 3.602924700817264e-05, -8.655623649602748e-05,
    5.770411793838508e-05
};
LV_INLINE double lv_digamma_pos(double a)
{
    double t = a < 10.0 ? a : 1.5;
    double u = t < 1.0 ? t + 1.0 : t;
    double num = 0.0, den = 1.0;
    for (int j = 0; j < 9; j++) {
        int c = u >= 2.0;
        double v = u - 1.0;
        num = c ? num * v + den : num;
        den = c ? den * v : den;
        u = c ? v : u;
    }
    double h = u - 1.5;
    double p = lv_horner(lv_digamma_c, 25, h);
    double small = ((u - 1.4616321449683622) - 9.549995429965697e-17) * p + num / den
                   - (t < 1.0 ? 1.0 / t : 0.0);
    double b = a < 10.0 ? 10.0 : a;
    double ib = 1.0 / b, ib2 = ib * ib;
    double ser = 3617.0 / 8160.0;
    ser = -(ser * ib2) + 1.0 / 12.0;   ser = -(ser * ib2) + 691.0 / 32760.0;
    ser = -(ser * ib2) + 1.0 / 132.0;  ser = -(ser * ib2) + 1.0 / 240.0;
    ser = -(ser * ib2) + 1.0 / 252.0;  ser = -(ser * ib2) + 1.0 / 120.0;
    ser = -(ser * ib2) + 1.0 / 12.0;
    double big = log(b) - 0.5 * ib - ser * ib2;
    return a < 10.0 ? small : big;
}

LV_INLINE double lv_digamma(double x)
{
    double a = x > 0 ? x : 1.0 - x;
    double ps = lv_digamma_pos(a);
    double s, c;
    lv_sincospi(x, &s, &c);
    double refl = ps - 3.141592653589793 * c / s;
    double r = x > 0 ? ps : refl;
    r = x == 0 ? -1.0 / x : r;          /* -inf at +0, +inf at -0 (signbit would not vectorise) */
    return x < 0 && x == rint(x) ? NAN : r;
}
LV_INLINE float lv_digammaf(float x) { return (float)lv_digamma((double)x); }

/* ---- polygamma(n, x), n >= 1 = (-1)^(n+1) n! zeta(n + 1, x) ------------------
 * Hurwitz zeta(s, q), q > 0: the terms q^-s, (q+1)^-s, ... up to w = q + N >= 15 + s,
 * then Euler-Maclaurin at w (12 Bernoulli terms: < 1e-19 relative there).
 * q < 0 (not an integer): with X = ceil(-q), f = q + X in (0, 1) (exact),
 *   zeta(s, q) = zeta(s, f) + (-1)^s (zeta(s, 1 - f) - zeta(s, X + 1 - f)),
 * the terms with q + k < 0 summed in closed form, so the work stays bounded for any q.
 * Poles (0 and the negative integers) give (-1)^(n+1) inf, as torch's n >= 2. */
static const double lv_b2j_fact[12] = {   /* B_2j / (2j)! */
    0.08333333333333333, -0.001388888888888889, 3.306878306878307e-05,
    -8.267195767195768e-07, 2.08767569878681e-08, -5.284190138687493e-10,
    1.3382536530684679e-11, -3.3896802963225827e-13, 8.586062056277845e-15,
    -2.174868698558062e-16, 5.5090028283602295e-18, -1.3954464685812525e-19
};
static inline double lv_hurwitz_pos(double s, double q)
{
    double sum = 0.0, w = q;
    const double W = 15.0 + s;
    while (w < W) {
        sum += pow(w, -s);
        w += 1.0;
    }
    double wp = pow(w, -s);
    double tail = w * wp / (s - 1.0) + 0.5 * wp;
    double fac = s * wp / w, iw2 = 1.0 / (w * w), em = 0.0;
    for (int j = 0; j < 12; j++) {
        em += lv_b2j_fact[j] * fac;
        fac *= (s + 2 * j + 1) * (s + 2 * j + 2) * iw2;
    }
    double r = sum + (tail + em);
    return q == INFINITY ? 0.0 : r;
}
static inline double lv_polygamma_n(int n, double x)
{
    double s = n + 1.0;
    double sign = (n & 1) ? 1.0 : -1.0;
    double fact = tgamma(s);
    double z;
    if (x != x)
        return x;
    if (x > 0) {
        z = lv_hurwitz_pos(s, x);
    } else if (x == rint(x)) {            /* 0, the negative integers, -inf */
        if (x == -INFINITY)
            return NAN;
        z = INFINITY;
    } else {
        double X = ceil(-x), f = x + X;
        double d = lv_hurwitz_pos(s, 1.0 - f) - lv_hurwitz_pos(s, X + 1.0 - f);
        z = lv_hurwitz_pos(s, f) + ((n & 1) ? d : -d);
    }
    return sign * fact * z;
}

/* ---- trigamma = polygamma(1, .) ----------------------------------------------
 * Branch-free (the backward of digamma): a >= 10: the asymptotic series
 * 1/a + 1/(2a^2) + sum B_2k / a^(2k+1) (B_2 .. B_20: < 1e-18 relative at 10). a < 10:
 * a < 1 moves up one step (psi1(a) = psi1(a + 1) + 1/a^2), then up to u in [10, 11)
 * (psi1(u) = psi1(u + 1) + 1/u^2, the sum of the 1/u^2 kept as one fraction; its
 * denominator stays below (10!)^2). x <= 0: psi1(x) = (pi / sin(pi x))^2 - psi1(1 - x),
 * +inf at 0 and the negative integers (the poles, as polygamma(1, .) of any order), nan
 * at -inf. */
static const double lv_trigamma_b[10] = {   /* B_2k, k = 1 .. 10 */
    1.0 / 6.0, -1.0 / 30.0, 1.0 / 42.0, -1.0 / 30.0, 5.0 / 66.0, -691.0 / 2730.0,
    7.0 / 6.0, -3617.0 / 510.0, 43867.0 / 798.0, -174611.0 / 330.0
};
LV_INLINE double lv_trigamma_pos(double a)
{
    double extra = a < 1.0 ? 1.0 / (a * a) : 0.0;
    double u = a < 1.0 ? a + 1.0 : a;
    double num = 0.0, den = 1.0;
    for (int j = 0; j < 9; j++) {
        int c = u < 10.0;
        double u2 = u * u;
        num = c ? num * u2 + den : num;
        den = c ? den * u2 : den;
        u = c ? u + 1.0 : u;
    }
    double ib = 1.0 / u, ib2 = ib * ib;   /* u = +inf: 0 */
    double ser = lv_horner(lv_trigamma_b, 10, ib2);
    double big = ib * (1.0 + ib * (0.5 + ib * ser));
    return extra + (num / den + big);
}
LV_INLINE double lv_trigamma(double x)
{
    double a = x > 0 ? x : 1.0 - x;
    double ps = lv_trigamma_pos(a);
    double s, c;
    lv_sincospi(x, &s, &c);
    double r = 3.141592653589793 / s;
    return x > 0 ? ps : r * r - ps;
}
LV_INLINE float lv_trigammaf(float x) { return (float)lv_trigamma((double)x); }

/* ---- sinc(x) = sin(pi x) / (pi x), 1 at 0 --------------------------------------
 * sin(pi x) through the exact reduction, so sinc keeps its relative accuracy near
 * every integer (+0 there); |x| < 1e-4: 1 - z^2/6 + z^4/120, z = pi x; 0 at +-inf, the
 * limit (torch gives nan). The derivative
 * (cos(pi x) - sinc(x)) / x cancels near 0: there (|x| < 1/4) its Taylor series,
 * -pi z sum (-1)^(k-1) 2k z^(2k-2) / (2k+1)!. */
LV_INLINE double lv_sinc(double x)
{
    double s, c;
    lv_sincospi(x, &s, &c);
    double px = 3.141592653589793 * x;
    double z2 = px * px;
    double small = 1.0 - z2 * (1.0 / 6.0 - z2 * (1.0 / 120.0));
    double r = fabs(x) < 1e-4 ? small : s / px + 0.0;   /* +0 at the integers */
    return fabs(x) == INFINITY ? 0.0 : r;                /* the limit (torch: nan) */
}
LV_INLINE float lv_sincf(float x) { return (float)lv_sinc((double)x); }
LV_INLINE double lv_sinc_grad(double x)
{
    double s, c;
    lv_sincospi(x, &s, &c);
    double px = 3.141592653589793 * x;
    double far = (c - s / px) / x;
    double z2 = px * px;
    double q = 1.0 / 2554547108585472000.0;
    q = -(q * z2) + 1.0 / 6758061133824000.0;
    q = -(q * z2) + 1.0 / 22230464256000.0;
    q = -(q * z2) + 1.0 / 93405312000.0;
    q = -(q * z2) + 1.0 / 518918400.0;
    q = -(q * z2) + 1.0 / 3991680.0;
    q = -(q * z2) + 1.0 / 45360.0;
    q = -(q * z2) + 1.0 / 840.0;
    q = -(q * z2) + 1.0 / 30.0;
    q = -(q * z2) + 1.0 / 3.0;
    double near = -3.141592653589793 * px * q;
    double r = fabs(x) < 0.25 ? near : far;
    return fabs(x) == INFINITY ? 0.0 : r;
}
LV_INLINE float lv_sinc_gradf(float x) { return (float)lv_sinc_grad((double)x); }

/* ---- i0, i1 -------------------------------------------------------------------
 * |x| < 30: the power series in u = x^2/4 (51 terms), all terms positive. u is formed
 * as u_hi + u_lo (fma), and the rounding u_lo is added back to first order through the
 * series' derivative (i0's is i1's series), so i0 does not lose the ~x/2 ULP that
 * rounding u would cost. |x| >= 30: e^x / sqrt(2 pi x) times the asymptotic series in
 * 1/x (26 terms, 1e-21 at 30), e^x applied in two halves so it overflows only where
 * i0 does. i0(+-inf) = inf (torch gives nan there). */
static const double lv_i0_s[51] = {
    1.0, 1.0, 0.25,
    0.027777777777777776, 0.001736111111111111, 6.944444444444444e-05,
    1.9290123456790124e-06, 3.936759889140842e-08, 6.151187326782565e-10,
    7.594058428126624e-12, 7.594058428126623e-14, 6.276081345559193e-16,
    4.358389823304995e-18, 2.5789288895295828e-20, 1.3157800456783586e-22,
    5.8479113141260385e-25, 2.2843403570804838e-27, 7.904291893012054e-30,
    2.4395962632753253e-32, 6.757884385804225e-35, 1.6894710964510564e-37,
    3.8310002187098785e-40, 7.915289708078262e-43, 1.4962740468957016e-45,
    2.5976979980828152e-48, 4.156316796932504e-51, 6.14839762859838e-54,
    8.434015951438106e-57, 1.0757673407446564e-59, 1.2791526049282477e-62,
    1.4212806721424974e-65, 1.4789601166935458e-68, 1.4442969889585408e-71,
    1.3262598613026087e-74, 1.147283617043779e-77, 9.365580547296156e-81,
    7.226528200074194e-84, 5.278691161485898e-87, 3.6556032974279072e-90,
    2.4034209713529963e-93, 1.5021381070956227e-96, 8.935979221270807e-100,
    5.065747857863269e-103, 2.739723016691871e-106, 1.4151461863077845e-109,
    6.988376228680417e-113, 3.3026352687525603e-116, 1.4950816064973112e-119,
    6.48906947264458e-123, 2.7026528415845812e-126, 1.0810611366338324e-129
};
static const double lv_i1_s[51] = {
    1.0, 0.5, 0.08333333333333333,
    0.006944444444444444, 0.00034722222222222224, 1.1574074074074073e-05,
    2.755731922398589e-07, 4.920949861426052e-09, 6.834652585313961e-11,
    7.594058428126623e-13, 6.903689480115112e-15, 5.230067787965994e-17,
    3.352607556388458e-19, 1.842092063949702e-21, 8.771866971189057e-24,
    3.654944571328774e-26, 1.3437296218120491e-28, 4.391273273895586e-31,
    1.2839980333028028e-33, 3.3789421929021126e-36, 8.045100459290744e-39,
    1.7413637357772174e-41, 3.4414303078601135e-44, 6.234475195398757e-47,
    1.0390791992331261e-49, 1.5985833834355786e-52, 2.2771843068882885e-55,
    3.0121485540850376e-58, 3.7095425542919185e-61, 4.263842016427493e-64,
    4.5847763617499917e-67, 4.6217503646673306e-70, 4.376657542298608e-73,
    3.900764297948849e-76, 3.2779531915536543e-79, 2.60155015202671e-82,
    1.9531157297497823e-85, 1.3891292530226046e-88, 9.373341788276685e-92,
    6.00855242838249e-95, 3.6637514807210306e-98, 2.127614100302573e-101,
    1.1780808971775045e-104, 6.2266432197542515e-108, 3.1447693029061876e-111,
    1.5192122236261777e-114, 7.026883550537362e-118, 3.114753346869398e-121,
    1.3242998923764447e-124, 5.405305683169162e-128, 2.1197277188898674e-131
};
static const double lv_i0_a[26] = {
    1.0, 0.125, 0.0703125,
    0.0732421875, 0.11215209960937501, 0.22710800170898438,
    0.5725014209747314, 1.7277275025844576, 6.074042001273483,
    24.380529699556067, 110.01714026924677, 551.3358961220207,
    3038.0905109223854, 18257.755474293182, 118838.42625678329,
    832859.3040162897, 6252951.4934348, 50069589.53198895,
    425939216.5047671, 3836255180.2304354, 36468400807.065575,
    364901081884.9835, 3833534661393.9463, 42189715702840.984,
    485401468685290.3, 5827244631566911.0
};
static const double lv_i1_a[26] = {
    1.0, -0.375, -0.1171875,
    -0.1025390625, -0.144195556640625, -0.2775764465332031,
    -0.6765925884246826, -1.9935317337512972, -6.883914268109948,
    -27.248827311268546, -121.5978918765359, -603.8440767050703,
    -3302.272294480853, -19718.375912236632, -127641.27264617462,
    -890297.876707068, -6656367.718817688, -53104110.10968523,
    -450278600.3050393, -4043620325.1077538, -38338575207.42789,
    -382701134659.86053, -4011838599133.197, -44064814178522.77,
    -506056850331472.5, -6065091351222697.0
};
LV_INLINE double lv_i0_i1_big(double a, const double *coef, double *e_out)
{
    double c = a < 30.0 ? 30.0 : a;
    double ic = 1.0 / c;
    double A = lv_horner(coef, 26, ic);
    double e = exp(0.5 * c);
    *e_out = e;
    double r = e * ((e * A) / (2.5066282746310002 * sqrt(c)));
    return c == INFINITY ? INFINITY : r;
}
LV_INLINE double lv_i0(double x)
{
    double a = fabs(x);
    double b = a < 30.0 ? a : 30.0;
    double hh = b * b, hl = fma(b, b, -hh);
    double u = 0.25 * hh, ul = 0.25 * hl;
    double S = lv_horner(lv_i0_s, 51, u);
    double T = lv_horner(lv_i1_s, 51, u);
    double e;
    double big = lv_i0_i1_big(a, lv_i0_a, &e);
    return a < 30.0 ? S + T * ul : big;
}
LV_INLINE float lv_i0f(float x) { return (float)lv_i0((double)x); }
LV_INLINE double lv_i1(double x)
{
    double a = fabs(x);
    double b = a < 30.0 ? a : 30.0;
    double u = 0.25 * (b * b);
    double T = lv_horner(lv_i1_s, 51, u);
    double e;
    double big = lv_i0_i1_big(a, lv_i1_a, &e);
    return copysign(a < 30.0 ? 0.5 * b * T : big, x);
}
LV_INLINE float lv_i1f(float x) { return (float)lv_i1((double)x); }

/* ---- erfcx(x) = e^(x^2) erfc(x) ---------------------------------------------------
 * 0 <= x < 26: e^(x^2) erfc(x), with x^2 = h + l exactly (fma): e^h (1 + l).
 * x >= 26: the asymptotic series 1/(x sqrt pi) sum (-1)^k (2k-1)!! / (2x^2)^k
 * (10 terms, 1e-21 at 26). x < 0: 2 e^(x^2) - erfcx(-x) (no cancellation: erfcx(-x)
 * <= 1 <= 2 e^(x^2)); overflows below -26.6, as the function. */
LV_INLINE double lv_erfcx(double x)
{
    double a = fabs(x);
    double h = x * x, l = fma(x, x, -h);
    l = h == INFINITY ? 0.0 : l;
    double e2 = exp(h) * (1.0 + l);
    double mid = e2 * erfc(a);
    double b = a < 26.0 ? 26.0 : a;
    double t = 0.5 / (b * b);
    double S = 1.0 - 19.0 * t;
    S = 1.0 - 17.0 * t * S; S = 1.0 - 15.0 * t * S; S = 1.0 - 13.0 * t * S;
    S = 1.0 - 11.0 * t * S; S = 1.0 - 9.0 * t * S;  S = 1.0 - 7.0 * t * S;
    S = 1.0 - 5.0 * t * S;  S = 1.0 - 3.0 * t * S;  S = 1.0 - t * S;
    double asy = (0.5641895835477563 / b) * S;
    double pos = a < 26.0 ? mid : asy;
    return x < 0 ? 2.0 * e2 - pos : pos;
}
LV_INLINE float lv_erfcxf(float x) { return (float)lv_erfcx((double)x); }
/* d/dx erfcx = 2x erfcx(x) - 2/sqrt(pi); for x >= 26 from the series (the difference
 * would cancel): -2/sqrt(pi) t sum (-1)^k (2k+1)!! t^k, t = 1/(2x^2). */
LV_INLINE double lv_erfcx_grad(double x)
{
    double d = 2.0 * x * lv_erfcx(x) - 1.1283791670955126;
    double b = x < 26.0 ? 26.0 : x;
    double t = 0.5 / (b * b);
    double S = 1.0 - 21.0 * t;
    S = 1.0 - 19.0 * t * S; S = 1.0 - 17.0 * t * S; S = 1.0 - 15.0 * t * S;
    S = 1.0 - 13.0 * t * S; S = 1.0 - 11.0 * t * S; S = 1.0 - 9.0 * t * S;
    S = 1.0 - 7.0 * t * S;  S = 1.0 - 5.0 * t * S;  S = 1.0 - 3.0 * t * S;
    double asy = -1.1283791670955126 * t * S;
    return x < 26.0 ? d : asy;
}
LV_INLINE float lv_erfcx_gradf(float x) { return (float)lv_erfcx_grad((double)x); }

/* ---- log_ndtr(x) = log(Phi(x)), Phi(x) = erfc(-x/sqrt2) / 2 -------------------------
 * x < 0: log(erfcx(t) / 2) - x^2/2, t = -x/sqrt2 (both terms negative: no cancellation,
 * no underflow however far the tail). x >= 0: log1p(-erfc(x/sqrt2) / 2), with x/sqrt2
 * carried to double length (its rounding would cost 2 x^2 / 2 units of erfc).
 * The derivative phi/Phi is sqrt(2/pi) / erfcx(t) for x < 0 (no exp), and
 * phi(x) / (1 - erfc(x/sqrt2)/2) for x >= 0. */
LV_INLINE double lv_log_ndtr(double x)
{
    double tt = x < 0 ? -x * 0.7071067811865476 : 1.0;
    double neg = log(0.5 * lv_erfcx(tt)) - 0.5 * (x * x);
    /* erfc(p) with p = x/sqrt2 carried to double length: erfc's condition number is 2p^2,
     * so the rounding of p is added back to first order (-2/sqrt(pi) e^(-p^2) dp) */
    double p = x * 0.7071067811865476;
    double dp = fma(x, 0.7071067811865476, -p) + x * -4.8336466567264565e-17;
    dp = p < 40.0 ? dp : 0.0;
    double q = erfc(p) - dp * 1.1283791670955126 * exp(-(p * p));
    double pos = log1p(-0.5 * q);
    return x < 0 ? neg : pos;
}
LV_INLINE float lv_log_ndtrf(float x) { return (float)lv_log_ndtr((double)x); }
LV_INLINE double lv_log_ndtr_grad(double x)
{
    double tt = x < 0 ? -x * 0.7071067811865476 : 0.0;
    double neg = 0.7978845608028654 / lv_erfcx(tt);
    double pos = 0.3989422804014327 * exp(-0.5 * (x * x)) /
                 (1.0 - 0.5 * erfc(x * 0.7071067811865476));
    return x < 0 ? neg : pos;
}
LV_INLINE float lv_log_ndtr_gradf(float x) { return (float)lv_log_ndtr_grad((double)x); }

/* ---- ndtri(p) = sqrt2 erfinv(2p - 1) -----------------------------------------------
 * With q = min(p, 1 - p) (1 - p exact) and a = 1 - 2q, 1 - a^2 = 4 q (1 - q): w =
 * -log(4q(1-q)) has no cancellation, and erfinv's two pieces (lv_erfinv_aw) give
 * ndtri(q) = -sqrt2 erfinv(a) for w < 36 (q > 6e-17). Below, s = sqrt(w) up to 27.3 (the
 * smallest subnormal q): a Chebyshev fit in s (7e-12) and, for float64, one Newton
 * step on log_ndtr(y) = log q, which squares that error. ndtri(0) = -inf, ndtri(1) = inf,
 * nan outside [0, 1]. */
static const double lv_ndtri_t[23] = {
    0.9951390694527872, 0.00511696774080444, -0.004208072636447162,
    0.0031406649749535923, -0.002223988882791012, 0.0015226483434386668,
    -0.0010177853041520725, 0.0006690458424471539, -0.0004323325268153603,
    0.0002670241453244445, -0.00016723846281279145, 0.00013837455229302587,
    -8.864973822628026e-05, -3.5119847976946955e-05, 3.130856637295424e-05,
    0.00013091959850891846, -9.419327955668731e-05, -0.00010831196192255474,
    8.100622026743572e-05, 6.357869048179963e-05, -4.699509127675402e-05,
    -1.5048989552861308e-05, 1.148738710137531e-05
};
LV_INLINE double lv_ndtri_q(double p, int newton)
{
    double q = p < 0.5 ? p : 1.0 - p;
    q = q > 0.0 ? q : 0.5;               /* 0, 1, nan and outside [0, 1]: replaced below */
    double a = 1.0 - 2.0 * q;
    double w = -log(4.0 * q * (1.0 - q));
    double y = -1.4142135623730951 * lv_erfinv_aw(a, w);
    double s = sqrt(w);
    double u = (s - 16.65) * (1.0 / 10.75);
    double T = lv_horner(lv_ndtri_t, 23, u);
    double z0 = -1.4142135623730951 * (T * s);
    double z1 = newton ? z0 - (lv_log_ndtr(z0) - log(q)) / lv_log_ndtr_grad(z0) : z0;
    double yq = w < 36.0 ? y : z1;
    double r = p < 0.5 ? yq : -yq;
    r = p == 0.0 ? -INFINITY : (p == 1.0 ? INFINITY : r);
    return p >= 0.0 && p <= 1.0 ? r : NAN;
}
LV_INLINE double lv_ndtri(double p) { return lv_ndtri_q(p, 1); }
/* float32: the tail's fit alone (7e-12) is far below float's rounding; the Newton step
 * (log_ndtr and its derivative: erfcx, erfc, exp, log, for every lane) is left out. */
LV_INLINE float lv_ndtrif(float x) { return (float)lv_ndtri_q((double)x, 0); }

#endif /* LUCID_SPECIAL_H */
