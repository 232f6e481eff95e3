#!/usr/bin/env python
"""Measure the max ULP error of lucid's binary float functions against mpmath.

The binary counterpart of tools/accuracy.py (whose rounding, error and worker
functions it imports): for each of ``lucid.pow``, ``atan2``, ``hypot``,
``maximum``, ``minimum``, ``logaddexp`` and ``xlogy`` and each dtype (float32, float64),
called as ``lucid.<op>(lucid.tensor(a), lucid.tensor(b))``, this script

  * samples ``--n`` pairs (a, b) spanning the function's domain in the dtype
    (``SAMPLERS`` below): uniform in value over a core region, magnitudes
    uniform in exponent, of both signs, over the whole finite range, and
    op-specific regions (pow: positive bases with exponents chosen so that the
    results cross the overflow and underflow thresholds, bases near 1, negative
    bases with integer exponents; atan2 / hypot: ratios from 2^-(p+40) to
    2^(p+40), operands near overflow and subnormal; logaddexp: pairs near the
    curve e^a + e^b = 1 where the result is near 0, a ~ b; xlogy: b near 1, where
    log(b) is near 0, and b across the whole positive range), plus the cross
    product of the special points (+-0, +-smallest subnormal, +-smallest
    normal, +-1, +-2, +-0.5, +-1.5, +-3, +-largest finite, +-inf, nan);
  * evaluates the exact value with mpmath at ``--prec`` bits (mpmath.power,
    atan2, sqrt(a^2 + b^2), max / min, m + log1p(e^-|a-b|) with the precision
    raised by the cancellation near logaddexp's zero, a log(b)) and rounds it correctly
    to the dtype (tools/accuracy.py's ``_round_mpf``);
  * scores ``|lucid - exact| / ulp(exact rounded to the dtype)``
    (tools/accuracy.py's ``ulp_errors``); a nan / inf mismatch, or a zero of
    the wrong sign, is an infinite error.

Where mpmath has no real value or no signed zero (a negative base with a
non-integer exponent, 0 ** negative, an operand that is +-0 for pow, maximum and
minimum, non-finite operands) the exact value is the C99 Annex F value from
NumPy on equal-shape arrays of the dtype (np.power, np.hypot, np.logaddexp),
and for maximum / minimum IEEE 754-2019's maximum / minimum (nan if either
operand is nan, -0 < +0).  atan2 with a +-0 or +-inf operand is Annex F's
multiple of pi/4 (quadrant from glibc's atan2 through math.atan2) in mpmath.

Usage:
    python tools/accuracy_binary.py --jobs 2      # 1e6 pairs per (op, dtype), writes docs/accuracy_binary.md
    python tools/accuracy_binary.py --n 20000 --no-write
    python tools/accuracy_binary.py --ops pow,hypot --dtypes float32
"""
import argparse
import datetime
import itertools
import json
import math
import multiprocessing as mproc
import os
import sys
import time
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

# tools/accuracy.py (importing it also puts this checkout's in-place build first on sys.path)
from accuracy import (FMT, INF, ROOT, _W, _import_lucid, _logspaced, _round_mpf,
                      _ulp_exp, _uniform, _worker_init, fmt_ulp, fmt_x, ulp_errors)

OPS = ["atan2", "hypot", "logaddexp", "maximum", "minimum", "pow", "xlogy"]


# ---------------------------------------------------------------------------
# Sampling.  Every sampler returns float64 arrays (a, b) of length k; they are
# cast to the dtype (and clipped to its finite range) afterwards.
# ---------------------------------------------------------------------------
def _lim(dtype):
    t = FMT[dtype]["np"]
    fi = np.finfo(t)
    return float(np.nextafter(t(0), t(1))), float(fi.tiny), float(fi.max)


def _signs(rng, k):
    return np.where(rng.random(k) < 0.5, -1.0, 1.0)


def _logmag(rng, k, lo, hi):
    """Positive magnitudes uniform in log2 over [lo, hi]."""
    return _logspaced(rng, lo, hi, k, lo)


def _logboth(rng, k, dtype):
    """Both signs, magnitudes uniform in exponent from the smallest subnormal to the largest finite."""
    sub, _, mx = _lim(dtype)
    return rng.permutation(_logspaced(rng, -mx, mx, k, sub))


def _split(k, weights):
    tot = sum(weights)
    c = [int(k * w / tot) for w in weights]
    c[0] += k - sum(c)
    return c


