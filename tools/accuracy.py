#!/usr/bin/env python
"""Measure the max ULP error of every element-wise op in lucid's op table.

For each row of ``lucid._core.optable.UNARY`` (with its reference and mpmath oracle from
``tests/op_data.py``) and each dtype (float32,
float64) this script

  * samples ``--n`` inputs spanning the function's whole mathematical domain
    within the dtype's range (``SCAN_DOMAINS`` below; rows not listed there
    fall back to the row's test ``domain``): a mix of uniform-in-value over the
    core region (the row's test domain), uniform-in-value over the full scan
    domain, log-spaced (uniform in exponent) magnitudes of both signs where the
    domain allows, op-specific focus regions (near poles, zeros, thresholds),
    plus the special points (+-0, smallest subnormal, smallest normal, 1, the
    largest finite value, the scan-domain end points and their neighbours,
    +-inf);
  * evaluates the row's ``mp`` expression with mpmath at ``--prec`` bits
    (default 128) in a process pool, and rounds the exact value correctly
    (round-half-even, with gradual underflow and overflow to inf) to the dtype;
  * evaluates ``lucid.<name>`` on the same inputs, and computes the error
    ``|lucid - exact| / ulp(exact rounded to the dtype)``, where ``exact`` is the
    high-precision value (so a correctly rounded result has error <= 0.5).
    Non-finite results: both nan, or the same infinity, is 0 error; any other
    mismatch (nan vs number, inf vs finite, ...) is an infinite error and the
    first offending input is reported.

Inputs where mpmath has no real value (poles it raises on, such as 1/0, and
non-finite inputs) take the row's ``ref`` (numpy/scipy, IEEE conventions).

Usage:
    python tools/accuracy.py                 # 1e6 inputs per (op, dtype), writes docs/accuracy.md
    python tools/accuracy.py --n 20000 --no-write
    python tools/accuracy.py --dtypes float32 --ops exp,log,erf
"""
import argparse
import datetime
import json
import math
import multiprocessing as mproc
import os
import sys
import time
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _built_in_place(root):
    """True if the checkout's lucid has its compiled extension (build_ext --inplace)."""
    core = os.path.join(root, "lucid", "_core")
    try:
        return any(f.startswith("core.") and f.endswith((".so", ".pyd")) for f in os.listdir(core))
    except OSError:
        return False


# Measure this checkout's in-place build when there is one; otherwise (a clean checkout
# with lucid pip-installed, as in CI) the installed package, which the unbuilt source
# tree would shadow.
if ROOT not in sys.path and _built_in_place(ROOT):
    sys.path.insert(0, ROOT)

# ---------------------------------------------------------------------------
# dtype formats: precision p (with the hidden bit), emin, emax
# ---------------------------------------------------------------------------
FMT = {
    "float32": dict(np=np.float32, p=24, emin=-126, emax=127),
    "float64": dict(np=np.float64, p=53, emin=-1022, emax=1023),
}

F32_MAX = float(np.finfo(np.float32).max)
F64_MAX = float(np.finfo(np.float64).max)
INF = float("inf")


def _both(lo, hi):
    return {"float32": (lo, hi), "float64": (lo, hi)}


def _full():
    return {"float32": (-F32_MAX, F32_MAX), "float64": (-F64_MAX, F64_MAX)}


def _pos(lo=0.0):
    return {"float32": (lo, F32_MAX), "float64": (lo, F64_MAX)}


