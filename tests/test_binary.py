"""add/sub/mul/div/neg/pow and sum/mean: values, scalars, dtype promotion, edges."""
import itertools
import subprocess
import sys
import os
import warnings

import numpy as np
import pytest

import lucid
from lucid_testutils import ALL_DTYPE_NAMES, lt, to_np

def _tdt(torch, name):
    return torch.bool if name == "bool_" else getattr(torch, name)


BIN = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.divide),
    "pow": (lambda a, b: a ** b, np.power),
}


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("sa,sb", [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((4,), (2, 3, 4)), ((), (5,)),
                                   ((0, 2), (1, 2)), ((2, 1, 3), (4, 1))])
@pytest.mark.parametrize("op", sorted(BIN))
def test_binary_values_vs_numpy(op, sa, sb, dt):
    rng = np.random.default_rng(2)
    a0 = rng.uniform(0.5, 2, sa).astype(dt)
    b0 = rng.uniform(0.5, 2, sb).astype(dt)
    f, npf = BIN[op]
    want = npf(a0, b0)
    for got in (f(lt(a0), lt(b0)), getattr(lucid, op)(lt(a0), lt(b0))):
        assert got.shape == want.shape and got.dtype is getattr(lucid, dt)
        rtol = 4e-7 if dt == "float32" else 2e-16
        if op == "pow":
            rtol *= 8
        np.testing.assert_allclose(to_np(got), want, rtol=rtol)


@pytest.mark.parametrize("s", [2.5, -3.0, 0.5, 2])
@pytest.mark.parametrize("op", sorted(BIN))
def test_python_scalar_both_sides(op, s):
    a0 = np.array([0.5, 1.25, 3.0], dtype=np.float32)
    f, npf = BIN[op]
    got_r = f(lt(a0), s)
    got_l = f(s, lt(a0))
    assert got_r.dtype is lucid.float32 and got_l.dtype is lucid.float32
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(to_np(got_r), npf(a0, np.float32(s)), rtol=2e-6)
        np.testing.assert_allclose(to_np(got_l), npf(np.float32(s), a0), rtol=2e-6)


def test_neg_values():
    a0 = np.array([0.0, -0.0, 1.5, -np.inf, np.nan])
    for got in (to_np(-lt(a0)), to_np(lucid.neg(lt(a0)))):
        np.testing.assert_array_equal(got, -a0)
        assert np.signbit(got[0]) and not np.signbit(got[1])
    assert to_np(-lt(np.array([1, -2]))).tolist() == [-1, 2]


@pytest.mark.parametrize("a,b", list(itertools.product(ALL_DTYPE_NAMES, repeat=2)))
@pytest.mark.parametrize("op", sorted(BIN))
def test_dtype_promotion_vs_torch(torch, op, a, b):
    ta = torch.tensor([1, 2], dtype=_tdt(torch, a))
    tb = torch.tensor([1, 1], dtype=_tdt(torch, b))
    f, _ = BIN[op]
    try:
        want = str(f(ta, tb).dtype).replace("torch.bool", "torch.bool_").replace("torch.", "lucid.")
    except Exception:
        pytest.skip("torch refuses this combination")
    got = f(lucid.tensor([1, 2], dtype=getattr(lucid, a)), lucid.tensor([1, 1], dtype=getattr(lucid, b)))
    if want == "lucid.float16" and lucid.ops.schema(op).amp_policy.name == "ForceFP32":
        want = "lucid.float32"      # the AMP policy upcasts half inputs (pow), outside autocast too
    assert str(got.dtype) == want
    np.testing.assert_allclose(to_np(got).astype(np.float64),
                               f(ta, tb).double().numpy(), rtol=1e-3)


@pytest.mark.parametrize("name", ALL_DTYPE_NAMES)
@pytest.mark.parametrize("s", [2, 2.5, True])
@pytest.mark.parametrize("op", sorted(BIN))
def test_scalar_promotion_vs_torch(torch, op, name, s):
    ta = torch.tensor([1, 2], dtype=_tdt(torch, name))
    f, _ = BIN[op]
    for fn in (lambda x: f(x, s), lambda x: f(s, x)):
        try:
            want = str(fn(ta).dtype).replace("torch.bool", "torch.bool_").replace("torch.", "lucid.")
        except Exception:
            continue
        got = fn(lucid.tensor([1, 2], dtype=getattr(lucid, name)))
        if want == "lucid.float16" and lucid.ops.schema(op).amp_policy.name == "ForceFP32":
            want = "lucid.float32"      # the AMP policy upcasts half inputs (pow)
        assert str(got.dtype) == want