def _mix(rng, k, parts):
    """parts: [(weight, f(rng, kk) -> (a, b))]."""
    out_a, out_b = [], []
    for kk, (_, f) in zip(_split(k, [w for w, _ in parts]), parts):
        if kk:
            a, b = f(rng, kk)
            out_a.append(np.broadcast_to(np.asarray(a, np.float64), (kk,)))
            out_b.append(np.broadcast_to(np.asarray(b, np.float64), (kk,)))
    return np.concatenate(out_a), np.concatenate(out_b)


def _targets(rng, k, dtype, focus=False):
    """log2 of the wanted pow results: the whole range past both thresholds, or (focus)
    within +-1 of a threshold: overflow (emax + 1), smallest normal (emin), the
    smallest subnormal (emin - p + 1) and the underflow to 0 (emin - p)."""
    f = FMT[dtype]
    lo, hi = f["emin"] - f["p"] + 1 - 8, f["emax"] + 1 + 8
    if not focus:
        return rng.uniform(lo, hi, k)
    centres = np.array([f["emax"] + 1, f["emin"], f["emin"] - f["p"] + 1, f["emin"] - f["p"]], float)
    return centres[rng.integers(0, len(centres), k)] + rng.uniform(-1, 1, k)


def _pow_exponent_for(a, target):
    with np.errstate(all="ignore"):
        b = target / np.log2(np.abs(a))
    return np.nan_to_num(b, nan=0.0, posinf=1e308, neginf=-1e308)


def sample_pow(rng, dtype, k):
    sub, _, mx = _lim(dtype)
    p = FMT[dtype]["p"]

    def pos_range(r, kk, focus=False):
        a = _logmag(r, kk, sub, mx)
        return a, _pow_exponent_for(a, _targets(r, kk, dtype, focus))

    def near_one(r, kk):
        a = 1.0 + _signs(r, kk) * np.exp2(-r.uniform(1, p + 2, kk))
        return a, _pow_exponent_for(a, _targets(r, kk, dtype))

    def neg_int(r, kk):
        k1 = kk // 2
        a1 = -_logmag(r, k1, sub, mx)
        b1 = np.round(_pow_exponent_for(a1, _targets(r, k1, dtype)))
        a2 = r.uniform(-10.0, 0.0, kk - k1)
        b2 = r.integers(-80, 81, kk - k1).astype(float)
        return np.concatenate([a1, a2]), np.concatenate([b1, b2])

    return _mix(rng, k, [
        (0.25, lambda r, kk: (r.uniform(0, 10, kk), r.uniform(-10, 10, kk))),
        (0.25, pos_range),
        (0.10, lambda r, kk: pos_range(r, kk, focus=True)),
        (0.10, near_one),
        (0.10, lambda r, kk: (_logmag(r, kk, sub, mx), _logboth(r, kk, dtype))),
        (0.15, neg_int),
        (0.05, lambda r, kk: (r.uniform(-10, 0, kk), r.uniform(-10, 10, kk))),   # mostly nan
    ])


def _ratio_pairs(rng, k, dtype, span):
    b = _logboth(rng, k, dtype)
    with np.errstate(over="ignore"):
        a = b * _signs(rng, k) * np.exp2(rng.uniform(-span, span, k))
    return a, b


def sample_atan2(rng, dtype, k):
    mx = _lim(dtype)[2]
    p = FMT[dtype]["p"]
    return _mix(rng, k, [
        (0.25, lambda r, kk: (r.uniform(-10, 10, kk), r.uniform(-10, 10, kk))),
        (0.35, lambda r, kk: (_logboth(r, kk, dtype), _logboth(r, kk, dtype))),
        (0.20, lambda r, kk: _ratio_pairs(r, kk, dtype, p + 40)),
        (0.10, lambda r, kk: (_uniform(r, -mx, mx, kk), _uniform(r, -mx, mx, kk))),
        (0.10, lambda r, kk: _ratio_pairs(r, kk, dtype, 2.0 ** -10)),   # near the diagonals
    ])


