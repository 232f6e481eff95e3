"""The fused cross entropy (one kernel pass computing the loss and its gradient) against
torch: values, gradients and second derivatives for every option, both target kinds,
float32 and float64; and its graph-mode formula against its eager kernel."""
import numpy as np
import pytest

import lucid
from lucid.nn import functional as F
from nn_torchref import assert_close, np_of

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DTYPES = ["float32", "float64"]
REDUCTIONS = ["mean", "sum", "none"]
# (shape, classes) cases: rows; spatial positions (class dim strided); more classes than
# the kernel gathers on the stack; a class count that is not a multiple of the vector block.
SHAPES = [(7, 10), (3, 5, 4, 2), (4, 300), (2, 37, 3)]
OPTIONS = [
    dict(),
    dict(label_smoothing=0.1),
    dict(ignore_index=2),
    dict(weight=True),
    dict(weight=True, ignore_index=1, label_smoothing=0.25),
]


def _data(shape, seed=0, prob=False):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 3
    c = shape[1]
    if prob:
        t = rng.random(shape)
        t /= t.sum(1, keepdims=True)
    else:
        t = rng.integers(0, c, (shape[0],) + shape[2:])
    w = rng.random(c) + 0.5
    return x, t, w


def _pair(x, t, w, opts, dtype, reduction):
    """lucid's and torch's losses (with their leaf inputs) for one case."""
    opts = dict(opts)
    use_w = opts.pop("weight", False)
    ldt, tdt = getattr(lucid, dtype), getattr(torch, dtype)
    lx = lucid.tensor(x, dtype=ldt, requires_grad=True)
    tx = torch.tensor(x, dtype=tdt, requires_grad=True)
    if t.dtype.kind == "f":
        lt, tt = lucid.tensor(t, dtype=ldt), torch.tensor(t, dtype=tdt)
    else:
        lt, tt = lucid.tensor(t), torch.tensor(t)
    lw = lucid.tensor(w, dtype=ldt) if use_w else None
    tw = torch.tensor(w, dtype=tdt) if use_w else None
    out = F.cross_entropy(lx, lt, lw, reduction=reduction, **opts)
    tout = TF.cross_entropy(tx, tt, tw, reduction=reduction, **opts)
    return lx, out, tx, tout


# ignore_index applies to class-index targets only
CASES = [(prob, o) for prob in (False, True) for o in OPTIONS
         if not (prob and "ignore_index" in o)]
CASE_IDS = [("probabilities-" if prob else "indices-") + str(o) for prob, o in CASES]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("prob,opts", CASES, ids=CASE_IDS)
def test_values_and_gradients_match_torch(prob, opts, shape, reduction, dtype):
    x, t, w = _data(shape, prob=prob)
    lx, out, tx, tout = _pair(x, t, w, opts, dtype, reduction)
    assert type(out.grad_fn).__name__ == "CrossEntropyBackward"
    assert out.dtype == getattr(lucid, dtype)
    assert_close(out, tout, dtype, 10, "value")
    g = np.random.default_rng(1).standard_normal(tuple(out.shape))
    out.backward(lucid.tensor(g, dtype=out.dtype))
    tout.backward(torch.tensor(g, dtype=tout.dtype))
    assert_close(lx.grad, tx.grad, dtype, 10, "grad")


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("prob,opts", CASES, ids=CASE_IDS)
def test_double_backward_matches_torch(prob, opts, reduction):
    x, t, w = _data((4, 5, 3), seed=2, prob=prob)
    lx, out, tx, tout = _pair(x, t, w, opts, "float64", reduction)
    g = np.random.default_rng(3).standard_normal(tuple(out.shape))
    lg = lucid.tensor(g, requires_grad=True)
    tg = torch.tensor(g, requires_grad=True)
    (gx,) = lucid.autograd.grad(out, lx, lg, create_graph=True)
    (tgx,) = torch.autograd.grad(tout, tx, tg, create_graph=True)
    assert_close(gx, tgx, "float64", 10, "first derivative, graph mode")
    v = np.random.default_rng(4).standard_normal(x.shape)
    hx, hg = lucid.autograd.grad((gx * lucid.tensor(v)).sum(), (lx, lg))
    thx, thg = torch.autograd.grad((tgx * torch.tensor(v)).sum(), (tx, tg))
    assert_close(hx, thx, "float64", 10, "second derivative wrt the logits")
    assert_close(hg, thg, "float64", 10, "second derivative wrt the output gradient")


