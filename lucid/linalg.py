"""``lucid.linalg``: linear algebra as ``torch.linalg``, on LAPACK through NumPy (batched
over leading dims), plus the matrix helpers ``trace``, ``diag``, ``diagonal``,
``diag_embed``, ``tril``, ``triu``, ``kron``, ``tensordot``, ``einsum`` (also in ``lucid``).

Each op with a node of its own states its backward once, as ``grad_formula_impl`` in lucid
ops (a :class:`lucid._core.core.PyNode` subclass with a registered schema): eager backward
runs it with grad mode off, ``create_graph=True`` records it, so second derivatives
(gradgradcheck) come from the same formula. Ops that are compositions of lucid ops
(``kron``, ``tensordot``, ``einsum``, ``cross``, the matrix norms, ``lstsq``) are
differentiated through their parts. Ops with several differentiable outputs (``eigh``,
``svd``, ``qr``) record one node on a packed tensor (:func:`lucid.autograd.function.record_multi`).

LAPACK has no half precision: the decompositions reject float16 and bfloat16, as torch does.
"""
import collections
import functools
import operator
import string

import numpy as np

from lucid._core import core, host
from lucid._core.core import (
    ArgumentError,
    LucidError,
    PyNode,
    ShapeError,
    Tensor,
    UnsupportedDTypeError,
    _py_attach,
    _py_node,
    export,
)
from lucid.autograd.function import unpack

ops = core.ops

__all__ = [
    "cholesky",
    "cross",
    "det",
    "diag",
    "diag_embed",
    "diagonal",
    "eigh",
    "eigvalsh",
    "einsum",
    "inv",
    "kron",
    "lstsq",
    "matmul",
    "matrix_norm",
    "matrix_rank",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
    "tensordot",
    "trace",
    "tril",
    "triu",
    "vecdot",
    "vector_norm",
]


# -- helpers ------------------------------------------------------------------------
# The host-op helpers of lucid/_core/host.py (shared with lucid._sorting and
# lucid.special): a tensor from an argument, a tensor's values on the host, a NumPy
# result as a tensor of a dtype, whether a node is recorded, a node class's schema.

_t = host.as_tensor
_arr = host.to_host
_wrap = host.from_host          # (array, dtype) -> a cpu tensor
_need = host.needs_grad
_op = host.op                   # (name, arity, saves_input, saves_output, amp)


