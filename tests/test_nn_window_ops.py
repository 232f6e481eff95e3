"""Convolution and max pooling as single ops (im2col / col2im and max pooling kernels in
C): values, gradients and second derivatives against torch over many geometries, the
kernels' adjointness, and edge values."""
import itertools

import numpy as np
import pytest

import lucid
from lucid.nn import _kernels
from lucid.nn import functional as F
from nn_torchref import assert_close, np_of

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# (input shape, kernel, stride, padding, dilation)
CONV2D = [
    ((2, 3, 7, 6), (3, 3), 1, 1, 1),
    ((2, 3, 7, 6), (3, 2), (2, 1), (1, 2), (1, 2)),
    ((1, 2, 5, 9), (1, 4), (1, 3), (0, 2), 1),
    ((3, 1, 4, 4), (4, 4), 1, 0, 1),
    ((2, 2, 6, 5), (2, 2), 2, "same", 1),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,kernel,stride,padding,dilation", CONV2D)
def test_conv2d_matches_torch(shape, kernel, stride, padding, dilation, dtype):
    if padding == "same":
        stride = 1
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    w = rng.standard_normal((4, shape[1]) + kernel)
    b = rng.standard_normal(4)
    ldt, tdt = getattr(lucid, dtype), getattr(torch, dtype)
    lx, lw, lb = (lucid.tensor(a, dtype=ldt, requires_grad=True) for a in (x, w, b))
    tx, tw, tb = (torch.tensor(a, dtype=tdt, requires_grad=True) for a in (x, w, b))
    y = F.conv2d(lx, lw, lb, stride, padding, dilation)
    ty = TF.conv2d(tx, tw, tb, stride, padding, dilation)
    assert type(y.grad_fn).__name__ == "ConvolutionBackward"
    assert_close(y, ty, dtype, 10, "forward")
    g = rng.standard_normal(tuple(y.shape))
    y.backward(lucid.tensor(g, dtype=ldt))
    ty.backward(torch.tensor(g, dtype=tdt))
    for a, ta, what in ((lx, tx, "x"), (lw, tw, "w"), (lb, tb, "b")):
        assert_close(a.grad, ta.grad, dtype, 10, f"grad {what}")


def test_conv_double_backward_matches_torch():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 2, 5, 4)), rng.standard_normal((3, 2, 3, 2))
    lx, lw = lucid.tensor(x, requires_grad=True), lucid.tensor(w, requires_grad=True)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    y = F.conv2d(lx, lw, None, 2, 1, (1, 2))
    ty = TF.conv2d(tx, tw, None, 2, 1, (1, 2))
    g = rng.standard_normal(tuple(y.shape))
    gx, gw = lucid.autograd.grad(y, (lx, lw), lucid.tensor(g), create_graph=True)
    tgx, tgw = torch.autograd.grad(ty, (tx, tw), torch.tensor(g), create_graph=True)
    assert_close(gx, tgx, "float64", 10)
    assert_close(gw, tgw, "float64", 10)
    s = (gx * gx).sum() + (gw * gw).sum()
    ts = (tgx * tgx).sum() + (tgw * tgw).sum()
    hx, hw = lucid.autograd.grad(s, (lx, lw))
    thx, thw = torch.autograd.grad(ts, (tx, tw))
    assert_close(hx, thx, "float64", 10)
    assert_close(hw, thw, "float64", 10)


def test_conv1d_and_input_without_grad():
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((3, 2, 9)), rng.standard_normal((4, 2, 3))
    lw = lucid.tensor(w, requires_grad=True)
    tw = torch.tensor(w, requires_grad=True)
    y = F.conv1d(lucid.tensor(x), lw, stride=2, padding=2, dilation=2)
    ty = TF.conv1d(torch.tensor(x), tw, stride=2, padding=2, dilation=2)
    assert type(y.grad_fn).__name__ == "ConvolutionBackward"
    assert_close(y, ty, "float64")
    y.sum().backward()
    ty.sum().backward()
    assert_close(lw.grad, tw.grad, "float64")


