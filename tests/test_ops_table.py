"""One parametrised suite over the op table ``OPS`` in ``lucid/_core/optable.py``.

Every test is generated from the rows (and their ``variants``): adding a row or a
variant adds its tests with no edit here.  Per row/variant (see the field list in
optable.py):

  * forward vs the NumPy/SciPy ``ref`` (float32 rtol 1e-5, float64 1e-12) and the output
    dtype (bool / int64 / the input float dtype, from the reference's kind);
  * forward vs ``torch`` (values and dtype), when torch is installed;
  * float32 gradients of sum(out * fixed random weights) vs torch autograd;
  * gradcheck and gradgradcheck in float64 for differentiable rows;
  * the backward node class (``node``) and its schema (``lucid.ops.schema(op)``);
  * non-contiguous inputs (transposed / strided views) give the same values and grads;
  * mixed float32/float64 inputs promote like torch;
  * 0-d and empty inputs come in as variants of the rows.

Known limitations live in the rows (``limits``); library bugs found by this suite are
in ``BUGS`` below, keyed by row name (or "row[variant]"), as strict xfails.
"""
import functools
import math
import zlib

import numpy as np
import pytest
import scipy.special as sp

import lucid
from op_data import OPS, REF_HELPERS
from lucid_testutils import lt, to_np

# ----------------------------------------------------------------------------- data
RTOL = {"float32": 1e-5, "float64": 1e-12}
GRAD_RTOL = 1e-4          # float32 gradients vs torch
DTYPES = ("float32", "float64")
F = {"float32": np.float32, "float64": np.float64}
KINDS = ("forward", "torch", "torch_grad", "gradcheck", "gradgrad", "noncontig", "node",
         "promote")

# Library bugs found by this suite: {row name or "row[variant]": {test kind: reason}}.
# Strict xfails: remove the entry once the library is fixed.
# (The 11 found when the suite was written are fixed: 0-d prod/norm/cumsum/cumprod,
# empty prod backward, argmax keepdim, grad through stack of 0-d leaves, max(0-d, dim)
# under no_grad, std backward at zero spread, clamp promotion.)
BUGS = {}


def _camel(name):
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def _variants():
    out = []
    for row in OPS:
        base = {k: v for k, v in row.items() if k != "variants"}
        out.append(dict(base, id="base"))
        for var in row.get("variants", []):
            v = dict(base, **var)
            for key in ("args", "limits"):  # merged, not replaced
                v[key] = dict(base.get(key, {}), **var.get(key, {}))
            out.append(v)
    return out


VARIANTS = _variants()


def _vid(v):
    return v["name"] if v["id"] == "base" else "%s[%s]" % (v["name"], v["id"])


def _reason(kind, v):
    one = "%s[%s]" % (v["name"], v["id"])  # "row[base]" names the row without its variants
    for src in (v.get("limits", {}), BUGS.get(v["name"], {}), BUGS.get(one, {})):
        if kind in src:
            return src[kind]
    return None


def _marks(kind, v):
    r = _reason(kind, v)
    return [pytest.mark.xfail(strict=True, reason=r)] if r else []


def _is_float_kind(kind):
    if isinstance(kind, tuple) or kind == "nanmix" or str(kind).startswith("intf:"):
        return True
    return isinstance(kind, list) and np.asarray(kind).dtype.kind == "f"


def _float_inputs(v):
    return [n for n, _, k in v["inputs"] if _is_float_kind(k)]


def _grad_inputs(v):
    return list(v.get("grad_inputs") or _float_inputs(v))


def cases(kind, pred=lambda v: True, dtypes=DTYPES):
    out = []
    for v in VARIANTS:
        if not pred(v):
            continue
        for dt in dtypes or (None,):
            pid = _vid(v) if dt is None else "%s-%s" % (_vid(v), dt)
            out.append(pytest.param(v, dt, id=pid, marks=_marks(kind, v)))
    return out


def _grad(v):
    return bool(v.get("grad"))


