#!/usr/bin/env python
"""Coefficients of the special functions in lucid/_core/src/lucid_special.h (prints C).

  lgamma   Taylor coefficients of lgamma(2 + z): (1 - gamma) and (-1)^k (zeta(k) - 1) / k
  digamma  psi(x) / (x - x0) on [1, 2] (x0 the positive root of psi), a Chebyshev fit
           (mpmath.chebyfit) converted to a polynomial in (x - 1.5)
  ndtri    the far tail of erfinv as a function of s = sqrt(w), w = -log(4 q (1 - q)),
           s in [5.9, 27.4] (q down to the smallest subnormal), a Chebyshev fit in s
  i0, i1   power-series and asymptotic-series coefficients (exact rationals, rounded)
All at 40 digits. Usage: python tools/fit_special.py
"""
import mpmath as mp

mp.mp.dps = 40


def c_list(name, cs, per=3):
    s = [repr(float(c)) for c in cs]
    lines = [", ".join(s[i:i + per]) for i in range(0, len(s), per)]
    return f"static const double {name}[{len(cs)}] = {{\n    " + ",\n    ".join(lines) + "\n};"


def taylor_lgamma2(deg=30):
    cs = [mp.mpf(0), 1 - mp.euler]
    cs += [(-1) ** k * (mp.zeta(k) - 1) / k for k in range(2, deg + 1)]
    return cs


def shift_poly(cs, c):
    """coefficients of p(t + c) in t, where p(x) = sum cs[k] x^k"""
    n = len(cs)
    out = [mp.mpf(0)] * n
    for k in range(n):
        for j in range(k + 1):
            out[j] += cs[k] * mp.binomial(k, j) * c ** (k - j)
    return out


def digamma_fit(deg=24):
    x0 = mp.findroot(mp.digamma, 1.46)
    f = lambda x: mp.digamma(x) / (x - x0) if abs(x - x0) > mp.mpf(10) ** -30 else mp.polygamma(1, x0)
    poly, err = mp.chebyfit(f, [0.99, 2.01], deg + 1, error=True)
    cs = list(reversed(poly))             # ascending powers of x
    return x0, shift_poly(cs, mp.mpf(1.5)), err


def ndtri_tail(deg=22, lo=5.9, hi=27.4):
    def y(s):
        w = s * s
        # 4 q (1 - q) = e^-w  ->  q = (1 - sqrt(1 - e^-w)) / 2, erfinv(1 - 2q) = -ndtri(q)/sqrt2
        e = mp.exp(-w)
        q = e / (2 * (1 + mp.sqrt(1 - e)))
        return -mp.sqrt(2) * mp.erfinv(1 - 2 * q) / mp.sqrt(2) if False else mp.erfinv(1 - 2 * q)
    mp.mp.dps = 400          # 1 - 2q near 1 - 1e-323
    c = (lo + hi) / 2
    h = (hi - lo) / 2
    poly, err = mp.chebyfit(lambda u: y(c + h * u) / (c + h * u), [-1, 1], deg + 1, error=True)
    mp.mp.dps = 40
    return c, h, list(reversed(poly)), err


if __name__ == "__main__":
    cs = taylor_lgamma2()
    print("/* lgamma(2 + z) = sum c[k] z^k, k >= 1 */")
    print(c_list("lv_lgamma2_c", cs[1:]))
    x0, dc, err = digamma_fit()
    print(f"/* digamma: x0 = {x0}, fit error {mp.nstr(err, 3)} */")
    print("x0 hi, lo:", repr(float(x0)), repr(float(x0 - mp.mpf(float(x0)))))
    print(c_list("lv_digamma_c", dc))
    c, h, tc, err = ndtri_tail()
    print(f"/* ndtri tail: s = {c} + {h} u, erfinv / s = sum t[k] u^k, error {mp.nstr(err, 3)} */")
    print(c_list("lv_ndtri_t", tc))
