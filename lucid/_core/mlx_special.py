"""The gpu kernels of lucid's special functions, composed from MLX primitives (MLX has no
lgamma, digamma, polygamma, Bessel I0/I1, erfcx, log_ndtr or ndtri of its own).

Each function takes ``mx`` (mlx.core) and MLX arrays, so that importing this module
never imports MLX. The methods are the textbook ones, chosen to stay accurate in
float32 (the gpu's precision) over the whole real line:

- lgamma, digamma, polygamma: the argument is shifted up by the recurrence to where the
  asymptotic (Stirling / Euler-Maclaurin) series converges, and x < 1/2 goes through the
  reflection formula, with sin(pi x) and cot(pi x) reduced exactly first;
- i0, i1: Abramowitz & Stegun 9.8.1-9.8.4 polynomials (relative error < 2e-7);
- erfcx: the Chebyshev-fitted form erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2)
  (fractional error < 1.2e-7), whose exp(-z^2) factor cancels exactly;
- log_ndtr from erfcx (no underflow in the lower tail); ndtri from erfinv in the
  middle and Acklam's rational form in the tails.

Accuracy against lucid's CPU kernels: tests/test_gpu.py (GPU_TOL).
"""
import math

_PI = math.pi
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
_SQRT2 = math.sqrt(2.0)
_INV_SQRT2 = 1 / math.sqrt(2.0)
_SHIFT = 12          # recurrence steps before the asymptotic series (it needs x >= ~10)


def _sinpi(mx, x):
    """sin(pi x), with x reduced mod 2 exactly first (sin(pi * x) loses it for large x)."""
    r = x - 2 * mx.round(x * 0.5)            # exact: r in [-1, 1]
    return mx.sin(_PI * r)


def _cotpi(mx, x):
    """cot(pi x), with x reduced mod 1 exactly first."""
    r = x - mx.round(x)                      # exact: r in [-1/2, 1/2]
    return mx.cos(_PI * r) / mx.sin(_PI * r)


def _is_nonpositive_int(mx, x):
    return (x <= 0) & (x == mx.floor(x))


def sinc(mx, x):
    """sin(pi x) / (pi x), 1 at 0."""
    safe = mx.where(x == 0, mx.ones_like(x), x)
    r = _sinpi(mx, safe) / (_PI * safe)
    # exactly 0 at the nonzero integers and at +-inf, as lucid's cpu kernel
    r = mx.where(mx.isinf(x) | (x == mx.floor(x)), mx.zeros_like(x), r)
    return mx.where(x == 0, mx.ones_like(x), r)


def _lgamma_pos(mx, x):
    """log Gamma(x) for x > 0: shift up to z = x + _SHIFT, then Stirling's series."""
    prod = mx.ones_like(x)
    for k in range(_SHIFT):
        prod = prod * (x + k)
    z = x + _SHIFT
    iz = 1 / z
    iz2 = iz * iz
    series = iz * (1 / 12 + iz2 * (-1 / 360 + iz2 * (1 / 1260 + iz2 * (-1 / 1680))))
    return (z - 0.5) * mx.log(z) - z + _HALF_LOG_2PI + series - mx.log(prod)


def _zeta_int(k):
    """Riemann zeta(k) for an integer k >= 2, in double (Euler-Maclaurin at N = 40)."""
    n = 40
    return (sum(j ** -k for j in range(1, n)) + n ** (1 - k) / (k - 1) + 0.5 * n ** -k
            + k * n ** (-k - 1) / 12 - k * (k + 1) * (k + 2) * n ** (-k - 3) / 720)


# lgamma(1 + e) = -gamma e + sum_k (-1)^k zeta(k) / k e^k, |e| <= 1/2: near the zeros of
# lgamma (1 and 2) this keeps float32's relative accuracy, which the shifted Stirling
# series (a difference of two terms near 20) cannot.
_LGAMMA1 = (0.0, -0.5772156649015329) + tuple((-1) ** k * _zeta_int(k) / k for k in range(2, 26))


