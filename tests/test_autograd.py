"""Tape autograd: gradients against finite differences, mpmath and torch;
higher derivatives; accumulation; broadcasting; graph freeing; grad modes;
and every error case of the engine."""
import math
import threading
import weakref

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import lucid
from lucid_testutils import assert_same_bits, fd_grad, lt, mp_deriv, to_np

SHAPE_ERR = (RuntimeError, ValueError)
DTYPE_ERR = (TypeError, RuntimeError)
AG = lucid.autograd


# --------------------------------------------------------------------------
# op catalogue: fn(M, *inputs) works for M = lucid and M = torch
# domain: "any" | "pos" (inputs in [0.5, 2])
# --------------------------------------------------------------------------
class Case:
    def __init__(self, name, fn, shapes, domain="any", nonlinear=True):
        self.name, self.fn, self.shapes, self.domain, self.nonlinear = (
            name, fn, shapes, domain, nonlinear)

    def arrays(self, seed=0):
        rng = np.random.default_rng(seed)
        out = []
        for s in self.shapes:
            if self.domain == "pos":
                out.append(rng.uniform(0.5, 2.0, s))
            else:
                out.append(rng.uniform(-1.5, 1.5, s))
        return out

    def __repr__(self):
        return self.name


CASES = [
    Case("erf", lambda M, a: M.erf(a), [(3, 4)]),
    Case("exp", lambda M, a: M.exp(a), [(3, 4)]),
    Case("log2", lambda M, a: M.log2(a), [(3, 4)], "pos"),
    Case("erf_method", lambda M, a: a.erf(), [(5,)]),
    Case("exp_method", lambda M, a: a.exp(), [(5,)]),
    Case("log2_method", lambda M, a: a.log2(), [(5,)], "pos"),
    Case("erf_0d", lambda M, a: M.erf(a), [()]),
    Case("add", lambda M, a, b: a + b, [(3, 1), (1, 4)], nonlinear=False),
    Case("add_fn", lambda M, a, b: M.add(a, b), [(2, 3), (3,)], nonlinear=False),
    Case("add_scalar", lambda M, a: 2.5 + a + 1.0, [(4,)], nonlinear=False),
    Case("sub", lambda M, a, b: a - b, [(2, 3), (2, 1)], nonlinear=False),
    Case("sub_fn", lambda M, a, b: M.sub(a, b), [(3,), (2, 3)], nonlinear=False),
    Case("rsub_scalar", lambda M, a: 3.0 - a, [(4,)], nonlinear=False),
    Case("mul", lambda M, a, b: a * b, [(3, 1), (1, 4)]),
    Case("mul_fn", lambda M, a, b: M.mul(a, b), [(2, 3), ()]),
    Case("mul_scalar", lambda M, a: 3.0 * a * -0.5, [(4,)], nonlinear=False),
    Case("mul_self", lambda M, a: a * a, [(4,)]),
    Case("div", lambda M, a, b: a / b, [(2, 3), (3,)], "pos"),
    Case("div_fn", lambda M, a, b: M.div(a, b), [(2, 1), (1, 3)], "pos"),
    Case("rdiv_scalar", lambda M, a: 2.0 / a, [(4,)], "pos"),
    Case("div_scalar", lambda M, a: a / 4.0, [(4,)], nonlinear=False),
    Case("neg", lambda M, a: -a, [(2, 2)], nonlinear=False),
    Case("neg_fn", lambda M, a: M.neg(a), [(3,)], nonlinear=False),
    Case("pow_tensor", lambda M, a, b: a ** b, [(2, 3), (2, 3)], "pos"),
    Case("pow_tensor_bcast", lambda M, a, b: M.pow(a, b), [(2, 3), (3,)], "pos"),
    Case("pow_int", lambda M, a: a ** 3, [(4,)]),
    Case("pow_2", lambda M, a: M.pow(a, 2), [(4,)]),
    Case("pow_frac", lambda M, a: a ** 2.5, [(4,)], "pos"),
    Case("pow_neg", lambda M, a: a ** -1.5, [(4,)], "pos"),
    Case("rpow_scalar", lambda M, a: 2.0 ** a, [(4,)]),
    Case("sum_all", lambda M, a: a.sum(), [(3, 4)], nonlinear=False),
    Case("sum_dim", lambda M, a: a.sum(dim=1), [(3, 4)], nonlinear=False),
    Case("sum_negdim_keep", lambda M, a: M.sum(a, dim=-1, keepdim=True), [(2, 3, 4)], nonlinear=False),
    Case("sum_tuple", lambda M, a: M.sum(a, dim=(0, 2)), [(2, 3, 4)], nonlinear=False),
    Case("sum_tuple_keep", lambda M, a: a.sum(dim=(0, 2), keepdim=True), [(2, 3, 4)], nonlinear=False),
    Case("mean_all", lambda M, a: a.mean(), [(3, 4)], nonlinear=False),
    Case("mean_dim", lambda M, a: M.mean(a, dim=0), [(3, 4)], nonlinear=False),
    Case("mean_tuple_keep", lambda M, a: a.mean(dim=(1, 2), keepdim=True), [(2, 3, 4)], nonlinear=False),
    Case("composite", lambda M, a, b: M.erf(M.exp(a) * b - 1.0) + M.log2(b * b + 1.0) / (a ** 2 + 1.0),
         [(3, 1), (4,)]),
    Case("composite_reduce", lambda M, a: (M.exp(-a * a) * M.erf(a)).mean(dim=0).sum(),
         [(3, 2)]),
    Case("reuse_diamond", lambda M, a: M.exp(a) * M.exp(a) + M.exp(a), [(3,)]),
]
NONLINEAR = [c for c in CASES if c.nonlinear]


def _lucid_inputs(case, seed=0, dtype=None):
    dtype = dtype or lucid.float64
    return [lt(a, dtype=dtype, requires_grad=True) for a in case.arrays(seed)]


def _weight(case, seed=1):
    out = case.fn(lucid, *[lt(a) for a in case.arrays()])
    return np.random.default_rng(seed).uniform(-1, 1, out.shape)


def _eager_grads(case, arrays, w):
    xs = [lt(a, dtype=lucid.float64, requires_grad=True) for a in arrays]
    y = case.fn(lucid, *xs)
    (y * lt(w)).sum().backward()
    return [to_np(x.grad) for x in xs]


# --------------------------------------------------------------------------
# gradcheck / gradgradcheck (lucid's own, plus independent checks)
# --------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_lucid_gradcheck(case):
    xs = _lucid_inputs(case)
    assert AG.gradcheck(lambda *t: case.fn(lucid, *t), xs)