# ---------------------------------------------------------------------------
# Scan domains: the function's mathematical domain within each dtype's range
# (slightly past the overflow / underflow thresholds, so the saturation to
# inf / 0 is checked too).  ``core``: a region sampled uniformly in value (the
# interesting part; defaults to the row's test domain).  ``focus``: extra small
# regions sampled uniformly (near poles, zeros, thresholds).
# ---------------------------------------------------------------------------
SCAN_DOMAINS = {
    "erf": dict(full=_full(), core=(-6.0, 6.0), focus=[(-1e-3, 1e-3)]),
    "erfc": dict(full={"float32": (-F32_MAX, 11.0), "float64": (-F64_MAX, 28.0)},
                 core=(-6.0, 28.0), focus=[(9.0, 11.0), (26.0, 27.5), (-1e-3, 1e-3)]),
    "erfinv": dict(full=_both(-1.0, 1.0), core=(-1.0, 1.0),
                   focus=[(0.999, 1.0), (-1.0, -0.999), (-1e-3, 1e-3)]),
    "exp": dict(full={"float32": (-104.0, 89.0), "float64": (-745.2, 709.8)},
                core=(-20.0, 20.0), focus=[(-104.0, -87.0), (87.0, 89.0), (-1e-3, 1e-3),
                                           (-745.2, -708.0), (708.0, 709.8)]),
    "exp2": dict(full={"float32": (-150.0, 128.5), "float64": (-1075.0, 1024.5)},
                 core=(-20.0, 20.0), focus=[(-150.0, -125.0), (-1075.0, -1021.0)]),
    "expm1": dict(full={"float32": (-104.0, 89.0), "float64": (-745.2, 709.8)},
                  core=(-5.0, 5.0), focus=[(-1e-3, 1e-3), (-0.7, 0.7)]),
    "log": dict(full=_pos(), core=(0.01, 100.0), focus=[(0.5, 2.0), (0.99, 1.01)]),
    "log2": dict(full=_pos(), core=(0.01, 100.0), focus=[(0.5, 2.0), (0.99, 1.01)]),
    "log10": dict(full=_pos(), core=(0.01, 100.0), focus=[(0.5, 2.0), (0.99, 1.01)]),
    "log1p": dict(full={"float32": (-1.0, F32_MAX), "float64": (-1.0, F64_MAX)},
                  core=(-0.9, 10.0), focus=[(-1.0, -0.99), (-1e-3, 1e-3), (-0.5, 1.0)]),
    "sqrt": dict(full=_pos(), core=(0.01, 100.0)),
    "rsqrt": dict(full=_pos(), core=(0.01, 100.0)),
    "reciprocal": dict(full=_full(), core=(-10.0, 10.0)),
    "cbrt": dict(full=_full(), core=(-100.0, 100.0)),
    "square": dict(full=_full(), core=(-10.0, 10.0)),
    "sin": dict(full=_full(), core=(-6.3, 6.3), focus=[(-1e5, 1e5), (3.14, 3.1432)]),
    "cos": dict(full=_full(), core=(-6.3, 6.3), focus=[(-1e5, 1e5), (1.57, 1.5716)]),
    "tan": dict(full=_full(), core=(-1.57, 1.57), focus=[(-1e5, 1e5), (1.57, 1.5716)]),
    "asin": dict(full=_both(-1.0, 1.0), core=(-1.0, 1.0), focus=[(0.99, 1.0), (-1.0, -0.99)]),
    "acos": dict(full=_both(-1.0, 1.0), core=(-1.0, 1.0), focus=[(0.99, 1.0), (-1.0, -0.99)]),
    "atan": dict(full=_full(), core=(-10.0, 10.0)),
    "sinh": dict(full={"float32": (-90.0, 90.0), "float64": (-711.0, 711.0)},
                 core=(-10.0, 10.0), focus=[(-1e-3, 1e-3), (-1.0, 1.0)]),
    "cosh": dict(full={"float32": (-90.0, 90.0), "float64": (-711.0, 711.0)},
                 core=(-10.0, 10.0)),
    "tanh": dict(full=_full(), core=(-10.0, 10.0), focus=[(-1e-3, 1e-3), (-1.0, 1.0)]),
    "asinh": dict(full=_full(), core=(-10.0, 10.0), focus=[(-1e-3, 1e-3), (-1.0, 1.0)]),
    "acosh": dict(full=_pos(1.0), core=(1.0, 10.0), focus=[(1.0, 1.01)]),
    "atanh": dict(full=_both(-1.0, 1.0), core=(-1.0, 1.0),
                  focus=[(0.99, 1.0), (-1.0, -0.99), (-1e-3, 1e-3)]),
    "sigmoid": dict(full=_full(), core=(-20.0, 20.0),
                    focus=[(-104.0, -80.0), (-745.2, -700.0), (-1e-3, 1e-3)]),
    "softplus": dict(full=_full(), core=(-20.0, 20.0),
                     focus=[(-104.0, -80.0), (-745.2, -700.0), (10.0, 40.0)]),
    "logsigmoid": dict(full=_full(), core=(-20.0, 20.0),
                       focus=[(80.0, 104.0), (700.0, 745.2), (-40.0, -10.0), (-1e-3, 1e-3)]),
    "logit": dict(full=_both(0.0, 1.0), core=(0.0, 1.0),
                  focus=[(0.49, 0.51), (0.29, 0.31), (0.64, 0.66), (0.999, 1.0), (0.0, 1e-3)]),
    "silu": dict(full=_full(), core=(-20.0, 20.0),
                 focus=[(-110.0, -80.0), (-750.0, -700.0), (-1e-3, 1e-3)]),
    "gelu": dict(full=_full(), core=(-8.0, 8.0),
                 focus=[(-14.5, -10.0), (-39.0, -35.0), (-1e-3, 1e-3)]),
    "gelu_tanh": dict(full=_full(), core=(-8.0, 8.0),
                      focus=[(-11.0, -9.0), (-22.0, -19.0), (-1e-3, 1e-3)]),
    "mish": dict(full=_full(), core=(-10.0, 10.0),
                 focus=[(-110.0, -80.0), (-760.0, -700.0), (-1e-3, 1e-3)]),
    "lgamma": dict(full={"float32": (-1e6, 4e36), "float64": (-1e15, 2e305)}, core=(-10.0, 12.0),
                   focus=[(0.9, 1.1), (1.9, 2.1), (-1e-3, 1e-3), (9.9, 10.1)]),
    "digamma": dict(full={"float32": (-1e6, 1e38), "float64": (-1e15, 1e300)},
                    core=(-10.0, 12.0), focus=[(1.4, 1.5), (-1e-3, 1e-3), (9.9, 10.1)]),
    "sinc": dict(full=_full(), core=(-10.0, 10.0), focus=[(-1e-3, 1e-3), (0.9, 1.1), (1e5, 1e6)]),
    "i0": dict(full={"float32": (-95.0, 95.0), "float64": (-715.0, 715.0)}, core=(-30.0, 30.0),
               focus=[(29.0, 31.0), (-1e-3, 1e-3), (700.0, 715.0)]),
    "erfcx": dict(full={"float32": (-10.0, F32_MAX), "float64": (-27.0, F64_MAX)},
                  core=(-5.0, 30.0), focus=[(25.0, 27.0), (-1e-3, 1e-3), (-27.0, -20.0)]),
    "log_ndtr": dict(full={"float32": (-1e19, 15.0), "float64": (-1e154, 40.0)},
                     core=(-40.0, 10.0), focus=[(-1e-3, 1e-3), (-1.5, 1.5), (-1e5, -30.0)]),
    "ndtri": dict(full=_both(0.0, 1.0), core=(0.0, 1.0),
                  focus=[(0.49, 0.51), (0.0, 1e-3), (0.999, 1.0), (0.0, 1e-16)]),
    "abs": dict(full=_full(), core=(-10.0, 10.0)),
    "sign": dict(full=_full(), core=(-10.0, 10.0)),
    "floor": dict(full=_full(), core=(-10.0, 10.0), focus=[(-1e8, 1e8), (-1e17, 1e17)]),
    "ceil": dict(full=_full(), core=(-10.0, 10.0), focus=[(-1e8, 1e8), (-1e17, 1e17)]),
    "round": dict(full=_full(), core=(-10.0, 10.0), focus=[(-1e8, 1e8), (-1e17, 1e17)]),
    "trunc": dict(full=_full(), core=(-10.0, 10.0), focus=[(-1e8, 1e8), (-1e17, 1e17)]),
}


