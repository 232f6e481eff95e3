"""Helpers shared by bench/conftest.py and the benchmark modules.

Environment knobs (all optional):

  LUCID_BENCH_THREADS   comma list of thread counts every case runs at, with lucid
                        and torch both set to the same count   (default "1,2")
  LUCID_BENCH_FULL=1    the full matrix: every op at every size (1, 1e3, 1e5, 1e7),
                        every thread count at every size, fwd_rg at every size
  LUCID_BENCH_OPS       comma list: only these ops (e.g. "erf,erfc")
  LUCID_BENCH_1E7_OPS   ops benchmarked at 1e7 outside the full matrix
                        (default "exp,erf,sqrt,gelu")
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _int_list(text: str) -> list:
    out = []
    for tok in text.replace(" ", "").split(","):
        if tok:
            n = int(tok)
            if n < 1:
                raise ValueError(f"LUCID_BENCH_THREADS: thread counts must be >= 1, got {n}")
            if n not in out:
                out.append(n)
    return out or [1]


def _name_list(text):
    return [t for t in (text or "").replace(" ", "").split(",") if t]


# Thread counts every case is parametrised over (lucid and torch set alike).
THREAD_SET = _int_list(os.environ.get("LUCID_BENCH_THREADS", "1,2"))
THREADS = max(THREAD_SET)  # what the OpenMP runtimes are allowed at most
FULL = os.environ.get("LUCID_BENCH_FULL", "").strip().lower() not in ("", "0", "false", "no")
ONLY_OPS = _name_list(os.environ.get("LUCID_BENCH_OPS"))
OPS_1E7 = _name_list(os.environ.get("LUCID_BENCH_1E7_OPS", "exp,erf,sqrt,gelu"))

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


def load_unary_table() -> list:
    """lucid's unary op table joined with its references and domains
    (``tests/op_data.py``, which reads the table from the source tree when lucid
    itself does not import, so that the benchmarks still collect)."""
    sys.path.insert(0, os.path.join(REPO_ROOT, "tests"))
    from op_data import unary_rows
    return unary_rows()


def _lucid_thread_api():
    """(setter, getter) for lucid's thread count, or Nones.

    Looked up on ``lucid`` first, then on ``lucid._core._C``.
    """
    lucid, _ = import_lucid()
    if lucid is None:
        return None, None
    mods = [lucid]
    try:
        mods.append(importlib.import_module("lucid._core._C"))
    except Exception:
        pass
    setter = getter = None
    for m in mods:
        setter = setter or getattr(m, "set_num_threads", None)
        getter = getter or getattr(m, "get_num_threads", None)
    return setter, getter


def set_threads(n: int) -> dict:
    """Set lucid and torch to ``n`` threads; return what each reports back."""
    info = {}
    setter, getter = _lucid_thread_api()
    if setter is not None:
        setter(n)
    if getter is not None:
        info["lucid"] = getter()
    elif import_lucid()[0] is None:
        info["lucid"] = "not importable"
    else:
        info["lucid"] = "no set_num_threads"
    torch = sys.modules.get("torch")
    if torch is None and importlib.util.find_spec("torch") is not None:
        torch = importlib.import_module("torch")
    if torch is None:
        info["torch"] = "not installed"
    else:
        torch.set_num_threads(n)
        info["torch"] = torch.get_num_threads()
    return info


def pin_threads() -> dict:
    """Check every thread count of THREAD_SET once; return printable info.

    {"n=1": "lucid=1 torch=1", ..., "OMP_NUM_THREADS": ...}.  Leaves both
    libraries at THREAD_SET[0]; every benchmark sets its own count anyway.
    """
    info = {}
    for n in THREAD_SET:
        got = set_threads(n)
        info[f"n={n}"] = " ".join(f"{k}={v}" for k, v in got.items())
    set_threads(THREAD_SET[0])
    info["numpy/scipy ufuncs"] = "1 (single-threaded loops)"
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        info[var] = os.environ.get(var, "unset")
    return info
