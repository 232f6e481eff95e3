"""NumPy habits on lucid tensors, zero-copy exchange, DLPack, pickle and deepcopy."""
import copy
import io
import pickle

import numpy as np
import pytest

import lucid


# -- lucid.tensor keeps NumPy's dtypes ----------------------------------------------------------

@pytest.mark.parametrize("data,expected", [
    ([np.float64(0.1)], "float64"),
    ([np.float64(1.0), 2.0], "float64"),
    ([[np.float64(1.0)], [2.0]], "float64"),
    ([np.float32(1.0), 2.0], "float32"),
    ([np.float16(1.0), 2.0], "float32"),
    ([np.float16(1.0)], "float16"),
    ([np.int32(1)], "int32"),
    ([np.int32(1), 2], "int64"),
    ([np.int64(1), 2.5], "float32"),
    ([True, np.float64(1.0)], "float64"),
    ([0.1, 0.2], "float32"),            # Python floats alone: the default dtype, as torch
    (0.1, "float32"),
    (np.float64(0.1), "float64"),
    (np.arange(3, dtype=np.float64), "float64"),
    (np.arange(3, dtype=np.float16), "float16"),
    (np.arange(3, dtype=np.int32), "int32"),
    (np.arange(3, dtype=np.uint8), "uint8"),
    (np.arange(3, dtype=np.int8), "int8"),
    (np.arange(3, dtype=np.uint16), "int64"),         # (torch: uint16, which lucid lacks)
    ([np.ones(2), np.ones(2)], "float64"),
])
def test_tensor_dtype_inference_matches_torch(data, expected, torch):
    assert lucid.tensor(data).dtype == getattr(lucid, expected)
    tname = str(torch.tensor(data).dtype).replace("torch.", "")
    if tname not in ("uint16",):         # lucid has no uint16: it widens to int64
        assert tname == expected.rstrip("_")


def test_tensor_of_an_array_like_keeps_its_dtype():
    class Column:                         # what pandas.Series exposes to NumPy
        def __init__(self, a):
            self._a = a

        def __array__(self, dtype=None, copy=None):
            return self._a if dtype is None else self._a.astype(dtype)

    assert lucid.tensor(Column(np.array([0.1, 0.2]))).dtype == lucid.float64


def test_tensor_of_a_pandas_column_keeps_its_dtype():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"x": [0.1, 0.2, 0.3], "n": [1, 2, 3]})
    t = lucid.tensor(df.x)
    assert t.dtype == lucid.float64
    np.testing.assert_array_equal(t.numpy(), df.x.to_numpy())
    assert lucid.tensor(df.n).dtype == lucid.int64


# -- NumPy keyword names ----------------------------------------------------------------------

X = np.random.default_rng(0).uniform(-1, 1, size=(3, 4))