def scan_domain(row, dtype):
    """(lo, hi, core, focus) for this op and dtype."""
    spec = SCAN_DOMAINS.get(row["name"])
    if spec is None:
        lo, hi = row["domain"]
        return float(lo), float(hi), (float(lo), float(hi)), []
    lo, hi = spec["full"][dtype]
    core = spec.get("core", row["domain"])
    clip = lambda a, b: (max(a, lo), min(b, hi))
    core = clip(*core)
    focus = [clip(a, b) for a, b in spec.get("focus", [])]
    focus = [(a, b) for a, b in focus if a < b]
    return float(lo), float(hi), core, focus


# ---------------------------------------------------------------------------
# Input sampling
# ---------------------------------------------------------------------------
def _uniform(rng, lo, hi, k):
    u = rng.random(k)
    return lo * (1.0 - u) + hi * u          # no overflow of hi - lo


def _logspaced(rng, lo, hi, k, tiny):
    """Magnitudes uniform in log2 over each sign's part of [lo, hi]."""
    sides = []
    if hi > 0:
        sides.append((+1.0, max(lo, 0.0), hi))
    if lo < 0:
        sides.append((-1.0, max(-hi, 0.0), -lo))
    out = []
    for i, (s, a, b) in enumerate(sides):
        kk = k // len(sides) + (1 if i < k % len(sides) else 0)
        a = max(a, tiny)
        if b <= a:
            out.append(np.full(kk, s * b))
            continue
        e = rng.uniform(math.log2(a), math.log2(b), kk)
        out.append(s * np.exp2(e))
    return np.concatenate(out) if out else np.empty(0)


