"""No input crashes the host process; no silently wrong answer (views alias or refuse writes,
integer ops keep integer dtypes, edge values as torch); bad arguments raise errors naming them.

Cases that used to take the process down run in a child process, so a regression is a
failed test rather than a dead test run.
"""
import math
import pickle
import re
import textwrap
import warnings

import numpy as np
import pytest

import lucid
from lucid._core.core import _rebuild
from lucid_testutils import run_child

torch = pytest.importorskip("torch")


def run_isolated(code):
    """Run ``code`` (after ``import numpy as np, lucid``) in a fresh interpreter; return
    its stdout. A crash (signal) fails the test with the child's stderr."""
    src = "import faulthandler; faulthandler.enable()\nimport numpy as np, lucid\n" + \
        textwrap.dedent(code)
    p = run_child(src)          # from a temporary directory, the lucid under test
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


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_unaligned_arrays_reduce_as_the_aligned_ones(dt):
    """The reduction kernels read typed pointers: an unaligned input (UBSan checks the
    loads) is reduced as its aligned copy, bit for bit."""
    n = np.dtype(dt).itemsize
    buf = np.zeros(n * 600 + 1, np.uint8)[1:].view(dt).reshape(20, 30)
    buf[:] = np.random.default_rng(0).standard_normal((20, 30))
    assert not buf.flags.aligned
    t, ta = lucid.from_numpy(buf), lucid.from_numpy(buf.copy())
    for f in (lucid.sum, lucid.mean, lucid.amax, lambda x: lucid.amin(x, 0),
              lambda x: lucid.logsumexp(x, 1), lambda x: lucid.softmax(x, 1),
              lambda x: lucid.log_softmax(x, 0), lambda x: lucid.argmax(x, 1),
              lambda x: lucid.max(x, 1)[0], lambda x: x.sum(1)):
        np.testing.assert_array_equal(np.asarray(f(t)), np.asarray(f(ta)))


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


# -- every view op aliases (as torch's) or refuses writes; none hands out a silent copy ----------

# (name, op): op(module, base) on a (2, 3, 4) base, written once for lucid and torch.
VIEW_OPS = [
    ("view", lambda m, x: x.view(6, 4)),
    ("reshape", lambda m, x: x.reshape(6, 4)),
    ("reshape_copies", lambda m, x: x.transpose(0, 2).reshape(24)),
    ("contiguous_copies", lambda m, x: x.transpose(0, 1).contiguous()),
    ("transpose", lambda m, x: x.transpose(0, 1)),
    ("permute", lambda m, x: x.permute(2, 0, 1)),
    ("expand", lambda m, x: x[:, :1].expand(2, 3, 4)),
    ("expand_as", lambda m, x: x[:, :1].expand_as(x)),
    ("broadcast_to", lambda m, x: m.broadcast_to(x[:, :1], (2, 3, 4))),
    ("narrow", lambda m, x: x.narrow(2, 1, 2)),
    ("select", lambda m, x: x.select(1, 1)),
    ("select_fn", lambda m, x: m.select(x, 2, -1)),
    ("slice", lambda m, x: x[:, 1:, ::2]),
    ("int_index", lambda m, x: x[1]),
    ("ellipsis", lambda m, x: x[..., 0]),
    ("none_index", lambda m, x: x[None, 0]),
    ("unfold", lambda m, x: x.unfold(2, 2, 2)),
    ("unfold_gaps", lambda m, x: x.unfold(2, 1, 3)),
    ("unfold_overlapping", lambda m, x: x.unfold(2, 3, 1)),
    ("diagonal", lambda m, x: x.diagonal(0, 1, 2)),
    ("diagonal_offset", lambda m, x: m.diagonal(x, -1, 2, 1)),
    ("unbind", lambda m, x: x.unbind(1)[1]),
    ("split", lambda m, x: x.split(2, 2)[1]),
    ("split_sections", lambda m, x: x.split([1, 3], 2)[1]),
    ("chunk", lambda m, x: x.chunk(2, 2)[1]),
    ("squeeze", lambda m, x: x[:, :1].squeeze(1)),
    ("squeeze_all", lambda m, x: x[:1].squeeze()),
    ("unsqueeze", lambda m, x: x.unsqueeze(0)),
    ("T", lambda m, x: x[0].T),
    ("mT", lambda m, x: x.mT),
    ("t", lambda m, x: x[0].t()),
    ("movedim", lambda m, x: m.movedim(x, 0, 2)),
    ("movedim_seq", lambda m, x: m.movedim(x, (0, 1), (2, 0))),
    ("moveaxis", lambda m, x: m.moveaxis(x, -1, 0)),
    ("swapaxes", lambda m, x: m.swapaxes(x, 0, 2)),
    ("swapdims", lambda m, x: m.swapdims(x, 1, 2)),
    ("flatten", lambda m, x: x.flatten()),
    ("flatten_part", lambda m, x: x.flatten(1)),
    ("flatten_copies", lambda m, x: x.transpose(0, 1).flatten()),
    ("unflatten", lambda m, x: x.unflatten(2, (2, 2))),
    ("detach", lambda m, x: x.detach()),
    ("chain", lambda m, x: x[1].T.unsqueeze(0).narrow(1, 1, 2)),
]

