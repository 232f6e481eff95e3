"""GradScaler takes torch.amp.GradScaler's signature (device first), and a custom
autograd.Function keeps each output's dtype and device; both checked against torch."""
import os

os.environ.setdefault("LUCID_MLX_DEVICE", "cpu")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import lucid  # noqa: E402
from lucid.autograd import Function  # noqa: E402
from lucid.autograd.function import record_multi  # noqa: E402


# -- GradScaler(device, init_scale, growth_factor, backoff_factor, growth_interval, enabled)

def _run(scaler, make_param, make_opt, coef, steps):
    """A fixed schedule of gradients (None: inf) through scaler + SGD; the scales seen."""
    w = make_param(np.array([0.5, -1.0, 2.0], np.float32))
    opt = make_opt([w], lr=0.1)
    scales = []
    for k in steps:
        opt.zero_grad()
        scaler.scale((w * coef(np.float32(np.inf if k is None else k))).sum()).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return scales, np.array(w.detach().numpy())


STEPS = [1.0, None, 2.0, 1.0, 1.0, 1.0, None, None, 3.0, 1.0, 1.0, 1.0, 1.0]


@pytest.mark.parametrize("args,kwargs", [
    (("cpu",), {}),
    (("cpu", 8.0, 2.0, 0.5, 3), {}),                     # torch's order, all positional
    (("cpu", 8.0), {"growth_interval": 2, "backoff_factor": 0.25}),
    ((), {"device": "cpu", "init_scale": 4.0, "growth_factor": 4.0, "growth_interval": 2}),
    (("cpu",), {"enabled": False}),
])
def test_grad_scaler_signature_matches_torch(torch, args, kwargs):
    ts = torch.amp.GradScaler(*args, **kwargs)
    ls = lucid.amp.GradScaler(*args, **kwargs)
    assert ls.state_dict() == ts.state_dict()
    assert ls.is_enabled() == ts.is_enabled() and ls.get_scale() == ts.get_scale()
    t_scales, tw = _run(ts, lambda a: torch.nn.Parameter(torch.from_numpy(a)), torch.optim.SGD,
                        torch.tensor, STEPS)
    l_scales, lw = _run(ls, lambda a: lucid.tensor(a, requires_grad=True), lucid.optim.SGD,
                        lucid.tensor, STEPS)
    assert l_scales == t_scales
    np.testing.assert_allclose(lw, tw, rtol=1e-6)
    assert ls.state_dict() == ts.state_dict()


def test_keyword_callers_keep_working():
    s = lucid.amp.GradScaler(init_scale=8.0, growth_factor=2.0, backoff_factor=0.5,
                             growth_interval=3, enabled=True)
    assert s.get_scale() == 8.0 and s.get_growth_interval() == 3
    assert lucid.amp.GradScaler().get_scale() == 2.0 ** 16
    assert not lucid.amp.GradScaler(enabled=False).is_enabled()


@pytest.mark.parametrize("device,kind", [
    ("cpu", "cpu"), ("cuda", "gpu"), ("cuda:0", "gpu"), ("gpu", "gpu"), ("mps", "gpu"),
    (None, "cpu"), (lucid.device("cpu"), "cpu"),
])
def test_grad_scaler_devices(device, kind):
    assert lucid.amp.GradScaler(device)._device == kind
    assert lucid.amp.GradScaler(device=device)._device == kind


def test_grad_scaler_bad_devices():
    with pytest.raises(TypeError, match=r"init_scale=1024\.0"):
        lucid.amp.GradScaler(1024.0)                     # lucid's old positional order
    with pytest.raises(ValueError, match="tpu"):
        lucid.amp.GradScaler("tpu")
    with pytest.raises(TypeError):
        lucid.amp.GradScaler(["cpu"])