def special_points(lo, hi, dtype):
    t = FMT[dtype]["np"]
    fi = np.finfo(t)
    tiny_sub = float(np.nextafter(t(0), t(1)))
    base = [0.0, tiny_sub, float(fi.tiny), 1.0, 2.0, 0.5, float(fi.max), float(fi.eps),
            float(np.nextafter(t(1), t(0))), float(np.nextafter(t(1), t(2))),
            float(np.nextafter(fi.tiny, t(0))),   # largest subnormal
            math.pi, math.pi / 2, 10.0]
    pts = set()
    for v in base:
        pts.add(v)
        pts.add(-v)
    pts.add(-0.0)
    for v in (lo, hi):                      # the scan-domain ends (overflow/underflow thresholds)
        tv = t(v)
        if np.isfinite(tv):
            with np.errstate(over="ignore"):
                    pts.update([float(tv), float(np.nextafter(tv, t(INF))), float(np.nextafter(tv, t(-INF)))])
    pts = [v for v in pts if lo <= v <= hi]
    pts += [INF, -INF]                      # limits: the row's ref (IEEE convention) is the truth
    return np.array(sorted(pts, key=lambda v: (v, math.copysign(1, v))), dtype=t)


def sample_inputs(row, dtype, n, seed):
    t = FMT[dtype]["np"]
    lo, hi, core, focus = scan_domain(row, dtype)
    rng = np.random.default_rng([seed, zlib.crc32(row["name"].encode()), FMT[dtype]["p"]])
    tiny = float(np.nextafter(t(0), t(1)))
    sp = special_points(lo, hi, dtype)
    m = max(n - len(sp), 0)
    wide = hi - lo > 4 * (core[1] - core[0]) if np.isfinite(hi - lo) else True
    parts = [("core", 0.30), ("full", 0.15 if wide else 0.0), ("log", 0.40),
             ("focus", 0.15 if focus else 0.0)]
    tot = sum(w for _, w in parts)
    counts = {k: int(m * w / tot) for k, w in parts}
    counts["core"] += m - sum(counts.values())
    xs = [sp]
    xs.append(_uniform(rng, core[0], core[1], counts["core"]))
    if counts["full"]:
        xs.append(_uniform(rng, lo, hi, counts["full"]))
    if counts["log"]:
        xs.append(_logspaced(rng, lo, hi, counts["log"], tiny))
    if counts["focus"]:
        k = counts["focus"]
        for i, (a, b) in enumerate(focus):
            kk = k // len(focus) + (1 if i < k % len(focus) else 0)
            xs.append(_uniform(rng, a, b, kk))
    with np.errstate(over="ignore"):
        x = np.concatenate([np.asarray(v, dtype=np.float64).astype(t) for v in xs])
    fin = np.isfinite(x)
    x[fin] = np.clip(x[fin], t(lo), t(hi))   # the cast may round just outside [lo, hi]
    return x


