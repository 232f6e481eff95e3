"""Shared helpers for the lucid test-suite.

Everything here is an *independent* reference: mpmath at high precision,
numpy, plain finite differences.  Nothing is derived from lucid itself
except through its public API.
"""
import math
import os
import subprocess
import sys
import tempfile

import mpmath
import numpy as np

import lucid

NP_OF = {}
for _name, _np in [("float16", np.float16), ("float32", np.float32),
                   ("float64", np.float64), ("int32", np.int32),
                   ("int64", np.int64), ("bool_", np.bool_)]:
    NP_OF[_name] = np.dtype(_np)

FLOAT_NAMES = ["float16", "float32", "float64"]
ALL_DTYPE_NAMES = ["float16", "float32", "float64", "int32", "int64", "bool_"]


def ldt(name):
    """lucid dtype object from its short name."""
    return getattr(lucid, name)


def np_dtype_of(ldtype):
    """numpy dtype corresponding to a lucid dtype object."""
    for name, npd in NP_OF.items():
        if getattr(lucid, name) is ldtype or getattr(lucid, name) == ldtype:
            return npd
    raise AssertionError("unknown lucid dtype %r" % (ldtype,))


def to_np(t):
    """Copy of a lucid tensor as a numpy array (works with requires_grad)."""
    if t.requires_grad:
        t = t.detach()
    return np.array(t.numpy(), copy=True)


def lt(a, dtype=None, requires_grad=False):
    """lucid tensor from a numpy array (copy), preserving numpy dtype."""
    a = np.asarray(a)
    if dtype is None:
        for name, npd in NP_OF.items():
            if a.dtype == npd:
                dtype = ldt(name)
                break
    return lucid.tensor(a, dtype=dtype, requires_grad=requires_grad)


# --------------------------------------------------------------------------
# ULP comparison
# --------------------------------------------------------------------------
_UINT = {np.dtype(np.float16): (np.uint16, 15),
         np.dtype(np.float32): (np.uint32, 31),
         np.dtype(np.float64): (np.uint64, 63)}


def _ordered_ints(a):
    a = np.ascontiguousarray(a)
    ut, sb = _UINT[a.dtype]
    bits = a.view(ut).astype(object) if a.dtype == np.float64 else a.view(ut).astype(np.int64)
    out = []
    for b in np.ravel(bits).tolist():
        b = int(b)
        mag = b & ((1 << sb) - 1)
        out.append(-mag if (b >> sb) & 1 else mag)
    return out


def ulp_distance(actual, expected):
    """Elementwise ULP distance between two same-dtype float arrays.

    nan/nan -> 0, nan vs number -> inf, equal infinities -> 0.
    """
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    oa = _ordered_ints(actual)
    oe = _ordered_ints(expected)
    fa = np.ravel(actual)
    fe = np.ravel(expected)
    d = np.empty(len(oa), dtype=np.float64)
    for i, (x, y) in enumerate(zip(oa, oe)):
        na, ne = math.isnan(float(fa[i])), math.isnan(float(fe[i]))
        if na or ne:
            d[i] = 0.0 if (na and ne) else math.inf
        else:
            d[i] = float(abs(x - y))
    return d.reshape(actual.shape)


def assert_ulp(actual, expected, max_ulp, x=None, what=""):
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    d = ulp_distance(actual, expected)
    if d.size and d.max() > max_ulp:
        bad = np.argsort(-d.ravel())[:8]
        lines = []
        for i in bad:
            if d.ravel()[i] <= max_ulp:
                break
            xi = "" if x is None else "x=%r " % (np.ravel(x)[i],)
            lines.append("  %sgot=%r want=%r ulp=%g" % (
                xi, np.ravel(actual)[i], np.ravel(expected)[i], d.ravel()[i]))
        raise AssertionError("%s: %d/%d elements exceed %g ULP; worst:\n%s" % (
            what, int((d > max_ulp).sum()), d.size, max_ulp, "\n".join(lines)))


