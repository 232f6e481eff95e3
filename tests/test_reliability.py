"""Issue 12: no input crashes the host process, and the silently wrong cases are fixed.

Cases that used to take the process down run in a child process, so a regression is a
failed test rather than a dead test run.
"""
import math
import pickle
import os
import subprocess
import tempfile
import sys
import textwrap

import numpy as np
import pytest

import lucid
from lucid._core.core import _rebuild

torch = pytest.importorskip("torch")


def run_isolated(code):
    """Run ``code`` (after ``import numpy as np, lucid``) in a fresh interpreter; return
    its stdout. A crash (signal) fails the test with the child's stderr."""
    src = "import faulthandler; faulthandler.enable()\nimport numpy as np, lucid\n" + \
        textwrap.dedent(code)
    # From a temporary directory, with the lucid these tests import first on the path:
    # `python -c` puts the working directory first on sys.path, and an unbuilt source
    # tree must not shadow the installed package.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(lucid.__file__))] +
        [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    p = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=600,
                       cwd=tempfile.gettempdir(), env=env)
    assert p.returncode == 0, f"child exited with {p.returncode}:\n{p.stderr[-3000:]}"
    return p.stdout


def raises_in_child(code, exc_name, *words):
    """``code`` raises ``exc_name`` (an exception class name) whose message has ``words``."""
    out = run_isolated(f"""
        try:
{textwrap.indent(textwrap.dedent(code), ' ' * 12)}
        except BaseException as e:
            print(type(e).__name__, [c.__name__ for c in type(e).__mro__], str(e))
        else:
            print("NO ERROR")
    """)
    assert exc_name in out.split("]")[0], out
    for w in words:
        assert w in out, (w, out)


# -- crashes ---------------------------------------------------------------------------------

def test_index_put_rejects_non_tensor():
    raises_in_child("lucid.index_put_(np.zeros(3), (np.array([0]),), 1.0)", "TypeError", "input")
    with pytest.raises(TypeError, match="indices"):
        lucid.index_put_(lucid.zeros(3), 0, 1.0)


@pytest.mark.parametrize("method", ["add_", "sub_", "mul_", "div_", "fill_", "zero_", "t",
                                    "__getitem__", "view", "reshape", "exp", "sum"])
@pytest.mark.parametrize("self_", ["None", "np.zeros(3)", "'abc'"])
def test_unbound_tensor_methods_reject_non_tensors(method, self_):
    args = {"zero_": "", "t": "", "view": "3", "reshape": "3", "exp": "", "sum": "",
            "__getitem__": "0"}.get(method, "1")
    out = run_isolated(f"""
        try:
            lucid.Tensor.{method}({self_}{', ' + args if args else ''})
        except (TypeError, ValueError, RuntimeError, IndexError) as e:
            print("raised", type(e).__name__)
        else:
            print("ok")
    """)
    assert out.strip() in ("ok", "raised TypeError", "raised UnsupportedDTypeError",
                           "raised ShapeError"), out


@pytest.mark.parametrize("where", ["tensor", "index"])
@pytest.mark.parametrize("kind", ["self_referential", "deep"])
def test_recursive_or_deep_lists_raise(kind, where):
    make = ("a = [0]; a.append(a)" if kind == "self_referential" else
            "a = [0]\nfor _ in range(300000): a = [a]")
    use = "lucid.tensor(a)" if where == "tensor" else "lucid.zeros(3)[a]"
    exc = "ValueError" if where == "tensor" else "IndexError"
    raises_in_child(make + "\n" + use, exc)


def test_nested_lists_within_the_limit_still_work():
    a = 1.0
    for _ in range(30):
        a = [a]
    assert lucid.tensor(a).ndim == 30
    assert lucid.tensor([[lucid.tensor(1.0), 2.0]]).shape == (1, 2)


