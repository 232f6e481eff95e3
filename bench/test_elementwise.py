"""Elementwise-op benchmarks: lucid against its peers, as ratios in one run.

Table-driven: the ops are the rows of lucid's op table
(``lucid._core.optable.UNARY``); adding a row there adds its benchmarks here
with no edit in bench/.  From each row this module takes

  name     lucid.<name>
  ref      float64 reference, an expression in x over ``np`` and ``sp``
           (scipy.special).  When it is a single numpy / scipy.special call
           (``np.exp(x)``, ``sp.erf(x)``, ``np.logaddexp(0, x)``) that call is
           also the "numpy" / "scipy" peer.
  grad     the backward formula in g, x, y; evaluated in float64 with NumPy it
           is the gradient reference (central differences if it won't evaluate)
  domain   inputs are drawn uniformly from [lo, hi)
  torch    torch function ("erf", dotted "nn.functional.gelu"), None = no peer
  saves    "" = zero gradient: no fwd_bwd case

One benchmark function, parametrised over op x size x dtype x mode x threads x
peer.  Each (op, size, dtype, mode, threads) is one pytest-benchmark *group*, so
the peers sit side by side in pytest-benchmark's tables and in the ratio table
bench/conftest.py prints at the end (peer median / lucid median).  lucid and
torch are set to the same thread count before every case.

Modes
  fwd      y = op(x)                         x.requires_grad False
  fwd_rg   y = op(x)                         x.requires_grad True (tape recorded)
  fwd_bwd  op(x).sum().backward()            x.grad reset before each call

Peers: lucid, torch, numpy / scipy (where the reference is one call), mlx (when
installed), and at 1e7 "copy": ``x.copy()`` of the same bytes, the
memory-bandwidth floor a 1e7 forward is compared with.

Default matrix (see _lucid_bench for the env knobs; LUCID_BENCH_FULL=1 = all):
  1    exp, erf (the call-overhead cases), modes fwd, fwd_rg, fwd_bwd
  1e3  every op, fwd and fwd_bwd
  1e5  every op, fwd and fwd_bwd
  1e7  LUCID_BENCH_1E7_OPS (exp, erf, sqrt, gelu), fwd and fwd_bwd
  threads: every count of LUCID_BENCH_THREADS at 1e5 and 1e7; at 1 and 1e3
  (below both libraries' parallel thresholds, 2^15 elements) only the first.

Nothing here asserts on time.  Every body first checks, outside the timed
function, that the peer's result matches the float64 reference and that
lucid's (when lucid imports) matches both, so a fast wrong answer cannot pass.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np
import pytest

from _lucid_bench import (FULL, ONLY_OPS, OPS_1E7, THREAD_SET, import_lucid,
                          load_unary_table, set_threads)

# --------------------------------------------------------------------------- ops


def _sp():
    return pytest.importorskip("scipy.special")


def _namespace():
    """``np`` and ``sp`` for evaluating the table's reference expressions."""
    return {"np": np, "sp": _sp()}


def _single_call(expr: str):
    """("numpy"|"scipy", function name, args) when ``expr`` is one np/sp call on x.

    args is a tuple of constants with None standing for x.  None when the
    expression is anything else (``x * x``, ``1 / np.sqrt(x)``, nested calls).
    """
    try:
        node = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return None
    if not (isinstance(node, ast.Call) and not node.keywords
            and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
            and node.func.value.id in ("np", "sp")):
        return None
    args = []
    for a in node.args:
        if isinstance(a, ast.Name) and a.id == "x":
            args.append(None)
        elif isinstance(a, ast.Constant) and isinstance(a.value, (int, float)):
            args.append(a.value)
        elif (isinstance(a, ast.UnaryOp) and isinstance(a.op, ast.USub)
              and isinstance(a.operand, ast.Constant)):
            args.append(-a.operand.value)
        else:
            return None
    if args.count(None) != 1:
        return None
    return ("numpy" if node.func.value.id == "np" else "scipy"), node.func.attr, tuple(args)


# Names the table's graph-mode `grad` formulas use (lucid ops) that NumPy spells
# differently or lacks; anything else is looked up on numpy, then scipy.special.
_GRAD_ALIASES = {"sigmoid": ("sp", "expit"), "abs": ("np", "abs")}


def _grad_namespace(expr: str):
    ns = {}
    sp = None
    for node in ast.walk(ast.parse(expr, mode="eval")):
        if isinstance(node, ast.Name) and node.id not in ("g", "x", "y"):
            name = node.id
            lib, attr = _GRAD_ALIASES.get(name, (None, name))
            if lib != "sp" and hasattr(np, attr):
                ns[name] = getattr(np, attr)
                continue
            sp = sp or _sp()
            if hasattr(sp, attr):
                ns[name] = getattr(sp, attr)
    return ns


