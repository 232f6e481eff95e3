"""The gpu device keeps the cpu's semantics where MLX's immutable arrays would break
them: aliases of one storage (detach(), .data, a Parameter) see each other's writes,
nothing hands out writable MLX memory, integers behave as on the cpu, boolean masks
index, and a model trained on either device ends in the same state. Every check runs
the same code on both devices with the same expectation (LUCID_MLX_DEVICE=cpu here)."""
import os

os.environ.setdefault("LUCID_MLX_DEVICE", "cpu")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("mlx.core")

import lucid  # noqa: E402
import lucid.nn as nn  # noqa: E402
import lucid.nn.functional as F  # noqa: E402

if not lucid.gpu_available():
    pytest.skip("MLX has no device here (set LUCID_MLX_DEVICE=cpu)", allow_module_level=True)

DEVICES = ["cpu", "gpu"]


@pytest.fixture(params=DEVICES)
def dev(request):
    return request.param


def _t(v, dev, **kw):
    return lucid.tensor(v, device=dev, **kw)


# -- aliases of one storage ----------------------------------------------------------------

def test_writes_through_detach_land_in_the_source(dev):
    x = _t([1.0, 2.0, 3.0], dev)
    d = x.detach()
    d.add_(1)
    assert x.tolist() == [2.0, 3.0, 4.0]
    x.mul_(2)                                   # and the other way round
    assert d.tolist() == [4.0, 6.0, 8.0]


def test_writes_through_data_land_in_the_parameter(dev):
    p = nn.Parameter(_t([1.0, 2.0, 3.0], dev))
    p.data.fill_(5)
    assert p.tolist() == [5.0, 5.0, 5.0]
    p.data[0] = 9
    assert p.tolist() == [9.0, 5.0, 5.0]
    with lucid.no_grad():
        p.data.sub_(1)
    assert p.tolist() == [8.0, 4.0, 4.0]


def test_assigning_data_rebinds_the_storage(dev):
    p = nn.Parameter(_t([1.0, 2.0], dev))
    old = p.detach()
    new = _t([7.0, 8.0], dev)
    p.data = new
    new.add_(1)                                 # p now shares new's storage
    assert p.tolist() == [8.0, 9.0]
    assert old.tolist() == [1.0, 2.0]           # the old storage is left as it was


# -- nothing writes into memory MLX still uses ---------------------------------------------------

def test_cpu_of_a_gpu_tensor_is_a_copy():
    g = _t([1.0, 2.0, 3.0], "gpu")
    c = g.cpu()
    c[0] = 100.0
    assert g.tolist() == [1.0, 2.0, 3.0] and c.tolist() == [100.0, 2.0, 3.0]


def test_numpy_of_a_gpu_tensor_is_read_only():
    g = _t([1.0, 2.0, 3.0], "gpu")
    a = g.numpy()
    with pytest.raises(ValueError):
        a[0] = 5.0
    assert g.tolist() == [1.0, 2.0, 3.0]


def test_a_write_into_a_copy_does_not_change_saved_tensors_or_gradients(dev):
    x = _t([1.0, 2.0, 3.0], dev, requires_grad=True)
    y = x * x                                   # saves x
    c = x.detach().cpu().numpy()               # on the gpu: a copy, the user's to write
    if dev == "gpu":
        c[:] = 10.0
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 4.0, 6.0]


# -- integers as on the cpu (and torch) --------------------------------------------------------

def test_shifts_past_the_width(dev):
    a = _t([1, 1, -8, 5], dev, dtype=lucid.int32)
    b = _t([40, 31, 2, 32], dev, dtype=lucid.int32)
    assert (a << b).tolist() == [0, -2147483648, -32, 0]
    assert (a >> b).tolist() == [0, 0, -2, 0]
    a64 = _t([1, -1], dev, dtype=lucid.int64)
    assert (a64 << _t([70, 64], dev, dtype=lucid.int64)).tolist() == [0, 0]
    assert (a64 >> _t([70, 64], dev, dtype=lucid.int64)).tolist() == [0, -1]
    assert (_t([200], dev, dtype=lucid.uint8) >> 9).tolist() == [0]


