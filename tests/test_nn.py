"""lucid.nn against torch.nn: Module API, layers (forward, input and parameter gradients),
activations, losses, init distributions, and finite-difference gradchecks."""
import math
from collections import OrderedDict

import numpy as np
import pytest

import lucid
from lucid import nn
from lucid.nn import functional as F
from nn_torchref import assert_close, copy_into_torch, np_of, to_torch

torch = pytest.importorskip("torch")
tnn = torch.nn
TF = torch.nn.functional

DTYPES = ["float32", "float64"]


def _tdt(name):
    return getattr(torch, name)


# -- Module API ----------------------------------------------------------------------------

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.act = nn.ReLU()
        self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])
        self.heads = nn.ModuleDict({"a": nn.Linear(8, 2), "b": nn.Linear(8, 3, bias=False)})
        self.scale = nn.Parameter(lucid.ones(1))
        self.register_buffer("count", lucid.zeros(1))
        self.register_buffer("scratch", lucid.zeros(2), persistent=False)

    def forward(self, x):
        x = self.act(self.fc1(x))
        for b in self.blocks:
            x = self.act(b(x))
        return self.heads["a"](x) * self.scale, self.heads["b"](x)


def test_registration_and_names():
    m = Net()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["scale", "fc1.weight", "fc1.bias", "blocks.0.weight", "blocks.0.bias",
                     "blocks.1.weight", "blocks.1.bias", "heads.a.weight", "heads.a.bias",
                     "heads.b.weight"]
    assert all(p.requires_grad and isinstance(p, nn.Parameter) for p in m.parameters())
    assert [n for n, _ in m.named_buffers()] == ["count", "scratch"]
    assert set(m.state_dict()) == set(names) | {"count"}   # non-persistent buffer left out
    assert [type(c).__name__ for c in m.children()] == ["Linear", "ReLU", "ModuleList",
                                                        "ModuleDict"]
    assert len(list(m.modules())) == 1 + 4 + 2 + 2
    # torch names the same module the same way
    assert set(Net().state_dict()) == set(m.state_dict())