# ---------------------------------------------------------------------------
# Worker: exact values via mpmath, correctly rounded to the dtype
# ---------------------------------------------------------------------------
_W = {}


def _worker_init(prec):
    import mpmath
    mpmath.mp.prec = prec
    _W["mpmath"] = mpmath
    _W["ns"] = {k: getattr(mpmath, k) for k in dir(mpmath) if not k.startswith("_")}
    _W["funcs"] = {}


def _get_funcs(mp_expr, ref_expr):
    key = (mp_expr, ref_expr)
    f = _W["funcs"].get(key)
    if f is None:
        import scipy.special as sp
        fmp = eval("lambda x: " + mp_expr, dict(_W["ns"]))
        fref = eval("lambda x: " + ref_expr, {"np": np, "sp": sp})
        f = _W["funcs"][key] = (fmp, fref)
    return f


def _ulp_exp(v, p, emin):
    """log2 of ulp(v) for a finite value v of the format (v == 0 -> smallest subnormal)."""
    if v == 0.0:
        return emin - p + 1
    e = math.frexp(v)[1] - 1
    return max(e, emin) - p + 1


def _round_mpf(v, p, emin, emax):
    """Round an mpf correctly (half-even) to the (p, emin, emax) format.

    Returns (rounded as a Python float, (v - rounded) / ulp(rounded), log2 ulp(rounded)).
    """
    s, man, exp, bc = v._mpf_
    if man == 0:
        if bc == 0:                       # zero
            return 0.0, 0.0, emin - p + 1
        if v._mpf_ == (0, 0, -456, -2):
            return INF, 0.0, 0
        if v._mpf_ == (1, 0, -789, -3):
            return -INF, 0.0, 0
        return float("nan"), 0.0, 0
    sign = -1.0 if s else 1.0
    e = exp + bc - 1                      # v = +-[2^e, 2^(e+1))
    if e > emax:
        return sign * INF, 0.0, 0
    qe = max(e, emin) - (p - 1)           # quantum (ulp) exponent at v
    if e < qe - 1:                        # below half the smallest subnormal: rounds to 0
        return sign * 0.0, sign * math.ldexp(float(man >> max(bc - 60, 0)), exp + max(bc - 60, 0) - qe), qe
    shift = qe - exp
    if shift <= 0:                        # exactly representable
        m, rem_q = man << (-shift), 0.0
    else:
        m = man >> shift
        r = man - (m << shift)
        half = 1 << (shift - 1)
        if r > half or (r == half and (m & 1)):
            m += 1
            r -= 1 << shift
        rem_q = r / (1 << shift)           # (|v| - |rounded|) in units of 2^qe
    if m >> p:                            # carried into the next binade
        e += 1
        if e > emax:
            return sign * INF, 0.0, 0
    rounded = sign * math.ldexp(m, qe)
    ue = _ulp_exp(abs(rounded), p, emin)
    frac = sign * math.ldexp(rem_q, qe - ue)
    return rounded, frac, ue


