"""Mixed basic and advanced indexing against torch: where the advanced dims land
(torch applies integers first and lets an empty Ellipsis separate nothing, so its
placement differs from NumPy's), for reads, writes, index_put_ and gradients, on
random indices made of integers, slices, None, Ellipsis, index tensors, lists, tuples,
boolean masks and Python bools."""
import warnings

import numpy as np
import pytest

import lucid

torch = pytest.importorskip("torch")

SHAPE = (4, 5, 3, 6, 2)


def _component(rng, size, kind):
    if kind == "int":
        return int(rng.integers(-size, size))
    if kind == "slice":             # (torch has no negative steps)
        a, b = sorted(rng.integers(-size, size + 1, 2))
        return slice(int(a), int(b), int(rng.choice([1, 1, 2]))) \
            if rng.random() < 0.5 else slice(None)
    if kind == "tensor":
        shp = [(2,), (3,), (1, 3), (2, 1)][rng.integers(4)]
        return ("t", rng.integers(-size, size, shp))
    if kind == "list":
        return list(int(v) for v in rng.integers(0, size, 2))
    if kind == "tuple":
        return tuple(int(v) for v in rng.integers(0, size, 2))
    if kind == "mask":
        return ("m", rng.random(size) < 0.5)
    raise AssertionError(kind)


CONSUMING = ("int", "slice", "tensor", "list", "tuple", "mask")


def _random_index(rng):
    """1 to 5 entries; each dim-consuming entry is made for the dim it lands on (counted
    from the end after an Ellipsis), so most indices are valid."""
    kinds = list(rng.choice(["int", "slice", "tensor", "tensor", "list", "tuple", "mask",
                             "none", "ellipsis", "bool"], int(rng.integers(1, 6))))
    while kinds.count("ellipsis") > 1:
        kinds.remove("ellipsis")
    while sum(k in CONSUMING for k in kinds) > len(SHAPE):
        kinds.pop()
    ell = kinds.index("ellipsis") if "ellipsis" in kinds else len(kinds)
    after = sum(k in CONSUMING for k in kinds[ell:])
    out, d = [], 0
    for i, k in enumerate(kinds):
        if i == ell:
            d = len(SHAPE) - after
        if k == "none":
            out.append(None)
        elif k == "bool":
            out.append(bool(rng.integers(2)))
        elif k == "ellipsis":
            out.append(Ellipsis)
        else:
            out.append(_component(rng, SHAPE[d], k))
            d += 1
    return tuple(out)


def _for(lib, idx):
    out = []
    for v in idx:
        if isinstance(v, tuple) and len(v) == 2 and v[0] in ("t", "m"):
            a = np.array(v[1])
            out.append(torch.from_numpy(a) if lib is torch else lucid.tensor(a))
        else:
            out.append(v)
    return tuple(out)


def _torch_or_error(f):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return f(), None
    except (IndexError, RuntimeError, ValueError, TypeError) as e:
        return None, e


CASES = [_random_index(np.random.default_rng(s)) for s in range(400)]
FIXED = [
    (1, slice(None), slice(3, 6, 2), ("t", [[0, 1, 2]]), slice(0, 2)),
    (slice(None), ("t", [0, 1]), Ellipsis, ("t", [1, 0])),
    (slice(None), ("t", [0, 1]), 0, ("t", [1, 0])),
    (0, ("t", [0, 1]), None, ("t", [1, 0])),
    (slice(None), ("t", [0, 1]), True, ("t", [1, 0])),
    ((0, 1), slice(None)),
    (("t", [2, 0]), 1, slice(None), 2),
    (Ellipsis, ("t", [1]), 0),
]


def _ids(c):
    return repr(c).replace(" ", "")[:60]


@pytest.mark.parametrize("idx", FIXED + CASES, ids=_ids)
def test_read_write_and_grad_as_torch(idx):
    rng = np.random.default_rng(len(repr(idx)))
    base = rng.standard_normal(SHAPE)
    tx = torch.tensor(base, requires_grad=True)
    want, err = _torch_or_error(lambda: tx[_for(torch, idx)])
    lx = lucid.tensor(base, dtype=lucid.float64, requires_grad=True)
    if err is not None:
        with pytest.raises((IndexError, ValueError, TypeError, lucid.LucidError)):
            lx[_for(lucid, idx)]
        return
    got = lx[_for(lucid, idx)]
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    # gradients: a weighted sum of the result
    w = rng.standard_normal(tuple(want.shape))
    (want * torch.tensor(w)).sum().backward()
    (got * lucid.tensor(w)).sum().backward()
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=0)
    # writes: a value of the result's shape (torch's order), and a broadcast one
    for val in (rng.standard_normal(tuple(want.shape)), rng.standard_normal(want.shape[-1:])):
        t2 = torch.tensor(base)
        _, werr = _torch_or_error(lambda: t2.__setitem__(_for(torch, idx), torch.tensor(val)))
        l2 = lucid.tensor(base, dtype=lucid.float64)
        if werr is not None:
            continue
        if _duplicates(idx):
            continue            # which of repeated writes wins is unspecified in both
        l2[_for(lucid, idx)] = lucid.tensor(val)
        np.testing.assert_array_equal(l2.numpy(), t2.numpy())


