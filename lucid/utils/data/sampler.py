"""Samplers: the order in which a DataLoader visits a map-style dataset.

Random samplers draw from a ``lucid.Generator`` (PCG64 through NumPy). Without one,
each pass draws a fresh seed from lucid's global stream (``lucid.manual_seed``), as
torch's samplers draw from torch's: one seed gives one sequence of orders, though not
torch's sequence.
"""
import itertools
import sys

import numpy as np

import lucid


def _numpy_rng(generator):
    """The NumPy generator behind ``generator`` (None: lucid's global stream)."""
    if generator is None:
        return sys.modules["lucid._core.creation"]._default_generator._rng
    if isinstance(generator, lucid.Generator):
        return generator._rng
    if isinstance(generator, np.random.Generator):
        return generator
    raise TypeError(f"generator must be a lucid.Generator, got {type(generator).__name__}")


def _fresh_rng():
    """A stream seeded by one draw from lucid's global stream (torch's samplers without
    a generator do the same with torch's)."""
    seed = int(_numpy_rng(None).integers(0, 2 ** 63 - 1))
    return np.random.Generator(np.random.PCG64(seed))


def randperm(n, generator=None):
    """A random permutation of range(n), as a list of Python ints."""
    return _numpy_rng(generator).permutation(n).tolist()


class Sampler:
    """Base class: iterates over indices (or lists of indices) of a dataset."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation of the dataset (``num_samples`` > len: several
    permutations, the last one cut short), or ``num_samples`` draws with replacement."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError("replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        n = self.num_samples
        if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={n}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        rng = _fresh_rng() if self.generator is None else _numpy_rng(self.generator)
        if self.replacement:
            yield from rng.integers(0, n, size=self.num_samples).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from rng.permutation(n).tolist()
        yield from rng.permutation(n).tolist()[: self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in _numpy_rng(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError("replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        w = np.asarray(weights.numpy(force=True) if isinstance(weights, lucid.Tensor)
                       else weights, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError("weights should be a 1d sequence but given weights have shape "
                             f"{tuple(w.shape)}")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise lucid.ArgumentError("weights must be finite, non-negative and not all zero")
        if not replacement and num_samples > np.count_nonzero(w):
            raise lucid.ArgumentError("cannot sample n_sample > prob_dist.size(-1) samples "
                                      "without replacement")
        self.weights = lucid.tensor(w, dtype=lucid.float64)
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        w = self.weights.numpy()
        rng = _numpy_rng(self.generator)
        yield from rng.choice(len(w), size=self.num_samples, replace=self.replacement,
                              p=w / w.sum()).tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of ``batch_size``."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError("batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        it = iter(self.sampler)
        if self.drop_last:
            yield from (list(b) for b in zip(*[it] * self.batch_size))
            return
        batch = list(itertools.islice(it, self.batch_size))
        while batch:
            yield batch
            batch = list(itertools.islice(it, self.batch_size))

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
