"""The shape family and the in-place ops on the gpu device (MLX), against lucid's CPU path.

Runs on MLX's CPU stream (LUCID_MLX_DEVICE=cpu): the exact gpu code path, without a GPU.
For every case and float dtype: forward values, first derivatives (backward with a random
upstream gradient) and second derivatives (autograd.grad with create_graph=True, then
backward, which reaches both the input and the upstream gradient), each against the CPU.
Every case feeds the op x * x, so the second derivatives are not trivially zero and run
the op's backward formula (and that formula's own backward) on the gpu.

Tolerances: the shape ops move values exactly and x * x rounds the same on both devices,
so rtol 1e-5 (float32) / 1e-12 (float64) only leaves room for the order of the sums in
accumulating backward formulas. (The in-place autograd test uses MLX's sin/cos, whose
float64 results are only float32-accurate on MLX's CPU stream, measured ~1e-8 absolute:
that test's float64 tolerance is 1e-7.)
"""
import os

os.environ["LUCID_MLX_DEVICE"] = "cpu"

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core")

import lucid  # noqa: E402

if not lucid.gpu_available():
    pytest.skip("lucid's gpu device is not available", allow_module_level=True)

TOL = {"float32": dict(rtol=1e-5, atol=1e-6), "float64": dict(rtol=1e-12, atol=1e-13)}


def _sum_on_gpu():
    """Whether lucid.sum runs on the gpu yet (reduce.pyx; the backward of expand, tile
    and repeat sums the gradient over the copies)."""
    try:
        lucid.sum(lucid.ones(2, device="gpu"), 0)
        return True
    except Exception:
        return False


SUM_OK = _sum_on_gpu()