@dataclass(frozen=True)
class Op:
    name: str
    ref_expr: str
    grad_expr: str
    domain: tuple
    torch: Optional[str]          # "erf", "nn.functional.gelu", None
    saves: str                    # "" = zero gradient
    numpy: Optional[tuple] = None  # (function name, args) when ref is one np call
    scipy: Optional[tuple] = None  # same for one sp call

    def ref(self, x):
        with np.errstate(all="ignore"):
            return np.asarray(eval(self.ref_expr, _namespace(), {"x": x}), dtype=np.float64)

    def dref(self, x):
        """d/dx in float64: the table's grad formula with g = 1, else central differences."""
        y = self.ref(x)
        try:
            ns = _grad_namespace(self.grad_expr)
            with np.errstate(all="ignore"):
                d = eval(self.grad_expr, ns, {"g": np.ones_like(x), "x": x, "y": y})
            return np.broadcast_to(np.asarray(d, dtype=np.float64), x.shape)
        except Exception:
            h = 1e-6 * np.maximum(1.0, np.abs(x))
            return (self.ref(x + h) - self.ref(x - h)) / (2 * h)


def _op_from_row(row: dict) -> Op:
    call = _single_call(row["ref"])
    return Op(name=row["name"], ref_expr=row["ref"], grad_expr=row.get("grad") or "",
              domain=tuple(float(v) for v in row["domain"]), torch=row.get("torch") or None,
              saves=row.get("saves", "x"),
              numpy=call[1:] if call and call[0] == "numpy" else None,
              scipy=call[1:] if call and call[0] == "scipy" else None)


OPS = {r["name"]: _op_from_row(r) for r in load_unary_table()
       if not ONLY_OPS or r["name"] in ONLY_OPS}

SIZES = {"1": 1, "1e3": 10**3, "1e5": 10**5, "1e7": 10**7}
DTYPES = ["float32", "float64"]
MODES = ["fwd", "fwd_rg", "fwd_bwd"]
ONE_ELEMENT_OPS = ("exp", "erf")   # the call-overhead cases
PARALLEL_MIN = 2**15               # below this neither lucid nor torch threads a kernel
# With --benchmark-disable (CI's smoke run: each case checked and called once),
# the 1e7 cases run on this many elements instead: above the parallel threshold,
# with an odd tail, and 40x cheaper.
SMOKE_MAX = 2**18 + 7

# Loose: catches wrong math / wrong dtype, not last-ulp differences.
TOL = {"float32": dict(rtol=1e-3, atol=1e-5), "float64": dict(rtol=1e-7, atol=1e-10),
       "peer_loose": dict(rtol=1e-3, atol=1e-3)}
# Peers' results known to be less accurate than the float32 tolerance: (peer, op, mode).
# torch evaluates sinc's derivative (cos(pi x) - sinc(x)) / x in float32, which cancels:
# absolute errors up to 3.4e-4 where the derivative crosses zero (28 of 1e5 points).
PEER_LOOSE = {("torch", "sinc", "fwd_bwd")}


def _in_matrix(op: Op, size: str, mode: str, threads: int) -> bool:
    n = SIZES[size]
    if mode == "fwd_bwd" and not op.saves:
        return False                       # zero gradient: nothing to time
    if FULL:
        return True
    if n == 1 and op.name not in ONE_ELEMENT_OPS:
        return False
    if n == 10**7 and op.name not in OPS_1E7:
        return False
    if mode == "fwd_rg" and n != 1:
        return False
    if n < PARALLEL_MIN and threads != THREAD_SET[0]:
        return False
    return True


def make_array(op: Op, size: int, dtype: str) -> np.ndarray:
    rng = np.random.default_rng(1234 + size)
    lo, hi = op.domain
    return rng.uniform(lo, hi, size).astype(dtype)


# ------------------------------------------------------------------------- peers
#
# A peer is a handful of small functions:
#   load()               -> module (pytest.skip()s cleanly when not installed)
#   op(mod, op, a)       -> forward callable, or None when the peer lacks the op
#   make(mod, a, rg)     -> the peer's input built from numpy array `a`
#   fwd(f)               -> callable(x) timed for fwd / fwd_rg (default: f itself)
#   step(mod, f, x)      -> zero-arg callable timed for fwd_bwd (None = no autograd)
#   out(y), grad(x)      -> numpy views of a result / of x's gradient
#   has_op(op, n, mode)  -> static, for collection
#   checked              -> False: its result is not the op (the copy peer)


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


