"""lucid.optim against torch.optim: 20 steps of every optimizer configuration on the same
model and data (float32 to 1e-5 relative, float64 to 1e-10), parameter groups,
state_dict round trips, schedulers, and the fused kernels' edge cases."""
import math

import numpy as np
import pytest

import lucid
from lucid import nn, optim
from nn_torchref import assert_close, copy_into_torch, np_of

torch = pytest.importorskip("torch")

CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=1e-2)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=1e-3)),
    ("SGD", dict(lr=0.05, momentum=0.5, maximize=True)),
    ("Adam", dict(lr=1e-2)),
    ("Adam", dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=1e-2)),
    ("Adam", dict(lr=1e-2, amsgrad=True)),
    ("Adam", dict(lr=1e-2, maximize=True)),
    ("AdamW", dict(lr=1e-2)),
    ("AdamW", dict(lr=1e-2, weight_decay=0.1, amsgrad=True)),
    ("RMSprop", dict(lr=1e-2)),
    ("RMSprop", dict(lr=1e-2, alpha=0.9, momentum=0.9, weight_decay=1e-2)),
    ("RMSprop", dict(lr=1e-2, centered=True)),
    ("RMSprop", dict(lr=1e-2, centered=True, momentum=0.5)),
    ("Adagrad", dict(lr=1e-1)),
    ("Adagrad", dict(lr=1e-1, lr_decay=0.01, weight_decay=1e-2, initial_accumulator_value=0.1)),
]


def _pair(dtype, seed=0):
    lucid.manual_seed(seed)
    lm = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3)).to(getattr(lucid, dtype))
    tm = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    copy_into_torch(torch, lm, tm.to(getattr(torch, dtype)))
    return lm, tm


def _data(dtype):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((32, 6)), rng.standard_normal((32, 3))
    return ((lucid.tensor(x, dtype=getattr(lucid, dtype)),
             lucid.tensor(y, dtype=getattr(lucid, dtype))),
            (torch.tensor(x, dtype=getattr(torch, dtype)),
             torch.tensor(y, dtype=getattr(torch, dtype))))


def _run(lm, tm, lopt, topt, dtype, steps=20, lsched=None, tsched=None):
    (x, y), (tx, ty) = _data(dtype)
    for _ in range(steps):
        lopt.zero_grad()
        topt.zero_grad()
        nn.functional.mse_loss(lm(x), y).backward()
        torch.nn.functional.mse_loss(tm(tx), ty).backward()
        lopt.step()
        topt.step()
        if lsched is not None:
            lsched.step()
            tsched.step()
    tparams = dict(tm.named_parameters())
    for name, p in lm.named_parameters():
        assert_close(p, tparams[name], dtype, what=name)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kw", CONFIGS, ids=[f"{n}-{k}" for n, k in CONFIGS])
def test_twenty_steps_match_torch(name, kw, dtype):
    lm, tm = _pair(dtype)
    lopt = getattr(optim, name)(lm.parameters(), **kw)
    topt = getattr(torch.optim, name)(tm.parameters(), **kw)
    _run(lm, tm, lopt, topt, dtype)
    # the state matches torch's too, name for name
    lsd, tsd = lopt.state_dict(), topt.state_dict()
    assert lsd["param_groups"][0].keys() <= tsd["param_groups"][0].keys() | {"nesterov"}
    for i, st in tsd["state"].items():
        for k, v in st.items():
            if k == "step":
                assert float(lsd["state"][i][k].item()) == float(v)
            elif v is not None:
                # State such as RMSprop's g / sqrt(E[g^2] - E[g]^2) amplifies float32
                # rounding (torch's own float32 and float64 runs differ as much), so the
                # state is compared relative to its largest element; parameters strictly.
                scale = max(1.0, float(np.abs(v.numpy()).max()) * 10) if dtype == "float32" else 1
                assert_close(lsd["state"][i][k], v, dtype, scale=scale, what=k)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_param_groups_match_torch(dtype):
    lm, tm = _pair(dtype)
    lopt = optim.SGD([{"params": lm[0].parameters(), "lr": 0.2, "momentum": 0.5},
                      {"params": lm[2].parameters()}], lr=0.05, momentum=0.9)
    topt = torch.optim.SGD([{"params": tm[0].parameters(), "lr": 0.2, "momentum": 0.5},
                            {"params": tm[2].parameters()}], lr=0.05, momentum=0.9)
    assert [g["lr"] for g in lopt.param_groups] == [0.2, 0.05]
    assert [g["momentum"] for g in lopt.param_groups] == [0.5, 0.9]
    _run(lm, tm, lopt, topt, dtype)
    lm, tm = _pair(dtype)
    lopt = optim.Adam([{"params": [lm[0].weight]}], lr=1e-2)
    topt = torch.optim.Adam([{"params": [tm[0].weight]}], lr=1e-2)
    lopt.add_param_group({"params": [lm[0].bias, lm[2].weight, lm[2].bias], "lr": 3e-2,
                          "betas": (0.5, 0.9)})
    topt.add_param_group({"params": [tm[0].bias, tm[2].weight, tm[2].bias], "lr": 3e-2,
                          "betas": (0.5, 0.9)})
    _run(lm, tm, lopt, topt, dtype)