@pytest.mark.parametrize("case", NONLINEAR, ids=repr)
def test_lucid_gradgradcheck(case):
    xs = _lucid_inputs(case)
    assert AG.gradgradcheck(lambda *t: case.fn(lucid, *t), xs)


def _check_returns_false_or_raises(fn, *args):
    try:
        ok = fn(*args)
    except Exception:  # any GradcheckError-like exception counts as detection
        return
    assert not ok, "wrong gradient not detected"


def test_lucid_gradcheck_detects_wrong_gradient():
    x = lt(np.array([0.3, -0.7, 1.1]), requires_grad=True)
    # d/dx (stopgrad(x) * x) = x, but the true derivative of x*x is 2x
    _check_returns_false_or_raises(AG.gradcheck, lambda t: t.detach() * t, [x])
    _check_returns_false_or_raises(AG.gradcheck, lambda t: lucid.exp(t.detach()) * lucid.erf(t), [x])


def test_lucid_gradgradcheck_detects_wrong_second_derivative():
    x = lt(np.array([0.3, -0.7, 1.1]), requires_grad=True)
    # first derivative exact at the point (2x), second derivative wrong
    _check_returns_false_or_raises(
        AG.gradgradcheck, lambda t: t * t.detach() * 2.0 - t.detach() * t.detach(), [x])


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_grad_vs_finite_differences(case):
    arrays = case.arrays()
    w = _weight(case)
    got = _eager_grads(case, arrays, w)
    fwd = lambda *a: to_np(case.fn(lucid, *[lt(b) for b in a]))
    want = fd_grad(fwd, arrays, w)
    for g, r, a in zip(got, want, arrays):
        assert g.shape == a.shape
        np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_graph_mode_grad_equals_eager(case):
    arrays = case.arrays()
    w = _weight(case)
    eager = _eager_grads(case, arrays, w)
    xs = [lt(a, requires_grad=True) for a in arrays]
    y = (case.fn(lucid, *xs) * lt(w)).sum()
    graph = AG.grad(y, xs, create_graph=True)
    assert isinstance(graph, tuple) and len(graph) == len(xs)
    for g, e in zip(graph, eager):
        np.testing.assert_allclose(to_np(g), e, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("case", NONLINEAR, ids=repr)
def test_second_order_vs_finite_differences(case):
    arrays = case.arrays()
    w = _weight(case)
    vs = [np.random.default_rng(5 + i).uniform(-1, 1, a.shape) for i, a in enumerate(arrays)]

    def h(*a):  # scalar: <grad L(a), v>
        return sum(float((g * v).sum()) for g, v in zip(_eager_grads(case, a, w), vs))

    want = fd_grad(lambda *a: np.array(h(*a)), arrays, 1.0, eps=1e-5)
    xs = [lt(a, requires_grad=True) for a in arrays]
    L = (case.fn(lucid, *xs) * lt(w)).sum()
    gs = AG.grad(L, xs, create_graph=True)
    M = None
    for g, v in zip(gs, vs):
        if g.requires_grad:
            term = (g * lt(v)).sum()
            M = term if M is None else M + term
    assert M is not None, "first derivative of a nonlinear op is not differentiable"
    hv = AG.grad(M, xs, allow_unused=True)
    for got, r, a in zip(hv, want, arrays):
        got = np.zeros(a.shape) if got is None else to_np(got)
        np.testing.assert_allclose(got, r, rtol=1e-5, atol=1e-7)


# --------------------------------------------------------------------------
# against torch (float32 and float64, first and second order)
# --------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=repr)
def test_grad_vs_torch(torch, case, dt):
    arrays = [a.astype(dt) for a in case.arrays()]
    w = _weight(case).astype(dt)
    xs = [lt(a, requires_grad=True) for a in arrays]
    y = case.fn(lucid, *xs)
    y.backward(gradient=lt(w))
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    ty = case.fn(torch, *ts)
    assert y.shape == tuple(ty.shape)
    assert str(y.dtype) == str(ty.dtype).replace("torch", "lucid")
    ty.backward(gradient=torch.tensor(w))
    tol = dict(rtol=2e-5, atol=1e-6) if dt == "float32" else dict(rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(to_np(y), ty.detach().numpy(), **tol)
    for x, t in zip(xs, ts):
        assert x.grad.dtype is x.dtype and x.grad.shape == x.shape
        np.testing.assert_allclose(to_np(x.grad), t.grad.numpy(), **tol)


@pytest.mark.parametrize("case", NONLINEAR, ids=repr)
def test_second_and_third_order_vs_torch(torch, case):
    arrays = case.arrays()
    w = _weight(case)

    def run(M, xs, wrap):
        y = (case.fn(M, *xs) * wrap(w)).sum()
        g1 = M.autograd.grad(y, xs, create_graph=True, allow_unused=True)
        s = None
        for g in g1:
            if g is not None and g.requires_grad:
                s = g.sum() if s is None else s + g.sum()
        g2 = M.autograd.grad(s, xs, create_graph=True, allow_unused=True)
        s2 = None
        for g in g2:
            if g is not None and g.requires_grad:
                s2 = (g * g).sum() if s2 is None else s2 + (g * g).sum()
        g3 = M.autograd.grad(s2, xs, allow_unused=True) if s2 is not None else [None] * len(xs)
        return g1, g2, g3

    lx = [lt(a, requires_grad=True) for a in arrays]
    tx = [torch.tensor(a, requires_grad=True) for a in arrays]
    lres = run(lucid, lx, lt)
    tres = run(torch, tx, torch.tensor)
    for order, (lg, tg) in enumerate(zip(lres, tres), 1):
        for a, l, t, x in zip(arrays, lg, tg, lx):
            lv = np.zeros(a.shape) if l is None else to_np(l)
            tv = np.zeros(a.shape) if t is None else t.detach().numpy()
            np.testing.assert_allclose(lv, tv, rtol=1e-11, atol=1e-12,
                                       err_msg="order %d" % order)


# --------------------------------------------------------------------------
# unary derivatives vs mpmath closed forms, up to third order
# --------------------------------------------------------------------------
UNARY = {"erf": (-2.5, 2.5), "exp": (-5.0, 5.0), "log2": (0.2, 6.0)}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_derivatives_up_to_third_vs_mpmath(op):
    lo, hi = UNARY[op]
    x0 = np.linspace(lo, hi, 23)
    x = lt(x0, requires_grad=True)
    out = getattr(lucid, op)(x)
    for order in (1, 2, 3):
        (d,) = AG.grad(out.sum(), [x], create_graph=order < 3)
        np.testing.assert_allclose(to_np(d), mp_deriv(op, order, x0), rtol=1e-13, atol=1e-14,
                                   err_msg="%s order %d" % (op, order))
        out = d


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_third_order_via_backward(op):
    lo, hi = UNARY[op]
    x0 = np.linspace(lo, hi, 7)
    x = lt(x0, requires_grad=True)
    y = getattr(lucid, op)(x).sum()
    y.backward(create_graph=True)
    g1 = x.grad
    assert g1.requires_grad and g1.grad_fn is not None
    x.grad = None
    g1.sum().backward(create_graph=True)
    g2 = x.grad
    x.grad = None
    g2.sum().backward()
    np.testing.assert_allclose(to_np(g2), mp_deriv(op, 2, x0), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(to_np(x.grad), mp_deriv(op, 3, x0), rtol=1e-13, atol=1e-14)


# eager (fused C kernel) backward accuracy, float32 and float64
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("op", sorted(UNARY))
def test_eager_backward_accuracy(op, dt):
    lo, hi = {"erf": (-4.0, 4.0), "exp": (-30.0, 30.0), "log2": (1e-3, 1e3)}[op]
    rng = np.random.default_rng(3)
    x0 = (np.exp(rng.uniform(np.log(lo), np.log(hi), 257)) if op == "log2"
          else rng.uniform(lo, hi, 257)).astype(dt)
    w0 = rng.uniform(-2, 2, x0.shape).astype(dt)
    x = lt(x0, requires_grad=True)
    y = getattr(lucid, op)(x)
    y.backward(gradient=lt(w0))
    got = to_np(x.grad)
    assert got.dtype == np.dtype(dt)
    want = w0.astype(np.float64) * mp_deriv(op, 1, x0.astype(np.float64))
    eps = np.finfo(dt).eps
    xx = x0.astype(np.float64) ** 2
    rtol = 8 * eps * (1 + (xx if op == "erf" else 0))
    assert (np.abs(got - want) <= rtol * np.abs(want) + np.finfo(dt).tiny).all(), (
        np.max(np.abs(got - want) / np.abs(want)))
    if op == "exp":
        # saves its output: the gradient is exactly g * y (one IEEE multiply)
        assert_same_bits(got, (w0 * to_np(y)).astype(dt), "exp grad == g*y")


@pytest.mark.parametrize("op,x,want", [
    ("erf", math.inf, 0.0), ("erf", -math.inf, 0.0), ("erf", 30.0, 0.0),
    ("exp", -math.inf, 0.0), ("exp", math.inf, math.inf), ("exp", 0.0, 1.0),
    ("log2", 0.0, math.inf), ("log2", math.inf, 0.0), ("log2", 1.0, 1 / math.log(2)),
])
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_backward_edge_values(torch, op, x, want, dt):
    for n in (1, 9):
        a = np.full(n, x, dtype=dt)
        t = lt(a, requires_grad=True)
        getattr(lucid, op)(t).sum().backward()
        got = to_np(t.grad)
        tt = torch.tensor(a, requires_grad=True)
        getattr(torch, op)(tt).sum().backward()
        np.testing.assert_allclose(got, tt.grad.numpy(), rtol=1e-6)
        np.testing.assert_allclose(got, np.full(n, want, dtype=dt), rtol=1e-6)


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("op", sorted(UNARY))
def test_backward_independent_of_length_and_alignment(op, dt):
    rng = np.random.default_rng(17)
    lo, hi = UNARY[op]
    base = rng.uniform(lo, hi, 120).astype(dt)
    wbase = rng.uniform(-2, 2, 120).astype(dt)

    def grad_of(xa, wa, share):
        x = lucid.from_numpy(xa) if share else lt(xa.copy())
        x.requires_grad_()
        y = getattr(lucid, op)(x)
        y.backward(gradient=lucid.from_numpy(wa) if share else lt(wa.copy()))
        return to_np(x.grad)

    single = np.concatenate([grad_of(base[i:i + 1].copy(), wbase[i:i + 1].copy(), False)
                             for i in range(base.size)])
    for off in (0, 1, 3, 5):
        for n in range(0, 101):
            xa = base[off:off + n].copy() if off == 0 else base[off:off + n]
            wa = wbase[off:off + n]
            got = grad_of(xa, wa, share=True)
            assert_same_bits(got, single[off:off + n], "%s off=%d n=%d" % (op, off, n))


# --------------------------------------------------------------------------
# float16 leaves
# --------------------------------------------------------------------------
@pytest.mark.parametrize("op", sorted(UNARY))
def test_float16_leaf_gets_float16_grad(op):
    lo, hi = UNARY[op]
    x0 = np.linspace(lo, hi, 11).astype(np.float16)
    x = lt(x0, requires_grad=True)
    y = getattr(lucid, op)(x)
    y.sum().backward()
    assert x.grad.dtype is lucid.float16
    assert x.grad.shape == x.shape
    want = mp_deriv(op, 1, x0.astype(np.float64))
    np.testing.assert_allclose(to_np(x.grad).astype(np.float64), want, rtol=4e-3, atol=1e-4)


def test_float16_leaf_through_chain():
    x0 = np.array([0.25, 0.5, 1.0], dtype=np.float16)
    x = lt(x0, requires_grad=True)
    y = (lucid.exp(x) * lucid.erf(x)).sum()  # float32 * float16 chain
    y.backward()
    assert x.grad.dtype is lucid.float16
    xd = x0.astype(np.float64)
    want = np.exp(xd) * mp_deriv("erf", 0, xd) + np.exp(xd) * mp_deriv("erf", 1, xd)
    np.testing.assert_allclose(to_np(x.grad).astype(np.float64), want, rtol=4e-3)


# --------------------------------------------------------------------------
# accumulation and broadcasting
# --------------------------------------------------------------------------
def test_grad_accumulates_across_backward_calls():
    x0 = np.array([0.1, 0.7, -1.3])
    x = lt(x0, requires_grad=True)
    lucid.erf(x).sum().backward()
    g1 = to_np(x.grad)
    lucid.erf(x).sum().backward()
    np.testing.assert_allclose(to_np(x.grad), 2 * g1, rtol=1e-15)
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(to_np(x.grad), 2 * g1 + 3.0, rtol=1e-15)
    x.grad = None
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(to_np(x.grad), 3.0)


def test_accumulation_does_not_alias_gradient_argument():
    x = lt(np.zeros(3), requires_grad=True)
    g = lt(np.ones(3))
    (x * 1.0).backward(gradient=g)
    (x * 1.0).backward(gradient=g)
    np.testing.assert_array_equal(to_np(g), np.ones(3))
    np.testing.assert_array_equal(to_np(x.grad), np.full(3, 2.0))



@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("shape_b", [(200, 300), (300,), (200, 1)])
def test_add_and_sub_leaves_get_their_own_gradient_arrays(op, shape_b):
    # the gradient w.r.t. a full-shaped operand of add (and sub's first) is the
    # incoming gradient itself; each leaf must still own its .grad, and the user's
    # gradient argument stays untouched
    rng = np.random.default_rng(0)
    a0, b0 = rng.standard_normal((200, 300)), rng.standard_normal(shape_b)
    g = rng.standard_normal((200, 300))
    sign = 1.0 if op == "add" else -1.0
    axes = tuple(i for i in range(2) if len(shape_b) < 2 - i or shape_b[i - 2 + len(shape_b)] == 1)
    want_b = sign * (g.sum(axis=axes, keepdims=len(shape_b) == 2).reshape(shape_b)
                     if axes else g)
    for gradient in (g, None):
        x, y = lt(a0, requires_grad=True), lt(b0, requires_grad=True)
        out = x + y if op == "add" else x - y
        if gradient is None:
            out.sum().backward()
            gx, gy = np.ones_like(a0), sign * np.broadcast_to(
                np.ones_like(a0).sum(axis=axes, keepdims=len(shape_b) == 2).reshape(shape_b)
                if axes else np.ones_like(a0), shape_b)
        else:
            gt = lt(gradient.copy())
            out.backward(gradient=gt)
            gx, gy = gradient, want_b
        np.testing.assert_array_equal(to_np(x.grad), gx)
        np.testing.assert_allclose(to_np(y.grad), gy, rtol=1e-12, atol=1e-12)
        before_y = to_np(y.grad).copy()
        x.grad.numpy()[...] = 7.0            # the leaves' gradients share no memory
        np.testing.assert_array_equal(to_np(y.grad), before_y)
        if gradient is not None:
            np.testing.assert_array_equal(to_np(gt), gradient)

@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "broadcast"])
def test_accumulation_matches_numpy_add_bit_for_bit(dt, layout):
    """Gradients accumulate into an existing .grad exactly as NumPy's add (the in-place
    fast path for contiguous float32/float64 must give the same bits as np.add)."""
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal((7, 5)).astype(dt)
    g1 = rng.standard_normal((7, 5)).astype(dt) * np.float32(1e3).astype(dt)
    g2 = rng.standard_normal((5, 7) if layout == "transposed" else (7, 5)).astype(dt)
    x = lt(x0, requires_grad=True)
    (x * 1.0).backward(gradient=lt(g1))
    if layout == "transposed":
        (x * 1.0).backward(gradient=lt(g2).T)
        want = g1 + g2.T
    elif layout == "broadcast":
        (x * lt(np.ones(5, dt))).backward(gradient=lt(g2))
        want = g1 + g2
    else:
        (x * 1.0).backward(gradient=lt(g2))
        want = g1 + g2
    assert x.grad.dtype == lt(x0).dtype
    assert_same_bits(to_np(x.grad), want.astype(dt))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("n", [5, 70000])
def test_gradients_meeting_at_a_node_sum_as_numpy_add(dt, n):
    """Two branches send gradient to one node; the engine's sum of the two (done without
    NumPy's dispatch for plain arrays) gives the bits np.add gives, small and large."""
    rng = np.random.default_rng(7)
    g = rng.standard_normal(n).astype(dt)
    c1, c2 = 0.3, -1.7
    x = lt(rng.standard_normal(n).astype(dt), requires_grad=True)
    h = x * 1.0
    (h * c1 + h * c2).backward(gradient=lt(g))
    want = np.add(g * dt(c1), g * dt(c2))
    assert_same_bits(to_np(x.grad), want)


def test_backward_inputs_accumulates_only_into_those_vs_torch(torch):
    a0, b0 = np.array([1.0, 2.0, -0.5]), np.array([3.0, -4.0, 0.25])
    la, lb = lt(a0, requires_grad=True), lt(b0, requires_grad=True)
    ta = torch.tensor(a0, requires_grad=True)
    tb = torch.tensor(b0, requires_grad=True)
    lm, tm = la * lb, ta * tb
    lm.retain_grad()
    tm.retain_grad()
    (lm * la).sum().backward(inputs=[la])
    (tm * ta).sum().backward(inputs=[ta])
    np.testing.assert_allclose(to_np(la.grad), ta.grad.numpy(), rtol=1e-15)
    assert lb.grad is None and tb.grad is None
    # A retained non-leaf on the path still receives its gradient, as in PyTorch.
    np.testing.assert_allclose(to_np(lm.grad), tm.grad.numpy(), rtol=1e-15)
    # A non-leaf input gets its .grad too, and a single tensor is accepted.
    lm2, tm2 = la * lb, ta * tb
    (lm2 * 2.0).sum().backward(inputs=lm2)
    (tm2 * 2.0).sum().backward(inputs=tm2)
    np.testing.assert_allclose(to_np(lm2.grad), tm2.grad.numpy(), rtol=1e-15)
    # lucid.autograd.backward takes the same argument and accumulates.
    lucid.autograd.backward([(la * lb).sum()], inputs=[lb])
    torch.autograd.backward([(ta * tb).sum()], inputs=[tb])
    np.testing.assert_allclose(to_np(lb.grad), tb.grad.numpy(), rtol=1e-15)
    np.testing.assert_allclose(to_np(la.grad), ta.grad.numpy(), rtol=1e-15)
    with pytest.raises(lucid.LucidError, match="inputs"):
        (la * 2.0).sum().backward(inputs=[])


def test_same_leaf_used_many_times():
    x = lt(np.array([1.5, -0.5]), requires_grad=True)
    y = (x * x * x + x + x - x / 2.0).sum()
    y.backward()
    np.testing.assert_allclose(to_np(x.grad), 3 * np.array([1.5, -0.5]) ** 2 + 1.5, rtol=1e-15)


def test_grad_has_no_graph_without_create_graph():
    x = lt(np.array([0.5, 1.0]), requires_grad=True)
    lucid.exp(x).sum().backward()
    assert not x.grad.requires_grad and x.grad.grad_fn is None


def test_create_graph_grad_is_differentiable():
    x = lt(np.array([0.5, 1.0]), requires_grad=True)
    lucid.exp(x * x).sum().backward(create_graph=True)
    assert x.grad.requires_grad and x.grad.grad_fn is not None


@pytest.mark.parametrize("sa,sb", [
    ((3, 1), (1, 4)), ((4,), (3, 4)), ((), (2, 3)), ((5, 1, 3), (4, 1)),
    ((2, 1, 1), (1, 3, 1)), ((1,), (1,)), ((0, 3), (1, 3)), ((2, 3), (2, 3)),
])
@pytest.mark.parametrize("opname", ["add", "sub", "mul", "div", "pow"])
def test_broadcast_grads_vs_torch(torch, sa, sb, opname):
    rng = np.random.default_rng(0)
    a0, b0 = rng.uniform(0.5, 2, sa), rng.uniform(0.5, 2, sb)
    f = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
         "div": lambda a, b: a / b, "pow": lambda a, b: a ** b}[opname]
    a, b = lt(a0, requires_grad=True), lt(b0, requires_grad=True)
    y = f(a, b)
    ta, tb = torch.tensor(a0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    ty = f(ta, tb)
    assert y.shape == tuple(ty.shape)
    w = rng.uniform(-1, 1, y.shape)
    y.backward(gradient=lt(w))
    ty.backward(gradient=torch.tensor(w))
    assert a.grad.shape == sa and b.grad.shape == sb
    np.testing.assert_allclose(to_np(a.grad), ta.grad.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(to_np(b.grad), tb.grad.numpy(), rtol=1e-12, atol=1e-14)


@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=3),
       opname=st.sampled_from(["add", "sub", "mul", "div"]))
