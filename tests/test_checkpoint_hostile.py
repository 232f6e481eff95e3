"""lucid.load against hostile, corrupted and foreign files, and safetensors interop.

References: safetensors' own readers and writers (numpy and torch), torch.save files.
Every file lucid refuses must raise CheckpointError with a reason, never RecursionError,
KeyError, struct.error, json errors, UnsupportedDTypeError or MemoryError."""
import io
import json
import struct
import time
import tracemalloc

import numpy as np
import pytest

import lucid
from lucid.serialization import MAX_DEPTH, CheckpointError


def _bytes(obj):
    buf = io.BytesIO()
    lucid.save(obj, buf)
    return buf.getvalue()


def _split(data):
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def _join(header, body, raw=None):
    h = raw if raw is not None else json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + body


def _load(data):
    return lucid.load(io.BytesIO(data))


def _refuse(data, *words):
    with pytest.raises(CheckpointError) as info:
        _load(data)
    msg = str(info.value)
    for w in words:
        assert w in msg, msg
    return msg


def _with_tree(tree, arrays):
    """A lucid checkpoint with a hand-written structure (or its JSON text) over the given
    ndarrays."""
    header, off, body = {}, 0, b""
    for name, (code, a) in arrays.items():
        b = a.tobytes()
        header[name] = {"dtype": code, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        body += b
    text = tree if isinstance(tree, str) else json.dumps(tree)
    header["__metadata__"] = {"format": "lucid.checkpoint.v1", "tree": text}
    return _join(header, body)


# -- 1. each stored tensor once; what a header may ask for is bounded ---------------------

def test_many_references_to_one_tensor_load_it_once():
    a = np.arange(1 << 18, dtype=np.float32)                      # 1 MiB
    ref = {"__tensor__": "t0", "requires_grad": False}
    data = _with_tree([ref] * 4000, {"t0": ("F32", a)})
    assert len(data) < 1_300_000
    tracemalloc.start()
    try:
        out = _load(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2 ** 20, peak          # was 4000 copies: 4 GB
    assert len(out) == 4000 and all(t is out[0] for t in out)
    np.testing.assert_array_equal(out[0].numpy(), a)


def test_a_tensor_saved_twice_is_stored_once_and_stays_tied():
    w = lucid.randn(64, 64)
    data = _bytes({"enc": {"w": w}, "dec": {"w": w}, "other": lucid.randn(64, 64)})
    header, body = _split(data)
    assert len(body) == 2 * 64 * 64 * 4
    back = _load(data)
    assert back["enc"]["w"] is back["dec"]["w"]
    assert back["other"] is not back["enc"]["w"]
    np.testing.assert_array_equal(back["dec"]["w"].numpy(), w.numpy())


def test_conflicting_references_are_refused():
    a = np.ones(3, np.float32)
    tree = [{"__tensor__": "t0", "requires_grad": False},
            {"__tensor__": "t0", "requires_grad": True}]
    _refuse(_with_tree(tree, {"t0": ("F32", a)}), "requires_grad")


def _one(code="F32", shape=(4,), offsets=(0, 16), body=b"\0" * 16, name="w"):
    return _join({name: {"dtype": code, "shape": list(shape), "data_offsets": list(offsets)}},
                 body)


HEADER_CASES = {
    "header_len_past_end": (struct.pack("<Q", 10 ** 6) + b"{}", ["claims"]),
    "header_len_huge": (struct.pack("<Q", 2 ** 63) + b"{}" * 10, ["claims"]),
    "too_short": (b"\x01\x00", ["too short"]),
    "offsets_past_end": (_one(offsets=(0, 10 ** 12)), ["past the end"]),
    "extent_vs_shape": (_one(shape=(5,)), ["needs 20 bytes"]),
    "shape_product_overflows": (_one(shape=(2 ** 62, 2 ** 62, 0), offsets=(0, 0)),
                                ["too large"]),
    "shape_product_huge": (_one(shape=(2 ** 40, 2 ** 40), offsets=(0, 16)), ["too large"]),
    "shape_product_large": (_one(shape=(2 ** 30, 2 ** 30), offsets=(0, 16)), ["needs"]),
    "negative_dim": (_one(shape=(-4,)), ["bad shape"]),
    "float_dim": (_one(shape=(4.0,)), ["bad shape"]),
    "bool_offsets": (_one(offsets=(False, 16)), ["data_offsets"]),
    "reversed_offsets": (_one(offsets=(16, 0)), ["data_offsets"]),
    "too_many_dims": (_one(shape=(1,) * 40), ["bad shape"]),
    "unknown_dtype": (_one(code="F128"), ["unknown dtype"]),
    "extra_key": (_join({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4],
                               "evil": 1}}, b"\0" * 4), ["exactly"]),
    "entry_not_object": (_join({"w": [1, 2]}, b""), ["exactly"]),
    "metadata_not_object": (_join({"__metadata__": [1]}, b""), ["__metadata__"]),
    "header_not_object": (_join(None, b"", raw=b"[1, 2]   "), ["not a JSON object"]),
    "header_not_utf8": (_join(None, b"", raw=b"{\xff\xfe}"), ["not valid JSON"]),
    "header_not_json": (_join(None, b"", raw=b"{nope"), ["not valid JSON"]),
    "header_deep_json": (_join(None, b"", raw=b"{\"a\":" + b"[" * 100_000 + b"]" * 100_000
                               + b"}"), ["nests too deeply"]),
    "duplicate_names": (_join(None, b"\0" * 8, raw=(
        b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
        b'"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}')), ["twice"]),
}