def lgamma(mx, x):
    """log |Gamma(x)|; inf at 0 and at the negative integers, inf at +-inf."""
    neg = x < 0.5
    xp = mx.where(neg, 1 - x, x)             # >= 1/2 on both branches
    big = xp > 1e7                           # Stirling without the shift (prod would overflow)
    lp = mx.where(big, xp * (mx.log(xp) - 1), _lgamma_pos(mx, mx.where(big, 1.0, xp)))
    e = mx.where(xp < 1.5, xp - 1, xp - 2)   # lgamma(2 + e) = log1p(e) + lgamma(1 + e)
    near = _horner(mx, e, _LGAMMA1) + mx.where(xp < 1.5, mx.zeros_like(e), mx.log1p(e))
    lp = mx.where(xp < 2.5, near, lp)
    refl = math.log(_PI) - mx.log(mx.abs(_sinpi(mx, x))) - lp
    r = mx.where(neg, refl, lp)
    r = mx.where(_is_nonpositive_int(mx, x) | mx.isinf(x), mx.full(x.shape, math.inf, x.dtype), r)
    return r


_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6)   # B2 .. B14


def _psi_pos(mx, x):
    """digamma(x) for x >= 1/2: shift up, then the asymptotic series."""
    acc = mx.zeros_like(x)
    for k in range(_SHIFT):
        acc = acc + 1 / (x + k)
    z = x + _SHIFT
    iz2 = 1 / (z * z)
    series = mx.zeros_like(x)
    for j in reversed(range(1, len(_BERNOULLI) + 1)):
        series = (series + _BERNOULLI[j - 1] / (2 * j)) * iz2
    return mx.log(z) - 0.5 / z - series - acc


def _zeta_pos(mx, s, x):
    """Hurwitz zeta(s, x) for an integer s >= 2 and x >= 1/2 (Euler-Maclaurin)."""
    acc = mx.zeros_like(x)
    for k in range(_SHIFT):
        acc = acc + mx.power(x + k, -s)
    z = x + _SHIFT
    zs = mx.power(z, -s)
    tail = z * zs / (s - 1) + 0.5 * zs
    # sum_j B_2j / (2j)! * s (s+1) ... (s+2j-2) * z^(-s-2j+1)
    term = zs / z                              # z^(-s-1)
    rising = s                                 # s (s+1) ... (s+2j-2), j = 1
    fact = 2.0                                 # (2j)!
    for j in range(1, len(_BERNOULLI) + 1):
        tail = tail + (_BERNOULLI[j - 1] * rising / fact) * term
        rising *= (s + 2 * j - 1) * (s + 2 * j)
        fact *= (2 * j + 1) * (2 * j + 2)
        term = term / (z * z)
    return acc + tail


def _cot_derivative(n):
    """Coefficients (lowest first) of P_n with d^n/dy^n cot(y) = P_n(cot y):
    P_0 = c, P_{k+1} = -(1 + c^2) P_k'(c)."""
    p = [0.0, 1.0]
    for _ in range(n):
        d = [k * p[k] for k in range(1, len(p))]          # P'
        q = [0.0] * (len(d) + 2)
        for k, a in enumerate(d):
            q[k] -= a
            q[k + 2] -= a
        p = q
    return p


def polygamma(mx, n, x):
    """The n-th derivative of digamma (n >= 0). x < 1/2 by the reflection formula
    psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi^(n+1) P_n(cot(pi x)); nan at the poles
    (0 and the negative integers) for digamma, as torch, except psi(+-0) = -+inf."""
    neg = x < 0.5
    xp = mx.where(neg, 1 - x, x)
    if n == 0:
        direct = _psi_pos(mx, xp)
    else:
        direct = (-1.0) ** (n + 1) * math.factorial(n) * _zeta_pos(mx, n + 1, xp)
    c = _cotpi(mx, x)
    poly = mx.zeros_like(x)
    for a in reversed(_cot_derivative(n)):
        poly = poly * c + a
    refl = (-1.0) ** n * direct - _PI ** (n + 1) * poly
    r = mx.where(neg, refl, direct)
    pole = _is_nonpositive_int(mx, x)
    if n == 0:
        zero = mx.where(1 / x < 0, mx.full(x.shape, math.inf, x.dtype),
                        mx.full(x.shape, -math.inf, x.dtype))
        r = mx.where(pole, mx.where(x == 0, zero, mx.full(x.shape, math.nan, x.dtype)), r)
        return mx.where(x == math.inf, mx.full(x.shape, math.inf, x.dtype), r)
    odd = n % 2 == 1          # psi^(n) at a pole: +inf for odd n, nan for even n (torch)
    r = mx.where(pole, mx.full(x.shape, math.inf if odd else math.nan, x.dtype), r)
    return mx.where(x == math.inf, mx.zeros_like(x), r)


