"""The schedulers and optimizers added after the first set, step by step against torch 2.13:
learning-rate (and momentum / beta1) trajectories to 1e-12, the parameters they train to
float32 tolerance after 20 steps, state_dict round trips that resume on the same path,
torch's argument errors; Adamax, NAdam, RAdam, LBFGS (with and without strong Wolfe line
search, on Rosenbrock), and torch's foreach / fused / capturable / differentiable /
maximize keys accepted by every optimizer."""
import os

import numpy as np
import pytest

os.environ.setdefault("LUCID_MLX_DEVICE", "cpu")

import lucid  # noqa: E402
from lucid import optim
from lucid.optim import lr_scheduler as lsch

torch = pytest.importorskip("torch")
tsch = torch.optim.lr_scheduler

STEPS = 20


# -- a small problem, the same in both libraries ---------------------------------------

def _problem(dtype="float32", seed=0):
    """Two parameter tensors (two groups) and the loss function of each library."""
    rng = np.random.default_rng(seed)
    p0, q0 = rng.standard_normal((3, 4)), rng.standard_normal(5)
    c, w = rng.standard_normal((3, 4)), rng.uniform(0.5, 2.0, (3, 4))
    ld, tdt = getattr(lucid, dtype), getattr(torch, dtype)
    lp = lucid.tensor(p0, dtype=ld, requires_grad=True)
    lq = lucid.tensor(q0, dtype=ld, requires_grad=True)
    tp = torch.tensor(p0, dtype=tdt, requires_grad=True)
    tq = torch.tensor(q0, dtype=tdt, requires_grad=True)
    lc, lw = lucid.tensor(c, dtype=ld), lucid.tensor(w, dtype=ld)
    tc, tw = torch.tensor(c, dtype=tdt), torch.tensor(w, dtype=tdt)

    def lloss():
        return (lw * (lp - lc) ** 2).sum() + lucid.sin(lq).sum() + (lq * lq).sum() * 0.1

    def tloss():
        return (tw * (tp - tc) ** 2).sum() + torch.sin(tq).sum() + (tq * tq).sum() * 0.1

    return (lp, lq, lloss), (tp, tq, tloss)


def _groups(a, b, lr=0.1, **extra):
    return [dict(params=[a], lr=lr, **extra), dict(params=[b], lr=lr / 2)]


def _assert_params(lps, tps, dtype="float32", rtol=None):
    rtol = rtol or (2e-5 if dtype == "float32" else 1e-10)
    for lp, tp in zip(lps, tps):
        np.testing.assert_allclose(lp.numpy(force=True), tp.detach().numpy(), rtol=rtol,
                                   atol=rtol)


def _train_step(opt, loss):
    opt.zero_grad()
    loss().backward()
    opt.step()


# -- schedulers ----------------------------------------------------------------------------

def _sgd_pair(momentum=0.9):
    (lp, lq, ll), (tp, tq, tl) = _problem()
    lo = optim.SGD(_groups(lp, lq), lr=0.1, momentum=momentum)
    to = torch.optim.SGD(_groups(tp, tq), lr=0.1, momentum=momentum)
    return (lp, lq, ll, lo), (tp, tq, tl, to)


def _adam_pair():
    (lp, lq, ll), (tp, tq, tl) = _problem()
    return ((lp, lq, ll, optim.Adam(_groups(lp, lq), lr=0.01)),
            (tp, tq, tl, torch.optim.Adam(_groups(tp, tq), lr=0.01)))


SCHEDULERS = [
    ("ConstantLR", {}, STEPS),
    ("ConstantLR", dict(factor=0.5, total_iters=4), STEPS),
    ("LinearLR", {}, STEPS),
    ("LinearLR", dict(start_factor=0.25, end_factor=0.9, total_iters=7), STEPS),
    ("PolynomialLR", {}, STEPS),
    ("PolynomialLR", dict(total_iters=8, power=2.0), STEPS),
    ("CosineAnnealingWarmRestarts", dict(T_0=4), STEPS),
    ("CosineAnnealingWarmRestarts", dict(T_0=3, T_mult=2, eta_min=1e-3), STEPS),
    ("CosineAnnealingLR", dict(T_max=6, eta_min=1e-3), STEPS),
    ("OneCycleLR", dict(max_lr=0.5, total_steps=STEPS + 1), STEPS),
    ("OneCycleLR", dict(max_lr=[0.5, 0.2], epochs=3, steps_per_epoch=7, anneal_strategy="linear",
                        three_phase=True, div_factor=10.0, final_div_factor=100.0,
                        base_momentum=[0.8, 0.7], max_momentum=0.9, pct_start=0.4), STEPS),
    ("OneCycleLR", dict(max_lr=0.3, total_steps=25, cycle_momentum=False), STEPS),
]