# Views lucid keeps read-only where torch's are writable: one element of the base sits at
# several places of the view, so an in-place op would update it several times (torch's
# add_ does: unfold(0, 2, 1) of zeros(4) plus one gives [1, 2, 2, 1]). Writes raise.
READ_ONLY_VIEWS = {"expand", "expand_as", "broadcast_to", "unfold_overlapping"}

WRITES = {
    "fill_": lambda v: v.fill_(-1.0),
    "setitem": lambda v: v.__setitem__(..., -2.0),
    "mul_": lambda v: v.mul_(-3.0),
}


@pytest.mark.parametrize("write", list(WRITES))
@pytest.mark.parametrize("name,op", VIEW_OPS, ids=[n for n, _ in VIEW_OPS])
def test_view_ops_alias_as_torch_or_refuse_writes(name, op, write):
    a = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    tb, lb = torch.tensor(a), lucid.tensor(a)
    tv, lv = op(torch, tb), op(lucid, lb)
    assert lv.shape == tuple(tv.shape) and lv.tolist() == tv.tolist()
    torch_aliases = tv.untyped_storage().data_ptr() == tb.untyped_storage().data_ptr()
    # a write to the base shows through an alias (the views' values as torch's)
    tb.add_(100.0)
    lb.add_(100.0)
    assert lv.tolist() == tv.tolist(), "a write to the base must show in the view"
    if name in READ_ONLY_VIEWS:
        assert torch_aliases
        with pytest.raises(lucid.LucidError, match="read-only"):
            WRITES[write](lv)
        assert lb.tolist() == tb.tolist() and lv.tolist() == tv.tolist()
        return
    before = lb._version
    with torch.no_grad():
        WRITES[write](tv)
    WRITES[write](lv)
    assert lv.tolist() == tv.tolist()
    assert lb.tolist() == tb.tolist(), "a write through the view must reach the base as torch's"
    # one version counter: a write through an alias bumps the base's version
    assert (lb._version > before) == torch_aliases
    assert (lb._version == lv._version) or not torch_aliases


def test_unfold_is_a_differentiable_view_as_torch():
    from lucid.autograd import gradcheck, gradgradcheck
    rng = np.random.default_rng(0)
    for shape, d, size, step in [((7,), 0, 3, 2), ((7,), 0, 2, 1), ((2, 5, 3), 1, 2, 2),
                                 ((2, 5, 3), -1, 3, 1), ((4,), 0, 0, 1), ((3, 4), 0, 3, 5),
                                 ((), 0, 1, 1), ((), -1, 0, 1), ((0, 3), 1, 2, 1)]:
        a = rng.standard_normal(shape)
        x, xt = lucid.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        y, yt = x.unfold(d, size, step), xt.unfold(d, size, step)
        assert y.shape == tuple(yt.shape), (shape, d, size, step)
        np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
        w = rng.standard_normal(y.shape)
        (y * lucid.tensor(w)).sum().backward()
        (yt * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=0)
        f = lambda t: t.unfold(d, size, step) ** 2      # noqa: E731
        assert gradcheck(f, (lucid.tensor(a, requires_grad=True),))
        assert gradgradcheck(f, (lucid.tensor(a, requires_grad=True),))
    # a view of a tensor with history refuses in-place writes (autograd can't follow them)
    y = lucid.tensor(np.zeros(5), requires_grad=True).unfold(0, 2, 2)
    with pytest.raises(lucid.LucidError, match="view"):
        y.fill_(1.0)


@pytest.mark.parametrize("args", [(0, 5, 1), (0, 2, 0), (0, 2, -1), (1, 2, 1), (0, -1, 1),
                                  (0, 2.0, 1), (0, 2, 1.5), (0, True, 1)])
