"""lucid.save / lucid.load: tensors and nested containers of tensors in a safetensors file.

The file is plain safetensors: any safetensors reader sees every stored tensor with its
dtype (bfloat16 included) and shape. A flat dict of tensors is stored under its own keys,
so ``safetensors.torch.load_file`` reads back the same dict; tensors inside other
structures are named by their path (``"model.0.weight"``). The structure around them
(dicts with str or int keys, lists, tuples, numbers, strings, booleans, None) is plain
JSON in the header's metadata. A tensor object that appears several times is stored once
and loads as one tensor (tied weights stay tied).

``load`` also reads safetensors files written by other tools (``safetensors.torch``,
``safetensors.numpy``, a model hub) as a flat dict of tensors.

Loading never unpickles and never imports or calls anything named by the file. The
parser is lucid's own, so that it can bound what a header may ask for: every extent lies
in the data section, extents do not overlap, each agrees with its dtype and shape, and
each stored tensor is copied once; so a load allocates at most about the file's size.
A hostile, corrupted or foreign file raises :class:`CheckpointError` saying why.
"""
import json
import math
import mmap
import os
import struct

import numpy as np

import lucid

__all__ = ["save", "load", "CheckpointError"]

_FORMAT = "lucid.checkpoint.v1"
# Structures nest at most this deep (a state_dict nests 3 or 4 levels). The bound keeps the
# JSON of the structure (up to 3 JSON levels per dict) well inside json's recursion limit;
# save refuses deeper structures, so lucid never writes a file it would not read.
MAX_DEPTH = 100
_MAX_HEADER = 100_000_000      # as safetensors' own reader
_MAX_NDIM = 32

_BF16 = np.dtype(lucid.bfloat16.dtype)
# safetensors dtype code -> (the little-endian layout in the file, the lucid-side dtype)
_ST_DTYPES = {
    "BOOL": (np.dtype("u1"), np.dtype(np.bool_)),
    "U8": (np.dtype("u1"), np.dtype(np.uint8)),
    "I8": (np.dtype("i1"), np.dtype(np.int8)),
    "I16": (np.dtype("<i2"), np.dtype(np.int16)),
    "I32": (np.dtype("<i4"), np.dtype(np.int32)),
    "I64": (np.dtype("<i8"), np.dtype(np.int64)),
    "F16": (np.dtype("<f2"), np.dtype(np.float16)),
    "BF16": (_BF16, _BF16),
    "F32": (np.dtype("<f4"), np.dtype(np.float32)),
    "F64": (np.dtype("<f8"), np.dtype(np.float64)),
}
_ST_CODE = {native: code for code, (_, native) in _ST_DTYPES.items()}
# dtypes safetensors knows that lucid cannot hold (itemsize in bytes; 0: sub-byte)
_FOREIGN = {"U16": 2, "U32": 4, "U64": 8, "C64": 8, "C128": 16, "F8_E4M3": 1,
            "F8_E5M2": 1, "F8_E8M0": 1, "F6_E2M3": 0, "F6_E3M2": 0, "F4": 0}


class CheckpointError(lucid.LucidError, ValueError):
    """The file is not a checkpoint lucid can read, or it is corrupted or hostile."""


# -- save ---------------------------------------------------------------------------------

class _Writer:
    """Collects the tensors of a structure: one entry per tensor object, named by path."""

    def __init__(self):
        self.arrays = {}          # name -> C-contiguous ndarray
        self.by_id = {}           # id(tensor) -> (name, tensor); the tensor kept alive

    def add(self, t, path):
        hit = self.by_id.get(id(t))
        if hit is not None:
            return hit[0]
        a = t.detach().numpy()
        if a.dtype not in _ST_CODE:
            raise TypeError(f"lucid.save: unsupported dtype {a.dtype}")
        if not a.flags.c_contiguous:  # (np.ascontiguousarray would turn 0-d into 1-d)
            a = a.copy(order="C")
        path = path or "tensor"
        name = path if path != "__metadata__" and path not in self.arrays else None
        if name is None:
            name = f"{path}#{len(self.arrays)}"
            while name in self.arrays:
                name += "_"
        self.arrays[name] = a
        self.by_id[id(t)] = (name, t)
        return name