def test_state_dict_strict_and_shapes():
    a, b = Net(), Net()
    b.load_state_dict(a.state_dict())
    for (n, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(np_of(pa), np_of(pb), err_msg=n)
    sd = a.state_dict()
    sd.pop("fc1.bias")
    sd["extra"] = lucid.zeros(1)
    with pytest.raises(KeyError, match="fc1.bias"):
        b.load_state_dict(sd)
    res = b.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["fc1.bias"] and res.unexpected_keys == ["extra"]
    sd = a.state_dict()
    sd["fc1.weight"] = lucid.zeros(3, 3)
    with pytest.raises(ValueError, match="size mismatch for fc1.weight"):
        b.load_state_dict(sd)


def test_state_dict_is_detached_and_shares_memory():
    m = nn.Linear(3, 2)
    sd = m.state_dict()
    assert not sd["weight"].requires_grad
    np_of_w = sd["weight"].numpy()
    np_of_w[0, 0] = 123.0
    assert m.weight.detach().numpy()[0, 0] == 123.0


def test_train_eval_zero_grad_to_and_repr():
    m = Net()
    assert m.training and all(c.training for c in m.modules())
    m.eval()
    assert not any(c.training for c in m.modules())
    m.train()
    out_a, out_b = m(lucid.randn(5, 4))
    (out_a.sum() + out_b.sum()).backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    m.double()
    assert all(p.dtype == lucid.float64 for p in m.parameters())
    assert m.count.dtype == lucid.float64
    assert all(isinstance(p, nn.Parameter) for p in m.parameters())
    assert m(lucid.randn(2, 4, dtype=lucid.float64))[0].dtype == lucid.float64
    m.to(lucid.float32)
    assert all(p.dtype == lucid.float32 for p in m.parameters())
    r = repr(m)
    assert "(fc1): Linear(in_features=4, out_features=8, bias=True)" in r
    assert "(b): Linear(in_features=8, out_features=3, bias=False)" in r
    assert repr(tnn.Linear(4, 8)) == repr(nn.Linear(4, 8))


def test_sequential_indexing_and_ordered_dict():
    s = nn.Sequential(OrderedDict([("lin", nn.Linear(2, 3)), ("act", nn.Tanh())]))
    assert isinstance(s[0], nn.Linear) and isinstance(s[-1], nn.Tanh) and len(s) == 2
    assert isinstance(s[1:][0], nn.Tanh)
    assert list(s.state_dict()) == ["lin.weight", "lin.bias"]
    with pytest.raises(IndexError):
        s[2]
    with pytest.raises(AttributeError):
        s.nothing


def test_setattr_before_init_fails():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(lucid.zeros(1))
    with pytest.raises(AttributeError, match="super"):
        Bad()


# -- layers: forward and gradients against torch ----------------------------------------------

# (name, lucid ctor, torch ctor, input shape, input kind)
LAYERS = [
    ("linear", lambda: nn.Linear(7, 5), lambda: tnn.Linear(7, 5), (4, 7)),
    ("linear_nobias_3d", lambda: nn.Linear(7, 5, bias=False),
     lambda: tnn.Linear(7, 5, bias=False), (2, 3, 7)),
    ("layernorm", lambda: nn.LayerNorm((3, 6)), lambda: tnn.LayerNorm((3, 6)), (4, 3, 6)),
    ("batchnorm1d", lambda: nn.BatchNorm1d(5), lambda: tnn.BatchNorm1d(5), (8, 5)),
    ("batchnorm1d_3d", lambda: nn.BatchNorm1d(3), lambda: tnn.BatchNorm1d(3), (4, 3, 6)),
    ("batchnorm2d", lambda: nn.BatchNorm2d(3), lambda: tnn.BatchNorm2d(3), (4, 3, 5, 5)),
    ("groupnorm", lambda: nn.GroupNorm(2, 4), lambda: tnn.GroupNorm(2, 4), (3, 4, 5)),
    ("conv1d", lambda: nn.Conv1d(3, 4, 3, stride=2, padding=1),
     lambda: tnn.Conv1d(3, 4, 3, stride=2, padding=1), (2, 3, 11)),
    ("conv1d_dil_groups", lambda: nn.Conv1d(4, 6, 3, dilation=2, groups=2),
     lambda: tnn.Conv1d(4, 6, 3, dilation=2, groups=2), (2, 4, 12)),
    ("conv2d", lambda: nn.Conv2d(3, 5, 3, padding=1), lambda: tnn.Conv2d(3, 5, 3, padding=1),
     (2, 3, 7, 6)),
    ("conv2d_stride_dil_groups", lambda: nn.Conv2d(4, 6, (3, 2), stride=(2, 1),
                                                   padding=(1, 2), dilation=(1, 2), groups=2),
     lambda: tnn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2),
                        groups=2), (2, 4, 9, 8)),
    ("conv2d_same_nobias", lambda: nn.Conv2d(2, 3, 4, padding="same", bias=False),
     lambda: tnn.Conv2d(2, 3, 4, padding="same", bias=False), (1, 2, 6, 5)),
    ("conv2d_reflect", lambda: nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"),
     lambda: tnn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"), (2, 2, 5, 5)),
    ("conv_transpose2d", lambda: nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1,
                                                    output_padding=1),
     lambda: tnn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1),
     (2, 3, 4, 5)),
    ("conv_transpose2d_groups_dil", lambda: nn.ConvTranspose2d(4, 6, (2, 3), stride=(1, 2),
                                                               padding=(0, 1), groups=2,
                                                               dilation=(2, 1)),
     lambda: tnn.ConvTranspose2d(4, 6, (2, 3), stride=(1, 2), padding=(0, 1), groups=2,
                                 dilation=(2, 1)), (2, 4, 3, 4)),
    ("maxpool2d", lambda: nn.MaxPool2d(2), lambda: tnn.MaxPool2d(2), (2, 3, 6, 7)),
    ("maxpool2d_pad_ceil_dil", lambda: nn.MaxPool2d(3, 2, padding=1, dilation=2,
                                                    ceil_mode=True),
     lambda: tnn.MaxPool2d(3, 2, padding=1, dilation=2, ceil_mode=True), (2, 2, 9, 8)),
    ("avgpool2d", lambda: nn.AvgPool2d(3, 2, padding=1),
     lambda: tnn.AvgPool2d(3, 2, padding=1), (2, 3, 7, 6)),
    ("avgpool2d_nopadcount_ceil", lambda: nn.AvgPool2d(3, 2, padding=1, ceil_mode=True,
                                                       count_include_pad=False),
     lambda: tnn.AvgPool2d(3, 2, padding=1, ceil_mode=True, count_include_pad=False),
     (2, 3, 8, 7)),
    ("avgpool2d_ceil", lambda: nn.AvgPool2d(2, 2, ceil_mode=True),
     lambda: tnn.AvgPool2d(2, 2, ceil_mode=True), (1, 2, 5, 5)),
    ("adaptive_avgpool2d", lambda: nn.AdaptiveAvgPool2d((3, 2)),
     lambda: tnn.AdaptiveAvgPool2d((3, 2)), (2, 3, 7, 5)),
    ("flatten", lambda: nn.Flatten(), lambda: tnn.Flatten(), (2, 3, 4)),
    ("upsample_bilinear", lambda: nn.Upsample(scale_factor=2, mode="bilinear",
                                              align_corners=False),
     lambda: tnn.Upsample(scale_factor=2, mode="bilinear", align_corners=False), (1, 2, 3, 4)),
]

ACTIVATIONS = ["ReLU", "ReLU6", "LeakyReLU", "ELU", "CELU", "SELU", "GELU", "SiLU", "Mish",
               "Sigmoid", "Tanh", "Hardsigmoid", "Hardswish", "Hardtanh", "Softsign",
               "Softplus", "LogSigmoid", "Tanhshrink"]
for _a in ACTIVATIONS:
    LAYERS.append((_a, (lambda a=_a: getattr(nn, a)()), (lambda a=_a: getattr(tnn, a)()),
                   (3, 11)))
LAYERS += [
    ("GELU_tanh", lambda: nn.GELU(approximate="tanh"), lambda: tnn.GELU(approximate="tanh"),
     (3, 11)),
    ("LeakyReLU_0.2", lambda: nn.LeakyReLU(0.2), lambda: tnn.LeakyReLU(0.2), (3, 11)),
    ("Softplus_beta", lambda: nn.Softplus(beta=2.0, threshold=3.0),
     lambda: tnn.Softplus(beta=2.0, threshold=3.0), (3, 11)),
    ("Softmax", lambda: nn.Softmax(dim=1), lambda: tnn.Softmax(dim=1), (3, 5, 2)),
    ("LogSoftmax", lambda: nn.LogSoftmax(dim=-1), lambda: tnn.LogSoftmax(dim=-1), (3, 5)),
    ("Softmin", lambda: nn.Softmin(dim=1), lambda: tnn.Softmin(dim=1), (3, 5)),
    ("GLU", lambda: nn.GLU(), lambda: tnn.GLU(), (3, 6)),
]


# Rows where torch itself is the less accurate side (checked against the exact formula):
# torch's float64 hardsigmoid backward multiplies by a float32 1/6 (3e-8 relative error).
TORCH_LOOSE = {("Hardsigmoid", "float64"): 1e3}