def _exact_chunk(task):
    """task: (mp_expr, ref_expr, dtype, x as float64 array) -> (rounded, frac, ulp_exp, n_ref)."""
    mp_expr, ref_expr, dtype, x = task
    mpmath = _W["mpmath"]
    mpf = mpmath.mpf
    fmp, fref = _get_funcs(mp_expr, ref_expr)
    f = FMT[dtype]
    p, emin, emax, t = f["p"], f["emin"], f["emax"], f["np"]
    k = len(x)
    rounded = np.empty(k)
    frac = np.empty(k)
    uexp = np.empty(k, dtype=np.int32)
    n_ref = 0
    for i in range(k):
        xi = float(x[i])
        v = None
        if math.isfinite(xi):
            try:
                v = fmp(mpf(xi))
            except (ZeroDivisionError, ValueError, OverflowError):
                v = None
            if v is not None and not isinstance(v, mpmath.mpf):
                if isinstance(v, mpmath.mpc) and v.imag == 0:
                    v = v.real
                else:
                    v = None
        if v is None:                     # pole / non-finite input: IEEE convention from ref
            n_ref += 1
            with np.errstate(all="ignore"):
                r = float(t(fref(t(xi))))
            if math.isnan(r) and math.isinf(xi):
                # The numpy expression has no limit at +-inf (e.g. -inf * 0 in x * sigmoid(x));
                # the function does: evaluate it far beyond the dtype's range instead.
                for far in ("1e400", "1e40"):   # mpmath overflows internally on some at 1e400
                    try:
                        lim = fmp(mpf(far) if xi > 0 else -mpf(far))
                    except (ZeroDivisionError, ValueError, OverflowError):
                        continue
                    if isinstance(lim, mpmath.mpf):
                        rr, _, _ = _round_mpf(lim, p, emin, emax)
                        r = float(rr)
                        break
            rounded[i] = r
            frac[i] = 0.0
            uexp[i] = _ulp_exp(abs(r), p, emin) if math.isfinite(r) else 0
        else:
            rounded[i], frac[i], uexp[i] = _round_mpf(v, p, emin, emax)
    return rounded, frac, uexp, n_ref


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------
def _import_lucid(retries=10):
    for i in range(retries):
        try:
            import lucid
            return lucid
        except Exception as e:   # the library may be rebuilding
            if i == retries - 1:
                raise
            print(f"import lucid failed ({e!r}); retrying in 60 s", file=sys.stderr)
            time.sleep(60)


def lucid_eval(lucid, name, x):
    for i in range(5):
        try:
            return np.asarray(getattr(lucid, name)(lucid.from_numpy(np.ascontiguousarray(x))).numpy())
        except Exception as e:
            if i == 4:
                raise
            print(f"lucid.{name} failed ({e!r}); retrying in 60 s", file=sys.stderr)
            time.sleep(60)


def ulp_errors(y, rounded, frac, uexp, dtype):
    """|y - exact| / ulp(rounded); inf on a non-finite mismatch."""
    y64 = y.astype(np.float64)
    t = FMT[dtype]["np"]
    r = rounded.astype(t).astype(np.float64)     # exact for both dtypes
    fin_r = np.isfinite(r)
    fin_y = np.isfinite(y64)
    err = np.full(len(y), INF)
    both = fin_r & fin_y
    with np.errstate(all="ignore"):
        d = np.ldexp(y64[both] - r[both], -uexp[both])
        err[both] = np.abs(d - frac[both])
    same_nonfinite = ~fin_r & ~fin_y & ((np.isnan(r) & np.isnan(y64)) | (r == y64))
    err[same_nonfinite] = 0.0
    err[np.isnan(err)] = INF
    return err