def test_broadcast_hypothesis_vs_numpy(shapes, opname):
    sa, sb = shapes.input_shapes
    rng = np.random.default_rng(1)
    a0, b0 = rng.uniform(0.5, 2, sa), rng.uniform(0.5, 2, sb)
    npf = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[opname]
    a, b = lt(a0, requires_grad=True), lt(b0, requires_grad=True)
    y = getattr(lucid, opname)(a, b)
    want = npf(a0, b0)
    assert y.shape == shapes.result_shape == want.shape
    np.testing.assert_allclose(to_np(y), want, rtol=1e-15)
    y.sum().backward()
    # d/da sum(f(a,b)) reduced back to a's shape
    da = {"add": np.ones_like(want), "sub": np.ones_like(want),
          "mul": np.broadcast_to(b0, want.shape), "div": np.broadcast_to(1 / b0, want.shape)}[opname]
    db = {"add": np.ones_like(want), "sub": -np.ones_like(want),
          "mul": np.broadcast_to(a0, want.shape), "div": -np.broadcast_to(a0, want.shape) / np.broadcast_to(b0, want.shape) ** 2}[opname]

    def reduce_to(g, shape):
        while g.ndim > len(shape):
            g = g.sum(axis=0)
        for i, s in enumerate(shape):
            if s == 1 and g.shape[i] != 1:
                g = g.sum(axis=i, keepdims=True)
        return g

    np.testing.assert_allclose(to_np(a.grad), reduce_to(da, sa), rtol=1e-13)
    np.testing.assert_allclose(to_np(b.grad), reduce_to(db, sb), rtol=1e-13)