def _lrs(opt):
    return [g["lr"] for g in opt.param_groups]


def _momenta(opt):
    return [(g.get("momentum"), tuple(g["betas"]) if "betas" in g else None)
            for g in opt.param_groups]


def _close(a, b, tol=1e-12):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert abs(x - y) <= tol * max(1.0, abs(y)), (a, b)


def _compare_trajectory(lsched, tsched, lo, to, ll, tl, steps, state=None):
    for i in range(steps):
        _train_step(lo, ll)
        _train_step(to, tl)
        lsched.step()
        tsched.step()
        _close(lsched.get_last_lr(), tsched.get_last_lr())
        _close(_lrs(lo), _lrs(to))
        for (m1, b1), (m2, b2) in zip(_momenta(lo), _momenta(to)):
            assert (m1 is None) == (m2 is None) and (b1 is None) == (b2 is None)
            if m1 is not None:
                _close([m1], [m2])
            if b1 is not None:
                _close(b1, b2)
        if state is not None and i == steps // 2:
            state.append(lsched.state_dict())


@pytest.mark.parametrize("opt_kind", ["sgd", "adam"])
@pytest.mark.parametrize("name,kw,steps", SCHEDULERS,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(SCHEDULERS)])
def test_scheduler_matches_torch(name, kw, steps, opt_kind):
    (lp, lq, ll, lo), (tp, tq, tl, to) = _sgd_pair() if opt_kind == "sgd" else _adam_pair()
    lsched = getattr(lsch, name)(lo, **kw)
    tsched = getattr(tsch, name)(to, **kw)
    _close(lsched.get_last_lr(), tsched.get_last_lr())
    _close(_lrs(lo), _lrs(to))
    _compare_trajectory(lsched, tsched, lo, to, ll, tl, steps)
    _assert_params([lp, lq], [tp, tq])


@pytest.mark.parametrize("name,kw,steps", SCHEDULERS,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(SCHEDULERS)])
def test_scheduler_state_dict_resumes(name, kw, steps):
    (_, _, ll, lo), _ = _sgd_pair()
    sched = getattr(lsch, name)(lo, **kw)
    ref = []
    for i in range(steps):
        lo.step()
        sched.step()
        if i == steps // 2:
            saved, saved_groups = sched.state_dict(), [dict(g) for g in lo.param_groups]
        ref.append(sched.get_last_lr())
    # a fresh scheduler on a fresh optimizer, loaded from the middle, continues the same way
    (_, _, _, lo2), _ = _sgd_pair()
    sched2 = getattr(lsch, name)(lo2, **kw)
    sched2.load_state_dict(saved)
    for g, s in zip(lo2.param_groups, saved_groups):
        g.update({k: v for k, v in s.items() if k != "params"})
    for i in range(steps // 2 + 1, steps):
        lo2.step()
        sched2.step()
        _close(sched2.get_last_lr(), ref[i])
    assert "optimizer" not in saved
    (_, _, _, to), = [_sgd_pair()[1]]
    tkeys = set(getattr(tsch, name)(to, **kw).state_dict())
    assert set(saved) <= tkeys | {"_is_initial"}, set(saved) - tkeys


def test_cosine_warm_restarts_fractional_epochs():
    (_, _, _, lo), (_, _, _, to) = _sgd_pair()
    ls = lsch.CosineAnnealingWarmRestarts(lo, T_0=3, T_mult=2, eta_min=0.01)
    ts = tsch.CosineAnnealingWarmRestarts(to, T_0=3, T_mult=2, eta_min=0.01)
    iters = 7
    for epoch in range(12):
        for i in range(iters):
            ls.step(epoch + i / iters)
            ts.step(epoch + i / iters)
            _close(ls.get_last_lr(), ts.get_last_lr())
            assert ls.last_epoch == ts.last_epoch and ls.T_i == ts.T_i
    ls.step(5)
    ts.step(5)
    _close(ls.get_last_lr(), ts.get_last_lr())
    with pytest.raises(ValueError):
        ls.step(-1)


COMPOSITES = [
    ("seq-linear-exp", lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, start_factor=0.1, total_iters=3), m.ExponentialLR(o, gamma=0.9)],
        milestones=[3])),
    ("seq-three", lambda m, o: m.SequentialLR(
        o, [m.ConstantLR(o, factor=0.5, total_iters=2), m.CosineAnnealingLR(o, T_max=4),
            m.StepLR(o, step_size=3, gamma=0.5)], milestones=[2, 9])),
    ("chained", lambda m, o: m.ChainedScheduler(
        [m.ConstantLR(o, factor=0.1, total_iters=2), m.ExponentialLR(o, gamma=0.9)])),
    ("chained-poly-linear", lambda m, o: m.ChainedScheduler(
        [m.LinearLR(o, start_factor=0.5, total_iters=5), m.PolynomialLR(o, total_iters=12)],
        optimizer=o)),
]


