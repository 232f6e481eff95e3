"""Module behaviour that torch users rely on: to(dtype / device) converting parameters in
place, Tensor.data assignment, reprs, the default initialisation of every layer (same
distributions as torch's), and bit-for-bit training resume of a CNN with batch norm."""
import numpy as np
import pytest

import lucid
from lucid import nn, optim
from lucid.nn import functional as F
from nn_torchref import copy_into_torch, np_of

torch = pytest.importorskip("torch")
scipy_stats = pytest.importorskip("scipy.stats")
tnn = torch.nn


def _mlp():
    lucid.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.BatchNorm1d(8), nn.Linear(8, 3))


def test_to_dtype_keeps_parameter_objects_and_optimizer_state():
    m = _mlp()
    params = list(m.parameters())
    opt = optim.Adam(m.parameters(), lr=1e-2)
    x = lucid.randn(5, 4)
    y = lucid.tensor([0, 1, 2, 0, 1])
    F.cross_entropy(m(x), y).backward()
    opt.step()
    m.double()
    assert [id(p) for p in m.parameters()] == [id(p) for p in params]
    assert all(p.dtype == lucid.float64 and isinstance(p, nn.Parameter) and p.requires_grad
               for p in m.parameters())
    assert all(p.grad.dtype == lucid.float64 for p in m.parameters())    # grads converted too
    assert m[2].running_mean.dtype == lucid.float64
    assert m[2].num_batches_tracked.dtype == lucid.int64                # not floating: kept
    assert opt.param_groups[0]["params"][0] is params[0]
    # the optimizer keeps stepping the same objects; its state follows their dtype
    before = np_of(params[0]).copy()
    opt.zero_grad()
    F.cross_entropy(m(x.double()), y).backward()
    opt.step()
    assert params[0].dtype == lucid.float64
    assert not np.array_equal(np_of(params[0]), before)
    assert opt.state[params[0]]["exp_avg"].dtype == lucid.float64


def test_to_dtype_matches_torch_semantics():
    """torch.nn.Module.to(dtype) keeps parameter identity; a model converted back and
    forth gives torch's values (float32 -> float64 -> float32 is exact)."""
    lm = _mlp()
    tm = copy_into_torch(torch, lm, tnn.Sequential(tnn.Linear(4, 8), tnn.ReLU(),
                                                   tnn.BatchNorm1d(8), tnn.Linear(8, 3)))
    tparams = [id(p) for p in tm.parameters()]
    tm.double()
    assert [id(p) for p in tm.parameters()] == tparams
    lm.double()
    x = np.random.default_rng(0).standard_normal((6, 4))
    np.testing.assert_allclose(np_of(lm(lucid.tensor(x))), tm(torch.tensor(x)).detach().numpy(),
                               rtol=1e-12, atol=1e-12)


def test_to_rejects_integer_dtypes_and_unknown_arguments():
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="floating"):
        m.to(lucid.int64)
    with pytest.raises(TypeError, match="unexpected"):
        m.to(lucid.float64, non_blocking_typo=True)


def test_data_assignment_is_in_place():
    p = nn.Parameter(lucid.zeros(3))
    p.data = lucid.ones(2, dtype=lucid.float64)
    assert p.dtype == lucid.float64 and tuple(p.shape) == (2,) and p.requires_grad
    assert isinstance(p, nn.Parameter)
    with pytest.raises(TypeError, match="Tensor"):
        p.data = np.ones(2)
    with pytest.raises(lucid.LucidError, match="floating point"):
        p.data = lucid.tensor([1, 2])
    # a graph that saved the old values refuses to use the new ones
    q = nn.Parameter(lucid.ones(2))
    y = (q * q).sum()
    q.data = lucid.full((2,), 3.0)
    with pytest.raises(lucid.LucidError, match="modified by an in-place"):
        y.backward()