@pytest.mark.parametrize("sa,sb", [((3,), (4,)), ((2, 3), (3, 2)), ((2, 3), (4, 1, 2))])
@pytest.mark.parametrize("opname", ["add", "sub", "mul", "div", "pow"])
def test_broadcast_failure_raises(sa, sb, opname):
    a, b = lucid.ones(sa), lucid.ones(sb)
    f = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
         "div": lambda: a / b, "pow": lambda: a ** b}[opname]
    with pytest.raises(SHAPE_ERR):
        f()
    with pytest.raises(SHAPE_ERR):
        getattr(lucid, opname)(a, b)


@pytest.mark.parametrize("dim", [None, 0, 1, -1, (0, 1), (0, 2), (-1, 0)])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("red", ["sum", "mean"])
def test_reductions_values_and_grads_vs_torch(torch, dim, keepdim, red):
    rng = np.random.default_rng(4)
    x0 = rng.standard_normal((2, 3, 4))
    x = lt(x0, requires_grad=True)
    tx = torch.tensor(x0, requires_grad=True)
    if dim is None:
        if keepdim:
            pytest.skip("keepdim needs dim")
        y, ty = getattr(x, red)(), getattr(tx, red)()
    else:
        y = getattr(lucid, red)(x, dim=dim, keepdim=keepdim)
        ty = getattr(torch, red)(tx, dim=dim, keepdim=keepdim)
    assert y.shape == tuple(ty.shape)
    np.testing.assert_allclose(to_np(y), ty.detach().numpy(), rtol=1e-13, atol=1e-15)
    w = rng.standard_normal(y.shape)
    y.backward(gradient=lt(w))
    ty.backward(gradient=torch.tensor(w))
    np.testing.assert_allclose(to_np(x.grad), tx.grad.numpy(), rtol=1e-13)