def test_tensor_without_storage_raises():
    raises_in_child("t = lucid.Tensor.__new__(lucid.Tensor); lucid.sum(t)", "LucidError", "storage")
    raises_in_child("""
        class S(lucid.Tensor):
            def __init__(self):
                pass
        S().sum()
    """, "LucidError", "storage")
    t = lucid.Tensor.__new__(lucid.Tensor)
    for f in (lambda: lucid.exp(t), lambda: t + 1, lambda: lucid.tensor([t]),
              lambda: lucid.tensor(t), lambda: t.fill_(1.0), lambda: lucid.index_put_(t, (0,), 1.0)):
        with pytest.raises(lucid.LucidError):
            f()
    assert t.numel() == 0      # metadata stays memory-safe

    class Good(lucid.Tensor):
        def __init__(self, data):
            super().__init__(data)
    assert float(Good([1.0, 2.0]).sum()) == 3.0


def test_pickle_rebuild_validates():
    for bad in [(np.arange(4, dtype=np.int8), "float64", False),
                (np.arange(4, dtype=np.int32), "float64", False),
                (np.array([object()] * 4), "float64", False),
                (np.array(["a"]), "int64", False),
                ([1.0, 2.0], "float32", False),
                (np.zeros(2, np.float32), "complex64", False),
                (np.zeros(2, np.int64), "int64", True),
                (np.zeros(2, np.float32), "float32", "yes")]:
        with pytest.raises((TypeError, ValueError, RuntimeError)):
            _rebuild(*bad)
    raises_in_child("""
        from lucid._core.core import _rebuild
        lucid.exp(_rebuild(np.arange(4, dtype=np.int8), "float64", False))
    """, "TypeError", "dtype")
    t = lucid.tensor([1.0, 2.0], requires_grad=True)
    u = pickle.loads(pickle.dumps(t))
    assert u.requires_grad and u.dtype is lucid.float32 and u.tolist() == [1.0, 2.0]


def test_unaligned_arrays_give_the_aligned_results():
    buf = np.zeros(4 * 300 + 1, np.uint8)[1:].view(np.float32)
    buf[:] = np.linspace(-3, 3, 300, dtype=np.float32)
    assert not buf.flags.aligned
    al = buf.copy()
    t, ta = lucid.from_numpy(buf), lucid.from_numpy(al)
    for f in (lucid.exp, lucid.sin, lucid.neg, lucid.sum, lambda x: x * x, lambda x: x ** 2.0,
              lambda x: lucid.maximum(x, ta), lambda x: lucid.abs(x)):
        np.testing.assert_array_equal(np.asarray(f(t)), np.asarray(f(ta)))
    x = lucid.tensor(buf, requires_grad=True)
    lucid.exp(x).backward(gradient=lucid.from_numpy(buf))
    np.testing.assert_allclose(x.grad.numpy(), np.exp(al) * al, rtol=1e-6)


# -- silently wrong ------------------------------------------------------------------------------

def test_norm_of_inf_is_inf():
    inf, nan = math.inf, math.nan
    for vals, p in [([inf, 1.0], 2), ([-inf, 1.0], "fro"), ([inf, 1.0], 3), ([inf, nan], 2),
                    ([1.0, 2.0], 2), ([0.0, 0.0], 2)]:
        got = float(lucid.norm(lucid.tensor(vals), p=p))
        want = float(torch.norm(torch.tensor(vals), p=2 if p == "fro" else p))
        assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want), (vals, p)
    r = lucid.norm(lucid.tensor([[inf, 1.0], [1.0, 1.0]]), dim=1)
    assert r.tolist()[0] == inf and r.tolist()[1] == pytest.approx(math.sqrt(2))


INT_ROWS = ["abs", "floor", "ceil", "round", "trunc", "sign", "relu", "square"]


@pytest.mark.parametrize("name", INT_ROWS)
@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_integer_unary_ops_keep_their_dtype_as_torch(name, dtype):
    vals = [123456789, -7, 0, 3, -2**31 + 1] if dtype != "bool" else [True, False]
    tt = torch.tensor(vals, dtype=getattr(torch, dtype))
    tfn = getattr(torch, name, None) or getattr(torch.nn.functional, name)
    try:
        want = tfn(tt)
    except RuntimeError:
        with pytest.raises(TypeError):
            getattr(lucid, name)(lucid.tensor(vals, dtype=getattr(lucid, dtype + ("_" if dtype == "bool" else ""))))
        return
    got = getattr(lucid, name)(lucid.tensor(vals, dtype=getattr(lucid, dtype + ("_" if dtype == "bool" else ""))))
    assert str(got.dtype).split(".")[1].rstrip("_") == str(want.dtype).split(".")[1]
    assert got.tolist() == want.tolist()