# (id, fn(xs, aux) -> tensor or tuple, float input shapes, aux index arrays, needs sum)
I = np.array
CASES = [
    ("reshape", lambda x, a: lucid.reshape(x[0], (4, -1)), [(3, 4)], {}, False),
    ("reshape_method", lambda x, a: x[0].reshape(2, 6), [(3, 4)], {}, False),
    ("reshape_0d", lambda x, a: lucid.reshape(x[0], ()), [(1, 1)], {}, False),
    ("reshape_empty", lambda x, a: lucid.reshape(x[0], (2, 0, 5)), [(0, 4)], {}, False),
    ("view", lambda x, a: x[0].view(4, 3), [(3, 4)], {}, False),
    ("view_flat", lambda x, a: x[0].view(-1), [(3, 4)], {}, False),
    ("flatten", lambda x, a: lucid.flatten(x[0]), [(2, 3, 4)], {}, False),
    ("flatten_start1", lambda x, a: lucid.flatten(x[0], 1), [(2, 3, 4)], {}, False),
    ("flatten_0d", lambda x, a: lucid.flatten(x[0]), [()], {}, False),
    ("squeeze", lambda x, a: lucid.squeeze(x[0], 1), [(3, 1, 4, 1)], {}, False),
    ("squeeze_all", lambda x, a: lucid.squeeze(x[0]), [(3, 1, 4, 1)], {}, False),
    ("squeeze_tuple", lambda x, a: x[0].squeeze((1, 3)), [(3, 1, 4, 1)], {}, False),
    ("squeeze_noop", lambda x, a: lucid.squeeze(x[0], 0), [(3, 1, 4, 1)], {}, False),
    ("unsqueeze", lambda x, a: lucid.unsqueeze(x[0], 0), [(3, 4)], {}, False),
    ("unsqueeze_last", lambda x, a: x[0].unsqueeze(-1), [(3, 4)], {}, False),
    ("unsqueeze_0d", lambda x, a: lucid.unsqueeze(x[0], 0), [()], {}, False),
    ("transpose", lambda x, a: lucid.transpose(x[0], 0, 2), [(2, 3, 4)], {}, False),
    ("transpose_method", lambda x, a: x[0].transpose(-1, 0), [(2, 3, 4)], {}, False),
    ("permute", lambda x, a: x[0].permute(2, 0, 1), [(2, 3, 4)], {}, False),
    ("permute_fn", lambda x, a: lucid.permute(x[0], (1, 2, 0)), [(2, 3, 4)], {}, False),
    ("T", lambda x, a: x[0].T, [(3, 4)], {}, False),
    ("T_1d", lambda x, a: x[0].T, [(4,)], {}, False),
    ("T_3d", lambda x, a: x[0].T, [(2, 3, 4)], {}, False),
    ("t", lambda x, a: x[0].t(), [(3, 4)], {}, False),
    ("expand", lambda x, a: x[0].expand(2, 3, 4), [(3, 1)], {}, True),
    ("expand_minus1", lambda x, a: x[0].expand(2, -1, 4), [(3, 1)], {}, True),
    ("expand_0d", lambda x, a: x[0].expand(2, 3), [()], {}, True),
    ("expand_as", lambda x, a: x[0].expand_as(x[1]), [(3, 1), (2, 3, 4)], {}, True),
    ("broadcast_to", lambda x, a: lucid.broadcast_to(x[0], (2, 3, 4)), [(3, 1)], {}, True),
    ("cat", lambda x, a: lucid.cat([x[0], x[1]], dim=1), [(3, 2), (3, 4)], {}, False),
    ("cat_three", lambda x, a: lucid.cat([x[0], x[1], x[0]], 0), [(1, 4), (3, 4)], {}, False),
    ("cat_neg_dim", lambda x, a: lucid.cat([x[0], x[1]], dim=-1), [(2, 1), (2, 3)], {}, False),
    ("cat_empty_part", lambda x, a: lucid.cat([x[0], x[1]], dim=1), [(3, 0), (3, 4)], {}, False),
    ("cat_skip_1d_empty", lambda x, a: lucid.cat([x[0], x[1]]), [(0,), (3, 4)], {}, False),
    ("concat", lambda x, a: lucid.concat([x[0], x[1]], dim=1), [(3, 2), (3, 4)], {}, False),
    ("stack", lambda x, a: lucid.stack([x[0], x[1]]), [(3, 4), (3, 4)], {}, False),
    ("stack_last", lambda x, a: lucid.stack([x[0], x[1]], dim=-1), [(3, 4), (3, 4)], {}, False),
    ("stack_mid", lambda x, a: lucid.stack([x[0], x[1], x[0]], 1), [(3, 4), (3, 4)], {}, False),
    ("stack_0d", lambda x, a: lucid.stack([x[0], x[1]]), [(), ()], {}, False),
    ("narrow", lambda x, a: lucid.narrow(x[0], 1, 1, 2), [(3, 5)], {}, False),
    ("narrow_neg", lambda x, a: x[0].narrow(-1, -3, 3), [(3, 5)], {}, False),
    ("split", lambda x, a: lucid.split(x[0], 2, dim=1), [(3, 5)], {}, False),
    ("split_sections", lambda x, a: lucid.split(x[0], [1, 4], dim=1), [(3, 5)], {}, False),
    ("split_method", lambda x, a: x[0].split(2, 0), [(3, 5)], {}, False),
    ("chunk", lambda x, a: lucid.chunk(x[0], 3, dim=1), [(3, 5)], {}, False),
    ("chunk_even", lambda x, a: x[0].chunk(3, 0), [(3, 5)], {}, False),
    ("flip", lambda x, a: lucid.flip(x[0], (0, 2)), [(2, 3, 4)], {}, False),
    ("flip_one", lambda x, a: x[0].flip((-1,)), [(2, 3, 4)], {}, False),
    ("flip_0d", lambda x, a: lucid.flip(x[0], ()), [()], {}, False),
    ("roll", lambda x, a: lucid.roll(x[0], 1, 1), [(3, 4)], {}, False),
    ("roll_tuple", lambda x, a: lucid.roll(x[0], (2, -1), (0, 1)), [(3, 4)], {}, False),
    ("roll_flat", lambda x, a: lucid.roll(x[0], 5), [(3, 4)], {}, False),
    ("roll_flat_neg", lambda x, a: x[0].roll(-7), [(2, 3, 2)], {}, False),
    ("tile", lambda x, a: lucid.tile(x[0], (2, 1)), [(3, 4)], {}, True),
    ("tile_more_dims", lambda x, a: lucid.tile(x[0], (2, 1, 3)), [(3, 4)], {}, True),
    ("tile_fewer", lambda x, a: x[0].tile((2,)), [(3, 4)], {}, True),
    ("repeat", lambda x, a: x[0].repeat(2, 1, 3), [(3, 4)], {}, True),
    ("repeat_same_ndim", lambda x, a: x[0].repeat(1, 2), [(3, 4)], {}, True),
    ("pad", lambda x, a: lucid.pad(x[0], (1, 2)), [(3, 4)], {}, False),
    ("pad_two_dims", lambda x, a: lucid.pad(x[0], (0, 1, 2, 0), value=0.5), [(3, 4)], {}, False),
    ("pad_crop", lambda x, a: lucid.pad(x[0], (-1, 2, 1, -2), value=-3.0), [(3, 4)], {}, False),
    ("pad_reflect", lambda x, a: lucid.pad(x[0], (2, 1), mode="reflect"), [(2, 5)], {}, False),
    ("pad_replicate", lambda x, a: lucid.pad(x[0], (1, 3, 1, 0), mode="replicate"),
     [(2, 3)], {}, False),
    ("pad_circular", lambda x, a: lucid.pad(x[0], (2, 2), mode="circular"), [(2, 3)], {}, False),
    ("getitem_int", lambda x, a: x[0][1], [(4, 5, 3)], {}, False),
    ("getitem_slices_step", lambda x, a: x[0][1:4:2, ::2], [(4, 5, 3)], {}, False),
    ("getitem_neg_step", lambda x, a: x[0][::-1, 3:0:-2], [(4, 5, 3)], {}, False),
    ("getitem_neg_int", lambda x, a: x[0][-1, 1:, -2], [(4, 5, 3)], {}, False),
    ("getitem_ellipsis_none", lambda x, a: x[0][..., None, 1], [(4, 5, 3)], {}, False),
    ("getitem_0d_result", lambda x, a: x[0][1, 2, 0], [(4, 5, 3)], {}, False),
    ("getitem_empty_slice", lambda x, a: x[0][2:2], [(4, 5, 3)], {}, False),
    ("getitem_list_repeats", lambda x, a: x[0][[0, 2, 2, 3]], [(4, 5, 3)], {}, False),
    ("getitem_list_mid", lambda x, a: x[0][:, [4, 0, 4]], [(4, 5, 3)], {}, False),
    ("getitem_two_lists", lambda x, a: x[0][[0, 3, 3], [1, 1, 4]], [(4, 5, 3)], {}, False),
    ("getitem_adv_split", lambda x, a: x[0][[0, 3, 3], :, [1, 0, 2]], [(4, 5, 3)], {}, False),
    ("getitem_ndarray_neg", lambda x, a: x[0][..., I([-1, 0, -3])], [(4, 5, 3)], {}, False),
    ("getitem_int_and_array", lambda x, a: x[0][1, I([[0, 4], [2, 2]])], [(4, 5, 3)], {}, False),
    ("getitem_host_mask", lambda x, a: x[0][I([True, False, True, True])], [(4, 5, 3)], {},
     False),
    ("getitem_host_mask_full",
     lambda x, a: x[0][np.arange(60).reshape(4, 5, 3) % 3 == 1], [(4, 5, 3)], {}, False),
    ("getitem_tensor_index", lambda x, a: x[0][a["i"]], [(4, 5, 3)],
     {"i": I([3, -1, 0, 3])}, False),
    ("getitem_tensor_2d_mid", lambda x, a: x[0][:, a["i"], 1:], [(4, 5, 3)],
     {"i": I([[0, 4], [4, 1]])}, False),
    ("getitem_tensor_0d", lambda x, a: x[0][a["i"], 1], [(4, 5, 3)], {"i": I(2)}, False),
    ("gather", lambda x, a: lucid.gather(x[0], 1, a["i"]), [(3, 4)],
     {"i": I([[0, 3, 3, 1, 2, 0], [1, 1, 1, 1, 0, 0], [3, 2, 1, 0, 3, 2]])}, False),
    ("gather_dim0", lambda x, a: x[0].gather(0, a["i"]), [(3, 4)],
     {"i": I([[0, 2, 1, 0], [2, 2, 2, 2], [1, 0, 0, 1], [0, 0, 0, 0], [2, 1, 0, 2]])}, False),
    ("gather_smaller", lambda x, a: lucid.gather(x[0], 1, a["i"]), [(3, 4)],
     {"i": I([[0, 3], [2, 2]])}, False),
    ("scatter_add", lambda x, a: lucid.scatter_add(x[0], 1, a["i"], x[1]), [(3, 4), (3, 5)],
     {"i": I([[0, 3, 3, 1, 0], [2, 2, 2, 2, 2], [1, 0, 3, 2, 1]])}, False),
    ("scatter_add_src_larger", lambda x, a: x[0].scatter_add(1, a["i"], x[1]),
     [(3, 4), (3, 5)], {"i": I([[0, 3, 3], [1, 1, 2]])}, False),
    ("index_select", lambda x, a: lucid.index_select(x[0], 1, a["i"]), [(3, 4)],
     {"i": I([3, 0, 3, 1])}, False),
    ("index_select_dim0", lambda x, a: x[0].index_select(0, a["i"]), [(3, 4)],
     {"i": I([2, 2])}, False),
    ("contiguous", lambda x, a: x[0].T.contiguous(), [(3, 4)], {}, False),
    ("clone", lambda x, a: lucid.clone(x[0].T), [(3, 4)], {}, False),
    ("chain", lambda x, a: lucid.cat([x[0].T[1:], lucid.flip(x[0], 0).T[:2]], 0)
     .reshape(-1)[a["i"]].view(2, 3), [(3, 4)], {"i": I([0, 5, 9, 1, 1, 2])}, False),
]
IDS = [c[0] for c in CASES]


