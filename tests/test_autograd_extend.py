"""Extending autograd: lucid.autograd.Function, tensor hooks, retain_grad, the functional
transforms (against torch.autograd.functional) and lucid.vmap."""
import functools
import os
import runpy

import numpy as np
import pytest

import lucid
from lucid.autograd import Function
from lucid.autograd import functional as F

torch = pytest.importorskip("torch")
TF = torch.autograd.functional


def L(a, grad=False):
    return lucid.tensor(np.asarray(a, dtype=np.float64), dtype=lucid.float64, requires_grad=grad)


class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * 3 * x * x


class MulAdd(Function):
    """Two tensor inputs, a non-tensor input, two outputs, one of them saved."""

    @staticmethod
    def forward(ctx, a, b, k):
        ctx.k = k
        p, s = a * b, (a + b) * k
        ctx.save_for_backward(a, b, p)
        return p, s

    @staticmethod
    def backward(ctx, gp, gs):
        a, b, p = ctx.saved_tensors
        assert p.shape == a.shape
        return gp * b + gs * ctx.k, gp * a + gs * ctx.k, None


class SortWithIndex(Function):
    @staticmethod
    def forward(ctx, x):
        a = x.detach().numpy()
        idx = np.argsort(a)
        i = lucid.tensor(idx)
        ctx.mark_non_differentiable(i)
        ctx.idx = idx
        return lucid.tensor(a[idx], dtype=x.dtype), i

    @staticmethod
    def backward(ctx, g, gi):
        assert np.all(gi.numpy() == 0)      # materialized zeros for the index output
        out = np.zeros(g.shape)
        out[ctx.idx] = g.detach().numpy()
        return lucid.tensor(out, dtype=g.dtype)


def test_function_single_output_and_node():
    x = L([1.0, 2.0, -0.5], True)
    y = Cube.apply(x)
    assert type(y.grad_fn).__name__ == "CubeBackward"
    assert y.grad_fn.next_functions[0][0] is not None
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * x.detach().numpy() ** 2)


def test_function_higher_derivatives_in_graph_mode():
    x = L([1.0, 2.0, -0.5], True)
    (g,) = lucid.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    (h,) = lucid.autograd.grad(g.sum(), x, create_graph=True)
    (t,) = lucid.autograd.grad(h.sum(), x)
    np.testing.assert_allclose(h.detach().numpy(), 6 * x.detach().numpy())
    np.testing.assert_allclose(t.numpy(), [6.0, 6.0, 6.0])
    assert lucid.autograd.gradcheck(Cube.apply, (x,))
    assert lucid.autograd.gradgradcheck(Cube.apply, (x,))


def test_function_multi_output_and_needs_input_grad():
    a, b = L([1.0, 2.0], True), L([3.0, -1.0])
    seen = {}

    class Probe(Function):
        @staticmethod
        def forward(ctx, a, b):
            seen["needs"] = ctx.needs_input_grad
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g, g

    Probe.apply(a, b)
    assert seen["needs"] == (True, False)
    p, s = MulAdd.apply(a, L([3.0, -1.0], True), 2.0)
    assert p.requires_grad and s.requires_grad
    (p.sum() * 2 + s.sum()).backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * np.array([3.0, -1.0]) + 2.0)
    a2, b2 = L([1.0, 2.0], True), L([3.0, -1.0], True)
    assert lucid.autograd.gradcheck(lambda a, b: MulAdd.apply(a, b, 3.0), (a2, b2))
    # only one output used: the other's gradient arrives as zeros
    a3 = L([1.0, 2.0], True)
    MulAdd.apply(a3, L([3.0, -1.0]), 2.0)[1].sum().backward()
    np.testing.assert_allclose(a3.grad.numpy(), [2.0, 2.0])


def test_function_non_differentiable_output():
    x = L([3.0, 1.0, 2.0], True)
    v, i = SortWithIndex.apply(x)
    assert not i.requires_grad and v.requires_grad
    (v * L([1.0, 10.0, 100.0])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [100.0, 1.0, 10.0])


