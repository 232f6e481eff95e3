"""The dispatcher and the op tables drive the public surface.

- every row of the tables is an exported op with a schema, a Tensor method when the row
  says so, and a node class bound to its schema;
- a fused eager backward agrees with the node's graph-mode formula (the math is stated
  once; the fused kernel is a shortcut that must not drift from it);
- the schema's fields are what the dispatcher acts on (AMP policy, integer rule,
  determinism, arity);
- the README's op list is the tables' op list.
"""
import os
import re

import numpy as np
import pytest

import lucid
from lucid._core import optable
from lucid._core import unary as unary_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLES = {"UNARY": optable.UNARY, "BINARY": optable.BINARY, "COMPARE": optable.COMPARE,
          "REDUCTIONS": optable.REDUCTIONS}
ROWS = [(t, r) for t, rows in TABLES.items() for r in rows]


def _row_id(v):
    return v["name"] if isinstance(v, dict) else v


@pytest.mark.parametrize("table,row", ROWS, ids=_row_id)
def test_row_is_exported_with_schema_and_method(table, row):
    name = row["name"]
    fn = getattr(lucid, name)
    assert getattr(lucid.ops, name) is fn
    assert fn.__name__ == name
    s = lucid.ops.schema(name)
    assert s.name == name
    if row.get("method", True):
        assert hasattr(lucid.Tensor, name), f"Tensor.{name} missing"


@pytest.mark.parametrize("table,row", [(t, r) for t, r in ROWS
                                       if t != "COMPARE" and r.get("grad", True)], ids=_row_id)
def test_differentiable_row_binds_its_node(table, row):
    s = lucid.ops.schema(row["name"])
    assert s.node is not None
    assert s.node.__name__.endswith("Backward")
    assert s.node.schema_v1 is s


def _unary_inputs(name, rng):
    from op_data import UNARY_DATA
    lo, hi = UNARY_DATA[name]["domain"]
    return rng.uniform(lo, hi, 64)


@pytest.mark.parametrize("row", [r for r in optable.UNARY if r["saves"]], ids=_row_id)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unary_fused_kernel_agrees_with_formula(row, dtype):
    rng = np.random.default_rng(7)
    x = lucid.tensor(_unary_inputs(row["name"], rng).astype(dtype), requires_grad=True)
    y = (getattr(unary_module, row["py_name"]) if row.get("py_name")
         else getattr(lucid, row["name"]))(x)
    g = lucid.tensor(rng.uniform(-1, 1, 64).astype(dtype))
    fused = y.grad_fn.grad_formula(g)                 # the C kernel
    with lucid.no_grad():
        saved = y.grad_fn.saved_tensors
        xs = saved[0] if row["saves"] == "x" else None
        ys = saved[0] if row["saves"] == "y" else None
        formula = y.grad_fn.grad_formula_impl(g, xs, ys)   # the lucid-ops formula
    (graph,) = lucid.autograd.grad(y, x, g)           # eager engine: the fused kernel
    tol = dict(rtol=2e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(fused.numpy(), formula.numpy(), **tol)
    np.testing.assert_allclose(graph.numpy(), formula.numpy(), **tol)


BINARY_C = [r for r in optable.BINARY if r["c"]]
BINARY_DOMAIN = {"pow": ((0.5, 2.0), (-2.0, 2.0)), "logaddexp": ((-5, 5), (-5, 5))}


@pytest.mark.parametrize("row", BINARY_C, ids=_row_id)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 4), ())],
                         ids=["same", "row", "scalar"])
def test_binary_fused_kernel_agrees_with_formula(row, dtype, shapes):
    rng = np.random.default_rng(3)
    (alo, ahi), (blo, bhi) = BINARY_DOMAIN.get(row["name"], ((-2, 2), (0.5, 2)))
    a = lucid.tensor(rng.uniform(alo, ahi, shapes[0]).astype(dtype), requires_grad=True)
    b = lucid.tensor(rng.uniform(blo, bhi, shapes[1]).astype(dtype), requires_grad=True)
    out = getattr(lucid, row["name"])(a, b)
    g = lucid.tensor(rng.uniform(-1, 1, out.shape).astype(dtype))
    fused = lucid.autograd.grad(out, (a, b), g, retain_graph=True)        # fused C pass
    formula = lucid.autograd.grad(out, (a, b), g, create_graph=True)      # lucid-ops formula
    tol = dict(rtol=1e-4, atol=1e-6) if dtype == "float32" else dict(rtol=1e-11, atol=1e-13)
    for f, h in zip(fused, formula):
        np.testing.assert_allclose(f.numpy(), h.detach().numpy(), **tol)