@pytest.mark.parametrize("dim", [3, -4, (0, 0), (1, 5)])
def test_reduction_bad_dim_raises(dim):
    x = lucid.ones(2, 3, 4)
    with pytest.raises((IndexError, RuntimeError, ValueError)):
        lucid.sum(x, dim=dim)


def test_reductions_empty_and_0d(torch):
    e = lucid.zeros(0, 3)
    assert to_np(e.sum()).item() == 0.0
    assert lucid.sum(e, dim=0).shape == (3,)
    assert math.isnan(to_np(e.mean()).item())  # as torch / numpy: 0/0
    s = lt(np.array(2.5), requires_grad=True)
    s.sum().backward()
    assert s.grad.shape == () and s.grad.item() == 1.0


# --------------------------------------------------------------------------
# retain_graph / freed graphs
# --------------------------------------------------------------------------
ALL_OPS = {
    "erf": lambda x: lucid.erf(x), "exp": lambda x: lucid.exp(x), "log2": lambda x: lucid.log2(x),
    "add": lambda x: x + 1.0, "sub": lambda x: 1.0 - x, "mul": lambda x: x * x,
    "div": lambda x: 1.0 / x, "neg": lambda x: -x, "pow": lambda x: x ** 2.0,
    "sum": lambda x: x.sum(), "mean": lambda x: x.mean(dim=0),
}


@pytest.mark.parametrize("op", sorted(ALL_OPS))
def test_second_backward_without_retain_raises(op):
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    y = ALL_OPS[op](x).sum()
    y.backward()
    g = to_np(x.grad)
    with pytest.raises(RuntimeError):
        y.backward()
    np.testing.assert_array_equal(to_np(x.grad), g)  # failed backward changed nothing
    with pytest.raises(RuntimeError):
        AG.grad(y, [x])