def _compare_module(lmod, tmod, x_np, dtype, scale=1.0):
    ldt = getattr(lucid, dtype)
    lmod = lmod.to(ldt)
    tmod = copy_into_torch(torch, lmod, tmod.to(_tdt(dtype)))
    x = lucid.tensor(x_np, dtype=ldt, requires_grad=True)
    tx = torch.tensor(x_np, dtype=_tdt(dtype), requires_grad=True)
    y, ty = lmod(x), tmod(tx)
    assert_close(y, ty, dtype, scale, "forward")
    g_np = np.random.default_rng(3).standard_normal(tuple(y.shape))
    y.backward(lucid.tensor(g_np, dtype=ldt))
    ty.backward(torch.tensor(g_np, dtype=_tdt(dtype)))
    assert_close(x.grad, tx.grad, dtype, scale, "input grad")
    tparams = dict(tmod.named_parameters())
    for name, p in lmod.named_parameters():
        assert_close(p.grad, tparams[name].grad, dtype, scale, f"grad of {name}")
    tbufs = dict(tmod.named_buffers())
    for name, b in lmod.named_buffers():   # batch norm running statistics
        assert_close(b, tbufs[name], dtype, scale, f"buffer {name}")
    return lmod, tmod


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,lctor,tctor,shape", LAYERS, ids=[r[0] for r in LAYERS])
def test_layer_matches_torch(name, lctor, tctor, shape, dtype):
    lucid.manual_seed(0)
    x_np = np.random.default_rng(1).standard_normal(shape) * 2
    if name == "maxpool2d":  # ties would make the max's gradient ambiguous
        x_np = np.random.default_rng(1).permutation(np.prod(shape)).reshape(shape) / 10.0
    scale = 10.0 * TORCH_LOOSE.get((name, dtype), 1.0)
    lmod, tmod = _compare_module(lctor(), tctor(), x_np, dtype, scale=scale)
    if any(True for _ in lmod.buffers()):   # eval mode uses the running statistics
        lmod.eval(), tmod.eval()
        with lucid.no_grad(), torch.no_grad():
            assert_close(lmod(lucid.tensor(x_np, dtype=getattr(lucid, dtype))),
                         tmod(torch.tensor(x_np, dtype=_tdt(dtype))), dtype, 10.0, "eval")


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_matches_torch(dtype):
    lucid.manual_seed(0)
    lmod = nn.Embedding(10, 4, padding_idx=2).to(getattr(lucid, dtype))
    tmod = copy_into_torch(torch, lmod, tnn.Embedding(10, 4, padding_idx=2).to(_tdt(dtype)))
    assert np.all(np_of(lmod.weight)[2] == 0)
    idx_np = np.array([[1, 2, 3], [2, 9, 1]])
    y = lmod(lucid.tensor(idx_np))
    ty = tmod(torch.tensor(idx_np))
    assert_close(y, ty, dtype)
    g = np.random.default_rng(0).standard_normal(tuple(y.shape))
    y.backward(lucid.tensor(g, dtype=getattr(lucid, dtype)))
    ty.backward(torch.tensor(g, dtype=_tdt(dtype)))
    assert_close(lmod.weight.grad, tmod.weight.grad, dtype)
    assert np.all(np_of(lmod.weight.grad)[2] == 0)


def test_maxpool_return_indices_matches_torch():
    x_np = np.random.default_rng(0).standard_normal((2, 3, 9, 8))
    for kw in (dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, dilation=2,
                                         ceil_mode=True)):
        v, i = F.max_pool2d(lucid.tensor(x_np), return_indices=True, **kw)
        tv, ti = TF.max_pool2d(torch.tensor(x_np), return_indices=True, **kw)
        assert_close(v, tv, "float64")
        np.testing.assert_array_equal(i.numpy(), ti.numpy())


@pytest.mark.parametrize("dtype", DTYPES)
def test_multihead_attention_matches_torch(dtype):
    lucid.manual_seed(0)
    for batch_first in (False, True):
        lmod = nn.MultiheadAttention(8, 2, batch_first=batch_first)
        tmod = tnn.MultiheadAttention(8, 2, batch_first=batch_first)
        lmod.to(getattr(lucid, dtype))
        copy_into_torch(torch, lmod, tmod.to(_tdt(dtype)))
        rng = np.random.default_rng(0)
        q_np = rng.standard_normal((5, 3, 8) if not batch_first else (3, 5, 8))
        kv_np = rng.standard_normal((4, 3, 8) if not batch_first else (3, 4, 8))
        kpm = np.array([[False] * 4, [False, False, True, True], [False, True, False, False]])
        mask = np.triu(np.ones((5, 4), dtype=bool), 1)
        q = lucid.tensor(q_np, dtype=getattr(lucid, dtype), requires_grad=True)
        kv = lucid.tensor(kv_np, dtype=getattr(lucid, dtype))
        tq = torch.tensor(q_np, dtype=_tdt(dtype), requires_grad=True)
        tkv = torch.tensor(kv_np, dtype=_tdt(dtype))
        out, w = lmod(q, kv, kv, key_padding_mask=lucid.tensor(kpm),
                      attn_mask=lucid.tensor(mask))
        tout, tw = tmod(tq, tkv, tkv, key_padding_mask=torch.tensor(kpm),
                        attn_mask=torch.tensor(mask))
        assert_close(out, tout, dtype, 10)
        assert_close(w, tw, dtype, 10)
        out.sum().backward()
        tout.sum().backward()
        assert_close(q.grad, tq.grad, dtype, 10)
        assert_close(lmod.in_proj_weight.grad, tmod.in_proj_weight.grad, dtype, 10)


