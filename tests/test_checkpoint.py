"""lucid.save / lucid.load: safetensors round trips, bit-exact training resume, and
hostile or corrupted files failing cleanly without running anything."""
import io
import json
import os
import pickle
import struct

import numpy as np
import pytest

import lucid
from lucid import nn, optim
from lucid.serialization import CheckpointError


def test_tensor_and_nested_round_trip(tmp_path):
    obj = {
        "a": lucid.randn(3, 4),
        "b": [lucid.arange(5), (1, 2.5, "x", None, True), {"deep": lucid.ones(2, dtype=lucid.float64)}],
        7: lucid.tensor(3.0),
        "empty": lucid.zeros(0, 3),
        "flags": lucid.tensor([True, False]),
        "i32": lucid.tensor([1, 2], dtype=lucid.int32),
        "inf": float("inf"),
    }
    path = tmp_path / "obj.safetensors"
    lucid.save(obj, path)
    back = lucid.load(path)
    assert set(back) == set(obj)
    np.testing.assert_array_equal(back["a"].numpy(), obj["a"].numpy())
    assert back["a"].dtype == lucid.float32
    assert back["b"][1] == (1, 2.5, "x", None, True)
    assert back["b"][2]["deep"].dtype == lucid.float64
    assert back[7].shape == () and back[7].item() == 3.0
    assert back["empty"].shape == (0, 3)
    assert back["flags"].dtype == lucid.bool_ and back["i32"].dtype == lucid.int32
    assert back["inf"] == float("inf")
    t = lucid.randn(2, 2, requires_grad=True)
    buf = io.BytesIO()
    lucid.save(t, buf)
    buf.seek(0)
    u = lucid.load(buf)
    assert u.requires_grad and u.is_leaf
    np.testing.assert_array_equal(u.detach().numpy(), t.detach().numpy())


def test_file_is_plain_safetensors(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    m = nn.Linear(3, 2)
    lucid.save(m.state_dict(), tmp_path / "m.safetensors")
    arrays = safetensors_numpy.load_file(str(tmp_path / "m.safetensors"))
    assert sorted(a.shape for a in arrays.values()) == [(2,), (2, 3)]


def test_non_tensor_values_are_refused():
    with pytest.raises(TypeError):
        lucid.save({"f": lambda: 0}, io.BytesIO())
    with pytest.raises(TypeError):
        lucid.save({(1, 2): lucid.ones(1)}, io.BytesIO())


def _train(model, opt, x, y, steps):
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y, label_smoothing=0.1).backward()
        opt.step()


@pytest.mark.parametrize("opt_name", ["SGD", "Adam", "AdamW", "RMSprop"])
def test_model_and_optimizer_resume_bit_for_bit(tmp_path, opt_name):
    lucid.manual_seed(0)
    rng = np.random.default_rng(0)
    x = lucid.tensor(rng.standard_normal((16, 5)), dtype=lucid.float32)
    y = lucid.tensor(rng.integers(0, 3, 16))

    def make():
        m = nn.Sequential(nn.Linear(5, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 3))
        kw = dict(lr=0.05, momentum=0.9) if opt_name in ("SGD", "RMSprop") else dict(lr=1e-2)
        return m, getattr(optim, opt_name)(m.parameters(), **kw)

    m1, o1 = make()
    sched = optim.lr_scheduler.StepLR(o1, 3, 0.5)
    _train(m1, o1, x, y, 5)
    sched.step()
    lucid.save({"model": m1.state_dict(), "optim": o1.state_dict(), "epoch": 5,
                "sched": {k: v for k, v in sched.state_dict().items()
                          if k not in ("_get_lr_called_within_step",)}},
               tmp_path / "ckpt.safetensors")
    _train(m1, o1, x, y, 5)

    ck = lucid.load(tmp_path / "ckpt.safetensors")
    m2, o2 = make()
    m2.load_state_dict(ck["model"])
    o2.load_state_dict(ck["optim"])
    assert ck["epoch"] == 5 and ck["sched"]["last_epoch"] == 1
    assert o2.param_groups[0]["lr"] == o1.param_groups[0]["lr"]
    _train(m2, o2, x, y, 5)
    for (n, a), (_, b) in zip(m1.named_parameters(), m2.named_parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy(), err_msg=n)


def _valid_bytes():
    buf = io.BytesIO()
    lucid.save({"w": lucid.ones(4)}, buf)
    return buf.getvalue()


def _header(data):
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def _with_header(header, body):
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + body


class _Boom:
    def __reduce__(self):
        return (os.system, ("echo should-never-run > /dev/null",))


def hostile_files():
    good = _valid_bytes()
    header, body = _header(good)
    bad_tree = json.loads(json.dumps(header))
    bad_tree["__metadata__"]["tree"] = json.dumps({"__reduce__": ["os.system", "ls"]})
    missing = json.loads(json.dumps(header))
    missing["__metadata__"]["tree"] = json.dumps({"__tensor__": "nope"})
    not_json = json.loads(json.dumps(header))
    not_json["__metadata__"]["tree"] = "{not json"
    huge = json.loads(json.dumps(header))
    for k, v in huge.items():
        if k != "__metadata__":
            v["data_offsets"] = [0, 10 ** 12]
    return {
        "empty": b"",
        "random": np.random.default_rng(0).bytes(256),
        "pickle": pickle.dumps(_Boom()),
        "truncated": good[: len(good) - 3],
        "header_len_too_large": struct.pack("<Q", 10 ** 9) + good[8:],
        "unknown_node": _with_header(bad_tree, body),
        "missing_tensor": _with_header(missing, body),
        "tree_not_json": _with_header(not_json, body),
        "offsets_past_end": _with_header(huge, body),
    }


@pytest.mark.parametrize("name", list(hostile_files()))
def test_hostile_or_corrupted_files_fail_cleanly(tmp_path, name):
    p = tmp_path / "bad.safetensors"
    p.write_bytes(hostile_files()[name])
    with pytest.raises(CheckpointError):
        lucid.load(p)
    assert issubclass(CheckpointError, lucid.LucidError)