@pytest.mark.parametrize("shape", [(4,), ()])
def test_unfold_refuses_what_torch_refuses(shape, args):
    with pytest.raises(Exception) as te:
        torch.zeros(shape).unfold(*args)
    want = TypeError if te.type is TypeError else (IndexError if te.type is IndexError
                                                   else (ValueError, lucid.LucidError))
    with pytest.raises(want):
        lucid.zeros(shape).unfold(*args)


def test_select_unbind_movedim_as_torch():
    a = np.arange(24.0).reshape(2, 3, 4)
    L, T = lucid.tensor(a), torch.tensor(a)
    for d, i in [(0, 1), (1, -1), (-1, 3), (2, 0)]:
        assert L.select(d, i).tolist() == T.select(d, i).tolist()
    for d in (0, 1, -1):
        assert [u.tolist() for u in lucid.unbind(L, d)] == [u.tolist() for u in T.unbind(d)]
    for src, dst in [(0, 2), (-1, 0), ((0, 1), (2, 0)), ([2, 0], [0, 1])]:
        assert lucid.movedim(L, src, dst).tolist() == torch.movedim(T, src, dst).tolist()
        assert L.moveaxis(src, dst).tolist() == T.moveaxis(src, dst).tolist()
    for bad in [lambda m, x: x.select(3, 0), lambda m, x: x.select(1, 3),
                lambda m, x: x.select(0, -3), lambda m, x: m.movedim(x, (0, 0), (1, 2)),
                lambda m, x: m.movedim(x, (0, 1), (1,)), lambda m, x: m.unbind(x, 3),
                lambda m, x: m.tensor(1.0).select(0, 0)]:
        with pytest.raises((IndexError, RuntimeError, ValueError)):
            bad(torch, T)
        with pytest.raises((IndexError, ValueError)):
            bad(lucid, L)
    # gradients flow through them (index and permute nodes)
    x = lucid.tensor(a, requires_grad=True)
    (lucid.unbind(x, 1)[2] * 2 + x.select(2, 1).sum() + lucid.movedim(x, 0, 2)[0, 0, 1]).sum() \
        .backward()
    xt = torch.tensor(a, requires_grad=True)
    (torch.unbind(xt, 1)[2] * 2 + xt.select(2, 1).sum() + torch.movedim(xt, 0, 2)[0, 0, 1]).sum() \
        .backward()
    assert x.grad.tolist() == xt.grad.tolist()


def test_view_with_a_dtype_reinterprets_the_bytes():
    assert lucid.ones(4).view(lucid.int32).tolist() == [1065353216] * 4   # 1.0f's bits


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


# Every public creation / fill / scalar entry point, given a bad argument: lucid raises a
# standard exception (or a lucid one) whose message names the argument, wherever torch
# refuses the value too; torch's type of error where it says "wrong type" (TypeError).
# (entry, argument name in the message, call(module, bad value))
ENTRY_POINTS = [
    ("zeros", "size", lambda m, v: m.zeros(v)),
    ("ones", "size", lambda m, v: m.ones(2, v)),
    ("empty", "size", lambda m, v: m.empty((v, 2))),
    ("rand", "size", lambda m, v: m.rand(v)),
    ("randn", "size", lambda m, v: m.randn(2, v)),
    ("full", "fill_value", lambda m, v: m.full((2,), v)),
    ("full_int", "fill_value", lambda m, v: m.full((2,), v, dtype=m.int64)),
    ("full_like", "fill_value", lambda m, v: m.full_like(m.zeros(2), v)),
    ("arange", "end", lambda m, v: m.arange(v)),
    ("linspace_steps", "steps", lambda m, v: m.linspace(0, 1, v)),
    ("linspace_start", "start", lambda m, v: m.linspace(v, 1, 3)),
    ("eye", "'n'", lambda m, v: m.eye(v)),
    ("randint", "high", lambda m, v: m.randint(0, v, (2,))),
    ("normal", "std", lambda m, v: m.normal(0.0, v, (2,))),
    ("manual_seed", "seed", lambda m, v: m.manual_seed(v)),
    ("tensor", "data|integer|complex", lambda m, v: m.tensor([1, v])),
    ("fill_", "value", lambda m, v: m.zeros(2).fill_(v)),
    ("fill_int", "value", lambda m, v: m.zeros(2, dtype=m.int64).fill_(v)),
    ("masked_fill", "value", lambda m, v: m.zeros(2).masked_fill(m.ones(2) > 0, v)),
    ("add", "other|complex", lambda m, v: m.add(m.zeros(2, dtype=m.int64), v)),
    ("mul", "other|complex", lambda m, v: m.zeros(2) * v),
    ("pow", "other|exponent|complex", lambda m, v: m.pow(m.ones(2), v)),
    ("sum", "input|complex", lambda m, v: m.sum(v)),
    ("exp", "input|complex", lambda m, v: m.exp(v)),
    ("sum_dim", "dim", lambda m, v: m.sum(m.ones(2), v)),
    ("unsqueeze", "dim", lambda m, v: m.ones(2).unsqueeze(v)),
    ("clamp", "min", lambda m, v: m.clamp(m.ones(2), min=v)),
    ("lerp", "weight", lambda m, v: m.lerp(m.ones(2), m.zeros(2), v)),
    ("nan_to_num", "'nan'", lambda m, v: m.nan_to_num(m.ones(2), nan=v)),
    ("leaky_relu", "negative_slope", lambda m, v: m.nn.functional.leaky_relu(m.ones(2), v)),
    ("topk", "'k'", lambda m, v: m.topk(m.ones(3), v)),
    ("unfold", "size", lambda m, v: m.ones(3).unfold(0, v, 1)),
    ("set_num_threads", "threads", lambda m, v: m.set_num_threads(v)),
]
BAD = {"huge": 2**70, "too_large_for_float": 10**400, "float": 2.5, "str": "a", "none": None,
       "complex": 1 + 2j}