def _overlapping():
    e = {"dtype": "F32", "shape": [262144], "data_offsets": [0, 1 << 20]}
    return _join({f"t{i}": dict(e) for i in range(4000)}, b"\0" * (1 << 20))


HEADER_CASES["overlapping_extents"] = (_overlapping(), ["overlap"])
HEADER_CASES["partly_overlapping"] = (_join({
    "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
    "b": {"dtype": "F32", "shape": [4], "data_offsets": [12, 28]}}, b"\0" * 28), ["overlap"])


@pytest.mark.parametrize("name", list(HEADER_CASES))
def test_header_bounds(name):
    data, words = HEADER_CASES[name]
    _refuse(data, *words)


def test_empty_tensors_may_share_an_offset():
    e = {"dtype": "F32", "shape": [0, 3], "data_offsets": [4, 4]}
    out = _load(_join({"a": e, "b": dict(e), "c": {"dtype": "I32", "shape": [1],
                                                  "data_offsets": [0, 4]}},
                      b"\x07\0\0\0"))
    assert out["a"].shape == (0, 3) and out["c"].tolist() == [7]


def test_bool_bytes_other_than_0_and_1_read_as_true():
    out = _load(_one(code="BOOL", shape=(4,), offsets=(0, 4), body=bytes([0, 1, 2, 255])))
    assert out["w"].tolist() == [False, True, True, True]


# -- 2. malformed structures: CheckpointError with the reason ------------------------------

def _nested_list(depth):
    return "[" * depth + '{"__tensor__": "t0"}' + "]" * depth


def test_deep_structures_are_bounded():
    a = np.ones(2, np.float32)
    _refuse(_with_tree(_nested_list(600), {"t0": ("F32", a)}), "nests deeper")
    _refuse(_with_tree(_nested_list(100_000), {"t0": ("F32", a)}), "nests deeper")
    deep_dicts = '{"__dict__": [["k", ' * 150 + '{"__tensor__": "t0"}' + "]]}" * 150
    _refuse(_with_tree(deep_dicts, {"t0": ("F32", a)}), "nests deeper")
    assert len(_load(_with_tree(_nested_list(MAX_DEPTH), {"t0": ("F32", a)}))) == 1


def test_save_refuses_what_load_would_refuse():
    obj = lucid.ones(2)
    for i in range(MAX_DEPTH):
        obj = {"k": obj} if i % 2 else (obj,)
    back = _load(_bytes(obj))               # the bound itself round-trips
    for _ in range(MAX_DEPTH):
        back = back["k"] if isinstance(back, dict) else back[0]
    assert back.tolist() == [1.0, 1.0]
    with pytest.raises(lucid.ArgumentError, match="deeper"):
        lucid.save([obj], io.BytesIO())
    cyclic = [lucid.ones(1)]
    cyclic.append(cyclic)
    with pytest.raises(lucid.ArgumentError, match="contains itself"):
        lucid.save(cyclic, io.BytesIO())


