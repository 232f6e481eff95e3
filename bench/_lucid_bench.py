"""Helpers shared by bench/conftest.py and the benchmark modules."""

from __future__ import annotations

import importlib
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Thread count every library is pinned to (override: LUCID_BENCH_THREADS=N).
THREADS = int(os.environ.get("LUCID_BENCH_THREADS", "1"))

_lucid_cache: list = []


def import_lucid():
    """Return (lucid module, None) or (None, reason).  Imported once.

    Falls back to the repo root on sys.path so that ``pytest bench`` (which,
    unlike ``python -m pytest``, does not put the cwd on sys.path) finds an
    in-place build (``python setup.py build_ext --inplace``).
    """
    if _lucid_cache:
        return _lucid_cache[0]
    result = _try_import()
    if result[0] is None and REPO_ROOT not in sys.path:
        sys.modules.pop("lucid", None)
        sys.path.insert(0, REPO_ROOT)
        result = _try_import()
    _lucid_cache.append(result)
    return result


def _try_import():
    try:
        mod = importlib.import_module("lucid")
    except Exception as exc:  # ImportError, or a half-built extension
        return None, f"{type(exc).__name__}: {exc}"
    if getattr(mod, "__file__", None) is None or not hasattr(mod, "tensor"):
        return None, f"'lucid' at {list(getattr(mod, '__path__', []))} is not built (no lucid.tensor)"
    return mod, None


def pin_threads():
    """Pin torch (and lucid, when it exposes set_num_threads) to THREADS.

    Returns {library: thread count as reported back} for printing.
    """
    info = {}
    try:
        import torch
    except ImportError:
        info["torch"] = "not installed"
    else:
        torch.set_num_threads(THREADS)
        info["torch"] = torch.get_num_threads()
    lucid, _ = import_lucid()
    if lucid is None:
        info["lucid"] = "not importable"
    else:
        setter = getattr(lucid, "set_num_threads", None)
        getter = getattr(lucid, "get_num_threads", None)
        if setter is not None:
            setter(THREADS)
        info["lucid"] = getter() if getter is not None else (
            "set_num_threads(%d)" % THREADS if setter is not None else "no set_num_threads")
    info["numpy/scipy ufuncs"] = "1 (single-threaded loops)"
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        info[var] = os.environ.get(var, "unset")
    return info
