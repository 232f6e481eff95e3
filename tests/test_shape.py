"""Shape, indexing and linear-algebra ops: values vs NumPy / PyTorch, gradients
(gradcheck, gradgradcheck, torch), views and version counters, index assignment,
and errors."""
import numpy as np
import pytest

import lucid
import lucid.autograd as AG
from lucid_testutils import to_np

R = np.random.default_rng(7)


def T(a, rg=False, dtype=lucid.float64):
    return lucid.tensor(np.asarray(a), dtype=dtype, requires_grad=rg)


def rnd(*shape):
    return R.standard_normal(shape)


IDX = np.array([[0, 2], [1, 0], [2, 2]])          # gather index into a (3, 4) input along dim 0..1

# name, lucid fn, numpy fn, input shapes
VALUE_CASES = [
    ("flatten", lambda x: lucid.flatten(x), lambda a: a.reshape(-1), [(2, 3, 4)]),
    ("flatten_mid", lambda x: lucid.flatten(x, 1, 2), lambda a: a.reshape(2, 12, 5), [(2, 3, 4, 5)]),
    ("flatten_0d", lambda x: lucid.flatten(x), lambda a: a.reshape(1), [()]),
    ("squeeze_all", lambda x: lucid.squeeze(x), lambda a: a.squeeze(), [(1, 3, 1, 2)]),
    ("squeeze_dim", lambda x: x.squeeze(2), lambda a: a.squeeze(2), [(1, 3, 1, 2)]),
    ("squeeze_noop", lambda x: x.squeeze(1), lambda a: a, [(1, 3, 1, 2)]),
    ("squeeze_tuple", lambda x: x.squeeze((0, -2)), lambda a: a.squeeze((0, 2)), [(1, 3, 1, 2)]),
    ("unsqueeze0", lambda x: lucid.unsqueeze(x, 0), lambda a: a[None], [(3, 2)]),
    ("unsqueeze_last", lambda x: x.unsqueeze(-1), lambda a: a[..., None], [(3, 2)]),
    ("transpose", lambda x: lucid.transpose(x, 0, 2), lambda a: a.swapaxes(0, 2), [(2, 3, 4)]),
    ("transpose_neg", lambda x: x.transpose(-1, -2), lambda a: a.swapaxes(-1, -2), [(2, 3, 4)]),
    ("permute", lambda x: lucid.permute(x, 2, 0, 1), lambda a: a.transpose(2, 0, 1), [(2, 3, 4)]),
    ("permute_tuple", lambda x: x.permute((1, 2, 0)), lambda a: a.transpose(1, 2, 0), [(2, 3, 4)]),
    ("T", lambda x: x.T, lambda a: a.T, [(2, 3, 4)]),
    ("T_1d", lambda x: x.T, lambda a: a.T, [(3,)]),
    ("t", lambda x: x.t(), lambda a: a.T, [(2, 3)]),
    ("cat0", lambda a, b: lucid.cat([a, b]), lambda a, b: np.concatenate([a, b]), [(2, 3), (4, 3)]),
    ("cat1", lambda a, b: lucid.cat((a, b), dim=-1), lambda a, b: np.concatenate([a, b], 1),
     [(2, 3), (2, 1)]),
    ("stack0", lambda a, b: lucid.stack([a, b]), lambda a, b: np.stack([a, b]), [(2, 3), (2, 3)]),
    ("stack_last", lambda a, b: lucid.stack([a, b], -1), lambda a, b: np.stack([a, b], -1),
     [(2, 3), (2, 3)]),
    ("flip", lambda x: lucid.flip(x, (0, 2)), lambda a: a[::-1, :, ::-1], [(2, 3, 4)]),
    ("flip_int", lambda x: x.flip(1), lambda a: a[:, ::-1], [(2, 3)]),
    ("roll", lambda x: lucid.roll(x, 1, 0), lambda a: np.roll(a, 1, 0), [(3, 4)]),
    ("roll_multi", lambda x: x.roll((1, -2), (0, 1)), lambda a: np.roll(a, (1, -2), (0, 1)), [(3, 4)]),
    ("roll_flat", lambda x: lucid.roll(x, 5), lambda a: np.roll(a, 5), [(3, 4)]),
    ("tile", lambda x: lucid.tile(x, (2, 1)), lambda a: np.tile(a, (2, 1)), [(2, 3)]),
    ("tile_short", lambda x: x.tile((3,)), lambda a: np.tile(a, (1, 3)), [(2, 3)]),
    ("tile_long", lambda x: x.tile((2, 1, 2)), lambda a: np.tile(a, (2, 1, 2)), [(2, 3)]),
    ("repeat", lambda x: x.repeat(2, 3), lambda a: np.tile(a, (2, 3)), [(2, 3)]),
    ("repeat_new_dim", lambda x: lucid.repeat(x, 2, 1, 2), lambda a: np.tile(a, (2, 1, 2)), [(2, 3)]),
    ("pad", lambda x: lucid.pad(x, (1, 2)), lambda a: np.pad(a, ((0, 0), (1, 2))), [(2, 3)]),
    ("pad2", lambda x: lucid.pad(x, (1, 0, 0, 2), value=1.5),
     lambda a: np.pad(a, ((0, 2), (1, 0)), constant_values=1.5), [(2, 3)]),
    ("pad_crop", lambda x: lucid.pad(x, (-1, 1)), lambda a: np.pad(a[:, 1:], ((0, 0), (0, 1))),
     [(2, 3)]),
    ("pad_reflect", lambda x: lucid.pad(x, (2, 1), mode="reflect"),
     lambda a: np.pad(a, ((0, 0), (2, 1)), mode="reflect"), [(2, 4)]),
    ("pad_replicate", lambda x: lucid.pad(x, (1, 2, 1, 0), mode="replicate"),
     lambda a: np.pad(a, ((1, 0), (1, 2)), mode="edge"), [(2, 3)]),
    ("pad_circular", lambda x: lucid.pad(x, (1, 2), mode="circular"),
     lambda a: np.pad(a, ((0, 0), (1, 2)), mode="wrap"), [(2, 3)]),
    ("gather0", lambda x: lucid.gather(x, 0, T(IDX, dtype=lucid.int64)),
     lambda a: np.take_along_axis(a[:, :2], IDX, 0), [(3, 4)]),
    ("gather1", lambda x: x.gather(1, T(IDX, dtype=lucid.int64)),
     lambda a: np.take_along_axis(a, IDX, 1), [(3, 4)]),
    ("index_select", lambda x: lucid.index_select(x, 1, T([3, 0, 3], dtype=lucid.int64)),
     lambda a: a[:, [3, 0, 3]], [(3, 4)]),
    ("index_select0", lambda x: x.index_select(0, T([2], dtype=lucid.int64)), lambda a: a[[2]],
     [(3, 4)]),
    ("matmul_mm", lambda a, b: lucid.matmul(a, b), np.matmul, [(2, 3), (3, 4)]),
    ("matmul_vv", lambda a, b: a @ b, np.matmul, [(3,), (3,)]),
    ("matmul_mv", lambda a, b: a @ b, np.matmul, [(2, 3), (3,)]),
    ("matmul_vm", lambda a, b: a @ b, np.matmul, [(3,), (3, 4)]),
    ("matmul_bmm", lambda a, b: a.matmul(b), np.matmul, [(2, 2, 3), (2, 3, 4)]),
    ("matmul_bcast", lambda a, b: a @ b, np.matmul, [(2, 1, 2, 3), (3, 3, 2)]),
    ("matmul_bv", lambda a, b: a @ b, np.matmul, [(2, 2, 3), (3,)]),
    ("matmul_vb", lambda a, b: a @ b, np.matmul, [(3,), (2, 3, 4)]),
    ("dot", lambda a, b: lucid.dot(a, b), np.dot, [(4,), (4,)]),
    ("outer", lambda a, b: lucid.outer(a, b), np.outer, [(3,), (4,)]),
]


