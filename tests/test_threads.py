"""Threads: results are bitwise the same for any thread count, chunking or layout."""
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import lucid
from op_data import unary_rows
from lucid_testutils import child_env, run_child

ROWS = [r for r in unary_rows() if r["saves"]]   # rows with a fused backward kernel too


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bitwise_same_for_any_thread_count(row, dtype, threads):
    lo, hi = row["domain"]
    n = (1 << 16) + 37                       # above the threading threshold, odd tail
    x = np.random.default_rng(0).uniform(lo, hi, n).astype(dtype)
    fn = getattr(lucid, row["name"])
    outs, grads = [], []
    for nt in (1, 2, 3, 4):
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
    out = run_child(code, env=child_env(LUCID_NUM_THREADS="3"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3"
    bad = run_child(code, env=child_env(LUCID_NUM_THREADS="zero"), cwd=tmp_path)
    assert bad.returncode != 0 and "LUCID_NUM_THREADS" in bad.stderr


# -- free cores: with every core busy, a call runs alone or lean ---------------------

POOL_COUNTS = """
import json, numpy as np, lucid
from lucid._core import core
lucid.set_num_threads(2)
t = lucid.tensor(np.linspace(-3, 3, 100000, dtype=np.float32))
want = lucid.erf(t).numpy().tobytes()
same = all(lucid.erf(t).numpy().tobytes() == want for _ in range(40))
lucid.set_num_threads(1)
same = same and lucid.erf(t).numpy().tobytes() == want
print(json.dumps([same, *core._pool_counts()]))
"""


def _runnable():
    with open("/proc/loadavg") as f:
        return int(f.read().split()[3].split("/")[0])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts /proc/loadavg")
def test_busy_cores_change_how_calls_run(tmp_path):
    import json
    ncpu = os.cpu_count()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(ncpu + 1)]
    try:
        for _ in range(300):                 # until the spinners show up as runnable
            if _runnable() >= ncpu + 1:
                break
            time.sleep(0.02)
        else:
            pytest.skip("the busy processes never showed as runnable")
        runs = {d: run_child(POOL_COUNTS, env=child_env(LUCID_DYNAMIC_THREADS=d), cwd=tmp_path)
                for d in ("1", "0")}
    finally:
        for p in busy:
            p.kill()
            p.wait()
    for d, out in runs.items():
        assert out.returncode == 0, out.stderr
    same, par, alone, lean = json.loads(runs["1"].stdout)
    assert same and alone + lean > 0 and alone + lean >= par   # every core busy
    same, par, alone, lean = json.loads(runs["0"].stdout)
    assert same and alone == lean == 0 and par > 0             # off: always the workers


@pytest.mark.parametrize("name, good, bad", [
    ("LUCID_DYNAMIC_THREADS", ["0", "1", "off", "Yes"], ["sometimes", "2"]),
    ("LUCID_ALLOCATOR", ["0", "1", "on", "false"], ["maybe"]),
    ("LUCID_HALF_TABLES", ["0", "1", "2"], ["3", "on"]),
    ("LUCID_HALF_ISA", ["c", "f16c", "avx512", "AVX512FP16"], ["sse", "avx2"]),
])
def test_env_switches_are_validated(name, good, bad, tmp_path):
    code = "import lucid; print(float(lucid.erf(lucid.tensor(0.5))))"
    for value in good:
        out = run_child(code, env=child_env(**{name: value}), cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert abs(float(out.stdout) - math.erf(0.5)) < 1e-6
    for value in bad:
        out = run_child(code, env=child_env(**{name: value}), cwd=tmp_path)
        assert out.returncode != 0 and name in out.stderr and "Traceback" in out.stderr


def test_backend_info_reports_the_cpu_path():
    info = lucid.backend_info()
    assert info["isa"] in {"sse2", "avx2", "avx512", "baseline"}
    assert info["mathlib"]
    assert info["threads"] >= 1


# -- the pool: sizes, fork safety, concurrent callers ------------------------------

@pytest.mark.parametrize("bad", [0, -1, -(2**40), 257, 10**6, 2**40])
def test_set_num_threads_rejects_what_it_cannot_honour(bad, threads):
    before = lucid.get_num_threads()
    with pytest.raises(ValueError):
        lucid.set_num_threads(bad)
    assert lucid.get_num_threads() == before


@pytest.mark.parametrize("bad", [2.5, "2", None, True])
def test_set_num_threads_rejects_non_integers(bad, threads):
    with pytest.raises(TypeError):
        lucid.set_num_threads(bad)


def test_set_num_threads_resizes_the_pool(threads):
    from lucid._core import core
    lucid.set_num_threads(4)
    assert core._pool_workers() == 3
    lucid.set_num_threads(2)
    assert core._pool_workers() == 1
    x = lucid.tensor(np.linspace(-3, 3, 1 << 17, dtype=np.float32))
    want = np.asarray(lucid.erf(x).numpy())
    lucid.set_num_threads(1)
    assert core._pool_workers() == 0
    assert lucid.erf(x).numpy().tobytes() == want.tobytes()
    lucid.set_num_threads(3)
    assert lucid.erf(x).numpy().tobytes() == want.tobytes()


@pytest.mark.parametrize("nthreads", [2, 3, 8])
def test_pool_runs_every_piece_exactly_once(nthreads, threads):
    # jobs of 1-97 pieces back to back, more threads than cores among them: each
    # thread starts on its own range of pieces and then takes the others' (the
    # counters carry the job's epoch, so a late worker never runs a piece twice or
    # one of the next job)
    from lucid._core import core
    assert core._pool_check(20000, nthreads) == 0


def test_concurrent_callers_get_correct_results(threads):
    """Python threads calling large kernels at once: the one that finds the pool busy
    runs its job alone; every result is still exact."""
    import threading
    lucid.set_num_threads(2)
    xs = [np.random.default_rng(i).uniform(-3, 3, (1 << 16) + i).astype(np.float32)
          for i in range(4)]
    want = [lucid.erf(lucid.tensor(x)).numpy().tobytes() for x in xs]
    bad = []

    def work(i):
        t = lucid.tensor(xs[i])
        for _ in range(30):
            if lucid.erf(t).numpy().tobytes() != want[i]:
                bad.append(i)
    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad


_FORK_SCRIPT = r'''
import multiprocessing as mp
import sys

import numpy as np

import lucid
from lucid._core import core

N = (1 << 17) + 5


def kernels():
    x = lucid.tensor(np.linspace(-3, 3, N, dtype=np.float32))
    m = lucid.tensor(np.linspace(-3, 3, 300 * 517).reshape(300, 517))
    return (lucid.erf(x).numpy().tobytes() + lucid.softmax(m, 1).numpy().tobytes()
            + lucid.sum(m, 0).numpy().tobytes())


def child(q, method):
    before = core._pool_workers()
    if method != "fork":
        lucid.set_num_threads(2)
    out = kernels()
    q.put((before, core._pool_workers(), lucid.get_num_threads(), out))


if __name__ == "__main__":
    method = sys.argv[1]
    lucid.set_num_threads(2)
    want = kernels()                      # the parent's pool has a worker now
    assert core._pool_workers() == 1
    ctx = mp.get_context(method)
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q, method))
    p.start()
    before, after, nt, out = q.get()
    p.join()
    assert p.exitcode == 0, p.exitcode
    if method == "fork":
        assert before == 0, before        # the child starts with no workers ...
    assert nt == 2 and after == 1, (nt, after)   # ... and makes its own on demand
    assert out == want
    assert kernels() == want              # the parent's pool still works
    print("ok")
'''


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_pool_survives_process_start_methods(method, tmp_path):
    """The parent ran a multi-threaded kernel, then a child (fork / spawn / forkserver)
    runs multi-threaded kernels too. The timeout only turns a hang into a failure."""
    import multiprocessing as mp
    if method not in mp.get_all_start_methods():
        pytest.skip(f"{method} not available")
    script = tmp_path / "fork_check.py"
    script.write_text(_FORK_SCRIPT)
    try:
        out = run_child([str(script), method], cwd=tmp_path, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{method}: the child (or the parent) hung")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