def _host_only(fn, name):
    """``fn`` computes through NumPy / LAPACK on the cpu: a gpu tensor among its
    arguments raises lucid's cpu-only error naming ``name``, never a silent copy to the
    host."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        for a in args + tuple(kwargs.values()):
            if isinstance(a, Tensor) and a.is_cuda:
                raise core._cpu_only_error(name)
        return fn(*args, **kwargs)
    return run


def _float(x, fn, allow_half=False):
    """x as a floating tensor (integers refused, as torch's linalg refuses them); float16
    and bfloat16 refused by LAPACK ops, as torch."""
    x = _t(x)
    if not x.is_floating_point():
        raise UnsupportedDTypeError(f"linalg.{fn}: expected a floating point tensor, got {x.dtype}")
    if host.is_half(x.dtype) and not allow_half:
        raise UnsupportedDTypeError(f"linalg.{fn}: {x.dtype.name} is not supported (no LAPACK "
                                    "kernel)")
    return x


def _square(x, fn):
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"linalg.{fn}: A must be batches of square matrices, but they are "
                         f"{' by '.join(map(str, x.shape[-2:]))} matrices")


def _record(cls, out, inputs, saved=(), ctx=None):
    if _need(*inputs):
        _py_attach(_py_node(cls), out, tuple(inputs), tuple(saved), ctx)
    return out


def mT(x):
    return ops.transpose(x, -1, -2)


def _eye_like(n, x):
    return core.from_numpy(np.eye(n, dtype=x.dtype.numpy_dtype))


def _sum_to(g, shape):
    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    lead = g.ndim - len(shape)
    if lead > 0:
        g = ops.sum(g, tuple(range(lead)))
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
    if axes:
        g = ops.sum(g, axes, True)
    return g


def _lapack(fn, *arrs):
    try:
        with np.errstate(all="ignore"):
            return fn(*arrs)
    except np.linalg.LinAlgError as e:
        raise LucidError(f"linalg: {e}") from None


# -- diagonal and friends -----------------------------------------------------------

def _norm_dim(d, nd):
    d = operator.index(d)
    if not -nd <= d < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], "
                         f"but got {d})")
    return d % nd


@_op("diagonal", amp="KeepInput")
class DiagonalBackward(PyNode):
    """Backward of diagonal: the gradient placed back on that diagonal (diagonal_scatter)."""

    def grad_formula_impl(self, g):
        shape, off, d1, d2 = self.ctx
        return _diag_scatter(g, shape, off, d1, d2)


@_op("_diag_scatter", amp="KeepInput")
class DiagScatterBackward(PyNode):
    """Backward of placing values on a diagonal of zeros: read that diagonal back."""

    def grad_formula_impl(self, g):
        _shape, off, d1, d2 = self.ctx
        return diagonal(g, off, d1, d2)


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of ``input`` w.r.t. dims ``dim1`` and ``dim2`` (appended as the last
    dim), ``offset`` above (> 0) or below (< 0) the main one."""
    x = _t(input)
    nd = x.ndim
    if nd < 2:
        raise ShapeError(f"diagonal() needs a tensor of at least 2 dims, got {nd}")
    d1, d2 = _norm_dim(dim1, nd), _norm_dim(dim2, nd)
    if d1 == d2:
        raise core.ArgumentError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    offset = operator.index(offset)
    base = _arr(x)
    arr = np.diagonal(base, offset, d1, d2)      # NumPy's view is read-only; torch's is not
    arr.flags.writeable = base.flags.writeable
    y = core._view_of(x, arr)
    if _need(x):
        _py_attach(_py_node(DiagonalBackward), y, (x,), (), (x.shape, offset, d1, d2),
                   view=True)
    return y


def _diag_scatter(src, shape, offset, d1, d2):
    """zeros(shape) with ``src`` on the diagonal (offset, d1, d2): diagonal's adjoint."""
    out = np.zeros(shape, dtype=src.dtype.numpy_dtype)
    idx = _diag_index(shape, offset, d1, d2)
    out[idx] = _arr(src)
    return _record(DiagScatterBackward, _wrap(out, src.dtype), (src,), (),
                   (shape, offset, d1, d2))


def _diag_index(shape, offset, d1, d2):
    """An advanced index selecting diagonal (offset, d1, d2) of an array of ``shape``, laid
    out as np.diagonal lays it (the diagonal as the last dim)."""
    n1, n2 = shape[d1], shape[d2]
    if offset >= 0:
        k = max(0, min(n1, n2 - offset))
        i1, i2 = np.arange(k), np.arange(k) + offset
    else:
        k = max(0, min(n1 + offset, n2))
        i1, i2 = np.arange(k) - offset, np.arange(k)
    rest = [d for d in range(len(shape)) if d not in (d1, d2)]
    nr = len(rest)
    idx = [None] * len(shape)
    for j, d in enumerate(rest):
        idx[d] = np.arange(shape[d]).reshape((-1,) + (1,) * (nr - j))
    idx[d1] = i1
    idx[d2] = i2
    return tuple(idx)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices (in dims dim1, dim2 of the result) with the last dim of ``input`` on their
    ``offset`` diagonal."""
    x = _t(input)
    nd = x.ndim + 1
    d1, d2 = _norm_dim(dim1, nd), _norm_dim(dim2, nd)
    if d1 == d2:
        raise core.ArgumentError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = x.shape[-1] + abs(offset)
    batch = list(x.shape[:-1])
    shape = [None] * nd
    shape[d1] = shape[d2] = n
    it = iter(batch)
    shape = tuple(next(it) if s is None else s for s in shape)
    return _diag_scatter(x, shape, offset, d1, d2)


def diag(input, diagonal=0):
    """1-d input: a square matrix with it on the ``diagonal``; 2-d: that diagonal."""
    x = _t(input)
    if x.ndim == 1:
        return diag_embed(x, diagonal, 0, 1)
    if x.ndim == 2:
        return globals()["diagonal"](x, diagonal, 0, 1)
    raise ShapeError(f"diag(): Supports 1D or 2D tensors. Got {x.ndim}D")


@_op("trace", amp="KeepInput")
class TraceBackward(PyNode):
    """Backward of trace: g on the main diagonal."""

    def grad_formula_impl(self, g):
        shape = self.ctx
        k = min(shape)
        return _diag_scatter(ops.expand(ops.reshape(g, (1,)), (k,)), shape, 0, 0, 1)


def trace(input):
    """Sum of the main diagonal of a 2-d tensor."""
    x = _t(input)
    if x.ndim != 2:
        raise ShapeError(f"trace: expected a matrix, but got tensor with dim {x.ndim}")
    dt = x.dtype if x.dtype.is_floating_point else core.as_dtype("int64")
    out = _wrap(np.asarray(np.trace(_arr(x))), dt)
    return _record(TraceBackward, out, (x,), (), x.shape)


class _TriBackward(PyNode):
    def grad_formula_impl(self, g):
        fn, k = self.ctx
        return fn(g, k)


@_op("tril", amp="KeepInput")
class TrilBackward(_TriBackward):
    """Backward of tril: the gradient's lower triangle."""


@_op("triu", amp="KeepInput")
class TriuBackward(_TriBackward):
    """Backward of triu: the gradient's upper triangle."""


def tril(input, diagonal=0):
    """The lower triangle (on and below ``diagonal``) of the last two dims; zeros above."""
    x = _t(input)
    if x.ndim < 2:
        raise ShapeError("tril: input tensor must have at least 2 dimensions")
    out = _wrap(np.tril(_arr(x), diagonal), x.dtype)
    return _record(TrilBackward, out, (x,), (), (tril, diagonal))


def triu(input, diagonal=0):
    """The upper triangle (on and above ``diagonal``) of the last two dims; zeros below."""
    x = _t(input)
    if x.ndim < 2:
        raise ShapeError("triu: input tensor must have at least 2 dimensions")
    out = _wrap(np.triu(_arr(x), diagonal), x.dtype)
    return _record(TriuBackward, out, (x,), (), (triu, diagonal))


# -- products: kron, tensordot, einsum (compositions of reshape / permute / matmul) ------

def kron(input, other):
    """Kronecker product (the operand with fewer dims gets leading 1s)."""
    a, b = _t(input), _t(other)
    nd = max(a.ndim, b.ndim)
    a = ops.reshape(a, (1,) * (nd - a.ndim) + tuple(a.shape))
    b = ops.reshape(b, (1,) * (nd - b.ndim) + tuple(b.shape))
    sa = []
    sb = []
    for i in range(nd):
        sa += [a.shape[i], 1]
        sb += [1, b.shape[i]]
    out = ops.reshape(a, tuple(sa)) * ops.reshape(b, tuple(sb))
    return ops.reshape(out, tuple(a.shape[i] * b.shape[i] for i in range(nd)))


def tensordot(a, b, dims=2):
    """Contract the last ``dims`` dims of ``a`` with the first of ``b`` (or the pairs of
    dims listed in ``dims = (dims_a, dims_b)``)."""
    a, b = _t(a), _t(b)
    if isinstance(dims, int) or (isinstance(dims, Tensor) and dims.ndim == 0):
        n = int(dims)
        if n < 0:
            raise core.ArgumentError(f"tensordot expects dims >= 0, but got dims={n}")
        da, db = list(range(a.ndim - n, a.ndim)), list(range(n))
    else:
        da, db = dims
        da = [da] if isinstance(da, int) else [int(d) for d in da]
        db = [db] if isinstance(db, int) else [int(d) for d in db]
    if len(da) != len(db):
        raise ShapeError("both dimension lists should have same length")
    letters = iter(string.ascii_letters)
    la = [next(letters) for _ in range(a.ndim)]
    lb = [next(letters) for _ in range(b.ndim)]
    for i, j in zip(da, db):
        lb[j % b.ndim] = la[i % a.ndim]
    contracted = {la[i % a.ndim] for i in da}
    out = [c for c in la if c not in contracted] + [c for c in lb if c not in contracted]
    return einsum("".join(la) + "," + "".join(lb) + "->" + "".join(out), a, b)


def _einsum_term(term, where):
    """A term's subscripts with '...' kept as one token; any other '.' or character outside
    [a-zA-Z] raises naming ``where``."""
    if term.count("...") > 1:
        raise ArgumentError(f"einsum(): found '.' for {where} but an ellipsis (...) was "
                            "already found")
    rest = term.replace("...", "")
    if "." in rest:
        raise ArgumentError(f"einsum(): found '.' for {where} that is not part of any ellipsis")
    for c in rest:
        if c not in string.ascii_letters:
            raise ArgumentError(f"einsum(): invalid subscript {c!r} given for {where}, "
                                "subscripts must be in [a-zA-Z]")
    return term


def _parse_einsum(eq, operands):
    """(subscripts of each operand with '...' spelled out as letters, output subscripts),
    after torch's checks: operand count, characters, dims per operand, output subscripts
    unique and present in an input, sizes of a repeated subscript equal (or 1, which
    broadcasts, across operands). A bad equation raises ArgumentError, sizes ShapeError."""
    eq = eq.replace(" ", "")
    if eq.count("->") > 1:
        raise ArgumentError("einsum(): the equation has more than one '->'")
    if "->" in eq:
        lhs, rhs = eq.split("->")
    else:
        lhs, rhs = eq, None
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ArgumentError(f"einsum(): the equation has {len(terms)} operand subscript(s) but "
                            f"{len(operands)} operand(s) were given")
    terms = [_einsum_term(t, f"operand {k}") for k, t in enumerate(terms)]
    if rhs is not None:
        rhs = _einsum_term(rhs, "the output")
    used = {c for c in eq if c.isalpha()}
    free = iter(c for c in string.ascii_letters if c not in used)
    ell_n = 0
    for k, (t, x) in enumerate(zip(terms, operands)):
        named = len(t) - 3 if "..." in t else len(t)
        if named > x.ndim or ("..." not in t and named != x.ndim):
            raise ArgumentError(
                f"einsum(): the number of subscripts in the equation ({named}) does not match "
                f"the number of dimensions ({x.ndim}) for operand {k}"
                + ("" if "..." in t else " and no ellipsis was given"))
        if "..." in t:
            ell_n = max(ell_n, x.ndim - named)
    ell = "".join(next(free) for _ in range(ell_n))
    subs, size = [], {}
    for k, (t, x) in enumerate(zip(terms, operands)):
        if "..." in t:
            n = x.ndim - (len(t) - 3)
            t = t.replace("...", ell[ell_n - n:])
        seen = {}
        for c, n in zip(t, x.shape):
            what = ("a dimension covered by the ellipsis" if c in ell else f"subscript {c}")
            if c in seen and seen[c] != n:
                raise ShapeError(f"einsum(): {what} is repeated for operand {k} but the sizes "
                                 f"don't match, {n} != {seen[c]}")
            seen[c] = n
            if size.get(c, 1) != 1 and n != 1 and size[c] != n:
                raise ShapeError(f"einsum(): {what} has size {n} for operand {k} which does "
                                 f"not broadcast with previously seen size {size[c]}")
            if n != 1 or c not in size:
                size[c] = n
        subs.append(t)
    if rhs is None:
        counts = collections.Counter("".join(subs))
        rhs = ell + "".join(sorted(c for c in counts if counts[c] == 1 and c not in ell))
    else:
        rhs = rhs.replace("...", ell)
        for c in rhs:
            if rhs.count(c) > 1:
                raise ArgumentError(f"einsum(): output subscript {c} appears more than once in "
                                    "the output")
            if c not in size:
                raise ArgumentError(f"einsum(): output subscript {c} does not appear in the "
                                    "equation for any input operand")
    return subs, rhs


def _take_diagonals(x, s):
    """Repeated letters within one operand ('ii'): keep their diagonal."""
    while len(set(s)) < len(s):
        for i, c in enumerate(s):
            j = s.find(c, i + 1)
            if j >= 0:
                x = diagonal(x, 0, i, j)
                s = s[:i] + s[i + 1:j] + s[j + 1:] + c
                break
    return x, s


def _sum_out(x, s, keep):
    axes = tuple(i for i, c in enumerate(s) if c not in keep)
    if axes:
        x = ops.sum(x, axes)
        s = "".join(c for c in s if c in keep)
    return x, s


def _contract(a, sa, b, sb, keep):
    """One pairwise contraction as a batched matmul: (batch, left, k) @ (batch, k, right)."""
    a, sa = _sum_out(a, sa, keep | set(sb))
    b, sb = _sum_out(b, sb, keep | set(sa))
    batch = [c for c in sa if c in sb and c in keep]
    con = [c for c in sa if c in sb and c not in keep]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]
    size = {}
    for x, s in ((a, sa), (b, sb)):
        for c, n in zip(s, x.shape):
            size[c] = max(size.get(c, 1), n) if n != 1 else size.get(c, 1)
    pa = ops.permute(a, tuple(sa.index(c) for c in batch + left + con))
    pb = ops.permute(b, tuple(sb.index(c) for c in batch + con + right))
    bsa = tuple(pa.shape[:len(batch)])
    bsb = tuple(pb.shape[:len(batch)])
    L = int(np.prod([size[c] for c in left], dtype=np.int64))
    K = int(np.prod([size[c] for c in con], dtype=np.int64))
    R = int(np.prod([size[c] for c in right], dtype=np.int64))
    for c, n in zip(con, pa.shape[len(batch) + len(left):]):
        if n != size[c]:
            pa = ops.expand(pa, tuple(pa.shape[:len(batch) + len(left)]) + tuple(size[c2] for c2 in con))
            break
    for c, n in zip(con, pb.shape[len(batch):len(batch) + len(con)]):
        if n != size[c]:
            pb = ops.expand(pb, bsb + tuple(size[c2] for c2 in con) + tuple(pb.shape[len(batch) + len(con):]))
            break
    ma = ops.reshape(pa, bsa + (L, K))
    mb = ops.reshape(pb, bsb + (K, R))
    out = ops.matmul(ma, mb)
    bs = tuple(out.shape[:len(batch)])
    out = ops.reshape(out, bs + tuple(size[c] for c in left) + tuple(size[c] for c in right))
    return out, "".join(batch + left + right)