def _torch_op(torch, op, a):
    if not op.torch:
        return None
    f = torch
    for part in op.torch.split("."):
        f = getattr(f, part, None)
        if f is None:
            return None
    return f


def _torch_make(torch, a, rg):
    return torch.from_numpy(a.copy()).requires_grad_(rg)


def _call_peer(lib_load, spec):
    """The numpy / scipy peer: ``lib.<name>(*args)`` with x substituted."""
    if spec is None:
        return None
    name, args = spec
    f = getattr(lib_load(), name, None)
    if f is None:
        return None
    if args == (None,):
        return f
    i = args.index(None)
    pre, post = args[:i], args[i + 1:]

    def call(x):
        return f(*pre, x, *post)

    call.__name__ = name
    return call


def _copy_op(np_mod, op, a):
    # A plain copy that, like every lucid op, returns a new array (so both pay for
    # fresh pages): the floor for a memory-bound element-wise op.
    def copy(x):
        return x.copy()

    return copy


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
    op: Callable[[Any, Op, np.ndarray], Optional[Callable]]
    make: Callable[[Any, np.ndarray, bool], Any]
    step: Optional[Callable] = None
    fwd: Callable[[Callable], Callable] = lambda f: f
    out: Callable[[Any], np.ndarray] = _to_np
    grad: Optional[Callable[[Any], np.ndarray]] = None
    has_op: Callable[[Op, int, str], bool] = lambda op, n, mode: True
    checked: bool = True


PEERS = {
    "lucid": Peer(load=_lucid_load,
                  op=lambda m, op, a: getattr(m, op.name, None),
                  make=_lucid_make,
                  step=_autograd_step,
                  grad=lambda x: _to_np(x.grad)),
    "numpy": Peer(load=lambda: np,
                  op=lambda m, op, a: _call_peer(lambda: np, op.numpy),
                  make=lambda m, a, rg: a,
                  has_op=lambda op, n, mode: op.numpy is not None),
    "scipy": Peer(load=_sp,
                  op=lambda m, op, a: _call_peer(_sp, op.scipy),
                  make=lambda m, a, rg: a,
                  has_op=lambda op, n, mode: op.scipy is not None),
    "torch": Peer(load=lambda: pytest.importorskip("torch"),
                  op=_torch_op,
                  make=_torch_make,
                  step=_autograd_step,
                  grad=lambda x: _to_np(x.grad),
                  has_op=lambda op, n, mode: bool(op.torch)),
    "copy": Peer(load=lambda: np,
                 op=_copy_op,
                 make=lambda m, a, rg: a,
                 has_op=lambda op, n, mode: n >= 10**7 and mode == "fwd",
                 checked=False),
}
if importlib.util.find_spec("mlx") is not None:  # MLX only when installed
    PEERS["mlx"] = Peer(load=lambda: pytest.importorskip("mlx.core"),
                        op=lambda m, op, a: getattr(m, op.name, None),
                        make=lambda m, a, rg: m.array(a),
                        step=_mlx_step,
                        fwd=_mlx_fwd,
                        grad=None)  # taken from step.box below

PEER_ORDER = list(PEERS)  # conftest prints columns in this order


def _applies(op: Op, size: str, mode: str, peer: Peer, peer_name: str) -> bool:
    if not peer.has_op(op, SIZES[size], mode):
        return False
    if mode == "fwd":
        return True
    if peer.step is None:            # no autograd (numpy, scipy, copy)
        return False
    return not (mode == "fwd_rg" and peer_name == "mlx")  # mlx has no requires_grad


def group_name(op, size, dtype, mode, threads):
    return f"{op}-{size}-{dtype}-{mode}-t{threads}"


CASES = [
    pytest.param(o, s, d, m, t, p, id=f"{group_name(o, s, d, m, t)}-{p}")
    for o, s, d, m, t, p in itertools.product(OPS, SIZES, DTYPES, MODES, THREAD_SET, PEERS)
    if _in_matrix(OPS[o], s, m, t) and _applies(OPS[o], s, m, PEERS[p], p)
]


# ---------------------------------------------------------------------- runners


class _Last:
    """Keeps the last computed value per kind (cases of one key run back to back)."""

    def __init__(self):
        self._store = {}

    def get(self, kind, key, compute):
        hit = self._store.get(kind)
        if hit is not None and hit[0] == key:
            return hit[1]
        self._store[kind] = None   # free the old (possibly 1e7-element) value first
        value = compute()
        self._store[kind] = (key, value)
        return value


