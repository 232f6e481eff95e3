"""The lookup tables of the half unary forwards (src/lucid_half.c).

Once a float32 kernel has mapped enough float16 / bfloat16 elements, lucid keeps its
results for all 65536 half bit patterns in a table and reads them from there. The
table is filled by the compute path itself, so the two must agree bit for bit. Checked
here for every UNARY row that keeps the half dtype (read from the op table), over every
bit pattern of both half types: the table path (mode 2: a table on first use) against
the compute path (mode 0: no tables), and both against the row's NumPy / SciPy
reference in float64 rounded to the half type, within one half ULP, over the row's
domain. Also: thread counts, ``lucid.empty_cache()``, the LUCID_HALF_TABLES switch,
and the portable (scalar) lookup in a process capped to LUCID_HALF_ISA=c.
"""
import os

import ml_dtypes
import numpy as np
import pytest
import scipy.special as sp

import lucid
from lucid._core import optable, unary
from lucid_testutils import child_env, run_child
from op_data import UNARY_DATA

HALF = ("float16", "bfloat16")
NP_HALF = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def _every(dtname):
    return np.arange(1 << 16, dtype=np.uint16).view(NP_HALF[dtname])


def _half_rows():
    """The UNARY rows whose op keeps a half input's dtype (the others compute in float32
    by their AMP policy, and never reach a half kernel)."""
    x = lucid.from_numpy(np.ones(4, np.float16))
    return [r["name"] for r in optable.UNARY if getattr(lucid, r["name"])(x).dtype is lucid.float16]


ROWS = _half_rows()


class _mode:
    """Sets the half table mode for a block, and puts the old one back."""

    def __init__(self, mode):
        self.mode = mode

    def __enter__(self):
        self.old = unary._half_tables(self.mode)[0]

    def __exit__(self, *exc):
        unary._half_tables(self.old)


def _run(name, x):
    with lucid.no_grad():
        return getattr(lucid, name)(lucid.from_numpy(x)).numpy()


def _assert_same(got, want, what):
    """Bit for bit, nan payloads included (both come from the same float32 kernel)."""
    g, w = got.view(np.uint16), want.view(np.uint16)
    if not np.array_equal(g, w):
        i = np.flatnonzero(g != w)[:5]
        raise AssertionError(f"{what}: {(g != w).sum()} differ, e.g. patterns "
                             f"{[hex(v) for v in i]}: got {g[i]} want {w[i]}")


def _half_ulps(a, b):
    """|a - b| in half ULPs (the types' bit patterns in order); nan vs nan is 0."""
    def ordered(v):
        u = v.view(np.uint16).astype(np.int64)
        return np.where(u & 0x8000, -(u & 0x7fff), u)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    d = np.abs(ordered(a) - ordered(b)).astype(np.float64)
    d[np.isnan(a32) | np.isnan(b32)] = np.inf
    d[np.isnan(a32) & np.isnan(b32)] = 0
    return d


def check_rows(dtname, rows=ROWS):
    """Per row: table path == compute path on every pattern, and the reference holds."""
    every = _every(dtname)
    lucid.empty_cache()                     # (tables of earlier tests would not count)
    before = unary._half_tables()[1]
    for name in rows:
        with _mode(0):
            computed = _run(name, every)
        with _mode(2):
            tabled = _run(name, every)
        _assert_same(tabled, computed, f"{dtname} {name}: table vs compute")
        data = UNARY_DATA[name]
        lo, hi = data["domain"]
        with np.errstate(all="ignore"):
            x = every.astype(np.float64)
            inside = (x >= lo) & (x <= hi)
            ref = np.asarray(eval(data["ref"], {"np": np, "sp": sp}, {"x": x[inside]}),
                             np.float64).astype(NP_HALF[dtname])
        d = _half_ulps(tabled[inside], ref)
        assert d.max() <= 1, (f"{dtname} {name}: {(d > 1).sum()} in-domain patterns over 1 ULP,"
                              f" e.g. x={x[inside][np.argmax(d)]}")
    # relu works on the bit patterns and never builds one; every other row has a table
    assert unary._half_tables()[1] - before >= len([r for r in rows if r != "relu"]) > 0


@pytest.mark.parametrize("dtname", HALF)
def test_every_row_table_equals_compute(dtname):
    check_rows(dtname)


def test_rows_are_found():
    """The rows come from the op table: the Promote ones, with relu and tanh among them."""
    assert {"tanh", "sin", "gelu", "relu", "lgamma"} <= set(ROWS)
    assert "exp" not in ROWS           # ForceFP32: float32 out


@pytest.mark.parametrize("dtname", HALF)
def test_thread_counts_give_the_same_bits(dtname):
    """On the pool (large inputs), 1, 2 and 4 threads: the same bits, tables or not."""
    x = np.tile(_every(dtname), 6)[::-1].copy()      # 393216 elements, several pieces
    before = lucid.get_num_threads()
    outs = []
    try:
        for mode in (0, 2):
            with _mode(mode):
                for threads in (1, 2, 4):
                    lucid.set_num_threads(threads)
                    outs.append([_run(n, x) for n in ("tanh", "sin", "gelu", "atan")])
    finally:
        lucid.set_num_threads(before)
    for other in outs[1:]:
        for a, b, n in zip(outs[0], other, ("tanh", "sin", "gelu", "atan")):
            _assert_same(b, a, f"{dtname} {n}")


def test_empty_cache_frees_the_tables():
    x = _every("float16")
    with _mode(2):
        want = _run("tanh", x)
        assert unary._half_tables()[1] >= 1
        lucid.empty_cache()
        assert unary._half_tables()[1] == 0
        _assert_same(_run("tanh", x), want, "rebuilt after empty_cache")
        assert unary._half_tables()[1] >= 1


def test_small_inputs_do_not_build_a_table():
    """By default a function gets a table only after 65536 elements went through it."""
    lucid.empty_cache()
    x = _every("bfloat16")[:1000]
    with _mode(1):
        for _ in range(10):
            _run("asinh", x)
        assert unary._half_tables()[1] == 0


def test_the_mode_is_checked():
    with pytest.raises(ValueError, match="mode"):
        unary._half_tables(3)


_CHILD = ("import numpy as np, lucid; from lucid._core import unary; "
          "x = lucid.from_numpy(np.arange(1 << 16, dtype=np.uint16).view(np.float16)); "
          "[lucid.sin(x) for _ in range(3)]; print(unary._half_tables())")


@pytest.mark.parametrize("env, mode", [("0", 0), ("2", 2)])
def test_the_environment_switch(env, mode):
    """LUCID_HALF_TABLES=0 keeps every half forward on the compute path; =2 builds on
    first use."""
    r = run_child(_CHILD, env=child_env(LUCID_HALF_TABLES=env))
    assert r.returncode == 0, r.stderr[-3000:]
    got_mode, count = eval(r.stdout.strip().splitlines()[-1])
    assert got_mode == mode
    assert (count == 0) if mode == 0 else (count == 1)


def test_portable_lookup():
    """The scalar lookup (no AVX-512): the same checks in a process capped to C."""
    here = os.path.dirname(os.path.abspath(__file__))
    code = ("import sys; sys.path.insert(0, %r); import lucid, test_half_tables as t; "
            "assert lucid.backend_info()['half_isa'] == 'c'; "
            "[t.check_rows(d, ['tanh', 'sin', 'gelu', 'lgamma']) for d in t.HALF]" % here)
    r = run_child(code, env=child_env(LUCID_HALF_ISA="c"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