@pytest.mark.parametrize("prob,opts", CASES, ids=CASE_IDS)
def test_gradcheck_and_gradgradcheck(prob, opts):
    x, t, w = _data((3, 4, 2), seed=5, prob=prob)
    opts = dict(opts)
    lw = lucid.tensor(w) if opts.pop("weight", False) else None
    lt = lucid.tensor(t)
    for reduction in REDUCTIONS:
        def fn(a, reduction=reduction):
            return F.cross_entropy(a, lt, lw, reduction=reduction, **opts)
        xs = [lucid.tensor(x, requires_grad=True)]
        assert lucid.autograd.gradcheck(fn, xs, atol=1e-6, rtol=1e-4)
        assert lucid.autograd.gradgradcheck(fn, xs, atol=1e-6, rtol=1e-4)


def test_eager_kernel_agrees_with_graph_formula():
    """The gradient the forward kernel computes equals the node's formula in lucid ops."""
    x, t, w = _data((6, 7, 2), seed=6)
    for opts in OPTIONS:
        for reduction in REDUCTIONS:
            o = dict(opts)
            lw = lucid.tensor(w) if o.pop("weight", False) else None
            lx = lucid.tensor(x, requires_grad=True)
            out = F.cross_entropy(lx, lucid.tensor(t), lw, reduction=reduction, **o)
            g = lucid.tensor(np.random.default_rng(7).standard_normal(tuple(out.shape)))
            (eager,) = lucid.autograd.grad(out, lx, g, retain_graph=True)
            (graph,) = lucid.autograd.grad(out, lx, g, create_graph=True)
            np.testing.assert_allclose(np_of(eager), np_of(graph), rtol=1e-12, atol=1e-14,
                                       err_msg=f"{opts} {reduction}")


def test_all_targets_ignored():
    x, t, _ = _data((4, 3))
    t[:] = -100
    for reduction in REDUCTIONS:
        lx, out, tx, tout = _pair(x, t, None, {}, "float64", reduction)
        np.testing.assert_array_equal(np_of(out), tout.detach().numpy())   # nan for mean
        out.sum().backward()
        tout.sum().backward()
        np.testing.assert_array_equal(np_of(lx.grad), tx.grad.numpy())


def test_extreme_logits_match_torch():
    x = np.array([[1e4, 0.0, -1e4], [-np.inf, 0.0, 1.0], [np.inf, 0.0, 1.0],
                  [np.nan, 0.0, 1.0]])
    t = np.array([0, 0, 1, 2])
    _, out, _, tout = _pair(x, t, None, {}, "float32", "none")
    np.testing.assert_array_equal(np.isnan(np_of(out)), np.isnan(tout.detach().numpy()))
    ok = ~np.isnan(tout.detach().numpy())
    np.testing.assert_allclose(np_of(out)[ok], tout.detach().numpy()[ok], rtol=1e-6)


