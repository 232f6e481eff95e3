"""What a training step relies on besides the layers' math: a leaf takes a gradient the
engine alone holds without copying it, and never one that anything else can reach (the
engine decides from the array's references, so both directions are checked here); and
a full Linear-ReLU-Linear step with Adam agrees with torch's."""
import numpy as np
import pytest

import lucid
from lucid import nn, optim
from lucid.autograd import Function


def _fresh_grad_function(keep=None):
    """A Function (identity forward) whose backward returns a new array of 3s, recording
    its address; with ``keep`` a list, the returned tensor is also kept there."""
    seen = {}

    class Fresh(Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            a = np.full(tuple(g.shape), 3.0, dtype=np.float32)
            seen["addr"] = a.ctypes.data
            t = lucid.from_numpy(a)
            if keep is not None:
                keep.append(t)
            return t

    return Fresh, seen


def test_leaf_takes_an_unshared_gradient_without_a_copy():
    Fresh, seen = _fresh_grad_function()
    x = lucid.zeros(5, requires_grad=True)
    Fresh.apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(5, 3.0, np.float32))
    assert x.grad.numpy().ctypes.data == seen["addr"]


def test_leaf_copies_a_gradient_that_user_code_still_holds():
    keep = []
    Fresh, _ = _fresh_grad_function(keep)
    x = lucid.zeros(5, requires_grad=True)
    Fresh.apply(x).sum().backward()
    assert not np.shares_memory(x.grad.numpy(), keep[0].numpy())
    x.grad.numpy()[:] = 7.0
    np.testing.assert_array_equal(keep[0].numpy(), np.full(5, 3.0, np.float32))


def test_leaf_copies_a_gradient_kept_by_a_retained_graph():
    # the backward's result is saved nowhere, but retain_graph keeps the root gradient
    # and every node: a second backward must see the same values
    x = lucid.tensor(np.arange(4.0, dtype=np.float32), requires_grad=True)
    y = (x * 2.0).sum()
    y.backward(retain_graph=True)
    first = x.grad
    x.grad = None
    y.backward()
    np.testing.assert_array_equal(first.numpy(), np.full(4, 2.0, np.float32))
    np.testing.assert_array_equal(x.grad.numpy(), np.full(4, 2.0, np.float32))
    assert not np.shares_memory(first.numpy(), x.grad.numpy())


def test_inputs_sharing_one_gradient_array_get_separate_grads():
    # AddBackward hands the same array to both inputs, identity-like nodes pass it on
    a = lucid.zeros(6, requires_grad=True)
    b = lucid.zeros(6, requires_grad=True)
    (a + b).sum().backward()
    assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())
    a.grad.numpy()[:] = 5.0
    np.testing.assert_array_equal(b.grad.numpy(), np.ones(6, np.float32))


def test_gradient_passed_by_the_caller_is_not_taken():
    x = lucid.zeros(3, requires_grad=True)
    g = lucid.ones(3)
    (x + 0.0).backward(gradient=g)
    assert not np.shares_memory(x.grad.numpy(), g.numpy())
    x.grad.numpy()[:] = 9.0
    np.testing.assert_array_equal(g.numpy(), np.ones(3, np.float32))


def test_hooked_leaf_gradient_is_not_aliased_with_what_the_hook_saw():
    seen = []
    x = lucid.zeros(4, requires_grad=True)
    x.register_hook(lambda g: seen.append(g))
    (x * 3.0).sum().backward()
    x.grad.numpy()[:] = -1.0
    np.testing.assert_array_equal(seen[0].numpy(), np.full(4, 3.0, np.float32))


def test_linear_weight_gradient_is_owned_and_contiguous():
    lin = nn.Linear(8, 4)
    x = lucid.from_numpy(np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32))
    lin(x).sum().backward()
    for p in lin.parameters():
        arr = p.grad.numpy()
        assert arr.flags.c_contiguous and arr.flags.writeable and arr.shape == tuple(p.shape)
        assert not np.shares_memory(arr, p.detach().numpy())


@pytest.mark.parametrize("width", [16, 64])
def test_mlp_adam_steps_match_torch(width):
    """Three steps of Linear-ReLU-Linear + cross entropy + Adam against torch from the
    same weights (what bench/test_train_bench.py times)."""
    torch = pytest.importorskip("torch")
    lucid.manual_seed(0)
    lm = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    tm = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                             torch.nn.Linear(width, 10))
    tm.load_state_dict({k: torch.from_numpy(np.array(v.numpy(), copy=True))
                        for k, v in lm.state_dict().items()})
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((32, width)).astype(np.float32)
    ys = rng.integers(0, 10, 32)
    lopt = optim.Adam(lm.parameters(), lr=1e-2)
    topt = torch.optim.Adam(tm.parameters(), lr=1e-2)
    for _ in range(3):
        lopt.zero_grad()
        loss = nn.functional.cross_entropy(lm(lucid.from_numpy(xs)), lucid.from_numpy(ys))
        loss.backward()
        lopt.step()
        topt.zero_grad()
        tloss = torch.nn.functional.cross_entropy(tm(torch.from_numpy(xs)), torch.from_numpy(ys))
        tloss.backward()
        topt.step()
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)
    tparams = dict(tm.named_parameters())
    for name, p in lm.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tparams[name].grad.numpy(),
                                   rtol=1e-4, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(p.detach().numpy(), tparams[name].detach().numpy(),
                                   rtol=1e-5, atol=1e-6, err_msg=name)


def test_set_num_threads_limits_numpys_blas_too():
    # a training step's GEMMs run in NumPy's BLAS, so lucid's thread count must reach it
    threadpoolctl = pytest.importorskip("threadpoolctl")
    if not any(d.get("user_api") == "blas" for d in threadpoolctl.threadpool_info()):
        pytest.skip("threadpoolctl sees no BLAS library in this process")
    before = lucid.get_num_threads()
    try:
        for n in (1, 2):
            lucid.set_num_threads(n)
            got = {d["num_threads"] for d in threadpoolctl.threadpool_info()
                   if d.get("user_api") == "blas"}
            assert got == {n}
    finally:
        lucid.set_num_threads(before)
