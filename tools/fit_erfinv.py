#!/usr/bin/env python
"""Fit the erfinv approximations of lucid/_core/src/lucid_special.h (prints C tables).

With a = |x| and w = -log(1 - a^2), erfinv is approximated piecewise:
  * centre, w in [0, W1]:  erfinv(x) = a * P(w),      P fitted to erfinv(a)/a;
  * tail, w >= W1:         erfinv(x) = P(s - c),      s = sqrt(w), P fitted to erfinv(a);
each piece a polynomial of its own degree (the kernel evaluates both pieces and selects).


Fit: weighted least squares in relative error at Chebyshev points, Lawson
iterations towards minimax, all in mpmath at 40 digits.  Then the coefficients are
rounded to double one at a time, lowest first, refitting the higher ones after each
rounding (the constant term is kept as hi + lo, so its rounding does not add to the result's).

Usage: python tools/fit_erfinv.py [float64|float32]   (a few minutes per dtype)
"""
import sys
import mpmath as mp
import numpy as np

mp.mp.dps = 40
SQPI2 = mp.sqrt(mp.pi) / 2

def a_of_w(w):
    return mp.sqrt(-mp.expm1(-w))

def p_w(w):          # erfinv(a) / a as a function of w
    if w == 0:
        return SQPI2
    a = a_of_w(w)
    return mp.erfinv(a) / a

def y_s(s):          # erfinv(a) as a function of s = sqrt(w)
    return mp.erfinv(a_of_w(s * s))

# (kind, lo, hi, centre): fit ranges overlap the switch points a little.
# float64: s up to sqrt(-log(2^-52)) = 6.0036 (a = 1 - 2^-53); float32: up to 3.993.
F64 = dict(rnd="dd", switch=6.25, intervals=[("w", 0.0, 6.27, 3.125, 24), ("s", 2.495, 6.01, 4.25, 26)])
F32 = dict(rnd="float", switch=4.0, intervals=[("w", 0.0, 4.02, 0.0, 9), ("s", 1.995, 3.995, 3.0, 8)])

def _round(v, rnd):
    if rnd == "float":
        return mp.mpf(float(np.float32(float(v))))
    return mp.mpf(float(v))

def fit(kind, lo, hi, c, D, rnd, iters=25):
    f = p_w if kind == "w" else y_s
    lo, hi, c = mp.mpf(lo), mp.mpf(hi), mp.mpf(c)
    M = 8 * (D + 1)
    xs = [(lo + hi) / 2 - (hi - lo) / 2 * mp.cos(mp.pi * (k + mp.mpf(1) / 2) / M) for k in range(M)]
    ts = [x - c for x in xs]
    fs = [f(x) for x in xs]
    wts = [mp.mpf(1)] * M

    def solve(fixed):
        # least squares for coefficients k >= len(fixed), the lower ones fixed
        k0 = len(fixed)
        A = mp.matrix(M, D + 1 - k0)
        b = mp.matrix(M, 1)
        for i in range(M):
            sw = mp.sqrt(wts[i]) / fs[i]
            for k in range(k0, D + 1):
                A[i, k - k0] = ts[i] ** k * sw
            b[i] = (fs[i] - mp.fsum(fixed[k] * ts[i] ** k for k in range(k0))) * sw
        return list(fixed) + list(mp.qr_solve(A, b)[0])

    def errs(co):
        return [abs(mp.polyval(co[::-1], ts[i]) - fs[i]) / fs[i] for i in range(M)]

    co = None
    for _ in range(iters):                       # Lawson: towards minimax relative error
        co = solve([])
        e = errs(co)
        tot = mp.fsum(wts[i] * e[i] for i in range(M))
        wts = [wts[i] * e[i] / tot for i in range(M)]
    fixed = []
    for k in range(D + 1):                       # round one at a time, refit the rest
        co = solve(fixed)
        v = co[k]
        r = _round(v, rnd)
        if k == 0:                  # the constant term as hi + lo
            r += _round(v - r, rnd)
        fixed.append(r)
    return fixed

def check(kind, lo, hi, c, co, n=2000):
    f = p_w if kind == "w" else y_s
    worst = 0
    for i in range(n + 1):
        x = mp.mpf(lo) + (mp.mpf(hi) - mp.mpf(lo)) * i / n
        worst = max(worst, abs(mp.polyval(co[::-1], x - mp.mpf(c)) / f(x) - 1))
    return float(worst)

def main():
    dt = sys.argv[1] if len(sys.argv) > 1 else "float64"
    cfg = F64 if dt == "float64" else F32
    from multiprocessing import Pool
    with Pool(2) as pool:
        cos = pool.starmap(fit, [(k, lo, hi, c, D, cfg["rnd"]) for k, lo, hi, c, D in cfg["intervals"]])
        errs = pool.starmap(check, [iv[:4] + (co,) for iv, co in zip(cfg["intervals"], cos)])
    print(f"/* {dt}: switch at w = {cfg['switch']} */")
    for (k, lo, hi, c, D), co, e in zip(cfg["intervals"], cos, errs):
        print(f"/* {k} in [{lo}, {hi}], centre {c}, degree {D}: max relative error {e:.3g} "
              "(coefficients as stored, exact arithmetic) */")
        hi0 = float(co[0])
        lo0 = float(co[0] - mp.mpf(hi0))
        if cfg["rnd"] == "float":
            hi0 = float(np.float32(float(co[0])))
            lo0 = float(np.float32(float(co[0] - mp.mpf(hi0))))
        items = [hi0, lo0] + [float(v) for v in co[1:]]
        fmt = (lambda v: repr(float(np.float32(v))) + "f") if cfg["rnd"] == "float" else repr
        print("{" + ", ".join(fmt(v) for v in items) + "},")

if __name__ == "__main__":
    main()