def test_requires_grad_on_an_integer_tensor():
    tree = {"__tensor__": "t0", "requires_grad": True}
    _refuse(_with_tree(tree, {"t0": ("I64", np.arange(3))}), "t0", "cannot require grad")
    tree = {"__tensor__": "t0", "requires_grad": "yes"}
    _refuse(_with_tree(tree, {"t0": ("F32", np.ones(3, np.float32))}), "requires_grad")


@pytest.mark.parametrize("code,dt", [("U16", np.uint16), ("U32", np.uint32),
                                     ("U64", np.uint64), ("C64", np.complex64)])
def test_dtypes_lucid_lacks_are_named(code, dt):
    a = np.ones(3, dt)
    _refuse(_with_tree({"__tensor__": "t0"}, {"t0": (code, a)}), "'t0'", code)
    _refuse(_join({"weird": {"dtype": code, "shape": [3], "data_offsets": [0, a.nbytes]}},
                  a.tobytes()), "'weird'", code)


@pytest.mark.parametrize("tree", [
    {"__tensor__": 5}, {"__tensor__": "t0", "dtype": "float8"}, {"__dict__": [[1, 2, 3]]},
    {"__dict__": [[True, 1]]}, {"__tuple__": 3}, {}, {"__reduce__": ["os.system", "ls"]},
])
def test_malformed_trees(tree):
    _refuse(_with_tree(tree, {"t0": ("F32", np.ones(3, np.float32))}), "lucid.load")


def test_old_bfloat16_files_still_load():
    bits = np.array([0x3F80, 0x4000], np.uint16)           # 1.0, 2.0 in bfloat16
    tree = {"__tensor__": "t0", "requires_grad": False, "dtype": "bfloat16"}
    t = _load(_with_tree(tree, {"t0": ("U16", bits)}))
    assert t.dtype == lucid.bfloat16 and t.float().tolist() == [1.0, 2.0]


# -- 3. plain safetensors files, both ways -------------------------------------------------

_NP = {"f16": np.array([1.0009765625, 65504.0, -0.0], np.float16),
       "f32": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4),
       "f64": np.array([np.pi, np.inf, np.nan]), "i8": np.array([-128, 127], np.int8),
       "i16": np.array([-3, 4], np.int16), "i32": np.array([1, 2 ** 31 - 1], np.int32),
       "i64": np.array([[2 ** 62]], np.int64), "u8": np.array([0, 255], np.uint8),
       "b": np.array([True, False]), "scalar": np.array(2.5, np.float32),
       "empty": np.zeros((0, 3), np.float32)}


def test_reads_safetensors_numpy_files(tmp_path):
    sn = pytest.importorskip("safetensors.numpy")
    sn.save_file(_NP, str(tmp_path / "a.safetensors"), metadata={"format": "np"})
    out = lucid.load(tmp_path / "a.safetensors")
    assert set(out) == set(_NP)
    for k, a in _NP.items():
        got = out[k].numpy()
        assert got.dtype == a.dtype and got.shape == a.shape, k
        np.testing.assert_array_equal(got, a, err_msg=k)
        assert not out[k].requires_grad


def test_reads_safetensors_torch_files(tmp_path):
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("safetensors.torch")
    g = torch.Generator().manual_seed(0)
    td = {"model.embed.weight": torch.randn(5, 3, generator=g).to(torch.bfloat16),
          "model.norm.weight": torch.tensor([1.0009765625, 1e10]).to(torch.bfloat16),
          "h": torch.randn(2, 2, generator=g).half(), "ids": torch.arange(6).reshape(2, 3),
          "mask": torch.tensor([True, False])}
    st.save_file(td, str(tmp_path / "t.safetensors"))
    out = lucid.load(tmp_path / "t.safetensors")
    assert set(out) == set(td)
    for k, t in td.items():
        assert str(out[k].dtype).replace("lucid.", "") in (str(t.dtype).replace("torch.", ""),
                                                           "bool_"), k
        ref = t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()
        got = out[k].float().numpy() if t.dtype == torch.bfloat16 else out[k].numpy()
        np.testing.assert_array_equal(got, ref, err_msg=k)


