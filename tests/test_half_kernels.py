"""float16 / bfloat16 element-wise kernels, one instruction-set path at a time.

lucid picks its half kernels at run time (portable C, AVX2 + F16C, AVX-512, and native
AVX512-FP16 arithmetic for float16); LUCID_HALF_ISA caps the choice. Every path this
machine can run is checked here, each capped one in a fresh process, bit for bit
against references independent of lucid: NumPy float32 arithmetic on the widened
operands, rounded once by NumPy (float16) or ml_dtypes (bfloat16); NumPy's and
ml_dtypes' own float64 -> half conversions; lucid's float32 kernels for the unary ops,
whose float32 results NumPy / ml_dtypes round.

Operands cover every bit pattern of the half type (subnormals, infinities, nans
included), paired with random patterns and with special values, so overflow, underflow,
exact ties and invalid operations all occur.
"""
import os

import ml_dtypes
import numpy as np
import pytest

import lucid
from lucid_testutils import child_env, run_child

HALF = ("float16", "bfloat16")
NP_HALF = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
ISAS = ["c", "f16c", "avx512", "avx512fp16"]
OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
LUCID_OPS = {"add": lucid.add, "sub": lucid.sub, "mul": lucid.mul, "div": lucid.div}
IN_PLACE = {"add": "add_", "sub": "sub_", "mul": "mul_", "div": "div_"}


def _special(dtname):
    """Edge values of the half type, as a NumPy array of it."""
    f = np.finfo(NP_HALF[dtname])
    tiny = float(f.smallest_subnormal)
    vals = [0.0, tiny, 2 * tiny, 3 * tiny, float(f.smallest_normal) - tiny,
            float(f.smallest_normal), float(f.eps), 0.5, 1.0, 1.5, 2.0, 3.0, 10.0,
            float(f.max) / 2, float(f.max), np.inf, np.nan]
    vals += [-v for v in vals]
    return np.array(vals, np.float64).astype(NP_HALF[dtname])


def _operands(dtname, seed=0):
    """a: every bit pattern three times; b: two random orders of every pattern, then the
    special values repeated (against every a)."""
    rng = np.random.default_rng(seed)
    every = np.arange(1 << 16, dtype=np.uint16)
    spec = _special(dtname).view(np.uint16)
    a = np.concatenate([every, every, every])
    b = np.concatenate([rng.permutation(every), rng.permutation(every),
                        np.resize(spec, every.size)])
    return a.view(NP_HALF[dtname]), b.view(NP_HALF[dtname])


def _reference(op, a, b, dtname):
    """op in float32 on the widened operands (a or b may be a float), rounded once."""
    with np.errstate(all="ignore"):
        r = OPS[op](np.asarray(a).astype(np.float32), np.asarray(b).astype(np.float32))
        return np.asarray(r, np.float32).astype(NP_HALF[dtname])


