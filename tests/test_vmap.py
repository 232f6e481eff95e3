"""lucid.vmap is a transform with batching rules (torch.func.vmap is the reference): the
function runs once on batched tensors; an op without a rule makes it run once per
example, with a warning, never a guess."""
import os
import warnings

os.environ.setdefault("LUCID_MLX_DEVICE", "cpu")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import lucid  # noqa: E402
import lucid.nn.functional as F  # noqa: E402

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(7)
W = RNG.standard_normal((3, 4))
W2 = RNG.standard_normal((4, 3))
V = RNG.standard_normal(3)


def _both(make, *arrays, in_dims=0, out_dims=0, chunk_size=None, grad=True):
    """lucid.vmap and torch.vmap of make(lucid) / make(torch) on the same data: values
    and the gradients of sum(outputs) agree; returns the lucid vmapped function."""
    lx = [lucid.tensor(a, requires_grad=grad) for a in arrays]
    tx = [torch.tensor(a, requires_grad=grad) for a in arrays]
    vf = lucid.vmap(make(lucid, F), in_dims, out_dims, chunk_size=chunk_size)
    got = vf(*lx)
    want = torch.func.vmap(make(torch, TF), in_dims, out_dims, chunk_size=chunk_size)(*tx)
    gl = got if isinstance(got, (tuple, list)) else [got]
    wl = want if isinstance(want, (tuple, list)) else [want]
    for g, w in zip(gl, wl):
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12,
                                   atol=1e-12)
    if grad:
        sum(g.sum() for g in gl).backward()
        sum(w.sum() for w in wl).backward()
        for a, b in zip(lx, tx):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-11, atol=1e-12)
    return vf


# Functions whose meaning depends on the example: the old "run on the batch" guess got
# every one of them wrong for some example.
BATCHED = {
    "x * x.max()": lambda M, f: (lambda x: x * x.max()),
    "W @ x exp sum": lambda M, f: (lambda x: (M.tensor(W2) @ x).exp().sum()),
    "x @ W": lambda M, f: (lambda x: x @ M.tensor(W)),
    "matmul fn": lambda M, f: (lambda x: M.matmul(x, M.tensor(W)).tanh().sum(-1)),
    "x.sum()": lambda M, f: (lambda x: x.sum()),
    "centre": lambda M, f: (lambda x: x - x.mean()),
    "outer": lambda M, f: (lambda x: M.outer(x, x)),
    "dot": lambda M, f: (lambda x: M.dot(x, x)),
    "softmax dim 0": lambda M, f: (lambda x: M.softmax(x, 0) * x[1:2].sum()),
    "log_softmax F": lambda M, f: (lambda x: f.log_softmax(x, dim=-1)),
    "max with dim": lambda M, f: (lambda x: x.max(0).values * x.argmax()),
    "norm": lambda M, f: (lambda x: x / x.norm()),
    "std/var": lambda M, f: (lambda x: x.std() + x.var(0, keepdim=True)),
    "reshape/transpose": lambda M, f: (lambda x: x.reshape(1, 3).t().unsqueeze(0).squeeze()),
    "index": lambda M, f: (lambda x: x[0] * x[-1] + x[:2].sum()),
    "where/clamp": lambda M, f: (lambda x: M.where(x > 0, x, -x).clamp(max=0.5)),
    "linear/relu": lambda M, f: (lambda x: f.relu(f.linear(x, M.tensor(W).t(),
                                                          M.tensor(np.ones(4))))),
    "stack/cat": lambda M, f: (lambda x: M.cat([M.stack([x, x * 2], 0).flatten(),
                                                M.tensor(V)], 0)),
    "const output": lambda M, f: (lambda x: (x.sum(), M.tensor(V))),
    "x @ vector": lambda M, f: (lambda x: x @ M.tensor(V)),
    "cumsum": lambda M, f: (lambda x: x.cumsum(0) * M.exp(x)),
    "logsumexp": lambda M, f: (lambda x: M.logsumexp(x, 0) - x),
}