def measure(pool, lucid, row, dtype, n, seed, chunk):
    t = FMT[dtype]["np"]
    x = sample_inputs(row, dtype, n, seed)
    y = lucid_eval(lucid, row["name"], x)
    if y.dtype != t:
        print(f"  warning: lucid.{row['name']}({dtype}) returned {y.dtype}", file=sys.stderr)
    x64 = x.astype(np.float64)
    tasks = [(row["mp"], row["ref"], dtype, x64[i:i + chunk]) for i in range(0, len(x), chunk)]
    res = list(pool.imap(_exact_chunk, tasks))
    rounded = np.concatenate([r[0] for r in res])
    frac = np.concatenate([r[1] for r in res])
    uexp = np.concatenate([r[2] for r in res])
    n_ref = sum(r[3] for r in res)
    err = ulp_errors(y, rounded, frac, uexp, dtype)
    finite = np.isfinite(err)
    bad = np.flatnonzero(~finite)
    i_max = int(bad[0]) if len(bad) else int(np.argmax(err))
    over4 = np.flatnonzero(err > 4)
    ar = np.abs(rounded)
    normal = ~((ar > 0) & (ar < float(np.finfo(t).tiny)))     # exact result not subnormal
    err_n = np.where(normal & np.isfinite(err), err, 0.0)   # mismatches are counted apart
    bad_n = np.flatnonzero(~np.isfinite(err_n))
    i_n = int(bad_n[0]) if len(bad_n) else int(np.argmax(err_n))
    return dict(
        max_ulp_normal=float(err_n[i_n]), worst_x_normal=float(x[i_n]),
        n_subnormal_over4=int(np.count_nonzero((err > 4) & ~normal)),
        op=row["name"], dtype=dtype, n=int(len(x)), n_ref=int(n_ref),
        max_ulp=float(err[i_max]), worst_x=float(x[i_max]), worst_y=float(y[i_max]),
        worst_exact=float(rounded[i_max]),
        mean_ulp=float(err[finite].mean()) if finite.any() else INF,
        n_mismatch=int(len(bad)), n_over4=int(len(over4)),
        over4_examples=[(float(x[i]), float(y[i]), float(rounded[i]), float(err[i]))
                        for i in over4[np.argsort(-err[over4], kind="stable")][:5]],
        domain=list(scan_domain(row, dtype)[:2]),
    )


def fmt_x(v, dtype):
    if math.isnan(v) or math.isinf(v):
        return str(v)
    t = FMT[dtype]["np"]
    return np.format_float_positional(t(v), unique=True, trim="-") if 1e-5 <= abs(v) < 1e7 or v == 0 \
        else np.format_float_scientific(t(v), unique=True, trim="-")


def fmt_ulp(v):
    if math.isinf(v):
        return "inf"
    return f"{v:.3g}" if v < 1000 else f"{v:.3e}"