@pytest.mark.parametrize("name,make", COMPOSITES, ids=[c[0] for c in COMPOSITES])
def test_composite_schedulers_match_torch(name, make):
    (lp, lq, ll, lo), (tp, tq, tl, to) = _sgd_pair()
    lsched, tsched = make(lsch, lo), make(tsch, to)
    _close(lsched.get_last_lr(), tsched.get_last_lr())
    _close(_lrs(lo), _lrs(to))
    state = []
    _compare_trajectory(lsched, tsched, lo, to, ll, tl, STEPS, state)
    _assert_params([lp, lq], [tp, tq])
    # resume from the middle
    (_, _, _, lo2), _ = _sgd_pair()
    again = make(lsch, lo2)
    again.load_state_dict(state[0])
    assert getattr(again, "last_epoch", None) == state[0].get("last_epoch")
    assert [s.last_epoch for s in again._schedulers] == \
        [s["last_epoch"] for s in state[0]["_schedulers"]]


def test_composite_errors_match_torch():
    (_, _, _, lo), (_, _, _, to) = _sgd_pair()
    (_, _, _, lo2), _ = _sgd_pair()
    for m, o in ((lsch, lo), (tsch, to)):
        with pytest.raises(ValueError):
            m.SequentialLR(o, [m.ExponentialLR(o, 0.9)], milestones=[3])
        with pytest.raises(ValueError):
            m.SequentialLR(o, [], milestones=[])
        with pytest.raises(ValueError):
            m.ChainedScheduler([m.ExponentialLR(o, 0.9), m.ReduceLROnPlateau(o)])
    with pytest.raises(ValueError):
        lsch.ChainedScheduler([lsch.ExponentialLR(lo, 0.9), lsch.ExponentialLR(lo2, 0.9)])


METRICS = [1.0, 0.9, 0.9, 0.9, 0.9, 0.95, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.7999, 0.5, 0.5, 0.5,
           0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]

PLATEAU = [
    dict(),
    dict(patience=2),
    dict(patience=1, cooldown=2, factor=0.5, min_lr=0.01),
    dict(patience=1, threshold=0.05, threshold_mode="abs"),
    dict(mode="max", patience=1, factor=0.3),
    dict(mode="max", patience=0, threshold=0.1, threshold_mode="abs", min_lr=[0.02, 0.0]),
    dict(patience=0, factor=0.5, eps=0.01),
]