# constructor calls, evaluated in lucid.nn and in torch.nn
REPRS = [
    "Linear(5, 3)", "Linear(5, 3, bias=False)", "Bilinear(2, 3, 4)",
    "Conv2d(2, 4, 3, stride=2, padding=1, dilation=2, groups=2)", "Conv2d(2, 4, (3, 1), bias=False)",
    "Conv2d(2, 4, 3, padding='same')", "Conv2d(2, 4, 3, padding_mode='reflect', padding=1)",
    "Conv1d(2, 4, 3)", "ConvTranspose2d(4, 2, 3, stride=2, output_padding=1)",
    "MaxPool2d(2)", "MaxPool2d(3, 2, 1, 2, ceil_mode=True)", "MaxPool1d(2)", "AvgPool2d(2)",
    "AvgPool2d(3, 2, 1, ceil_mode=True)", "AdaptiveAvgPool2d((2, 3))", "AdaptiveAvgPool1d(3)",
    "BatchNorm1d(4)", "BatchNorm2d(4, momentum=None, affine=False)", "BatchNorm2d(4, bias=False)",
    "LayerNorm((3, 4), eps=1e-6)", "LayerNorm(3, bias=False)", "LayerNorm(3, elementwise_affine=False)",
    "GroupNorm(2, 4)", "Embedding(10, 3, padding_idx=0)", "Embedding(3, 4, max_norm=1.0)",
    "Dropout(0.2)", "Flatten()", "Flatten(0, 2)", "Unflatten(1, (2, 3))", "Identity()",
    "Upsample(scale_factor=2)", "Upsample(size=(3, 4), mode='bilinear', align_corners=True)",
    "ReLU()", "ReLU6()", "GELU()", "GELU(approximate='tanh')", "LeakyReLU(0.2)", "ELU()",
    "CELU()", "SELU()", "SiLU()", "Mish()", "Sigmoid()", "Tanh()", "Hardtanh()", "Softplus()",
    "Softsign()", "Hardswish()", "Hardsigmoid()", "LogSigmoid()", "Tanhshrink()", "GLU()",
    "Softmax()", "Softmax(dim=1)", "LogSoftmax(dim=1)", "Softmin(dim=0)",
    "CrossEntropyLoss(label_smoothing=0.1)", "NLLLoss()", "MSELoss(reduction='sum')", "L1Loss()",
    "HuberLoss(delta=2.0)", "SmoothL1Loss()", "BCELoss()", "BCEWithLogitsLoss()", "KLDivLoss()",
    "MultiheadAttention(4, 2)",
    "Sequential(Linear(2, 3), ReLU(), Sequential(Linear(3, 1), Sigmoid()))",
    "ModuleList([Linear(2, 2), Tanh()])", "ModuleDict({'a': Linear(2, 2), 'b': ReLU()})",
]


@pytest.mark.parametrize("call", REPRS)
def test_repr_matches_torch(call):
    assert repr(eval(call, vars(nn))) == repr(eval(call, vars(tnn)))


# layer, its parameters' names, how to build it in a library
INIT_LAYERS = [
    ("Linear", lambda m: m.Linear(300, 200)),
    ("Conv2d", lambda m: m.Conv2d(16, 32, 3)),
    ("Conv2d_groups", lambda m: m.Conv2d(16, 32, 3, groups=4)),
    ("Conv1d", lambda m: m.Conv1d(8, 64, 5)),
    ("ConvTranspose2d", lambda m: m.ConvTranspose2d(16, 32, 3)),
    ("Embedding", lambda m: m.Embedding(200, 64)),
    ("Bilinear", lambda m: m.Bilinear(20, 30, 40)),
    ("MultiheadAttention", lambda m: m.MultiheadAttention(32, 4)),
    ("LayerNorm", lambda m: m.LayerNorm(50)),
    ("BatchNorm2d", lambda m: m.BatchNorm2d(50)),
]


@pytest.mark.parametrize("name,make", INIT_LAYERS, ids=[n for n, _ in INIT_LAYERS])
def test_default_init_has_torch_distribution(name, make):
    """Every parameter of a freshly built layer against torch's: same shapes, and the
    values drawn from the same distribution (two-sample Kolmogorov-Smirnov test;
    constants equal)."""
    lucid.manual_seed(1)
    torch.manual_seed(1)
    lp = dict(make(nn).named_parameters())
    tp = dict(make(tnn).named_parameters())
    assert list(lp) == list(tp)
    for k, t in tp.items():
        a, b = np_of(lp[k]).ravel(), t.detach().numpy().ravel()
        assert a.shape == b.shape, k
        if np.all(b == b[0]):
            np.testing.assert_array_equal(a, b, err_msg=k)
            continue
        assert scipy_stats.ks_2samp(a, b).pvalue > 1e-3, k


def test_embedding_padding_row_is_zero_and_gets_no_gradient():
    e = nn.Embedding(5, 3, padding_idx=2)
    assert np.all(np_of(e.weight)[2] == 0)
    e(lucid.tensor([2, 1, 2])).sum().backward()
    assert np.all(np_of(e.weight.grad)[2] == 0) and np.all(np_of(e.weight.grad)[1] == 1)


def _cnn():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))