def test_sdpa_matches_torch():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 3, 5, 4)) for _ in range(3))
    mask = rng.random((5, 5)) > 0.3
    np.fill_diagonal(mask, True)
    for kw in (dict(), dict(is_causal=True), dict(scale=0.3)):
        assert_close(F.scaled_dot_product_attention(*map(lucid.tensor, (q, k, v)), **kw),
                     TF.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)), **kw),
                     "float64")
    assert_close(F.scaled_dot_product_attention(*map(lucid.tensor, (q, k, v)),
                                                attn_mask=lucid.tensor(mask)),
                 TF.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)),
                                                 attn_mask=torch.tensor(mask)), "float64")
    fmask = rng.standard_normal((5, 5))
    assert_close(F.scaled_dot_product_attention(*map(lucid.tensor, (q, k, v)),
                                                attn_mask=lucid.tensor(fmask)),
                 TF.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)),
                                                 attn_mask=torch.tensor(fmask)), "float64")


INTERP = [
    ((1, 2, 5), dict(size=8, mode="nearest")),
    ((1, 2, 5, 4), dict(scale_factor=2, mode="nearest")),
    ((1, 2, 6, 4), dict(size=(4, 3), mode="nearest")),
    ((1, 2, 5), dict(size=9, mode="linear", align_corners=True)),
    ((1, 2, 5), dict(size=3, mode="linear", align_corners=False)),
    ((2, 2, 5, 4), dict(size=(7, 9), mode="bilinear", align_corners=False)),
    ((2, 2, 5, 4), dict(size=(7, 9), mode="bilinear", align_corners=True)),
    ((2, 2, 5, 4), dict(scale_factor=1.5, mode="bilinear")),
    ((1, 1, 4, 4), dict(scale_factor=(2, 3), mode="nearest-exact")),
]


@pytest.mark.parametrize("shape,kw", INTERP, ids=[str(k) for _, k in INTERP])
def test_interpolate_matches_torch(shape, kw):
    x_np = np.random.default_rng(0).standard_normal(shape)
    x = lucid.tensor(x_np, requires_grad=True)
    tx = torch.tensor(x_np, requires_grad=True)
    y, ty = F.interpolate(x, **kw), TF.interpolate(tx, **kw)
    assert_close(y, ty, "float64")
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    assert_close(x.grad, tx.grad, "float64")


def test_functional_misc_match_torch():
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((4, 5))
    x, tx = lucid.tensor(x_np), torch.tensor(x_np)
    assert_close(F.normalize(x, dim=1), TF.normalize(tx, dim=1), "float64")
    assert_close(F.normalize(x, p=1, dim=0), TF.normalize(tx, p=1, dim=0), "float64")
    idx = np.array([0, 3, 2, 3])
    np.testing.assert_array_equal(F.one_hot(lucid.tensor(idx), 5).numpy(),
                                  TF.one_hot(torch.tensor(idx), 5).numpy())
    assert F.one_hot(lucid.tensor(idx)).shape == (4, 4)
    assert_close(F.pad(x, (1, 2, 0, 1)), TF.pad(tx, (1, 2, 0, 1)), "float64")
    assert_close(F.pad(x, (1, -1)), TF.pad(tx, (1, -1)), "float64")
    assert_close(F.cosine_similarity(x, x * 2 + 1), TF.cosine_similarity(tx, tx * 2 + 1),
                 "float64")
    assert_close(F.layer_norm(x, (5,)), TF.layer_norm(tx, (5,)), "float64")


def test_dropout():
    lucid.manual_seed(0)
    x = lucid.ones(200, 100, requires_grad=True)
    d = nn.Dropout(0.3)
    y = d(x)
    kept = np_of(y) != 0
    assert 0.65 < kept.mean() < 0.75
    np.testing.assert_allclose(np_of(y)[kept], 1 / 0.7, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_array_equal(np_of(x.grad) != 0, kept)
    d.eval()
    assert d(x) is x
    assert np.all(np_of(F.dropout(x, 1.0)) == 0)
    with pytest.raises(ValueError):
        nn.Dropout(1.5)


# -- losses ------------------------------------------------------------------------------------

def _loss_case(name, lfn, tfn, x_np, t_np, dtype, int_target=False, t_grad=False, extra=()):
    ldt, tdt = getattr(lucid, dtype), _tdt(dtype)
    x = lucid.tensor(x_np, dtype=ldt, requires_grad=True)
    tx = torch.tensor(x_np, dtype=tdt, requires_grad=True)
    if int_target:
        t, tt = lucid.tensor(t_np), torch.tensor(t_np)
    else:
        t = lucid.tensor(t_np, dtype=ldt, requires_grad=t_grad)
        tt = torch.tensor(t_np, dtype=tdt, requires_grad=t_grad)
    largs = [lucid.tensor(e, dtype=ldt) if e is not None else None for e in extra]
    targs = [torch.tensor(e, dtype=tdt) if e is not None else None for e in extra]
    out, tout = lfn(x, t, *largs), tfn(tx, tt, *targs)
    assert_close(out, tout, dtype, 10, f"{name} value")
    g = np.random.default_rng(5).standard_normal(tuple(out.shape))
    out.backward(lucid.tensor(g, dtype=ldt))
    tout.backward(torch.tensor(g, dtype=tdt))
    assert_close(x.grad, tx.grad, dtype, 10, f"{name} grad")
    if t_grad:
        assert_close(t.grad, tt.grad, dtype, 10, f"{name} target grad")


REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_regression_losses(reduction, dtype):
    rng = np.random.default_rng(0)
    x, t = rng.standard_normal((6, 4)) * 2, rng.standard_normal((6, 4))
    for name, lf, tf in [
        ("mse", lambda a, b: F.mse_loss(a, b, reduction=reduction),
         lambda a, b: TF.mse_loss(a, b, reduction=reduction)),
        ("l1", lambda a, b: F.l1_loss(a, b, reduction=reduction),
         lambda a, b: TF.l1_loss(a, b, reduction=reduction)),
        ("huber", lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=0.7),
         lambda a, b: TF.huber_loss(a, b, reduction=reduction, delta=0.7)),
        ("smooth_l1", lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.5),
         lambda a, b: TF.smooth_l1_loss(a, b, reduction=reduction, beta=0.5)),
        ("MSELoss", nn.MSELoss(reduction=reduction), tnn.MSELoss(reduction=reduction)),
        ("HuberLoss", nn.HuberLoss(reduction=reduction), tnn.HuberLoss(reduction=reduction)),
        ("L1Loss", nn.L1Loss(reduction=reduction), tnn.L1Loss(reduction=reduction)),
    ]:
        _loss_case(name, lf, tf, x, t, dtype, t_grad=True)