def _has_torch(v):
    return bool(v.get("torch"))


# ----------------------------------------------------------------------------- sampling
def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _sample_one(shape, kind, rng):
    if isinstance(kind, list):
        a = np.array(kind)
        return a.astype(np.int64) if a.dtype.kind in "iu" else a
    if isinstance(kind, tuple):
        return rng.uniform(kind[0], kind[1], shape)
    if kind == "bool":
        return rng.random(shape) < 0.5
    if kind == "perm":
        return rng.permutation(int(np.prod(shape, dtype=int))).reshape(shape).astype(np.int64)
    if kind == "nanmix":
        a = rng.uniform(-3, 3, shape)
        pick = rng.random(shape)
        a = np.where(pick < 0.15, np.nan, a)
        a = np.where((pick >= 0.15) & (pick < 0.25), np.inf, a)
        return np.where((pick >= 0.25) & (pick < 0.35), -np.inf, a)
    tag, lo, hi = kind.split(":")
    a = rng.integers(int(lo), int(hi), shape)
    return a.astype(np.float64) if tag == "intf" else a.astype(np.int64)


@functools.lru_cache(maxsize=None)
def _sample_cached(vid):
    v = _BY_ID[vid]
    rng = _rng("sample", vid)
    for _ in range(200):
        arrs = {}
        for name, shape, kind in v["inputs"]:
            a = np.asarray(_sample_one(shape, kind, rng))
            if isinstance(kind, tuple):
                for p in v.get("avoid", ()):
                    near = np.abs(a - p) < 0.05
                    a = np.where(near, p + np.where(a >= p, 0.05, -0.05), a)
            arrs[name] = a
        if not v.get("distinct"):
            return arrs
        vals = np.sort(np.concatenate([np.ravel(arrs[n]) for n, _, k in v["inputs"]
                                       if isinstance(k, tuple)]))
        if vals.size < 2 or np.min(np.diff(vals)) > 1e-4:
            return arrs
    raise AssertionError("could not sample distinct values for %s" % vid)


_BY_ID = {_vid(v): v for v in VARIANTS}


def _inputs(v, dt, float_dtypes=None):
    """numpy inputs: floats cast to dt (or float_dtypes[name]), others as sampled."""
    arrs = _sample_cached(_vid(v))
    out = {}
    for name, _, kind in v["inputs"]:
        a = arrs[name]
        if _is_float_kind(kind):
            a = a.astype(F[(float_dtypes or {}).get(name, dt)])
        out[name] = a.copy()
    return out


# ----------------------------------------------------------------------------- evaluation
@functools.lru_cache(maxsize=None)
def _code(src):
    return compile(src, "<ops-table>", "eval")


def _eval(v, which, env):
    ns = dict(v.get("args", {}))
    ns.update(env)
    with np.errstate(all="ignore"):
        return eval(_code(v[which]), ns)


def _as_list(r):
    return list(r) if isinstance(r, (tuple, list)) else [r]


def run_lucid(v, arrs, requires_grad=()):
    ts = {n: lt(a, requires_grad=(n in requires_grad)) for n, a in arrs.items()}
    return ts, _as_list(_eval(v, "call", dict(ts, lucid=lucid, np=np, math=math)))


def run_ref(v, arrs):
    """The row's reference in float64 (``ref_in_dtype``: in the inputs' own dtype)."""
    env = {n: (a.astype(np.float64) if a.dtype.kind == "f" and not v.get("ref_in_dtype")
               else a) for n, a in arrs.items()}
    env.update(np=np, sp=sp, math=math, **REF_HELPERS)
    return [np.asarray(r) for r in _as_list(_eval(v, "ref", env))]


def run_torch(torch, v, arrs, requires_grad=()):
    ts = {n: torch.from_numpy(np.array(a, copy=True)).requires_grad_(n in requires_grad)
          for n, a in arrs.items()}
    return ts, _as_list(_eval(v, "torch", dict(ts, torch=torch, math=math)))


