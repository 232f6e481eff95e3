"""lucid.utils.data: datasets, samplers, collation and the DataLoader, with
torch.utils.data's names, signatures and defaults.

Shuffling draws from lucid's generators (``lucid.Generator``, PCG64 through NumPy):
the same seed gives the same order every run, but not torch's order for that seed.
"""
from lucid.utils.data.collate import default_collate, default_convert
from lucid.utils.data.dataloader import DataLoader, WorkerInfo, get_worker_info
from lucid.utils.data.dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    random_split,
)
from lucid.utils.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset",
    "IterableDataset", "RandomSampler", "Sampler", "SequentialSampler", "Subset",
    "SubsetRandomSampler", "TensorDataset", "WeightedRandomSampler", "WorkerInfo",
    "default_collate", "default_convert", "get_worker_info", "random_split",
]
