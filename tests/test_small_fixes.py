"""copysign's graph, NumPy arrays as operands of floor_divide / div / xlogy,
Tensor.transpose() without dims, and NumPy's np.sort(t, axis=None), against torch and
NumPy."""
import numpy as np
import pytest

import lucid

torch = pytest.importorskip("torch")


def test_copysign_links_both_operands_as_torch():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4))
    a[0, 0] = 0.0
    b = rng.standard_normal((4,))
    b[1] = -0.0
    ta = torch.tensor(a, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True)
    la = lucid.tensor(a, dtype=lucid.float64, requires_grad=True)
    lb = lucid.tensor(b, dtype=lucid.float64, requires_grad=True)
    w = rng.standard_normal((3, 4))
    (torch.copysign(ta, tb) * torch.tensor(w)).sum().backward()
    y = lucid.copysign(la, lb)
    np.testing.assert_array_equal(y.detach().numpy(), torch.copysign(ta, tb).detach().numpy())
    assert len(y.grad_fn.next_functions) == 2
    assert all(f[0] is not None for f in y.grad_fn.next_functions)
    (y * lucid.tensor(w)).sum().backward()
    np.testing.assert_array_equal(la.grad.numpy(), ta.grad.numpy())
    np.testing.assert_array_equal(lb.grad.numpy(), tb.grad.numpy())
    # graph mode: the gradient is linear in the upstream gradient
    la.grad = None
    (g,) = lucid.autograd.grad(lucid.copysign(la, lb).sum(), la, create_graph=True)
    (tg,) = torch.autograd.grad(torch.copysign(ta, tb).sum(), ta, create_graph=True)
    np.testing.assert_array_equal(g.detach().numpy(), tg.detach().numpy())
    # a number as other: no edge for it
    y = lucid.copysign(la, -1.0)
    np.testing.assert_array_equal(y.detach().numpy(), -np.abs(a))


@pytest.mark.parametrize("other", [np.array([2, -3, 4]), np.array([2.5, -3.0, 4.0]),
                                   np.array([2, -3, 4], np.int32), [2, -3, 4]])
@pytest.mark.parametrize("x", [np.array([7, -7, 9]), np.array([7.5, -7.0, 9.0], np.float32)])
def test_floor_divide_and_div_take_arrays_as_torch(x, other):
    tx, to = torch.from_numpy(x), torch.from_numpy(np.asarray(other))
    lx = lucid.from_numpy(x)
    for fn_l, fn_t in ((lambda a, b: lucid.floor_divide(a, b), torch.floor_divide),
                       (lambda a, b: lucid.div(a, b, rounding_mode="trunc"),
                        lambda a, b: torch.div(a, b, rounding_mode="trunc"))):
        got, want = fn_l(lx, other), fn_t(tx, to)
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        got, want = fn_l(other, lx), fn_t(to, tx)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("other", [np.array([0.5, 2.0, 0.0]), [0.5, 2.0, 0.0],
                                   np.array([1, 2, 3])])
def test_xlogy_takes_arrays_as_torch(other):
    x = np.array([0.0, 1.5, 2.0])
    want = torch.xlogy(torch.tensor(x), torch.tensor(np.asarray(other)))
    got = lucid.xlogy(lucid.tensor(x, dtype=lucid.float64), other)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-15)
    want = torch.xlogy(torch.tensor(np.asarray(other)), torch.tensor(x))
    got = lucid.special.xlogy(other, lucid.tensor(x, dtype=lucid.float64))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-15)


def test_transpose_without_dims_is_a_type_error_as_torch():
    with pytest.raises(TypeError):
        torch.ones(2, 3).transpose()
    with pytest.raises(TypeError, match="dim0 and dim1"):
        lucid.ones(2, 3).transpose()
    with pytest.raises(TypeError, match="dim0 and dim1"):
        lucid.transpose(lucid.ones(2, 3), 0)
    assert lucid.ones(2, 3).transpose(0, 1).shape == (3, 2)
    np.testing.assert_array_equal(np.transpose(lucid.ones(2, 3, 4)).numpy(),
                                  np.transpose(np.ones((2, 3, 4))))


def test_numpy_sort_with_axis_none_flattens():
    a = np.random.default_rng(1).standard_normal((3, 4))
    got = np.sort(lucid.tensor(a, dtype=lucid.float64), axis=None)
    np.testing.assert_array_equal(np.asarray(got), np.sort(a, axis=None))
    got = np.argsort(lucid.tensor(a, dtype=lucid.float64), axis=None)
    np.testing.assert_array_equal(np.asarray(got), np.argsort(a, axis=None, kind="stable"))
    got = np.sort(lucid.tensor(a, dtype=lucid.float64))
    np.testing.assert_array_equal(np.asarray(got), np.sort(a))