def _fn(v, names):
    """(*tensors) -> output(s), for gradcheck."""
    def fn(*ts):
        outs = _as_list(_eval(v, "call", dict(zip(names, ts), lucid=lucid, np=np, math=math)))
        return outs[0] if len(outs) == 1 else tuple(outs)
    return fn


def assert_close(got, want, dt, what, rtol=None):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, "%s: shape %s, want %s" % (what, got.shape, want.shape)
    if want.dtype.kind == "f" or got.dtype.kind == "f":
        rtol = RTOL[dt] if rtol is None else rtol
        fin = np.isfinite(want)
        scale = max(1.0, float(np.max(np.abs(want[fin]), initial=0.0)))
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=rtol * scale, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def _expected_dtype(ref, dt):
    k = ref.dtype.kind
    return {"b": lucid.bool_, "i": lucid.int64, "u": lucid.int64}.get(k, getattr(lucid, dt))


def _torch_dtype_name(t):
    return {"bool": "bool_"}.get(str(t.dtype).replace("torch.", ""),
                                 str(t.dtype).replace("torch.", ""))


# ============================================================================= 1. forward
@pytest.mark.parametrize("v,dt", cases("forward"))
def test_forward_vs_reference(v, dt):
    arrs = _inputs(v, dt)
    _, outs = run_lucid(v, arrs)
    refs = run_ref(v, arrs)
    assert len(outs) == len(refs), (len(outs), len(refs))
    for k, (o, r) in enumerate(zip(outs, refs)):
        assert isinstance(o, lucid.Tensor), type(o)
        assert o.dtype is _expected_dtype(r, dt), "output %d dtype %s, want %s" % (
            k, o.dtype, _expected_dtype(r, dt))
        assert_close(to_np(o), r, dt, "%s output %d vs %s" % (_vid(v), k, v["ref"]),
                     rtol=v.get("rtol", {}).get(dt))


@pytest.mark.parametrize("v,dt", cases("torch", _has_torch))
def test_forward_vs_torch(torch, v, dt):
    arrs = _inputs(v, dt)
    _, outs = run_lucid(v, arrs)
    _, touts = run_torch(torch, v, arrs)
    assert len(outs) == len(touts)
    for k, (o, t) in enumerate(zip(outs, touts)):
        assert o.dtype is getattr(lucid, _torch_dtype_name(t)), (o.dtype, t.dtype)
        assert_close(to_np(o), t.detach().numpy(), dt, "%s output %d vs %s" % (
            _vid(v), k, v["torch"]), rtol=v.get("rtol", {}).get(dt))


# ============================================================================= 2. gradients
def _weights(v, outs, dt):
    rng = _rng("weights", _vid(v))
    return [rng.standard_normal(o.shape).astype(F[dt]) for o in outs]


def _lucid_loss(outs, ws):
    loss = None
    for o, w in zip(outs, ws):
        if o.requires_grad:
            term = (o * lt(w)).sum()
            loss = term if loss is None else loss + term
    return loss


@pytest.mark.parametrize("v,dt", cases("torch_grad", lambda v: _grad(v) and _has_torch(v),
                                       dtypes=("float32",)))
def test_float32_grad_vs_torch(torch, v, dt):
    arrs = _inputs(v, dt)
    names = _grad_inputs(v)
    ts, outs = run_lucid(v, arrs, names)
    tts, touts = run_torch(torch, v, arrs, names)
    ws = _weights(v, outs, dt)
    loss = _lucid_loss(outs, ws)
    assert loss is not None, "no output requires grad"
    loss.backward()
    tloss = sum((o * torch.from_numpy(w)).sum() for o, w in zip(touts, ws) if o.requires_grad)
    tloss.backward()
    for n in names:
        want = tts[n].grad
        want = np.zeros(arrs[n].shape, F[dt]) if want is None else want.numpy()
        got = ts[n].grad
        assert got is not None, "%s: no gradient for %s" % (_vid(v), n)
        assert got.dtype is getattr(lucid, dt) and got.shape == arrs[n].shape
        np.testing.assert_allclose(to_np(got), want, rtol=GRAD_RTOL,
                                   atol=1e-5 * max(1.0, float(np.abs(want).max(initial=0))),
                                   err_msg="%s d/d%s vs torch" % (_vid(v), n))