def _sublist_equation(args):
    """einsum(op1, [0, 1], op2, [1, 2], [0, 2]) -> ('ab,bc->ac', op1, op2)."""
    def letters(sub):
        return "".join("..." if s is Ellipsis else string.ascii_letters[operator.index(s)]
                       for s in sub)
    ops_, subs = list(args[0::2]), list(args[1::2])
    out = None
    if len(args) % 2 == 1:
        out = args[-1]
        ops_ = ops_[:len(subs)]
    eq = ",".join(letters(s) for s in subs)
    if out is not None:
        eq += "->" + letters(out)
    return eq, ops_


def einsum(equation, *operands):
    """Einstein summation, any subscripts torch accepts ('...', repeated letters, implicit
    output, or the sublist form einsum(op1, [0, 1], op2, [1, 2], [0, 2])). Contractions
    run pairwise in NumPy's greedy order (np.einsum_path), each as a batched matmul, so
    chains never build the full outer product."""
    if not isinstance(equation, str):
        equation, operands = _sublist_equation((equation,) + operands)
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    xs = [_t(x) for x in operands]
    subs, rhs = _parse_einsum(equation, xs)
    ts = []
    for x, s in zip(xs, subs):
        x, s = _take_diagonals(x, s)
        ts.append((x, s))
    if len(ts) > 1:
        shapes_eq = ",".join(s for _, s in ts) + "->" + rhs
        dummies = [np.broadcast_to(np.empty((), np.float32), x.shape) for x, _ in ts]
        path = np.einsum_path(shapes_eq, *dummies, optimize="greedy")[0][1:]
    else:
        path = []
    for pair in path:
        pair = sorted(pair, reverse=True)
        picked = [ts.pop(i) for i in pair]
        rest = set(rhs) | set("".join(s for _, s in ts))
        if len(picked) == 1:
            x, s = _sum_out(picked[0][0], picked[0][1], rest)
            ts.append((x, s))
            continue
        (b, sb), (a, sa) = picked[0], picked[1]
        ts.append(_contract(a, sa, b, sb, rest))
    while len(ts) > 1:   # einsum_path had nothing to say (e.g. scalars): left to right
        (a, sa), (b, sb) = ts.pop(0), ts.pop(0)
        rest = set(rhs) | set("".join(s for _, s in ts))
        ts.insert(0, _contract(a, sa, b, sb, rest))
    x, s = ts[0]
    x, s = _sum_out(x, s, set(rhs))
    if sorted(s) != sorted(rhs):
        missing = set(rhs) - set(s)
        raise LucidError(f"einsum(): output subscripts {sorted(missing)} lost in contraction")
    if s != rhs:
        x = ops.permute(x, tuple(s.index(c) for c in rhs))
    return x