_cache = _Last()


def _run_forward(peer_name, op, a, rg):
    """Build the peer's input and return (timed_fn, x, result as numpy)."""
    peer = PEERS[peer_name]
    mod = peer.load()
    f = peer.op(mod, op, a)
    if f is None:
        pytest.skip(f"{peer_name} has no {op.name}")
    x = peer.make(mod, a, rg)
    fn = peer.fwd(f)
    with np.errstate(all="ignore"):
        y = peer.out(fn(x))
    return fn, x, y


def _run_backward(peer_name, op, a):
    """Build the peer's input and return (timed_step, gradient as numpy)."""
    peer = PEERS[peer_name]
    mod = peer.load()
    f = peer.op(mod, op, a)
    if f is None:
        pytest.skip(f"{peer_name} has no {op.name}")
    x = peer.make(mod, a, True)
    step = peer.step(mod, f, x)
    step()  # one call on a fresh leaf: x.grad is exactly f'(x)
    g = peer.grad(x) if peer.grad is not None else _to_np(step.box["g"])
    return step, g


def _check(actual, expected, a, what, dtype=True, tol=None):
    actual = np.asarray(actual)
    assert actual.shape == a.shape, f"{what}: shape {actual.shape} != {a.shape}"
    if dtype:
        assert actual.dtype == a.dtype, f"{what}: dtype {actual.dtype} != {a.dtype}"
    tol = TOL[tol or str(a.dtype)]
    with np.errstate(all="ignore"):
        ok = np.isclose(actual, expected, equal_nan=True, **tol)
    if not ok.all():  # the slow path only to word the failure
        np.testing.assert_allclose(actual, expected, err_msg=what, **tol)


# -------------------------------------------------------------------- benchmark


@pytest.mark.parametrize("op_name,size,dtype,mode,threads,peer_name", CASES)
def test_elementwise(request, benchmark, op_name, size, dtype, mode, threads, peer_name):
    op = OPS[op_name]
    n = SIZES[size]
    if n > SMOKE_MAX and request.config.getoption("benchmark_disable", False):
        n = SMOKE_MAX   # the CI smoke run: same code paths, a fraction of the time
    got_threads = set_threads(threads)
    data_key = (op_name, n, dtype)
    a = _cache.get("a", data_key, lambda: make_array(op, n, dtype))
    lucid_ok = import_lucid()[0] is not None and getattr(import_lucid()[0], op_name, None)
    peer = PEERS[peer_name]

    # --- correctness, outside the timed function -------------------------
    # lucid against the float64 reference (once per key and thread count:
    # chunking depends on the thread count), every peer against the reference
    # and lucid against that peer.
    if mode == "fwd_bwd":
        ref = _cache.get("dref", data_key, lambda: op.dref(a.astype(np.float64)))
        what = f"d{op_name}/dx"
        timed, got = _run_backward(peer_name, op, a)
        args = ()
        lucid_res = lambda: _run_backward("lucid", op, a)[1]  # noqa: E731
    else:
        ref = _cache.get("ref", data_key, lambda: op.ref(a.astype(np.float64)))
        what = op_name
        timed, x, got = _run_forward(peer_name, op, a, mode == "fwd_rg")
        args = (x,)
        lucid_res = lambda: _run_forward("lucid", op, a, mode == "fwd_rg")[2]  # noqa: E731
    if peer_name == "lucid":
        _check(got, ref, a, f"lucid {what} vs float64 reference (threads={threads})")
    elif peer.checked:
        # MLX's float64 transcendentals (on its CPU stream) are only float32-accurate
        ptol = "float32" if peer_name == "mlx" else None
        if (peer_name, op_name, mode) in PEER_LOOSE:
            ptol = "peer_loose"
        _check(got, ref, a, f"{peer_name} {what} vs float64 reference", dtype=False, tol=ptol)
        if lucid_ok:
            mine = _cache.get("lucid", data_key + (mode, threads), lucid_res)
            _check(mine, ref, a, f"lucid {what} vs float64 reference (threads={threads})")
            _check(mine, got, a, f"lucid {what} vs {peer_name}", dtype=False, tol=ptol)

    # --- timing ------------------------------------------------------------
    benchmark.group = group_name(op_name, size, dtype, mode, threads)
    benchmark.extra_info.update(op=op_name, size=n, size_label=size, dtype=dtype, mode=mode,
                                threads=threads, peer=peer_name,
                                lucid_threads=got_threads.get("lucid"),
                                torch_threads=got_threads.get("torch"))
    benchmark(timed, *args)