def _assert_bits(got, want, what):
    """Same bits, except that any nan matches any nan (a nan's payload is not fixed by
    IEEE when both operands are nans)."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype)
    g32, w32 = got.astype(np.float32), want.astype(np.float32)
    same = (got.view(np.uint16) == want.view(np.uint16)) | (np.isnan(g32) & np.isnan(w32))
    if not same.all():
        i = np.flatnonzero(~same)[:5]
        raise AssertionError(f"{what}: {(~same).sum()} differ, e.g. at {i.tolist()}: "
                             f"got {got.view(np.uint16)[i]} want {want.view(np.uint16)[i]}")


# -- the checks, run in this process and in one process per capped instruction set ----

def check_binary(dtname):
    """Tensor op tensor, tensor op one-element tensor, tensor op number and number op
    tensor: each element the float32 result rounded once."""
    a, b = _operands(dtname)
    la, lb = lucid.from_numpy(a), lucid.from_numpy(b)
    one = _special(dtname)
    for op, fn in LUCID_OPS.items():
        _assert_bits(fn(la, lb).numpy(), _reference(op, a, b, dtname), f"{dtname} {op}")
        for s in one:
            ls = lucid.from_numpy(np.array(s))              # 0-d: broadcast by the kernel
            _assert_bits(fn(la, ls).numpy(), _reference(op, a, s, dtname), f"{op} {s!r} right")
            _assert_bits(fn(ls, la).numpy(), _reference(op, s, a, dtname), f"{op} {s!r} left")
        for s in (2.5, -0.1, 1e-7, 70000.0, 3.0e38):       # a number takes the half dtype first
            with np.errstate(over="ignore"):
                h = np.array(s).astype(NP_HALF[dtname])
            _assert_bits(fn(la, s).numpy(), _reference(op, a, h, dtname), f"{op} {s} right")
            _assert_bits(fn(s, la).numpy(), _reference(op, h, a, dtname), f"{op} {s} left")


def check_in_place(dtname):
    """add_, sub_, mul_, div_ and the augmented assignments write what the out-of-place
    op gives (itself checked against the reference), with the tensor's own dtype."""
    a, b = _operands(dtname, seed=1)
    for op, name in IN_PLACE.items():
        want = _reference(op, a, b, dtname)
        x = lucid.tensor(a)
        ptr = x.numpy().__array_interface__["data"][0]
        assert getattr(x, name)(lucid.from_numpy(b)) is x
        _assert_bits(x.numpy(), want, f"{dtname} {name}")
        assert x.numpy().__array_interface__["data"][0] == ptr      # really in place
        x = lucid.tensor(a)
        getattr(x, name)(0.3)
        _assert_bits(x.numpy(), _reference(op, a, np.array(0.3).astype(NP_HALF[dtname]),
                                           dtname), f"{dtname} {name} number")
    x = lucid.tensor(a)
    x += lucid.from_numpy(b)
    x *= 2.0
    x -= lucid.from_numpy(b[:1].reshape(()))
    x /= 3.0
    h = lambda v: np.array(v).astype(NP_HALF[dtname])  # noqa: E731
    want = _reference("div", _reference("sub", _reference("mul", _reference(
        "add", a, b, dtname), h(2.0), dtname), b[0], dtname), h(3.0), dtname)
    _assert_bits(x.numpy(), want, f"{dtname} augmented assignments")
    x = lucid.tensor(a)
    x += x                                                # other is self
    _assert_bits(x.numpy(), _reference("add", a, a, dtname), f"{dtname} x += x")


def check_unary(dtname):
    """A unary op (forward and fused backward) on half storage is lucid's float32 kernel
    on the widened values, rounded once, for every length (partial blocks and groups)."""
    rng = np.random.default_rng(5)
    for n in (1, 31, 32, 33, 1023, 1024, 1025, 40_001):
        x = rng.uniform(-5, 5, n).astype(np.float32).astype(NP_HALF[dtname])
        g = rng.uniform(-2, 2, n).astype(np.float32).astype(NP_HALF[dtname])
        for op in ("tanh", "sin", "erf", "silu", "relu"):
            fn = getattr(lucid, op)
            with lucid.no_grad():
                want = fn(lucid.from_numpy(x.astype(np.float32))).numpy().astype(NP_HALF[dtname])
            xt = lucid.tensor(x, requires_grad=True)
            y = fn(xt)
            _assert_bits(y.detach().numpy(), want, f"{dtname} {op} n={n}")
            if op == "tanh":                   # its backward reads the rounded output
                continue
            y.backward(lucid.from_numpy(g))
            x32 = lucid.tensor(x.astype(np.float32), requires_grad=True)
            fn(x32).backward(lucid.from_numpy(g.astype(np.float32)))
            _assert_bits(xt.grad.numpy(), x32.grad.numpy().astype(NP_HALF[dtname]),
                         f"{dtname} {op} grad n={n}")