# -- solve, inv, det, slogdet -------------------------------------------------------

@_op("linalg_inv", saves_output=True, amp="Promote")
class LinalgInvBackward(PyNode):
    """Backward of inv: gA = -Y^T g Y^T with Y = inv(A)."""

    def grad_formula_impl(self, g, y):
        yt = mT(y)
        return -ops.matmul(yt, ops.matmul(g, yt))


def inv(A):
    """The inverse of each square matrix in ``A`` (raises for a singular one)."""
    A = _float(A, "inv")
    _square(A, "inv")
    out = _wrap(_lapack(np.linalg.inv, _arr(A)), A.dtype)
    if _need(A):
        _py_attach(_py_node(LinalgInvBackward), out, (A,), (out,))
    return out


def _vector_rhs(A, B):
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


@_op("linalg_solve", arity=2, saves_input=True, saves_output=True, amp="Promote")
class LinalgSolveBackward(PyNode):
    """Backward of X = solve(A, B): gB = solve(A^T, g), gA = -gB X^T (batch dims summed)."""

    def grad_formula_impl(self, g, A, X):
        vec, sa, sb = self.ctx
        if vec:
            g, X = ops.unsqueeze(g, -1), ops.unsqueeze(X, -1)
        gB = solve(mT(A), g)
        gA = None
        if self.needs_input_grad(0):
            gA = _sum_to(-ops.matmul(gB, mT(X)), sa)
        if vec:
            gB = ops.squeeze(gB, -1)
        return gA, (_sum_to(gB, sb) if self.needs_input_grad(1) else None)


def solve(A, B, *, left=True):
    """X with A X = B (``left=False``: X A = B); B a vector or batches of matrices; batch
    dims broadcast."""
    A, B = _float(A, "solve"), _float(B, "solve")
    _square(A, "solve")
    if not left:
        return mT(solve(mT(A), mT(B)))
    dt = core.as_dtype(np.promote_types(A.dtype.numpy_dtype, B.dtype.numpy_dtype))
    if A.dtype is not dt:
        A = A.to(dt)
    if B.dtype is not dt:
        B = B.to(dt)
    vec = _vector_rhs(A, B)
    a, b = _arr(A), _arr(B)
    bb = b[..., None] if vec else b
    try:
        batch = np.broadcast_shapes(a.shape[:-2], bb.shape[:-2])
    except ValueError:
        raise ShapeError(f"linalg.solve: batch dims of A {A.shape} and B {B.shape} do not "
                         "broadcast") from None
    if bb.shape[-2] != a.shape[-1]:
        raise ShapeError(f"linalg.solve: incompatible shapes of A {tuple(A.shape)} and "
                         f"B {tuple(B.shape)}")
    x = _lapack(np.linalg.solve, np.broadcast_to(a, batch + a.shape[-2:]),
                np.broadcast_to(bb, batch + bb.shape[-2:]))
    if vec:
        x = x[..., 0]
    out = _wrap(x, dt)
    if _need(A, B):
        _py_attach(_py_node(LinalgSolveBackward), out, (A, B), (A, out),
                   (vec, tuple(A.shape), tuple(B.shape)))
    return out


@_op("linalg_det", saves_input=True, saves_output=True, amp="Promote")
class LinalgDetBackward(PyNode):
    """Backward of det: gA = g det(A) inv(A)^T, or, where a det is exactly 0, the cofactor
    matrix through the SVD (_det_grad_singular)."""

    def grad_formula_impl(self, g, A, d):
        if np.any(d.detach().numpy() == 0):
            return _det_grad_singular(g, A)
        s = ops.unsqueeze(ops.unsqueeze(g * d, -1), -1)
        return s * mT(inv(A))


def _det_grad_singular(g, A):
    """The cofactor matrix of a singular A through its SVD, as torch: det(A) is
    det(U) det(Vh) prod(S), so gA = U diag(c prod_{j != i} S_j) Vh with c = g det(U) det(Vh)
    (the singular-value term of svd's backward, finite even for repeated zeros)."""
    U, S, Vh = svd(A, full_matrices=False)
    sign = np.linalg.det(U.detach().numpy()) * np.linalg.det(Vh.detach().numpy())   # +-1
    n = S.shape[-1]
    eye = core.from_numpy(np.eye(n, dtype=bool))
    others = ops.prod(ops.where(eye, 1.0, ops.unsqueeze(S, -2) * ops.ones_like(
        ops.unsqueeze(S, -1))), -1)
    c = g * _wrap(np.asarray(sign), g.dtype)
    return ops.matmul(U, ops.matmul(diag_embed(ops.unsqueeze(c, -1) * others), Vh))



def det(A):
    """The determinant of each square matrix (the gradient needs A invertible)."""
    A = _float(A, "det")
    _square(A, "det")
    out = _wrap(np.asarray(_lapack(np.linalg.det, _arr(A))), A.dtype)
    if _need(A):
        _py_attach(_py_node(LinalgDetBackward), out, (A,), (A, out))
    return out


@_op("linalg_slogdet", saves_input=True, amp="Promote")
class LinalgSlogdetBackward(PyNode):
    """Backward of slogdet's logabsdet: gA = g inv(A)^T (sign has no gradient)."""

    def grad_formula_impl(self, g, A):
        return ops.unsqueeze(ops.unsqueeze(g, -1), -1) * mT(inv(A))


SlogdetResult = collections.namedtuple("SlogdetResult", ["sign", "logabsdet"])


def slogdet(A):
    """(sign, log|det|) of each square matrix: finite where det over/underflows."""
    A = _float(A, "slogdet")
    _square(A, "slogdet")
    s, l = _lapack(np.linalg.slogdet, _arr(A))
    sign, logabs = _wrap(np.asarray(s), A.dtype), _wrap(np.asarray(l), A.dtype)
    if _need(A):
        _py_attach(_py_node(LinalgSlogdetBackward), logabs, (A,), (A,))
    return SlogdetResult(sign, logabs)