@pytest.mark.parametrize("name", list(BATCHED))
def test_batched_functions_run_once_and_match_torch(name):
    make = BATCHED[name]
    if name == "const output":
        vf = lucid.vmap(make(lucid, F))
        got = vf(lucid.tensor(RNG.standard_normal((5, 3))))
        want = torch.func.vmap(make(torch, TF))(torch.tensor(RNG.standard_normal((5, 3))))
        assert vf.batched and tuple(got[1].shape) == tuple(want[1].shape) == (5, 3)
        np.testing.assert_array_equal(got[1].numpy(), np.tile(V, (5, 1)))
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # a rule exists: no per-example warning
        vf = _both(make, RNG.standard_normal((5, 3)))
    assert vf.batched is True


def test_the_function_is_called_once_on_example_shaped_tensors():
    calls = []
    Wt = lucid.tensor(W2)

    def f(x):
        calls.append(tuple(x.shape))
        return (Wt @ x).exp().sum()

    out = lucid.vmap(f)(lucid.tensor(RNG.standard_normal((6, 3))))
    assert calls == [(3,)] and tuple(out.shape) == (6,)


def test_an_op_without_a_rule_runs_per_example_with_one_warning():
    a = RNG.standard_normal((4, 3))

    def f(x):
        return x * float(x.sum())               # a data-dependent read

    vf = lucid.vmap(f)
    with pytest.warns(UserWarning, match="no batching rule"):
        got = vf(lucid.tensor(a))
    assert vf.batched is False
    np.testing.assert_allclose(got.numpy(), a * a.sum(1, keepdims=True), rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # once per function and op
        vf(lucid.tensor(a))


def test_in_dims_out_dims_and_tuples_as_torch():
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal(3)
    _both(lambda M, f: (lambda x, y: (x * y, x.sum(-1, keepdim=True))), a, b,
          in_dims=(1, None), out_dims=1)
    _both(lambda M, f: (lambda x, y: (x * y, x.sum(-1))), a, RNG.standard_normal((4, 3)),
          in_dims=(1, 0), out_dims=(0, 0))
    with pytest.raises(ValueError):
        lucid.vmap(lambda x, y: x + y)(lucid.ones(3, 2), lucid.ones(4, 2))
    with pytest.raises(RuntimeError):
        lucid.vmap(lambda x: x, in_dims=(0, 0))(lucid.ones(3))


@pytest.mark.parametrize("chunk_size", [1, 2, 5, 9])
def test_chunk_size_as_torch(chunk_size):
    _both(BATCHED["x * x.max()"], RNG.standard_normal((5, 3)), chunk_size=chunk_size)


def test_nested_vmap_is_exact():
    # the inner vmap has no rule under the outer one yet: the outer runs per example
    a = RNG.standard_normal((2, 3, 4))
    with pytest.warns(UserWarning, match="vmap of a vmapped function"):
        got = lucid.vmap(lucid.vmap(lambda x: x * x.max()))(lucid.tensor(a))
    want = torch.func.vmap(torch.func.vmap(lambda x: x * x.max()))(torch.tensor(a))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_helpers_of_the_same_module_batch_too():
    _both(lambda M, f: (lambda x: _helper(M, x)), RNG.standard_normal((4, 3)))


def _helper(M, x):
    return M.exp(x - x.max()) / M.exp(x - x.max()).sum()


@pytest.mark.skipif(not lucid.gpu_available(), reason="no gpu device (MLX)")
def test_vmap_on_the_gpu_device():
    a = RNG.standard_normal((5, 3)).astype(np.float32)
    x = lucid.tensor(a).to("gpu")
    vf = lucid.vmap(lambda x: x * x.max() + lucid.softmax(x, 0))
    got = vf(x)
    want = torch.func.vmap(lambda x: x * x.max() + torch.softmax(x, 0))(torch.tensor(a))
    assert got.device == x.device and vf.batched
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
