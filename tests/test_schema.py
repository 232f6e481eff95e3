"""Op schemas, AMP policies and backward-node structure."""
import math

import numpy as np
import pytest

import lucid
from lucid._core import optable
from lucid_testutils import lt, mp_deriv, to_np

POLICIES = ["Promote", "KeepInput", "ForceFP32"]
SEEDS = {
    # name: (amp policy, saves_input, saves_output)
    "erf": ("Promote", True, False),
    "exp": ("ForceFP32", False, True),
    "log2": ("ForceFP32", True, False),
}


def test_amp_policy_members():
    members = [getattr(lucid.AmpPolicy, p) for p in POLICIES]
    assert len({id(m) for m in members}) == 3
    for i, a in enumerate(members):
        for j, b in enumerate(members):
            assert (a == b) == (i == j)


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_schemas(name):
    amp, si, so = SEEDS[name]
    s = lucid.ops.schema(name)
    assert isinstance(s, lucid.OpSchema)
    assert s.name == name
    assert s.amp_policy == getattr(lucid.AmpPolicy, amp)
    assert s.saves_input is si or s.saves_input == si
    assert bool(s.saves_input) == si and bool(s.saves_output) == so
    assert isinstance(s.version, int) and s.version >= 1
    assert bool(s.deterministic) in (True, False)
    assert repr(s)


def test_registry_contains_seeds_and_graph_ops():
    reg = lucid.ops.registry()
    for name in list(SEEDS):
        assert name in reg
    assert isinstance(reg, dict) or hasattr(reg, "items")


def test_registry_consistent_with_schema():
    reg = lucid.ops.registry()
    assert len(reg) >= 3
    for name, s in reg.items():
        assert isinstance(s, lucid.OpSchema)
        assert s.name == name
        assert lucid.ops.schema(name) is s or lucid.ops.schema(name) == s
        assert any(s.amp_policy == getattr(lucid.AmpPolicy, p) for p in POLICIES)
        assert isinstance(s.version, int)


def test_registry_not_mutable_from_outside():
    reg = lucid.ops.registry()
    try:
        reg["__bogus__"] = reg["erf"]
    except TypeError:
        return  # read-only mapping: fine
    assert "__bogus__" not in lucid.ops.registry()


@pytest.mark.parametrize("bad", ["no_such_op", "", "ERF"])
def test_schema_unknown_name_raises(bad):
    with pytest.raises((KeyError, ValueError, LookupError, RuntimeError)):
        lucid.ops.schema(bad)


def test_schema_fields_read_only():
    s = lucid.ops.schema("erf")
    with pytest.raises((AttributeError, TypeError)):
        s.amp_policy = lucid.AmpPolicy.ForceFP32
    assert s.amp_policy == lucid.AmpPolicy.Promote


# ----------------------------------------------------- policy => dtype, for every registered op
def _call(name, x):
    """op(x), else op(x, x); ops that need other arguments (a condition, bounds, a shape)
    are skipped here and covered by the table-driven suites."""
    fn = getattr(lucid, name)
    for args in ((x,), (x, x)):
        try:
            y = fn(*args)
        except (TypeError, ValueError):
            continue
        if isinstance(y, lucid.Tensor):
            if not y.is_floating_point():
                # bool / index results: the AMP policy sets the compute dtype only
                pytest.skip("%s returns %s; covered by the op-table suite" % (name, y.dtype))
            return y
    pytest.skip("%s needs other arguments" % name)


def _registered_callables():
    """Ops with a node of their own (composites record their parts' nodes: their
    schemas hold no node, and the parts' schemas are tested here)."""
    out = []
    composite = {r["name"] for r in optable.COMPOSITE}
    for name in sorted(lucid.ops.registry()):
        if callable(getattr(lucid, name, None)) and name not in composite:
            out.append(name)
    return out


@pytest.mark.parametrize("name", sorted(SEEDS) + ["add", "sub", "mul", "div", "neg", "pow",
                                                 "sum", "mean"])
def test_ops_exported_everywhere(name):
    assert callable(getattr(lucid.ops, name, None)), name
    assert getattr(lucid, name) is getattr(lucid.ops, name)
    if name in SEEDS:
        assert name in lucid.ops.registry()