@pytest.mark.parametrize("op", sorted(ALL_OPS))
def test_retain_graph_allows_repeat(op):
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    y = ALL_OPS[op](x).sum()
    y.backward(retain_graph=True)
    g = to_np(x.grad)
    y.backward(retain_graph=True)
    (gx,) = AG.grad(y, [x], retain_graph=True)
    np.testing.assert_allclose(to_np(gx), g, rtol=1e-15)
    y.backward()
    np.testing.assert_allclose(to_np(x.grad), 3 * g, rtol=1e-15)
    with pytest.raises(RuntimeError):
        y.backward()


def test_partially_freed_graph_raises():
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    y = lucid.exp(x)
    y.sum().backward()
    with pytest.raises(RuntimeError):
        (y * 2.0).sum().backward()


def test_create_graph_retains_by_default():
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    y = lucid.erf(x).sum()
    y.backward(create_graph=True)
    y.backward()  # retain_graph defaults to create_graph
    np.testing.assert_allclose(to_np(x.grad), 2 * mp_deriv("erf", 1, [0.5, 1.5]), rtol=1e-14)


def _collect_nodes(root):
    seen, stack, out = set(), [root], []
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        out.append(n)
        for nxt, _ in n.next_functions:
            stack.append(nxt)
    return out


def _graph_refs(y):
    nodes = _collect_nodes(y.grad_fn)
    refs = [weakref.ref(n) for n in nodes if type(n).__name__ != "AccumulateGrad"]
    return refs


@pytest.mark.parametrize("op", sorted(ALL_OPS))
def test_graph_freed_when_last_tensor_dies(no_gc, op):
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    y = lucid.erf(ALL_OPS[op](lucid.exp(x) * 1.5)).sum()
    refs = _graph_refs(y)
    assert len(refs) >= 4
    assert all(r() is not None for r in refs)
    del y
    alive = [type(r()).__name__ for r in refs if r() is not None]
    assert not alive, "graph nodes kept alive without the cyclic GC: %s" % alive


@pytest.mark.parametrize("op", ["erf", "exp", "log2"])
def test_output_and_node_freed_no_cycle(no_gc, op):
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    y = getattr(lucid, op)(x)
    ry, rn = weakref.ref(y), weakref.ref(y.grad_fn)
    del y
    assert ry() is None, "output tensor kept alive (reference cycle through its node?)"
    assert rn() is None, "backward node kept alive"
    assert x.grad_fn is None and x.requires_grad  # leaf untouched


def test_graph_freed_after_retained_backward(no_gc):
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    y = (lucid.exp(x) * lucid.log2(x)).sum()
    y.backward(retain_graph=True)
    refs = _graph_refs(y)
    del y
    assert all(r() is None for r in refs)


def test_saved_tensors_released_after_backward(no_gc):
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    h = x * 2.0          # erf saves its input h
    y = lucid.erf(h)
    rh = weakref.ref(h)
    del h
    y.sum().backward()
    assert rh() is None, "saved input still referenced after a non-retaining backward"
    assert y.grad_fn is not None


def test_exp_does_not_keep_its_input(no_gc):
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    h = x * 2.0
    y = lucid.exp(h)  # saves only its output
    rh = weakref.ref(h)
    del h
    assert rh() is None, "ExpBackward keeps its input alive"
    y.sum().backward()
    np.testing.assert_allclose(to_np(x.grad), 2 * np.exp([1.0, 3.0]), rtol=1e-15)


def test_freed_graph_error_message_is_clear():
    x = lt(np.array([0.5]), requires_grad=True)
    y = lucid.log2(x).sum()
    y.backward()
    with pytest.raises(RuntimeError) as ei:
        y.backward()
    msg = str(ei.value).lower()
    assert "retain_graph" in msg or "second time" in msg or "freed" in msg or "released" in msg


# --------------------------------------------------------------------------
# backward / autograd.grad API and errors
# --------------------------------------------------------------------------
def test_backward_non_scalar_requires_gradient():
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    y = lucid.exp(x)
    with pytest.raises(RuntimeError):
        y.backward()
    y.backward(gradient=lt(np.array([1.0, -2.0])))
    np.testing.assert_allclose(to_np(x.grad), np.exp([0.5, 1.5]) * [1.0, -2.0], rtol=1e-15)


@pytest.mark.parametrize("gshape", [(3,), (2, 1), (1,), ()])
def test_backward_gradient_wrong_shape(gshape):
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    y = lucid.exp(x)
    with pytest.raises(SHAPE_ERR):
        y.backward(gradient=lucid.ones(gshape, dtype=lucid.float64))


def test_autograd_grad_outputs_wrong_shape():
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    y = lucid.exp(x)
    with pytest.raises(SHAPE_ERR):
        AG.grad(y, [x], grad_outputs=[lucid.ones(3, dtype=lucid.float64)])


def test_backward_scalar_with_explicit_gradient():
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    lucid.exp(x).sum().backward(gradient=lt(np.array(3.0)))
    np.testing.assert_allclose(to_np(x.grad), 3 * np.exp([0.5, 1.5]), rtol=1e-15)


def test_backward_on_tensor_not_requiring_grad():
    x = lt(np.array([0.5, 1.5]))
    with pytest.raises(RuntimeError):
        lucid.exp(x).sum().backward()
    with pytest.raises(RuntimeError):
        x.sum().backward()
    with lucid.no_grad():
        y = lucid.exp(lt(np.array([0.5]), requires_grad=True)).sum()
    with pytest.raises(RuntimeError):
        y.backward()


def test_autograd_grad_basic():
    x0 = np.array([0.2, 0.9])
    x = lt(x0, requires_grad=True)
    z = lt(np.array([1.0, 2.0]), requires_grad=True)
    y = (lucid.erf(x) * z).sum()
    gx, gz = AG.grad(y, [x, z])
    np.testing.assert_allclose(to_np(gx), mp_deriv("erf", 1, x0) * [1.0, 2.0], rtol=1e-14)
    np.testing.assert_allclose(to_np(gz), mp_deriv("erf", 0, x0), rtol=1e-14)
    assert x.grad is None and z.grad is None  # autograd.grad does not accumulate


def test_autograd_grad_single_tensor_args_and_non_leaf():
    x = lt(np.array([0.2, 0.9]), requires_grad=True)
    h = x * 3.0
    y = lucid.exp(h).sum()
    res = AG.grad(y, h)
    assert isinstance(res, tuple) and len(res) == 1
    np.testing.assert_allclose(to_np(res[0]), np.exp([0.6, 2.7]), rtol=1e-15)