@pytest.mark.parametrize("call,ref", [
    (lambda t: lucid.sum(t, axis=1, keepdims=True), lambda a: np.sum(a, axis=1, keepdims=True)),
    (lambda t: t.sum(axis=0), lambda a: a.sum(axis=0)),
    (lambda t: t.mean(axis=(0, 1), keepdims=True), lambda a: a.mean(axis=(0, 1), keepdims=True)),
    (lambda t: lucid.prod(t, axis=0), lambda a: np.prod(a, axis=0)),
    (lambda t: lucid.amax(t, axis=1), lambda a: np.max(a, axis=1)),
    (lambda t: lucid.amin(t, axis=0, keepdims=True), lambda a: np.min(a, axis=0, keepdims=True)),
    (lambda t: t.max(axis=1).values, lambda a: a.max(axis=1)),
    (lambda t: lucid.min(t, axis=1, keepdims=True).values, lambda a: a.min(axis=1, keepdims=True)),
    (lambda t: lucid.argmax(t, axis=1), lambda a: np.argmax(a, axis=1)),
    (lambda t: t.argmin(axis=0), lambda a: a.argmin(axis=0)),
    (lambda t: lucid.var(t, axis=1, ddof=0), lambda a: np.var(a, axis=1)),
    (lambda t: t.std(axis=0, ddof=1, keepdims=True),
     lambda a: a.std(axis=0, ddof=1, keepdims=True)),
    (lambda t: lucid.logsumexp(t, axis=1), lambda a: np.log(np.exp(a).sum(axis=1))),
    (lambda t: lucid.norm(t, axis=1), lambda a: np.linalg.norm(a, axis=1)),
    (lambda t: lucid.cumsum(t, axis=1), lambda a: np.cumsum(a, axis=1)),
    (lambda t: t.cumprod(axis=0), lambda a: np.cumprod(a, axis=0)),
    (lambda t: lucid.softmax(t, axis=1), lambda a: np.exp(a) / np.exp(a).sum(1, keepdims=True)),
    (lambda t: lucid.all(t > -2, axis=0), lambda a: np.all(a > -2, axis=0)),
    (lambda t: lucid.any(t > 0.9, axis=1, keepdims=True),
     lambda a: np.any(a > 0.9, axis=1, keepdims=True)),
    (lambda t: lucid.cat([t, t], axis=1), lambda a: np.concatenate([a, a], axis=1)),
    (lambda t: lucid.concat([t, t], axis=0), lambda a: np.concatenate([a, a], axis=0)),
    (lambda t: lucid.stack([t, t], axis=2), lambda a: np.stack([a, a], axis=2)),
    (lambda t: lucid.squeeze(t[None], axis=0), lambda a: np.squeeze(a[None], axis=0)),
    (lambda t: t.unsqueeze(axis=1), lambda a: np.expand_dims(a, 1)),
    (lambda t: lucid.sort(t, axis=0).values, lambda a: np.sort(a, axis=0)),
    (lambda t: t.argsort(axis=0), lambda a: np.argsort(a, axis=0)),
    (lambda t: lucid.median(t, axis=1, keepdims=True).values,
     lambda a: np.sort(a, axis=1)[:, 1:2]),                   # the lower median, as torch
    (lambda t: lucid.quantile(t, 0.3, axis=1, keepdims=True),
     lambda a: np.quantile(a, 0.3, axis=1, keepdims=True)),
    (lambda t: lucid.topk(t, 2, axis=0).values, lambda a: -np.sort(-a, axis=0)[:2]),
    (lambda t: lucid.kthvalue(t, 2, axis=1, keepdims=True).values,
     lambda a: np.sort(a, axis=1)[:, 1:2]),
    (lambda t: lucid.cummax(t, axis=1).values, lambda a: np.maximum.accumulate(a, axis=1)),
    (lambda t: t.cummin(axis=0).values, lambda a: np.minimum.accumulate(a, axis=0)),
    (lambda t: lucid.logcumsumexp(t, axis=1), lambda a: np.logaddexp.accumulate(a, axis=1)),
    (lambda t: lucid.unique(t > 0, axis=0), lambda a: np.unique(a > 0, axis=0)),
    (lambda t: lucid.repeat_interleave(t, 2, axis=1), lambda a: np.repeat(a, 2, axis=1)),
    (lambda t: lucid.take_along_dim(t, lucid.tensor([[0], [2], [1]]), axis=1),
     lambda a: np.take_along_axis(a, np.array([[0], [2], [1]]), axis=1)),
    (lambda t: lucid.flip(t, axis=1), lambda a: np.flip(a, axis=1)),
    (lambda t: t.roll(1, axis=0), lambda a: np.roll(a, 1, axis=0)),
    (lambda t: lucid.split(t, 2, axis=1)[1], lambda a: np.split(a, 2, axis=1)[1]),
    (lambda t: t.chunk(2, axis=1)[0], lambda a: np.array_split(a, 2, axis=1)[0]),
])
def test_numpy_keyword_names(call, ref):
    np.testing.assert_allclose(np.asarray(call(lucid.tensor(X, dtype=lucid.float64))), ref(X),
                               rtol=1e-12)


def test_both_keyword_spellings_is_an_error():
    t = lucid.tensor(X)
    with pytest.raises(TypeError, match="both dim= and axis="):
        lucid.sum(t, dim=0, axis=1)
    with pytest.raises(TypeError, match="both keepdim= and keepdims="):
        t.mean(keepdim=True, keepdims=True)
    with pytest.raises(TypeError, match="both correction= and ddof="):
        lucid.var(t, correction=1, ddof=0)
    with pytest.raises(TypeError, match="both dim= and axis="):
        lucid.cat([t, t], 1, axis=0)
    with pytest.raises(TypeError, match="both dim= and axis="):
        lucid.sort(t, dim=0, axis=1)
    with pytest.raises(TypeError, match="both dims= and axis="):
        lucid.flip(t, (0,), axis=1)
    with pytest.raises(TypeError, match="missing required argument 'dim' \\(or axis\\)"):
        lucid.cummax(t)


def test_astype_and_numpy_dtypes():
    t = lucid.tensor([1.5, 2.5], requires_grad=True)
    d = t.astype(np.float64)
    assert d.dtype == lucid.float64 and d.requires_grad            # recorded like .to()
    assert t.astype("int32").dtype == lucid.int32
    for spelling in ("f8", "<f8", "float64", float, np.dtype("f8")):       # never a device
        assert t.detach().astype(spelling).dtype == lucid.float64, spelling
    with pytest.raises(TypeError, match="complex"):
        t.astype(np.complex64)
    assert t.detach().astype(lucid.float16).dtype == lucid.float16
    assert np.dtype(t.dtype) == np.float32
    assert np.dtype(lucid.int64) == np.int64
    assert np.zeros(2, dtype=lucid.float64).dtype == np.float64     # NumPy accepts lucid dtypes