def sample_hypot(rng, dtype, k):
    sub, tiny, mx = _lim(dtype)
    p = FMT[dtype]["p"]
    big = lambda r, kk: _signs(r, kk) * r.uniform(mx / 4, mx, kk)
    small = lambda r, kk: _signs(r, kk) * _logmag(r, kk, sub, 2 * tiny)
    return _mix(rng, k, [
        (0.25, lambda r, kk: (r.uniform(-10, 10, kk), r.uniform(-10, 10, kk))),
        (0.35, lambda r, kk: (_logboth(r, kk, dtype), _logboth(r, kk, dtype))),
        (0.15, lambda r, kk: _ratio_pairs(r, kk, dtype, p + 10)),
        (0.10, lambda r, kk: (big(r, kk), big(r, kk))),        # overflow threshold
        (0.10, lambda r, kk: (small(r, kk), small(r, kk))),    # subnormal
        (0.05, lambda r, kk: (_uniform(r, -mx, mx, kk), _uniform(r, -mx, mx, kk))),
    ])


def sample_minmax(rng, dtype, k):
    t = FMT[dtype]["np"]

    def ties(r, kk):
        b = _logboth(r, kk, dtype).astype(t)
        c = r.integers(0, 4, kk)
        with np.errstate(over="ignore"):
            a = np.select([c == 0, c == 1, c == 2], [b, np.nextafter(b, t(INF)),
                                                    np.nextafter(b, t(-INF))], -b)
        return a.astype(np.float64), b.astype(np.float64)

    def with_nan(r, kk):
        a, b = _logboth(r, kk, dtype), _logboth(r, kk, dtype)
        c = r.integers(0, 3, kk)
        a[c != 1] = np.nan
        b[c != 0] = np.nan
        return a, b

    return _mix(rng, k, [
        (0.30, lambda r, kk: (r.uniform(-10, 10, kk), r.uniform(-10, 10, kk))),
        (0.40, lambda r, kk: (_logboth(r, kk, dtype), _logboth(r, kk, dtype))),
        (0.20, ties),
        (0.10, with_nan),
    ])


def sample_logaddexp(rng, dtype, k):
    t = FMT[dtype]["np"]
    x = 110.0 if dtype == "float32" else 760.0    # past e^x's overflow and underflow

    def near_zero(r, kk):
        # a < 0, b = log(1 - e^a) (e^a + e^b = 1), then moved by 0 to 3 ulps of the dtype
        k1 = kk // 2
        a = np.concatenate([-r.uniform(1e-3, 40, k1), -np.exp2(r.uniform(-30, np.log2(40), kk - k1))])
        a = a.astype(t)
        b = np.log(-np.expm1(a.astype(np.float64))).astype(t)
        for _ in range(3):
            step = r.integers(-1, 2, kk)
            b = np.where(step > 0, np.nextafter(b, t(INF)), np.where(step < 0, np.nextafter(b, t(-INF)), b))
        swap = r.random(kk) < 0.5
        a, b = np.where(swap, b, a), np.where(swap, a, b)
        return a.astype(np.float64), b.astype(np.float64)

    def near_equal(r, kk):
        a = r.uniform(-x, x, kk)
        return a, a + _signs(r, kk) * np.exp2(r.uniform(-30, 6, kk))

    return _mix(rng, k, [
        (0.25, lambda r, kk: (r.uniform(-20, 20, kk), r.uniform(-20, 20, kk))),
        (0.20, lambda r, kk: (_logboth(r, kk, dtype), _logboth(r, kk, dtype))),
        (0.10, lambda r, kk: (r.uniform(-x, x, kk), r.uniform(-x, x, kk))),
        (0.30, near_zero),
        (0.15, near_equal),
    ])


def sample_xlogy(rng, dtype, k):
    sub, _, mx = _lim(dtype)

    def near_one(r, kk):
        return r.uniform(-10, 10, kk), 1.0 + _signs(r, kk) * np.exp2(r.uniform(-60, -1, kk))

    return _mix(rng, k, [
        (0.25, lambda r, kk: (r.uniform(-10, 10, kk), r.uniform(0, 10, kk))),
        (0.35, lambda r, kk: (_logboth(r, kk, dtype), _logmag(r, kk, sub, mx))),
        (0.25, near_one),
        (0.15, lambda r, kk: (_logboth(r, kk, dtype), _logboth(r, kk, dtype))),
    ])


SAMPLERS = dict(pow=sample_pow, atan2=sample_atan2, hypot=sample_hypot, maximum=sample_minmax,
                minimum=sample_minmax, logaddexp=sample_logaddexp, xlogy=sample_xlogy)


