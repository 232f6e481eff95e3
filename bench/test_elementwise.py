"""Elementwise-op benchmarks: lucid against its peers, as ratios in one run.

One benchmark function, parametrised over op x size x dtype x mode x peer.
Each (op, size, dtype, mode) is one pytest-benchmark *group*, so the peers sit
side by side in pytest-benchmark's tables and in the ratio table that
bench/conftest.py prints at the end (peer median / lucid median).

Modes
  fwd      y = op(x)                         x.requires_grad False
  fwd_rg   y = op(x)                         x.requires_grad True (tape recorded)
  fwd_bwd  op(x).sum().backward()            x.grad reset before each call

Nothing here asserts on time.  Every body first checks, outside the timed
function, that the benchmarked peer's result (and lucid's, when lucid imports)
matches a float64 reference, so a fast wrong answer cannot pass.

Adding an op is one row in OPS; adding a peer is one entry in PEERS.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np
import pytest

from _lucid_bench import import_lucid

# --------------------------------------------------------------------------- ops


def _scipy(name: str) -> Callable:
    """scipy.special.<name>, resolved lazily (scipy is optional)."""

    def f(x):
        return getattr(pytest.importorskip("scipy.special"), name)(x)

    f.__name__ = f"scipy.special.{name}"
    return f


def _erf_ref(x):
    try:
        from scipy.special import erf
    except ImportError:  # pragma: no cover - scipy is a test dependency
        return np.vectorize(math.erf, otypes=[np.float64])(x)
    return erf(x)


@dataclass(frozen=True)
class Op:
    name: str                          # attribute name in lucid / torch / mlx.core
    ref: Callable                      # float64 reference f(x)
    dref: Callable                     # float64 reference f'(x)
    domain: tuple                      # inputs drawn uniformly from [lo, hi)
    numpy: Optional[Callable] = None   # NumPy peer, None = NumPy has no such op
    scipy: Optional[Callable] = None   # SciPy peer


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

OPS = {op.name: op for op in [
    # name   float64 reference  d/dx reference                                  domain       numpy peer    scipy peer
    Op("exp",  np.exp,          np.exp,                                         (-5.0, 5.0), np.exp,       None),
    Op("erf",  _erf_ref,        lambda x: _TWO_OVER_SQRT_PI * np.exp(-x * x),   (-3.0, 3.0), None,         _scipy("erf")),
    Op("log2", np.log2,         lambda x: 1.0 / (x * math.log(2.0)),            (0.01, 100), np.log2,      None),
]}

SIZES = {"1": 1, "1e3": 10**3, "1e5": 10**5, "1e6": 10**6}
DTYPES = ["float32", "float64"]
MODES = ["fwd", "fwd_rg", "fwd_bwd"]

# Loose: catches wrong math / wrong dtype, not last-ulp differences.
TOL = {"float32": dict(rtol=1e-4, atol=1e-6), "float64": dict(rtol=1e-9, atol=1e-12)}


def make_array(op: Op, size: int, dtype: str) -> np.ndarray:
    rng = np.random.default_rng(1234 + size)
    lo, hi = op.domain
    return rng.uniform(lo, hi, size).astype(dtype)


# ------------------------------------------------------------------------- peers
#
# A peer is a handful of small functions:
#   load()               -> module (pytest.skip()s cleanly when not installed)
#   op(mod, op)          -> forward callable, or None when the peer lacks the op
#   make(mod, a, rg)     -> the peer's input built from numpy array `a`
#   fwd(f)               -> callable(x) timed for fwd / fwd_rg (default: f itself)
#   step(mod, f, x)      -> zero-arg callable timed for fwd_bwd (None = no autograd)
#   out(y), grad(x)      -> numpy views of a result / of x's gradient


def _lucid_load():
    mod, err = import_lucid()
    if mod is None:
        pytest.skip(f"lucid does not import: {err}")
    return mod


def _lucid_make(lucid, a, rg):
    dt = getattr(lucid, str(a.dtype))
    try:
        return lucid.tensor(a, dtype=dt, requires_grad=rg)
    except TypeError:  # tensor() wants a list
        return lucid.tensor(a.tolist(), dtype=dt, requires_grad=rg)


def _can_reset_grad(x) -> bool:
    try:
        x.grad = None
        return True
    except (AttributeError, TypeError, ValueError):
        return False


def _autograd_step(mod, f, x):
    """f(x).sum().backward(), resetting x.grad first when the tensor allows it."""
    if _can_reset_grad(x):
        def step():
            x.grad = None
            f(x).sum().backward()
    else:  # accumulate instead (costs lucid an extra add; never flatters it)
        def step():
            f(x).sum().backward()
    return step


def _to_np(t):
    if hasattr(t, "detach"):
        t = t.detach()
    if hasattr(t, "numpy"):
        t = t.numpy()
    return np.asarray(t)


def _torch_make(torch, a, rg):
    return torch.from_numpy(a.copy()).requires_grad_(rg)


def _mlx_step(mx, f, x):
    g = mx.grad(lambda t: f(t).sum())
    box = {}

    def step():
        box["g"] = r = g(x)
        mx.eval(r)

    step.box = box
    return step


def _mlx_fwd(f):
    mx = importlib.import_module("mlx.core")

    def run(x):
        y = f(x)
        mx.eval(y)
        return y

    return run


@dataclass(frozen=True)
class Peer:
    load: Callable[[], Any]
    op: Callable[[Any, Op], Optional[Callable]]
    make: Callable[[Any, np.ndarray, bool], Any]
    step: Optional[Callable] = None
    fwd: Callable[[Callable], Callable] = lambda f: f
    out: Callable[[Any], np.ndarray] = _to_np
    grad: Optional[Callable[[Any], np.ndarray]] = None
    has_op: Callable[[Op], bool] = lambda op: True   # static, for collection


PEERS = {
    "lucid": Peer(load=_lucid_load,
                  op=lambda m, op: getattr(m, op.name, None),
                  make=_lucid_make,
                  step=_autograd_step,
                  grad=lambda x: _to_np(x.grad)),
    "numpy": Peer(load=lambda: np,
                  op=lambda m, op: op.numpy,
                  make=lambda m, a, rg: a,
                  has_op=lambda op: op.numpy is not None),
    "scipy": Peer(load=lambda: pytest.importorskip("scipy.special"),
                  op=lambda m, op: op.scipy,
                  make=lambda m, a, rg: a,
                  has_op=lambda op: op.scipy is not None),
    "torch": Peer(load=lambda: pytest.importorskip("torch"),
                  op=lambda m, op: getattr(m, op.name, None),
                  make=_torch_make,
                  step=_autograd_step,
                  grad=lambda x: _to_np(x.grad)),
}
if importlib.util.find_spec("mlx") is not None:  # MLX only when installed
    PEERS["mlx"] = Peer(load=lambda: pytest.importorskip("mlx.core"),
                        op=lambda m, op: getattr(m, op.name, None),
                        make=lambda m, a, rg: m.array(a),
                        step=_mlx_step,
                        fwd=_mlx_fwd,
                        grad=None)  # taken from step.box below

PEER_ORDER = list(PEERS)  # conftest prints columns in this order


def _applies(op: Op, mode: str, peer: Peer, peer_name: str) -> bool:
    if not peer.has_op(op):
        return False
    if mode == "fwd":
        return True
    if peer.step is None:            # no autograd (numpy, scipy)
        return False
    return not (mode == "fwd_rg" and peer_name == "mlx")  # mlx has no requires_grad


def group_name(op, size, dtype, mode):
    return f"{op}-{size}-{dtype}-{mode}"


CASES = [
    pytest.param(o, s, d, m, p, id=f"{group_name(o, s, d, m)}-{p}")
    for o, s, d, m, p in itertools.product(OPS, SIZES, DTYPES, MODES, PEERS)
    if _applies(OPS[o], m, PEERS[p], p)
]


# ---------------------------------------------------------------------- runners


def _run_forward(peer_name, op, a, rg):
    """Build the peer's input and return (timed_fn, x, result as numpy)."""
    peer = PEERS[peer_name]
    mod = peer.load()
    f = peer.op(mod, op)
    if f is None:
        pytest.skip(f"{peer_name} has no {op.name}")
    x = peer.make(mod, a, rg)
    fn = peer.fwd(f)
    return fn, x, peer.out(fn(x))