def test_numpy_constants():
    assert lucid.pi == np.pi and lucid.e == np.e and lucid.inf == np.inf
    assert np.isnan(lucid.nan) and lucid.newaxis is None
    assert lucid.ones(3)[lucid.newaxis].shape == (1, 3)


def test_format():
    assert format(lucid.tensor(3.14159), ".3f") == "3.142"
    assert f"{lucid.tensor([2.5]):.2e}" == "2.50e+00"
    t = lucid.tensor(1.5, requires_grad=True)
    assert f"{t * 2:.1f}" == "3.0"
    assert f"{lucid.tensor([1, 2])}" == str(lucid.tensor([1, 2]))
    with pytest.raises(TypeError, match="2 elements"):
        format(lucid.tensor([1.0, 2.0]), ".3f")


# -- zero-copy exchange: write through one side, read the other ----------------------------------

def test_from_numpy_shares_memory():
    a = np.arange(4, dtype=np.float32)
    t = lucid.from_numpy(a)
    a[1] = 10
    assert t[1].item() == 10
    t.add_(1)
    assert a.tolist() == [1.0, 11.0, 3.0, 4.0]


def test_numpy_and_asarray_share_memory():
    t = lucid.zeros(3)
    t.numpy()[0] = 5
    np.asarray(t)[1] = 6
    assert t.tolist() == [5.0, 6.0, 0.0]
    t.fill_(2.0)
    assert np.asarray(t).tolist() == [2.0, 2.0, 2.0]


def test_memoryview_shares_memory():
    t = lucid.tensor([1.0, 2.0, 3.0])
    m = memoryview(t)
    assert m.format == "f" and m.shape == (3,) and not m.readonly
    m[0] = 9.0
    assert t[0].item() == 9.0
    t.mul_(2)
    assert m[0] == 18.0
    m.release()
    m2 = memoryview(lucid.tensor([[1, 2], [3, 4]]).T)          # non-contiguous: strides
    assert m2.shape == (2, 2) and m2.tolist() == [[1, 3], [2, 4]]
    with pytest.raises(BufferError, match="requires grad"):
        memoryview(lucid.tensor([1.0], requires_grad=True))


def test_array_interface_shares_memory():
    t = lucid.tensor([1.0, 2.0])
    iface = t.__array_interface__
    assert iface["shape"] == (2,) and iface["typestr"] == "<f4"
    view = np.array(t, copy=False)
    view[1] = 7.0
    assert t[1].item() == 7.0


def test_requires_grad_refuses_silent_conversion():
    t = lucid.tensor([1.0], requires_grad=True)
    with pytest.raises(lucid.LucidError, match="detach"):
        np.asarray(t)
    np.testing.assert_array_equal(np.asarray(t.detach()), [1.0])


def test_write_through_numpy_is_invisible_to_the_version_counter():
    """Documented limitation: NumPy writes bypass lucid's version counter."""
    a = np.ones(2, np.float32)
    t = lucid.from_numpy(a)
    v = t._version
    a[0] = 3.0
    assert t._version == v and t[0].item() == 3.0


# -- the dtype mapping with NumPy is total ---------------------------------------------------

@pytest.mark.parametrize("a", [
    np.array([1 + 2j]), np.array(["a"]), np.array([object()], dtype=object),
    np.array(["2024-01-01"], dtype="datetime64[D]"), np.array([1], dtype="timedelta64[s]"),
])
def test_unsupported_numpy_dtypes_raise_typeerror(a):
    with pytest.raises(TypeError):
        lucid.from_numpy(a)
    with pytest.raises(TypeError):
        lucid.tensor(a)


def test_float16_round_trips():
    a = np.array([0.1, 65504.0, -0.0], dtype=np.float16)
    t = lucid.from_numpy(a)
    assert t.dtype == lucid.float16
    assert t.numpy() is not a and np.shares_memory(t.numpy(), a)
    assert np.asarray(t).dtype == np.float16
    assert lucid.tensor(a).numpy().tobytes() == a.tobytes()


def test_non_native_byte_order():
    a = np.arange(3, dtype=">f8")
    t = lucid.tensor(a)
    assert t.dtype == lucid.float64 and t.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(TypeError, match="byte order"):
        lucid.from_numpy(a)


def test_non_contiguous_and_negative_strides():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    for view in (a[:, ::2], a[::-1], a.T):
        t = lucid.from_numpy(view)
        np.testing.assert_array_equal(t.numpy(), view)
        np.testing.assert_allclose(np.exp(t).numpy(), np.exp(view), rtol=1e-15)
    t = lucid.from_numpy(a[::-1])
    a[2, 0] = -1.0                      # shared: visible at row 0 of the reversed view
    assert t[0, 0].item() == -1.0