CE_CASES = [
    dict(),
    dict(label_smoothing=0.1),
    dict(ignore_index=2),
    dict(ignore_index=2, label_smoothing=0.2),
    dict(weight=True),
    dict(weight=True, ignore_index=1, label_smoothing=0.15),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("case", CE_CASES, ids=[str(c) for c in CE_CASES])
def test_cross_entropy_and_nll_class_indices(case, reduction, dtype):
    rng = np.random.default_rng(0)
    case = dict(case)
    w = rng.random(5) + 0.5 if case.pop("weight", False) else None
    for shape, tshape in [((8, 5), (8,)), ((3, 5, 4, 2), (3, 4, 2))]:
        x = rng.standard_normal(shape) * 3
        t = rng.integers(0, 5, tshape)
        _loss_case("cross_entropy",
                   lambda a, b, *w_: F.cross_entropy(a, b, *w_, reduction=reduction, **case),
                   lambda a, b, *w_: TF.cross_entropy(a, b, *w_, reduction=reduction, **case),
                   x, t, dtype, int_target=True, extra=(w,))
        lmod = nn.CrossEntropyLoss(weight=None if w is None else lucid.tensor(
            w, dtype=getattr(lucid, dtype)), reduction=reduction, **case)
        tmod = tnn.CrossEntropyLoss(weight=None if w is None else torch.tensor(
            w, dtype=_tdt(dtype)), reduction=reduction, **case)
        _loss_case("CrossEntropyLoss", lmod, tmod, x, t, dtype, int_target=True)
        if "label_smoothing" not in case:
            logp = np.log(np.exp(x) / np.exp(x).sum(1, keepdims=True))
            _loss_case("nll", lambda a, b, *w_: F.nll_loss(a, b, *w_, reduction=reduction,
                                                            **case),
                       lambda a, b, *w_: TF.nll_loss(a, b, *w_, reduction=reduction, **case),
                       logp, t, dtype, int_target=True, extra=(w,))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("ls,weighted", [(0.0, False), (0.2, False), (0.1, True)])
def test_cross_entropy_probabilities(ls, weighted, reduction, dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 4, 3)) * 2
    p = rng.random((6, 4, 3))
    p /= p.sum(1, keepdims=True)
    w = rng.random(4) + 0.5 if weighted else None
    _loss_case("cross_entropy_prob",
               lambda a, b, *w_: F.cross_entropy(a, b, *w_, reduction=reduction,
                                                 label_smoothing=ls),
               lambda a, b, *w_: TF.cross_entropy(a, b, *w_, reduction=reduction,
                                                  label_smoothing=ls),
               x, p, dtype, t_grad=True, extra=(w,))