def _inputs(case, dtype, device, seed):
    rng = np.random.default_rng(seed)
    xs = [lucid.tensor(rng.uniform(-2, 2, s), dtype=dtype, device=device, requires_grad=True)
          for s in case[2]]
    aux = {k: lucid.tensor(v, device=device) for k, v in case[3].items()}
    return xs, aux


def _outs(case, xs, aux):
    r = case[1]([x * x for x in xs], aux)
    return tuple(r) if isinstance(r, (tuple, list)) else (r,)


def _host(t):
    return None if t is None else t.detach().cpu().numpy()


def _check_close(gpu_vals, cpu_vals, dtype, what):
    assert len(gpu_vals) == len(cpu_vals)
    for k, (g, c) in enumerate(zip(gpu_vals, cpu_vals)):
        if c is None:
            assert g is None or not np.any(g), f"{what}[{k}]"
            continue
        assert g is not None, f"{what}[{k}]: no gradient on the gpu"
        assert g.shape == c.shape and g.dtype == c.dtype, (what, k, g.shape, c.shape)
        np.testing.assert_allclose(g, c, err_msg=f"{what}[{k}]", **TOL[dtype])


def _upstream(outs, dtype, device, seed, requires_grad=False):
    rng = np.random.default_rng(seed)
    return tuple(lucid.tensor(rng.uniform(-1, 1, tuple(o.shape)), dtype=dtype, device=device,
                              requires_grad=requires_grad) for o in outs)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward(case, dtype):
    res = {}
    for dev in ("cpu", "gpu"):
        xs, aux = _inputs(case, dtype, dev, 0)
        outs = _outs(case, xs, aux)
        for o in outs:
            assert o.device.type == dev
            assert str(o.dtype) == str(lucid.float32 if dtype == "float32" else lucid.float64)
        res[dev] = [_host(o) for o in outs]
    _check_close(res["gpu"], res["cpu"], dtype, "forward")