@pytest.mark.parametrize("args,kwargs,dtype,enabled", [
    (("cpu",), {"dtype": "bfloat16"}, "bfloat16", True),        # torch's order
    (("cuda", "bfloat16", False), {}, "bfloat16", False),
    (("mps",), {"dtype": "float16"}, "float16", True),
    (("bfloat16",), {}, "bfloat16", True),                       # lucid's order
    (("bfloat16", False), {}, "bfloat16", False),
    ((), {"dtype": "bfloat16", "device_type": "cpu"}, "bfloat16", True),
])
def test_autocast_takes_torch_and_lucid_argument_orders(torch, args, kwargs, dtype, enabled):
    lk = {k: getattr(lucid, v) if k == "dtype" else v for k, v in kwargs.items()}
    la = tuple(getattr(lucid, a) if a in ("float16", "bfloat16") else a for a in args)
    ac = lucid.autocast(*la, **lk)
    assert ac.dtype is getattr(lucid, dtype) and ac.enabled is enabled
    if args and args[0] in ("cpu", "cuda"):       # the same call means the same to torch
        tk = {k: getattr(torch, v) if k == "dtype" else v for k, v in kwargs.items()}
        ta = tuple(getattr(torch, a) if a in ("float16", "bfloat16") else a for a in args)
        tac = torch.autocast(*ta, **tk)
        assert (str(tac.fast_dtype).split(".")[-1], tac._enabled) == (dtype, enabled)
    with pytest.raises(ValueError):
        lucid.autocast("tpu:0", dtype=lucid.float16)
    with pytest.raises(TypeError, match="device type"):
        lucid.autocast(lucid.float16, dtype=lucid.float16)


# -- autograd.Function outputs of several dtypes -------------------------------------------

def _two_outputs(lib, dts, log):
    """The same Function in torch and lucid: outputs x cast to each of dts (times k+1);
    backward logs the dtypes it receives and returns the sum of the float grads."""
    base = lib.autograd.Function

    class Multi(base):
        @staticmethod
        def forward(ctx, x):
            outs = tuple(x.to(getattr(lib, d)) * (k + 1) for k, d in enumerate(dts))
            ctx.save_for_backward(*outs)
            return outs

        @staticmethod
        def backward(ctx, *gs):
            saved = ctx.saved_tensors
            log.append(([str(g.dtype).split(".")[-1] for g in gs],
                        [str(s.dtype).split(".")[-1] for s in saved],
                        [s.double().tolist() for s in saved]))
            return sum(g.double() * (k + 1) for k, g in enumerate(gs))

    return Multi


@pytest.mark.parametrize("dts", [("float16", "bfloat16"), ("bfloat16", "float16"),
                                 ("float16", "float32"), ("float32", "float64"),
                                 ("bfloat16", "float16", "float64")])