def render(results, dtypes, command, n, prec, elapsed):
    by = {(r["op"], r["dtype"]): r for r in results}
    ops = sorted({r["op"] for r in results})
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    L = ["# lucid element-wise accuracy", "",
         f"Generated by `{command}` on {now} ({elapsed / 60:.1f} min).", "",
         f"Max and mean error in ULPs of every element-wise op in `lucid._core.optable.UNARY`, "
         f"against mpmath at {prec} bits correctly rounded to the dtype, over n = {n:,} inputs "
         f"per (op, dtype) spanning the op's domain in that dtype (uniform in value over the core "
         f"region, uniform in exponent over the full range, focus regions near poles, zeros and "
         f"overflow/underflow thresholds, and special points: +-0, smallest subnormal, smallest "
         f"normal, +-1, largest finite, the domain ends, +-inf).", "",
         "Error = |lucid(x) - f(x)| / ulp(f(x) rounded to the dtype), with f(x) the high-precision "
         "value, so a correctly rounded result scores <= 0.5. A non-finite mismatch (nan vs number, "
         "inf vs finite) counts as inf, and its first input is shown. `worst x` is the input of the "
         "max error.", ""]
    hdr = "| op |"
    sep = "|---|"
    for d in dtypes:
        hdr += f" {d} max ULP | {d} worst x | {d} mean ULP |"
        sep += "---:|---:|---:|"
    hdr += " n |"
    sep += "---:|"
    L += [hdr, sep]
    for op in ops:
        line = f"| {op} |"
        nn = None
        for d in dtypes:
            r = by.get((op, d))
            if r is None:
                line += " - | - | - |"
                continue
            nn = r["n"]
            mx = fmt_ulp(r["max_ulp"])
            if r["max_ulp"] > 4:
                mx = f"**{mx}**"
            wx = fmt_x(r['worst_x'], d) if r["max_ulp"] > 0 else "-"
            line += f" {mx} | {wx} | {r['mean_ulp']:.3g} |"
        line += f" {nn:,} |" if nn else " - |"
        L.append(line)
    L += ["", "## Scan domains", "", "| op | " + " | ".join(dtypes) + " |",
          "|---|" + "---|" * len(dtypes)]
    for op in ops:
        cells = []
        for d in dtypes:
            r = by.get((op, d))
            cells.append("-" if r is None else
                         f"[{fmt_x(r['domain'][0], d)}, {fmt_x(r['domain'][1], d)}]")
        L.append(f"| {op} | " + " | ".join(cells) + " |")
    over = [r for r in results if r["max_ulp"] > 4]
    if over:
        L += ["", "## Over 4 ULP", "",
              "`normal max ULP` excludes the inputs whose exact result is subnormal "
              "(gradual underflow) and the non-finite mismatches; `x (normal)` is where it occurs.", "",
              "| op | dtype | max ULP | x | lucid(x) | f(x) rounded | # inputs > 4 ULP "
              "| of them subnormal results | # non-finite mismatches | normal max ULP | x (normal) |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in sorted(over, key=lambda r: (r["op"], r["dtype"])):
            d = r["dtype"]
            L.append(f"| {r['op']} | {d} | {fmt_ulp(r['max_ulp'])} | {fmt_x(r['worst_x'], d)} | "
                     f"{fmt_x(r['worst_y'], d)} | {fmt_x(r['worst_exact'], d)} | "
                     f"{r['n_over4']:,} | {r['n_subnormal_over4']:,} | {r['n_mismatch']:,} | "
                     f"{fmt_ulp(r['max_ulp_normal'])} | {fmt_x(r['worst_x_normal'], d)} |")
    return "\n".join(L) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="inputs per (op, dtype)")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--ops", default="", help="comma-separated op names (default: all)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    ap.add_argument("--prec", type=int, default=128, help="mpmath working precision (bits)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunk", type=int, default=2000)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "accuracy.md"))
    ap.add_argument("--json", default="", help="also dump the raw results here")
    ap.add_argument("--no-write", action="store_true", help="print the table only")
    ap.add_argument("--from-json", default="",
                    help="do not measure: render the table from a --json dump (e.g. of a run in progress)")
    args = ap.parse_args(argv)

    command = "python tools/accuracy.py" + ("" if argv is None and len(sys.argv) == 1
                                            else " " + " ".join(sys.argv[1:] if argv is None else argv))
    if args.from_json:
        with open(args.from_json) as fh:
            dump = json.load(fh)
        res = dump["results"]
        dts = [d for d in FMT if any(r["dtype"] == d for r in res)]
        md = render(res, dts, dump["command"], dump["n"], dump["prec"], dump.get("elapsed", 0.0))
        print(md)
        if not args.no_write:
            with open(args.out, "w") as fh:
                fh.write(md)
            print(f"wrote {args.out}", file=sys.stderr)
        return 0

    lucid = _import_lucid()
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from op_data import unary_rows
    UNARY = rows = unary_rows()
    if args.ops:
        want = [s.strip() for s in args.ops.split(",") if s.strip()]
        unknown = set(want) - {r["name"] for r in UNARY}
        if unknown:
            ap.error(f"unknown ops: {sorted(unknown)}")
        rows = [r for r in UNARY if r["name"] in want]
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    for d in dtypes:
        if d not in FMT:
            ap.error(f"unknown dtype {d}")

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
            for row in sorted(rows, key=lambda r: r["name"]):
                t1 = time.time()
                r = measure(pool, lucid, row, d, args.n, args.seed, args.chunk)
                results.append(r)
                dump_json()
                flag = "  <-- over 4 ULP" if r["max_ulp"] > 4 else ""
                print(f"{r['op']:>10s} {d}: max {fmt_ulp(r['max_ulp']):>9s} ULP at x = "
                      f"{fmt_x(r['worst_x'], d)} (lucid {fmt_x(r['worst_y'], d)}, exact "
                      f"{fmt_x(r['worst_exact'], d)}), mean {r['mean_ulp']:.3g}, n {r['n']:,}, "
                      f"{time.time() - t1:.1f} s{flag}", file=sys.stderr, flush=True)
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