def test_read_only_array():
    a = np.arange(3, dtype=np.float32)
    a.flags.writeable = False
    t = lucid.from_numpy(a)
    np.testing.assert_array_equal((t * 2).numpy(), a * 2)
    with pytest.raises(lucid.LucidError, match="read-only"):
        t.add_(1)
    with pytest.raises(lucid.LucidError, match="read-only"):
        t.fill_(0)
    assert a.tolist() == [0.0, 1.0, 2.0]


# -- DLPack ---------------------------------------------------------------------------------------

def test_dlpack_with_numpy_both_ways():
    t = lucid.tensor([1.0, 2.0, 3.0])
    assert t.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(t)
    a[0] = 42.0
    assert t[0].item() == 42.0
    b = np.arange(3, dtype=np.float64)
    u = lucid.from_dlpack(b)
    assert u.dtype == lucid.float64
    u.mul_(2)
    assert b.tolist() == [0.0, 2.0, 4.0]
    c = lucid.from_dlpack(lucid.tensor([5, 6]))      # lucid -> lucid
    assert c.tolist() == [5, 6]


def test_dlpack_capsule_and_errors():
    a = np.arange(3, dtype=np.float32)
    t = lucid.from_dlpack(a.__dlpack__())
    a[2] = 9
    assert t[2].item() == 9
    with pytest.raises(lucid.LucidError, match="requires grad"):
        lucid.tensor([1.0], requires_grad=True).__dlpack__()
    with pytest.raises(TypeError, match="__dlpack__"):
        lucid.from_dlpack([1, 2])


def test_dlpack_with_torch(torch):
    t = lucid.tensor([1.0, 2.0, 3.0])
    tt = torch.from_dlpack(t)
    tt[1] = -5.0
    assert t[1].item() == -5.0
    src = torch.arange(4, dtype=torch.float64)
    u = lucid.from_dlpack(src)
    assert u.dtype == lucid.float64
    u.add_(1)
    assert src.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert lucid.from_dlpack(torch.utils.dlpack.to_dlpack(src)).tolist() == [1.0, 2.0, 3.0, 4.0]


def test_dlpack_bfloat16_with_torch(torch):
    t = lucid.tensor([1.5, -2.0, 3.0], dtype=lucid.bfloat16)
    tt = torch.from_dlpack(t)
    assert tt.dtype == torch.bfloat16 and tt.tolist() == [1.5, -2.0, 3.0]
    tt[0] = 8.0                                       # shared memory, both ways
    assert t[0].item() == 8.0
    src = torch.tensor([0.25, -4.0], dtype=torch.bfloat16)
    u = lucid.from_dlpack(src)
    assert u.dtype == lucid.bfloat16 and u.tolist() == [0.25, -4.0]
    u.mul_(2)
    assert src.tolist() == [0.5, -8.0]
    np.testing.assert_array_equal(np.from_dlpack(lucid.tensor([2.0], dtype=lucid.float16)),
                                  np.array([2.0], np.float16))


def test_dlpack_with_jax():
    jnp = pytest.importorskip("jax.numpy")
    import jax
    x = jnp.arange(3.0)
    t = lucid.from_dlpack(x)
    np.testing.assert_array_equal(t.numpy(), np.arange(3.0, dtype=np.float32))
    back = jax.dlpack.from_dlpack(lucid.tensor([1.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(back), [1.0, 2.0])


# -- pickle, deepcopy, np.save --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "int64", "bool_"])
def test_pickle_round_trip(dtype):
    t = lucid.tensor([[1, 0], [3, 4]], dtype=getattr(lucid, dtype))
    u = pickle.loads(pickle.dumps(t))
    assert u.dtype == t.dtype and u.tolist() == t.tolist() and not u.requires_grad
    assert not np.shares_memory(u.numpy(), t.numpy())


def test_pickle_and_deepcopy_keep_requires_grad_not_the_graph():
    t = lucid.tensor([1.0, 2.0], requires_grad=True)
    for u in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
        assert u.requires_grad and u.is_leaf and u.tolist() == [1.0, 2.0]
        assert not np.shares_memory(u.detach().numpy(), t.detach().numpy())
    y = t * 2
    with pytest.raises(lucid.LucidError):
        pickle.dumps(y)
    with pytest.raises(lucid.LucidError):
        copy.deepcopy(y)


def test_deepcopy_shares_within_one_structure():
    t = lucid.tensor([1.0])
    a, b = copy.deepcopy([t, t])
    assert a is b and a is not t


def test_np_save_load_round_trip():
    t = lucid.tensor([[1.5, 2.5]], dtype=lucid.float64)
    buf = io.BytesIO()
    np.save(buf, t.numpy())
    buf.seek(0)
    u = lucid.from_numpy(np.load(buf))
    assert u.dtype == lucid.float64 and u.tolist() == t.tolist()
