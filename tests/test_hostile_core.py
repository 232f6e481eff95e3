"""Correct or refuse, in the core: values a dtype cannot hold, errors a torch user can
catch, hooks that do not keep their module alive, fork during every lock lucid holds,
byte views (view(dtype)) and memory in which several elements share one location.
torch is the reference throughout."""
import gc
import importlib.util
import os
import weakref

os.environ.setdefault("LUCID_MLX_DEVICE", "cpu")     # the gpu device on MLX's CPU stream

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import lucid  # noqa: E402
import lucid.nn as nn  # noqa: E402
from lucid_testutils import run_child  # noqa: E402

torch = pytest.importorskip("torch")
GPU = importlib.util.find_spec("mlx") is not None and lucid.gpu_available()

NAN, INF = float("nan"), float("inf")


def _torch_raises(f):
    try:
        f()
    except RuntimeError:
        return True
    return False


# -- values a dtype cannot hold ---------------------------------------------------------

@pytest.mark.parametrize("data,dt", [
    ([NAN], "int32"), ([INF], "int64"), ([-INF], "int16"), ([1e10], "int32"),
    ([2 ** 40], "int32"), ([300], "uint8"), ([1.5, NAN], "int64"), ([2 ** 15], "int16"),
    ([-129], "int8"),
])
def test_tensor_of_numbers_an_integer_dtype_cannot_hold_raises_as_torch(data, dt):
    assert _torch_raises(lambda: torch.tensor(data, dtype=getattr(torch, dt)))
    with pytest.raises(RuntimeError, match="cannot be converted"):
        lucid.tensor(data, dtype=getattr(lucid, dt))
    with pytest.raises(OverflowError):       # Python's class for it too
        lucid.tensor(data, dtype=getattr(lucid, dt))


@pytest.mark.parametrize("data,dt", [([2.7, -3.9], "int32"), ([-1, -255], "uint8"),
                                     ([127, -128], "int8"), ([2 ** 31 - 1], "int32")])
def test_tensor_of_numbers_an_integer_dtype_holds_matches_torch(data, dt):
    got = lucid.tensor(data, dtype=getattr(lucid, dt)).numpy()
    want = torch.tensor(data, dtype=getattr(torch, dt)).numpy()
    assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("v,dt", [(1e5, "float16"), (-7e4, "float16"), (1e39, "bfloat16"),
                                  (1e300, "float32"), (NAN, "int32"), (2 ** 40, "int32")])
def test_full_and_fill_of_a_value_that_overflows_the_dtype_raise(v, dt):
    # torch.full raises for these (its one-element fill path differs, so shape (2,))
    assert _torch_raises(lambda: torch.full((2,), v, dtype=getattr(torch, dt)))
    with pytest.raises(RuntimeError, match="without overflow"):
        lucid.full((2,), v, dtype=getattr(lucid, dt))
    with pytest.raises(RuntimeError, match="without overflow"):
        lucid.zeros(2, dtype=getattr(lucid, dt)).fill_(v)


@pytest.mark.parametrize("v,dt", [(INF, "float16"), (-INF, "bfloat16"), (NAN, "float16"),
                                  (65504.0, "float16"), (1e5, "bfloat16"), (-1, "uint8")])
def test_full_of_a_value_the_dtype_holds_matches_torch(v, dt):
    got = lucid.full((2,), v, dtype=getattr(lucid, dt))
    want = torch.full((2,), v, dtype=getattr(torch, dt))
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


# -- errors a torch user can catch --------------------------------------------------------

RUNTIME_CASES = {
    "clamp without bounds": (lambda m: m.clamp(m.ones(2)), None),
    "diagonal of equal dims": (lambda m: m.ones(2, 2).diagonal(0, 0, 0), None),
    "unfold with a negative step": (lambda m: m.ones(5).unfold(0, 2, -1), None),
    "div with an unknown rounding mode": (
        lambda m: m.div(m.ones(2), m.ones(2), rounding_mode="round"), None),
    "meshgrid with a bad indexing": (
        lambda m: m.meshgrid(m.ones(2), m.ones(2), indexing="yx"), None),
    "einsum with bad subscripts": (lambda m: m.einsum("i1", m.ones(2)), None),
    "scatter_reduce with an unknown reduction": (
        lambda m: m.ones(3).scatter_reduce(0, m.tensor([0, 1]), m.ones(2), "median"), None),
    "matmul of mismatched shapes": (lambda m: m.ones(2, 3) @ m.ones(4, 5), None),
    "unflatten into sizes that do not multiply up": (
        lambda m: m.ones(6).unflatten(0, (4, -1)), None),
    "view(dtype) of a 0-d tensor with another element size": (
        lambda m: m.ones(()).view(m.uint8), None),
}


