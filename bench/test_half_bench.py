"""Half precision (float16 / bfloat16) against float32, and against torch's half CPU
kernels, as ratios in one run.

Group ``half-<op>-<size>-t1``: the baseline "lucid" is lucid's float32 kernel; the
peers are lucid in float16 ("lucid_f16") and bfloat16 ("lucid_bf16"), and torch in
float32 / float16 / bfloat16. The ratio table of bench/conftest.py then reads
directly as "half time / float32 time". Targets (the mixed-precision work item):
lucid_f16 and lucid_bf16 <= 1.2 at 1e5, < 1 at 1e7 (memory bound: half reads and writes
half the bytes). The unary forwards read a table of their 65536 half results once warm
(src/lucid_half.c), which the warm-up of every case here reaches.

Ops: Promote element-wise ops, which stay in the half dtype (tanh, sin, gelu, relu,
add, sub, mul, div, and add_ in place); the ForceFP32 ones (exp, log, ...) return
float32 by policy. ``sin_backward``: the gradient of sin through autograd.grad (the
forward, then the fused backward g * cos(x), which has two half inputs and no table). One thread for both libraries, except the ``-t2`` groups (add at
1e7 on two threads). ``half-from_float64-*``: a float64 tensor converted to float32
(the baseline), float16 and bfloat16, against NumPy's astype and torch's ``.to``.
Nothing here asserts on time; every body first checks that the result is the float32
result rounded to the half type within one half ULP.

    python -m pytest bench/test_half_bench.py --benchmark-only -q
"""
from __future__ import annotations

import numpy as np
import pytest

from _lucid_bench import import_lucid, set_threads

lucid, _why = import_lucid()
try:
    import torch
except ImportError:  # pragma: no cover
    torch = None
try:
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None

SIZES = [100_000, 10_000_000]
OPS = {   # name: (arity, lucid call, torch call, numpy float32 reference)
    "tanh": (1, lambda x: lucid.tanh(x), lambda x: torch.tanh(x), np.tanh),
    "sin": (1, lambda x: lucid.sin(x), lambda x: torch.sin(x), np.sin),
    "gelu": (1, lambda x: lucid.nn.functional.gelu(x),
             lambda x: torch.nn.functional.gelu(x), None),
    "relu": (1, lambda x: lucid.relu(x), lambda x: torch.relu(x),
             lambda x: np.maximum(x, np.float32(0))),
    "add": (2, lambda x, y: x + y, lambda x, y: x + y, np.add),
    "sub": (2, lambda x, y: x - y, lambda x, y: x - y, np.subtract),
    "mul": (2, lambda x, y: x * y, lambda x, y: x * y, np.multiply),
    "div": (2, lambda x, y: x / y, lambda x, y: x / y, np.divide),
    # in place: x drifts by +-3 per call, far from overflow in any run's call count
    "add_": (2, lambda x, y: x.add_(y), lambda x, y: x.add_(y), np.add),
    # x requires grad (_run_case); g is the incoming gradient
    "sin_backward": (2, lambda x, g: lucid.autograd.grad(lucid.sin(x), x, g)[0],
                     lambda x, g: torch.autograd.grad(torch.sin(x), x, g)[0],
                     lambda x, g: g * np.cos(x)),
}
PEERS = ["lucid", "lucid_f16", "lucid_bf16", "torch_f32", "torch_f16", "torch_bf16"]
_DT = {"lucid": "float32", "lucid_f16": "float16", "lucid_bf16": "bfloat16",
       "torch_f32": "float32", "torch_f16": "float16", "torch_bf16": "bfloat16"}