def test_cross_entropy_unbatched():
    x = np.random.default_rng(0).standard_normal(5)
    _loss_case("ce_unbatched", lambda a, b: F.cross_entropy(a, b),
               lambda a, b: TF.cross_entropy(a, b), x, np.array(3), "float64", int_target=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropies(reduction, dtype):
    rng = np.random.default_rng(2)
    logits = rng.standard_normal((5, 3)) * 4
    probs = 1 / (1 + np.exp(-logits))
    y = (rng.random((5, 3)) > 0.5).astype(float) * 0.9 + 0.05
    w = rng.random((5, 3)) + 0.5
    pw = rng.random(3) + 0.5
    _loss_case("bce", lambda a, b, *e: F.binary_cross_entropy(a, b, *e, reduction=reduction),
               lambda a, b, *e: TF.binary_cross_entropy(a, b, *e, reduction=reduction),
               probs, y, dtype, t_grad=True, extra=(w,))
    _loss_case("BCELoss", nn.BCELoss(reduction=reduction), tnn.BCELoss(reduction=reduction),
               probs, y, dtype, t_grad=True)
    for extra in ((None, None), (w, None), (None, pw), (w, pw)):
        _loss_case("bce_logits",
                   lambda a, b, ww, pp: F.binary_cross_entropy_with_logits(
                       a, b, ww, reduction=reduction, pos_weight=pp),
                   lambda a, b, ww, pp: TF.binary_cross_entropy_with_logits(
                       a, b, ww, reduction=reduction, pos_weight=pp),
                   logits, y, dtype, t_grad=True, extra=extra)
    # log clamped at -100 like torch: p = 0 and 1 give finite losses
    edge = lucid.tensor([0.0, 1.0, 0.5])
    ty = lucid.tensor([1.0, 0.0, 0.5])
    assert_close(F.binary_cross_entropy(edge, ty, reduction="none"),
                 TF.binary_cross_entropy(torch.tensor([0.0, 1.0, 0.5]),
                                         torch.tensor([1.0, 0.0, 0.5]), reduction="none"),
                 "float32")


def test_kl_div_matches_torch():
    rng = np.random.default_rng(3)
    x = np.log(rng.dirichlet(np.ones(4), 5))
    t = rng.dirichlet(np.ones(4), 5)
    t[0, 0] = 0.0
    for red in ("batchmean", "sum", "none"):
        _loss_case("kl", lambda a, b: F.kl_div(a, b, reduction=red),
                   lambda a, b: TF.kl_div(a, b, reduction=red), x, t, "float64")


def test_loss_reduction_checked():
    with pytest.raises(ValueError, match="reduction"):
        F.mse_loss(lucid.zeros(2), lucid.zeros(2), reduction="avg")


# -- init -----------------------------------------------------------------------------------------

def test_default_init_distributions_match_torch():
    """Bounds and moments of torch's reset_parameters for Linear and Conv2d."""
    lucid.manual_seed(0)
    lin = nn.Linear(400, 300)
    w = np_of(lin.weight)
    bound = 1 / math.sqrt(400)
    assert w.min() >= -bound and w.max() <= bound
    np.testing.assert_allclose(w.std(), bound / math.sqrt(3), rtol=0.02)
    np.testing.assert_allclose(np_of(lin.bias).std(), bound / math.sqrt(3), rtol=0.15)
    conv = nn.Conv2d(16, 32, 3)
    tconv = tnn.Conv2d(16, 32, 3)
    np.testing.assert_allclose(np_of(conv.weight).std(), tconv.weight.detach().std().item(),
                               rtol=0.1)
    assert np.abs(np_of(conv.weight)).max() <= 1 / math.sqrt(16 * 9)


def test_init_functions():
    lucid.manual_seed(0)
    t = lucid.empty(200, 300)
    nn.init.xavier_uniform_(t, gain=2.0)
    a = 2.0 * math.sqrt(6 / 500)
    assert np.abs(np_of(t)).max() <= a
    np.testing.assert_allclose(np_of(t).std(), a / math.sqrt(3), rtol=0.02)
    nn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu")
    np.testing.assert_allclose(np_of(t).std(), math.sqrt(2 / 200), rtol=0.02)
    nn.init.normal_(t, 3.0, 0.5)
    np.testing.assert_allclose([np_of(t).mean(), np_of(t).std()], [3.0, 0.5], rtol=0.02)
    nn.init.trunc_normal_(t, std=1.0, a=-0.5, b=0.5)
    assert np.abs(np_of(t)).max() <= 0.5
    nn.init.zeros_(t)
    assert np.all(np_of(t) == 0)
    nn.init.ones_(t)
    assert np.all(np_of(t) == 1)
    nn.init.constant_(t, 0.25)
    assert np.all(np_of(t) == 0.25)
    e = lucid.empty(3, 5)
    nn.init.eye_(e)
    np.testing.assert_array_equal(np_of(e), np.eye(3, 5))
    q = lucid.empty(6, 4)
    nn.init.orthogonal_(q)
    np.testing.assert_allclose(np_of(q).T @ np_of(q), np.eye(4), atol=1e-5)
    for nl in ("linear", "relu", "tanh", "sigmoid", "selu"):
        assert nn.init.calculate_gain(nl) == pytest.approx(tnn.init.calculate_gain(nl))
    assert nn.init.calculate_gain("leaky_relu", 0.2) == pytest.approx(
        tnn.init.calculate_gain("leaky_relu", 0.2))
    g = lucid.Generator().manual_seed(7)
    t1, t2 = lucid.empty(5), lucid.empty(5)
    nn.init.uniform_(t1, generator=g)
    nn.init.uniform_(t2, generator=lucid.Generator().manual_seed(7))
    np.testing.assert_array_equal(np_of(t1), np_of(t2))


# -- finite differences: gradients and second derivatives of the composed layers -----------------

def _r(*shape, seed=0):
    return lucid.tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


GRADCHECKS = [
    ("conv2d", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, dilation=1),
     [(1, 2, 5, 4), (3, 2, 3, 2), (3,)]),
    ("conv2d_groups", lambda x, w: F.conv2d(x, w, None, padding=(1, 0), dilation=(2, 1),
                                            groups=2), [(1, 4, 5, 4), (2, 2, 2, 2)]),
    ("conv1d", lambda x, w: F.conv1d(x, w, stride=2), [(2, 2, 7), (3, 2, 3)]),
    ("conv_transpose2d", lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1,
                                                            output_padding=1),
     [(1, 2, 3, 2), (2, 3, 3, 2), (3,)]),
    ("max_pool2d", lambda x: F.max_pool2d(x, 2, 1, padding=1), [(1, 2, 4, 4)]),
    ("avg_pool2d", lambda x: F.avg_pool2d(x, 3, 2, padding=1, count_include_pad=False),
     [(1, 2, 5, 4)]),
    ("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (2, 3)), [(1, 2, 5, 4)]),
    ("layer_norm", lambda x, w, b: F.layer_norm(x, (4,), w, b), [(3, 4), (4,), (4,)]),
    ("batch_norm", lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
     [(4, 3), (3,), (3,)]),
    ("cross_entropy_ls", lambda x: F.cross_entropy(x, lucid.tensor([0, 2, 1]),
                                                   label_smoothing=0.1), [(3, 4)]),
    ("bce_logits", lambda x, y: F.binary_cross_entropy_with_logits(x, y), [(3, 2), (3, 2)]),
    ("bilinear", lambda x: F.interpolate(x, size=(5, 3), mode="bilinear"), [(1, 1, 3, 2)]),
    ("sdpa_causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     [(1, 3, 2), (1, 3, 2), (1, 3, 2)]),
]


@pytest.mark.parametrize("name,fn,shapes", GRADCHECKS, ids=[g[0] for g in GRADCHECKS])
def test_gradcheck_and_gradgradcheck(name, fn, shapes):
    xs = [_r(*s, seed=i) for i, s in enumerate(shapes)]
    if name == "max_pool2d":   # distinct values: the max is differentiable there
        xs = [lucid.tensor(np.random.default_rng(0).permutation(32).reshape(1, 2, 4, 4) / 4.0,
                           requires_grad=True)]
    assert lucid.autograd.gradcheck(fn, xs, atol=1e-6, rtol=1e-4)
    assert lucid.autograd.gradgradcheck(fn, xs, atol=1e-6, rtol=1e-4)


def test_hardsigmoid_float64_gradient_is_exact():
    """The row loosened for torch above: lucid's gradient is g / 6 to the last bit."""
    x = lucid.tensor([0.5, -1.0, 2.5], dtype=lucid.float64, requires_grad=True)
    nn.Hardsigmoid()(x).backward(lucid.tensor([1.0, 2.0, 3.0], dtype=lucid.float64))
    np.testing.assert_array_equal(np_of(x.grad), np.array([1.0, 2.0, 3.0]) / 6)


def test_bilinear_matches_torch():
    lucid.manual_seed(0)
    lmod = nn.Bilinear(3, 4, 2).double()
    tmod = copy_into_torch(torch, lmod, tnn.Bilinear(3, 4, 2).double())
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((5, 4))
    la, lb = lucid.tensor(a, requires_grad=True), lucid.tensor(b)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b)
    y, ty = lmod(la, lb), tmod(ta, tb)
    assert_close(y, ty, "float64")
    y.sum().backward()
    ty.sum().backward()
    assert_close(la.grad, ta.grad, "float64")
    assert_close(lmod.weight.grad, tmod.weight.grad, "float64")