def _skip_sum(case):
    if case[4] and not SUM_OK:
        pytest.skip("the backward sums over the copies: needs lucid.sum on the gpu (reduce.pyx)")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_backward(case, dtype):
    _skip_sum(case)
    res = {}
    for dev in ("cpu", "gpu"):
        xs, aux = _inputs(case, dtype, dev, 1)
        outs = _outs(case, xs, aux)
        lucid.autograd.backward(outs, _upstream(outs, dtype, dev, 2))
        for x in xs:
            assert x.grad is None or x.grad.device.type == dev
        res[dev] = [_host(x.grad) for x in xs]
    _check_close(res["gpu"], res["cpu"], dtype, "grad")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_double_backward(case, dtype):
    _skip_sum(case)
    res = {}
    for dev in ("cpu", "gpu"):
        xs, aux = _inputs(case, dtype, dev, 3)
        outs = _outs(case, xs, aux)
        gs = _upstream(outs, dtype, dev, 4, requires_grad=True)
        grads = lucid.autograd.grad(outs, xs, gs, create_graph=True, allow_unused=True)
        live = [(g, x) for g, x in zip(grads, xs) if g is not None]
        assert live
        for g, _ in live:
            assert g.device.type == dev and g.requires_grad
        rng = np.random.default_rng(5)
        vs = tuple(lucid.tensor(rng.uniform(-1, 1, tuple(g.shape)), dtype=dtype, device=dev)
                   for g, _ in live)
        lucid.autograd.backward(tuple(g for g, _ in live), vs)
        res[dev] = [_host(x.grad) for x in xs] + [_host(g.grad) for g in gs]
    _check_close(res["gpu"], res["cpu"], dtype, "second derivative")