def test_each_output_keeps_its_dtype_and_value(torch, dts):
    x0 = np.array([1.0009765625, 1e10, -3.0e-8, 65504.0], np.float64)
    tlog, llog = [], []
    tx = torch.tensor(x0, requires_grad=True)
    lx = lucid.tensor(x0, requires_grad=True)
    touts = _two_outputs(torch, dts, tlog).apply(tx)
    louts = _two_outputs(lucid, dts, llog).apply(lx)
    for t, u in zip(touts, louts):
        assert str(u.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        np.testing.assert_array_equal(u.detach().double().numpy(),
                                      t.detach().double().numpy())
    w = np.array([0.5, 2.0, -1.0, 0.25])
    sum((t.double() * torch.tensor(w)).sum() for t in touts).backward()
    sum((u.double() * lucid.tensor(w)).sum() for u in louts).backward()
    assert llog[0][:2] == tlog[0][:2]             # gradient and saved-tensor dtypes
    np.testing.assert_array_equal(np.array(llog[0][2]), np.array(tlog[0][2]))
    np.testing.assert_array_equal(lx.grad.numpy(), tx.grad.numpy())


def test_unused_and_non_differentiable_outputs(torch):
    class T(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.half() * 2, x.bfloat16() * 3, (x > 0).long()

        @staticmethod
        def backward(ctx, ga, gb, gi):
            T.seen = (ga.dtype, gb.dtype, ga.tolist(), gb.tolist())
            return ga.float() + gb.float()

    class L(Function):
        @staticmethod
        def forward(ctx, x):
            return x.half() * 2, x.bfloat16() * 3, (x > 0).long()

        @staticmethod
        def backward(ctx, ga, gb, gi):
            L.seen = (ga.dtype, gb.dtype, ga.tolist(), gb.tolist())
            return ga.float() + gb.float()

    x0 = np.array([1.5, -2.0], np.float32)
    tx, lx = torch.tensor(x0, requires_grad=True), lucid.tensor(x0, requires_grad=True)
    T.apply(tx)[1].float().sum().backward()           # output 0 unused
    la, lb, li = L.apply(lx)
    lb.float().sum().backward()
    assert li.dtype == lucid.int64 and not li.requires_grad
    assert (L.seen[0], L.seen[1]) == (lucid.float16, lucid.bfloat16)
    assert (T.seen[0], T.seen[1]) == (torch.float16, torch.bfloat16)
    assert L.seen[2:] == T.seen[2:]
    np.testing.assert_array_equal(lx.grad.numpy(), tx.grad.numpy())


def test_second_derivative_through_mixed_outputs(torch):
    def run(lib, x):
        class Sq(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x, (x * x).float()

            @staticmethod
            def backward(ctx, ga, gb):
                (x,) = ctx.saved_tensors
                return 2 * x * (ga + gb.double())

        a, b = Sq.apply(x)
        (g,) = lib.autograd.grad((a * 3).sum() + b.double().sum(), (x,), create_graph=True)
        g.sum().backward()
        return g.detach().numpy(), x.grad.numpy()

    x0 = np.array([0.5, -1.25, 3.0])
    tg, tgg = run(torch, torch.tensor(x0, requires_grad=True))
    lg, lgg = run(lucid, lucid.tensor(x0, requires_grad=True))
    np.testing.assert_allclose(lg, tg, rtol=1e-7)
    np.testing.assert_allclose(lgg, tgg, rtol=1e-7)


def test_record_multi_refuses_mixed_dtypes():
    from lucid._core.core import PyNode
    x = lucid.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match="one dtype"):
        record_multi(PyNode, (x,), [np.ones(2, np.float32), np.ones(2, np.float64)])


# -- outputs on several devices (lucid's gpu device on MLX's CPU stream) -------------------

def _gpu():
    pytest.importorskip("mlx.core")
    if not lucid.gpu_available():
        pytest.skip("MLX has no device here")


def test_outputs_on_two_devices_stay_there():
    _gpu()
    seen = []

    class Split(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, (x * 3).half().gpu()

        @staticmethod
        def backward(ctx, ga, gb):
            seen.append((ga.device.type, ga.dtype, gb.device.type, gb.dtype))
            return ga * 2 + gb.cpu().float() * 3

    x = lucid.tensor([1.0, -2.0], requires_grad=True)
    p, q = Split.apply(x)
    assert (p.device.type, q.device.type, q.dtype) == ("cpu", "gpu", lucid.float16)
    assert q.cpu().tolist() == [3.0, -6.0]
    (p.sum() + q.float().sum().cpu()).backward()
    assert seen == [("cpu", lucid.float32, "gpu", lucid.float16)]
    assert x.grad.tolist() == [5.0, 5.0]


def test_gpu_outputs_and_gradients_stay_on_the_gpu():
    _gpu()
    seen = []

    class Both(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x.bfloat16() * 3

        @staticmethod
        def backward(ctx, ga, gb):
            seen.append((ga.device.type, gb.device.type, gb.dtype))
            return ga * 2 + gb.float() * 3

    x = lucid.tensor([1.0, 2.0]).gpu().requires_grad_()
    p, q = Both.apply(x)
    assert p.device.type == q.device.type == "gpu" and q.dtype == lucid.bfloat16
    (p.sum() + q.float().sum()).backward()
    assert seen == [("gpu", "gpu", lucid.bfloat16)]
    assert x.grad.device.type == "gpu" and x.grad.cpu().tolist() == [5.0, 5.0]


def test_a_cpu_gradient_for_a_gpu_input_is_moved():
    _gpu()

    class Host(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return lucid.full(g.shape, 2.0)              # computed on the cpu

    x = lucid.tensor([1.0, 2.0]).gpu().requires_grad_()
    Host.apply(x).sum().backward()
    assert x.grad.device.type == "gpu" and x.grad.cpu().tolist() == [2.0, 2.0]