def test_abs_of_a_large_int_is_exact():
    assert lucid.abs(lucid.tensor([123456789])).tolist() == [123456789]


def test_add_with_float_alpha_on_integers_raises():
    a, b = lucid.tensor([1]), lucid.tensor([2])
    with pytest.raises(TypeError, match="alpha"):
        lucid.add(a, b, alpha=0.5)
    with pytest.raises(TypeError, match="alpha"):
        lucid.sub(a, b, alpha=0.5)
    with pytest.raises(TypeError, match="alpha"):
        lucid.add(a, b, alpha="x")
    assert lucid.add(a, b, alpha=3).tolist() == [7]
    assert lucid.add(lucid.tensor([1.0]), b, alpha=0.5).tolist() == [2.0]


def test_randint_range_checks():
    with pytest.raises(ValueError, match="int32"):
        lucid.randint(0, 2**40, (3,), dtype=lucid.int32)
    with pytest.raises(ValueError):
        lucid.randint(-5, 2, (3,), dtype=lucid.bool_)
    with pytest.raises(ValueError):
        lucid.randint(0, 2**64, (3,))
    with pytest.raises(TypeError, match="high"):
        lucid.randint(0, 2.5, (3,))
    r = lucid.randint(-2**31, 2**31, (1000,), dtype=lucid.int32)
    assert r.dtype is lucid.int32
    assert lucid.randint(0, 2, (100,), dtype=lucid.bool_).dtype is lucid.bool_


def test_full_of_nan_into_integers_raises():
    for v in (math.nan, math.inf, -math.inf, 2**63, -2**63 - 1):
        with pytest.raises(OverflowError):
            lucid.full((2,), v, dtype=lucid.int64)
    with pytest.raises(OverflowError):
        lucid.full((2,), 2**40, dtype=lucid.int32)
    with pytest.raises(OverflowError):
        lucid.full_like(lucid.zeros(2, dtype=lucid.int32), math.nan)
    assert lucid.full((2,), 1.5, dtype=lucid.int64).tolist() == [1, 1]     # as torch
    with pytest.raises((TypeError, OverflowError)):
        lucid.zeros(2, dtype=lucid.int64).fill_(math.nan)
    with pytest.raises(OverflowError):
        lucid.zeros(2, dtype=lucid.int32).fill_(2**40)


@pytest.mark.parametrize("vals", [[math.inf, 1.0, 2.0], [-math.inf, -math.inf], [-math.inf, 1.0],
                                  [math.inf, math.inf], [math.inf, -math.inf], [1.0, 2.0]])
def test_softmax_with_infinities_as_torch(vals):
    for lf, tf in ((lucid.softmax, torch.softmax), (lucid.log_softmax, torch.log_softmax)):
        got = np.asarray(lf(lucid.tensor(vals), 0))
        want = tf(torch.tensor(vals), 0).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_reduction_dim_out_of_range_on_0d():
    x = lucid.tensor(1.0)
    for f in (lucid.sum, lucid.mean, lucid.prod, lucid.amax, lucid.norm, lucid.all):
        with pytest.raises(IndexError):
            f(x, dim=1)
    assert float(lucid.sum(x, dim=0)) == 1.0 and float(lucid.sum(x, dim=-1)) == 1.0


@pytest.mark.parametrize("name", ["relu", "relu6", "hardsigmoid", "sign", "floor", "abs"])
def test_double_backward_of_piecewise_ops_gives_zeros(name):
    fn = getattr(lucid, name)
    x = lucid.tensor([1.0, -1.0, 4.0, 7.0], requires_grad=True)
    (g,) = lucid.autograd.grad(fn(x).sum(), x, create_graph=True)
    (h,) = lucid.autograd.grad(g.sum(), x)
    assert h.tolist() == [0.0, 0.0, 0.0, 0.0]