# -- dtypes other than float ------------------------------------------------------------

INT_CASES = [
    ("reshape", lambda x: x.reshape(4, 3)),
    ("T", lambda x: x.T),
    ("cat_promote", lambda x: lucid.cat([x, x.to(lucid.float32)], 0)),
    ("stack", lambda x: lucid.stack([x, x], 1)),
    ("flip", lambda x: x.flip(0)),
    ("roll", lambda x: x.roll(3)),
    ("tile", lambda x: x.tile((2, 2))),
    ("pad", lambda x: lucid.pad(x, (1, 1), value=7)),
    ("pad_float_value", lambda x: lucid.pad(x, (1, 0), value=2.7)),
    ("getitem", lambda x: x[[2, 0], 1:]),
    ("split", lambda x: x.split(1, 0)),
    ("gather", lambda x: x.gather(1, x % 4)),
    ("index_select", lambda x: x.index_select(1, lucid.tensor([3, 3], device=x.device))),
    ("expand", lambda x: x[None].expand(2, 3, 4)),
]


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
@pytest.mark.parametrize("name,fn", INT_CASES, ids=[c[0] for c in INT_CASES])
def test_forward_other_dtypes(name, fn, dtype):
    if name == "gather" and dtype == "bool":
        pytest.skip("bool % 4 is not an index")
    a = np.arange(12).reshape(3, 4) % (2 if dtype == "bool" else 100)
    outs = {}
    for dev in ("cpu", "gpu"):
        x = lucid.tensor(a.astype(dtype), device=dev)
        r = fn(x)
        r = r if isinstance(r, tuple) else (r,)
        for o in r:
            assert o.device.type == dev
        outs[dev] = [(str(o.dtype), o.cpu().numpy()) for o in r]
    assert [d for d, _ in outs["gpu"]] == [d for d, _ in outs["cpu"]]
    for (_, g), (_, c) in zip(outs["gpu"], outs["cpu"]):
        np.testing.assert_array_equal(g, c)


def test_cat_mixed_float_dtypes_promote():
    a = lucid.randn(2, 3, dtype=lucid.float32, device="gpu")
    b = lucid.randn(1, 3, dtype=lucid.float64, device="gpu")
    y = lucid.cat([a, b])
    assert y.dtype == lucid.float64 and y.device.type == "gpu"
    np.testing.assert_array_equal(y.cpu().numpy(),
                                  np.concatenate([a.cpu().numpy().astype(np.float64),
                                                  b.cpu().numpy()]))


# -- device mixing ---------------------------------------------------------------------------

def _both_devices_named(excinfo):
    msg = str(excinfo.value)
    assert "gpu" in msg and "cpu" in msg, msg


@pytest.mark.parametrize("call", [
    lambda c, g: lucid.cat([c, g]),
    lambda c, g: lucid.cat([g, c]),
    lambda c, g: lucid.stack([g, c]),
    lambda c, g: lucid.gather(g, 0, lucid.tensor([[0, 1, 0]])),
    lambda c, g: lucid.gather(c, 0, lucid.tensor([[0, 1, 0]], device="gpu")),
    lambda c, g: lucid.scatter_add(g, 0, lucid.tensor([[0, 1, 0]], device="gpu"), c),
    lambda c, g: lucid.index_select(g, 0, lucid.tensor([0])),
    lambda c, g: c[lucid.tensor([0, 1], device="gpu")],
    lambda c, g: c.__setitem__(0, g[0]),
    lambda c, g: g.__setitem__(0, c[0]),
    lambda c, g: g.add_(c),
    lambda c, g: c.mul_(g),
    lambda c, g: c.index_put_((lucid.tensor([0]),), g[0]),
], ids=["cat", "cat_rev", "stack", "gather_idx", "gather_gpu_idx", "scatter_add",
        "index_select", "getitem_gpu_idx", "setitem_cpu", "setitem_gpu", "add_", "mul_",
        "index_put_"])