@pytest.mark.parametrize("kw", PLATEAU)
def test_reduce_lr_on_plateau_matches_torch(kw):
    (lp, lq, ll, lo), (tp, tq, tl, to) = _sgd_pair()
    ls, ts = lsch.ReduceLROnPlateau(lo, **kw), tsch.ReduceLROnPlateau(to, **kw)
    changed = False
    for i, m in enumerate(METRICS):
        _train_step(lo, ll)
        _train_step(to, tl)
        # a 0-d tensor works as a metric too
        ls.step(lucid.tensor(m, dtype=lucid.float64) if i % 2 else m)
        ts.step(torch.tensor(m, dtype=torch.float64) if i % 2 else m)
        _close(ls.get_last_lr(), ts.get_last_lr())
        _close(_lrs(lo), _lrs(to))
        assert (ls.num_bad_epochs, ls.cooldown_counter, ls.best) == \
            (ts.num_bad_epochs, ts.cooldown_counter, ts.best)
        changed |= ls.get_last_lr()[0] != 0.1
        if i == 10:
            saved = ls.state_dict()
    assert changed
    _assert_params([lp, lq], [tp, tq])
    (_, _, _, lo2), _ = _sgd_pair()
    again = lsch.ReduceLROnPlateau(lo2)
    again.load_state_dict(saved)
    assert (again.mode, again.patience, again.best, again.num_bad_epochs) == \
        (saved["mode"], saved["patience"], saved["best"], saved["num_bad_epochs"])
    assert set(saved) <= set(ts.state_dict())


@pytest.mark.parametrize("name,kw", [
    ("ReduceLROnPlateau", dict(factor=1.0)), ("ReduceLROnPlateau", dict(mode="up")),
    ("ReduceLROnPlateau", dict(threshold_mode="x")), ("ReduceLROnPlateau", dict(min_lr=[0.1])),
    ("OneCycleLR", dict(max_lr=0.1)), ("OneCycleLR", dict(max_lr=0.1, total_steps=0)),
    ("OneCycleLR", dict(max_lr=0.1, total_steps=10, pct_start=1)),
    ("OneCycleLR", dict(max_lr=0.1, total_steps=10, anneal_strategy="exp")),
    ("OneCycleLR", dict(max_lr=[0.1], total_steps=10)),
    ("LinearLR", dict(start_factor=0)), ("LinearLR", dict(end_factor=2)),
    ("ConstantLR", dict(factor=1.5)), ("CosineAnnealingWarmRestarts", dict(T_0=0)),
    ("CosineAnnealingWarmRestarts", dict(T_0=2, T_mult=1.5)),
])
def test_scheduler_argument_errors_match_torch(name, kw):
    (_, _, _, lo), (_, _, _, to) = _sgd_pair()
    with pytest.raises(ValueError):
        getattr(tsch, name)(to, **kw)
    with pytest.raises(ValueError):
        getattr(lsch, name)(lo, **kw)


def test_one_cycle_needs_momentum_and_stops_at_total_steps():
    (lp, lq, _), _ = _problem()
    with pytest.raises(ValueError, match="momentum"):
        lsch.OneCycleLR(optim.Adagrad([lp]), max_lr=0.1, total_steps=5)
    (_, _, _, lo), _ = _sgd_pair()
    s = lsch.OneCycleLR(lo, max_lr=0.1, total_steps=3)
    s.step()
    s.step()
    s.step()
    with pytest.raises(ValueError, match="total steps"):
        s.step()


# -- Adamax, NAdam, RAdam ------------------------------------------------------------------

OPTIMIZERS = [
    ("Adamax", dict(lr=0.05)),
    ("Adamax", dict(lr=0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05)),
    ("Adamax", dict(lr=0.05, maximize=True)),
    ("NAdam", dict(lr=0.05)),
    ("NAdam", dict(lr=0.05, momentum_decay=0.01, weight_decay=0.05)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True, betas=(0.6, 0.9))),
    ("NAdam", dict(lr=0.05, maximize=True)),
    ("RAdam", dict(lr=0.05)),
    ("RAdam", dict(lr=0.05, betas=(0.5, 0.9))),          # rho_t > 5 from step 6 on
    ("RAdam", dict(lr=0.05, betas=(0.5, 0.9), weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.05, betas=(0.7, 0.8), weight_decay=0.05, maximize=True)),
]
DEVICES = ["cpu"] + (["gpu"] if lucid.gpu_available() else [])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kw", OPTIMIZERS, ids=[f"{n}-{i}" for i, (n, _) in
                                                     enumerate(OPTIMIZERS)])