# -- torch accepts these; lucid used to refuse or answer differently -----------------------

def _fwd_grad_vs_torch(lfn, tfn, x_np, scale=10.0):
    """Forward and input gradient of lfn / tfn on the same float64 input."""
    x, tx = lucid.tensor(x_np, requires_grad=True), torch.tensor(x_np, requires_grad=True)
    y, ty = lfn(x), tfn(tx)
    assert_close(y, ty, "float64", scale)
    g = np.random.default_rng(5).standard_normal(tuple(ty.shape))
    y.backward(lucid.tensor(g))
    ty.backward(torch.tensor(g))
    assert_close(x.grad, tx.grad, "float64", scale)


@pytest.mark.parametrize("nd", [1, 2])
def test_unbatched_convolution_matches_torch(nd):
    lucid.manual_seed(0)
    lconv = (nn.Conv1d if nd == 1 else nn.Conv2d)(4, 6, 3, padding=1, stride=2).double()
    tconv = copy_into_torch(torch, lconv, (tnn.Conv1d if nd == 1 else tnn.Conv2d)(
        4, 6, 3, padding=1, stride=2).double())
    x_np = np.random.default_rng(0).standard_normal((4,) + (7,) * nd)
    _fwd_grad_vs_torch(lconv, tconv, x_np)
    with pytest.raises(ValueError, match="unbatched"):
        lconv(lucid.zeros(*(1,) * (nd + 3)))


def test_unbatched_max_pool_returns_one_tensor():
    # (C, H, W) without return_indices once came back as a tuple of C planes
    x_np = np.random.default_rng(1).permutation(3 * 6 * 6).reshape(3, 6, 6) / 10.0
    _fwd_grad_vs_torch(lambda x: F.max_pool2d(x, 2), lambda x: TF.max_pool2d(x, 2), x_np)
    _fwd_grad_vs_torch(nn.MaxPool2d(3, 2, 1), tnn.MaxPool2d(3, 2, 1), x_np)
    v, i = F.max_pool2d(lucid.tensor(x_np), 2, return_indices=True)
    tv, ti = TF.max_pool2d(torch.tensor(x_np), 2, return_indices=True)
    assert_close(v, tv, "float64")
    np.testing.assert_array_equal(i.numpy(), ti.numpy())


@pytest.mark.parametrize("size", [(None, 3), (4, None), (None, None), 2])
def test_adaptive_avg_pool2d_none_keeps_the_input_size(size):
    x_np = np.random.default_rng(2).standard_normal((2, 3, 7, 5))
    _fwd_grad_vs_torch(nn.AdaptiveAvgPool2d(size), tnn.AdaptiveAvgPool2d(size), x_np)
    _fwd_grad_vs_torch(lambda x: F.adaptive_avg_pool2d(x, size),
                       lambda x: TF.adaptive_avg_pool2d(x, size), x_np[0])


def test_sdpa_grouped_query_attention_matches_torch():
    rng = np.random.default_rng(3)
    q_np, k_np, v_np = (rng.standard_normal(s) for s in [(2, 4, 5, 8), (2, 2, 6, 8),
                                                          (2, 2, 6, 3)])
    lt = [lucid.tensor(a, requires_grad=True) for a in (q_np, k_np, v_np)]
    tt = [torch.tensor(a, requires_grad=True) for a in (q_np, k_np, v_np)]
    y = F.scaled_dot_product_attention(*lt, is_causal=True, enable_gqa=True)
    ty = TF.scaled_dot_product_attention(*tt, is_causal=True, enable_gqa=True)
    assert_close(y, ty, "float64", 10)
    y.sum().backward()
    ty.sum().backward()
    for a, b in zip(lt, tt):
        assert_close(a.grad, b.grad, "float64", 10)
    with pytest.raises(ValueError, match="multiple"):
        F.scaled_dot_product_attention(lt[0], lucid.zeros(2, 3, 6, 8), lucid.zeros(2, 3, 6, 3),
                                       enable_gqa=True)


