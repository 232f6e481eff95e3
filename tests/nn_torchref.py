"""Helpers shared by the nn/optim tests: copy a lucid module's weights into its torch
twin (same parameter names) and compare outputs and gradients."""
import numpy as np

import lucid

TOL = {"float32": dict(rtol=1e-5, atol=1e-6), "float64": dict(rtol=1e-10, atol=1e-12)}


def np_of(t):
    return np.array(t.detach().numpy(), copy=True)


def to_torch(torch, t, requires_grad=False):
    out = torch.from_numpy(np_of(t))
    return out.requires_grad_(requires_grad) if requires_grad else out


def copy_into_torch(torch, lmod, tmod):
    """Load lucid's parameters and buffers into the torch module (strict key match)."""
    sd = {k: torch.from_numpy(np_of(v)) for k, v in lmod.state_dict().items()}
    tmod.load_state_dict(sd, strict=True)
    return tmod


def assert_close(a, b, dtype, scale=1.0, what=""):
    """a: lucid tensor or ndarray; b: torch tensor or ndarray."""
    a = np_of(a) if isinstance(a, lucid.Tensor) else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    tol = TOL[dtype]
    np.testing.assert_allclose(a, b, rtol=tol["rtol"] * scale, atol=tol["atol"] * scale,
                               err_msg=what)