def test_optimizer_matches_torch(name, kw, dtype):
    (lp, lq, ll), (tp, tq, tl) = _problem(dtype)
    lo = getattr(optim, name)(_groups(lp, lq, lr=kw["lr"]), **kw)
    to = getattr(torch.optim, name)(_groups(tp, tq, lr=kw["lr"]), **kw)
    for _ in range(STEPS):
        _train_step(lo, ll)
        _train_step(to, tl)
    _assert_params([lp, lq], [tp, tq], dtype)
    lsd, tsd = lo.state_dict(), to.state_dict()
    assert [set(g) for g in lsd["param_groups"]] == [set(g) for g in tsd["param_groups"]]
    for i, st in tsd["state"].items():
        assert set(lsd["state"][i]) == set(st)
        for k, v in st.items():
            mine = lsd["state"][i][k]
            assert mine.dtype == getattr(lucid, str(v.dtype).split(".")[1])
            np.testing.assert_allclose(mine.numpy(force=True), v.numpy(),
                                       rtol=2e-5 if dtype == "float32" else 1e-10,
                                       atol=1e-6 if dtype == "float32" else 1e-12)


@pytest.mark.skipif(not lucid.gpu_available(), reason="no MLX")
@pytest.mark.parametrize("name,kw", OPTIMIZERS[::2], ids=[f"{n}-{i}" for i, (n, _) in
                                                          enumerate(OPTIMIZERS[::2])])
def test_optimizer_on_gpu_matches_torch(name, kw):
    (lp, lq, _), (tp, tq, tl) = _problem()
    gp = lucid.tensor(lp.numpy(force=True)).to("gpu").requires_grad_()
    gq = lucid.tensor(lq.numpy(force=True)).to("gpu").requires_grad_()
    lo = getattr(optim, name)(_groups(gp, gq, lr=kw["lr"]), **kw)
    to = getattr(torch.optim, name)(_groups(tp, tq, lr=kw["lr"]), **kw)
    rng = np.random.default_rng(1)
    for _ in range(STEPS):
        ga, gb = rng.standard_normal((3, 4)), rng.standard_normal(5)   # the same gradients
        gp.grad = lucid.tensor(ga, dtype=lucid.float32).to("gpu")
        gq.grad = lucid.tensor(gb, dtype=lucid.float32).to("gpu")
        tp.grad = torch.tensor(ga, dtype=torch.float32)
        tq.grad = torch.tensor(gb, dtype=torch.float32)
        lo.step()
        to.step()
    assert gp.device == "gpu"
    _assert_params([gp, gq], [tp, tq])


@pytest.mark.parametrize("name", ["Adamax", "NAdam", "RAdam"])
def test_state_dict_round_trip_continues_identically(name):
    (lp, lq, ll), _ = _problem()
    lo = getattr(optim, name)(_groups(lp, lq, lr=0.05), lr=0.05)
    for _ in range(5):
        _train_step(lo, ll)
    saved = lo.state_dict()
    values = [lp.numpy(force=True).copy(), lq.numpy(force=True).copy()]
    for _ in range(5):
        _train_step(lo, ll)
    after = [lp.numpy(force=True).copy(), lq.numpy(force=True).copy()]
    (lp2, lq2, ll2), _ = _problem()
    lp2.data, lq2.data = lucid.tensor(values[0]), lucid.tensor(values[1])
    lo2 = getattr(optim, name)(_groups(lp2, lq2, lr=0.05), lr=0.05)
    lo2.load_state_dict(saved)
    for _ in range(5):
        _train_step(lo2, ll2)
    np.testing.assert_array_equal(lp2.numpy(force=True), after[0])
    np.testing.assert_array_equal(lq2.numpy(force=True), after[1])
    if name == "NAdam":
        assert lo2.state[lp2]["mu_product"].dtype == lucid.float32