def _scatter_add_np(a, dim, idx, src):
    out = a.copy()
    for pos in np.ndindex(*idx.shape):
        tgt = list(pos)
        tgt[dim] = idx[pos]
        out[tuple(tgt)] += src[pos]
    return out


VALUE_CASES += [
    ("scatter_add0", lambda x, s: lucid.scatter_add(x, 0, T(IDX, dtype=lucid.int64), s),
     lambda a, s: _scatter_add_np(a, 0, IDX, s), [(3, 4), (3, 2)]),
    ("scatter_add1_bigsrc", lambda x, s: x.scatter_add(1, T(IDX, dtype=lucid.int64), s),
     lambda a, s: _scatter_add_np(a, 1, IDX, s), [(3, 4), (4, 3)]),
]


@pytest.mark.parametrize("case", VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_values_vs_numpy(case):
    _, fn, npfn, shapes = case
    arrs = [rnd(*s) for s in shapes]
    out = fn(*[T(a) for a in arrs])
    want = npfn(*arrs)
    assert out.shape == np.shape(want)
    np.testing.assert_allclose(to_np(out), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_gradcheck(case):
    _, fn, _, shapes = case
    xs = [T(rnd(*s), rg=True) for s in shapes]
    assert AG.gradcheck(fn, xs)


@pytest.mark.parametrize("case", VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_gradgradcheck(case):
    _, fn, _, shapes = case
    xs = [T(rnd(*s), rg=True) for s in shapes]
    assert AG.gradgradcheck(fn, xs)


@pytest.mark.parametrize("case", VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_float32_and_float16_keep_dtype(case):
    _, fn, _, shapes = case
    for dt in (lucid.float32, lucid.float16):
        xs = [T(rnd(*s), rg=True, dtype=dt) for s in shapes]
        out = fn(*xs)
        assert out.dtype is dt
        out.sum().backward()
        for x in xs:
            assert x.grad is not None and x.grad.dtype is dt and x.grad.shape == x.shape


# ------------------------------------------------------------------------- indexing
INDEX_CASES = [
    ("int", 1),
    ("neg_int", -1),
    ("ints", (1, 2)),
    ("all_ints", (1, 2, 3)),
    ("slice_step", (slice(None, None, 2), slice(3, 0, -1))),
    ("ellipsis", (Ellipsis, 1)),
    ("none", (None, 1, None, slice(1, 3))),
    ("list", [0, 2, 2]),
    ("nested_list", ([0, 2], slice(None), [1, 1])),
    ("ndarray", np.array([[0, 1], [2, 2]])),
    ("mask", np.array([True, False, True])),
    ("mask2d", np.arange(12).reshape(3, 4) % 3 == 0),
    ("mixed", (slice(None), np.array([3, 0, 3]), 1)),
    ("adv_separated", (np.array([0, 2]), slice(None), np.array([1, 0]))),
    ("ellipsis_adv", (Ellipsis, [4, 0])),
    ("empty_list", []),
]


@pytest.mark.parametrize("name,index", INDEX_CASES, ids=[c[0] for c in INDEX_CASES])
def test_getitem_values_and_grad(name, index):
    a = rnd(3, 4, 5)
    x = T(a)
    np.testing.assert_array_equal(to_np(x[index]), a[index])
    assert AG.gradcheck(lambda t: t[index], [T(a, rg=True)])
    assert AG.gradgradcheck(lambda t: t[index], [T(a, rg=True)])


def test_getitem_tensor_indices():
    a = rnd(3, 4)
    x = T(a)
    i = lucid.tensor([2, 0, 2])
    np.testing.assert_array_equal(to_np(x[i]), a[[2, 0, 2]])
    m = lucid.tensor(a > 0)
    np.testing.assert_array_equal(to_np(x[m]), a[a > 0])
    np.testing.assert_array_equal(to_np(x[lucid.tensor(1)]), a[1])
    np.testing.assert_array_equal(to_np(x[i, lucid.tensor([1, 1, 3])]), a[[2, 0, 2], [1, 1, 3]])


def test_repeated_advanced_indices_accumulate(torch):
    a = rnd(4, 3)
    x = T(a, rg=True)
    g = rnd(5, 3)
    x[[0, 1, 0, 0, 3]].backward(T(g))
    tx = torch.tensor(a, requires_grad=True)
    tx[[0, 1, 0, 0, 3]].backward(torch.tensor(g))
    np.testing.assert_allclose(to_np(x.grad), tx.grad.numpy())
    assert to_np(x.grad)[0, 0] == pytest.approx(g[0, 0] + g[2, 0] + g[3, 0])


def test_basic_index_is_view_sharing_memory_and_version():
    x = lucid.zeros(3, 4)
    v = x[1]
    w = x[:, ::2]
    s = x[1, 2]
    assert v.shape == (4,) and s.shape == ()
    v += 1
    assert to_np(x)[1].tolist() == [1, 1, 1, 1]
    assert x._version == v._version == w._version == s._version == 1
    x[0, 0] = 5
    assert to_np(w)[0, 0] == 5
    assert x._version == v._version == 2
    # advanced indexing copies
    c = x[[0, 1]]
    c += 100
    assert to_np(x).max() == 5


@pytest.mark.parametrize("fn", [lambda x: x.T, lambda x: x.transpose(0, 1),
                                lambda x: x.permute(1, 0), lambda x: x.unsqueeze(0),
                                lambda x: x[None].squeeze(0), lambda x: x.narrow(1, 1, 2),
                                lambda x: x.split(2, 1)[1], lambda x: x.chunk(2, 0)[0]])
def test_view_ops_share_memory(fn):
    x = lucid.zeros(2, 4)
    v = fn(x)
    assert np.shares_memory(v.numpy(), x.numpy())
    v.fill_(3.0)
    assert to_np(x).max() == 3.0
    assert x._version == v._version == 1


def test_copy_ops_do_not_share_memory():
    x = lucid.zeros(2, 3)
    for y in (x.flip(0), x.roll(1, 0), x.tile((1, 1)), x.repeat(1, 1), lucid.cat([x]),
              lucid.pad(x, (0, 0)), x[[0, 1]]):
        assert not np.shares_memory(y.numpy(), x.numpy())


# ------------------------------------------------------------------------- setitem
def test_setitem_values_and_version():
    a = rnd(3, 4)
    x = T(a)
    v0 = x._version
    x[1] = 7.0
    x[0, ::2] = T([1.0, 2.0])
    x[[2, 2], [0, 1]] = T([3.0, 4.0])
    x[lucid.tensor(to_np(x) > 5)] = 0.5
    want = a.copy()
    want[1] = 7.0
    want[0, ::2] = [1.0, 2.0]
    want[[2, 2], [0, 1]] = [3.0, 4.0]
    want[want > 5] = 0.5
    np.testing.assert_array_equal(to_np(x), want)
    assert x._version == v0 + 4


def test_setitem_broadcast_and_scalar():
    x = lucid.zeros(2, 3, dtype=lucid.float64)
    x[:, 1:] = T([[1.0, 2.0]])
    x[...] += 0  # noqa: no-op through getitem view + iadd
    x[0, 0] = np.float32(4)
    np.testing.assert_array_equal(to_np(x), [[4, 1, 2], [0, 1, 2]])


@pytest.mark.parametrize("index", [(slice(None), 1), ([0, 2],), (np.array([True, False, True]), 2),
                                   (Ellipsis, slice(1, 3))])
def test_setitem_gradients_vs_torch(torch, index):
    a, b = rnd(3, 4), rnd(3, 4)
    x = T(a, rg=True)
    base = x * 2.0
    sub_shape = to_np(base.detach())[index].shape
    vnp = rnd(*sub_shape)
    v = T(vnp, rg=True)
    base[index] = v
    (base * T(b)).sum().backward()
    tx = torch.tensor(a, requires_grad=True)
    tv = torch.tensor(vnp, requires_grad=True)
    tb = tx * 2.0
    tidx = tuple(torch.tensor(i) if isinstance(i, (np.ndarray, list)) else i for i in index)
    tb[tidx] = tv
    (tb * torch.tensor(b)).sum().backward()
    np.testing.assert_allclose(to_np(x.grad), tx.grad.numpy())
    np.testing.assert_allclose(to_np(v.grad), tv.grad.numpy())
    assert type(base.grad_fn).__name__ == "IndexPutBackward"


def test_setitem_broadcast_value_grad_sums():
    x = T(rnd(3, 4), rg=True)
    v = T(rnd(4), rg=True)
    y = x * 1.0
    y[1:] = v
    y.sum().backward()
    np.testing.assert_allclose(to_np(v.grad), np.full(4, 2.0))
    np.testing.assert_allclose(to_np(x.grad), np.r_[[np.ones(4)], np.zeros((2, 4))])


def test_setitem_gradcheck_and_gradgradcheck():
    def f(x, v):
        y = x * x
        y[1, 1:3] = v * v
        y[[0, 0], [2, 3]] = v
        return y
    xs = [T(rnd(3, 4), rg=True), T(rnd(2), rg=True)]
    assert AG.gradcheck(f, xs)
    assert AG.gradgradcheck(f, xs)


def test_setitem_leaf_requiring_grad_raises():
    x = T(rnd(3), rg=True)
    with pytest.raises(lucid.LucidError):
        x[0] = 1.0
    with lucid.no_grad():
        x[0] = 1.0
    assert to_np(x)[0] == 1.0


def test_setitem_invalidates_saved_values():
    x = T(rnd(3), rg=True)
    y = x * 1.0
    z = y.exp()                # saves its output (or input) -> y's memory
    w = y * y                  # saves y
    y[0] = 2.0
    with pytest.raises(RuntimeError):
        w.sum().backward()
    del z


def test_setitem_on_view_with_history_raises():
    x = T(rnd(3, 4), rg=True)
    y = x * 1.0
    v = y[0]
    with pytest.raises(lucid.LucidError, match="view"):
        v[1] = T(1.0, rg=True)
    with pytest.raises(lucid.LucidError, match="view"):
        y.T[0] = 1.0
    # no grad involved: plain write through the view
    z = lucid.zeros(2, 2)
    z[0][1] = 3.0
    assert to_np(z)[0, 1] == 3.0


def test_view_stale_after_base_write_raises_instead_of_wrong_grad():
    x = T(rnd(3, 4), rg=True)
    y = x * 1.0
    v = y[0]                   # view of row 0
    u = y[2]                   # row 2: untouched below
    early = v * 3.0            # used before the write: still fine
    y[0] = 5.0
    late = v * 1.0             # v's values are now 5 but its history says y[0]
    with pytest.raises(lucid.LucidError, match="modified"):
        late.sum().backward(retain_graph=True)
    (early.sum() + u.sum()).backward()
    want = np.zeros((3, 4))
    want[0] = 3.0
    want[2] = 1.0
    np.testing.assert_allclose(to_np(x.grad), want)


def test_setitem_errors():
    x = lucid.zeros(3, 4)
    with pytest.raises(ShapeErrorOrValue):
        x[0] = lucid.zeros(3)
    with pytest.raises(IndexError):
        x[3] = 1.0
    with pytest.raises(IndexError):
        x[[0, 5]] = 1.0
    with pytest.raises(lucid.LucidError):
        lucid.zeros(3).expand(2, 3)[0] = 1.0


ShapeErrorOrValue = lucid.ShapeError


# ------------------------------------------------------------------------- torch comparisons
def test_matmul_grads_vs_torch_batched(torch):
    a, b = rnd(2, 1, 3, 4), rnd(5, 4, 2)
    g = rnd(2, 5, 3, 2)
    x, y = T(a, rg=True), T(b, rg=True)
    (x @ y).backward(T(g))
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (tx @ ty).backward(torch.tensor(g))
    np.testing.assert_allclose(to_np(x.grad), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(to_np(y.grad), ty.grad.numpy(), rtol=1e-12)


def test_gather_scatter_index_select_vs_torch(torch):
    a = rnd(4, 5)
    idx = np.array([[0, 3, 3], [1, 1, 0]])
    x = T(a, rg=True)
    lucid.gather(x, 1, lucid.tensor(idx)).backward(T(np.ones((2, 3))))
    tx = torch.tensor(a, requires_grad=True)
    torch.gather(tx, 1, torch.tensor(idx)).backward(torch.ones(2, 3, dtype=torch.float64))
    np.testing.assert_allclose(to_np(x.grad), tx.grad.numpy())

    s = rnd(2, 3)             # torch's backward mishandles a src larger than index
    xs, ss = T(a, rg=True), T(s, rg=True)
    out = lucid.scatter_add(xs, 0, lucid.tensor(idx), ss)
    txs, tss = torch.tensor(a, requires_grad=True), torch.tensor(s, requires_grad=True)
    tout = torch.scatter_add(txs, 0, torch.tensor(idx), tss)
    np.testing.assert_allclose(to_np(out), tout.detach().numpy())
    g = rnd(4, 5)
    out.backward(T(g))
    tout.backward(torch.tensor(g))
    np.testing.assert_allclose(to_np(ss.grad), tss.grad.numpy())
    np.testing.assert_allclose(to_np(xs.grad), txs.grad.numpy())

    xi = T(a, rg=True)
    lucid.index_select(xi, 0, lucid.tensor([3, 3, 0])).sum().backward()
    txi = torch.tensor(a, requires_grad=True)
    torch.index_select(txi, 0, torch.tensor([3, 3, 0])).sum().backward()
    np.testing.assert_allclose(to_np(xi.grad), txi.grad.numpy())


def test_split_chunk_vs_torch(torch):
    a = np.arange(20.0).reshape(4, 5)
    x, tx = T(a), torch.tensor(a)
    for got, want in [(lucid.split(x, 2, 1), torch.split(tx, 2, 1)),
                      (x.split([1, 3], 0), tx.split([1, 3], 0)),
                      (lucid.chunk(x, 3, 1), torch.chunk(tx, 3, 1)),
                      (x.chunk(4, 0), tx.chunk(4, 0)),
                      (lucid.chunk(x, 3, 0), torch.chunk(tx, 3, 0))]:
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(to_np(g), w.numpy())


def test_split_grads_and_gradcheck():
    x = T(rnd(5, 3), rg=True)
    p = lucid.split(x, 2)
    assert [t.shape for t in p] == [(2, 3), (2, 3), (1, 3)]
    (p[0].sum() * 2 + p[2].sum()).backward()
    want = np.zeros((5, 3))
    want[:2] = 2
    want[4] = 1
    np.testing.assert_allclose(to_np(x.grad), want)
    assert AG.gradcheck(lambda t: lucid.chunk(t, 2, 1), [T(rnd(2, 4), rg=True)])
    assert AG.gradgradcheck(lambda t: t.split([1, 2], 0), [T(rnd(3, 2), rg=True)])


def test_pad_vs_torch(torch):
    F = torch.nn.functional
    a = rnd(2, 3, 4)
    for p, mode in [((1, 2), "constant"), ((1, 1, 2, 0), "constant"), ((0, 1, 1, 0, 1, 1), "constant"),
                    ((-1, 2), "constant"), ((2, 1), "reflect"), ((1, 2, 2, 0), "replicate"),
                    ((1, 3), "circular")]:
        got = lucid.pad(T(a), p, mode=mode)
        want = F.pad(torch.tensor(a), p, mode=mode)
        np.testing.assert_allclose(to_np(got), want.numpy(), err_msg=f"{p} {mode}")


def test_cat_promotes_and_skips_legacy_empty():
    a = lucid.tensor([[1, 2]])
    b = lucid.tensor([[0.5, 1.5]])
    out = lucid.cat([a, b])
    assert out.dtype is lucid.float32
    np.testing.assert_array_equal(to_np(out), [[1, 2], [0.5, 1.5]])
    x = T(rnd(2, 3), rg=True)
    e = T(np.zeros(0), rg=True)
    y = lucid.cat([x, e, x], 0)
    assert y.shape == (4, 3)
    y.sum().backward()
    np.testing.assert_allclose(to_np(x.grad), np.full((2, 3), 2.0))
    assert e.grad.shape == (0,)


def test_mixed_dtype_grads_cast_back():
    a = T(rnd(2, 3), rg=True, dtype=lucid.float32)
    b = T(rnd(3, 2), rg=True, dtype=lucid.float64)
    y = a @ b
    assert y.dtype is lucid.float64
    y.sum().backward()
    assert a.grad.dtype is lucid.float32 and b.grad.dtype is lucid.float64
    c = lucid.cat([a, b.T])
    c.sum().backward()
    assert a.grad.dtype is lucid.float32


# ------------------------------------------------------------------------- nodes and schemas
NODE_CASES = [
    ("SqueezeBackward", "squeeze", lambda x: x.unsqueeze(0).squeeze(0)),
    ("UnsqueezeBackward", "unsqueeze", lambda x: x.unsqueeze(1)),
    ("TransposeBackward", "transpose", lambda x: x.transpose(0, 1)),
    ("PermuteBackward", "permute", lambda x: x.permute(1, 0)),
    ("PermuteBackward", "permute", lambda x: x.T),
    ("CatBackward", "cat", lambda x: lucid.cat([x, x])),
    ("StackBackward", "stack", lambda x: lucid.stack([x, x])),
    ("FlipBackward", "flip", lambda x: x.flip(0)),
    ("RollBackward", "roll", lambda x: x.roll(1, 1)),
    ("TileBackward", "tile", lambda x: x.tile((2,))),
    ("RepeatBackward", "repeat", lambda x: x.repeat(1, 2)),
    ("PadBackward", "pad", lambda x: lucid.pad(x, (1, 1))),
    ("GatherBackward", "gather", lambda x: x.gather(0, lucid.tensor([[0, 1]]))),
    ("ScatterAddBackward", "scatter_add",
     lambda x: lucid.scatter_add(x, 0, lucid.tensor([[0, 1]]), x[:1])),
    ("IndexSelectBackward", "index_select", lambda x: x.index_select(0, lucid.tensor([1]))),
    ("IndexBackward", "index", lambda x: x[0]),
    ("IndexBackward", "index", lambda x: x[[0, 0]]),
    ("IndexPutBackward", "index_put", lambda x: _put(x)),
    ("MatmulBackward", "matmul", lambda x: x @ x),
    ("DotBackward", "dot", lambda x: lucid.dot(x[0], x[1])),
    ("OuterBackward", "outer", lambda x: lucid.outer(x[0], x[1])),
]


def _put(x):
    y = x * 1.0
    y[0] = 0.0
    return y


@pytest.mark.parametrize("cls,op,fn", NODE_CASES, ids=[c[0] + "-" + c[1] for c in NODE_CASES])
def test_node_names_and_schema(cls, op, fn):
    x = T(rnd(2, 2), rg=True)
    node = fn(x).grad_fn
    assert type(node).__name__ == cls
    assert type(node).schema_v1 is lucid.ops.schema(op)
    assert callable(node.grad_formula_impl)
    for e in node.next_functions:
        assert isinstance(e, tuple) and len(e) == 2


def test_saved_tensors_minimal():
    a, b = T(rnd(2, 3), rg=True), T(rnd(3, 2))
    assert len((a @ b).grad_fn.saved_tensors) == 1          # only b: a's grad needs b
    assert (a @ b).grad_fn.saved_tensors[0] is b
    assert len(a.T.grad_fn.saved_tensors) == 0
    assert len(a[0].grad_fn.saved_tensors) == 0
    i = lucid.tensor([[0, 1, 1]])
    assert a.gather(0, i).grad_fn.saved_tensors[0] is i


def test_modified_index_breaks_gather_backward():
    x = T(rnd(3, 3), rg=True)
    i = lucid.tensor([[0, 1, 2]])
    y = x.gather(0, i)
    i[0, 0] = 2
    with pytest.raises(RuntimeError):
        y.sum().backward()


def test_no_graph_under_no_grad():
    x = T(rnd(2, 3), rg=True)
    with lucid.no_grad():
        for y in (x[0], x.T, lucid.cat([x, x]), x @ x.T, x.flip(0), lucid.pad(x, (1, 1))):
            assert y.grad_fn is None and not y.requires_grad


# ------------------------------------------------------------------------- errors
def test_errors():
    x = lucid.zeros(2, 3)
    with pytest.raises(IndexError):
        x.transpose(0, 2)
    with pytest.raises(IndexError):
        x.unsqueeze(3)
    with pytest.raises(IndexError):
        x.squeeze(2)
    with pytest.raises(lucid.ShapeError):
        x.permute(0)
    with pytest.raises(lucid.ShapeError):
        x.permute(0, 0)
    with pytest.raises(lucid.ShapeError):
        lucid.flatten(x, 1, 0)
    with pytest.raises(lucid.ShapeError):
        lucid.cat([x, lucid.zeros(3, 2)])
    with pytest.raises(lucid.ShapeError):
        lucid.cat([x, lucid.zeros(2)])
    with pytest.raises(lucid.ShapeError):
        lucid.cat([])
    with pytest.raises(TypeError):
        lucid.cat(x)
    with pytest.raises(lucid.ShapeError):
        lucid.stack([x, lucid.zeros(3, 2)])
    with pytest.raises(lucid.ShapeError):
        x.split([1, 1], 1)
    with pytest.raises(lucid.ShapeError):
        x.repeat(2)
    with pytest.raises(lucid.ShapeError):
        lucid.pad(x, (1,))
    with pytest.raises(lucid.ShapeError):
        lucid.pad(x, (1, 1, 1, 1, 1, 1))
    with pytest.raises(lucid.ShapeError):
        x.roll((1, 2), 0)
    with pytest.raises(IndexError):
        x[2]
    with pytest.raises(IndexError):
        x[0, 0, 0]
    with pytest.raises(IndexError):
        x[[0, 2]]
    with pytest.raises(IndexError):
        x[np.array([True, False, True])]
    with pytest.raises(IndexError):
        x[lucid.tensor([0.5])]
    with pytest.raises(IndexError):
        x.gather(1, lucid.tensor([[0, 3]]))
    with pytest.raises(IndexError):
        x.gather(1, lucid.tensor([[0, -1]]))
    with pytest.raises(lucid.ShapeError):
        x.gather(1, lucid.tensor([0, 1]))
    with pytest.raises(lucid.ShapeError):
        x.gather(1, lucid.tensor([[0], [1], [1]]))
    with pytest.raises(IndexError):
        x.index_select(0, lucid.tensor([2]))
    with pytest.raises(IndexError):
        lucid.scatter_add(x, 0, lucid.tensor([[2]]), lucid.ones(1, 1))
    with pytest.raises(lucid.UnsupportedDTypeError):
        x.gather(0, lucid.tensor([[0.0]]))
    with pytest.raises(lucid.ShapeError):
        lucid.matmul(x, x)
    with pytest.raises(lucid.ShapeError):
        lucid.matmul(lucid.zeros(2, 3, 4), lucid.zeros(3, 5, 2))
    with pytest.raises(lucid.ShapeError):
        lucid.matmul(lucid.tensor(1.0), x)
    with pytest.raises(lucid.ShapeError):
        lucid.dot(lucid.zeros(3), lucid.zeros(4))
    with pytest.raises(lucid.ShapeError):
        lucid.dot(x, x)
    with pytest.raises(lucid.ShapeError):
        lucid.outer(x, lucid.zeros(3))
    with pytest.raises(lucid.ShapeError):
        x.narrow(1, 2, 2)


def test_shape_error_is_value_and_runtime_error():
    with pytest.raises(ValueError):
        lucid.matmul(lucid.zeros(2, 3), lucid.zeros(2, 3))
    with pytest.raises(RuntimeError):
        lucid.matmul(lucid.zeros(2, 3), lucid.zeros(2, 3))


def test_iteration_and_zero_dim_cases():
    x = T(np.arange(6.0).reshape(2, 3), rg=True)
    rows = list(x)
    assert len(rows) == 2 and rows[1].shape == (3,)
    (rows[0].sum() + 2 * rows[1].sum()).backward()
    np.testing.assert_allclose(to_np(x.grad), [[1, 1, 1], [2, 2, 2]])
    s = lucid.tensor(3.0)
    assert s[None].shape == (1,) and s[...].shape == ()
    assert lucid.flatten(s).shape == (1,)
    assert s.squeeze().shape == () and s.unsqueeze(0).shape == (1,)
    assert s.T.shape == ()


def test_view_registry_does_not_leak():
    from lucid._core import _C
    base = _C._autograd_view_count()
    x = T(rnd(3, 4), rg=True)
    y = x * 1.0
    vs = [y[i] for i in range(3)] + [y.T, y.unsqueeze(0), y.transpose(0, 1)]
    assert _C._autograd_view_count() == base + 6
    del vs
    assert _C._autograd_view_count() == base