def test_bad_arguments_raise():
    x = lucid.randn(4, 3, requires_grad=True)
    with pytest.raises(IndexError, match="target 3 is out of bounds"):
        F.cross_entropy(x, lucid.tensor([0, 1, 3, 2]))
    with pytest.raises(IndexError, match="target -1"):
        F.cross_entropy(x, lucid.tensor([0, -1, 1, 2]))
    with pytest.raises(ValueError, match="shape"):
        F.cross_entropy(x, lucid.tensor([0, 1]))
    with pytest.raises(ValueError, match="probability targets"):
        F.cross_entropy(x, lucid.rand(4, 2))
    with pytest.raises(ValueError, match="weight"):
        F.cross_entropy(x, lucid.tensor([0, 1, 1, 2]), lucid.ones(4))
    with pytest.raises(TypeError, match="floating point"):
        F.cross_entropy(lucid.tensor([[1, 2]]), lucid.tensor([0]))
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(x, lucid.tensor([0, 1, 1, 2]), reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(x, lucid.tensor([0, 1, 1, 2]), label_smoothing=1.5)
    with pytest.raises(ValueError, match="ignore_index"):
        F.cross_entropy(x, lucid.rand(4, 3), ignore_index=0)


def test_half_logits_compute_in_float32():
    x, t, _ = _data((5, 4))
    lx = lucid.tensor(x, dtype=lucid.float16, requires_grad=True)
    out = F.cross_entropy(lx, lucid.tensor(t))
    tx = torch.tensor(x, dtype=torch.float16, requires_grad=True)
    tout = TF.cross_entropy(tx.float(), torch.tensor(t))
    assert out.dtype == lucid.float32
    assert_close(out, tout, "float32")
    out.backward()
    tout.backward()
    assert lx.grad.dtype == lucid.float16
    np.testing.assert_allclose(np_of(lx.grad).astype(np.float32), tx.grad.float().numpy(),
                               rtol=1e-3, atol=1e-4)


def test_thread_count_does_not_change_results():
    x, t, w = _data((512, 40, 3), seed=8)
    res = []
    old = lucid.get_num_threads()
    try:
        for n in (1, 2):
            lucid.set_num_threads(n)
            lx = lucid.tensor(x, dtype=lucid.float32, requires_grad=True)
            out = F.cross_entropy(lx, lucid.tensor(t), lucid.tensor(w, dtype=lucid.float32),
                                  label_smoothing=0.1)
            out.backward()
            res.append((np_of(out), np_of(lx.grad)))
    finally:
        lucid.set_num_threads(old)
    np.testing.assert_array_equal(res[0][0], res[1][0])
    np.testing.assert_array_equal(res[0][1], res[1][1])


def test_no_gradient_work_without_grad():
    x, t, _ = _data((5, 4))
    with lucid.no_grad():
        out = F.cross_entropy(lucid.tensor(x, requires_grad=True), lucid.tensor(t))
    assert out.grad_fn is None
    tout = TF.cross_entropy(torch.tensor(x), torch.tensor(t))
    assert_close(out, tout, "float64")


def test_modified_logits_are_detected_in_graph_mode():
    lx = lucid.randn(3, 4, dtype=lucid.float64, requires_grad=True)
    y = lx * 1.0
    out = F.cross_entropy(y, lucid.tensor([0, 1, 2]))
    with lucid.no_grad():
        y.add_(1.0)
    with pytest.raises(lucid.LucidError, match="modified by an inplace|in-place"):
        lucid.autograd.grad(out, lx, create_graph=True)


def test_second_backward_without_retain_graph_raises():
    lx = lucid.randn(3, 4, requires_grad=True)
    out = F.cross_entropy(lx, lucid.tensor([0, 1, 2]))
    out.backward()
    with pytest.raises(lucid.LucidError, match="second time"):
        out.backward()


def test_composite_still_serves_targets_that_need_grad():
    """Probability targets that require grad take the composite formula: the target
    gets its gradient too."""
    x, t, _ = _data((4, 3, 2), seed=9, prob=True)
    lx = lucid.tensor(x, requires_grad=True)
    lt = lucid.tensor(t, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    tt = torch.tensor(t, requires_grad=True)
    out = F.cross_entropy(lx, lt, label_smoothing=0.1)
    tout = TF.cross_entropy(tx, tt, label_smoothing=0.1)
    assert_close(out, tout, "float64")
    out.backward()
    tout.backward()
    assert_close(lx.grad, tx.grad, "float64")
    assert_close(lt.grad, tt.grad, "float64")