def logdet(A):
    """log det(A) (nan for a negative determinant, -inf for zero)."""
    sign, la = slogdet(A)
    return la + ops.log(sign)


# -- decompositions -----------------------------------------------------------------

def _phi(x):
    """Lower triangle with the diagonal halved."""
    return tril(x, -1) + 0.5 * diag_embed(diagonal(x, 0, -2, -1))


@_op("linalg_cholesky", saves_output=True, amp="Promote")
class LinalgCholeskyBackward(PyNode):
    """Backward of L = cholesky(A): gA = sym(L^-T phi(L^T gL) L^-1), phi = tril with the
    diagonal halved (A's upper triangle is taken to mirror the lower one)."""

    def grad_formula_impl(self, g, L):
        upper = self.ctx
        if upper:                       # U = L^T
            L, g = mT(L), mT(g)
        P = _phi(ops.matmul(mT(L), g))
        S = solve(mT(L), P)                        # L^-T P
        S = mT(solve(mT(L), mT(S)))                # L^-T P L^-1
        return 0.5 * (S + mT(S))


def cholesky(A, *, upper=False):
    """Lower (or upper) Cholesky factor of each symmetric positive-definite matrix."""
    A = _float(A, "cholesky")
    _square(A, "cholesky")
    try:
        L = np.linalg.cholesky(_arr(A))
    except np.linalg.LinAlgError:
        raise LucidError("linalg.cholesky: The factorization could not be completed because "
                         "the input is not positive-definite.") from None
    if upper:
        L = np.swapaxes(L, -1, -2)
    out = _wrap(L, A.dtype)
    if _need(A):
        _py_attach(_py_node(LinalgCholeskyBackward), out, (A,), (out,), upper)
    return out


def _nonzero(g):
    return bool(np.any(g.detach().numpy() != 0))


def _qr_grad_deep(Q, R, gQ, gR):
    """QR backward for m >= n: with qdq = Q^T gQ, rdr = R gR^T and
    M = tril(qdq - qdq^T + rdr - rdr^T), gA = Q (gR + M R^-T) + (gQ - Q qdq) R^-T."""
    qdq = ops.matmul(mT(Q), gQ)
    rdr = ops.matmul(R, mT(gR))
    M = tril(qdq - mT(qdq) + rdr - mT(rdr))

    def rsolve_t(X):                 # X R^-T
        return mT(solve(R, mT(X)))

    return ops.matmul(Q, gR + rsolve_t(M)) + rsolve_t(gQ - ops.matmul(Q, qdq))


@_op("linalg_qr", saves_output=True, amp="Promote")
class LinalgQrBackward(PyNode):
    """Backward of (Q, R) = qr(A) (TensorFlow's QrGrad): m >= n as _qr_grad_deep; m < n
    splits A = [X | Y] = Q [U | V]: gY = Q gV and gX is the square case with gQ + Y gV^T."""

    def grad_formula_impl(self, g, packed):
        (mode, m, n), layout = self.ctx
        if mode == "complete" and m > n:
            raise LucidError("The QR decomposition is not differentiable when mode='complete' "
                             "and nrows > ncols.")
        gQ, gR = unpack(g, layout)
        Q, R = unpack(packed, layout)
        if m >= n:
            return _qr_grad_deep(Q, R, gQ, gR)
        U, V = ops.narrow(R, -1, 0, m), ops.narrow(R, -1, m, n - m)
        gU, gV = ops.narrow(gR, -1, 0, m), ops.narrow(gR, -1, m, n - m)
        Y = ops.matmul(Q, V)
        gX = _qr_grad_deep(Q, U, gQ + ops.matmul(Y, mT(gV)), gU)
        return ops.cat([gX, ops.matmul(Q, gV)], -1)


QRResult = collections.namedtuple("QRResult", ["Q", "R"])


def qr(A, mode="reduced"):
    """QR decomposition (``mode``: 'reduced', 'complete' or 'r'; 'r' returns an empty Q)."""
    A = _float(A, "qr")
    if mode not in ("reduced", "complete", "r"):
        raise core.ArgumentError(f"qr received unrecognized mode '{mode}' but expected one of "
                                 "'reduced' (default), 'r', or 'complete'")
    a = _arr(A)
    m, n = a.shape[-2:]
    Q, R = np.linalg.qr(a, mode="complete" if mode == "complete" else "reduced")
    if mode == "r":
        R_t = _wrap(R, A.dtype)
        if _need(A):
            raise LucidError("The derivative of linalg.qr depends on Q, which is not computed "
                             "when mode='r'. Please use linalg.qr(A, mode='reduced') if you "
                             "are going to differentiate through linalg.qr.")
        return QRResult(core.from_numpy(np.zeros(0, A.dtype.numpy_dtype)), R_t)
    if not _need(A):
        return QRResult(_wrap(Q, A.dtype), _wrap(R, A.dtype))
    Q_t, R_t = _multi(LinalgQrBackward, (A,), [Q, R], A.dtype, (mode, m, n))
    return QRResult(Q_t, R_t)


def _multi(cls, inputs, outs, dt, ctx):
    """record_multi with the packed output saved (every multi-output formula reads it)."""
    arrs = [np.asarray(o, dtype=dt.numpy_dtype) for o in outs]
    parts = [np.ascontiguousarray(o).reshape(-1) for o in arrs]
    packed = core.from_numpy(np.concatenate(parts))
    layout, off = [], 0
    for o in arrs:
        layout.append((off, o.size, o.shape))
        off += o.size
    _py_attach(_py_node(cls), packed, tuple(inputs), (packed,), (ctx, layout))
    return unpack(packed, layout)


@_op("linalg_eigh", saves_output=True, amp="Promote")
class LinalgEighBackward(PyNode):
    """Backward of (L, V) = eigh(A): gA = V (diag(gL) + skew(V^T gV)/2 / E) V^T, with
    E_ij = L_j - L_i. The eigenvector term is left out when gV is zero (eigenvalues alone
    have a finite gradient even when repeated); with gV nonzero and repeated eigenvalues the
    gradient is inf/nan, as torch documents."""

    def grad_formula_impl(self, g, packed):
        _, layout = self.ctx
        gL, gV = unpack(g, layout)
        L, V = unpack(packed, layout)
        inner = diag_embed(gL)
        if _nonzero(gV):
            VhgV = ops.matmul(mT(V), gV)
            VhgV = 0.5 * (VhgV - mT(VhgV))
            E = ops.unsqueeze(L, -2) - ops.unsqueeze(L, -1)
            n = L.shape[-1]
            eye = core.from_numpy(np.eye(n, dtype=bool))
            E = ops.where(eye, 1.0, E)
            inner = inner + ops.where(eye, 0.0, VhgV / E)
        return ops.matmul(V, ops.matmul(inner, mT(V)))


