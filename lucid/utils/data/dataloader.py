"""DataLoader: batches from a dataset, in the main process or in worker processes.

With ``num_workers > 0`` each worker is a process (fork on Linux: lucid's fork
handlers, registered at import, leave the child a fresh thread pool and allocator).
The main process hands out index batches round-robin, at most ``prefetch_factor``
per worker ahead, and yields the results in sampler order, so a loader gives the same
batches with any number of workers. Worker i seeds Python's ``random``, NumPy's
global stream and lucid's global stream from ``base_seed + i``; base_seed is drawn
from the loader's ``generator`` (or lucid's global stream) once per epoch.
"""
import itertools
import multiprocessing
import os
import pickle
import queue
import random
import sys
import traceback

import numpy as np

import lucid
from lucid.utils.data.collate import default_collate, default_convert
from lucid.utils.data.dataset import IterableDataset, _batch_gather
from lucid.utils.data.sampler import (BatchSampler, RandomSampler, Sampler,
                                      SequentialSampler, _numpy_rng)

_POLL_SECONDS = 1.0           # how often a waiting main process checks its workers


class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker: ``id``, ``num_workers``,
    ``seed`` and ``dataset`` (the worker's copy)."""
    __slots__ = ("id", "num_workers", "seed", "dataset")

    def __init__(self, id, num_workers, seed, dataset):  # noqa: A002  (torch's name)
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self):
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, "
                f"seed={self.seed}, dataset={type(self.dataset).__name__})")


_worker_info = None


def get_worker_info():
    """The current worker's WorkerInfo, or None in the main process."""
    return _worker_info


# -- fetching one batch (in the main process or a worker) -----------------------------

class _MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn):
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn
        self.gather = _batch_gather(dataset) if collate_fn is default_collate else None

    def fetch(self, index):
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        if self.gather is not None:
            return self.gather(index)
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.collate_fn(self.dataset.__getitems__(index))
        return self.collate_fn([self.dataset[i] for i in index])


class _IterableFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, batch_size, drop_last):
        self.it = iter(dataset)
        self.auto_collation, self.collate_fn = auto_collation, collate_fn
        self.batch_size, self.drop_last = batch_size, drop_last
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.it))
        batch = list(itertools.islice(self.it, self.batch_size))
        if len(batch) < self.batch_size:
            self.ended = True
        if not batch or (self.drop_last and len(batch) < self.batch_size):
            raise StopIteration
        return self.collate_fn(batch)


def _fetcher(loader_args):
    kind_iterable, dataset, auto_collation, collate_fn, batch_size, drop_last = loader_args
    if kind_iterable:
        return _IterableFetcher(dataset, auto_collation, collate_fn, batch_size, drop_last)
    return _MapFetcher(dataset, auto_collation, collate_fn)