def test_param_group_errors():
    p = nn.Parameter(lucid.zeros(2))
    with pytest.raises(ValueError, match="more than one"):
        optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    with pytest.raises(ValueError, match="empty"):
        optim.Adam([])
    with pytest.raises(TypeError):
        optim.Adam(p)
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="learning rate"):
        optim.AdamW([p], lr=-1)


@pytest.mark.parametrize("name,kw", [("SGD", dict(lr=0.1, momentum=0.9)),
                                     ("AdamW", dict(lr=1e-2, amsgrad=True)),
                                     ("RMSprop", dict(lr=1e-2, centered=True, momentum=0.3))])
def test_state_dict_resume_is_bit_exact(name, kw):
    """10 steps, state_dict, 10 more == 10 steps, load into fresh model/optimizer, 10 more."""
    (x, y), _ = _data("float32")

    def steps(model, opt, n):
        for _ in range(n):
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()

    a, _ = _pair("float32")
    oa = getattr(optim, name)(a.parameters(), **kw)
    steps(a, oa, 10)
    msd, osd = a.state_dict(), oa.state_dict()
    msd = {k: v.clone() for k, v in msd.items()}
    b, _ = _pair("float32", seed=1)
    ob = getattr(optim, name)(b.parameters(), **kw)
    b.load_state_dict(msd)
    ob.load_state_dict(osd)
    steps(a, oa, 10)
    steps(b, ob, 10)
    for (n, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(np_of(pa), np_of(pb), err_msg=n)


def test_torch_state_dict_layout():
    lm, tm = _pair("float32")
    lopt = optim.Adam([{"params": [lm[0].weight, lm[0].bias]},
                       {"params": [lm[2].weight, lm[2].bias], "lr": 1e-1}])
    topt = torch.optim.Adam([{"params": [tm[0].weight, tm[0].bias]},
                             {"params": [tm[2].weight, tm[2].bias], "lr": 1e-1}])
    _run(lm, tm, lopt, topt, "float32", steps=2)
    lsd, tsd = lopt.state_dict(), topt.state_dict()
    assert [g["params"] for g in lsd["param_groups"]] == [g["params"] for g in
                                                          tsd["param_groups"]]
    assert sorted(lsd["state"]) == sorted(tsd["state"])
    assert set(lsd["state"][0]) == set(tsd["state"][0])


def test_step_records_nothing_and_bumps_version():
    w = nn.Parameter(lucid.ones(3))
    out = (w * w).sum()          # MulBackward saved w
    opt = optim.SGD([w], lr=0.1)
    (w * 2).sum().backward()
    opt.step()
    assert w.grad_fn is None and w.is_leaf
    np.testing.assert_allclose(np_of(w), 0.8)
    with pytest.raises(lucid.LucidError, match="in-place"):
        out.backward()


def test_closure_and_zero_grad_modes():
    w = nn.Parameter(lucid.tensor([1.0, 2.0]))
    opt = optim.SGD([w], lr=0.5)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss
    loss = opt.step(closure)
    assert loss.item() == 5.0
    np.testing.assert_allclose(np_of(w), [0.0, 0.0])
    (w + 1).sum().backward()
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(np_of(w.grad), [0.0, 0.0])
    opt.zero_grad()
    assert w.grad is None


def test_fused_kernels_direct():
    """The extension works on flat NumPy arrays in both precisions and checks lengths."""
    from lucid.optim import _fused
    for dt in (np.float32, np.float64):
        p = np.ones(5, dt)
        g = np.full(5, 2.0, dt)
        _fused.sgd(p, g, np.empty(0, dt), 0.25, 0.0, 0.0, 0.0, False, False, False)
        np.testing.assert_array_equal(p, 0.5)
        m, v = np.zeros(5, dt), np.zeros(5, dt)
        _fused.adam(p, g, m, v, np.empty(0, dt), 0.1, 0.9, 0.999, 1e-8, 0.0, False, 1, False,
                    False)
        np.testing.assert_allclose(p, 0.4, rtol=1e-6)   # first Adam step moves by lr
        with pytest.raises(ValueError, match="grad"):
            _fused.sgd(p, g[:3], np.empty(0, dt), 0.1, 0.0, 0.0, 0.0, False, False, False)
    with pytest.raises((TypeError, ValueError)):   # mixed precisions are refused
        _fused.sgd(np.ones(2, np.float32), np.ones(2), np.empty(0), 0.1, 0, 0, 0, 0, 0, 0)


# -- schedulers ------------------------------------------------------------------------------------

SCHEDULERS = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[2, 5, 5], gamma=0.3)),
    ("ExponentialLR", dict(gamma=0.9)),
    ("CosineAnnealingLR", dict(T_max=7, eta_min=1e-3)),
    ("CosineAnnealingLR", dict(T_max=4)),
    ("LambdaLR", dict(lr_lambda=lambda e: 1.0 / (1 + e))),
]