def test_autograd_grad_multiple_outputs():
    x = lt(np.array([0.2, 0.9]), requires_grad=True)
    y1, y2 = lucid.exp(x), lucid.log2(x)
    (g,) = AG.grad([y1, y2], [x], grad_outputs=[lt(np.array([1.0, 1.0])), lt(np.array([2.0, 2.0]))])
    want = np.exp([0.2, 0.9]) + 2 * mp_deriv("log2", 1, [0.2, 0.9])
    np.testing.assert_allclose(to_np(g), want, rtol=1e-14)


def test_autograd_grad_non_scalar_needs_grad_outputs():
    x = lt(np.array([0.2, 0.9]), requires_grad=True)
    with pytest.raises(RuntimeError):
        AG.grad(lucid.exp(x), [x])


def test_autograd_grad_allow_unused():
    x = lt(np.array([0.2]), requires_grad=True)
    u = lt(np.array([5.0]), requires_grad=True)
    y = lucid.exp(x).sum()
    with pytest.raises(RuntimeError):
        AG.grad(y, [x, u], retain_graph=True)
    gx, gu = AG.grad(y, [x, u], allow_unused=True)
    assert gu is None
    np.testing.assert_allclose(to_np(gx), np.exp([0.2]), rtol=1e-15)


def test_autograd_grad_input_not_requiring_grad():
    x = lt(np.array([0.2]), requires_grad=True)
    c = lt(np.array([0.2]))
    y = (lucid.exp(x) * c).sum()
    with pytest.raises(RuntimeError):
        AG.grad(y, [c])


def test_autograd_grad_output_not_requiring_grad():
    c = lt(np.array([0.2]))
    with pytest.raises(RuntimeError):
        AG.grad(c.sum(), [c])


# --------------------------------------------------------------------------
# in-place ops and the version counter
# --------------------------------------------------------------------------
def _iadd(t):
    t += 1.0
    return t


def _isub(t):
    t -= 1.0
    return t


def _imul(t):
    t *= 2.0
    return t


def _idiv(t):
    t /= 2.0
    return t