def test_a_hub_style_unsigned_tensor_is_named():
    sn = pytest.importorskip("safetensors.numpy")
    data = sn.save({"ok": np.ones(2, np.float32), "counts": np.ones(2, np.uint32)})
    _refuse(data, "'counts'", "U32")


def test_flat_dicts_are_read_back_by_safetensors(tmp_path):
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("safetensors.torch")
    sn = pytest.importorskip("safetensors.numpy")
    d = {k: lucid.from_numpy(a.copy()) for k, a in _NP.items()}
    d["bf16"] = lucid.tensor([1.0, 1.0078125, -3e38, 1e10]).to(lucid.bfloat16)
    d["view"] = lucid.arange(12.0).reshape(3, 4).transpose(0, 1)      # not contiguous
    d["grad"] = lucid.randn(3, requires_grad=True)
    lucid.save(d, tmp_path / "d.safetensors")
    back_t = st.load_file(str(tmp_path / "d.safetensors"))
    assert list(back_t) and set(back_t) == set(d)
    for k, t in d.items():
        ref = t.detach().float().numpy() if k == "bf16" else t.detach().numpy()
        got = back_t[k]
        assert tuple(got.shape) == t.shape, k
        assert str(got.dtype).split(".")[1] == str(t.dtype).split(".")[1].rstrip("_"), k
        got = got.float().numpy() if k == "bf16" else got.numpy()
        np.testing.assert_array_equal(got, ref, err_msg=k)
    assert back_t["bf16"].dtype == torch.bfloat16
    back_n = sn.load_file(str(tmp_path / "d.safetensors"))
    for k, a in _NP.items():
        assert back_n[k].dtype == a.dtype
        np.testing.assert_array_equal(back_n[k], a, err_msg=k)
    # and lucid keeps what safetensors cannot: key order and requires_grad
    mine = lucid.load(tmp_path / "d.safetensors")
    assert list(mine) == list(d) and mine["grad"].requires_grad