def test_force_fp32_policy_upcasts_half_and_keeps_leaf_grad_dtype():
    x = lucid.tensor([0.5, 1.0], dtype=lucid.float16, requires_grad=True)
    for name in ("exp", "log2", "logsumexp", "softmax"):
        assert lucid.ops.schema(name).amp_policy is lucid.AmpPolicy.ForceFP32
        f = getattr(lucid, name)
        y = f(x, 0) if name in ("logsumexp", "softmax") else f(x)
        assert y.dtype == lucid.float32, name
        y.sum().backward()
        assert x.grad.dtype == lucid.float16
        x.grad = None


def test_promote_policy_keeps_half():
    x = lucid.tensor([0.5, 1.0], dtype=lucid.float16)
    assert lucid.ops.schema("erf").amp_policy is lucid.AmpPolicy.Promote
    assert lucid.erf(x).dtype == lucid.float16
    assert (x * x).dtype == lucid.float16


def test_integer_rules_come_from_the_schema():
    i = lucid.tensor([1, 2, 3])
    assert lucid.ops.schema("div").int_rule == "float"
    assert (i / i).dtype == lucid.float32
    assert lucid.ops.schema("add").int_rule == "keep"
    assert (i + i).dtype == lucid.int64
    assert lucid.ops.schema("var").int_rule == "reject"
    with pytest.raises(TypeError, match="var"):
        lucid.var(i)


def test_deterministic_flag_is_enforced(monkeypatch):
    assert all(s.deterministic for s in lucid.ops.registry().values())
    lucid.use_deterministic_algorithms(True)
    try:
        assert lucid.are_deterministic_algorithms_enabled()
        assert lucid.exp(lucid.tensor([1.0])).item() == pytest.approx(np.e)
    finally:
        lucid.use_deterministic_algorithms(False)
    assert not lucid.are_deterministic_algorithms_enabled()


def test_edges_follow_arity():
    a = lucid.tensor([1.0, 2.0], requires_grad=True)
    b = lucid.tensor([3.0, 4.0], requires_grad=True)
    assert len((a * b).grad_fn.next_functions) == lucid.ops.schema("mul").arity == 2
    assert len(lucid.erf(a).grad_fn.next_functions) == lucid.ops.schema("erf").arity == 1
    c = lucid.clamp(a, b, None)
    assert len(c.grad_fn.next_functions) == lucid.ops.schema("clamp").arity == 3


def test_plain_builtins_inside_modules():
    # reduce defines lucid's any/all/sum/max/min; inside it the plain names must still be
    # Python's builtins (an empty reduced dim used to reach lucid.any with a generator).
    with pytest.raises(IndexError, match="non-zero size"):
        lucid.amax(lucid.zeros((2, 0)), dim=1)
    assert lucid.amax(lucid.zeros((0, 2)), dim=1).shape == (0,)
    with pytest.raises(IndexError, match="non-zero size"):
        lucid.max(lucid.zeros((2, 0)), dim=1)


def test_every_op_of_the_core_families_has_a_schema():
    """Ops of lucid/_core's families; the helpers that only combine other ops (equal,
    allclose, inner, ger, concat, clip, the *_like creators) record their parts' nodes."""
    composite = {"equal", "allclose", "inner", "ger", "concat", "clip", "zeros_like",
                 "ones_like", "empty_like", "full_like"}
    missing = [n for n in lucid.ops.__all__
               if (getattr(lucid.ops, n).__module__ or "").startswith("lucid._core.")
               and n not in lucid.ops.registry() and n not in composite]
    assert not missing, missing


def _readme_ops():
    text = open(os.path.join(ROOT, "README.md")).read()
    m = re.search(r"<!-- ops: begin -->(.*?)<!-- ops: end -->", text, re.S)
    assert m, "README.md has no generated op list (<!-- ops: begin --> ... <!-- ops: end -->)"
    return set(re.findall(r"`([a-z_0-9]+)`", m.group(1)))


def test_readme_op_list_is_the_exported_ops():
    listed = _readme_ops()
    exported = set(lucid.ops.__all__)
    assert listed == exported, (f"README lists but lucid lacks: {sorted(listed - exported)}; "
                                f"lucid has but README lacks: {sorted(exported - listed)}; "
                                "regenerate with python tools/readme_ops.py")
