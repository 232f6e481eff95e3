"""default_collate and default_convert: torch's rules, producing lucid tensors.

Python ints collate to int64, floats to float64, bools to bool; NumPy scalars and
arrays keep their dtype; tuples become lists, namedtuples stay namedtuples, mappings
keep their type; str and bytes are left as lists.
"""
import collections.abc
import copy
import re

import numpy as np

import lucid

_ERR = ("default_collate: batch must contain tensors, numpy arrays, numbers, "
        "dicts or lists; found {}")
_STR_OR_OBJECT = re.compile(r"[SaUO]")     # NumPy dtype codes lucid cannot hold


def _collate_tensors(batch):
    return lucid.stack(list(batch), 0)


def _collate_arrays(batch):
    if _STR_OR_OBJECT.search(batch[0].dtype.str) is not None:
        raise TypeError(_ERR.format(batch[0].dtype))
    return lucid.from_numpy(np.stack(batch))         # one copy, the batch's


def _collate_numpy_scalars(batch):
    return lucid.from_numpy(np.asarray(batch))


# The first entry whose type matches wins, as torch's default_collate_fn_map: NumPy
# scalars come before float, so np.float64 (a float subclass) keeps its dtype; bool is
# an int subclass and lucid.tensor keeps it bool.
default_collate_fn_map = {
    lucid.Tensor: _collate_tensors,
    np.ndarray: _collate_arrays,
    (np.bool_, np.number): _collate_numpy_scalars,
    float: lambda batch: lucid.tensor(list(batch), dtype=lucid.float64),
    int: lambda batch: lucid.tensor(list(batch)),
    str: lambda batch: batch,
    bytes: lambda batch: batch,
}


def collate(batch, *, collate_fn_map=None):
    """Collate a list of samples by the type of its first element (see default_collate)."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch)
        for kind, fn in collate_fn_map.items():
            if isinstance(elem, kind):
                return fn(batch)
    if isinstance(elem, collections.abc.Mapping):
        fields = {k: collate([d[k] for d in batch], collate_fn_map=collate_fn_map)
                  for k in elem}
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = copy.copy(elem)
                clone.update(fields)
                return clone
            return elem_type(fields)
        except TypeError:
            return fields
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):        # namedtuple
        return elem_type(*(collate(list(s), collate_fn_map=collate_fn_map)
                           for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [collate(list(s), collate_fn_map=collate_fn_map) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return columns                       # torch: tuples become lists
        try:
            if isinstance(elem, collections.abc.MutableSequence):
                clone = copy.copy(elem)
                clone[:] = columns
                return clone
            return elem_type(columns)
        except TypeError:
            return columns
    raise TypeError(_ERR.format(elem_type))


def default_collate(batch):
    """Stack a list of samples into a batch: tensors and arrays gain a leading batch
    dim, numbers become a 1-d tensor, containers are collated field by field."""
    return collate(batch, collate_fn_map=default_collate_fn_map)


def default_convert(data):
    """What the DataLoader applies to each sample when batching is off
    (``batch_size=None``): NumPy arrays and scalars become tensors, containers are
    converted field by field, everything else is left as it is."""
    if isinstance(data, lucid.Tensor):
        return data
    if isinstance(data, np.ndarray):
        return data if _STR_OR_OBJECT.search(data.dtype.str) else lucid.from_numpy(data)
    if isinstance(data, (np.bool_, np.number)):
        return lucid.from_numpy(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        fields = {k: default_convert(data[k]) for k in data}
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)
                clone.update(fields)
                return clone
            return type(data)(fields)
        except TypeError:
            return fields
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        items = [default_convert(d) for d in data]
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                clone[:] = items
                return clone
            return type(data)(items)
        except TypeError:
            return items
    return data
