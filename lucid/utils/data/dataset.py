"""Datasets: map-style (``__getitem__`` + ``__len__``) and iterable ones, and the
ways to combine and split them."""
import bisect
import itertools
import math
import warnings

import numpy as np

import lucid
from lucid.utils.data.sampler import randperm


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__`` (and usually ``__len__``)."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A stream of samples: subclasses define ``__iter__``. With worker processes, each
    worker iterates its own copy; use ``get_worker_info()`` to give each a share."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        return ChainDataset([self, other])


def _batch_rows(t, indices):
    """Rows ``indices`` of a tensor or array, as one tensor (only those rows are copied)."""
    if isinstance(t, np.ndarray):
        return lucid.from_numpy(np.ascontiguousarray(t[np.asarray(indices, dtype=np.int64)]))
    return t[np.asarray(indices, dtype=np.int64)]


def _batch_gather(dataset):
    """For a dataset of rows (an array, a tensor, a TensorDataset, a Subset of one), a
    function giving ``default_collate([dataset[i] for i in indices])`` by one gather per
    array, so a loader copies only the batch; None for any other dataset."""
    if isinstance(dataset, (np.ndarray, lucid.Tensor)):
        return lambda indices: _batch_rows(dataset, indices)
    if type(dataset) is TensorDataset:
        return lambda indices: [_batch_rows(t, indices) for t in dataset.tensors]
    if type(dataset) is Subset:
        inner = _batch_gather(dataset.dataset)
        if inner is not None:
            return lambda indices: inner([dataset.indices[i] for i in indices])
    return None


class TensorDataset(Dataset):
    """Sample i is ``tuple(t[i] for t in tensors)``; all tensors share their first dim."""

    def __init__(self, *tensors):
        if not tensors:
            raise lucid.ArgumentError("TensorDataset needs at least one tensor")
        n = tensors[0].shape[0]
        if any(t.shape[0] != n for t in tensors):
            raise lucid.ArgumentError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """Several map-style datasets one after another."""

    @staticmethod
    def cumsum(sequence):
        return list(itertools.accumulate(len(d) for d in sequence))

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise lucid.ArgumentError("datasets should not be an empty iterable")
        if any(isinstance(d, IterableDataset) for d in self.datasets):
            raise lucid.ArgumentError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        d = bisect.bisect_right(self.cumulative_sizes, idx)
        return self.datasets[d][idx - (self.cumulative_sizes[d - 1] if d else 0)]


class ChainDataset(IterableDataset):
    """Several iterable datasets one after another."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise lucid.ArgumentError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` into non-overlapping Subsets of the given lengths, or of the
    given fractions (each floor(frac * n), the remainder handed out one at a time from
    the first split on, as torch). ``generator``: a lucid.Generator (None: the global
    stream)."""
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        sizes = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            sizes.append(math.floor(n * frac))
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        lengths = sizes
        for i, length in enumerate(lengths):
            if length == 0:
                warnings.warn(f"Length of split at index {i} is 0. "
                              "This might result in an empty dataset.", stacklevel=2)
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = randperm(n, generator=generator)
    return [Subset(dataset, indices[end - length:end])
            for end, length in zip(itertools.accumulate(lengths), lengths)]