EighResult = collections.namedtuple("EighResult", ["eigenvalues", "eigenvectors"])


def eigh(A, UPLO="L"):
    """Eigenvalues (ascending) and orthonormal eigenvectors of symmetric matrices (only the
    ``UPLO`` triangle is read)."""
    A = _float(A, "eigh")
    _square(A, "eigh")
    if UPLO not in ("L", "U"):
        raise core.ArgumentError("Expected UPLO argument to be 'L' or 'U'")
    w, v = _lapack(np.linalg.eigh, _arr(A), UPLO)
    if not _need(A):
        return EighResult(_wrap(w, A.dtype), _wrap(v, A.dtype))
    return EighResult(*_multi(LinalgEighBackward, (A,), [w, v], A.dtype, UPLO))


def eigvalsh(A, UPLO="L"):
    """Eigenvalues of symmetric matrices (ascending)."""
    return eigh(A, UPLO).eigenvalues


@_op("linalg_svd", saves_output=True, amp="Promote")
class LinalgSvdBackward(PyNode):
    """Backward of (U, S, Vh) = svd(A, full_matrices=False), torch's formula:
    gA = U [skew(U^T gU)/E S + S skew(V^T gV)/E + diag(gS)] V^T + the terms outside the
    span of U (m > n) or V (m < n); E_jk = S_k^2 - S_j^2. Singular-vector terms are left out
    when their gradient is zero (singular values alone: finite even when repeated)."""

    def grad_formula_impl(self, g, packed):
        (full, m, n), layout = self.ctx
        if full and m != n:
            raise LucidError("linalg.svd: The derivative is not implemented when "
                             "full_matrices=True and m != n; use full_matrices=False")
        gU, gS, gVh = unpack(g, layout)
        U, S, Vh = unpack(packed, layout)
        V, gV = mT(Vh), mT(gVh)
        has_u, has_v = _nonzero(gU), _nonzero(gVh)
        k = S.shape[-1]
        eye = core.from_numpy(np.eye(k, dtype=bool))
        inner = diag_embed(gS)
        if has_u or has_v:
            S2 = S * S
            E = ops.where(eye, 1.0, ops.unsqueeze(S2, -2) - ops.unsqueeze(S2, -1))
        if has_u:
            UhgU = ops.matmul(mT(U), gU)
            inner = inner + ops.where(eye, 0.0, (UhgU - mT(UhgU)) / E) * ops.unsqueeze(S, -2)
        if has_v:
            VhgV = ops.matmul(mT(V), gV)
            inner = inner + ops.unsqueeze(S, -1) * ops.where(eye, 0.0, (VhgV - mT(VhgV)) / E)
        if m > n and has_u:
            gA = ops.matmul(U, inner)
            gUSinv = gU / ops.unsqueeze(S, -2)
            gA = gA + gUSinv - ops.matmul(U, ops.matmul(mT(U), gUSinv))
            return ops.matmul(gA, Vh)
        if m < n and has_v:
            gA = ops.matmul(inner, Vh)
            gVSinv = gV / ops.unsqueeze(S, -2)
            gA = gA + mT(gVSinv) - ops.matmul(ops.matmul(mT(gVSinv), V), Vh)
            return ops.matmul(U, gA)
        return ops.matmul(U, ops.matmul(inner, Vh))


SVDResult = collections.namedtuple("SVDResult", ["U", "S", "Vh"])


def svd(A, full_matrices=True, *, driver=None):
    """A = U diag(S) Vh, singular values descending. The backward needs
    ``full_matrices=False`` when A is not square (as torch)."""
    A = _float(A, "svd")
    a = _arr(A)
    m, n = a.shape[-2:]
    u, s, vh = _lapack(lambda x: np.linalg.svd(x, full_matrices=full_matrices), a)
    if not _need(A):
        return SVDResult(_wrap(u, A.dtype), _wrap(s, A.dtype), _wrap(vh, A.dtype))
    return SVDResult(*_multi(LinalgSvdBackward, (A,), [u, s, vh], A.dtype,
                             (bool(full_matrices), m, n)))


def svdvals(A, *, driver=None):
    """Singular values, descending (their gradient is finite even when repeated)."""
    return svd(A, full_matrices=False).S


@_op("linalg_pinv", saves_input=True, saves_output=True, amp="Promote")
class LinalgPinvBackward(PyNode):
    """Backward of the pseudo-inverse P of A (torch's pinv_backward; valid where the rank
    is locally constant)."""

    def grad_formula_impl(self, g, A, P):
        m, n = A.shape[-2:]
        if m <= n:
            K = ops.matmul(mT(g), P)
            KPh = ops.matmul(K, mT(P))
            return (-mT(ops.matmul(P, K)) + KPh - ops.matmul(ops.matmul(A, P), KPh)
                    + ops.matmul(ops.matmul(mT(P), P), mT(g) - ops.matmul(K, A)))
        K = ops.matmul(P, mT(g))
        PhK = ops.matmul(mT(P), K)
        return (-mT(ops.matmul(K, P)) + ops.matmul(ops.matmul(mT(g) - ops.matmul(A, K), P), mT(P))
                + PhK - ops.matmul(ops.matmul(PhK, P), A))


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """Moore-Penrose pseudo-inverse (singular values below max(atol, rtol * s_max) dropped;
    rtol defaults to eps * max(m, n) when atol is not given, as torch)."""
    A = _float(A, "pinv")
    a = _arr(A)
    m, n = a.shape[-2:]
    if rtol is None:
        rtol = np.finfo(a.dtype).eps * max(m, n) if atol is None or atol == 0 else 0.0
    atol = 0.0 if atol is None else float(atol)
    u, s, vh = _lapack(lambda x: np.linalg.svd(x, full_matrices=False), a)
    smax = s[..., :1] if s.shape[-1] else s
    cut = np.maximum(atol, rtol * smax)
    with np.errstate(divide="ignore"):
        sinv = np.where(s > cut, 1.0 / np.where(s > cut, s, 1), 0)
    p = np.matmul(np.swapaxes(vh, -1, -2) * sinv[..., None, :], np.swapaxes(u, -1, -2))
    out = _wrap(p, A.dtype)
    if _need(A):
        _py_attach(_py_node(LinalgPinvBackward), out, (A,), (A, out))
    return out


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False):
    """Number of singular values above the tolerance (pinv's)."""
    a = _arr(_float(A, "matrix_rank"))
    m, n = a.shape[-2:]
    if rtol is None:
        rtol = np.finfo(a.dtype).eps * max(m, n) if atol is None or atol == 0 else 0.0
    s = np.linalg.svd(a, compute_uv=False)
    cut = np.maximum(0.0 if atol is None else atol, rtol * (s[..., :1] if s.shape[-1] else s))
    return core.from_numpy(np.asarray(np.sum(s > cut, axis=-1), dtype=np.int64))