def test_function_without_grad_and_errors():
    x = L([1.0, 2.0])
    y = Cube.apply(x)
    assert y.grad_fn is None and not y.requires_grad
    with lucid.no_grad():
        assert Cube.apply(L([1.0], True)).grad_fn is None

    class BadCount(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        BadCount.apply(L([1.0], True), L([2.0], True)).sum().backward()

    class BadShape(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return lucid.ones(5, dtype=lucid.float64)

    with pytest.raises(RuntimeError, match="invalid gradient"):
        BadShape.apply(L([1.0, 2.0], True)).sum().backward()


def test_function_saved_tensor_version_check():
    x = L([1.0, 2.0], True)
    h = x * 1.0
    y = Cube.apply(h)
    with lucid.no_grad():
        h.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace|in-place"):
        y.sum().backward()


def test_function_setup_context_style_and_identity_output():
    class Ident(Function):
        @staticmethod
        def forward(x):
            return x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.tag = "ok"

        @staticmethod
        def backward(ctx, g):
            assert ctx.tag == "ok"
            return g * 2

    x = L([1.0, 2.0], True)
    y = Ident.apply(x)
    assert y is not x and x.grad_fn is None
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_function_against_torch_function():
    class TExp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            y, = ctx.saved_tensors
            return g * y

    class LExp(Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            y, = ctx.saved_tensors
            return g * y

    a = np.array([0.3, -1.2, 2.0])
    xl, xt = L(a, True), torch.tensor(a, requires_grad=True)
    (gl,) = lucid.autograd.grad((LExp.apply(xl) ** 2).sum(), xl, create_graph=True)
    (gt,) = torch.autograd.grad((TExp.apply(xt) ** 2).sum(), xt, create_graph=True)
    np.testing.assert_allclose(gl.detach().numpy(), gt.detach().numpy())
    (hl,) = lucid.autograd.grad(gl.sum(), xl)
    (ht,) = torch.autograd.grad(gt.sum(), xt)
    np.testing.assert_allclose(hl.numpy(), ht.numpy())


def test_gammaln_example():
    import scipy.special
    mod = runpy.run_path(os.path.join(os.path.dirname(__file__), os.pardir, "examples",
                                      "custom_function_gammaln.py"))
    x, y, d1, d2, d3 = mod["main"]()
    a = x.detach().numpy()
    np.testing.assert_allclose(y.detach().numpy(), scipy.special.gammaln(a), rtol=1e-14)
    np.testing.assert_allclose(d1.detach().numpy(), scipy.special.digamma(a), rtol=1e-14)
    np.testing.assert_allclose(d2.detach().numpy(), scipy.special.polygamma(1, a), rtol=1e-14)
    np.testing.assert_allclose(d3.numpy(), scipy.special.polygamma(2, a), rtol=1e-13)
    assert lucid.autograd.gradcheck(mod["gammaln"], (L([0.7, 3.2], True),))
    assert lucid.autograd.gradgradcheck(mod["gammaln"], (L([0.7, 3.2], True),))


# -- hooks ----------------------------------------------------------------------

def test_leaf_hook_sees_summed_gradient_once():
    x = L([1.0, 2.0], True)
    calls = []
    x.register_hook(lambda g: calls.append(g.numpy().copy()))
    ((x * x).sum() + x.sum()).backward()
    assert len(calls) == 1
    np.testing.assert_allclose(calls[0], [3.0, 5.0])


def test_hooks_replace_gradient_and_remove():
    x = L([1.0, 2.0], True)
    y = x * 2
    h = y.register_hook(lambda g: g * 10)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [20.0, 20.0])
    h.remove()
    x.grad = None
    (x * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])
    hx = x.register_hook(lambda g: g + 1)
    x.grad = None
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 4.0])
    hx.remove()
    with pytest.raises(RuntimeError):
        L([1.0]).register_hook(lambda g: g)


def test_hook_in_grad_and_graph_mode_matches_torch():
    a = np.array([0.5, -1.0, 2.0])
    res = []
    for M, T in ((lucid, lambda v: L(v, True)), (torch, lambda v: torch.tensor(v, requires_grad=True))):
        x = T(a)
        y = x.sin()
        y.register_hook(functools.partial(lambda g, w: g * w, w=y.detach()))
        (g,) = M.autograd.grad((y * y).sum(), x, create_graph=True)
        (h,) = M.autograd.grad(g.sum(), x)
        res.append((g.detach().numpy(), h.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0])
    np.testing.assert_allclose(res[0][1], res[1][1])


def test_retain_grad_accumulates_as_torch():
    out = []
    for M, T in ((lucid, lambda v: L(v, True)), (torch, lambda v: torch.tensor(v, requires_grad=True))):
        x = T([1.0, 2.0])
        y = x * 2
        y.retain_grad()
        assert y.retains_grad and not x.retains_grad
        (y * y).sum().backward(retain_graph=True)
        (y * y).sum().backward()
        out.append(y.grad.numpy())
        z = x * 3
        assert not z.retains_grad and (M is torch or z.grad is None)
    np.testing.assert_allclose(out[0], out[1])


def test_requires_grad_and_detach_in_place():
    x = L([1.0, 2.0])
    assert x.requires_grad_() is x and x.requires_grad
    y = x * 2
    assert y.detach_() is y and y.grad_fn is None and not y.requires_grad
    with pytest.raises(TypeError):
        lucid.tensor([1, 2]).requires_grad_()


# -- functional -------------------------------------------------------------------

def _f(M):
    def f(x, y):
        return (x.exp() * y.sin()).sum() + (x * x * y).sum()
    return f


def _g(M):
    def g(x, y):
        return x * y.sin(), (x * x).sum() * y
    return g


A = np.array([0.3, -0.7, 1.1])
B = np.array([0.9, 0.2, -0.4])


def _both(fn_l, fn_t, *arrs):
    return fn_l(*[L(a) for a in arrs]), fn_t(*[torch.tensor(a) for a in arrs])