def check_relu_bits(dtname):
    """relu works on half bit patterns without widening: every pattern gives NumPy's
    float32 relu (-0 stays -0, nan stays nan) rounded to the half type, for every length."""
    every = np.arange(1 << 16, dtype=np.uint16).view(NP_HALF[dtname])
    x32 = every.astype(np.float32)
    with np.errstate(invalid="ignore"):       # (the nans' cast)
        want = np.where(x32 < 0, np.float32(0), x32).astype(NP_HALF[dtname])
    _assert_bits(lucid.relu(lucid.from_numpy(every)).numpy(), want, f"{dtname} relu")
    for n in (1, 17, 33, 1025):
        _assert_bits(lucid.relu(lucid.from_numpy(every[-n:])).numpy(), want[-n:],
                     f"{dtname} relu n={n}")
    got = lucid.relu(lucid.from_numpy(every)).numpy().view(np.uint16)
    nan = np.isnan(x32)
    quiet = 0x0200 if dtname == "float16" else 0x0040
    assert np.all(got[nan] & quiet), "a nan comes back quiet"


def _doubles(seed=2):
    """float64 values that make double rounding show: just above and below half and
    bfloat16 ties, plus random bit patterns, subnormals, overflow edges, inf and nan."""
    rng = np.random.default_rng(seed)
    m = rng.integers(1 << 10, 1 << 11, 20_000).astype(np.float64)    # 11-bit significands
    e = rng.integers(-30, 16, m.size).astype(np.float64)
    ties16 = (m + 0.5) * 2.0 ** (e - 10)                              # float16 ties...
    m8 = rng.integers(1 << 7, 1 << 8, 20_000).astype(np.float64)
    ties8 = (m8 + 0.5) * 2.0 ** rng.integers(-140, 120, m8.size)      # ...and bfloat16 ones
    nudges = [t * (1 + s * 2.0 ** -40) for t in (ties16, ties8) for s in (-1, 1)]
    bits = rng.integers(0, 1 << 63, 100_000, dtype=np.int64).view(np.float64)
    edge = np.array([0.0, -0.0, 65504.0, 65519.99, 65520.0, 65520.01, 2.0 ** -24, 2.0 ** -25,
                     3 * 2.0 ** -26, 5e-324, 1e300, -1e300, 3.4e38, 3.4028235e38, 3.4028236e38,
                     2.0 ** -133, 2.0 ** -134, 1.5 * 2.0 ** -134, np.inf, -np.inf, np.nan])
    return np.concatenate([ties16, ties8, *nudges, bits, -bits, edge])


def check_conversions(dtname):
    """float64 and float32 -> half round once from the source value, as NumPy's float16
    and ml_dtypes' bfloat16 conversions do; half -> float32 is exact."""
    d = _doubles()
    with np.errstate(all="ignore"):
        want = d.astype(NP_HALF[dtname])
        f = d.astype(np.float32)
        want32 = f.astype(NP_HALF[dtname])
    dt = getattr(lucid, dtname)
    _assert_bits(lucid.from_numpy(d).to(dt).numpy(), want, f"float64 -> {dtname}")
    _assert_bits(lucid.tensor(d, dtype=dt).numpy(), want, f"tensor(float64, {dtname})")
    _assert_bits(lucid.from_numpy(f).to(dt).numpy(), want32, f"float32 -> {dtname}")
    back = lucid.from_numpy(want).float().numpy()
    assert np.array_equal(back, want.astype(np.float32), equal_nan=True)


CHECKS = (check_binary, check_in_place, check_unary, check_relu_bits, check_conversions)


def run_all():
    for dtname in HALF:
        for check in CHECKS:
            check(dtname)


# -- tests ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtname", HALF)
@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_default_path(check, dtname):
    check(dtname)


def _available():
    best = lucid.backend_info()["half_isa"]
    return ISAS[: ISAS.index(best) + 1]


def test_the_path_is_reported():
    assert lucid.backend_info()["half_isa"] in ISAS