LstsqResult = collections.namedtuple("LstsqResult",
                                     ["solution", "residuals", "rank", "singular_values"])


def lstsq(A, B, rcond=None, *, driver=None):
    """Least-squares solution of A X = B (pinv(A) B, differentiable). As torch's default
    CPU driver ('gelsy'), residuals and singular_values are empty; rank is computed."""
    A, B = _float(A, "lstsq"), _float(B, "lstsq")
    vec = B.ndim == A.ndim - 1
    Bm = ops.unsqueeze(B, -1) if vec else B
    X = ops.matmul(pinv(A, rtol=rcond), Bm)
    if vec:
        X = ops.squeeze(X, -1)
    empty = core.from_numpy(np.zeros(0, A.dtype.numpy_dtype))
    return LstsqResult(X, empty, matrix_rank(A.detach(), rtol=rcond), empty)


# -- norms -----------------------------------------------------------------------

@_op("linalg_vector_norm", saves_input=True, saves_output=True, amp="KeepInput")
class LinalgVectorNormBackward(PyNode):
    """Backward of ||x||_p over ``dim``: g x |x|^(p-2) / n^(p-1) (0 where n == 0);
    p = inf / -inf: g sign(x) split evenly among the elements attaining the max / min;
    p = 1: g sign(x); p = 0: no gradient."""

    def grad_formula_impl(self, g, x, n):
        ord, axes, keepdim = self.ctx
        if not keepdim and axes is not None:
            for d in sorted(axes):
                g, n = ops.unsqueeze(g, d), ops.unsqueeze(n, d)
        elif not keepdim:
            shp = (1,) * x.ndim
            g, n = ops.reshape(g, shp), ops.reshape(n, shp)
        if ord == 0:
            return x * 0.0
        if ord == 1:
            return g * ops.sign(x)
        if ord in (float("inf"), float("-inf")):
            ax = abs(x)
            hit = ops.where(ax == n, 1.0, 0.0) * (x * 0.0 + 1.0)
            cnt = ops.sum(hit, axes if axes is not None else None, True)
            return g * ops.sign(x) * hit / cnt
        zero = n == 0
        safe = ops.where(zero, 1.0, n)
        if ord == 2:
            return ops.where(zero, 0.0, g * x / safe)
        ax = abs(x)
        r = x * ops.pow(ax, ord - 2) / ops.pow(safe, ord - 1)
        return ops.where(zero, 0.0, g * r)


def _axes(dim, nd):
    if dim is None:
        return None
    if isinstance(dim, int):
        dim = (dim,)
    return tuple(sorted(d % nd for d in dim)) if nd else ()


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The ``ord``-norm of ``x`` over ``dim`` (all elements if None) as a vector norm."""
    x = _t(x)
    if not x.is_floating_point():
        raise UnsupportedDTypeError(f"linalg.vector_norm: expected a floating point tensor, got {x.dtype}")
    if dtype is not None:
        x = x.to(dtype)
    ord = float(ord)
    axes = _axes(dim, x.ndim)
    a = _arr(x)
    comp = a.astype(host.compute_dtype(x.dtype), copy=False)
    ax = np.abs(comp)
    npax = axes
    if ord == float("inf"):
        r = np.max(ax, axis=npax, keepdims=keepdim) if ax.size else np.zeros(())
    elif ord == float("-inf"):
        r = np.min(ax, axis=npax, keepdims=keepdim)
    elif ord == 0:
        r = np.sum(ax != 0, axis=npax, keepdims=keepdim).astype(comp.dtype)
    elif ord == 1:
        r = np.sum(ax, axis=npax, keepdims=keepdim)
    elif ord == 2:
        # scaled, so that huge or tiny entries neither overflow nor underflow
        scale = np.max(ax, axis=npax, keepdims=True) if ax.size else np.ones((1,) * ax.ndim)
        scale = np.where((scale == 0) | ~np.isfinite(scale), 1, scale)
        r = np.sqrt(np.sum((ax / scale) ** 2, axis=npax, keepdims=True)) * scale
        r = np.where(np.isinf(np.max(ax, axis=npax, keepdims=True)) if ax.size else r, np.inf, r)
        if not keepdim:
            r = r.reshape(np.sum(ax, axis=npax).shape)
    else:
        r = np.sum(ax ** ord, axis=npax, keepdims=keepdim) ** (1.0 / ord)
    out = _wrap(np.asarray(r), x.dtype)
    if _need(x):
        _py_attach(_py_node(LinalgVectorNormBackward), out, (x,), (x, out), (ord, axes, keepdim))
    return out


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """Frobenius, nuclear, or induced 1 / 2 / inf (and -1 / -2 / -inf) matrix norms."""
    A = _t(A)
    if dtype is not None:
        A = A.to(dtype)
    if A.ndim < 2:
        raise ShapeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                         "dimensions.")
    d0, d1 = dim[0] % A.ndim, dim[1] % A.ndim
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    # move the two dims last
    order = [d for d in range(A.ndim) if d not in (d0, d1)] + [d0, d1]
    M = ops.permute(A, tuple(order))
    if ord == "nuc":
        r = ops.sum(svdvals(M), -1)
    elif ord in (2, -2):
        s = svdvals(M)
        r = ops.amax(s, -1) if ord == 2 else ops.amin(s, -1)
    elif ord in (1, -1):
        c = ops.sum(abs(M), -2)
        r = ops.amax(c, -1) if ord == 1 else ops.amin(c, -1)
    elif ord in (float("inf"), float("-inf")):
        c = ops.sum(abs(M), -1)
        r = ops.amax(c, -1) if ord > 0 else ops.amin(c, -1)
    else:
        raise core.ArgumentError(f"linalg.matrix_norm: Order {ord} not supported.")
    if keepdim:
        for d in sorted((d0, d1)):
            r = ops.unsqueeze(r, d)
    return r


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.norm: a matrix norm when ``ord`` is a string or ``dim`` is a pair (or A is
    2-d and ord is given without dim), else a vector norm (the 2-norm of all elements by
    default)."""
    A = _t(A)
    if isinstance(dim, int):
        dim = (dim,)
    if isinstance(ord, str) or (dim is not None and len(dim) == 2) or \
            (dim is None and ord is not None and A.ndim == 2):
        return matrix_norm(A, "fro" if ord is None else ord, dim if dim is not None else (-2, -1),
                           keepdim, dtype=dtype)
    if ord is not None and dim is None and A.ndim != 1:
        raise core.ArgumentError("linalg.norm: If dim is not specified but ord is, the input "
                                 "must be 1D or 2D")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def cross(input, other, *, dim=-1):
    """Cross product of 3-vectors along ``dim`` (batch dims broadcast)."""
    a, b = _t(input), _t(other)
    nd = max(a.ndim, b.ndim)
    if a.shape[dim] != 3 or b.shape[dim] != 3:
        raise ShapeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                         f"{a.shape[dim]} and {b.shape[dim]}")
    a = ops.reshape(a, (1,) * (nd - a.ndim) + tuple(a.shape))
    b = ops.reshape(b, (1,) * (nd - b.ndim) + tuple(b.shape))
    d = dim % nd

    def c(x, i):
        return ops.narrow(x, d, i, 1)

    parts = [c(a, 1) * c(b, 2) - c(a, 2) * c(b, 1),
             c(a, 2) * c(b, 0) - c(a, 0) * c(b, 2),
             c(a, 0) * c(b, 1) - c(a, 1) * c(b, 0)]
    return ops.cat(parts, d)