def _duplicates(idx):
    """Whether the index names an element twice (then which write wins is unspecified)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pos = torch.arange(int(np.prod(SHAPE))).reshape(SHAPE)[_for(torch, idx)]
    return pos.unique().numel() < pos.numel()


def test_value_gradient_of_a_write_in_torch_order():
    d = [[0, 1, 2]]
    base = np.random.default_rng(0).standard_normal((5, 6, 7, 8, 9))
    v = np.random.default_rng(1).standard_normal((6, 2, 1, 3, 2))
    tx, lx = torch.tensor(base), lucid.tensor(base, dtype=lucid.float64)
    tv = torch.tensor(v, requires_grad=True)
    lv = lucid.tensor(v, dtype=lucid.float64, requires_grad=True)
    tx = tx * 1
    lx = lx * 1
    tx[1, :, 3:11:2, torch.tensor(d), 0:2] = tv
    lx[1, :, 3:11:2, lucid.tensor(d), 0:2] = lv
    np.testing.assert_array_equal(lx.detach().numpy(), tx.detach().numpy())
    wt = np.random.default_rng(2).standard_normal(base.shape)
    (tx * torch.tensor(wt)).sum().backward()
    (lx * lucid.tensor(wt)).sum().backward()
    np.testing.assert_array_equal(lv.grad.numpy(), tv.grad.numpy())


def test_index_put_accumulate_in_torch_order():
    base = np.zeros((3, 4, 5))
    i = np.array([0, 2, 0])
    v = np.arange(12.0).reshape(4, 3)
    t = torch.tensor(base)
    t[1, :, torch.tensor(i)] += 0          # (same placement rule as a read)
    want = torch.tensor(base).index_put_((torch.tensor([1]), torch.arange(4)[:, None],
                                          torch.tensor(i)), torch.tensor(v), accumulate=True)
    got = lucid.tensor(base, dtype=lucid.float64).index_put_(
        (lucid.tensor([1]), lucid.arange(4)[:, None], lucid.tensor(i)), lucid.tensor(v),
        accumulate=True)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert tuple(torch.zeros(3, 4, 5)[1, :, torch.tensor(i)].shape) == \
        tuple(lucid.zeros(3, 4, 5)[1, :, lucid.tensor(i)].shape) == (4, 3)


def test_gpu_placement_as_cpu():
    import os
    os.environ.setdefault("LUCID_MLX_DEVICE", "cpu")
    pytest.importorskip("mlx.core")
    if not lucid.gpu_available():
        pytest.skip("no MLX device")
    base = np.random.default_rng(3).standard_normal((5, 6, 7, 8))
    x = lucid.tensor(base, dtype=lucid.float32)
    g = x.to("gpu")
    for idx in ((1, slice(None), lucid.tensor([[0, 2, 1]])),
                (slice(None), lucid.tensor([0, 1]), Ellipsis, lucid.tensor([1, 0])),
                (slice(None), lucid.tensor([0, 1]), slice(None), lucid.tensor([1, 0])),
                (None, 1, slice(None), lucid.tensor([[0, 2, 1]])),
                (lucid.tensor([0, 1]), 2, lucid.tensor([1, 0]))):
        np.testing.assert_array_equal(g[idx].cpu().numpy(), x[idx].numpy())
        v = lucid.tensor(np.random.default_rng(4).standard_normal(tuple(x[idx].shape)),
                         dtype=lucid.float32)
        xc, gc = x.clone(), g.clone()
        xc[idx] = v
        gc[idx] = v.to("gpu")
        np.testing.assert_array_equal(gc.cpu().numpy(), xc.numpy())
        # and the gradient of a read
        xr = x.clone().requires_grad_(True)
        gr = g.clone().requires_grad_(True)
        (xr[idx] * v).sum().backward()
        (gr[idx] * v.to("gpu")).sum().backward()
        np.testing.assert_array_equal(gr.grad.cpu().numpy(), xr.grad.numpy())