def test_multihead_attention_kdim_vdim_matches_torch():
    lucid.manual_seed(0)
    lmod = nn.MultiheadAttention(8, 2, kdim=5, vdim=6, batch_first=True).double()
    tmod = tnn.MultiheadAttention(8, 2, kdim=5, vdim=6, batch_first=True).double()
    assert [n for n, _ in lmod.named_parameters()] == [n for n, _ in tmod.named_parameters()]
    assert lmod.in_proj_weight is None
    copy_into_torch(torch, lmod, tmod)
    rng = np.random.default_rng(4)
    q_np, k_np, v_np = (rng.standard_normal(s) for s in [(3, 4, 8), (3, 5, 5), (3, 5, 6)])
    out, w = lmod(*map(lucid.tensor, (q_np, k_np, v_np)))
    tout, tw = tmod(*map(torch.tensor, (q_np, k_np, v_np)))
    assert_close(out, tout, "float64", 10)
    assert_close(w, tw, "float64", 10)
    out.sum().backward()
    tout.sum().backward()
    for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias"):
        assert_close(getattr(lmod, name).grad, getattr(tmod, name).grad, "float64", 10, name)


@pytest.mark.parametrize("kw", [dict(add_bias_kv=True), dict(add_zero_attn=True),
                                dict(add_bias_kv=True, add_zero_attn=True, kdim=5, vdim=5)])
def test_multihead_attention_extra_key_columns_match_torch(kw):
    lucid.manual_seed(0)
    lmod = nn.MultiheadAttention(8, 2, **kw).double()
    tmod = tnn.MultiheadAttention(8, 2, **kw).double()
    assert [n for n, _ in lmod.named_parameters()] == [n for n, _ in tmod.named_parameters()]
    copy_into_torch(torch, lmod, tmod)
    rng = np.random.default_rng(8)
    kd = kw.get("kdim", 8)
    q_np, k_np, v_np = (rng.standard_normal(s) for s in [(4, 3, 8), (5, 3, kd), (5, 3, kd)])
    kpm = np.array([[False] * 5, [False, False, True, True, False], [True] + [False] * 4])
    mask = np.triu(np.ones((4, 5), dtype=bool), 2)
    lt = [lucid.tensor(a, requires_grad=True) for a in (q_np, k_np, v_np)]
    tt = [torch.tensor(a, requires_grad=True) for a in (q_np, k_np, v_np)]
    out, w = lmod(*lt, key_padding_mask=lucid.tensor(kpm), attn_mask=lucid.tensor(mask))
    tout, tw = tmod(*tt, key_padding_mask=torch.tensor(kpm), attn_mask=torch.tensor(mask))
    assert_close(out, tout, "float64", 10)
    assert_close(w, tw, "float64", 10)
    out.sum().backward()
    tout.sum().backward()
    for a, b in zip(lt, tt):
        assert_close(a.grad, b.grad, "float64", 10)
    for (name, p), (_, tp) in zip(lmod.named_parameters(), tmod.named_parameters()):
        assert_close(p.grad, tp.grad, "float64", 10, name)


def test_unbatched_conv_transpose_matches_torch():
    lucid.manual_seed(0)
    lmod = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1).double()
    tmod = copy_into_torch(torch, lmod, tnn.ConvTranspose2d(4, 6, 3, stride=2, padding=1,
                                                            output_padding=1).double())
    _fwd_grad_vs_torch(lmod, tmod, np.random.default_rng(6).standard_normal((4, 5, 6)))


@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_embedding_max_norm_renormalises_like_torch(norm_type):
    lucid.manual_seed(0)
    lmod = nn.Embedding(6, 3, max_norm=0.5, norm_type=norm_type).double()
    tmod = copy_into_torch(torch, lmod, tnn.Embedding(6, 3, max_norm=0.5,
                                                      norm_type=norm_type).double())
    idx = np.array([[0, 2], [2, 5]])
    y, ty = lmod(lucid.tensor(idx)), tmod(torch.tensor(idx))
    assert_close(y, ty, "float64")
    assert_close(lmod.weight, tmod.weight, "float64")     # rows 0, 2, 5 scaled in place
    norms = np.linalg.norm(np_of(lmod.weight), ord=norm_type, axis=1)
    assert np.all(norms[[0, 2, 5]] <= 0.5) and np.all(norms[[1, 3, 4]] > 0.5)
    g = np.random.default_rng(7).standard_normal((2, 2, 3))
    y.backward(lucid.tensor(g))
    ty.backward(torch.tensor(g))
    assert_close(lmod.weight.grad, tmod.weight.grad, "float64")
    # positional arguments follow torch's order (norm_type before scale_grad_by_freq)
    w = lucid.tensor(np.full((4, 2), 3.0))
    F.embedding(lucid.tensor(np.array([1])), w, None, 1.0, 1.0)
    np.testing.assert_allclose(np_of(w)[1], 3.0 / (6.0 + 1e-7))


def test_embedding_scale_grad_by_freq_matches_torch():
    lucid.manual_seed(0)
    lmod = nn.Embedding(7, 3, padding_idx=1, scale_grad_by_freq=True).double()
    tmod = copy_into_torch(torch, lmod, tnn.Embedding(7, 3, padding_idx=1,
                                                      scale_grad_by_freq=True).double())
    idx = np.array([[0, 2, 2], [1, 2, 6], [0, 1, 5]])
    y, ty = lmod(lucid.tensor(idx)), tmod(torch.tensor(idx))
    assert_close(y, ty, "float64", 1)
    g = np.random.default_rng(9).standard_normal((3, 3, 3))
    y.backward(lucid.tensor(g))
    ty.backward(torch.tensor(g))
    assert_close(lmod.weight.grad, tmod.weight.grad, "float64")
    with pytest.raises(NotImplementedError, match="sparse"):
        F.embedding(lucid.tensor(idx), lmod.weight, sparse=True)