def test_int_true_division_and_int_pow():
    np.testing.assert_allclose(to_np(lucid.tensor([7, -7]) / 2), [3.5, -3.5])
    assert (lucid.tensor([7]) / 2).dtype is lucid.float32
    assert to_np(lucid.tensor([3, 2]) ** 2).tolist() == [9, 4]
    with pytest.raises(RuntimeError):
        lucid.tensor([2]) ** -1


@pytest.mark.parametrize("name,want", [("int32", "int64"), ("int64", "int64"), ("bool_", "int64"),
                                       ("float16", "float16"), ("float32", "float32")])
def test_sum_dtype_vs_torch(torch, name, want):
    t = lucid.tensor([1, 1, 0], dtype=getattr(lucid, name)).sum()
    tt = torch.tensor([1, 1, 0], dtype=_tdt(torch, name)).sum()
    if tt.dtype == torch.float16:
        tt = tt.float()     # sum is ForceFP32: a half sum can overflow where float32's does not
    assert str(t.dtype) == str(tt.dtype).replace("torch.", "lucid.")
    assert t.item() == tt.item()


@pytest.mark.parametrize("name", ["int32", "int64", "bool_"])
def test_mean_of_integers_raises(name):
    with pytest.raises((TypeError, RuntimeError)):
        lucid.tensor([1, 2], dtype=getattr(lucid, name)).mean()


@pytest.mark.parametrize("case", [
    ("pow_tensor_zero_base", lambda M, a, b: a ** b, [[0.0, 0.0, 0.0, -2.0, 1.0], [2.0, 0.0, 0.5, 2.0, 0.0]]),
    ("pow_scalar_zero_exp", lambda M, a: a ** 0.0, [[0.0, 1.0, -1.0]]),
    ("pow_scalar_half", lambda M, a: a ** 0.5, [[0.0, 1.0]]),
    ("rpow_zero_base", lambda M, a: 0.0 ** a, [[0.0, 1.0, 2.0]]),
    ("div_by_zero", lambda M, a, b: a / b, [[1.0, 0.0, -1.0], [0.0, 0.0, 0.0]]),
    ("log2_zero", lambda M, a: M.log2(a), [[0.0, -1.0]]),
], ids=lambda c: c[0] if isinstance(c, tuple) else None)
def test_edge_gradients_vs_torch(torch, case):
    _, f, vals = case
    la = [lt(np.array(v), requires_grad=True) for v in vals]
    ta = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in vals]
    with np.errstate(all="ignore"):
        ly = f(lucid, *la)
        ly.sum().backward()
    ty = f(torch, *ta)
    ty.sum().backward()
    np.testing.assert_array_equal(to_np(ly), ty.detach().numpy())
    for x, t in zip(la, ta):
        np.testing.assert_array_equal(to_np(x.grad), t.grad.numpy())


def test_ieee_results_emit_no_warnings():
    """Division by zero, log2(0), 0**-1 follow IEEE silently (as in torch), even under -W error."""
    a = lt(np.array([1.0, 0.0, -1.0]), requires_grad=True)
    b = lt(np.array([0.0, 0.0, 0.5]), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (a / b).sum().backward()
        (a ** b).sum().backward()
        (1.0 / b).sum().backward()
        lucid.log2(a).sum().backward()
        AG = lucid.autograd
        AG.grad(lucid.log2(b).sum(), [b], create_graph=True)


def test_clone_is_differentiable_like_torch(torch):
    x = lt(np.array([1.0, 2.0]), requires_grad=True)
    c = x.clone()
    assert c.requires_grad and not c.is_leaf
    (c * c).sum().backward()
    np.testing.assert_allclose(to_np(x.grad), [2.0, 4.0])


_DEEP = r"""
import sys, gc
sys.path.insert(0, sys.argv[1])
import lucid
gc.disable()
n = 100000
x = lucid.tensor([1.0], dtype=lucid.float64, requires_grad=True)
y = x
for _ in range(n):
    y = y * 1.0
y.sum().backward()
assert x.grad.tolist() == [1.0], x.grad.tolist()
y = x
for _ in range(n):
    y = lucid.exp(y) * 0.0 + 0.5
del y          # freeing a very deep graph must not overflow the C stack
y = x
for _ in range(n):
    y = y + 1.0
(g,) = lucid.autograd.grad(y.sum(), [x])
print("ok")
"""


def test_deep_graph_no_crash():
    # the directory holding the lucid this process imported (site-packages in CI)
    root = os.path.dirname(os.path.dirname(os.path.abspath(lucid.__file__)))
    r = subprocess.run([sys.executable, "-c", _DEEP, root], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])