def test_nested_checkpoints_stay_valid_safetensors(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    from lucid import nn, optim
    m = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    opt = optim.Adam(m.parameters())
    m(lucid.randn(2, 3)).sum().backward()
    opt.step()
    path = tmp_path / "ck.safetensors"
    lucid.save({"model": m.state_dict(), "optim": opt.state_dict(), 7: [lucid.ones(1)],
                "t": (lucid.zeros(2),)}, path)
    names = set(st.load_file(str(path)))
    assert {"model.0.weight", "model.1.bias", "7.0", "t.0"} <= names
    back = lucid.load(path)
    np.testing.assert_array_equal(back["model"]["0.weight"].numpy(),
                                  m.state_dict()["0.weight"].detach().numpy())
    single = io.BytesIO()
    lucid.save(lucid.ones(3), single)
    assert list(st.load(single.getvalue())) == ["tensor"]


# -- 4. PyTorch pickles --------------------------------------------------------------------

@pytest.mark.parametrize("zipped", [True, False])
def test_torch_save_files_say_how_to_convert(tmp_path, zipped):
    torch = pytest.importorskip("torch")
    p = tmp_path / "m.pt"
    torch.save({"w": torch.ones(2)}, p, _use_new_zipfile_serialization=zipped)
    msg = _refuse(p.read_bytes(), "torch.save", "safetensors.torch.save_file",
                  "lucid.from_numpy")
    assert "header" not in msg


def test_a_header_length_that_looks_like_a_pickle_is_still_safetensors():
    header = {"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}
    h = json.dumps(header).encode()
    h += b" " * (0x0280 - len(h))                   # length bytes 80 02: a pickle's start
    data = _join(None, b"\0\0\x80\x3f", raw=h)
    assert data[:2] == b"\x80\x02"
    assert _load(data)["w"].tolist() == [1.0]


def test_other_foreign_files():
    _refuse(np.lib.format.magic(1, 0) + b"\0" * 100, "NumPy")
    _refuse(b"PK\x03\x04" + b"\0" * 100, "zip")
    _refuse(b"", "too short")


# -- 5. fuzz: mutated files load or raise CheckpointError, nothing else --------------------

def _seeds():
    lucid.manual_seed(0)
    nested = _bytes({"model": {"w": lucid.randn(3, 4), "b": lucid.zeros(4, dtype=lucid.float64)},
                     "step": 3, "ids": [lucid.arange(5), (lucid.tensor([True]), None)],
                     "h": lucid.ones(2, dtype=lucid.bfloat16), "g": lucid.randn(2,
                                                                              requires_grad=True)})
    flat = _bytes({"a": lucid.ones(2, 3, dtype=lucid.float16), "b": lucid.arange(4)})
    return [nested, flat]


def _mutate(data, rng):
    n = struct.unpack("<Q", data[:8])[0]
    kind = rng.integers(8)
    b = bytearray(data)
    if kind == 0:                                   # flip bits anywhere
        for _ in range(rng.integers(1, 6)):
            b[rng.integers(len(b))] ^= 1 << int(rng.integers(8))
    elif kind == 1:                                 # flip bytes inside the header
        for _ in range(rng.integers(1, 4)):
            b[8 + rng.integers(n)] = int(rng.integers(256))
    elif kind == 2:                                 # truncate
        b = b[:rng.integers(len(b))]
    elif kind == 3:                                 # a new header length
        lengths = [0, 1, n - 1, n + 1, n + 8, 2 ** 32, 2 ** 64 - 1, int(rng.integers(2 ** 62))]
        b[:8] = struct.pack("<Q", lengths[int(rng.integers(len(lengths)))])
    elif kind == 4:                                 # insert or delete bytes
        i = int(rng.integers(len(b)))
        if rng.integers(2):
            b[i:i] = rng.bytes(int(rng.integers(1, 9)))
        else:
            del b[i:i + int(rng.integers(1, 9))]
    else:                                           # edit the header's values
        header, body = _split(data)
        name = str(rng.choice([k for k in header if k != "__metadata__"]))
        e = header[name]
        choices = [-1, 0, 1, 2 ** 31, 2 ** 63, 2 ** 64, 1.5, None, "x", [], True, 10 ** 30]
        v = choices[int(rng.integers(len(choices)))]
        if kind == 5:
            e["shape"] = list(e["shape"]) + [v] if rng.integers(2) or not e["shape"] else \
                [v] + e["shape"][1:]
        elif kind == 6:
            e["data_offsets"][int(rng.integers(2))] = v
        else:
            meta = header["__metadata__"]
            tree = meta["tree"]
            i = int(rng.integers(len(tree)))
            meta["tree"] = tree[:i] + str(rng.choice(["[", "]", "{", "}", '"', ",", "0",
                                                     "__tensor__", "t9"])) + tree[i + 1:]
            if rng.integers(2):
                e["dtype"] = str(rng.choice(["U16", "C64", "F8_E4M3", "BOOL", "I64", "F16",
                                             "bf16", ""]))
        b = bytearray(_join(header, body))
    return bytes(b)


def test_fuzz_mutated_files_fail_only_with_checkpoint_error():
    rng = np.random.default_rng(2024)
    seeds = _seeds()
    outcomes = {"loaded": 0, "refused": 0}
    t0 = time.perf_counter()
    for case in range(600):
        data = _mutate(seeds[case % len(seeds)], rng)
        start = time.perf_counter()
        try:
            _load(data)
            outcomes["loaded"] += 1
        except CheckpointError as e:
            assert str(e).startswith("lucid.load:"), (case, e)
            outcomes["refused"] += 1
        except Exception as e:                      # noqa: BLE001  (the point of the test)
            pytest.fail(f"case {case}: {type(e).__name__}: {e}\n{data[:300]!r}")
        assert time.perf_counter() - start < 2.0, f"case {case} took too long"
    assert outcomes["loaded"] > 15 and outcomes["refused"] > 200, outcomes
    assert time.perf_counter() - t0 < 20