def test_integer_remainder_by_zero_raises(dev):
    a = _t([5, 3], dev, dtype=lucid.int32)
    for f in (lambda: a % _t([0, 2], dev, dtype=lucid.int32), lambda: a % 0,
              lambda: lucid.fmod(a, _t([2, 0], dev, dtype=lucid.int32))):
        with pytest.raises(ZeroDivisionError):
            f()
    assert (a % 2).tolist() == [1, 1]


def test_integer_overflow_wraps_and_integer_pow(dev):
    assert (_t([2 ** 31 - 1], dev, dtype=lucid.int32) + 1).tolist() == [-2 ** 31]
    p = _t([3], dev, dtype=lucid.int32) ** _t([40], dev, dtype=lucid.int32)
    assert p.tolist() == [np.int32(np.power(np.int64(3), 40, dtype=np.int64) & 0xFFFFFFFF)
                          .astype(np.int32).item()]


# -- boolean masks ---------------------------------------------------------------------------

def test_boolean_mask_indexing_reading_writing_and_gradients(dev):
    x = _t([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dev)
    assert x[x > 2].tolist() == [3.0, 4.0, 5.0, 6.0]
    assert x[x > 2].device == x.device
    assert x[_t([True, False], dev)].tolist() == [[1.0, 2.0, 3.0]]
    y = x.clone()
    y[y > 2] = 0.0
    assert y.tolist() == [[1.0, 2.0, 0.0], [0.0, 0.0, 0.0]]
    w = _t([1.0, 2.0, 3.0], dev, requires_grad=True)
    w[w > 1].sum().backward()
    assert w.grad.tolist() == [0.0, 1.0, 1.0]


# -- a model trained on either device ends in the same state --------------------------------------

class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        # no bias before BatchNorm: its gradient would be rounding noise, which Adam's
        # normalised step turns into different parameters on the two devices
        self.lin = nn.Linear(4, 6, bias=False)
        self.bn = nn.BatchNorm1d(6)
        self.out = nn.Linear(6, 3)

    def forward(self, x):
        return self.out(F.relu(self.bn(self.lin(x))))


@pytest.mark.parametrize("opt_name", ["SGD", "Adam", "AdamW", "RMSprop"])
def test_training_gives_the_same_state_on_both_devices(opt_name):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((16, 4)).astype(np.float32)
    Y = rng.integers(0, 3, 16)
    states = {}
    for dev in DEVICES:
        lucid.manual_seed(0)
        net = _Net().to(dev)
        kw = dict(lr=0.05, momentum=0.9) if opt_name == "SGD" else dict(lr=0.01)
        opt = getattr(lucid.optim, opt_name)(net.parameters(), **kw)
        x, y = _t(X, dev), _t(Y, dev)
        for _ in range(5):
            opt.zero_grad()
            F.cross_entropy(net(x), y).backward()
            opt.step()
        net.eval()
        states[dev] = ({k: v.cpu().numpy() for k, v in net.state_dict().items()},
                       net(x).detach().cpu().numpy(),
                       [np.asarray(t.cpu().numpy()) for s in opt.state.values()
                        for t in s.values() if isinstance(t, lucid.Tensor)])
    (sc, oc, tc), (sg, og, tg) = states["cpu"], states["gpu"]
    assert sc.keys() == sg.keys()
    for k in sc:
        np.testing.assert_allclose(sg[k], sc[k], rtol=2e-4, atol=2e-5, err_msg=k)
    assert int(sc["bn.num_batches_tracked"]) == int(sg["bn.num_batches_tracked"]) == 5
    assert not np.allclose(sc["bn.running_mean"], 0)      # the statistics moved
    np.testing.assert_allclose(og, oc, rtol=2e-4, atol=2e-5)
    assert len(tc) == len(tg)
    for a, b in zip(tc, tg):
        np.testing.assert_allclose(b, a, rtol=2e-4, atol=2e-5)


def test_grad_scaler_state_is_the_same_on_both_devices():
    states = []
    for dev in DEVICES:
        w = nn.Parameter(_t([1.0, -2.0], dev))
        opt = lucid.optim.SGD([w], lr=0.1)
        scaler = lucid.amp.GradScaler(init_scale=4.0, growth_interval=2)
        for step in range(4):
            opt.zero_grad()
            loss = (w * w).sum() * (float("inf") if step == 1 else 1.0)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        states.append((scaler.get_scale(), w.tolist()))
    assert states[0][0] == states[1][0]
    np.testing.assert_allclose(states[1][1], states[0][1], rtol=1e-6)