POOLS = [
    ((2, 3, 6, 7), 2, None, 0, 1, False),
    ((2, 2, 9, 8), 3, 2, 1, 2, True),
    ((1, 2, 5, 5), (2, 3), (1, 2), (1, 1), 1, True),
    ((2, 1, 4, 4), 4, 1, 2, 1, False),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,k,s,p,d,ceil", POOLS)
def test_max_pool2d_matches_torch(shape, k, s, p, d, ceil, dtype):
    rng = np.random.default_rng(3)
    x = rng.permutation(int(np.prod(shape))).reshape(shape) / 7.0   # distinct values
    ldt, tdt = getattr(lucid, dtype), getattr(torch, dtype)
    lx = lucid.tensor(x, dtype=ldt, requires_grad=True)
    tx = torch.tensor(x, dtype=tdt, requires_grad=True)
    y = F.max_pool2d(lx, k, s, p, d, ceil)
    ty = TF.max_pool2d(tx, k, s, p, d, ceil)
    assert type(y.grad_fn).__name__ == "MaxPoolBackward"
    assert_close(y, ty, dtype)
    g = rng.standard_normal(tuple(y.shape))
    y.backward(lucid.tensor(g, dtype=ldt))
    ty.backward(torch.tensor(g, dtype=tdt))
    assert_close(lx.grad, tx.grad, dtype)
    gx, = lucid.autograd.grad(F.max_pool2d(lx, k, s, p, d, ceil).sum() * 1.0, lx,
                              create_graph=True)
    assert_close(gx, torch.autograd.grad(TF.max_pool2d(tx, k, s, p, d, ceil).sum(), tx)[0],
                 dtype)


def test_max_pool_ties_inf_and_nan():
    x = np.array([[[[1.0, 1.0, -np.inf, -np.inf],
                    [0.0, 1.0, -np.inf, -np.inf],
                    [np.nan, 2.0, 3.0, 3.0],
                    [5.0, np.nan, 3.0, 1.0]]]])
    lx = lucid.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    y, ty = F.max_pool2d(lx, 2), TF.max_pool2d(tx, 2)
    np.testing.assert_array_equal(np_of(y), ty.detach().numpy())
    y.sum().backward()
    ty.sum().backward()
    # ties and -inf windows: the first maximum gets the gradient; a window with two NaNs
    # sends it to the last NaN (torch's rule)
    np.testing.assert_array_equal(np_of(lx.grad), tx.grad.numpy())
    _, li = F.max_pool2d(lx, 2, return_indices=True)
    _, ti = TF.max_pool2d(tx, 2, return_indices=True)
    np.testing.assert_array_equal(np_of(li), ti.numpy())


@pytest.mark.parametrize("geo", [
    (2, 3, 5, 6, 3, 2, 1, 2, 1, 1, 1, 0, 5, 3),
    (1, 2, 7, 7, 3, 3, 2, 2, 2, 1, 2, 1, 4, 4),
    (3, 1, 4, 9, 1, 4, 1, 3, 1, 2, 0, 3, 4, 4),
])
def test_col2im_is_the_adjoint_of_im2col(geo):
    """<im2col(x), c> == <x, col2im(c)> for random x and c (float64)."""
    rng = np.random.default_rng(4)
    n, c, h, w, kh, kw = geo[:6]
    x = rng.standard_normal((n, c, h, w))
    cols = _kernels.im2col(x, geo)
    c_ = rng.standard_normal(cols.shape)
    back = _kernels.col2im(c_, geo)
    np.testing.assert_allclose((cols * c_).sum(), (x * back).sum(), rtol=1e-12)
    # each column entry is the input at its window position, or zero in the padding
    oh, ow = geo[12:]
    sh, sw, dh, dw, ph, pw = geo[6:12]
    cols6 = cols.reshape(c, kh, kw, n, oh, ow)
    for ci, ki, kj, ni, i, j in itertools.product(range(c), range(kh), range(kw), range(n),
                                                  range(oh), range(ow)):
        r, q = i * sh - ph + ki * dh, j * sw - pw + kj * dw
        want = x[ni, ci, r, q] if 0 <= r < h and 0 <= q < w else 0.0
        assert cols6[ci, ki, kj, ni, i, j] == want


def test_kernels_refuse_bad_arrays():
    geo = (1, 1, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 2, 2)
    with pytest.raises(TypeError, match="float32 or float64"):
        _kernels.im2col(np.zeros((1, 1, 3, 3), np.int64), geo)
    with pytest.raises(ValueError, match="shape"):
        _kernels.im2col(np.zeros((1, 1, 3, 4)), geo)
    with pytest.raises(ValueError, match="int64"):
        _kernels.max_pool_grad(np.zeros((1, 1, 2, 2)), np.zeros((1, 1, 2, 2), np.int32), geo)