# Deliberate differences from torch, (entry, bad) -> reason. lucid takes a Python int that a
# float holds (2**70 is exact in float32) where torch refuses every int beyond int64,
# and a number as a tensor operand, and it has no complex dtype.
ACCEPTED = {(e, "huge"): "an int beyond int64 that the float result holds" for e in (
    "full_like", "linspace_start", "fill_", "masked_fill", "mul", "pow", "clamp", "lerp",
    "leaky_relu")}
ACCEPTED.update({("sum", "float"): "a number is a tensor operand",
                 ("exp", "float"): "a number is a tensor operand",
                 ("manual_seed", "float"): "as torch: int(seed)"})
REFUSED = {(e, "complex"): "lucid has no complex dtype" for e in (
    "full", "tensor", "add", "mul", "pow", "linspace_start")}
REFUSED[("fill_int", "float")] = "a fractional fill of an integer tensor raises, never truncates"


def _outcome(fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn()
    except Exception as e:      # noqa: BLE001 - the test inspects whatever was raised
        return e
    return None


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("entry,arg,call", ENTRY_POINTS, ids=[e[0] for e in ENTRY_POINTS])
def test_bad_arguments_raise_errors_naming_the_argument(entry, arg, call, bad):
    before = lucid.get_num_threads(), torch.get_num_threads()
    try:
        err_l = _outcome(lambda: call(lucid, BAD[bad]))
        err_t = _outcome(lambda: call(torch, BAD[bad]))
    finally:
        lucid.set_num_threads(before[0])
        torch.set_num_threads(before[1])
    if err_l is None:
        assert err_t is None or (entry, bad) in ACCEPTED, (entry, bad, "torch raises", err_t)
        return
    assert isinstance(err_l, (TypeError, ValueError, OverflowError, IndexError, lucid.LucidError)) \
        and type(err_l).__module__ in ("builtins", "lucid._core.core"), (entry, bad, repr(err_l))
    assert err_t is not None or (entry, bad) in REFUSED, (entry, bad, "torch accepts", err_l)
    assert re.search(arg, str(err_l)), (entry, bad, str(err_l))
    if isinstance(err_t, TypeError) and bad in ("str", "none"):
        assert isinstance(err_l, TypeError), (entry, bad, err_l, err_t)


# -- Python scalars beyond float32's range or below its subnormals -----------------------------

EDGE_X = [0.0, -0.0, 1e-45, 1e-40, 1e-30, 0.5, 1.0, 1.5, 3e38, math.inf, -math.inf, -2.0, -1.0,
          -0.5, math.nan, 2.0]
EDGE_SCALARS = [1e-50, -1e-50, 1e-320, 5e-324, 1e-46, 2.0**-150, 1e-39, 1e50, -1e50, 1e300, 1e39,
                -1e39, 3.5e38, 2 + 2**-30, 0.5 + 2**-40, 1 / 3, 1.7, -2.3, 2**25 + 1]


def _same(got, want, ulps=0):
    """Same dtype, nan pattern, infinities and zeros; other values within ``ulps`` units in
    the last place of the result dtype (the math library's own error, not the scalar's)."""
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
    g, w = got.numpy(), want.numpy()
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    exact = ~np.isfinite(w) | (w == 0)
    np.testing.assert_array_equal(g[exact & ~np.isnan(w)], w[exact & ~np.isnan(w)])
    ints = {4: np.int32, 8: np.int64}[g.dtype.itemsize]
    d = np.abs(g.view(ints).astype(object) - w.view(ints).astype(object))[~exact]
    assert max(d, default=0) <= ulps, (list(g), list(w))


@pytest.mark.parametrize("dtype", ["float32", "int64", "float64"])
@pytest.mark.parametrize("s", EDGE_SCALARS)
def test_pow_reads_a_python_exponent_at_full_precision(s, dtype):
    """x ** s with the exponent as given, never first rounded to float32 (1e-50 would become
    0, so 0 ** 1e-50 = 1, and 2 + 2**-30 an integer, so (-2) ** it = 4). torch 2.13 does
    this on strided tensors (float32(pow(double(x), s)), compared below) and on tensors of
    fewer than 32 elements; its vectorised path for 32 or more contiguous elements rounds
    the exponent first. lucid's result never depends on the length."""
    vals = EDGE_X if dtype != "int64" else [0, 1, 2, -3, 7, 2**30, -2**40]
    x = np.array(vals, dtype)
    want = torch.pow(torch.from_numpy(np.repeat(x, 2))[::2], s)       # the strided path
    ulps = 0 if dtype != "float64" else 1       # float64: libmvec's pow, not glibc's
    _same(lucid.pow(lucid.tensor(x), s), want, ulps)
    long = lucid.pow(lucid.tensor(np.tile(x, 40)), s)                  # no length dependence
    _same(long, want.repeat(40), ulps)
    if dtype == "float32":
        rng = np.random.default_rng(0)
        r = np.concatenate([rng.uniform(0, 10, 3000), 10**rng.uniform(-45, 38, 3000)])
        r = r.astype(np.float32)
        with np.errstate(all="ignore"):
            ref = (r.astype(np.float64) ** s).astype(np.float32)     # correctly rounded, nearly
        got = lucid.pow(lucid.from_numpy(r), s).numpy()
        ulps = np.abs(got.view(np.int32).astype(np.int64) - ref.view(np.int32).astype(np.int64))
        assert ulps[np.isfinite(ref)].max(initial=0) <= 1
        np.testing.assert_array_equal(got[~np.isfinite(ref)], ref[~np.isfinite(ref)])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "rsub", "rdiv", "rpow"])