def special_values(dtype):
    sub, tiny, mx = _lim(dtype)
    vals = [0.0]
    for v in (sub, tiny, 0.5, 1.0, 1.5, 2.0, 3.0, mx, INF):
        vals += [v, -v]
    vals[1:1] = [-0.0]
    return vals + [math.nan]


def sample_pairs(op, dtype, n, seed):
    t = FMT[dtype]["np"]
    sp = np.array(list(itertools.product(special_values(dtype), repeat=2)))
    rng = np.random.default_rng([seed, zlib.crc32(op.encode()), FMT[dtype]["p"]])
    a, b = SAMPLERS[op](rng, dtype, max(n - len(sp), 0))
    mx = float(np.finfo(t).max)
    out = []
    for s, v in ((sp[:, 0], a), (sp[:, 1], b)):
        v = np.clip(v, -mx, mx)                 # nan stays nan
        out.append(np.concatenate([s, v]).astype(t))
    return out[0], out[1]


# ---------------------------------------------------------------------------
# References
# ---------------------------------------------------------------------------
def ieee_maximum(a, b, is_max=True):
    """IEEE 754-2019 maximum / minimum: nan if either operand is nan, -0 < +0."""
    with np.errstate(invalid="ignore"):
        r = np.where(a > b, a, b) if is_max else np.where(a < b, a, b)
        zt = (a == 0) & (b == 0)
    neg = (np.signbit(a) & np.signbit(b)) if is_max else (np.signbit(a) | np.signbit(b))
    r = np.where(zt, np.where(neg, -0.0, 0.0).astype(a.dtype), r)
    return np.where(np.isnan(a) | np.isnan(b), np.array(np.nan, a.dtype), r)


def xlogy_ref(a, b):
    """torch's xlogy in the dtype: a log(b), 0 where a == 0, nan where b is nan."""
    r = np.where(a == 0, np.zeros_like(a), a * np.log(b))
    return np.where(np.isnan(b), b, r)


REFS = dict(pow=np.power, atan2=np.arctan2, hypot=np.hypot, logaddexp=np.logaddexp,
            maximum=ieee_maximum, minimum=lambda a, b: ieee_maximum(a, b, False),
            xlogy=xlogy_ref)


def reference(op, a, b):
    """The C99 Annex F / IEEE value in the dtype of a and b (equal-shape arrays)."""
    with np.errstate(all="ignore"):
        return np.asarray(REFS[op](a, b))


# ---------------------------------------------------------------------------
# Worker: exact values via mpmath.  Each _exact_<op> returns an mpf (exact value),
# a float (the value in the dtype, exact: a shortcut far outside its range) or
# None (no real value or no signed zero in mpmath: take the reference).
# ---------------------------------------------------------------------------
def _exact_pow(mp, a, b, f):
    if a == 0 or not (math.isfinite(a) and math.isfinite(b)):
        return None
    if a < 0 and b != math.floor(b):
        return None                                       # complex: nan
    # far past overflow / underflow: only the sign matters (mpmath would take ~50 ms)
    sign = -1.0 if a < 0 and abs(b) < 2.0 ** 53 and int(b) % 2 else 1.0
    with np.errstate(all="ignore"):
        lg = b * math.log2(abs(a))
    if lg > f["emax"] + 8:
        return sign * INF
    if lg < f["emin"] - f["p"] - 64:             # < 2^-65 of the smallest subnormal
        return sign * 0.0
    return mp.power(mp.mpf(a), mp.mpf(b))


def _exact_atan2(mp, a, b, f):
    if math.isnan(a) or math.isnan(b):
        return None
    if a == 0 or b == 0 or math.isinf(a) or math.isinf(b):
        # Annex F: +-0, +-pi/4, +-pi/2, +-3pi/4 or +-pi by the operands' signs and
        # classes (mpmath has no signed zero); the multiple of pi/4 from glibc's atan2.
        q = math.atan2(a, b)
        k = round(4 * q / math.pi)
        return math.copysign(0.0, q) if k == 0 else mp.pi * k / 4
    return mp.atan2(mp.mpf(a), mp.mpf(b))


def _exact_hypot(mp, a, b, f):
    if not (math.isfinite(a) and math.isfinite(b)):
        return None
    a, b = mp.mpf(a), mp.mpf(b)
    return mp.sqrt(a * a + b * b)