@pytest.mark.parametrize("name,kw", SCHEDULERS, ids=[f"{n}-{k}" for n, k in SCHEDULERS])
def test_schedulers_match_torch(name, kw):
    lm, tm = _pair("float64")
    lopt = optim.SGD([{"params": lm[0].parameters()}, {"params": lm[2].parameters(),
                                                        "lr": 0.3}], lr=0.1, momentum=0.9)
    topt = torch.optim.SGD([{"params": tm[0].parameters()}, {"params": tm[2].parameters(),
                                                              "lr": 0.3}], lr=0.1, momentum=0.9)
    ls = getattr(optim.lr_scheduler, name)(lopt, **kw)
    ts = getattr(torch.optim.lr_scheduler, name)(topt, **kw)
    lrs, tlrs = [], []
    for _ in range(20):
        lrs.append(ls.get_last_lr())
        tlrs.append(ts.get_last_lr())
        lopt.step()
        topt.step()
        ls.step()
        ts.step()
    np.testing.assert_allclose(lrs, tlrs, rtol=1e-12, atol=1e-15)
    # and the parameters trained under the schedule agree too
    lm, tm = _pair("float64")
    lopt = optim.Adam(lm.parameters(), lr=1e-2)
    topt = torch.optim.Adam(tm.parameters(), lr=1e-2)
    _run(lm, tm, lopt, topt, "float64", lsched=getattr(optim.lr_scheduler, name)(lopt, **kw),
         tsched=getattr(torch.optim.lr_scheduler, name)(topt, **kw))


def test_scheduler_state_dict_and_closed_form():
    w = nn.Parameter(lucid.zeros(1))
    opt = optim.SGD([w], lr=1.0)
    s = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    for _ in range(5):
        opt.step()
        s.step()
    sd = s.state_dict()
    assert sd["last_epoch"] == 5 and "optimizer" not in sd
    opt2 = optim.SGD([w], lr=1.0)
    s2 = optim.lr_scheduler.StepLR(opt2, step_size=2, gamma=0.5)
    s2.load_state_dict(sd)
    assert s2.last_epoch == 5
    assert opt.param_groups[0]["lr"] == 0.25
    c = optim.lr_scheduler.CosineAnnealingLR(optim.SGD([w], lr=1.0), T_max=10)
    c.step(5)
    assert c.get_last_lr()[0] == pytest.approx(0.5 * (1 + math.cos(math.pi / 2)))


@pytest.mark.parametrize("start", [0.0, 41.0, 2.0 ** 24, 2.0 ** 24 + 2])
def test_step_count_is_a_float32_sum_as_torchs(start):
    # the step counter is a float32 tensor: past 2**24, adding 1 rounds as torch's does
    lp, tp = nn.Parameter(lucid.ones(3)), torch.nn.Parameter(torch.ones(3))
    lopt, topt = optim.Adam([lp], lr=1e-3), torch.optim.Adam([tp], lr=1e-3)
    for opt, p, mk in ((lopt, lp, lambda v: lucid.tensor(v, dtype=lucid.float32)),
                       (topt, tp, lambda v: torch.tensor(v, dtype=torch.float32))):
        p.grad = mk([0.5, -1.0, 2.0])
        opt.step()
        opt.state[p]["step"] = mk(start)
        opt.step()
    got = float(lopt.state[lp]["step"].item())
    assert got == float(topt.state[tp]["step"].item())
    assert got == float(np.float32(start) + np.float32(1))
    np.testing.assert_allclose(np_of(lp), tp.detach().numpy(), rtol=1e-6)