def _encode(obj, w, path, depth):
    if depth > MAX_DEPTH:
        raise lucid.ArgumentError(f"lucid.save: the structure nests deeper than {MAX_DEPTH} "
                                  "levels (or contains itself)")
    if isinstance(obj, lucid.Tensor):
        return {"__tensor__": w.add(obj, path), "requires_grad": bool(obj.requires_grad)}
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)) or (isinstance(obj, np.generic)
                                                  and obj.dtype == _BF16):
        return float(obj)
    sub = path + "." if path else ""
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode(v, w, f"{sub}{i}", depth + 1) for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_encode(v, w, f"{sub}{i}", depth + 1) for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"lucid.save: dict keys must be str or int, got {type(k).__name__}")
            items.append([k, _encode(v, w, f"{sub}{k}", depth + 1)])
        return {"__dict__": items}
    raise TypeError(f"lucid.save can store tensors, dicts, lists, tuples, numbers, strings, "
                    f"booleans and None; got {type(obj).__name__}")


def _safetensors_layout(arrays, metadata):
    """The header bytes (length prefix included) and the arrays in file order.

    As safetensors' own writer: tensors sorted by alignment, then name, so that every
    tensor starts at a multiple of its item size (the header is padded to 8 bytes)."""
    order = sorted(arrays, key=lambda n: (-arrays[n].dtype.itemsize, n))
    header, off = {"__metadata__": metadata}, 0
    for name in order:
        a = arrays[name]
        header[name] = {"dtype": _ST_CODE[a.dtype], "shape": list(a.shape),
                        "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    h = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h, [arrays[n] for n in order]


def _little_endian_bytes(a):
    if a.dtype.byteorder == ">" or (a.dtype.byteorder == "=" and not np.little_endian):
        a = a.astype(a.dtype.newbyteorder("<"))
    return memoryview(a.reshape(-1).view(np.uint8))


def save(obj, f):
    """Write ``obj`` (a tensor, or nested dicts/lists/tuples of tensors and plain values,
    e.g. a model's or an optimizer's state_dict) to ``f`` (a path or a binary file).

    The file is a safetensors file; a flat dict of tensors keeps its keys as the tensor
    names, so other safetensors readers load the same dict."""
    w = _Writer()
    tree = _encode(obj, w, "", 0)
    meta = {"format": _FORMAT, "tree": json.dumps(tree, allow_nan=True)}
    head, arrays = _safetensors_layout(w.arrays, meta)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            _write(fh, head, arrays)
    else:
        _write(f, head, arrays)


def _write(fh, head, arrays):
    fh.write(head)
    for a in arrays:
        if a.size:
            fh.write(_little_endian_bytes(a))


# -- load ---------------------------------------------------------------------------------

def _foreign_format(data):
    """A message for files that are known not to be safetensors, else None."""
    head = bytes(data[:512])
    if head.startswith(b"PK\x03\x04"):
        if b"data.pkl" in head or b"/version" in head or b"byteorder" in head:
            what = "a PyTorch checkpoint written by torch.save (a zip archive holding a pickle)"
        else:
            what = "a zip archive (torch.save writes checkpoints as zip archives of a pickle)"
    elif head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        what = ("a Python pickle (a legacy torch.save checkpoint, or pickle.dump); "
                "lucid never unpickles")
    elif head.startswith(b"\x93NUMPY"):
        return ("lucid.load: this is a NumPy .npy file, not a safetensors checkpoint; read it "
                "with numpy.load and wrap the array with lucid.from_numpy")
    else:
        return None
    return (f"lucid.load: this is {what}, not a safetensors checkpoint. Convert it once, "
            "where you trust the file, with PyTorch: `sd = torch.load(path, weights_only=True); "
            "safetensors.torch.save_file({k: v.contiguous() for k, v in sd.items()}, "
            "'model.safetensors')` and lucid.load that file; or turn single tensors into "
            "lucid tensors with `lucid.from_numpy(t.numpy())`")


def _no_duplicate_keys(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise CheckpointError(f"lucid.load: the header names {k[:80]!r} twice")
        d[k] = v
    return d


def _is_count(v):
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2 ** 63


def _parse(data):
    """(metadata dict, {name: (code, shape, begin, end)}, offset of the data section)."""
    framed = (len(data) > 8 and data[8:9] == b"{"
              and struct.unpack("<Q", data[:8])[0] <= min(_MAX_HEADER, len(data) - 8))
    msg = None if framed else _foreign_format(data)   # (a header length may start 80 02)
    if msg is not None:
        raise CheckpointError(msg)
    if len(data) < 8:
        raise CheckpointError(f"lucid.load: the file has {len(data)} bytes, too short for a "
                              "safetensors header")
    (n,) = struct.unpack("<Q", data[:8])
    if n > _MAX_HEADER:
        raise CheckpointError(f"lucid.load: the header claims {n} bytes (the limit is "
                              f"{_MAX_HEADER}); not a safetensors file, or a corrupted one")
    if 8 + n > len(data):
        raise CheckpointError(f"lucid.load: the header claims {n} bytes but the file has only "
                              f"{len(data) - 8} after the length; truncated or not safetensors")
    raw = bytes(data[8:8 + n])
    if not raw.lstrip(b" \t\r\n").startswith(b"{"):
        raise CheckpointError("lucid.load: the header is not a JSON object; not a safetensors "
                              "file")
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicate_keys)
    except RecursionError:
        raise CheckpointError("lucid.load: the header's JSON nests too deeply") from None
    except (UnicodeDecodeError, ValueError) as e:
        if isinstance(e, CheckpointError):
            raise
        raise CheckpointError(f"lucid.load: the header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise CheckpointError("lucid.load: the header is not a JSON object")
    meta = header.pop("__metadata__", None)
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise CheckpointError("lucid.load: the header's __metadata__ is not an object")
    body = len(data) - 8 - n
    entries, spans = {}, []
    for name, e in header.items():
        where = f"lucid.load: tensor {name[:80]!r}"
        if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
            raise CheckpointError(f"{where}: its header entry must have exactly dtype, shape "
                                  "and data_offsets")
        code, shape, offs = e["dtype"], e["shape"], e["data_offsets"]
        if not isinstance(code, str) or (code not in _ST_DTYPES and code not in _FOREIGN):
            raise CheckpointError(f"{where}: unknown dtype {str(code)[:40]!r}")
        if (not isinstance(shape, list) or len(shape) > _MAX_NDIM
                or not all(_is_count(d) for d in shape)):
            raise CheckpointError(f"{where}: bad shape {str(shape)[:80]} (a list of at most "
                                  f"{_MAX_NDIM} non-negative integers)")
        if (not isinstance(offs, list) or len(offs) != 2 or not all(_is_count(o) for o in offs)
                or offs[0] > offs[1]):
            raise CheckpointError(f"{where}: bad data_offsets {str(offs)[:80]}")
        begin, end = offs
        if end > body:
            raise CheckpointError(f"{where}: its bytes [{begin}, {end}) lie past the end of the "
                                  f"data section ({body} bytes); truncated or corrupted")
        size = _FOREIGN.get(code) if code in _FOREIGN else _ST_DTYPES[code][0].itemsize
        count = math.prod(shape)          # Python ints: no overflow
        if math.prod(d for d in shape if d) * max(size, 1) >= 2 ** 63:
            raise CheckpointError(f"{where}: shape {shape} is too large for any array (even "
                                  "when it has a zero dimension)")
        if size and count * size != end - begin:
            raise CheckpointError(f"{where}: shape {shape} of {code} needs {count * size} bytes "
                                  f"but its extent holds {end - begin}")
        entries[name] = (code, tuple(shape), begin, end)
        if end > begin:
            spans.append((begin, end, name))
    spans.sort()
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise CheckpointError(f"lucid.load: tensors {n0[:80]!r} and {n1[:80]!r} overlap in "
                                  "the data section")
    return meta, entries, 8 + n


def _materialize(data, start, name, entry):
    code, shape, begin, end = entry
    if code in _FOREIGN:
        raise CheckpointError(f"lucid.load: tensor {name[:80]!r} has dtype {code}, which lucid "
                              "does not have (lucid has bool, uint8, int8, int16, int32, int64, "
                              "float16, bfloat16, float32, float64); convert it before saving")
    stored, native = _ST_DTYPES[code]
    count = math.prod(shape)
    a = np.frombuffer(data, dtype=stored, count=count, offset=start + begin) if count else \
        np.empty(0, dtype=stored)
    if code == "BOOL":
        a = a != 0                     # any nonzero byte is True; a bool array holds 0 / 1
    else:
        a = a.astype(native, copy=True)   # the one copy: writable, aligned, owned
    return lucid.from_numpy(a.reshape(shape))


class _Loader:
    def __init__(self, data, start, entries):
        self.data, self.start, self.entries = data, start, entries
        self.tensors = {}        # name -> (Tensor, requires_grad)

    def tensor(self, name, requires_grad, tag):
        if not isinstance(name, str) or name not in self.entries:
            raise CheckpointError(f"lucid.load: the structure refers to a missing tensor "
                                  f"{str(name)[:80]!r}")
        if not isinstance(requires_grad, bool):
            raise CheckpointError(f"lucid.load: tensor {name[:80]!r}: requires_grad must be "
                                  "true or false")
        hit = self.tensors.get(name)
        if hit is not None:
            if hit[1] != requires_grad:
                raise CheckpointError(f"lucid.load: the structure refers to tensor "
                                      f"{name[:80]!r} with and without requires_grad")
            return hit[0]
        entry = self.entries[name]
        if tag is not None:            # lucid's first files stored bfloat16 bits as U16
            if tag != "bfloat16" or entry[0] != "U16":
                raise CheckpointError(f"lucid.load: tensor {name[:80]!r}: bad dtype tag "
                                      f"{str(tag)[:40]!r} for {entry[0]} data")
            entry = ("BF16",) + entry[1:]
        t = _materialize(self.data, self.start, name, entry)
        if requires_grad:
            if not t.is_floating_point():
                raise CheckpointError(f"lucid.load: tensor {name[:80]!r} of dtype {t.dtype} "
                                      "cannot require grad (only floating point tensors can)")
            t.requires_grad_(True)
        self.tensors[name] = (t, requires_grad)
        return t

    def decode(self, node, depth):
        if depth > MAX_DEPTH:
            raise CheckpointError(f"lucid.load: the structure nests deeper than {MAX_DEPTH} "
                                  "levels")
        if node is None or isinstance(node, (bool, str, int, float)):
            return node
        if isinstance(node, list):
            return [self.decode(v, depth + 1) for v in node]
        if isinstance(node, dict) and len(node) >= 1:
            if "__tensor__" in node and set(node) <= {"__tensor__", "requires_grad", "dtype"}:
                return self.tensor(node["__tensor__"], node.get("requires_grad", False),
                                   node.get("dtype"))
            if set(node) == {"__tuple__"} and isinstance(node["__tuple__"], list):
                return tuple(self.decode(v, depth + 1) for v in node["__tuple__"])
            if set(node) == {"__dict__"} and isinstance(node["__dict__"], list):
                out = {}
                for item in node["__dict__"]:
                    if (not isinstance(item, list) or len(item) != 2
                            or not isinstance(item[0], (str, int)) or isinstance(item[0], bool)):
                        raise CheckpointError("lucid.load: malformed dict entry in the "
                                              "checkpoint structure")
                    out[item[0]] = self.decode(item[1], depth + 1)
                return out
        raise CheckpointError(f"lucid.load: unexpected node in the checkpoint structure: "
                              f"{str(node)[:80]}")


def _read(f):
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                return b""
            try:       # mapped, so each tensor is copied once from the page cache
                return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError):
                return fh.read()
    data = f.read()
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"lucid.load: the file must be opened in binary mode (read() gave "
                        f"{type(data).__name__})")
    return data