def _exact_max(mp, a, b, f):
    if a == 0 or b == 0 or not (math.isfinite(a) and math.isfinite(b)):
        return None
    return max(mp.mpf(a), mp.mpf(b))


def _exact_min(mp, a, b, f):
    if a == 0 or b == 0 or not (math.isfinite(a) and math.isfinite(b)):
        return None
    return min(mp.mpf(a), mp.mpf(b))


def _exact_logaddexp(mp, a, b, f):
    """log(e^a + e^b) = m + log1p(e^-d), m = max(a, b), d = |a - b| (exact).  Near the
    curve e^a + e^b = 1 the sum cancels: the precision is raised by the bits lost."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return None
    A, B = mp.mpf(a), mp.mpf(b)
    m = max(A, B)
    d = abs(mp.fsub(A, B, exact=True))
    if d > 2000:            # e^-d < 2^-2885: below every ulp of the dtypes
        return m
    prec = mp.mp.prec
    wp = prec + 10
    for _ in range(20):
        with mp.workprec(wp):
            r = m + mp.log1p(mp.exp(-d))
        if r != 0 and (m == 0 or wp >= prec + 10 + max(0, mp.mag(m) - mp.mag(r))):
            return r
        wp = 2 * wp if r == 0 else prec + 20 + max(0, mp.mag(m) - mp.mag(r))
    raise RuntimeError(f"logaddexp({a!r}, {b!r}): no precision is enough")


def _exact_xlogy(mp, a, b, f):
    # a == 0, b <= 0 and b == 1 (a signed zero), non-finite operands: the reference
    if a == 0 or b <= 0 or b == 1 or not (math.isfinite(a) and math.isfinite(b)):
        return None
    return mp.mpf(a) * mp.log(mp.mpf(b))


EXACT = dict(pow=_exact_pow, atan2=_exact_atan2, hypot=_exact_hypot, maximum=_exact_max,
             minimum=_exact_min, logaddexp=_exact_logaddexp, xlogy=_exact_xlogy)


def _exact_chunk(task):
    """task: (op, dtype, a, b, ref), float64 arrays -> (rounded, frac, ulp_exp, n_ref)."""
    op, dtype, a, b, ref = task
    mp = _W["mpmath"]
    fn = EXACT[op]
    f = FMT[dtype]
    p, emin, emax = f["p"], f["emin"], f["emax"]
    k = len(a)
    rounded = np.empty(k)
    frac = np.zeros(k)
    uexp = np.zeros(k, dtype=np.int32)
    n_ref = 0
    for i in range(k):
        v = fn(mp, float(a[i]), float(b[i]), f)
        if isinstance(v, mp.mpf) and v == 0:
            v = math.copysign(0.0, ref[i])             # mpmath has no signed zero
        if v is None:
            n_ref += 1
            v = float(ref[i])
        if isinstance(v, float):
            rounded[i] = v
            uexp[i] = _ulp_exp(abs(v), p, emin) if math.isfinite(v) else 0
        else:
            rounded[i], frac[i], uexp[i] = _round_mpf(v, p, emin, emax)
    return rounded, frac, uexp, n_ref


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------
def lucid_eval(lucid, op, a, b, retries=5):
    for i in range(retries):
        try:
            return np.asarray(getattr(lucid, op)(lucid.tensor(a), lucid.tensor(b)).numpy())
        except Exception as e:
            if i == retries - 1:
                raise
            print(f"lucid.{op} failed ({e!r}); retrying in 60 s", file=sys.stderr)
            time.sleep(60)


def _pair(a, b, dtype):
    return f"({fmt_x(a, dtype)}, {fmt_x(b, dtype)})"


def measure(pool, lucid, op, dtype, n, seed, chunk, retries=5):
    t = FMT[dtype]["np"]
    a, b = sample_pairs(op, dtype, n, seed)
    y = lucid_eval(lucid, op, a, b, retries)
    if y.dtype != t:
        print(f"  warning: lucid.{op}({dtype}) returned {y.dtype}", file=sys.stderr)
    ref = reference(op, a, b).astype(np.float64)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    tasks = [(op, dtype, a64[i:i + chunk], b64[i:i + chunk], ref[i:i + chunk])
             for i in range(0, len(a), chunk)]
    res = list(pool.imap(_exact_chunk, tasks))
    rounded = np.concatenate([r[0] for r in res])
    frac = np.concatenate([r[1] for r in res])
    uexp = np.concatenate([r[2] for r in res])
    n_ref = sum(r[3] for r in res)
    err = ulp_errors(y, rounded, frac, uexp, dtype)
    y64 = y.astype(np.float64)
    zero_sign = (rounded == 0) & (y64 == 0) & (np.signbit(rounded) != np.signbit(y64))
    err[zero_sign] = INF
    finite = np.isfinite(err)
    bad = np.flatnonzero(~finite)
    i_max = int(bad[0]) if len(bad) else int(np.argmax(err))
    over4 = np.flatnonzero(err > 4)
    ar = np.abs(rounded)
    normal = ~((ar > 0) & (ar < float(np.finfo(t).tiny)))
    err_n = np.where(normal & finite, err, 0.0)
    i_n = int(np.argmax(err_n))
    r = dict(
        op=op, dtype=dtype, n=int(len(a)), n_ref=int(n_ref),
        max_ulp=float(err[i_max]), worst_a=float(a[i_max]), worst_b=float(b[i_max]),
        worst_y=float(y[i_max]), worst_exact=float(rounded[i_max]),
        mean_ulp=float(err[finite].mean()) if finite.any() else INF,
        n_mismatch=int(len(bad)), n_zero_sign=int(zero_sign.sum()), n_over4=int(len(over4)),
        n_subnormal_over4=int(np.count_nonzero((err > 4) & ~normal)),
        max_ulp_normal=float(err_n[i_n]), worst_a_normal=float(a[i_n]), worst_b_normal=float(b[i_n]),
        over4_examples=[(float(a[i]), float(b[i]), float(y[i]), float(rounded[i]), float(err[i]))
                        for i in over4[np.argsort(-err[over4], kind="stable")][:5]],
    )
    if op == "logaddexp":
        # Near e^a + e^b = 1 the result is tiny and the error absolute: reported apart.
        fin_r = np.isfinite(rounded)
        far = fin_r & (ar >= 0.5)
        near = fin_r & (ar < 0.5) & np.isfinite(y64)
        far[:1] |= not far.any()          # (only for a tiny --n)
        near[:1] |= not near.any()
        i_f = int(np.flatnonzero(far)[np.argmax(err[far])])
        with np.errstate(all="ignore"):
            abs_err = np.abs((y64 - rounded) - np.ldexp(frac, uexp))
        i_z = int(np.flatnonzero(near)[np.argmax(abs_err[near])])
        r.update(n_far=int(far.sum()), max_ulp_far=float(err[i_f]), worst_a_far=float(a[i_f]),
                 worst_b_far=float(b[i_f]),
                 n_near=int(near.sum()), max_abs_near=float(abs_err[i_z]),
                 worst_a_near=float(a[i_z]), worst_b_near=float(b[i_z]),
                 worst_y_near=float(y[i_z]), worst_exact_near=float(rounded[i_z]),
                 max_ulp_near=float(err[near].max()),
                 largest_r_over4_near=float(ar[near & (err > 4)].max()) if (near & (err > 4)).any() else 0.0)
    return r


def render(results, dtypes, command, n, prec, elapsed):
    by = {(r["op"], r["dtype"]): r for r in results}
    ops = [o for o in OPS if any(r["op"] == o for r in results)]
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    L = ["# lucid binary element-wise accuracy", "",
         f"Generated by `{command}` on {now} ({elapsed / 60:.1f} min).", "",
         f"Max and mean error in ULPs of lucid's binary float functions, called as "
         f"`lucid.<op>(lucid.tensor(a), lucid.tensor(b))`, against mpmath at {prec} bits "
         f"correctly rounded to the dtype, over n = {n:,} pairs per (op, dtype) (the cross "
         f"product of the special points: +-0, +-smallest subnormal, +-smallest normal, +-0.5, "
         f"+-1, +-1.5, +-2, +-3, +-largest finite, +-inf, nan; uniform in value over a core "
         f"region; magnitudes uniform in exponent, of both signs, over the whole finite range; "
         f"and per op: pow, positive bases with exponents putting the result across the "
         f"overflow and underflow thresholds, bases near 1, negative bases with integer "
         f"exponents; atan2 and hypot, ratios |a/b| from 2^-(p+40) to 2^(p+40), operands near "
         f"overflow and subnormal; logaddexp, pairs near e^a + e^b = 1 (result near 0) and "
         f"a ~ b; maximum and minimum, ties, neighbours and nans). `tools/accuracy_binary.py` "
         f"lists the samplers.", "",
         "Exact values: mpmath.power, atan2, sqrt(a^2 + b^2), max / min, and "
         "m + log1p(e^-|a-b|) with the precision raised by the cancellation near "
         "logaddexp's zero. Where mpmath has no real value or no signed zero (negative base "
         "with a non-integer exponent, 0 ** negative, a +-0 operand of pow, maximum or "
         "minimum, a non-finite operand), the C99 Annex F value from NumPy on equal-shape "
         "arrays of the dtype, and for maximum / minimum IEEE 754-2019's (nan if either "
         "operand is nan, -0 < +0); atan2 with a zero or infinite operand is the multiple "
         "of pi/4 (or the signed zero) that Annex F gives, evaluated in mpmath.", "",
         "Error = |lucid(a, b) - f(a, b)| / ulp(f(a, b) rounded to the dtype), with f the "
         "high-precision value, so a correctly rounded result scores <= 0.5. A non-finite "
         "mismatch (nan vs number, inf vs finite) or a zero of the wrong sign counts as inf, "
         "and its first input is shown. `worst (a, b)` is the input of the max error.", ""]
    hdr, sep = "| op |", "|---|"
    for d in dtypes:
        hdr += f" {d} max ULP | {d} worst (a, b) | {d} mean ULP |"
        sep += "---:|---:|---:|"
    L += [hdr + " n |", sep + "---:|"]
    for op in ops:
        line, nn = f"| {op} |", None
        for d in dtypes:
            r = by.get((op, d))
            if r is None:
                line += " - | - | - |"
                continue
            nn = r["n"]
            mx = fmt_ulp(r["max_ulp"])
            if r["max_ulp"] > 4:
                mx = f"**{mx}**"
            wx = _pair(r["worst_a"], r["worst_b"], d) if r["max_ulp"] > 0 else "-"
            line += f" {mx} | {wx} | {r['mean_ulp']:.3g} |"
        L.append(line + (f" {nn:,} |" if nn else " - |"))

    L += ["", "Pairs whose exact value is the NumPy / IEEE reference (no real value in mpmath, "
          "a signed zero or a non-finite operand), of n:", "",
          "| op | " + " | ".join(dtypes) + " |", "|---|" + "---:|" * len(dtypes)]
    for op in ops:
        L.append(f"| {op} | " + " | ".join(
            "-" if (op, d) not in by else f"{by[(op, d)]['n_ref']:,}" for d in dtypes) + " |")

    lae = [by[("logaddexp", d)] for d in dtypes if ("logaddexp", d) in by]
    if lae:
        L += ["", "## logaddexp near its zero", "",
              "lucid computes m + log1p(e^-|a-b|) (m = max(a, b)); near the curve "
              "e^a + e^b = 1, where the result r is near 0, the two terms cancel and that "
              "formula's error is absolute, about 1e-16 (as NumPy's and PyTorch's). So "
              "lucid recomputes the elements with |r| < 1/4 (float64; float32 works in "
              "double and recomputes |r| < 2^-24) as log1p(expm1(max) + e^min), both terms "
              "in double-double arithmetic: the result keeps its relative accuracy until the "
              "two terms cancel beyond ~2^-53 of their size (`largest |r| over 4 ULP`). "
              "Split at |r| = 0.5 (r the exact result; eps is the dtype's machine epsilon):", "",
              "| dtype | max ULP, \\|r\\| >= 0.5 | worst (a, b) | n | max abs error, \\|r\\| < 0.5 "
              "| in eps | worst (a, b) | lucid | exact | max ULP, \\|r\\| < 0.5 "
              "| largest \\|r\\| over 4 ULP | n |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in lae:
            d = r["dtype"]
            eps = float(np.finfo(FMT[d]["np"]).eps)
            L.append(f"| {d} | {fmt_ulp(r['max_ulp_far'])} | {_pair(r['worst_a_far'], r['worst_b_far'], d)} "
                     f"| {r['n_far']:,} | {r['max_abs_near']:.3g} | {r['max_abs_near'] / eps:.3g} "
                     f"| {_pair(r['worst_a_near'], r['worst_b_near'], d)} | {fmt_x(r['worst_y_near'], d)} "
                     f"| {fmt_x(r['worst_exact_near'], d)} | {fmt_ulp(r['max_ulp_near'])} "
                     f"| {r['largest_r_over4_near']:.3g} | {r['n_near']:,} |")

    over = [r for r in results if r["max_ulp"] > 4]
    L += ["", "## Over 4 ULP", ""]
    if not over:
        L.append("None.")
    else:
        L += ["`normal max ULP` excludes the pairs whose exact result is subnormal "
              "(gradual underflow) and the non-finite mismatches; `(a, b) normal` is where it "
              "occurs.", "",
              "| op | dtype | max ULP | (a, b) | lucid | f rounded | # pairs > 4 ULP "
              "| of them subnormal results | # non-finite mismatches | of them zero signs "
              "| normal max ULP | (a, b) normal |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in sorted(over, key=lambda r: (r["op"], r["dtype"])):
            d = r["dtype"]
            L.append(f"| {r['op']} | {d} | {fmt_ulp(r['max_ulp'])} | {_pair(r['worst_a'], r['worst_b'], d)} | "
                     f"{fmt_x(r['worst_y'], d)} | {fmt_x(r['worst_exact'], d)} | {r['n_over4']:,} | "
                     f"{r['n_subnormal_over4']:,} | {r['n_mismatch']:,} | {r['n_zero_sign']:,} | "
                     f"{fmt_ulp(r['max_ulp_normal'])} | "
                     f"{_pair(r['worst_a_normal'], r['worst_b_normal'], d)} |")
    return "\n".join(L) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="pairs per (op, dtype)")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--ops", default="", help=f"comma-separated, from {','.join(OPS)} (default: all)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    ap.add_argument("--prec", type=int, default=128, help="mpmath working precision (bits)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunk", type=int, default=2000)
    ap.add_argument("--retries", type=int, default=10,
                    help="attempts to import lucid (60 s apart; the library may be rebuilding)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "accuracy_binary.md"))
    ap.add_argument("--json", default=None,
                    help="raw results (default: --out with .json; '' for none)")
    ap.add_argument("--no-write", action="store_true", help="print the table only")
    args = ap.parse_args(argv)
    if args.json is None:
        args.json = "" if args.no_write else os.path.splitext(args.out)[0] + ".json"

    command = "python tools/accuracy_binary.py" + ("" if argv is None and len(sys.argv) == 1
                                                   else " " + " ".join(sys.argv[1:] if argv is None else argv))
    ops = OPS
    if args.ops:
        ops = [s.strip() for s in args.ops.split(",") if s.strip()]
        unknown = set(ops) - set(OPS)
        if unknown:
            ap.error(f"unknown ops: {sorted(unknown)}")
        ops = [o for o in OPS if o in ops]
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    for d in dtypes:
        if d not in FMT:
            ap.error(f"unknown dtype {d}")
    lucid = _import_lucid(max(args.retries, 1))
    print(f"lucid: {os.path.realpath(lucid.__file__)}", file=sys.stderr)

    t0 = time.time()
    results = []

    def dump_json():
        if args.json:
            os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
            with open(args.json + ".tmp", "w") as fh:
                json.dump(dict(command=command, n=args.n, prec=args.prec,
                               elapsed=time.time() - t0, results=results), fh, indent=1)
            os.replace(args.json + ".tmp", args.json)

    ctx = mproc.get_context("fork")
    with ctx.Pool(args.jobs, initializer=_worker_init, initargs=(args.prec,)) as pool:
        for d in dtypes:
            for op in ops:
                t1 = time.time()
                r = measure(pool, lucid, op, d, args.n, args.seed, args.chunk, args.retries)
                results.append(r)
                dump_json()
                flag = "  <-- over 4 ULP" if r["max_ulp"] > 4 else ""
                print(f"{op:>10s} {d}: max {fmt_ulp(r['max_ulp']):>9s} ULP at (a, b) = "
                      f"{_pair(r['worst_a'], r['worst_b'], d)} (lucid {fmt_x(r['worst_y'], d)}, "
                      f"exact {fmt_x(r['worst_exact'], d)}), mean {r['mean_ulp']:.3g}, "
                      f"n {r['n']:,}, {time.time() - t1:.1f} s{flag}", file=sys.stderr, flush=True)
    elapsed = time.time() - t0
    md = render(results, dtypes, command, args.n, args.prec, elapsed)
    print(md)
    dump_json()
    if not args.no_write:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as fh:
            fh.write(md)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