def test_device_mixing_raises(call):
    c = lucid.randn(2, 3)
    g = lucid.randn(2, 3, device="gpu")
    with pytest.raises(lucid.LucidError) as ei:
        call(c, g)
    _both_devices_named(ei)


def test_cpu_index_tensor_into_gpu_tensor():
    """As PyTorch: a cpu index tensor may index a gpu tensor (its values are on the host)."""
    a = np.arange(12.0).reshape(3, 4)
    g = lucid.tensor(a, device="gpu")
    y = g[lucid.tensor([2, 0])]
    assert y.device.type == "gpu"
    np.testing.assert_array_equal(y.cpu().numpy(), a[[2, 0]])


# -- what the gpu can't do: clear errors --------------------------------------------------

def test_gpu_bool_mask_indexes_as_on_the_cpu():
    # the mask's values decide the result's size: evaluated, as torch does on CUDA
    a = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
    g, c = lucid.tensor(a, device="gpu"), lucid.tensor(a)
    assert g[g > 0].device == g.device
    np.testing.assert_array_equal(g[g > 0].cpu().numpy(), c[c > 0].numpy())
    g[g > 0] = 0.0
    c[c > 0] = 0.0
    np.testing.assert_array_equal(g.cpu().numpy(), c.numpy())


def test_gpu_index_bounds():
    g = lucid.randn(3, 4, device="gpu")
    for f in (lambda: g[3], lambda: g[:, [0, 4]], lambda: g[lucid.tensor([0, -4], device="gpu")],
              lambda: lucid.gather(g, 1, lucid.tensor([[4]], device="gpu")),
              lambda: lucid.index_select(g, 0, lucid.tensor([-1], device="gpu")),
              lambda: g.__setitem__((0, 9), 1.0)):
        with pytest.raises(IndexError):
            f()


# -- in-place semantics ------------------------------------------------------------------------

def _pair(shape=(3, 4), seed=0):
    a = np.random.default_rng(seed).uniform(-1, 1, shape)
    return lucid.tensor(a), lucid.tensor(a, device="gpu")


@pytest.mark.parametrize("op", [
    lambda t, o: t.add_(o), lambda t, o: t.sub_(o, alpha=2), lambda t, o: t.mul_(o),
    lambda t, o: t.div_(o), lambda t, o: t.add_(2.5), lambda t, o: t.mul_(-3),
    lambda t, o: t.zero_(), lambda t, o: t.fill_(1.25), lambda t, o: t.fill_(o[0, 0]),
    lambda t, o: t.__setitem__((slice(None), 1), 7.0),
    lambda t, o: t.__setitem__(([0, 2, 0], [1, 1, 3]), o[0, :3]),
    lambda t, o: t.__setitem__(np.array([True, False, True]), o[1]),
    lambda t, o: t.index_put_((lucid.tensor([0, 0, 2], device=t.device),),
                              o[:3], accumulate=True),
], ids=["add_", "sub_alpha", "mul_", "div_", "add_scalar", "mul_scalar", "zero_", "fill_",
        "fill_tensor", "setitem_slice", "setitem_adv", "setitem_mask", "index_put_acc"])
def test_inplace_matches_cpu(op):
    c, g = _pair()
    oc, og = _pair(seed=1)
    oc, og = oc + 2.0, og + 2.0            # no division by ~0
    vc, vg = c._version, g._version
    keep = g.clone()
    rc, rg = op(c, oc), op(g, og)
    if rc is not None:
        assert rc is c and rg is g
    assert g.device.type == "gpu" and g.dtype == c.dtype
    assert g._version > vg and c._version > vc
    np.testing.assert_allclose(g.cpu().numpy(), c.numpy(), rtol=1e-12)
    assert not np.array_equal(keep.cpu().numpy(), g.cpu().numpy())   # a clone is a copy


def test_inplace_int_dtype_kept():
    g = lucid.tensor([1, 2, 3], device="gpu")
    g.add_(2)
    g[0] = 10
    assert g.dtype == lucid.int64
    np.testing.assert_array_equal(g.cpu().numpy(), [10, 4, 5])
    with pytest.raises(lucid.UnsupportedDTypeError):
        g[1] = lucid.tensor([1.5], device="gpu")