def test_cnn_with_batch_norm_resumes_bit_for_bit(tmp_path):
    rng = np.random.default_rng(0)
    x = lucid.tensor(rng.random((8, 1, 8, 8)), dtype=lucid.float32)
    y = lucid.tensor(rng.integers(0, 3, 8))

    def train(m, o, steps):
        for _ in range(steps):
            o.zero_grad()
            F.cross_entropy(m(x), y).backward()
            o.step()

    lucid.manual_seed(0)
    m1 = _cnn()
    o1 = optim.AdamW(m1.parameters(), lr=1e-2)
    train(m1, o1, 3)
    lucid.save({"model": m1.state_dict(), "optim": o1.state_dict()}, tmp_path / "c.safetensors")
    train(m1, o1, 4)
    ck = lucid.load(tmp_path / "c.safetensors")
    lucid.manual_seed(123)                     # a different init, overwritten by the load
    m2 = _cnn()
    o2 = optim.AdamW(m2.parameters(), lr=1e-2)
    m2.load_state_dict(ck["model"])
    o2.load_state_dict(ck["optim"])
    train(m2, o2, 4)
    s1, s2 = m1.state_dict(), m2.state_dict()
    assert list(s1) == list(s2)
    for k in s1:
        np.testing.assert_array_equal(np_of(s1[k]), np_of(s2[k]), err_msg=k)


def test_load_state_dict_strictness_as_torch():
    a, b = _mlp(), _mlp()
    sd = a.state_dict()
    sd.pop("0.bias")
    sd["extra.weight"] = lucid.zeros(1)
    tb = tnn.Sequential(tnn.Linear(4, 8), tnn.ReLU(), tnn.BatchNorm1d(8), tnn.Linear(8, 3))
    tsd = {k: torch.from_numpy(np_of(v)) for k, v in sd.items()}
    with pytest.raises(RuntimeError) as texc:       # torch's kind of error ...
        tb.load_state_dict(tsd)
    with pytest.raises(RuntimeError) as exc:        # ... and lucid's, a KeyError as well
        b.load_state_dict(sd)
    assert isinstance(exc.value, KeyError)
    for key in ("0.bias", "extra.weight"):
        assert key in str(exc.value) and key in str(texc.value)
    res, tres = b.load_state_dict(sd, strict=False), tb.load_state_dict(tsd, strict=False)
    assert res.missing_keys == tres.missing_keys == ["0.bias"]
    assert res.unexpected_keys == tres.unexpected_keys == ["extra.weight"]
    sd = a.state_dict()
    sd["3.weight"] = lucid.zeros(3, 7)
    with pytest.raises(RuntimeError, match="size mismatch for 3.weight"):
        b.load_state_dict(sd)
    with pytest.raises(ValueError, match="size mismatch"):
        b.load_state_dict(sd, strict=False)        # shapes are checked without strict too
    # values are cast to each parameter's dtype, and loaded into the same objects
    w = b[0].weight
    sd = {k: v.double() if v.is_floating_point() else v for k, v in a.state_dict().items()}
    b.load_state_dict(sd)
    assert b[0].weight is w and w.dtype == lucid.float32
    np.testing.assert_array_equal(np_of(w), np_of(a[0].weight))


def test_zero_grad_without_none_zeroes_in_place_and_half():
    m = nn.Linear(3, 2)
    m(lucid.randn(4, 3)).sum().backward()
    g = m.weight.grad
    m.zero_grad(set_to_none=False)
    assert m.weight.grad is g and np.all(np_of(g) == 0)
    m.half()
    assert m.weight.dtype == lucid.float16 and m.weight.grad.dtype == lucid.float16
    m.bfloat16()
    assert m.bias.dtype == lucid.bfloat16


@pytest.mark.parametrize("shape", [(5,), (4, 5), (2, 3, 5)])
def test_linear_is_one_op_with_torch_derivatives(shape):
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal(shape), rng.standard_normal((3, 5)), rng.standard_normal(3)
    lx, lw, lb = (lucid.tensor(a, requires_grad=True) for a in (x, w, b))
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    y, ty = F.linear(lx, lw, lb), torch.nn.functional.linear(tx, tw, tb)
    assert type(y.grad_fn).__name__ == "LinearBackward"
    np.testing.assert_allclose(np_of(y), ty.detach().numpy(), rtol=1e-12)
    g = rng.standard_normal(tuple(y.shape))
    grads = lucid.autograd.grad(y, (lx, lw, lb), lucid.tensor(g), create_graph=True)
    tgrads = torch.autograd.grad(ty, (tx, tw, tb), torch.tensor(g), create_graph=True)
    for a, t in zip(grads, tgrads):
        np.testing.assert_allclose(np_of(a), t.detach().numpy(), rtol=1e-12, atol=1e-14)
    s = sum((a * a).sum() for a in grads[:2])
    ts = sum((t * t).sum() for t in tgrads[:2])
    for a, t in zip(lucid.autograd.grad(s, (lx, lw)), torch.autograd.grad(ts, (tx, tw))):
        np.testing.assert_allclose(np_of(a), t.numpy(), rtol=1e-12, atol=1e-14)
    assert lucid.autograd.gradgradcheck(F.linear, [lx, lw, lb], atol=1e-6, rtol=1e-4)
