"""What NumPy's protocols cost: ``np.exp(t)`` (NumPy -> Tensor.__array_ufunc__ ->
lucid.exp) against ``lucid.exp(t)`` on the same tensor, in the same run.

  group  np_exp-<size>-float32-<mode>-t1, peers "lucid" (lucid.exp(t)) and
         "via_numpy" (np.exp(t)); also np_sum (np.sum(t) via __array_function__
         against lucid.sum(t))
  modes  fwd, fwd_rg (the tensor requires grad: the node is recorded)
  floor  peer "np_floor" in the 1-element groups: NumPy's own dispatch, np.exp(obj) /
         np.sum(obj) on an object whose protocol method is a C callable that does
         nothing (str.format of an empty string). No implementation of the protocol can
         be faster than this.

The run's summary (bench/conftest.py, ROUTE_TARGETS) holds median(np.exp(t)) /
median(lucid.exp(t)) against its limits (2x at 1 element, 1.05x at 1e5) and prints the
floor next to it: NumPy's dispatch alone costs about 1.7x a 1-element lucid.exp, so
np.exp(t) cannot come near 1x there whatever the protocol method does. On a busy
machine these wall-clock medians swing by tens of percent; instruction counts
(valgrind --tool=callgrind) are the steady measure.
One thread, so the comparison is about dispatch, not scheduling. Nothing asserts
on time; each case first checks that both calls give the same tensor.
"""
import numpy as np
import pytest

from _lucid_bench import import_lucid, set_threads

lucid, _why = import_lucid()
pytestmark = pytest.mark.skipif(lucid is None, reason=f"lucid not importable: {_why}")

OPS = {  # op -> (lucid call, call through NumPy's protocol)
    "np_exp": (lambda t: lucid.exp(t), lambda t: np.exp(t)),
    "np_sum": (lambda t: lucid.sum(t), lambda t: np.sum(t)),
}
SIZES = {"1": 1, "1e5": 10**5}


class _Returns:
    """The floor: NumPy's protocol dispatch with nothing done on the other side. The
    methods are a C callable taking any arguments (a Python method would cost a frame,
    more than lucid's compiled methods do)."""

    __array_ufunc__ = staticmethod("".format)
    __array_function__ = staticmethod("".format)


_FLOOR = {"np_exp": lambda o: np.exp(o), "np_sum": lambda o: np.sum(o)}


@pytest.mark.parametrize("op", list(OPS))
def test_protocol_floor(benchmark, op):
    info = set_threads(1)
    obj = _Returns()
    assert _FLOOR[op](obj) == ""
    benchmark.group = f"{op}-1-float32-fwd-t1"
    benchmark.extra_info.update(op=op, size=1, size_label="1", dtype="float32", mode="fwd",
                                threads=1, peer="np_floor",
                                lucid_threads=info.get("lucid"), torch_threads=info.get("torch"))
    benchmark(_FLOOR[op], obj)


@pytest.mark.parametrize("peer", ["lucid", "via_numpy"])
@pytest.mark.parametrize("mode", ["fwd", "fwd_rg"])
@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("op", list(OPS))
def test_protocol_dispatch(benchmark, op, size, mode, peer):
    info = set_threads(1)
    a = np.random.default_rng(0).uniform(-2, 2, SIZES[size]).astype(np.float32)
    t = lucid.tensor(a, requires_grad=(mode == "fwd_rg"))
    direct, via_numpy = OPS[op]
    fn = direct if peer == "lucid" else via_numpy
    got, want = fn(t), direct(t)
    assert isinstance(got, lucid.Tensor) and got.dtype == want.dtype
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    assert type(got.grad_fn) is type(want.grad_fn)
    benchmark.group = f"{op}-{size}-float32-{mode}-t1"
    benchmark.extra_info.update(op=op, size=SIZES[size], size_label=size, dtype="float32",
                                mode=mode, threads=1, peer=peer,
                                lucid_threads=info.get("lucid"), torch_threads=info.get("torch"))
    benchmark(fn, t)