INPLACE = {
    "add_": (lambda t: t.add_(1.0), lambda a: a + 1.0),
    "sub_": (lambda t: t.sub_(1.0), lambda a: a - 1.0),
    "mul_": (lambda t: t.mul_(2.0), lambda a: a * 2.0),
    "div_": (lambda t: t.div_(2.0), lambda a: a / 2.0),
    "zero_": (lambda t: t.zero_(), lambda a: a * 0.0),
    "fill_": (lambda t: t.fill_(3.0), lambda a: np.full_like(a, 3.0)),
    "+=": (_iadd, lambda a: a + 1.0),
    "-=": (_isub, lambda a: a - 1.0),
    "*=": (_imul, lambda a: a * 2.0),
    "/=": (_idiv, lambda a: a / 2.0),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_values_and_identity(name):
    f, ref = INPLACE[name]
    a0 = np.array([0.5, -1.5, 2.0])
    t = lt(a0)
    r = f(t)
    assert r is t
    np.testing.assert_allclose(to_np(t), ref(a0), rtol=1e-15)


@pytest.mark.parametrize("name", ["add_", "sub_", "mul_", "div_"])
def test_inplace_tensor_operand_broadcast(name):
    a0 = np.arange(6.0).reshape(2, 3) + 1.0
    b0 = np.array([1.0, 2.0, 4.0])
    t = lt(a0)
    getattr(t, name)(lt(b0))
    want = {"add_": a0 + b0, "sub_": a0 - b0, "mul_": a0 * b0, "div_": a0 / b0}[name]
    np.testing.assert_allclose(to_np(t), want, rtol=1e-15)
    with pytest.raises(SHAPE_ERR):  # self cannot be broadcast
        getattr(lt(b0), name)(lt(a0))


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_on_leaf_requiring_grad_raises(name):
    f, _ = INPLACE[name]
    a0 = np.array([0.5, 1.5])
    x = lt(a0, requires_grad=True)
    with pytest.raises(RuntimeError):
        f(x)
    np.testing.assert_array_equal(to_np(x), a0)


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_on_leaf_under_no_grad_allowed(name):
    f, ref = INPLACE[name]
    a0 = np.array([0.5, 1.5])
    x = lt(a0, requires_grad=True)
    with lucid.no_grad():
        r = f(x)
    assert r is x and x.requires_grad and x.is_leaf and x.grad_fn is None
    np.testing.assert_allclose(to_np(x), ref(a0), rtol=1e-15)
    (x * 2.0).sum().backward()  # still usable as a leaf
    np.testing.assert_allclose(to_np(x.grad), [2.0, 2.0])


@pytest.mark.parametrize("name", sorted(INPLACE))
@pytest.mark.parametrize("op", ["erf", "log2", "mul", "div", "pow"])
def test_modified_saved_input_raises(name, op):
    f, _ = INPLACE[name]
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    fwd = {"erf": lucid.erf, "log2": lucid.log2, "mul": lambda t: t * t,
           "div": lambda t: 1.0 / t, "pow": lambda t: t ** 3.0}[op]
    y = fwd(x).sum()
    with lucid.no_grad():
        f(x)
    with pytest.raises(RuntimeError):
        y.backward()
    assert x.grad is None


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_modified_saved_output_raises(name):
    f, _ = INPLACE[name]
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    y = lucid.exp(x)
    s = y.sum()
    with lucid.no_grad():
        f(y)
    with pytest.raises(RuntimeError):
        s.backward()


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_exp_does_not_save_input(name):
    f, _ = INPLACE[name]
    x0 = np.array([0.5, 1.5])
    x = lt(x0, requires_grad=True)
    y = lucid.exp(x)
    with lucid.no_grad():
        f(x)
    y.sum().backward()  # the input is not saved: modifying it is harmless
    np.testing.assert_allclose(to_np(x.grad), np.exp(x0), rtol=1e-15)


def test_modified_intermediate_in_grad_mode_raises():
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    h = x * 1.0
    y = lucid.erf(h).sum()
    with pytest.raises(RuntimeError):
        h.add_(1.0)        # either refused here ...
        y.backward()       # ... or detected here
    assert x.grad is None


def test_modified_through_detached_alias_raises():
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    h = x * 1.0
    y = lucid.log2(h).sum()
    h.detach().mul_(3.0)   # shares memory (and so must share the version counter)
    with pytest.raises(RuntimeError):
        y.backward()


def test_inplace_on_non_saved_tensor_is_fine():
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    c = lt(np.array([2.0, 3.0]))
    y = (x + c).sum()     # add saves nothing
    c.mul_(10.0)
    y.backward()
    np.testing.assert_array_equal(to_np(x.grad), [1.0, 1.0])


def test_version_check_error_after_retained_backward():
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    y = lucid.erf(x).sum()
    y.backward(retain_graph=True)
    with lucid.no_grad():
        x.mul_(2.0)
    with pytest.raises(RuntimeError):
        y.backward()


# --------------------------------------------------------------------------
# unsupported / non-numeric operands
# --------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["abc", None, object(), [1.0, "a"]])
@pytest.mark.parametrize("op", ["erf", "exp", "log2"])
def test_unary_non_numeric_raises_typeerror(op, bad):
    with pytest.raises(TypeError):
        getattr(lucid, op)(bad)


@pytest.mark.parametrize("bad", ["abc", None, object()])
@pytest.mark.parametrize("opname", ["add", "sub", "mul", "div", "pow"])
def test_binary_non_numeric_raises_typeerror(opname, bad):
    x = lucid.ones(2)
    f = {"add": lambda: x + bad, "sub": lambda: x - bad, "mul": lambda: x * bad,
         "div": lambda: x / bad, "pow": lambda: x ** bad}[opname]
    with pytest.raises(TypeError):
        f()
    with pytest.raises(TypeError):
        getattr(lucid, opname)(x, bad)


def test_backward_gradient_non_numeric_raises():
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    with pytest.raises(TypeError):
        lucid.exp(x).backward(gradient="abc")


# --------------------------------------------------------------------------
# grad mode
# --------------------------------------------------------------------------
def test_no_grad_context():
    x = lt(np.array([0.5]), requires_grad=True)
    assert lucid.is_grad_enabled()
    with lucid.no_grad():
        assert not lucid.is_grad_enabled()
        y = lucid.exp(x) * 2.0 + x
        assert not y.requires_grad and y.grad_fn is None
        with lucid.no_grad():
            assert not lucid.is_grad_enabled()
        assert not lucid.is_grad_enabled()
    assert lucid.is_grad_enabled()
    assert lucid.exp(x).requires_grad


def test_no_grad_restored_after_exception():
    with pytest.raises(ZeroDivisionError):
        with lucid.no_grad():
            1 / 0
    assert lucid.is_grad_enabled()
    with lucid.no_grad():
        with pytest.raises(ZeroDivisionError):
            with lucid.enable_grad():
                1 / 0
        assert not lucid.is_grad_enabled()


def test_enable_grad_inside_no_grad():
    x = lt(np.array([0.5]), requires_grad=True)
    with lucid.no_grad():
        with lucid.enable_grad():
            assert lucid.is_grad_enabled()
            y = lucid.exp(x)
        assert not lucid.is_grad_enabled()
    assert y.requires_grad and y.grad_fn is not None
    y.sum().backward()
    np.testing.assert_allclose(to_np(x.grad), np.exp([0.5]), rtol=1e-15)


def test_no_grad_decorator():
    x = lt(np.array([0.5]), requires_grad=True)

    @lucid.no_grad()
    def f(t):
        assert not lucid.is_grad_enabled()
        return lucid.exp(t)

    y = f(x)
    assert lucid.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert f(x) is not None  # reusable


def test_enable_grad_decorator():
    x = lt(np.array([0.5]), requires_grad=True)

    @lucid.enable_grad()
    def f(t):
        assert lucid.is_grad_enabled()
        return lucid.exp(t)

    with lucid.no_grad():
        y = f(x)
        assert not lucid.is_grad_enabled()
    assert y.requires_grad


def test_no_grad_decorator_restores_after_exception():
    @lucid.no_grad()
    def f():
        raise KeyError("x")

    with pytest.raises(KeyError):
        f()
    assert lucid.is_grad_enabled()


def test_grad_mode_is_thread_local():
    results = {}
    in_ctx = threading.Event()
    checked = threading.Event()

    def worker():
        in_ctx.wait()
        results["worker_enabled"] = lucid.is_grad_enabled()
        x = lt(np.array([0.5]), requires_grad=True)
        results["worker_records"] = lucid.exp(x).grad_fn is not None
        checked.set()

    th = threading.Thread(target=worker)
    th.start()
    with lucid.no_grad():
        in_ctx.set()
        checked.wait(30)
        main_disabled = not lucid.is_grad_enabled()
    th.join(30)
    assert main_disabled
    assert results == {"worker_enabled": True, "worker_records": True}


def test_no_grad_in_thread_does_not_leak_to_main():
    entered = threading.Event()
    release = threading.Event()
    seen = {}

    def worker():
        with lucid.no_grad():
            seen["worker"] = lucid.is_grad_enabled()
            entered.set()
            release.wait(30)

    th = threading.Thread(target=worker)
    th.start()
    entered.wait(30)
    seen["main"] = lucid.is_grad_enabled()
    x = lt(np.array([0.5]), requires_grad=True)
    seen["main_records"] = lucid.exp(x).grad_fn is not None
    release.set()
    th.join(30)
    assert seen == {"worker": False, "main": True, "main_records": True}


def test_requires_grad_propagation_rules():
    a = lt(np.array([1.0]), requires_grad=True)
    b = lt(np.array([2.0]))
    assert (a + b).requires_grad and (b + a).requires_grad
    assert not (b + b).requires_grad and (b * b).grad_fn is None
    assert (2.0 * a).requires_grad and (a ** 2).requires_grad and (2.0 ** a).requires_grad


def test_no_grad_decorator_recursive_restores():
    depth = []

    @lucid.no_grad()
    def f(n):
        depth.append(lucid.is_grad_enabled())
        if n:
            f(n - 1)
        return lucid.is_grad_enabled()

    assert f(3) is False
    assert depth == [False] * 4
    assert lucid.is_grad_enabled()


def test_enable_grad_decorator_recursive_inside_no_grad():
    @lucid.enable_grad()
    def f(n):
        if n:
            f(n - 1)
        return lucid.is_grad_enabled()

    with lucid.no_grad():
        assert f(2) is True
        assert not lucid.is_grad_enabled()


def test_no_grad_decorated_function_concurrent_threads():
    @lucid.no_grad()
    def f(ev_in, ev_out):
        ev_in.set()
        ev_out.wait(30)
        return lucid.is_grad_enabled()

    a_in, a_out = threading.Event(), threading.Event()
    res = {}
    th = threading.Thread(target=lambda: res.setdefault("t", f(a_in, a_out)))
    th.start()
    a_in.wait(30)
    b_in, b_out = threading.Event(), threading.Event()
    b_out.set()
    assert f(b_in, b_out) is False
    assert lucid.is_grad_enabled()
    a_out.set()
    th.join(30)
    assert res == {"t": False}