@pytest.mark.parametrize("view", [
    lambda g: g[0], lambda g: g.T, lambda g: g.reshape(-1), lambda g: g.view(4, 3),
    lambda g: g.unsqueeze(0), lambda g: g[:, 1:], lambda g: g.expand(2, 3, 4),
    lambda g: g.split(1)[0], lambda g: g.permute(1, 0), lambda g: g.squeeze(),
], ids=["int", "T", "reshape", "view", "unsqueeze", "slice", "expand", "split", "permute",
        "squeeze"])
@pytest.mark.parametrize("write", [
    lambda v: v.add_(1.0), lambda v: v.fill_(0.0), lambda v: v.zero_(),
    lambda v: v.__setitem__(0, 5.0), lambda v: v.mul_(2.0),
], ids=["add_", "fill_", "zero_", "setitem", "mul_"])
def test_inplace_through_gpu_view_raises(view, write):
    g = lucid.randn(3, 4, device="gpu")
    before = g.cpu().numpy().copy()
    v = view(g)
    with pytest.raises(lucid.LucidError, match="view of a gpu tensor"):
        write(v)
    np.testing.assert_array_equal(g.cpu().numpy(), before)


def test_inplace_on_clone_of_gpu_view():
    g = lucid.randn(3, 4, device="gpu")
    v = g.T.clone()
    v.add_(1.0)
    v[0, 0] = 0.0
    want = g.cpu().numpy().T + 1.0
    want[0, 0] = 0.0
    np.testing.assert_allclose(v.cpu().numpy(), want)


def test_advanced_index_result_is_writable_copy():
    g = lucid.randn(3, 4, device="gpu")
    before = g.cpu().numpy().copy()
    y = g[[0, 1]]
    y.add_(1.0)                      # advanced indexing copies, as on the CPU
    np.testing.assert_array_equal(g.cpu().numpy(), before)


def test_saved_tensor_modified_in_place_raises():
    x = lucid.randn(3, 4, device="gpu", requires_grad=True)
    y = x * 1.0
    z = y * y                        # saves y
    y.add_(1.0)
    with pytest.raises(Exception, match="modified by an inplace operation|in-place|inplace"):
        z.backward(lucid.ones(3, 4, device="gpu"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inplace_autograd_matches_cpu(dtype):
    """Writes with history on the gpu: index assignment (value and self get gradients),
    in-place arithmetic, fill_; first and second derivatives against the CPU."""
    res = {}
    for dev in ("cpu", "gpu"):
        rng = np.random.default_rng(7)
        x = lucid.tensor(rng.uniform(-1, 1, (3, 4)), dtype=dtype, device=dev, requires_grad=True)
        v = lucid.tensor(rng.uniform(-1, 1, (4,)), dtype=dtype, device=dev, requires_grad=True)
        w = lucid.tensor(rng.uniform(-1, 1, (2, 4)), dtype=dtype, device=dev, requires_grad=True)
        y = lucid.sin(x) * 1.0
        y[1] = lucid.sin(v)
        y[[0, 2]] = y[[0, 2]] * lucid.cos(w)
        y.mul_(lucid.sin(x))
        y.add_(lucid.cos(x), alpha=0.5)
        y.index_put_((lucid.tensor([0, 0], device=dev),), lucid.sin(w), accumulate=True)
        g = lucid.tensor(rng.uniform(-1, 1, (3, 4)), dtype=dtype, device=dev)
        gx, gv, gw = lucid.autograd.grad((y,), (x, v, w), (g,), create_graph=True)
        lucid.autograd.backward((gx, gv, gw), (lucid.sin(g), lucid.ones(4, dtype=dtype, device=dev),
                                               lucid.cos(g[:2])))
        res[dev] = [t.detach().cpu().numpy() for t in (y, gx, gv, gw, x.grad, v.grad, w.grad)]
    tol = dict(rtol=1e-7, atol=1e-7) if dtype == "float64" else TOL[dtype]
    for a, b in zip(res["gpu"], res["cpu"]):
        np.testing.assert_allclose(a, b, **tol)


def test_chain_stays_on_gpu():
    a = np.random.default_rng(0).uniform(-1, 1, (4, 5))
    g = lucid.tensor(a, device="gpu")
    y = lucid.cat([g.T, g.T.flip(0)], 1)[1:, ::2].reshape(-1)
    assert y.device.type == "gpu"
    want = np.concatenate([a.T, a.T[::-1]], 1)[1:, ::2].reshape(-1)
    np.testing.assert_array_equal(y.cpu().numpy(), want)