@pytest.mark.parametrize("name", _registered_callables())
def test_amp_policy_output_dtype(name):
    pol = lucid.ops.schema(name).amp_policy
    x = lt(np.array([0.5, 0.75, 1.25]), dtype=lucid.float16)
    y = _call(name, x)
    if pol == lucid.AmpPolicy.ForceFP32:
        assert y.dtype is lucid.float32
    else:  # Promote / KeepInput of a float16 input
        assert y.dtype is lucid.float16
    for dt in (lucid.float32, lucid.float64):
        assert _call(name, lt(np.array([0.5, 1.25]), dtype=dt)).dtype is dt


@pytest.mark.parametrize("name", _registered_callables())
def test_float16_grad_dtype_for_every_op(name):
    x = lt(np.array([0.5, 0.75, 1.25]), dtype=lucid.float16, requires_grad=True)
    y = _call(name, x)
    y.sum().backward()
    assert x.grad.dtype is lucid.float16 and x.grad.shape == x.shape


@pytest.mark.parametrize("name", _registered_callables())
def test_saves_flags_match_inplace_behaviour(name):
    """saves_input => modifying the input breaks backward; not saving it => harmless."""
    s = lucid.ops.schema(name)
    x = lt(np.array([0.5, 0.75, 1.25]), requires_grad=True)
    h = x * 1.0
    y = _call(name, h)
    with lucid.no_grad():
        h.mul_(1.5)
    if s.saves_input:
        with pytest.raises(RuntimeError):
            y.sum().backward()
    else:
        y.sum().backward()
    x2 = lt(np.array([0.5, 0.75, 1.25]), requires_grad=True)
    y2 = _call(name, x2 * 1.0)
    s2 = y2.sum()
    with lucid.no_grad():
        y2.mul_(1.5)
    if s.saves_output:
        with pytest.raises(RuntimeError):
            s2.backward()


# ----------------------------------------------------- backward nodes
NODE_NAMES = [
    ("ErfBackward", lambda x, c: lucid.erf(x), "erf"),
    ("ExpBackward", lambda x, c: lucid.exp(x), "exp"),
    ("Log2Backward", lambda x, c: lucid.log2(x), "log2"),
    ("ErfBackward", lambda x, c: x.erf(), "erf"),
    ("AddBackward", lambda x, c: x + c, "add"),
    ("SubBackward", lambda x, c: x - c, "sub"),
    ("MulBackward", lambda x, c: x * c, "mul"),
    ("DivBackward", lambda x, c: x / c, "div"),
    ("NegBackward", lambda x, c: -x, "neg"),
    ("PowBackward", lambda x, c: x ** c, "pow"),
    ("SumBackward", lambda x, c: x.sum(), "sum"),
    ("MeanBackward", lambda x, c: x.mean(), "mean"),
]


@pytest.mark.parametrize("cls,fn,op", NODE_NAMES, ids=[n[2] + "-" + n[0] for n in NODE_NAMES])
def test_node_class_name_and_schema(cls, fn, op):
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    c = lt(np.array([2.0, 3.0]))
    y = fn(x, c)
    node = y.grad_fn
    assert type(node).__name__ == cls
    if op in lucid.ops.registry():
        assert type(node).schema_v1 is lucid.ops.schema(op) or type(node).schema_v1 == lucid.ops.schema(op)
        assert type(node).schema_v1.name == op
    assert isinstance(node.next_functions, tuple)
    for edge in node.next_functions:
        assert isinstance(edge, tuple) and len(edge) == 2 and isinstance(edge[1], int)
    assert repr(node)


@pytest.mark.parametrize("op", sorted(SEEDS))
def test_seed_node_schema_v1_is_class_attribute(op):
    x = lt(np.array([0.5]), requires_grad=True)
    cls = type(getattr(lucid, op)(x).grad_fn)
    assert "schema_v1" in vars(cls) or hasattr(cls, "schema_v1")
    assert cls.schema_v1.name == op
    assert cls.schema_v1.amp_policy == getattr(lucid.AmpPolicy, SEEDS[op][0])


def test_next_functions_leaf_and_chain():
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    e = lucid.erf(x)
    ((acc, idx),) = e.grad_fn.next_functions
    assert type(acc).__name__ == "AccumulateGrad" and idx == 0
    assert acc.variable is x
    y = lucid.exp(e)
    ((prev, _),) = y.grad_fn.next_functions
    assert prev is e.grad_fn


def test_next_functions_none_for_non_requiring_input():
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    c = lt(np.array([2.0, 3.0]))
    nf = (x * c).grad_fn.next_functions
    assert len(nf) == 2
    assert type(nf[0][0]).__name__ == "AccumulateGrad" and nf[0][0].variable is x
    assert nf[1][0] is None
    nf2 = (c * x).grad_fn.next_functions
    assert nf2[0][0] is None and nf2[1][0].variable is x