@pytest.mark.parametrize("isa", ISAS)
def test_every_capped_path(isa):
    """The same checks in a process whose half kernels are capped to ``isa``."""
    if isa not in _available():
        pytest.skip(f"this CPU cannot run the {isa} half kernels")
    here = os.path.dirname(os.path.abspath(__file__))
    code = ("import sys; sys.path.insert(0, %r); import lucid, test_half_kernels as t; "
            "assert lucid.backend_info()['half_isa'] == %r, lucid.backend_info(); "
            "t.run_all()" % (here, isa))
    r = run_child(code, env=child_env(LUCID_HALF_ISA=isa))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


@pytest.mark.parametrize("dtname", HALF)
def test_results_do_not_depend_on_the_thread_count(dtname):
    """Large half kernels run on the pool: 1 and 2 threads give the same bits."""
    rng = np.random.default_rng(9)
    n = 300_001
    a = rng.uniform(-9, 9, n).astype(np.float32).astype(NP_HALF[dtname])
    b = rng.uniform(-9, 9, n).astype(np.float32).astype(NP_HALF[dtname])
    la, lb = lucid.from_numpy(a), lucid.from_numpy(b)

    def run():
        out = [f(la, lb).numpy() for f in LUCID_OPS.values()]
        out += [(la * 1.5).numpy(), (2.0 / la).numpy(), lucid.tanh(la).numpy()]
        x = lucid.tensor(a)
        x += lb
        return out + [x.numpy()]

    before = lucid.get_num_threads()
    try:
        lucid.set_num_threads(1)
        one = run()
        lucid.set_num_threads(2)
        two = run()
    finally:
        lucid.set_num_threads(before)
    for u, v in zip(one, two):
        assert np.array_equal(u.view(np.uint16), v.view(np.uint16))
    _assert_bits(one[0], _reference("add", a, b, dtname), "add")


@pytest.mark.parametrize("dtname", HALF)
def test_in_place_keeps_torch_semantics(torch, dtname):
    """In-place ops on half tensors: a float32 operand is promoted, as in torch, and the
    float32 result rounded back once (torch's values and dtype); a view that overlaps
    self reads the old values, as if through a temporary (torch refuses it); a shape
    that would grow self is refused; the version counter moves."""
    rng = np.random.default_rng(3)
    a = rng.uniform(-4, 4, 1000).astype(np.float32)
    b = rng.uniform(0.5, 4, 1000).astype(np.float32)
    tdt = getattr(torch, dtname)
    for name in IN_PLACE.values():
        x, tx = lucid.tensor(a).to(getattr(lucid, dtname)), torch.from_numpy(a).to(tdt)
        getattr(x, name)(lucid.tensor(b))                  # float32 other
        getattr(tx, name)(torch.from_numpy(b))
        assert x.dtype.name == dtname
        _assert_bits(x.numpy(), tx.float().numpy().astype(NP_HALF[dtname]), name)
    x = lucid.tensor(a).to(getattr(lucid, dtname))
    before = x.numpy().copy()
    x[1:] += x[:-1]                                        # overlapping view
    want = (before[1:].astype(np.float32) + before[:-1].astype(np.float32)).astype(NP_HALF[dtname])
    _assert_bits(x.numpy()[1:], want, "overlap")
    for k in (0, 7):                                       # one element of self, broadcast
        x = lucid.tensor(a).to(getattr(lucid, dtname))
        before = x.numpy().copy()
        x += x[k]
        _assert_bits(x.numpy(), _reference("add", before, before[k], dtname), f"x += x[{k}]")
    x = lucid.tensor(a[:500]).to(getattr(lucid, dtname))
    y = lucid.tensor(b).to(getattr(lucid, dtname))
    x *= y[::2]                                            # a strided operand
    want = _reference("mul", lucid.tensor(a[:500]).to(getattr(lucid, dtname)).numpy(),
                      y.numpy()[::2], dtname)
    _assert_bits(x.numpy(), want, "strided other")
    with pytest.raises(lucid.ShapeError):
        y = lucid.ones(3, dtype=getattr(lucid, dtname))
        y += lucid.ones(1, 3, dtype=getattr(lucid, dtname))
    v = x._version
    x.mul_(2.0)
    assert x._version > v