class _IterableEnd:
    """A worker's iterable dataset is exhausted."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class _ExceptionWrapper:
    """An exception raised in a worker, re-raised in the main process with the worker's
    traceback in its message."""

    def __init__(self, where):
        exc_type, exc, _ = sys.exc_info()
        self.exc_type = exc_type
        self.msg = f"Caught {exc_type.__name__} {where}.\nOriginal " + "".join(
            traceback.format_exception(exc_type, exc, exc.__traceback__))

    def reraise(self):
        try:
            err = self.exc_type(self.msg)
        except Exception:                       # an exception type that needs other args
            raise RuntimeError(self.msg) from None
        raise err


class _Resume:
    """Start of a new epoch for a persistent worker (recreates its dataset iterator)."""

    def __init__(self, epoch):
        self.epoch = epoch


def _worker_loop(loader_args, index_queue, result_queue, base_seed, init_fn, worker_id,
                 num_workers):
    global _worker_info
    seed = base_seed + worker_id
    random.seed(seed)
    lucid.manual_seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, base_seed]).generate_state(4))
    _worker_info = WorkerInfo(worker_id, num_workers, seed, loader_args[1])
    pending_error = None
    try:
        if init_fn is not None:
            init_fn(worker_id)
        fetcher = _fetcher(loader_args)
    except Exception:
        pending_error = _ExceptionWrapper(f"in DataLoader worker process {worker_id}")
    ended = False
    while True:
        try:
            task = index_queue.get()
        except (EOFError, OSError, KeyboardInterrupt):
            break
        if task is None:
            break
        if isinstance(task, _Resume):
            if pending_error is None:
                fetcher, ended = _fetcher(loader_args), False
            continue
        epoch, idx, index = task
        if ended:
            continue
        if pending_error is not None:
            data, pending_error = pending_error, None
        else:
            try:
                data = fetcher.fetch(index)
            except StopIteration:
                if not loader_args[0]:
                    data = _ExceptionWrapper(f"in DataLoader worker process {worker_id}")
                else:
                    data, ended = _IterableEnd(worker_id), True
            except Exception:
                data = _ExceptionWrapper(f"in DataLoader worker process {worker_id}")
        # pickled here, not in the queue's feeder thread, so a batch that does not
        # pickle becomes an error in the main process instead of a silent hang
        try:
            payload = pickle.dumps((epoch, idx, data), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            err = _ExceptionWrapper(f"in DataLoader worker process {worker_id}")
            err.exc_type = RuntimeError
            payload = pickle.dumps((epoch, idx, err), protocol=pickle.HIGHEST_PROTOCOL)
        result_queue.put(payload)
        del data


# -- the loader --------------------------------------------------------------------------

class DataLoader:
    """Batches of ``dataset``: ``batch_size`` samples collated by ``collate_fn``
    (default_collate), in the order of ``sampler`` / ``batch_sampler`` (shuffle=True:
    a RandomSampler drawing from ``generator``), in ``num_workers`` worker processes
    when > 0. ``pin_memory`` is accepted and ignored (there is no CUDA); loaders over a
    NumPy array, a lucid tensor, a TensorDataset or a Subset of one copy only each
    batch's rows (one gather per array)."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; "
                             "use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set "
                             "prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order
        self._iterable = isinstance(dataset, IterableDataset)

        if self._iterable:
            if shuffle not in (False, None):
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._iterator = None

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else -(-n // self.batch_size)
            return n
        return len(self._index_sampler)

    def _loader_args(self):
        return (self._iterable, self.dataset, self._auto_collation, self.collate_fn,
                self.batch_size, self.drop_last)

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if self.persistent_workers:
            if self._iterator is None or self._iterator._shut:
                self._iterator = _MultiProcessIter(self)
            else:
                self._iterator._reset(first=False)
            return self._iterator
        return _MultiProcessIter(self)


def _draw_base_seed(generator):
    """One draw per epoch from the loader's generator (or lucid's global stream)."""
    return int(_numpy_rng(generator).integers(0, 2 ** 62))


class _InfiniteSampler(Sampler):
    """Dummy indices for an iterable dataset (the dataset decides when to stop)."""

    def __iter__(self):
        return itertools.repeat(None)


class _SingleProcessIter:
    def __init__(self, loader):
        self._loader = loader
        # drawn as the worker iterator draws its base seed, so that a shuffle gives the
        # same order with and without workers (torch draws it in both too)
        _draw_base_seed(loader.generator)
        self._sampler_iter = iter(loader._index_sampler)
        self._fetcher = _fetcher(loader._loader_args())

    def __iter__(self):
        return self

    def __next__(self):
        index = next(self._sampler_iter)
        return self._fetcher.fetch(index)          # StopIteration ends the epoch

    def __len__(self):
        return len(self._loader)


class _MultiProcessIter:
    def __init__(self, loader):
        self._loader = loader
        self._n = loader.num_workers
        self._prefetch = loader.prefetch_factor
        self._timeout = loader.timeout
        self._persistent = loader.persistent_workers
        ctx = loader.multiprocessing_context
        if ctx is None:
            methods = multiprocessing.get_all_start_methods()
            ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
        elif isinstance(ctx, str):
            ctx = multiprocessing.get_context(ctx)
        self._base_seed = _draw_base_seed(loader.generator)
        self._result_queue = ctx.Queue()
        self._index_queues, self._workers = [], []
        for w in range(self._n):
            iq = ctx.Queue()
            p = ctx.Process(target=_worker_loop, daemon=True,
                            args=(loader._loader_args(), iq, self._result_queue,
                                  self._base_seed, loader.worker_init_fn, w, self._n))
            p.start()
            self._index_queues.append(iq)
            self._workers.append(p)
        self._shut = False
        self._epoch = 0
        self._reset(first=True)

    def _reset(self, first):
        if not first:
            _draw_base_seed(self._loader.generator)     # as a new iterator would
            self._epoch += 1
            for q in self._index_queues:
                q.put(_Resume(self._epoch))
        self._sampler_iter = iter(self._loader._index_sampler)
        self._send_idx = self._rcvd_idx = 0
        self._task_info = {}            # idx -> [worker] or [worker, data]
        self._active = [True] * self._n
        self._worker_cycle = itertools.cycle(range(self._n))
        for _ in range(self._prefetch * self._n):
            self._put_index()

    def _put_index(self):
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return
        for _ in range(self._n):
            w = next(self._worker_cycle)
            if self._active[w]:
                break
        else:
            return
        self._index_queues[w].put((self._epoch, self._send_idx, index))
        self._task_info[self._send_idx] = [w]
        self._send_idx += 1

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def _get(self):
        """The next (epoch, idx, data) from any worker, checking that they are alive."""
        waited = 0.0
        while True:
            wait = _POLL_SECONDS
            if self._timeout > 0:
                wait = min(wait, self._timeout - waited)
            try:
                return pickle.loads(self._result_queue.get(timeout=max(wait, 1e-3)))
            except queue.Empty:
                waited += wait
                dead = [p.pid for p in self._workers if not p.is_alive()]
                if dead:
                    self._shutdown()
                    raise RuntimeError(f"DataLoader worker (pid(s) {', '.join(map(str, dead))}) "
                                       "exited unexpectedly") from None
                if self._timeout > 0 and waited >= self._timeout:
                    self._shutdown()
                    raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds") \
                        from None

    def __next__(self):
        if self._shut:
            raise StopIteration
        while True:
            # skip tasks that were sent to a worker whose iterable dataset has ended
            # (and, with in_order=False, tasks already handed out)
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info is not None and (len(info) == 2 or self._active[info[0]]):
                    break
                self._task_info.pop(self._rcvd_idx, None)
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown()
                raise StopIteration
            info = self._task_info[self._rcvd_idx]
            if len(info) == 2:
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
                return self._process(info[1])
            epoch, idx, data = self._get()
            if epoch != self._epoch:          # left over from an epoch cut short
                continue
            if isinstance(data, _IterableEnd):
                self._active[data.worker_id] = False
                continue
            if not self._loader.in_order or idx == self._rcvd_idx:
                del self._task_info[idx]
                if idx == self._rcvd_idx:
                    self._rcvd_idx += 1
                return self._process(data)
            self._task_info[idx].append(data)

    def _process(self, data):
        self._put_index()
        if isinstance(data, _ExceptionWrapper):
            if not self._persistent:
                self._shutdown()
            data.reraise()
        return data

    def _shutdown(self):
        if self._shut:
            return
        self._shut = True
        for q in self._index_queues:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        for p in self._workers:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
                p.join()
        for q in self._index_queues + [self._result_queue]:
            q.cancel_join_thread()
            q.close()

    def __del__(self):
        if os is not None and not getattr(self, "_shut", True):
            self._shutdown()