@pytest.mark.parametrize("op", sorted(SEEDS))
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_grad_formula_eager(op, dt):
    x0 = np.array([0.3, 0.9, 1.7, 2.4], dtype=dt)
    w0 = np.array([1.0, -2.0, 0.5, 3.0], dtype=dt)
    x = lt(x0, requires_grad=True)
    y = getattr(lucid, op)(x)
    g = lt(w0, requires_grad=True)  # even a g that requires grad must not be recorded
    r = y.grad_fn.grad_formula(g)
    if isinstance(r, (tuple, list)):
        assert len(r) == 1
        r = r[0]
    assert r.grad_fn is None and not r.requires_grad
    assert r.dtype is getattr(lucid, dt)
    want = w0.astype(np.float64) * mp_deriv(op, 1, x0.astype(np.float64))
    rtol = 1e-5 if dt == "float32" else 1e-14
    np.testing.assert_allclose(to_np(r), want, rtol=rtol)
    # the graph is still intact afterwards
    y.backward(gradient=lt(w0))
    np.testing.assert_allclose(to_np(x.grad), want, rtol=rtol)


def test_grad_formula_mul_two_inputs():
    a0, b0, w0 = np.array([0.5, 2.0]), np.array([3.0, -1.0]), np.array([1.0, 0.25])
    a, b = lt(a0, requires_grad=True), lt(b0, requires_grad=True)
    r = (a * b).grad_fn.grad_formula(lt(w0))
    assert len(r) == 2
    np.testing.assert_allclose(to_np(r[0]), w0 * b0)
    np.testing.assert_allclose(to_np(r[1]), w0 * a0)


@pytest.mark.parametrize("op", sorted(SEEDS))
def test_grad_formula_impl_exists(op):
    x = lt(np.array([0.5]), requires_grad=True)
    node = getattr(lucid, op)(x).grad_fn
    assert callable(node.grad_formula_impl)
    assert callable(node.grad_formula)


@pytest.mark.parametrize("op,n_saved", [("erf", 1), ("exp", 1), ("log2", 1)])
def test_saved_tensors_minimal(op, n_saved):
    x = lt(np.array([0.5, 1.5]), requires_grad=True)
    node = getattr(lucid, op)(x).grad_fn
    if not hasattr(node, "saved_tensors"):
        pytest.skip("no saved_tensors introspection")
    assert len(node.saved_tensors) == n_saved


def test_accumulate_grad_for_leaf_only():
    x = lt(np.array([0.5]), requires_grad=True)
    assert x.grad_fn is None
    y = lucid.exp(x)
    assert type(y.grad_fn).__name__ != "AccumulateGrad"
    acc = y.grad_fn.next_functions[0][0]
    assert type(acc).__name__ == "AccumulateGrad"
    assert acc.next_functions == () or all(n is None for n, _ in acc.next_functions)


def test_node_after_release_still_inspectable():
    x = lt(np.array([0.5]), requires_grad=True)
    y = lucid.log2(x).sum()
    node = y.grad_fn
    y.backward()
    assert type(node).__name__ == "SumBackward"
    assert isinstance(node.next_functions, tuple)
    assert repr(node)
    assert math.isfinite(x.grad.item())


def _public_ops():
    """(public name, schema name) of every op of lucid and lucid.linalg: lucid.X is
    schema X; lucid.linalg.X is linalg_X, or X when it is the same function as lucid.X."""
    out = [(f"lucid.{n}", n) for n in lucid.ops.__all__]
    for n in lucid.linalg.__all__:
        fn = getattr(lucid.linalg, n)
        same = getattr(lucid.ops, n, None) is fn
        out.append((f"lucid.linalg.{n}", n if same else f"linalg_{n}"))
    return out


@pytest.mark.parametrize("public,name", _public_ops(), ids=lambda v: str(v))
def test_every_public_op_has_a_schema(public, name):
    assert callable(eval(public, {"lucid": lucid}))
    s = lucid.ops.schema(name)
    assert s.name == name and isinstance(s.amp_policy, lucid.AmpPolicy)


def test_composite_schemas_record_their_parts():
    # einsum has a schema of its own, but its gradient comes from the ops it is made of
    a = lucid.tensor(np.ones((2, 3)), requires_grad=True)
    y = lucid.einsum("ij->j", a)
    assert lucid.ops.schema("einsum").node is None
    assert y.grad_fn is not None and type(y.grad_fn).__name__ != "einsum"
    y.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.ones((2, 3)))