def test_view_never_copies():
    a = lucid.zeros(2, 3)
    with pytest.raises(lucid.LucidError, match="reshape"):
        a.T.view(6)
    v = a.view(3, 2)
    v.fill_(7.0)
    assert a.tolist() == [[7.0] * 3] * 2
    assert a.T.reshape(6).shape == (6,)          # reshape still copies when it must


# -- errors name the argument ------------------------------------------------------------------

def test_clear_errors():
    with pytest.raises(IndexError, match="non-zero size"):
        lucid.amax(lucid.zeros(0, 3), 0)
    with pytest.raises(OverflowError, match="add"):
        lucid.add(lucid.tensor([1]), 2**70)
    with pytest.raises(ValueError, match="unknown device"):
        lucid.ones(2).to("tpu:0")
    if lucid.gpu_available():          # "cuda:0" names lucid's gpu device (MLX)
        assert lucid.ones(2).to("cuda:0").device == "gpu"
    else:
        with pytest.raises(lucid.LucidError, match="gpu|GPU|MLX"):
            lucid.ones(2).to("cuda:0")
    assert lucid.ones(2).to("cpu").dtype is lucid.float32
    with pytest.raises(TypeError, match="numeric"):
        lucid.exp(np.array(["a"]))
    with pytest.raises(TypeError):
        lucid.exp(np.array(["2020-01-01"], dtype="datetime64[D]"))
    with pytest.raises(TypeError):
        lucid.exp(np.array([object()]))


# -- fuzz findings: activations at +-inf, integer dtypes, integer pow and division -----------

# torch gives nan at +-inf for these (x / (1 + |x|), x * sigmoid(x) = -inf * 0, ...); lucid
# gives the limit, which is what torch computes at the largest finite float64 inputs.
INF_LIMIT_ROWS = ["softsign", "silu", "gelu", "mish", "hardswish"]


def _torch_at_huge(name, sign):
    """torch's value and gradient of ``name`` at sign * 1e300 in float64: the limits."""
    xt = torch.tensor([sign * 1e300], dtype=torch.float64, requires_grad=True)
    y = getattr(torch.nn.functional, name)(xt)
    y.backward(torch.ones_like(y))
    y = float(y.detach())
    return (math.copysign(math.inf, y) if abs(y) >= 1e300 else y), float(xt.grad)   # x -> inf


@pytest.mark.parametrize("name", INF_LIMIT_ROWS)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_activations_at_infinity_give_the_limits(name, dtype):
    fn = getattr(lucid, name)
    for sign in (1.0, -1.0):
        want_y, want_g = _torch_at_huge(name, sign)
        assert math.isfinite(want_g)
        x = lucid.tensor([sign * math.inf, 1.0], dtype=getattr(lucid, dtype), requires_grad=True)
        y = fn(x)
        got = float(y[0])
        assert got == want_y and math.copysign(1, got) == math.copysign(1, want_y), \
            (name, dtype, sign, got, want_y)
        y.backward(gradient=lucid.ones_like(y))
        assert float(x.grad[0]) == want_g, (name, dtype, sign, float(x.grad[0]), want_g)
        # graph mode (create_graph=True) runs the row's formula, not the fused kernel
        x2 = lucid.tensor([sign * math.inf, 1.0], dtype=getattr(lucid, dtype), requires_grad=True)
        (g,) = lucid.autograd.grad(fn(x2).sum(), x2, create_graph=True)
        assert float(g[0]) == want_g, (name, dtype, sign, "graph", float(g[0]), want_g)