def test_arithmetic_with_out_of_range_python_scalars_as_torch(op, dtype):
    x = np.array(EDGE_X, dtype)
    for s in EDGE_SCALARS:
        for n in (1, 40):        # torch's small and vectorised paths agree for these
            def f(m, t):
                if op.startswith("r"):
                    return getattr(m, {"rsub": "sub", "rdiv": "div", "rpow": "pow"}[op])(s, t)
                return getattr(m, op)(t, s)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _same(f(lucid, lucid.tensor(np.tile(x, n))), f(torch, torch.tensor(np.tile(x, n))),
                      ulps=1 if op == "rpow" else 0)      # pow's math library, not the scalar


def test_huge_and_tiny_messages_name_the_op():
    with pytest.raises(OverflowError, match=r"fill_\(\): value .* cannot be converted to lucid.float32"):
        lucid.ones(2).fill_(10**400)
    with pytest.raises(OverflowError, match="input"):
        lucid.sum(2**70)
    with pytest.raises(TypeError, match="size must be a tuple of ints, got float"):
        lucid.ones(2.5)
    assert lucid.tensor(2**70, dtype=lucid.float64).item() == float(2**70)     # as torch


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


def test_diagonal_is_a_view_as_torch():
    a, at = lucid.zeros(3, 3), torch.zeros(3, 3)
    a.diagonal().fill_(7.0)
    at.diagonal().fill_(7.0)
    assert a.tolist() == at.tolist()
    assert lucid.diagonal(lucid.arange(9.0).reshape(3, 3), 1).tolist() == \
        torch.diagonal(torch.arange(9.0).reshape(3, 3), 1).tolist()
    ro = np.zeros((3, 3))
    ro.flags.writeable = False           # a view of read-only memory stays read-only
    with pytest.raises(lucid.LucidError, match="read-only"):
        lucid.from_numpy(ro).diagonal().fill_(1.0)
    # history: a view of a tensor that requires grad refuses writes; a write to the
    # base after the view was taken makes backward through the view raise
    x = lucid.zeros(3, 3, requires_grad=True)
    with pytest.raises(lucid.LucidError, match="view"):
        (x * 1).diagonal().fill_(1.0)
    y = x * 1
    d = y.diagonal()
    y[0, 0] = 5.0
    with pytest.raises(lucid.LucidError, match="modified"):
        d.sum().backward()