def _run_backward(peer_name, op, a):
    """Build the peer's input and return (timed_step, gradient as numpy)."""
    peer = PEERS[peer_name]
    mod = peer.load()
    f = peer.op(mod, op)
    if f is None:
        pytest.skip(f"{peer_name} has no {op.name}")
    x = peer.make(mod, a, True)
    step = peer.step(mod, f, x)
    step()  # one call on a fresh leaf: x.grad is exactly f'(x)
    g = peer.grad(x) if peer.grad is not None else _to_np(step.box["g"])
    return step, g


def _check(actual, expected, a, what):
    actual = np.asarray(actual)
    assert actual.shape == a.shape, f"{what}: shape {actual.shape} != {a.shape}"
    assert actual.dtype == a.dtype, f"{what}: dtype {actual.dtype} != {a.dtype}"
    np.testing.assert_allclose(actual, expected, err_msg=what, **TOL[str(a.dtype)])


# -------------------------------------------------------------------- benchmark


@pytest.mark.parametrize("op_name,size,dtype,mode,peer_name", CASES)
def test_elementwise(benchmark, op_name, size, dtype, mode, peer_name):
    op = OPS[op_name]
    a = make_array(op, SIZES[size], dtype)
    a64 = a.astype(np.float64)
    lucid_ok = import_lucid()[0] is not None

    # --- correctness, outside the timed function -------------------------
    if mode == "fwd_bwd":
        timed, g = _run_backward(peer_name, op, a)
        args = ()
        _check(g, op.dref(a64), a, f"{peer_name} d{op_name}/dx vs float64 reference")
        if lucid_ok and peer_name != "lucid":
            _, g_lucid = _run_backward("lucid", op, a)
            _check(g_lucid, g, a, f"lucid d{op_name}/dx vs {peer_name}")
    else:
        timed, x, y = _run_forward(peer_name, op, a, mode == "fwd_rg")
        args = (x,)
        _check(y, op.ref(a64), a, f"{peer_name} {op_name} vs float64 reference")
        if lucid_ok and peer_name != "lucid":
            _, _, y_lucid = _run_forward("lucid", op, a, mode == "fwd_rg")
            _check(y_lucid, y, a, f"lucid {op_name} vs {peer_name}")

    # --- timing ------------------------------------------------------------
    benchmark.group = group_name(op_name, size, dtype, mode)
    benchmark.extra_info.update(op=op_name, size=SIZES[size], dtype=dtype, mode=mode,
                                peer=peer_name)
    benchmark(timed, *args)
