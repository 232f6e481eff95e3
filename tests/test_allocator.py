"""lucid's caching allocator (src/lucid_alloc.c): buffers of dead tensors are reused by
size class, the cache is bounded and releasable, and NumPy arrays the user makes are
never touched by it."""
import gc
import os
import pickle
import subprocess
import sys
import tempfile
import threading

import numpy as np
import pytest

import lucid
from lucid._core import core

try:
    from numpy._core.multiarray import get_handler_name
except ImportError:                 # NumPy 1.x
    from numpy.core.multiarray import get_handler_name

pytestmark = pytest.mark.skipif(not core._allocator_stats()["enabled"],
                                reason="lucid's allocator is off (LUCID_ALLOCATOR=0)")

N = 100_000
# Children import the lucid these tests imported (installed, or the built source tree),
# from a directory where an unbuilt source tree cannot shadow it.
LUCID_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(lucid.__file__)))


def _handler(a):
    """The handler of the array that owns a's memory (views report None)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return get_handler_name(a)


def _close(got, want64):
    """float32 results against a float64 reference (lucid's exp is not NumPy's)."""
    np.testing.assert_allclose(got, want64, rtol=4e-7, atol=1e-6)


def _ptr(t):
    return t.numpy().__array_interface__["data"][0]


@pytest.fixture
def fresh_cache():
    limit = core._allocator_stats()["limit"]
    lucid.empty_cache()
    yield
    core._set_allocator_limit(limit)
    lucid.empty_cache()


def test_lucid_outputs_use_the_cache_and_user_arrays_do_not(fresh_cache):
    x = lucid.tensor(np.linspace(-1, 1, N, dtype=np.float32))
    y = lucid.exp(x)
    z = x * x
    assert _handler(y.numpy()) == "lucid_cache"
    assert _handler(z.numpy()) == "lucid_cache"
    # Outside lucid's ops NumPy's own handler is current, also after an op that raised.
    with pytest.raises(Exception):
        x + lucid.ones(3)
    assert get_handler_name() == "default_allocator"
    assert get_handler_name(np.empty(N, np.float32)) == "default_allocator"
    assert get_handler_name(np.exp(x.numpy())) == "default_allocator"


def test_same_size_reuses_the_freed_buffer(fresh_cache):
    x = lucid.tensor(np.arange(N, dtype=np.float32) / N)
    y = lucid.exp(x)
    p = _ptr(y)
    del y
    before = core._allocator_stats()
    assert before["cached_bytes"] >= N * 4
    y2 = lucid.exp(x)
    after = core._allocator_stats()
    assert _ptr(y2) == p
    assert after["hits"] > before["hits"]
    _close(y2.numpy(), np.exp(x.numpy().astype(np.float64)))


def test_reused_buffers_hold_correct_values(fresh_cache):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((300, 333)).astype(np.float32)
    b = rng.standard_normal((300, 333)).astype(np.float32)
    ta, tb = lucid.tensor(a, requires_grad=True), lucid.tensor(b, requires_grad=True)
    for _ in range(3):       # later rounds run on recycled buffers
        ta.grad = tb.grad = None
        out = lucid.exp(ta) * tb - ta / 3.0
        out.sum().backward()
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        _close(out.detach().numpy(), np.exp(a64) * b64 - a64 / 3)
        _close(ta.grad.numpy(), np.exp(a64) * b64 - 1 / 3)
        _close(tb.grad.numpy(), np.exp(a64))


def test_calloc_and_realloc_through_the_cache(fresh_cache):
    junk = core._alloc_scope_run(np.full, N, 7.0)
    del junk                                            # a cached buffer full of 7s
    z = core._alloc_scope_run(np.zeros, N)
    assert _handler(z) == "lucid_cache"
    assert not z.any()
    r = core._alloc_scope_run(np.arange, 1000.0)
    r.resize(N, refcheck=False)                         # NumPy reallocs with r's handler
    np.testing.assert_array_equal(r[:1000], np.arange(1000.0))
    assert not r[1000:].any()
    r.resize(10, refcheck=False)
    np.testing.assert_array_equal(r, np.arange(10.0))


def test_the_cache_is_bounded(fresh_cache):
    limit = 4 << 20
    core._set_allocator_limit(limit)
    x = lucid.tensor(np.ones(N, np.float32))
    live = [lucid.exp(x) for _ in range(40)]          # 40 buffers of one class
    del live
    gc.collect()
    st = core._allocator_stats()
    assert st["cached_bytes"] <= limit
    # one size class keeps at most max(one buffer, limit / 8) (plus small buffers of
    # other classes, here a few hundred bytes)
    assert st["cached_bytes"] <= limit // 8 + 4096
    big = [lucid.exp(lucid.tensor(np.ones(n, np.float32))) for n in (300_000, 600_000, 900_000)]
    del big
    assert core._allocator_stats()["cached_bytes"] <= limit


def test_empty_cache_releases_everything(fresh_cache):
    x = lucid.tensor(np.ones(N, np.float32))
    y = [lucid.exp(x) for _ in range(4)]
    del y
    assert core._allocator_stats()["cached_bytes"] > 0
    lucid.empty_cache()
    assert core._allocator_stats()["cached_bytes"] == 0
    assert core._allocator_stats()["cached_blocks"] == 0


def test_arrays_outlive_tensors_cache_and_interop(fresh_cache):
    x = lucid.tensor(np.linspace(0, 1, N, dtype=np.float32))
    t = lucid.exp(x)
    arr = t.numpy()
    iface = np.asarray(lucid.sin(x))               # __array_interface__ / __array__
    dl = np.from_dlpack(lucid.cos(x))
    pk = pickle.loads(pickle.dumps(lucid.tanh(x)))
    del t
    gc.collect()
    lucid.empty_cache()
    _ = [lucid.exp(x) for _ in range(3)]           # would reuse a wrongly freed buffer
    ref = x.numpy().astype(np.float64)
    _close(arr, np.exp(ref))
    _close(iface, np.sin(ref))
    _close(dl, np.cos(ref))
    _close(pk.numpy(), np.tanh(ref))


def _child(code, **env):
    e = dict(os.environ, PYTHONPATH=LUCID_PARENT, **env)
    return subprocess.run([sys.executable, "-c", code], env=e, cwd=tempfile.gettempdir(),
                          capture_output=True, text=True)


def test_arrays_outlive_lucid_at_interpreter_exit():
    code = ("import numpy as np, lucid\n"
            "x = lucid.tensor(np.ones(100000, np.float32))\n"
            "keep = [lucid.exp(x).numpy() for _ in range(5)]\n"
            "np.testing.assert_allclose(keep[0], np.e, rtol=1e-6)\n"
            "del x\n"
            "import sys; sys.modules['keep'] = keep\n"      # freed late, after lucid
            "print('ok')\n")
    r = _child(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_env_switch_turns_the_allocator_off():
    code = ("import numpy as np, lucid\n"
            "from lucid._core import core\n"
            "from numpy._core.multiarray import get_handler_name\n"
            "y = lucid.exp(lucid.tensor(np.ones(100000, np.float32)))\n"
            "a = y.numpy()\n"
            "while a.base is not None: a = a.base\n"
            "print(core._allocator_stats()['enabled'], get_handler_name(a))\n")
    r = _child(code, LUCID_ALLOCATOR="0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "default_allocator"]


def test_threads_allocate_and_free_each_others_buffers(fresh_cache):
    core._set_allocator_limit(8 << 20)
    rng = np.random.default_rng(2)
    data = [rng.standard_normal(n).astype(np.float32) for n in (1000, 50_000, 100_000, 200_000)]
    handoff, errors = [], []
    lock = threading.Lock()

    def work(seed):
        try:
            for i in range(60):
                a = data[(seed + i) % len(data)]
                y = lucid.exp(lucid.tensor(a)) * 2.0
                _close(y.numpy(), np.exp(a.astype(np.float64)) * 2)
                with lock:            # freed later, by whichever thread pops it
                    handoff.append(y)
                    if len(handoff) > 8:
                        handoff.pop(0)
        except Exception as e:       # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    handoff.clear()
    st = core._allocator_stats()
    assert st["cached_bytes"] <= 8 << 20


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork_while_other_threads_allocate(fresh_cache):
    x = lucid.tensor(np.linspace(-2, 2, N, dtype=np.float32))
    want = (lucid.exp(x) * x).numpy().copy()      # computed before any fork
    warm = [lucid.exp(x) for _ in range(3)]
    del warm                                     # the child inherits a filled cache
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            lucid.exp(x) * x

    t = threading.Thread(target=churn)
    t.start()
    try:
        for _ in range(5):
            pid = os.fork()
            if pid == 0:       # child: lucid's allocator works, values are right
                ok = 1
                try:
                    for _ in range(3):
                        y = lucid.exp(x) * x
                        ok &= bool(np.array_equal(y.numpy(), want))
                    lucid.empty_cache()
                finally:
                    os._exit(0 if ok else 1)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
    finally:
        stop.set()
        t.join()