@pytest.mark.parametrize("case", list(RUNTIME_CASES))
def test_errors_torch_raises_as_runtime_error_are_runtime_errors(case):
    f, _ = RUNTIME_CASES[case]
    assert _torch_raises(lambda: f(torch)), "torch raises RuntimeError here"
    with pytest.raises(RuntimeError) as ei:
        f(lucid)
    assert isinstance(ei.value, lucid.LucidError)
    assert isinstance(ei.value, ValueError)       # and NumPy's class


def test_error_classes_are_both_torchs_and_numpys():
    assert issubclass(lucid.ArgumentError, RuntimeError)
    assert issubclass(lucid.ArgumentError, ValueError)
    assert issubclass(lucid.ShapeError, RuntimeError) and issubclass(lucid.ShapeError, ValueError)
    assert issubclass(lucid.DTypeOverflowError, OverflowError)


@pytest.mark.parametrize("a,b,words", [
    ((2, 3), (4, 5), ["(2, 3)", "(4, 5)", "(3)", "(4)"]),
    ((3,), (4,), ["(3,)", "(4,)"]),
    ((2, 3, 4), (3, 4, 5), ["(2,)", "(3,)", "broadcast"]),
])
def test_matmul_shape_errors_name_both_shapes_in_lucids_words(a, b, words):
    with pytest.raises(lucid.ShapeError) as ei:
        lucid.ones(*a) @ lucid.ones(*b)
    msg = str(ei.value)
    assert "gufunc" not in msg and "core dimension" not in msg
    for w in words:
        assert w in msg, (w, msg)


# -- hooks ----------------------------------------------------------------------------------

class _Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.lin.weight.register_hook(self._scale)

    def _scale(self, g):
        return g * 2


def test_a_leaf_hook_that_refers_to_its_module_does_not_keep_it_alive():
    m = _Scaled()
    ref = weakref.ref(m)
    del m
    gc.collect()
    assert ref() is None


def test_leaf_hooks_still_run_and_can_be_removed():
    m = _Scaled()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    m.lin(lucid.tensor(x)).sum().backward()
    np.testing.assert_allclose(m.lin.weight.grad.numpy(), 2 * np.tile(x.sum(0), (2, 1)))
    w = lucid.ones(3, requires_grad=True)
    seen = []
    h = w.register_hook(lambda g: seen.append(g.numpy().copy()))
    (w * 3).sum().backward()
    h.remove()
    (w * 3).sum().backward()
    assert len(seen) == 1 and np.array_equal(seen[0], [3, 3, 3])
    np.testing.assert_array_equal(w.grad.numpy(), [6, 6, 6])


# -- fork during every lock lucid holds -------------------------------------------------------