def _gc_args(v):
    arrs = _inputs(v, "float64")
    names = [n for n, _, _ in v["inputs"]]
    gi = _grad_inputs(v)
    return _fn(v, names), tuple(lt(arrs[n], requires_grad=(n in gi)) for n in names)


@pytest.mark.parametrize("v,dt", cases("gradcheck", _grad, dtypes=None))
def test_gradcheck(v, dt):
    fn, xs = _gc_args(v)
    assert lucid.autograd.gradcheck(fn, xs)


@pytest.mark.parametrize("v,dt", cases("gradgrad", _grad, dtypes=None))
def test_gradgradcheck(v, dt):
    fn, xs = _gc_args(v)
    assert lucid.autograd.gradgradcheck(fn, xs)


# ============================================================================= 3. node / schema
@pytest.mark.parametrize("v,dt", cases("node", _grad, dtypes=None))
def test_backward_node_and_schema(v, dt):
    arrs = _inputs(v, "float64")
    _, outs = run_lucid(v, arrs, _grad_inputs(v))
    node = v.get("node", _camel(v["op"]) + "Backward")
    out = next(o for o in outs if o.is_floating_point())
    if node is None:
        assert out.grad_fn is None
        return
    cls = type(out.grad_fn)
    assert cls.__name__ == node, "%s records %s, want %s" % (_vid(v), cls.__name__, node)
    s = lucid.ops.schema(v["op"])
    assert isinstance(s, lucid.OpSchema) and s.name == v["op"]
    assert v["op"] in lucid.ops.registry()
    if hasattr(cls, "schema_v1"):
        assert cls.schema_v1 is s, (cls.schema_v1, s)
    with lucid.no_grad():
        _, outs = run_lucid(v, arrs, _grad_inputs(v))
        assert all(o.grad_fn is None and not o.requires_grad for o in outs)


# ============================================================================= 4. strides
def _noncontig(a):
    """(base tensor, a non-contiguous lucid view of it with a's values, view(base) for
    both lucid tensors and numpy arrays): a transpose when the swapped dims are both > 1,
    else every other element along the first dim > 1."""
    if a.ndim >= 2 and a.shape[0] > 1 and a.shape[-1] > 1:
        base = lt(np.ascontiguousarray(np.swapaxes(a, 0, -1)))
        return base, lambda t: np.swapaxes(t, 0, -1) if isinstance(t, np.ndarray) else \
            t.transpose(0, -1)
    k = next(i for i, n in enumerate(a.shape) if n > 1)
    base = lt(np.repeat(a, 2, axis=k))
    step = (slice(None),) * k + (slice(None, None, 2),)
    return base, lambda t: t[step]


def _noncontig_ok(v):
    return any(len(s or ()) >= 1 and isinstance(k, tuple) and np.prod(s) > 1
               for _, s, k in v["inputs"])


@pytest.mark.parametrize("v,dt", cases("noncontig", _noncontig_ok))
def test_non_contiguous_inputs(v, dt):
    arrs = _inputs(v, dt)
    gi = _grad_inputs(v) if _grad(v) else []
    ts, want = run_lucid(v, arrs, gi)
    env, leaves, back = dict(lucid=lucid, np=np, math=math), {}, {}
    for (name, shape, kind) in v["inputs"]:
        a = arrs[name]
        if isinstance(kind, tuple) and a.ndim >= 1 and a.size > 1:
            base, back[name] = _noncontig(a)
            assert not back[name](base).is_contiguous()
            if name in gi:
                base.requires_grad_(True)
            view = back[name](base)
            leaves[name] = base
            env[name] = view
        else:
            env[name] = ts[name]
    got = _as_list(_eval(v, "call", env))
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype is w.dtype
        assert_close(to_np(g), to_np(w), dt, "%s output %d, non-contiguous" % (_vid(v), k))
    if not gi:
        return
    ws = _weights(v, want, dt)
    _lucid_loss(want, ws).backward()
    _lucid_loss(got, ws).backward()
    for n in gi:
        g = back[n](to_np(leaves[n].grad)) if n in leaves else to_np(env[n].grad)
        assert_close(g, to_np(ts[n].grad), dt, "%s d/d%s, non-contiguous" % (_vid(v), n),
                     rtol=10 * RTOL[dt])