def _np_dtype(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def _inputs(size, arity, dtname, op=""):
    rng = np.random.default_rng(size)
    xs = [rng.uniform(-3, 3, size).astype(np.float32).astype(_np_dtype(dtname))
          for _ in range(arity)]
    if op == "div":      # divisors away from 0
        xs[1] = (np.abs(xs[1].astype(np.float32)) + 0.5).astype(_np_dtype(dtname))
    return xs


def _check(got, xs, ref, dtname, ulps=1):
    """got (a NumPy array) is the float32 reference on the same inputs, rounded to
    dtname, within `ulps` ULP of dtname (float32: lucid's and torch's 4-ULP contract)."""
    if ref is None:
        return
    want = np.asarray(ref(*[x.astype(np.float32) for x in xs]), np.float32)
    want = want.astype(_np_dtype(dtname))
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    ulp = np.abs(np.spacing(want.astype(np.float32)).astype(np.float64)) * (
        4 if dtname == "float32" else ulps * (2 ** 13 if dtname == "float16" else 2 ** 16))
    tiny = {"float32": 2.0 ** -149, "float16": 2.0 ** -24, "bfloat16": 2.0 ** -133}[dtname]
    assert np.all(diff <= np.maximum(ulp, tiny)), f"{dtname}: max diff {diff.max()}"


@pytest.mark.parametrize("peer_name", PEERS)
@pytest.mark.parametrize("size", SIZES, ids=["1e5", "1e7"])
@pytest.mark.parametrize("op", list(OPS))
def test_half_elementwise(benchmark, op, size, peer_name):
    _run_case(benchmark, op, size, peer_name, 1)


@pytest.mark.parametrize("peer_name", PEERS)
def test_half_elementwise_two_threads(benchmark, peer_name):
    """add at 1e7 on two threads: the half kernels run on lucid's pool like float32."""
    _run_case(benchmark, "add", 10_000_000, peer_name, 2)


def _run_case(benchmark, op, size, peer_name, threads):
    arity, lfn, tfn, ref = OPS[op]
    dtname = _DT[peer_name]
    xs = _inputs(size, arity, dtname, op)
    if peer_name.startswith("lucid"):
        if lucid is None:
            pytest.skip(_why)
        set_threads(threads)
        args = [lucid.tensor(x) for x in xs]      # (a copy: add_ writes into args[0])
        if op.endswith("_backward"):
            args[0].requires_grad_(True)
        fn = lfn
        _check(fn(*args).numpy(), xs, ref, dtname)
    else:
        if torch is None:
            pytest.skip("torch is not installed")
        set_threads(threads)
        tdt = getattr(torch, dtname)
        args = [torch.from_numpy(x.astype(np.float32)).to(tdt) for x in xs]
        if op.endswith("_backward"):
            args[0].requires_grad_(True)
        fn = tfn
        # (torch's half backward rounds cos(x) to half before the product: 2 ULP)
        _check(fn(*args).float().numpy().astype(_np_dtype(dtname)), xs, ref, dtname,
               2 if op.endswith("_backward") else 1)
    benchmark.group = f"half-{op}-{size:.0e}-t{threads}".replace("+0", "")
    benchmark.extra_info.update(peer=peer_name, op=op, size=size, dtype=dtname, threads=threads)
    benchmark(fn, *args)


CONVERT_PEERS = ["lucid", "lucid_f16", "lucid_bf16", "numpy_f16", "numpy_bf16",
                 "torch_f16", "torch_bf16"]


@pytest.mark.parametrize("peer_name", CONVERT_PEERS)
@pytest.mark.parametrize("size", SIZES, ids=["1e5", "1e7"])
def test_half_from_float64(benchmark, size, peer_name):
    """float64 -> half. lucid and NumPy / ml_dtypes round once from the float64 value
    (checked bit for bit against NumPy's astype); torch goes through float32, which can
    round twice, so its result is only checked to one half ULP."""
    x = np.random.default_rng(size).uniform(-3, 3, size)
    dtname = {"lucid": "float32"}.get(peer_name, "float16" if peer_name.endswith("f16")
                                      else "bfloat16")
    want = x.astype(_np_dtype(dtname))
    if peer_name.startswith("lucid"):
        if lucid is None:
            pytest.skip(_why)
        set_threads(1)
        src, dt = lucid.from_numpy(x), getattr(lucid, dtname)
        fn = lambda: src.to(dt)  # noqa: E731
        got = fn().numpy()
    elif peer_name.startswith("numpy"):
        fn = lambda: x.astype(_np_dtype(dtname))  # noqa: E731
        got = fn()
    else:
        if torch is None:
            pytest.skip("torch is not installed")
        set_threads(1)
        src, tdt = torch.from_numpy(x), getattr(torch, dtname)
        fn = lambda: src.to(tdt)  # noqa: E731
        got = fn().float().numpy().astype(_np_dtype(dtname))
    if peer_name.startswith("torch"):
        _check(got, [x.astype(np.float32)], lambda v: v, dtname)
    else:
        assert np.array_equal(got.view(np.uint16 if dtname != "float32" else np.uint32),
                              want.view(np.uint16 if dtname != "float32" else np.uint32))
    benchmark.group = f"half-from_float64-{size:.0e}-t1".replace("+0", "")
    benchmark.extra_info.update(peer=peer_name, op="from_float64", size=size, dtype=dtname,
                                threads=1)
    benchmark(fn)


@pytest.mark.parametrize("dtname", ["float16", "bfloat16"])
def test_half_storage_saves_memory(benchmark, dtname):
    """Bytes held by a 1e7-element tensor: half storage is exactly half of float32's.
    (Benchmarked: the cast from float32, whose result is measured.)"""
    if lucid is None:
        pytest.skip(_why)
    x32 = lucid.zeros(10_000_000)
    dt = getattr(lucid, dtname)
    h = benchmark(x32.to, dt)
    b32, bh = x32.numpy().nbytes, h.numpy().nbytes
    benchmark.extra_info.update(bytes_float32=b32, bytes_half=bh, saved=1 - bh / b32)
    assert bh * 2 == b32
    print(f"\n{dtname}: 1e7 elements hold {bh / 1e6:.0f} MB vs {b32 / 1e6:.0f} MB in float32 "
          f"({100 * (1 - bh / b32):.0f}% saved)")