FORK_DURING = r"""
import os, sys, threading, time
import numpy as np
import lucid
what = sys.argv[1]
x = lucid.tensor(np.linspace(-1, 1, 1 << 20, dtype=np.float32))
stop = threading.Event()
def busy():
    while not stop.is_set():
        if what == "empty_cache":
            lucid.empty_cache()          # holds the allocator's lock, from a fresh process
        else:
            lucid.exp(x)                 # a parallel job: holds the pool's submit lock
t = threading.Thread(target=busy)
t.start()
hung = 0
for _ in range(40):
    pid = os.fork()
    if pid == 0:
        y = lucid.exp(x).sum()           # the child allocates and runs a job
        lucid.empty_cache()
        os._exit(0 if abs(float(y) - float(np.exp(np.linspace(-1, 1, 1 << 20)).sum())) < 1e2
                 else 3)
    t0 = time.monotonic()
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if os.waitstatus_to_exitcode(status) != 0:
                print("child failed", os.waitstatus_to_exitcode(status)); sys.exit(1)
            break
        if time.monotonic() - t0 > 20:
            os.kill(pid, 9); os.waitpid(pid, 0); hung += 1; break
        time.sleep(0.002)
stop.set(); t.join()
print("hung", hung)
sys.exit(1 if hung else 0)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("what", ["empty_cache", "pool_job"])
def test_fork_while_another_thread_holds_a_lucid_lock(what):
    r = run_child(["-c", FORK_DURING, what], timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr


# -- view(dtype) -------------------------------------------------------------------------

VIEW_CASES = [((2, 3), "float32", "int16"), ((2, 4), "float32", "float64"),
              ((2, 3), "float32", "uint8"), ((2, 3), "float32", "int32"),
              ((4,), "int16", "bfloat16"), ((4,), "uint8", "bool"), ((2, 4), "float64", "float16"),
              ((), "float32", "int32"), ((3, 1), "float16", "int16")]


@pytest.mark.parametrize("shape,src,dst", VIEW_CASES)
@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_view_dtype_reinterprets_bytes_as_torch(shape, src, dst, device):
    if device == "gpu" and not GPU:
        pytest.skip("no gpu device (MLX)")
    rng = np.random.default_rng(0)
    a = (rng.integers(0, 2, shape) if src in ("uint8",) else
         rng.integers(-999, 999, shape) if src.startswith("int") else rng.standard_normal(shape))
    ta = torch.tensor(a).to(getattr(torch, src))
    want = ta.view(getattr(torch, dst))
    x = lucid.tensor(ta.float().numpy() if src == "bfloat16" else ta.numpy(),
                     dtype=getattr(lucid, src)).to(device)
    got = x.view(getattr(lucid, dst))
    assert got.dtype == getattr(lucid, dst) and got.device == x.device
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.float().cpu().numpy(), want.float().numpy())


def test_view_dtype_shares_memory_and_refuses_what_torch_refuses():
    x = lucid.zeros(3)
    v = x.view(lucid.int32)
    v[0] = 1065353216                         # the bits of 1.0f
    assert x.tolist() == [1.0, 0.0, 0.0]
    for f in (lambda m: m.ones(2, 3).t().view(m.uint8),      # last dim not contiguous
              lambda m: m.ones(2, 3).view(m.float64),        # 3 not divisible by 2
              lambda m: m.ones(()).view(m.uint8)):
        assert _torch_raises(lambda: f(torch))
        with pytest.raises(RuntimeError):
            f(lucid)
    assert tuple(lucid.ones(2, 3).t().view(lucid.int32).shape) == (3, 2)
    w = lucid.ones(2, requires_grad=True)
    assert not w.view(lucid.int32).requires_grad


# -- memory in which several elements share one location ----------------------------------------

def test_in_place_writes_into_an_expanded_torch_tensor_through_dlpack_raise():
    te = torch.zeros(3).expand(2, 3)
    with pytest.raises(RuntimeError):
        te.add_(1)                             # torch refuses
    t = lucid.from_dlpack(te)
    for write in (lambda: t.add_(1), lambda: t.mul_(2), lambda: t.fill_(1),
                  lambda: t.__setitem__(0, 5.0), lambda: t.zero_()):
        with pytest.raises(RuntimeError):
            write()
    assert te.tolist() == [[0.0] * 3] * 2
    assert float((t + 1).sum()) == 6.0         # reading is fine


def test_overlapping_as_strided_arrays_come_in_read_only_and_disjoint_ones_stay_writable():
    base = np.zeros(4)
    over = np.lib.stride_tricks.as_strided(base, shape=(3, 2), strides=(8, 8))
    with pytest.raises(RuntimeError):
        lucid.from_numpy(over).add_(1)
    assert base.tolist() == [0.0] * 4
    # disjoint though not contiguous (the quick test cannot clear it, the exact one does)
    base2 = np.zeros(12)
    odd = np.lib.stride_tricks.as_strided(base2, shape=(3, 2), strides=(16, 24))
    lucid.from_numpy(odd).add_(1)
    assert base2.sum() == 6.0
    plain = np.zeros((2, 3))
    lucid.from_numpy(plain).add_(1)
    assert plain.sum() == 6.0


# -- torch's short dtype names ------------------------------------------------------------

def test_torch_short_dtype_names_without_shadowing_builtins():
    assert lucid.bool is lucid.bool_ and lucid.float is lucid.float32
    assert lucid.int is lucid.int32
    ns = {}
    exec("from lucid import *", ns)
    assert ns.get("bool", bool) is bool and "int" not in ns and "float" not in ns