@pytest.mark.parametrize("name,kw", [
    ("Adamax", dict(lr=-1)), ("Adamax", dict(betas=(1.0, 0.9))), ("Adamax", dict(eps=-1)),
    ("NAdam", dict(momentum_decay=-1)), ("NAdam", dict(weight_decay=-1)),
    ("RAdam", dict(betas=(0.9, -0.1))), ("LBFGS", dict(lr=-1)),
])
def test_optimizer_argument_errors_match_torch(name, kw):
    (lp, _, _), (tp, _, _) = _problem()
    with pytest.raises(ValueError):
        getattr(torch.optim, name)([tp], **kw)
    with pytest.raises(ValueError):
        getattr(optim, name)([lp], **kw)


# -- torch's flags, in every optimizer -------------------------------------------------------

ALL = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam"]


@pytest.mark.parametrize("name", ALL + ["LBFGS"])
def test_param_group_keys_are_torchs(name):
    (lp, _, _), (tp, _, _) = _problem()
    mine = getattr(optim, name)([lp]).state_dict()["param_groups"][0]
    theirs = getattr(torch.optim, name)([tp]).state_dict()["param_groups"][0]
    assert set(mine) == set(theirs)
    for k in theirs:
        if k != "params":
            assert mine[k] == (tuple(theirs[k]) if k == "betas" else theirs[k]), k


@pytest.mark.parametrize("name", ALL)
def test_flags_accepted_and_maximize_works_per_group(name):
    """The flags torch's constructor takes are accepted (foreach / fused / capturable only
    choose torch's kernels); maximize set in one parameter group climbs in that group."""
    import inspect
    accepted = set(inspect.signature(getattr(torch.optim, name)).parameters)
    flags = {k: v for k, v in dict(foreach=False, fused=None, capturable=False,
                                   differentiable=False).items() if k in accepted}
    assert set(flags) <= set(inspect.signature(getattr(optim, name)).parameters)
    (lp, lq, ll), (tp, tq, tl) = _problem()
    lr = 0.05
    lo = getattr(optim, name)([dict(params=[lp], maximize=True, foreach=True),
                               dict(params=[lq])], lr=lr, **flags)
    to = getattr(torch.optim, name)([dict(params=[tp], maximize=True, foreach=False),
                                     dict(params=[tq])], lr=lr, **flags)
    for _ in range(10):
        _train_step(lo, ll)
        _train_step(to, tl)
    _assert_params([lp, lq], [tp, tq])
    assert lo.param_groups[0]["maximize"] and not lo.param_groups[1]["maximize"]


@pytest.mark.parametrize("name", ALL)
def test_differentiable_true_is_refused(name):
    (lp, _, _), _ = _problem()
    with pytest.raises(ValueError, match="differentiable"):
        getattr(optim, name)([lp], differentiable=True)
    with pytest.raises(ValueError, match="differentiable"):
        getattr(optim, name)([dict(params=[lp], differentiable=True)])


# -- L-BFGS on Rosenbrock ----------------------------------------------------------------------
# The closures give both libraries the same loss and gradient (NumPy's Rosenbrock), so
# the comparison sees only the optimizers. Along Rosenbrock's curved valley the strong
# Wolfe search amplifies a last-bit difference (torch's float64 add_ is a fused
# multiply-add) about a hundredfold per call, so its paths are compared for two calls and
# then by where they converge; fixed steps stay within a few ulps throughout.

START = np.array([-1.5, 2.0, -0.5, 1.2, 1.3, 0.4])


def _rosenbrock_np(v):
    x, y = v[0::2], v[1::2]
    g = np.empty_like(v)
    g[0::2] = -2 * (1 - x) - 400 * x * (y - x * x)
    g[1::2] = 200 * (y - x * x)
    return ((1 - x) ** 2 + 100 * (y - x * x) ** 2).sum(), g


def _lbfgs_pair(dtype, **kw):
    lp = lucid.tensor(START, dtype=getattr(lucid, dtype), requires_grad=True)
    tp = torch.tensor(START, dtype=getattr(torch, dtype), requires_grad=True)
    lo, to = optim.LBFGS([lp], **kw), torch.optim.LBFGS([tp], **kw)

    def lclosure():
        f, g = _rosenbrock_np(lp.numpy(force=True))
        lp.grad = lucid.tensor(g).to(lp.device)
        return lucid.tensor(f)

    def tclosure():
        f, g = _rosenbrock_np(tp.detach().numpy())
        tp.grad = torch.tensor(g)
        return torch.tensor(f)
    return (lp, lo, lclosure), (tp, to, tclosure)