def _close(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)
        return
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("create_graph", [False, True])
def test_functional_against_torch(create_graph):
    kw = {"create_graph": create_graph}
    xs_l, xs_t = (L(A), L(B)), (torch.tensor(A), torch.tensor(B))
    _close(F.vjp(_g(lucid), xs_l, (L(B), L(A)), **kw), TF.vjp(_g(torch), xs_t, (torch.tensor(B), torch.tensor(A)), **kw))
    _close(F.jvp(_g(lucid), xs_l, (L(B), L(A)), **kw), TF.jvp(_g(torch), xs_t, (torch.tensor(B), torch.tensor(A)), **kw))
    _close(F.jacobian(_g(lucid), xs_l, **kw), TF.jacobian(_g(torch), xs_t, **kw))
    _close(F.hessian(_f(lucid), xs_l, **kw), TF.hessian(_f(torch), xs_t, **kw))
    _close(F.hvp(_f(lucid), xs_l, (L(B), L(A)), **kw), TF.hvp(_f(torch), xs_t, (torch.tensor(B), torch.tensor(A)), **kw))
    _close(F.vhp(_f(lucid), xs_l, (L(B), L(A)), **kw), TF.vhp(_f(torch), xs_t, (torch.tensor(B), torch.tensor(A)), **kw))
    # single tensor in and out
    _close(F.jacobian(lambda x: x.exp() * x.sum(), L(A), **kw), TF.jacobian(lambda x: x.exp() * x.sum(), torch.tensor(A), **kw))
    _close(F.hessian(lambda x: (x ** 3).sum(), L(A), **kw), TF.hessian(lambda x: (x ** 3).sum(), torch.tensor(A), **kw))
    _close(F.vjp(lambda x: (x * x).sum(), L(A), **kw), TF.vjp(lambda x: (x * x).sum(), torch.tensor(A), **kw))


def test_functional_create_graph_is_differentiable_and_detached_otherwise():
    x = L(A, True)
    H = F.hessian(lambda t: (t ** 3).sum(), x, create_graph=True)
    assert H.requires_grad
    H.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 6.0, 6.0])
    H2 = F.hessian(lambda t: (t ** 3).sum(), x)
    assert not H2.requires_grad
    out, jv = F.jvp(lambda t: t.exp(), x, L(B))
    assert not out.requires_grad and not jv.requires_grad


def test_functional_unused_input_and_strict():
    f = lambda x, y: (x * 2).sum()
    _, (_gx, gy) = F.vjp(f, (L(A), L(B)))
    np.testing.assert_allclose(gy.numpy(), 0)
    with pytest.raises(RuntimeError, match="independent"):
        F.vjp(f, (L(A), L(B)), strict=True)
    with pytest.raises(RuntimeError, match="single element"):
        F.vjp(lambda x: x * 2, L(A))


def test_newton_step_with_hessian():
    """A Newton step on a strictly convex quadratic lands on the minimum."""
    Q = L([[3.0, 1.0], [1.0, 2.0]])
    c = L([1.0, -1.0])
    f = lambda x: 0.5 * (x * lucid.matmul(Q, x)).sum() - (c * x).sum()
    x0 = L([5.0, 5.0])
    g = F.vjp(f, x0)[1]
    H = F.hessian(f, x0)
    x1 = x0 - lucid.linalg.solve(H, g)
    np.testing.assert_allclose(x1.numpy(), np.linalg.solve(Q.numpy(), c.numpy()), rtol=1e-12)


# -- vmap -------------------------------------------------------------------------------

# (the batching rules themselves: tests/test_vmap.py)

def test_vmap_in_dims_out_dims_and_tuples():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal(3)
    f = lambda x, y: (x * y, x.sum(-1, keepdim=True))
    got = lucid.vmap(f, in_dims=(1, None), out_dims=1)(L(a), L(b))
    want = torch.vmap(f, in_dims=(1, None), out_dims=1)(torch.tensor(a), torch.tensor(b))
    _close(tuple(got), tuple(want))
    with pytest.raises(ValueError):
        lucid.vmap(f)(L(a), L(rng.standard_normal(4)))


def test_graphs_of_python_nodes_are_freed_by_refcount(no_gc):
    """Function nodes, packed multi-output nodes and hooks hold no reference cycle: the
    outputs and their nodes go away as soon as the last reference does."""
    import weakref
    x = L([[2.0, 0.5], [0.5, 1.0]], True)
    outs = [Cube.apply(x), MulAdd.apply(x, x, 2.0)[1], lucid.linalg.eigh(x)[1],
            lucid.linalg.inv(x), lucid.sort(x, 1).values, lucid.special.lgamma(x)]
    outs[0].register_hook(lambda g: g)
    outs[1].retain_grad()
    refs = [weakref.ref(o) for o in outs] + [weakref.ref(o.grad_fn) for o in outs]
    sum(o.sum() for o in outs).backward()
    del outs
    assert all(r() is None for r in refs)
