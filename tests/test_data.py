"""lucid.utils.data against torch.utils.data: default_collate's types, dtypes and shapes,
batch counts and sizes, sampler lengths, random_split sizes, exact batch contents,
reproducible shuffles, and worker processes (same batches as num_workers=0, in order,
errors, seeds, timeouts) also after lucid's thread pool has run."""
import collections
import contextlib
import random
import time
import warnings

import numpy as np
import pytest

import lucid
from lucid.utils import data as ld

torch = pytest.importorskip("torch")
td = torch.utils.data

Point = collections.namedtuple("Point", "x y")


def _np(x):
    return x.numpy(force=True) if isinstance(x, lucid.Tensor) else x.numpy()


def _same_structure(a, b):
    """a (lucid) and b (torch) have the same containers, dtypes, shapes and values."""
    if isinstance(b, torch.Tensor):
        assert isinstance(a, lucid.Tensor), type(a)
        assert str(a.dtype).split(".")[-1].rstrip("_") == str(b.dtype).split(".")[-1]
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_array_equal(_np(a), _np(b))
    elif isinstance(b, dict):
        assert type(a) is type(b) and a.keys() == b.keys()
        for k in b:
            _same_structure(a[k], b[k])
    elif isinstance(b, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _same_structure(x, y)
    else:
        assert a == b


def _t(x):
    """The torch twin of a sample built from lucid tensors."""
    if isinstance(x, lucid.Tensor):
        return torch.from_numpy(x.numpy().copy())
    if isinstance(x, dict):
        return {k: _t(v) for k, v in x.items()}
    if isinstance(x, Point):
        return Point(*map(_t, x))
    if isinstance(x, (list, tuple)):
        return type(x)(map(_t, x))
    return x


COLLATE_CASES = {
    "ints": [1, 2, 3],
    "floats": [1.5, 2.0],
    "bools": [True, False],
    "np_float32": [np.float32(1), np.float32(2.5)],
    "np_float64": [np.float64(1), np.float64(2.5)],
    "np_int32": [np.int32(1), np.int32(-2)],
    "np_uint8": [np.uint8(1), np.uint8(200)],
    "np_bool": [np.bool_(True), np.bool_(False)],
    "np_float16": [np.float16(0.5), np.float16(2)],
    "np_0d": [np.array(1.5), np.array(2.5)],
    "np_arrays_int16": [np.arange(3, dtype=np.int16), np.arange(3, 6, dtype=np.int16)],
    "np_arrays_float32": [np.ones((2, 3), np.float32), np.zeros((2, 3), np.float32)],
    "tensors": [lucid.tensor([1.0, 2.0]), lucid.tensor([3.0, 4.0])],
    "int_tensors": [lucid.tensor([[1, 2]], dtype=lucid.int32)] * 3,
    "tuples": [(1, 2.0), (3, 4.0)],
    "lists": [[1, 2], [3, 4]],
    "dicts": [{"a": 1, "b": "x", "c": [1.0, 2]}, {"a": 2, "b": "y", "c": [3.0, 4]}],
    "namedtuples": [Point(1, 2.0), Point(3, 4.0)],
    "strings": ["a", "b"],
    "bytes": [b"a", b"b"],
    "nested": [({"x": lucid.tensor([1, 2])}, [np.float32(1), 2]),
               ({"x": lucid.tensor([3, 4])}, [np.float32(3), 4])],
}


@pytest.mark.parametrize("case", COLLATE_CASES)
def test_default_collate_matches_torch(case):
    batch = COLLATE_CASES[case]
    _same_structure(ld.default_collate(batch), td.default_collate([_t(b) for b in batch]))


@pytest.mark.parametrize("sample", [np.arange(3.0), np.float32(2), (np.arange(2), 1),
                                    {"a": np.ones(2, np.int8), "b": 3}, Point(np.zeros(1), 2.0),
                                    "text", 5])
def test_default_convert_matches_torch(sample):
    _same_structure(ld.default_convert(sample), td.default_convert(sample))


def test_default_collate_refuses_what_torch_refuses():
    for bad in ([object(), object()], [np.array(["a"]), np.array(["b"])]):
        with pytest.raises(TypeError):
            td.default_collate(bad)
        with pytest.raises(TypeError):
            ld.default_collate(bad)
    with pytest.raises(RuntimeError, match="equal size"):
        ld.default_collate([[1, 2], [3]])


@pytest.mark.parametrize("n,bs,drop_last", [(10, 3, False), (10, 3, True), (9, 3, True),
                                             (2, 5, False), (2, 5, True), (7, 1, False)])
def test_batch_counts_and_shapes_match_torch(n, bs, drop_last):
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    mine = list(ld.DataLoader(x, batch_size=bs, drop_last=drop_last))
    theirs = list(td.DataLoader(x, batch_size=bs, drop_last=drop_last))
    assert len(mine) == len(theirs) == len(ld.DataLoader(x, batch_size=bs, drop_last=drop_last))
    for a, b in zip(mine, theirs):
        _same_structure(a, b)


def test_tensor_dataset_batches_are_the_rows_in_order():
    x = lucid.arange(30, dtype=lucid.float32).reshape(10, 3)
    y = lucid.arange(10)
    batches = list(ld.DataLoader(ld.TensorDataset(x, y), batch_size=4))
    assert [tuple(b[0].shape) for b in batches] == [(4, 3), (4, 3), (2, 3)]
    np.testing.assert_array_equal(np.concatenate([_np(b[0]) for b in batches]), _np(x))
    np.testing.assert_array_equal(np.concatenate([_np(b[1]) for b in batches]), np.arange(10))
    assert isinstance(batches[0], list) and batches[0][1].dtype == lucid.int64


def test_gather_path_copies_only_the_batch_and_equals_per_sample_collate():
    x = np.random.default_rng(0).standard_normal((50, 4)).astype(np.float32)
    idx = [7, 3, 3, 41]
    fast = ld.DataLoader(x, batch_sampler=[idx])
    slow = ld.DataLoader(x, batch_sampler=[idx], collate_fn=lambda b: ld.default_collate(b))
    (a,), (b,) = list(fast), list(slow)
    np.testing.assert_array_equal(_np(a), x[idx])
    np.testing.assert_array_equal(_np(a), _np(b))
    # a batch is its own memory, not a view of the dataset
    a.numpy()[:] = 0
    assert x[7, 0] != 0
    # a Subset of a TensorDataset goes through the same gather
    ds = ld.TensorDataset(lucid.from_numpy(x))
    sub = ld.Subset(ds, [5, 6, 7, 8])
    (c,) = list(ld.DataLoader(sub, batch_size=4))
    np.testing.assert_array_equal(_np(c[0]), x[5:9])


def test_batch_sizes_none_turns_off_batching():
    x = np.arange(6).reshape(3, 2)
    mine = list(ld.DataLoader(x, batch_size=None))
    theirs = list(td.DataLoader(x, batch_size=None))
    for a, b in zip(mine, theirs):
        _same_structure(a, b)
    assert len(mine) == 3


def test_sampler_lengths_match_torch():
    data = list(range(10))
    assert len(ld.SequentialSampler(data)) == len(td.SequentialSampler(data)) == 10
    for kw in [{}, dict(replacement=True, num_samples=25), dict(num_samples=23)]:
        s = ld.RandomSampler(data, **kw)
        assert len(s) == len(td.RandomSampler(data, **kw)) == len(list(s))
    for bs, dl in [(3, False), (3, True), (5, True)]:
        s = ld.BatchSampler(ld.SequentialSampler(data), bs, dl)
        t = td.BatchSampler(td.SequentialSampler(data), bs, dl)
        assert len(s) == len(t) and list(s) == list(t)
    assert len(ld.SubsetRandomSampler([1, 5, 7])) == 3
    assert sorted(ld.SubsetRandomSampler([1, 5, 7])) == [1, 5, 7]


def test_random_sampler_draws_are_permutations_or_in_range():
    g = lucid.Generator().manual_seed(3)
    s = list(ld.RandomSampler(range(10), num_samples=25, generator=g))
    assert sorted(s[:10]) == list(range(10)) and sorted(s[10:20]) == list(range(10))
    assert len(set(s[20:])) == 5
    r = list(ld.RandomSampler(range(4), replacement=True, num_samples=200, generator=g))
    assert set(r) == {0, 1, 2, 3}


def test_sampler_argument_errors_match_torch():
    for kw in [dict(num_samples=0), dict(num_samples=-1)]:
        with pytest.raises(ValueError):
            td.RandomSampler(range(3), **kw)
        with pytest.raises(ValueError):
            ld.RandomSampler(range(3), **kw)
    with pytest.raises(TypeError):
        ld.RandomSampler(range(3), replacement=1)
    for args in [(0, False), (2, 1), (True, False)]:
        with pytest.raises(ValueError):
            td.BatchSampler(range(3), *args)
        with pytest.raises(ValueError):
            ld.BatchSampler(range(3), *args)


@pytest.mark.parametrize("kw", [dict(num_workers=-1), dict(timeout=-1), dict(prefetch_factor=2),
                                dict(persistent_workers=True), dict(sampler=[0], shuffle=True),
                                dict(batch_sampler=[[0]], batch_size=2),
                                dict(batch_sampler=[[0]], drop_last=True),
                                dict(batch_size=None, drop_last=True)])
def test_loader_argument_errors_match_torch(kw):
    with pytest.raises(ValueError):
        td.DataLoader(list(range(4)), **kw)
    with pytest.raises(ValueError):
        ld.DataLoader(list(range(4)), **kw)


def test_shuffle_is_a_permutation_and_reproducible_with_a_generator():
    x = np.arange(100)

    def order(seed, workers=0):
        g = lucid.Generator().manual_seed(seed)
        dl = ld.DataLoader(x, batch_size=7, shuffle=True, generator=g, num_workers=workers)
        return [np.concatenate([_np(b) for b in dl]) for _ in range(2)]

    e1, e2 = order(0)
    assert sorted(e1) == list(range(100)) and sorted(e2) == list(range(100))
    assert not np.array_equal(e1, e2)                 # each epoch reshuffles
    f1, f2 = order(0)
    np.testing.assert_array_equal(e1, f1)
    np.testing.assert_array_equal(e2, f2)
    assert not np.array_equal(order(1)[0], e1)
    # the global stream: lucid.manual_seed makes shuffle=True without a generator repeatable
    lucid.manual_seed(5)
    a = np.concatenate([_np(b) for b in ld.DataLoader(x, batch_size=10, shuffle=True)])
    lucid.manual_seed(5)
    b = np.concatenate([_np(b) for b in ld.DataLoader(x, batch_size=10, shuffle=True)])
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("lengths", [[3, 7], [0.3, 0.7], [0.5, 0.25, 0.25], [0.33, 0.33, 0.34],
                                     [1.0 / 3] * 3, [4, 0, 6], [0.5, 0.0, 0.5]])
def test_random_split_sizes_match_torch(lengths):
    data = list(range(10)) if len(lengths) != 3 or lengths[0] != 1.0 / 3 else list(range(11))
    # a fraction giving an empty split warns (a length of 0 does not)
    with pytest.warns(UserWarning) if 0.0 in lengths[1:2] and isinstance(lengths[1], float) \
            else contextlib.nullcontext():
        mine = ld.random_split(data, lengths, generator=lucid.Generator().manual_seed(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = td.random_split(data, lengths, generator=torch.Generator().manual_seed(0))
    assert [len(s) for s in mine] == [len(s) for s in theirs]
    assert sorted(i for s in mine for i in s) == data


def test_random_split_errors_and_reproducibility():
    with pytest.raises(ValueError):
        ld.random_split(range(10), [3, 3])
    with pytest.raises(ValueError):
        ld.random_split(range(10), [1.5, -0.5])
    a = ld.random_split(range(10), [5, 5], generator=lucid.Generator().manual_seed(1))
    b = ld.random_split(range(10), [5, 5], generator=lucid.Generator().manual_seed(1))
    assert [list(s) for s in a] == [list(s) for s in b]


def test_concat_subset_and_add():
    a, b = ld.TensorDataset(lucid.arange(3)), ld.TensorDataset(lucid.arange(10, 14))
    c = a + b
    assert isinstance(c, ld.ConcatDataset) and len(c) == 7 and c.cumulative_sizes == [3, 7]
    assert [int(c[i][0]) for i in range(7)] == [0, 1, 2, 10, 11, 12, 13]
    assert int(c[-1][0]) == 13
    with pytest.raises(ValueError):
        c[-8]
    s = ld.Subset(c, [6, 0])
    assert [int(s[i][0]) for i in range(2)] == [13, 0]
    with pytest.raises(ValueError):
        ld.TensorDataset(lucid.zeros(3), lucid.zeros(4))


class Squares(ld.Dataset):
    def __len__(self):
        return 23

    def __getitem__(self, i):
        info = ld.get_worker_info()
        # lucid ops inside the worker use its (fresh) thread pool
        v = lucid.ones(1 << 16).sum().item()
        return {"i": i, "sq": np.float32(i * i), "big": v, "wid": -1 if info is None else info.id}


def _drop_wid(batches):
    return [{k: v for k, v in b.items() if k != "wid"} for b in batches]


def test_workers_give_the_batches_of_num_workers_0_in_order(threads):
    lucid.set_num_threads(2)
    lucid.exp(lucid.ones(1 << 20)).sum()          # the pool has been used before the fork
    ref = list(ld.DataLoader(Squares(), batch_size=4))
    assert all((b["wid"] == -1).all() for b in ref)
    got = list(ld.DataLoader(Squares(), batch_size=4, num_workers=2, timeout=60))
    assert len(got) == len(ref) == 6
    for a, b in zip(_drop_wid(got), _drop_wid(ref)):
        _same_structure(a, _t(b))
    assert [int(b["wid"][0]) for b in got] == [0, 1, 0, 1, 0, 1]
    assert float(got[0]["big"][0]) == float(1 << 16)
    lucid.exp(lucid.ones(1 << 20)).sum()          # and still works after


def test_workers_with_shuffle_match_the_main_process_order():
    x = np.arange(40, dtype=np.int32)

    def run(workers):
        g = lucid.Generator().manual_seed(11)
        return [_np(b) for b in ld.DataLoader(x, batch_size=6, shuffle=True, generator=g,
                                              num_workers=workers, timeout=60)]
    ref, got = run(0), run(2)
    assert len(ref) == len(got)
    for a, b in zip(ref, got):
        np.testing.assert_array_equal(a, b)


def _check_worker_info(worker_id):
    info = ld.get_worker_info()
    assert info.id == worker_id and info.num_workers == 2


class Seeds(ld.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        info = ld.get_worker_info()
        return [info.id, info.seed, random.random(), float(lucid.rand(1).item())]


def test_worker_seeds_and_init_fn():
    g = lucid.Generator().manual_seed(2)
    rows = [b for b in ld.DataLoader(Seeds(), batch_size=1, num_workers=2, generator=g,
                                     worker_init_fn=_check_worker_info, timeout=60)]
    ids = [int(r[0][0]) for r in rows]
    seeds = [int(r[1][0]) for r in rows]
    assert ids == [0, 1, 0, 1]
    assert seeds[1] == seeds[0] + 1 and seeds[2] == seeds[0]
    assert float(rows[0][2][0]) != float(rows[1][2][0])     # workers draw different streams
    g = lucid.Generator().manual_seed(2)
    again = [b for b in ld.DataLoader(Seeds(), batch_size=1, num_workers=2, generator=g,
                                      timeout=60)]
    assert [float(r[3][0]) for r in rows] == [float(r[3][0]) for r in again]
    assert ld.get_worker_info() is None


class Failing(ld.Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        if i == 3:
            raise KeyError("bad sample 3")
        return i


def test_worker_errors_reach_the_main_process():
    with pytest.raises(KeyError, match="bad sample 3") as info:
        list(ld.DataLoader(Failing(), batch_size=2, num_workers=2, timeout=60))
    assert "DataLoader worker process" in str(info.value)


class Slow(ld.Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        time.sleep(5)
        return i


def test_timeout_raises():
    with pytest.raises(RuntimeError, match="timed out"):
        list(ld.DataLoader(Slow(), num_workers=1, timeout=0.5))


class Stream(ld.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = ld.get_worker_info()
        lo, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(lo, self.n, step))

    def __len__(self):
        return self.n


@pytest.mark.parametrize("workers", [0, 2])
def test_iterable_dataset(workers):
    dl = ld.DataLoader(Stream(11), batch_size=3, num_workers=workers, timeout=60)
    got = sorted(int(v) for b in dl for v in _np(b))
    assert got == list(range(11))
    assert len(dl) == len(td.DataLoader(Stream(11), batch_size=3)) == 4
    with pytest.raises(ValueError):
        ld.DataLoader(Stream(3), shuffle=True)
    full = [len(b) for b in ld.DataLoader(Stream(11), batch_size=3, drop_last=True)]
    assert full == [3, 3, 3]


def test_persistent_workers_serve_several_epochs():
    dl = ld.DataLoader(np.arange(10), batch_size=4, num_workers=2, persistent_workers=True,
                       timeout=60)
    first = [_np(b).tolist() for b in dl]
    it = iter(dl)
    next(it)                                      # an epoch cut short ...
    second = [_np(b).tolist() for b in dl]        # ... does not leak into the next
    assert first == second == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    workers = dl._iterator._workers
    assert all(p.is_alive() for p in workers)
    dl._iterator._shutdown()
    assert not any(p.is_alive() for p in workers)


def test_pin_memory_and_prefetch_are_accepted():
    dl = ld.DataLoader(np.arange(6), batch_size=2, pin_memory=True, num_workers=1,
                       prefetch_factor=4, timeout=60)
    assert [_np(b).tolist() for b in dl] == [[0, 1], [2, 3], [4, 5]]


def test_out_of_order_delivery_gives_every_batch_once():
    dl = ld.DataLoader(Squares(), batch_size=3, num_workers=2, in_order=False, timeout=60)
    got = sorted(int(i) for b in dl for i in _np(b["i"]))
    assert got == list(range(23))


def test_weighted_random_sampler():
    w = [0.0, 1.0, 3.0, 0.0]
    g = lucid.Generator().manual_seed(0)
    draws = list(ld.WeightedRandomSampler(w, 4000, generator=g))
    assert len(draws) == len(ld.WeightedRandomSampler(w, 4000)) == 4000
    counts = np.bincount(draws, minlength=4)
    assert counts[0] == counts[3] == 0 and 2.5 < counts[2] / counts[1] < 3.5
    assert sorted(ld.WeightedRandomSampler(w, 2, replacement=False, generator=g)) == [1, 2]
    for args in [(w, 0), (w, 2, 1), ([[1.0]], 1)]:
        with pytest.raises(ValueError):
            td.WeightedRandomSampler(*args)
        with pytest.raises(ValueError):
            ld.WeightedRandomSampler(*args)