LBFGS_CASES = [
    (dict(lr=0.1, max_iter=10), 6, None),
    (dict(lr=0.1, max_iter=7, history_size=3), 6, None),
    (dict(lr=1, max_iter=10, line_search_fn="strong_wolfe"), 8, 2),
    (dict(lr=1, max_iter=20, max_eval=15, history_size=4, line_search_fn="strong_wolfe"), 8, 2),
    (dict(lr=0.5, max_iter=12, tolerance_grad=1e-3, tolerance_change=1e-4,
          line_search_fn="strong_wolfe"), 6, 1),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("kw,calls,exact_calls", LBFGS_CASES)
def test_lbfgs_rosenbrock_follows_torch(kw, calls, exact_calls, dtype):
    (lp, lo, lc), (tp, to, tc) = _lbfgs_pair(dtype, **kw)
    rtol = 1e-10 if dtype == "float64" else 1e-5
    if exact_calls is not None and dtype == "float32":
        exact_calls = 1
    for k in range(calls):
        a, b = lo.step(lc), to.step(tc)
        if exact_calls is None or k < exact_calls:
            assert abs(float(a) - float(b)) <= rtol * max(1.0, abs(float(b)))
            np.testing.assert_allclose(lp.numpy(force=True), tp.detach().numpy(), rtol=rtol,
                                       atol=rtol)
            ls, ts = lo.state[lp], to.state[tp]
            assert (ls["func_evals"], ls["n_iter"]) == (ts["func_evals"], ts["n_iter"])
            assert len(ls["old_dirs"]) == len(ts["old_dirs"])
            np.testing.assert_allclose(ls["d"].numpy(), ts["d"].numpy(), rtol=rtol * 100,
                                       atol=rtol)
    if exact_calls is not None:         # both descend a long way down the valley
        f0 = _rosenbrock_np(START)[0]
        for v in (lp.numpy(force=True), tp.detach().numpy()):
            assert _rosenbrock_np(v.astype(np.float64))[0] < 1e-3 * f0


def test_lbfgs_with_lucid_autograd_converges():
    p = lucid.tensor(START, dtype=lucid.float32, requires_grad=True)
    o = optim.LBFGS([p], lr=1, max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        o.zero_grad()
        x, y = p[0::2], p[1::2]
        loss = ((1 - x) ** 2 + 100 * (y - x * x) ** 2).sum()
        loss.backward()
        return loss
    loss = o.step(closure)
    assert isinstance(loss, lucid.Tensor)
    np.testing.assert_allclose(p.numpy(force=True), np.ones(6), atol=1e-3)
    assert p.dtype == lucid.float32


def test_lbfgs_on_the_gpu_matches_the_cpu():
    if "gpu" not in DEVICES:
        pytest.skip("no MLX")
    (lp, lo, lc), _ = _lbfgs_pair("float32", lr=0.1, max_iter=5)
    (gp, go, gc), _ = _lbfgs_pair("float32", lr=0.1, max_iter=5)
    gp.data = gp.detach().to("gpu")
    for _ in range(3):
        lo.step(lc)
        go.step(gc)
    assert gp.device == "gpu"
    np.testing.assert_array_equal(gp.numpy(force=True), lp.numpy(force=True))


def test_lbfgs_refuses_groups_and_other_line_searches():
    (lp, lo, lc), _ = _lbfgs_pair("float64", line_search_fn="armijo")
    with pytest.raises(RuntimeError, match="strong_wolfe"):
        lo.step(lc)
    q = lucid.zeros(2, requires_grad=True)
    with pytest.raises(ValueError):
        optim.LBFGS([dict(params=[lp]), dict(params=[q])])
    # a start at the minimum returns after one evaluation, as torch
    p = lucid.ones(2, dtype=lucid.float64, requires_grad=True)
    o = optim.LBFGS([p])

    def closure():
        f, g = _rosenbrock_np(p.numpy(force=True))
        p.grad = lucid.tensor(g)
        return lucid.tensor(f)
    o.step(closure)
    assert o.state[p]["func_evals"] == 1 and o.state[p]["n_iter"] == 0
