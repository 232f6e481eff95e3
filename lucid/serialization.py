"""lucid.save / lucid.load: tensors and nested containers of tensors in a safetensors file.

The tensors go into the safetensors body under generated names; the structure around
them (dicts with str or int keys, lists, tuples, numbers, strings, booleans, None) is
plain JSON in the header's metadata. Loading never unpickles and never imports or calls
anything named by the file: a hostile or corrupted file fails with a LucidError.
"""
import json
import os
import struct

import numpy as np

import lucid

_FORMAT = "lucid.checkpoint.v1"
_DTYPES = {np.dtype(t) for t in (np.float16, np.float32, np.float64, np.uint8, np.int8,
                                 np.int16, np.int32, np.int64, np.bool_)}
# safetensors' NumPy interface has no bfloat16: its bits are stored as uint16 and the
# tree node says "dtype": "bfloat16".
_BF16 = np.dtype(lucid.bfloat16.dtype)


class CheckpointError(lucid.LucidError, ValueError):
    """The file is not a lucid checkpoint, or it is corrupted."""


def _encode(obj, arrays):
    if isinstance(obj, lucid.Tensor):
        a = obj.detach().numpy()
        if not a.flags.c_contiguous:  # (np.ascontiguousarray would turn 0-d into 1-d)
            a = a.copy(order="C")
        node = {}
        if a.dtype == _BF16:
            a = a.view(np.uint16)
            node["dtype"] = "bfloat16"
        elif a.dtype not in _DTYPES:
            raise TypeError(f"lucid.save: unsupported dtype {a.dtype}")
        name = f"t{len(arrays)}"
        arrays[name] = a
        return {"__tensor__": name, "requires_grad": bool(obj.requires_grad), **node}
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj)
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, arrays) for v in obj]}
    if isinstance(obj, list):
        return [_encode(v, arrays) for v in obj]
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"lucid.save: dict keys must be str or int, got {type(k).__name__}")
            items.append([k, _encode(v, arrays)])
        return {"__dict__": items}
    raise TypeError(f"lucid.save can store tensors, dicts, lists, tuples, numbers, strings, "
                    f"booleans and None; got {type(obj).__name__}")


def _decode(node, arrays, used):
    if node is None or isinstance(node, (bool, str, int, float)):
        return node
    if isinstance(node, list):
        return [_decode(v, arrays, used) for v in node]
    if isinstance(node, dict) and len(node) >= 1:
        if "__tensor__" in node and set(node) <= {"__tensor__", "requires_grad", "dtype"}:
            name = node["__tensor__"]
            if not isinstance(name, str) or name not in arrays:
                raise CheckpointError(f"checkpoint refers to a missing tensor {name!r}")
            used.add(name)
            a = np.array(arrays[name], copy=True)
            if "dtype" in node:
                if node["dtype"] != "bfloat16" or a.dtype != np.uint16:
                    raise CheckpointError(f"checkpoint tensor {name!r}: bad dtype tag "
                                          f"{str(node['dtype'])[:40]!r} for {a.dtype} data")
                a = a.view(_BF16)
            t = lucid.from_numpy(a)
            if node.get("requires_grad") is True:
                t.requires_grad_(True)
            return t
        if set(node) == {"__tuple__"} and isinstance(node["__tuple__"], list):
            return tuple(_decode(v, arrays, used) for v in node["__tuple__"])
        if set(node) == {"__dict__"} and isinstance(node["__dict__"], list):
            out = {}
            for item in node["__dict__"]:
                if (not isinstance(item, list) or len(item) != 2
                        or not isinstance(item[0], (str, int)) or isinstance(item[0], bool)):
                    raise CheckpointError("malformed dict entry in the checkpoint structure")
                out[item[0]] = _decode(item[1], arrays, used)
            return out
    raise CheckpointError(f"unexpected node in the checkpoint structure: {str(node)[:80]}")


def save(obj, f):
    """Write ``obj`` (a tensor, or nested dicts/lists/tuples of tensors and plain values,
    e.g. a model's or an optimizer's state_dict) to ``f`` (a path or a binary file)."""
    import safetensors.numpy
    arrays = {}
    tree = _encode(obj, arrays)
    meta = {"format": _FORMAT, "tree": json.dumps(tree, allow_nan=True)}
    data = safetensors.numpy.save(arrays, metadata=meta)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            fh.write(data)
    else:
        f.write(data)


def _header_metadata(data):
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    return meta if isinstance(meta, dict) else {}


def load(f, map_location=None, weights_only=True):
    """Read what :func:`save` wrote. Only data is read: a file that is not a lucid
    checkpoint (or is truncated, or corrupted) raises :class:`CheckpointError`."""
    import safetensors.numpy
    if map_location not in (None, "cpu") and str(map_location) != "cpu":
        lucid.device(map_location)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            data = fh.read()
    else:
        data = f.read()
    try:
        arrays = safetensors.numpy.load(data)
        meta = _header_metadata(data)
    except Exception as e:  # the safetensors parser's own errors, truncation, bad UTF-8
        raise CheckpointError(f"lucid.load: not a valid safetensors checkpoint ({e})") from None
    if meta.get("format") != _FORMAT or not isinstance(meta.get("tree"), str):
        raise CheckpointError("lucid.load: the file is a safetensors file but not a lucid "
                              "checkpoint (no lucid structure in its metadata)")
    try:
        tree = json.loads(meta["tree"])
    except ValueError as e:
        raise CheckpointError(f"lucid.load: corrupted checkpoint structure ({e})") from None
    used = set()
    out = _decode(tree, arrays, used)
    return out