# ============================================================================= 5. promotion
def _promote_cases():
    out = []
    for v in VARIANTS:
        fl = [n for n, _, k in v["inputs"] if isinstance(k, tuple)]
        if len(fl) < 2 or not _has_torch(v):
            continue
        for n in fl:  # kind "promote:<input>" names the one input made float64
            marks = _marks("promote:" + n, v) or _marks("promote", v)
            out.append(pytest.param(v, n, id="%s-%s_f64" % (_vid(v), n), marks=marks))
    return out


@pytest.mark.parametrize("v,wide", _promote_cases())
def test_mixed_float_promotion_like_torch(torch, v, wide):
    """Same result dtype as torch; where torch rejects the mix (matmul, dot, scatter_add),
    lucid either raises too or promotes (float64)."""
    arrs = _inputs(v, "float32", {wide: "float64"})
    try:
        _, touts = run_torch(torch, v, arrs)
    except RuntimeError:
        try:
            _, outs = run_lucid(v, arrs)
        except (lucid.LucidError, TypeError, ValueError):
            return
        assert all(o.dtype is lucid.float64 for o in outs if o.is_floating_point())
        return
    _, outs = run_lucid(v, arrs)
    for o, t in zip(outs, touts):
        assert o.dtype is getattr(lucid, _torch_dtype_name(t)), (
            "%s with %s float64: lucid %s, torch %s" % (_vid(v), wide, o.dtype, t.dtype))
        assert_close(to_np(o), t.detach().numpy(), "float32", _vid(v))


# ============================================================================= 6. the table
def test_table_is_well_formed():
    names = [r["name"] for r in OPS]
    assert len(names) == len(set(names)), "duplicate row names"
    for v in VARIANTS:
        assert {"name", "op", "call", "ref", "inputs"} <= set(v), _vid(v)
        assert {k.split(":")[0] for k in v.get("limits", {})} <= set(KINDS), _vid(v)
        for n in v.get("grad_inputs") or ():
            assert n in [i[0] for i in v["inputs"]], (_vid(v), n)
    for key, kinds in BUGS.items():
        assert key in names or "%s[%s]" % (key.split("[")[0], "base") == key or key in _BY_ID, key
        assert {k.split(":")[0] for k in kinds} <= set(KINDS), key
    required = {"add", "sub", "mul", "div", "neg", "maximum", "minimum", "atan2", "hypot",
                "logaddexp", "fmod", "remainder", "where", "eq", "ne", "lt", "le", "gt", "ge",
                "logical_and", "logical_or", "logical_xor", "logical_not", "isnan", "isinf",
                "isfinite", "nan_to_num", "clamp", "leaky_relu", "elu", "gelu", "sum", "mean",
                "prod", "max", "min", "amax", "amin", "argmax", "argmin", "var", "std",
                "logsumexp", "norm", "cumsum", "cumprod", "softmax", "log_softmax", "all",
                "any", "reshape", "view", "flatten", "squeeze", "unsqueeze", "transpose",
                "permute", "T", "expand", "broadcast_to", "cat", "stack", "split", "chunk",
                "flip", "roll", "tile", "repeat", "pad", "gather", "scatter_add",
                "index_select", "getitem", "contiguous", "clone", "matmul", "dot", "outer"}
    assert required <= set(names), required - set(names)