def digamma(mx, x):
    return polygamma(mx, 0, x)


def _horner(mx, t, coeffs):
    r = mx.zeros_like(t)
    for a in reversed(coeffs):
        r = r * t + a
    return r


_I0_SMALL = (1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.0360768, 0.0045813)
_I0_LARGE = (0.39894228, 0.01328592, 0.00225319, -0.00157565, 0.00916281, -0.02057706,
             0.02635537, -0.01647633, 0.00392377)
_I1_SMALL = (0.5, 0.87890594, 0.51498869, 0.15084934, 0.02658733, 0.00301532, 0.00032411)
_I1_LARGE = (0.39894228, -0.03988024, -0.00362018, 0.00163801, -0.01031555, 0.02282967,
             -0.02895312, 0.01787654, -0.00420059)


def _bessel_i(mx, x, small, large, odd, scaled):
    """I0 or I1 (odd) of x, times exp(-|x|) when ``scaled``."""
    ax = mx.abs(x)
    t2 = (x / 3.75) * (x / 3.75)
    lo = _horner(mx, t2, small)
    lo = x * lo if odd else lo
    if scaled:
        lo = lo * mx.exp(-ax)
    axl = mx.maximum(ax, 3.75)
    hi = _horner(mx, 3.75 / axl, large) / mx.sqrt(axl)
    if not scaled:
        half = mx.exp(0.5 * axl)             # e^|x| = half * half: finite up to |x| ~ 2 * 88
        hi = half * hi * half
    if not scaled and not odd:      # i0(+-inf) = inf, as lucid's cpu kernel (i1: nan)
        hi = mx.where(ax == math.inf, mx.full(x.shape, math.inf, x.dtype), hi)
    hi = mx.where(x < 0, -hi, hi) if odd else hi
    return mx.where(ax < 3.75, lo, hi)


def i0(mx, x):
    """Modified Bessel function of the first kind, order 0."""
    return _bessel_i(mx, x, _I0_SMALL, _I0_LARGE, False, False)


def i1(mx, x):
    """Modified Bessel function of the first kind, order 1."""
    return _bessel_i(mx, x, _I1_SMALL, _I1_LARGE, True, False)


def i0e(mx, x):
    """exp(-|x|) i0(x)."""
    return _bessel_i(mx, x, _I0_SMALL, _I0_LARGE, False, True)


def i1e(mx, x):
    """exp(-|x|) i1(x)."""
    return _bessel_i(mx, x, _I1_SMALL, _I1_LARGE, True, True)


def entr(mx, x):
    """-x log x; 0 at 0, -inf below 0, nan at nan."""
    r = -x * mx.log(mx.where(x > 0, x, mx.ones_like(x)))
    r = mx.where(x < 0, mx.full(x.shape, -math.inf, x.dtype), r)
    return mx.where(mx.isnan(x), x, r)


_ERFC_P = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
           -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def _erfcx_pos(mx, z):
    """exp(z^2) erfc(z) for z >= 0."""
    t = 1 / (1 + 0.5 * z)
    return t * mx.exp(_horner(mx, t, _ERFC_P))


def erfcx(mx, x):
    """exp(x^2) erfc(x), without overflow for large x; inf at -inf."""
    pos = _erfcx_pos(mx, mx.abs(x))
    return mx.where(x < 0, 2 * mx.exp(x * x) - pos, pos)


def xlogy(mx, x, y):
    """x log y, 0 where x == 0 unless y is nan (either may be a Python number)."""
    dt = (x if isinstance(x, mx.array) else y).dtype
    x, y = mx.array(x, dtype=dt), mx.array(y, dtype=dt)
    return mx.where((x == 0) & ~mx.isnan(y), mx.zeros_like(x * y), x * mx.log(y))


