"""Threads: results are bitwise the same for any thread count, chunking or layout."""
import os
import subprocess
import sys

import numpy as np
import pytest

import lucid
from op_data import unary_rows

ROWS = [r for r in unary_rows() if r["saves"]]   # rows with a fused backward kernel too


@pytest.fixture
def threads():
    old = lucid.get_num_threads()
    yield
    lucid.set_num_threads(old)


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bitwise_same_for_any_thread_count(row, dtype, threads):
    lo, hi = row["domain"]
    n = (1 << 16) + 37                       # above the threading threshold, odd tail
    x = np.random.default_rng(0).uniform(lo, hi, n).astype(dtype)
    fn = getattr(lucid, row["name"])
    outs, grads = [], []
    for nt in (1, 2, 3):
        lucid.set_num_threads(nt)
        t = lucid.tensor(x, requires_grad=True)
        y = fn(t)
        y.sum().backward()
        outs.append(y.detach().numpy())
        grads.append(t.grad.numpy())
    for o, g in zip(outs[1:], grads[1:]):
        assert o.tobytes() == outs[0].tobytes()
        assert g.tobytes() == grads[0].tobytes()


@pytest.mark.parametrize("row", ROWS[:8], ids=[r["name"] for r in ROWS[:8]])
def test_strided_input_matches_contiguous_bitwise(row):
    lo, hi = row["domain"]
    base = np.random.default_rng(1).uniform(lo, hi, (300, 260)).astype(np.float32)
    fn = getattr(lucid, row["name"])
    view = lucid.from_numpy(base).transpose(0, 1)[::2, 1::3]   # non-contiguous, > one chunk
    want = fn(lucid.tensor(np.ascontiguousarray(view.numpy()))).numpy()
    got = fn(view).numpy()
    assert got.shape == want.shape
    assert np.ascontiguousarray(got).tobytes() == want.tobytes()


def test_set_num_threads_validates(threads):
    with pytest.raises(ValueError):
        lucid.set_num_threads(0)
    lucid.set_num_threads(3)
    assert lucid.get_num_threads() == 3
    assert lucid.backend_info()["threads"] == 3


def test_env_variable_sets_default_threads(tmp_path):
    # run outside the source tree, so `python -c` imports the lucid this test imported
    code = "import lucid; print(lucid.get_num_threads())"
    where = os.path.dirname(os.path.dirname(os.path.abspath(lucid.__file__)))
    env = dict(os.environ, LUCID_NUM_THREADS="3", PYTHONPATH=where)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3"
    env["LUCID_NUM_THREADS"] = "zero"
    bad = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=tmp_path)
    assert bad.returncode != 0 and "LUCID_NUM_THREADS" in bad.stderr


def test_backend_info_reports_the_cpu_path():
    info = lucid.backend_info()
    assert info["isa"] in {"sse2", "avx2", "avx512", "baseline"}
    assert info["mathlib"]
    assert info["threads"] >= 1