def vecdot(x, y, *, dim=-1):
    """Dot product along ``dim`` (batch dims broadcast)."""
    return ops.sum(_t(x) * _t(y), dim)


matmul = core.ops.matmul


def matrix_power(A, n):
    """A^n by repeated squaring (n < 0: of inv(A); n == 0: the identity)."""
    A = _t(A)
    _square(A, "matrix_power")
    n = operator.index(n)
    if n == 0:
        eye = np.broadcast_to(np.eye(A.shape[-1], dtype=A.dtype.numpy_dtype), tuple(A.shape))
        return core.from_numpy(eye.copy())
    if n < 0:
        A, n = inv(A), -n
    result, base = None, A
    while n:
        if n & 1:
            result = base if result is None else ops.matmul(result, base)
        n >>= 1
        if n:
            base = ops.matmul(base, base)
    return result


def multi_dot(tensors):
    """A chain of matmuls in the cheapest order (first/last may be 1-d), as np.linalg.multi_dot."""
    ts = [_t(t) for t in tensors]
    if len(ts) < 2:
        raise core.ArgumentError("multi_dot(): expected at least 2 tensors but got " + str(len(ts)))
    first_vec, last_vec = ts[0].ndim == 1, ts[-1].ndim == 1
    if first_vec:
        ts[0] = ops.unsqueeze(ts[0], 0)
    if last_vec:
        ts[-1] = ops.unsqueeze(ts[-1], -1)
    letters = string.ascii_letters
    eq = ",".join(letters[i] + letters[i + 1] for i in range(len(ts))) + "->" + \
        letters[0] + letters[len(ts)]
    r = einsum(eq, *ts)
    if first_vec:
        r = ops.squeeze(r, 0)
    if last_vec:
        r = ops.squeeze(r, -1)
    return r


@_op("linalg_solve_triangular", arity=2, saves_input=True, saves_output=True, amp="Promote")
class LinalgSolveTriangularBackward(PyNode):
    """Backward of X = solve_triangular(A, B): gB = solve_triangular(A^T, g) (the other
    triangle), gA = -gB X^T restricted to A's triangle (and zero diagonal if unitriangular)."""

    def grad_formula_impl(self, g, A, X):
        upper, left, unit, sa, sb = self.ctx
        if not left:
            g, X, A = mT(g), mT(X), mT(A)
            upper = not upper
        gB = solve_triangular(mT(A), g, upper=not upper, unitriangular=unit)
        gA = None
        if self.needs_input_grad(0):
            gA = -ops.matmul(gB, mT(X))
            gA = triu(gA, 1 if unit else 0) if upper else tril(gA, -1 if unit else 0)
            if not left:
                gA = mT(gA)
            gA = _sum_to(gA, sa)
        if not left:
            gB = mT(gB)
        return gA, (_sum_to(gB, sb) if self.needs_input_grad(1) else None)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """X with A X = B (``left=False``: X A = B) for triangular A (only its ``upper`` or lower
    triangle is read; ``unitriangular``: its diagonal is taken as ones)."""
    import scipy.linalg
    A, B = _float(A, "solve_triangular"), _float(B, "solve_triangular")
    _square(A, "solve_triangular")
    dt = core.as_dtype(np.promote_types(A.dtype.numpy_dtype, B.dtype.numpy_dtype))
    a, b = _arr(A).astype(dt.numpy_dtype), _arr(B).astype(dt.numpy_dtype)
    if not left:
        a, b = np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:]).reshape((-1,) + a.shape[-2:])
    bb = np.broadcast_to(b, batch + b.shape[-2:]).reshape((-1,) + b.shape[-2:])
    lower = upper if not left else not upper
    x = np.empty(bb.shape, dt.numpy_dtype)
    with np.errstate(all="ignore"):
        for i in range(a.shape[0]):
            x[i] = scipy.linalg.solve_triangular(a[i], bb[i], lower=lower,
                                                 unit_diagonal=unitriangular)
    x = x.reshape(batch + b.shape[-2:])
    if not left:
        x = np.swapaxes(x, -1, -2)
    out = _wrap(x, dt)
    if _need(A, B):
        _py_attach(_py_node(LinalgSolveTriangularBackward), out, (A, B), (A, out),
                   (upper, left, unitriangular, tuple(A.shape), tuple(B.shape)))
    return out


# The ops that compute through NumPy / LAPACK refuse gpu tensors by name; the others
# (matmul, kron, tensordot, einsum, cross, vecdot, matrix_power, multi_dot) are
# compositions of lucid ops and run on either device.
for _name in ("trace", "diag", "diagonal", "diag_embed", "tril", "triu"):
    globals()[_name] = _host_only(globals()[_name], _name)
for _name in ("inv", "solve", "det", "slogdet", "logdet", "cholesky", "qr", "eigh", "eigvalsh",
              "svd", "svdvals", "pinv", "matrix_rank", "lstsq", "vector_norm", "matrix_norm",
              "norm", "solve_triangular"):
    globals()[_name] = _host_only(globals()[_name], "linalg." + _name)
core._mark_view_node(DiagonalBackward)
del _name

# lucid.trace, lucid.diag, ... (as torch); the LAPACK ops live in lucid.linalg only.
for _fn in (trace, diag, diagonal, diag_embed, tril, triu):
    export(_fn, method=True)
for _fn in (kron, tensordot, einsum):
    export(_fn)
# torch.det / logdet / slogdet / inverse / pinverse / matrix_power, and their methods
def inverse(input):
    """torch.inverse: linalg.inv."""
    return inv(input)


def pinverse(input, rcond=1e-15):
    """torch.pinverse: linalg.pinv with a relative cutoff ``rcond``."""
    return pinv(input, rtol=rcond)


for _fn in (det, logdet, slogdet, inverse, pinverse, matrix_power):
    export(_fn, method=True)
del _fn

# x.mT / x.mH: the transpose of the last two dims (real tensors: mH is mT).
core._install_tensor_method("mT", property(mT))
core._install_tensor_method("mH", property(mT))