@pytest.mark.parametrize("name", ["silu", "gelu", "mish"])
def test_graph_mode_gradient_formulas_match_torch_second_derivatives(name):
    vals = [-800.0, -50.0, -3.0, -0.5, 0.0, 0.7, 3.0, 50.0, 800.0]
    x = lucid.tensor(vals, dtype=lucid.float64, requires_grad=True)
    (g,) = lucid.autograd.grad(getattr(lucid, name)(x).sum(), x, create_graph=True)
    (h,) = lucid.autograd.grad(g.sum(), x)
    xt = torch.tensor(vals, dtype=torch.float64, requires_grad=True)
    (gt,) = torch.autograd.grad(getattr(torch.nn.functional, name)(xt).sum(), xt, create_graph=True)
    (ht,) = torch.autograd.grad(gt.sum(), xt)
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-12, atol=1e-300)
    fin = np.isfinite(ht.numpy())       # torch's mish'' at 800 is inf * 0 = nan; it is 0
    assert np.isfinite(h.detach().numpy()).all()
    np.testing.assert_allclose(h.detach().numpy()[fin], ht.numpy()[fin], rtol=1e-10, atol=1e-300)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_hardswish_gradient_kinks_as_torch(dtype):
    vals = [-4.0, -3.0, -2.5, 0.0, 2.5, 3.0, 4.0]
    x = lucid.tensor(vals, dtype=getattr(lucid, dtype), requires_grad=True)
    lucid.hardswish(x).sum().backward()
    xt = torch.tensor(vals, dtype=getattr(torch, dtype), requires_grad=True)
    torch.nn.functional.hardswish(xt).sum().backward()
    assert x.grad.tolist() == xt.grad.tolist()
    x2 = lucid.tensor(vals, dtype=getattr(lucid, dtype), requires_grad=True)
    (g,) = lucid.autograd.grad(lucid.hardswish(x2).sum(), x2, create_graph=True)
    assert g.tolist() == xt.grad.tolist()


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_relu6_of_integers_keeps_the_dtype_as_torch(dtype):
    vals = [-2**31 + 1, -7, 0, 3, 6, 7, 123456789] if dtype != "bool" else [True, False]
    tt = torch.tensor(vals, dtype=getattr(torch, dtype))
    lt = lucid.tensor(vals, dtype=getattr(lucid, dtype + ("_" if dtype == "bool" else "")))
    try:
        want = torch.nn.functional.relu6(tt)
    except RuntimeError:                # torch refuses bool
        with pytest.raises(TypeError):
            lucid.relu6(lt)
        return
    got = lucid.relu6(lt)
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
    assert got.tolist() == want.tolist()


def _same_outcome(lucid_call, torch_call):
    """Both raise, or both give the same dtype and values."""
    try:
        want = torch_call()
    except RuntimeError as e:
        with pytest.raises((lucid.LucidError, ZeroDivisionError, ValueError)):
            lucid_call()
        return str(e)
    got = lucid_call()
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_pow_as_torch(dtype):
    base = [-3, -2, -1, 0, 1, 2, 3, 7]
    expo = [-1, -2, -3, -1, -5, -1, 2, 3]
    L = lambda v: lucid.tensor(v, dtype=getattr(lucid, dtype))   # noqa: E731
    T = lambda v: torch.tensor(v, dtype=getattr(torch, dtype))   # noqa: E731
    _same_outcome(lambda: lucid.pow(L(base), L(expo)), lambda: torch.pow(T(base), T(expo)))
    _same_outcome(lambda: L(base) ** L(expo), lambda: T(base) ** T(expo))
    _same_outcome(lambda: lucid.pow(L(base), L(-2)), lambda: torch.pow(T(base), T(-2)))   # 0-d
    for s in (2, 1, -1, 0, True):
        _same_outcome(lambda: lucid.pow(s, L(expo)), lambda: torch.pow(s, T(expo)))
        _same_outcome(lambda: s ** L(expo), lambda: s ** T(expo))
    _same_outcome(lambda: lucid.pow(L([[1, 2]]), L([[-1], [2]])),
                  lambda: torch.pow(T([[1, 2]]), T([[-1], [2]])))            # broadcast
    for e in (-1, -2, 0, 3):     # a negative Python scalar exponent raises, even when empty
        for b in (base, []):
            _same_outcome(lambda: lucid.pow(L(b), e), lambda: torch.pow(T(b), e))
            _same_outcome(lambda: L(b) ** e, lambda: T(b) ** e)
    msg = _same_outcome(lambda: lucid.pow(L(base), -1), lambda: torch.pow(T(base), -1))
    with pytest.raises(lucid.LucidError, match="negative integer powers"):
        lucid.pow(L(base), -1)
    assert msg


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("op", ["fmod", "remainder", "floor_divide", "div_trunc", "div_floor"])
def test_integer_division_by_zero_of_an_empty_tensor_is_empty(op, dtype):
    def fns(mod):
        if op.startswith("div_"):
            return lambda a, b: mod.div(a, b, rounding_mode=op[4:])
        return getattr(mod, op)
    lf, tf = fns(lucid), fns(torch)
    L = lambda v: lucid.tensor(v, dtype=getattr(lucid, dtype))   # noqa: E731
    T = lambda v: torch.tensor(v, dtype=getattr(torch, dtype))   # noqa: E731
    for a, b in (([], 0), ([], [0]), ([], [1, 0, 2]), ([[5, 7]], [0, 1]), ([5, 7], 0),
                 ([5, -7], [2, 3])):
        lb = b if isinstance(b, int) else L(b)
        tb = b if isinstance(b, int) else T(b)
        if isinstance(b, list) and b and not a:
            z = np.zeros((0, len(b)), dtype)
            la, ta = lucid.from_numpy(z), torch.from_numpy(z)
        else:
            la, ta = L(a), T(a)
        _same_outcome(lambda: lf(la, lb), lambda: tf(ta, tb))