def load(f, map_location=None, weights_only=True):
    """Read what :func:`save` wrote, or any safetensors file (as a flat dict of tensors).

    Only data is read: a file that is not safetensors (a torch.save pickle, say), or is
    truncated, corrupted or hostile, raises :class:`CheckpointError` saying why."""
    if map_location not in (None, "cpu") and str(map_location) != "cpu":
        lucid.device(map_location)
    data = _read(f)
    try:
        return _load(data)
    finally:
        if isinstance(data, mmap.mmap):
            try:
                data.close()
            except BufferError:   # an array still views the map: the collector unmaps it
                pass


def _load(data):
    meta, entries, start = _parse(data)
    loader = _Loader(data, start, entries)
    if meta.get("format") != _FORMAT:          # a plain safetensors file
        names = sorted(entries, key=lambda k: (entries[k][2], entries[k][3], k))
        return {k: loader.tensor(k, False, None) for k in names}
    tree = meta.get("tree")
    if not isinstance(tree, str):
        raise CheckpointError("lucid.load: the lucid checkpoint has no structure in its "
                              "metadata")
    try:
        tree = json.loads(tree)
    except RecursionError:
        raise CheckpointError(f"lucid.load: the structure nests deeper than {MAX_DEPTH} "
                              "levels") from None
    except ValueError as e:
        raise CheckpointError(f"lucid.load: corrupted checkpoint structure ({e})") from None
    return loader.decode(tree, 0)