def xlog1py(mx, x, y):
    """x log1p(y), 0 where x == 0 unless y is nan."""
    return mx.where((x == 0) & ~mx.isnan(y), mx.zeros_like(x * y), x * mx.log1p(y))


def ndtr(mx, x):
    """The standard normal CDF, erfc(-x / sqrt 2) / 2, from erfcx (accurate in both tails)."""
    z = mx.abs(x) * _INV_SQRT2
    tail = 0.5 * mx.exp(-z * z) * _erfcx_pos(mx, z)
    return mx.where(x < 0, tail, 1 - tail)


def log_ndtr(mx, x):
    """log of the standard normal CDF: log(erfcx(z) / 2) - z^2 in the lower tail
    (z = -x / sqrt 2), log1p(-erfc(x / sqrt 2) / 2) above 0."""
    z = mx.abs(x) * _INV_SQRT2
    e = _erfcx_pos(mx, z)
    lower = mx.log(0.5 * e) - z * z
    upper = mx.log1p(-0.5 * mx.exp(-z * z) * e)
    return mx.where(x < 0, lower, upper)


# Acklam's rational approximation of the normal quantile in the tails (relative error
# < 1.2e-9), where 2p - 1 has lost p's digits and erfinv cannot recover them.
_TAIL_NUM = (2.938163982698783, 4.374664141464968, -2.549732539343734, -2.400758277161838,
             -0.3223964580411365, -0.007784894002430293)
_TAIL_DEN = (1.0, 3.754408661907416, 2.445134137142996, 0.3224671290700398,
             0.007784695709041462)


def _ndtri_tail(mx, q):
    """The quantile of q <= 0.02425 (q > 0)."""
    u = mx.sqrt(-2 * mx.log(q))
    return _horner(mx, u, _TAIL_NUM) / _horner(mx, u, _TAIL_DEN)


def ndtri(mx, p):
    """The inverse of the standard normal CDF: sqrt(2) erfinv(2p - 1) in the middle,
    Acklam's tail form below 0.02425 and above 1 - 0.02425; -inf at 0, inf at 1, nan
    outside [0, 1]."""
    lo, hi = p < 0.02425, p > 1 - 0.02425
    mid = _SQRT2 * mx.erfinv(2 * mx.where(lo | hi, 0.5, p) - 1)
    tail_p = mx.where(lo, p, mx.where(hi, 1 - p, 0.5))
    tail = _ndtri_tail(mx, mx.maximum(tail_p, mx.array(1e-300, p.dtype) if p.dtype == mx.float64
                                      else mx.array(1e-38, p.dtype)))
    r = mx.where(lo, tail, mx.where(hi, -tail, mid))
    r = mx.where(p == 0, mx.full(p.shape, -math.inf, p.dtype), r)
    r = mx.where(p == 1, mx.full(p.shape, math.inf, p.dtype), r)
    return mx.where((p < 0) | (p > 1) | mx.isnan(p), mx.full(p.shape, math.nan, p.dtype), r)


def _in_float32(fn):
    """``fn`` with float16 / bfloat16 arrays computed in float32 and rounded once to their
    dtype, as lucid's cpu kernels: in 16 bits the series above overflow or lose their
    digits (lgamma's product of 12 shifted factors passes float16's 65504 at x = 2.7)."""
    def run(mx, *args):
        half = (mx.float16, mx.bfloat16)
        dt = next((a.dtype for a in args if isinstance(a, mx.array) and a.dtype in half), None)
        if dt is None:
            return fn(mx, *args)
        args = tuple(a.astype(mx.float32) if isinstance(a, mx.array) and a.dtype in half else a
                     for a in args)
        return fn(mx, *args).astype(dt)
    run.__name__ = run.__qualname__ = fn.__name__
    run.__doc__ = fn.__doc__
    return run


for _name in ("sinc", "lgamma", "polygamma", "digamma", "i0", "i1", "i0e", "i1e", "entr",
              "erfcx", "xlogy", "xlog1py", "ndtr", "log_ndtr", "ndtri"):
    globals()[_name] = _in_float32(globals()[_name])
del _name