def test_argmax_argmin_of_bool_as_numpy():
    a = np.array([[False, True, True], [False, False, False], [True, False, True]])
    for name in ("argmax", "argmin"):
        fn, ref = getattr(lucid, name), getattr(np, name)
        assert int(fn(lucid.tensor(a))) == int(ref(a))
        for d in (0, 1, -1):
            assert fn(lucid.tensor(a), d).tolist() == ref(a, axis=d).tolist()
            assert fn(lucid.tensor(a), d, True).tolist() == ref(a, axis=d, keepdims=True).tolist()


def test_clamp_rejects_non_numeric_bounds_by_name():
    for kw in (dict(min="a"), dict(max=b"x"), dict(min=0.0, max=object())):
        arg = [k for k, v in kw.items() if not isinstance(v, float)][0]
        with pytest.raises(TypeError, match=f"clamp\\(\\): {arg} must be a number"):
            lucid.clamp(lucid.ones(2), **kw)
    got = lucid.clamp(lucid.tensor([-2.0, 0.5, 3.0]), min=np.float32(0), max=1)
    assert got.tolist() == torch.clamp(torch.tensor([-2.0, 0.5, 3.0]), 0, 1).tolist()


def test_one_hot_rejects_out_of_range_classes_as_torch():
    F = lucid.nn.functional
    for vals, n in (([-1], 3), ([3], 3), ([0, 5], 2)):
        with pytest.raises(RuntimeError):
            torch.nn.functional.one_hot(torch.tensor(vals), n)
        with pytest.raises(ValueError, match="one_hot"):
            F.one_hot(lucid.tensor(vals), n)
    for vals, n in (([0, 2, 1], 3), ([1, 0], -1)):
        assert F.one_hot(lucid.tensor(vals), n).tolist() == \
            torch.nn.functional.one_hot(torch.tensor(vals), n).tolist()


def test_diagonal_writes_raise_rather_than_vanish():
    # torch's diagonal is a view (writes reach the input); lucid's is a copy, so a write
    # through it must raise, never be silently lost.
    a = lucid.zeros(3, 3)
    d = a.diagonal()
    with pytest.raises(lucid.LucidError):
        d.fill_(7.0)
    assert a.tolist() == torch.zeros(3, 3).tolist()
    assert lucid.diagonal(lucid.arange(9.0).reshape(3, 3), 1).tolist() == \
        torch.diagonal(torch.arange(9.0).reshape(3, 3), 1).tolist()