def assert_same_bits(actual, expected, what=""):
    """Bitwise equality (nan == nan regardless of payload)."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, (what, actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    d = ulp_distance(actual, expected)
    # also distinguish -0 / +0
    sa = np.signbit(actual)
    se = np.signbit(expected)
    nan = np.isnan(actual) & np.isnan(expected)
    bad = (d != 0) | ((sa != se) & ~nan)
    if bad.any():
        idx = np.flatnonzero(bad.ravel())[:8]
        raise AssertionError("%s: %d elements differ, first at %s: got %r want %r" % (
            what, int(bad.sum()), idx.tolist(), np.ravel(actual)[idx].tolist(),
            np.ravel(expected)[idx].tolist()))


# --------------------------------------------------------------------------
# mpmath references
# --------------------------------------------------------------------------
MP_PREC = 160


def _mp_one(name, xv):
    if math.isnan(xv):
        return math.nan
    with mpmath.workprec(MP_PREC):
        x = mpmath.mpf(xv)
        if name == "erf":
            r = mpmath.erf(x)
        elif name == "exp":
            if xv > 2000:
                return math.inf
            r = mpmath.exp(x)
        elif name == "log2":
            if xv < 0:
                return math.nan
            if xv == 0:
                return -math.inf
            if math.isinf(xv):
                return math.inf
            r = mpmath.log(x) / mpmath.log(2)
        else:
            raise ValueError(name)
        if name == "erf" and xv == 0:
            return math.copysign(0.0, xv)
        return float(r)  # correctly rounded to double


_REF_CACHE = {}


def mp_ref(name, x, out_dtype):
    """Reference f(x) computed with mpmath, rounded to ``out_dtype``.

    The result is rounded to double first and then to out_dtype; the tiny
    double-rounding risk is covered by the ULP tolerances.
    """
    x = np.asarray(x)
    xs = np.ravel(x).astype(np.float64)
    out = np.empty(xs.shape, dtype=np.float64)
    for i, v in enumerate(xs.tolist()):
        key = (name, v)
        r = _REF_CACHE.get(key)
        if r is None:
            r = _mp_one(name, v)
            _REF_CACHE[key] = r
        out[i] = r
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return out.astype(out_dtype).reshape(x.shape)


def mp_deriv(name, order, x):
    """k-th derivative of erf/exp/log2 at x, in float64, via mpmath closed forms."""
    out = []
    for v in np.ravel(np.asarray(x, dtype=np.float64)).tolist():
        with mpmath.workprec(MP_PREC):
            t = mpmath.mpf(v)
            c = 2 / mpmath.sqrt(mpmath.pi)
            if name == "erf":
                e = mpmath.exp(-t * t)
                r = {0: mpmath.erf(t), 1: c * e, 2: -2 * t * c * e,
                     3: (4 * t * t - 2) * c * e}[order]
            elif name == "exp":
                r = mpmath.exp(t)
            elif name == "log2":
                ln2 = mpmath.log(2)
                r = {0: mpmath.log(t) / ln2, 1: 1 / (t * ln2),
                     2: -1 / (t * t * ln2), 3: 2 / (t ** 3 * ln2)}[order]
            out.append(float(r))
    return np.array(out, dtype=np.float64).reshape(np.shape(x))


# --------------------------------------------------------------------------
# independent finite differences (numpy side, float64)
# --------------------------------------------------------------------------
def fd_grad(fn, arrays, weight, eps=1e-6):
    """Central-difference gradient of sum(fn(*arrays) * weight) w.r.t. each array.

    ``fn`` takes numpy float64 arrays and returns a numpy array.
    """
    grads = []
    for k, a in enumerate(arrays):
        g = np.zeros_like(a, dtype=np.float64)
        flat = g.reshape(-1)
        for i in range(a.size):
            ap = [b.copy() for b in arrays]
            am = [b.copy() for b in arrays]
            ap[k].reshape(-1)[i] += eps
            am[k].reshape(-1)[i] -= eps
            fp = np.sum(np.asarray(fn(*ap)) * weight)
            fm = np.sum(np.asarray(fn(*am)) * weight)
            flat[i] = (fp - fm) / (2 * eps)
        grads.append(g)
    return grads


# -- child processes ----------------------------------------------------------------------
# Tests that need a fresh interpreter (environment switches read at import, fork, crashes)
# run it from a temporary directory with the lucid these tests imported first on the
# path: `python -c` puts the working directory on sys.path, and an unbuilt source tree
# there would shadow the installed, compiled package.
LUCID_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(lucid.__file__)))


def child_env(**extra):
    """os.environ with the lucid under test first on PYTHONPATH, plus ``extra``."""
    path = [LUCID_PARENT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(path), **extra)


def run_child(args, env=None, cwd=None, timeout=600):
    """Run ``python -c args`` (a str) or ``python *args`` (a list) with ``child_env()``
    (or ``env``) from a temporary directory; returns the CompletedProcess (text)."""
    argv = [sys.executable] + (["-c", args] if isinstance(args, str) else list(args))
    return subprocess.run(argv, env=child_env() if env is None else env,
                          cwd=cwd or tempfile.gettempdir(), capture_output=True, text=True,
                          timeout=timeout)


def bitwise_across_threads(f):
    """f() on 1, 2 and 4 threads: its list of results, which must agree bitwise."""
    outs = []
    for nt in (1, 2, 4):
        lucid.set_num_threads(nt)
        outs.append([np.asarray(o) for o in f()])
    for o in outs[1:]:
        for a, b in zip(o, outs[0]):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert a.tobytes() == b.tobytes(), "differs across thread counts"
    return outs[0]
