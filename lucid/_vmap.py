"""``lucid.vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None)``:
map a function written for one example over a batch dimension, as ``torch.func.vmap``.

vmap is a transform, not a guess. ``func`` is called once, on ``BatchedTensor``s: each
holds the whole batch (batch dim first) but shows one example's shape, dims and size, so
that the function's own view of its input is unchanged. Every op on a batched tensor
follows its batching rule, which carries the batch dim along:

- element-wise ops (the op tables' unary, binary and comparison rows, their methods and
  operators, ``where``, ``clamp``, the element-wise activations of ``nn.functional``)
  align the batch dim of each operand and broadcast the rest as usual;
- reductions and scans (the reductions table, ``softmax``, ``log_softmax``) and shape
  ops (``reshape``, ``permute``, ``transpose``, ``unsqueeze``, indexing, ...) shift
  their dims past the batch dim;
- ``matmul`` and its relatives (``@``, ``mm``, ``dot``, ``outer``, ``F.linear``) treat
  the batch dim as one more batch dim of the product.

The function's global references to ``lucid`` and its submodules (and to names imported
from them) are bound to batching-aware versions for the call. An op without a rule (a
function outside those families, a data-dependent read such as ``.item()`` or
``bool(x)``, NumPy on a batched tensor) stops the batched call; vmap then runs ``func``
once per example and stacks the results, with a one-time warning that names what had no
rule. Either way the result is exact and differentiable.
"""
import functools
import types
import warnings

from lucid._core import core, optable
from lucid._core.core import Tensor

__all__ = ["vmap", "BatchedTensor"]


class _NoRule(Exception):
    """An op on a batched tensor that has no batching rule (vmap then runs per example)."""

    def __init__(self, what):
        super().__init__(what)
        self.what = what


# -- which ops batch how (from the op tables, the specs' families) -----------------------

_ELEMENTWISE = {r["name"] for table in (optable.UNARY, optable.BINARY, optable.COMPARE,
                                         optable.MORE_BINARY) for r in table}
_ELEMENTWISE |= {"neg", "negative", "clamp", "clip", "where", "nan_to_num", "leaky_relu", "elu",
                 "celu", "hardtanh", "softsign", "tanhshrink", "logsigmoid", "true_divide",
                 "multiply", "subtract", "divide", "float", "double", "half", "bfloat16",
                 "int", "long", "bool", "to", "type", "detach", "clone", "contiguous",
                 "lerp", "isclose", "polygamma", "xlog1py", "positive", "fmax", "fmin"}
_REDUCTIONS = {r["name"] for r in optable.REDUCTIONS} | {"nansum", "nanmean", "count_nonzero"}
_DIM_REQUIRED = {"cumsum", "cumprod", "softmax", "log_softmax", "logsumexp", "logcumsumexp"}
_VALUES_ONLY_WITHOUT_DIM = {"max", "min"}          # x.max() -> values; x.max(d) -> (v, i)
_SHAPE = {"reshape", "view", "permute", "transpose", "swapaxes", "swapdims", "unsqueeze",
          "squeeze", "flatten", "expand", "movedim", "moveaxis", "flip", "narrow", "t",
          "unflatten", "chunk", "split", "unbind", "select", "repeat", "roll", "diagonal"}
_PRODUCTS = {"matmul", "mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "ger", "linear"}
_JOIN = {"stack", "cat", "concat", "concatenate"}


_BOOL = core._dtype_by_name("bool_")


def _any_batched(args, kwargs):
    for a in args:
        if isinstance(a, BatchedTensor) or (isinstance(a, (list, tuple)) and
                                            any(isinstance(b, BatchedTensor) for b in a)):
            return True
    return any(isinstance(v, BatchedTensor) for v in kwargs.values())


def _ldim(d, n):
    """Logical dim ``d`` of an ``n``-dim example -> the dim of the batched value."""
    if not -n <= d < n:
        raise core.ShapeError(f"Dimension out of range (expected to be in range of "
                              f"[{-n}, {n - 1}], but got {d})")
    return d % n + 1


def _ldims(dims, n):
    if isinstance(dims, (tuple, list)):
        return tuple(_ldim(int(d), n) for d in dims)
    return _ldim(int(dims), n)


def _wrap(r):
    """An op's result on batched values -> batched tensors (tuples/namedtuples kept)."""
    if isinstance(r, Tensor):
        return BatchedTensor(r)
    if isinstance(r, tuple) and hasattr(r, "_fields"):
        return type(r)(*[_wrap(v) for v in r])
    if isinstance(r, (tuple, list)):
        return type(r)(_wrap(v) for v in r)
    return r


def _align(args, nd):
    """Batched operands reshaped to (batch, 1, ..., *example) of ``nd`` example dims, so
    that plain operands broadcast against the example dims as they would unbatched."""
    out = []
    for a in args:
        if isinstance(a, BatchedTensor):
            v, k = a.value, a.ndim
            if k < nd:
                v = v.reshape((v.shape[0],) + (1,) * (nd - k) + tuple(v.shape[1:]))
            out.append(v)
        elif isinstance(a, (list, tuple)) and any(isinstance(b, BatchedTensor) for b in a):
            raise _NoRule("a list of batched tensors given to an element-wise op")
        else:
            out.append(a)
    return out


def _example_ndim(a):
    if isinstance(a, BatchedTensor):
        return a.ndim
    if isinstance(a, Tensor):
        return a.ndim
    return 0


def _elementwise(fn, args, kwargs):
    if any(isinstance(v, BatchedTensor) for v in kwargs.values()):
        raise _NoRule(f"{getattr(fn, '__name__', fn)} with a batched keyword argument")
    nd = max(_example_ndim(a) for a in args)
    return BatchedTensor(fn(*_align(args, nd), **kwargs))


def _reduce(name, fn, x, args, kwargs):
    """Reductions and scans: ``dim`` shifted past the batch dim; no dim means every dim
    of the example."""
    if not isinstance(x, BatchedTensor) or _any_batched(args, kwargs):
        raise _NoRule(f"{name} with a batched argument other than its input")
    n = x.ndim
    args, kwargs = list(args), dict(kwargs)
    pos = 1 if name == "norm" else 0                  # norm(p, dim, ...)
    if "dim" in kwargs:
        dim = kwargs.pop("dim")
    elif len(args) > pos:
        dim = args.pop(pos)
    else:
        dim = None
    if dim is None:
        if name in _DIM_REQUIRED:
            raise _NoRule(f"{name} without dim")
        if n == 0:
            raise _NoRule(f"{name} of a 0-d example")
        if name in _VALUES_ONLY_WITHOUT_DIM or name in ("argmax", "argmin"):
            flat = x.value.reshape((x.value.shape[0], -1))
            r = getattr(flat, {"max": "amax", "min": "amin"}.get(name, name))(1)
            return BatchedTensor(r)
        dim = tuple(range(n))
    if n == 0:
        raise _NoRule(f"{name} over a dim of a 0-d example")
    if name == "norm":
        kwargs["dim"] = _ldims(dim, n)
    else:
        args.insert(0, _ldims(dim, n))
    return _wrap(fn(x.value, *args, **kwargs))


def _pad_batch(v, k, want):
    """Batched value ``v`` of a ``k``-dim batch-of-matrices -> ``want`` matrix batch dims
    (ones inserted after the batch dim)."""
    if k < want:
        v = v.reshape((v.shape[0],) + (1,) * (want - k) + tuple(v.shape[1:]))
    return v


def _matmul(a, b):
    """The batched matrix product: the batch dim becomes one more leading batch dim."""
    if not (isinstance(a, (BatchedTensor, Tensor)) and isinstance(b, (BatchedTensor, Tensor))):
        raise _NoRule("matmul with a non-tensor operand")
    na, nb = _example_ndim(a), _example_ndim(b)
    if na == 0 or nb == 0:
        raise core.ShapeError("both arguments to matmul need to be at least 1D")
    # matrices: (..., k, n) @ (..., n, m); a vector is a one-row / one-column matrix
    av = a.value if isinstance(a, BatchedTensor) else a
    bv = b.value if isinstance(b, BatchedTensor) else b
    ba, bb = isinstance(a, BatchedTensor), isinstance(b, BatchedTensor)
    if na == 1:
        av = av.unsqueeze(-2)
    if nb == 1:
        bv = bv.unsqueeze(-1)
    ka, kb = max(na, 2) - 2, max(nb, 2) - 2          # each one's matrix batch dims
    k = max(ka, kb)
    if ba:                         # (a plain operand broadcasts from the right)
        av = _pad_batch(av, ka, k)
    if bb:
        bv = _pad_batch(bv, kb, k)
    r = core.ops.matmul(av, bv)
    if nb == 1:
        r = r.squeeze(-1)
    if na == 1:
        r = r.squeeze(-1 if nb == 1 else -2)
    return BatchedTensor(r)


def _product(name, fn, args, kwargs):
    if kwargs and name != "linear":
        raise _NoRule(f"{name} with keyword arguments")
    if name in ("matmul", "mm", "bmm", "mv"):
        return _matmul(*args)
    if name in ("dot", "vdot", "inner"):
        a, b = args
        if _example_ndim(a) != 1 or _example_ndim(b) != 1:
            raise _NoRule(f"{name} of examples that are not vectors")
        return _elementwise(core.ops.mul, (a, b), {}).sum(-1)
    if name in ("outer", "ger"):
        a, b = args
        return _elementwise(core.ops.mul, (a.unsqueeze(-1), b.unsqueeze(0)), {})
    # F.linear(input, weight, bias=None): input @ weight.T + bias
    x, w = args[0], args[1]
    bias = args[2] if len(args) > 2 else kwargs.get("bias")
    if isinstance(w, BatchedTensor) or isinstance(bias, BatchedTensor):
        raise _NoRule("linear with batched weights")
    y = _matmul(x, w.transpose(-1, -2) if w.ndim == 2 else w)
    return y + bias if bias is not None else y


def _join(name, fn, args, kwargs):
    seq = args[0] if args else kwargs.get("tensors")
    dim = args[1] if len(args) > 1 else kwargs.get("dim", kwargs.get("axis", 0))
    if not isinstance(seq, (list, tuple)) or not seq:
        raise _NoRule(f"{name} of something other than a list of tensors")
    first = next(t for t in seq if isinstance(t, BatchedTensor))
    n, b = first.ndim, first.value.shape[0]
    vals = []
    for t in seq:
        if isinstance(t, BatchedTensor):
            vals.append(t.value)
        elif isinstance(t, Tensor):
            vals.append(t.unsqueeze(0).expand((b,) + tuple(t.shape)))
        else:
            raise _NoRule(f"{name} of a non-tensor")
    nd = n + 1 if name == "stack" else n
    return BatchedTensor(fn(vals, _ldim(int(dim), nd)))


def _call_rule(name, fn, args, kwargs):
    """Apply the batching rule of lucid op ``name`` (the function ``fn``) to arguments of
    which at least one is batched."""
    if name in _ELEMENTWISE:
        if name in ("where",) and len(args) == 1:
            raise _NoRule("where(condition) (data-dependent shape)")
        return _elementwise(fn, args, kwargs)
    if name in _REDUCTIONS or name in _DIM_REQUIRED:
        return _reduce(name, fn, args[0], args[1:], kwargs)
    if name in _PRODUCTS:
        return _product(name, fn, args, kwargs)
    if name in _JOIN:
        return _join(name, fn, args, kwargs)
    if name in _SHAPE and isinstance(args[0], BatchedTensor) and \
            not _any_batched(args[1:], kwargs):
        return getattr(args[0], name)(*args[1:], **kwargs)
    raise _NoRule(f"lucid.{name}")


# -- the batched tensor ---------------------------------------------------------------------

class BatchedTensor:
    """One example's view of a batch inside ``lucid.vmap``: ``value`` holds the whole
    batch with the batch dim first; ``shape``, ``ndim``, ``size()`` and every dim
    argument are the example's. Ops follow their batching rules (see the module)."""

    __slots__ = ("value",)
    __lucid_defer__ = True        # Tensor's operators hand over to the reflected method
    __array_ufunc__ = None        # NumPy's operators too

    def __init__(self, value):
        self.value = value

    def __lucid_refused__(self):  # a lucid function without a rule received this
        raise _NoRule("a lucid function without a batching rule")

    # -- the example's view
    @property
    def shape(self):
        return tuple(self.value.shape[1:])

    @property
    def ndim(self):
        return self.value.ndim - 1

    def dim(self):
        return self.ndim

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    @property
    def dtype(self):
        return self.value.dtype

    @property
    def device(self):
        return self.value.device

    @property
    def requires_grad(self):
        return self.value.requires_grad

    def is_floating_point(self):
        return self.value.is_floating_point()

    def __repr__(self):
        return f"BatchedTensor(example shape {self.shape}, batch {self.value.shape[0]})"

    # -- data-dependent reads have no rule
    def _refuse(self, *a, **k):
        raise _NoRule("a data-dependent read of a batched tensor (item, bool, numpy, ...)")

    item = tolist = numpy = __bool__ = __float__ = __int__ = __index__ = _refuse
    __array__ = __iter__ = __array_function__ = _refuse

    def __getattr__(self, name):
        fn = getattr(Tensor, name, None)
        if name in _ELEMENTWISE and fn is not None:
            return lambda *a, **k: _elementwise(fn, (self,) + a, k)
        if (name in _REDUCTIONS or name in _DIM_REQUIRED) and fn is not None:
            return lambda *a, **k: _reduce(name, fn, self, a, k)
        raise _NoRule(f"Tensor.{name}")

    # -- shape ops: dims shifted past the batch dim
    def reshape(self, *shape):
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) \
            else shape
        return BatchedTensor(self.value.reshape((self.value.shape[0],) + tuple(shape)))

    view = reshape

    def permute(self, *dims):
        dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        return BatchedTensor(self.value.permute((0,) + _ldims(dims, self.ndim)))

    def transpose(self, d0, d1):
        n = self.ndim
        return BatchedTensor(self.value.transpose(_ldim(d0, n), _ldim(d1, n)))

    swapaxes = swapdims = transpose

    def t(self):
        return self if self.ndim < 2 else self.transpose(0, 1)

    @property
    def T(self):
        return self.permute(tuple(range(self.ndim - 1, -1, -1)))

    @property
    def mT(self):
        return self.transpose(-2, -1)

    def unsqueeze(self, d):
        return BatchedTensor(self.value.unsqueeze(_ldim(d, self.ndim + 1)))

    def squeeze(self, dim=None):
        if dim is None:
            keep = [s for s in self.shape if s != 1]
            return self.reshape(tuple(keep))
        return BatchedTensor(self.value.squeeze(_ldims(dim, self.ndim)))

    def flatten(self, start_dim=0, end_dim=-1):
        n = self.ndim
        if n == 0:
            return self.reshape(1)
        return BatchedTensor(self.value.flatten(_ldim(start_dim, n), _ldim(end_dim, n)))

    def unflatten(self, dim, sizes):
        return BatchedTensor(self.value.unflatten(_ldim(dim, self.ndim), sizes))

    def expand(self, *sizes):
        sizes = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) \
            else sizes
        pad = len(sizes) - self.ndim
        v = self.value
        if pad > 0:
            v = v.reshape((v.shape[0],) + (1,) * pad + self.shape)
        return BatchedTensor(v.expand((v.shape[0],) + tuple(sizes)))

    def expand_as(self, other):
        return self.expand(other.shape)

    def movedim(self, source, destination):
        n = self.ndim
        return BatchedTensor(self.value.movedim(_ldims(source, n), _ldims(destination, n)))

    moveaxis = movedim

    def flip(self, *dims):
        dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        return BatchedTensor(self.value.flip(_ldims(dims, self.ndim)))

    def roll(self, shifts, dims=None):
        if dims is None:
            return self.flatten().roll(shifts, 0).reshape(self.shape)
        return BatchedTensor(self.value.roll(shifts, _ldims(dims, self.ndim)))

    def narrow(self, dim, start, length):
        return BatchedTensor(self.value.narrow(_ldim(dim, self.ndim), start, length))

    def select(self, dim, index):
        return BatchedTensor(self.value.select(_ldim(dim, self.ndim), index))

    def diagonal(self, offset=0, dim1=0, dim2=1):
        n = self.ndim
        return BatchedTensor(self.value.diagonal(offset, _ldim(dim1, n), _ldim(dim2, n)))

    def repeat(self, *sizes):
        sizes = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) \
            else sizes
        v, pad = self.value, len(sizes) - self.ndim
        if pad > 0:
            v = v.reshape((v.shape[0],) + (1,) * pad + self.shape)
        return BatchedTensor(v.repeat((1,) + tuple(sizes)))

    def chunk(self, chunks, dim=0):
        return _wrap(self.value.chunk(chunks, _ldim(dim, self.ndim)))

    def split(self, split_size, dim=0):
        return _wrap(self.value.split(split_size, _ldim(dim, self.ndim)))

    def unbind(self, dim=0):
        return _wrap(self.value.unbind(_ldim(dim, self.ndim)))

    def __getitem__(self, index):
        idx = index if isinstance(index, tuple) else (index,)
        for i in idx:
            if isinstance(i, BatchedTensor):
                raise _NoRule("indexing with a batched index")
            if isinstance(i, (Tensor, list)) or (hasattr(i, "dtype") and hasattr(i, "shape")):
                if sum(isinstance(j, (Tensor, list)) for j in idx) > 1:
                    raise _NoRule("indexing with several advanced indices")
            if i is Ellipsis or i is None or isinstance(i, (int, slice, Tensor, list)):
                continue
            raise _NoRule(f"indexing with {type(i).__name__}")
        for i in idx:
            if isinstance(i, Tensor) and i.dtype is _BOOL:
                raise _NoRule("boolean-mask indexing (data-dependent shape)")
        return BatchedTensor(self.value[(slice(None),) + idx])

    # -- products
    def __matmul__(self, other):
        return _matmul(self, other)

    def __rmatmul__(self, other):
        return _matmul(other, self)

    def matmul(self, other):
        return _matmul(self, other)

    mm = bmm = mv = matmul

    def dot(self, other):
        return _product("dot", None, (self, other), {})

    def outer(self, other):
        return _product("outer", None, (self, other), {})


def _binop(op, swap=False):
    fn = getattr(core.ops, op)

    def method(self, other):
        if isinstance(other, (list, tuple)):
            return NotImplemented
        return _elementwise(fn, (other, self) if swap else (self, other), {})

    return method


for _dunder, _op in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "div"),
                     ("floordiv", "floor_divide"), ("mod", "remainder"), ("pow", "pow"),
                     ("and", "bitwise_and"), ("or", "bitwise_or"), ("xor", "bitwise_xor"),
                     ("lshift", "bitwise_left_shift"), ("rshift", "bitwise_right_shift")):
    setattr(BatchedTensor, f"__{_dunder}__", _binop(_op))
    setattr(BatchedTensor, f"__r{_dunder}__", _binop(_op, swap=True))
for _dunder, _op in (("eq", "eq"), ("ne", "ne"), ("lt", "lt"), ("le", "le"), ("gt", "gt"),
                     ("ge", "ge")):
    setattr(BatchedTensor, f"__{_dunder}__", _binop(_op))
BatchedTensor.__hash__ = None
BatchedTensor.__neg__ = lambda self: BatchedTensor(-self.value)
BatchedTensor.__pos__ = lambda self: self
BatchedTensor.__abs__ = lambda self: BatchedTensor(abs(self.value))
BatchedTensor.__invert__ = lambda self: BatchedTensor(~self.value)


# -- lucid, as the vmapped function sees it --------------------------------------------------

class _BatchedModule(types.ModuleType):
    """A lucid module whose functions apply their batching rules to batched arguments."""

    def __init__(self, module):
        super().__init__(module.__name__, module.__doc__)
        self._module = module

    def __getattr__(self, name):
        value = getattr(self._module, name)
        rebound = _rebind(value)
        if rebound is not value:
            setattr(self, name, rebound)
        return rebound


_PROXIES = {}
_FUNCS = {}


def _batched_function(fn, name):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        if not _any_batched(args, kwargs):
            return fn(*args, **kwargs)
        return _call_rule(name, fn, args, kwargs)

    return call


_MODULES = ()


def _lucid_modules():
    global _MODULES
    if not _MODULES:
        import lucid
        import lucid.linalg
        import lucid.nn
        import lucid.nn.functional
        import lucid.special
        _MODULES = (lucid, lucid.nn, lucid.nn.functional, lucid.linalg, lucid.special,
                    core.ops)
    return _MODULES


def _rebind(value):
    """A lucid module -> its batching-aware proxy; a lucid op -> its batching wrapper."""
    if isinstance(value, types.ModuleType):
        if value in _lucid_modules():
            if value.__name__ not in _PROXIES:
                _PROXIES[value.__name__] = _BatchedModule(value)
            return _PROXIES[value.__name__]
        return value
    name = getattr(value, "__name__", None)
    if name is None or not callable(value) or isinstance(value, type):
        return value
    key = id(value)
    hit = _FUNCS.get(key)
    if hit is not None and hit[0] is value:
        return hit[1]
    for m in _lucid_modules():
        if getattr(m, name, None) is value:
            wrapped = _batched_function(value, name)
            _FUNCS[key] = (value, wrapped)
            return wrapped
    return value


def _with_batched_globals(func):
    """``func`` (a plain Python function) with its references to lucid (globals and
    closure cells, and those of the plain functions of its module that it may call)
    rebound to the batching-aware versions; anything else is returned as it is."""
    if not isinstance(func, types.FunctionType):
        return func
    home = func.__globals__
    globs = {k: _rebind(v) for k, v in home.items()}

    def clone(f):
        cells = None
        if f.__closure__:
            cells = tuple(types.CellType(_rebind(c.cell_contents)) if _filled(c) else c
                          for c in f.__closure__)
        g = types.FunctionType(f.__code__, globs, f.__name__, f.__defaults__, cells)
        g.__kwdefaults__ = f.__kwdefaults__
        return g

    for k, v in list(globs.items()):       # helpers of the same module see the same lucid
        if isinstance(v, types.FunctionType) and v.__globals__ is home and v is not func:
            globs[k] = clone(v)
    return clone(func)


def _filled(cell):
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


# -- vmap --------------------------------------------------------------------------------------

_WARNED = set()


def _move(t, src, dst):
    """t with dim src moved to position dst."""
    nd = t.ndim
    src, dst = src % nd, dst % nd
    if src == dst:
        return t
    order = [d for d in range(nd) if d != src]
    order.insert(dst, src)
    return core.ops.permute(t, tuple(order))


def _tree_map(fn, x):
    if isinstance(x, (Tensor, BatchedTensor)):
        return fn(x)
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*[_tree_map(fn, y) for y in x])
    if isinstance(x, (tuple, list)):
        return type(x)(_tree_map(fn, y) for y in x)
    if isinstance(x, dict):
        return {k: _tree_map(fn, v) for k, v in x.items()}
    return x


def _join_tree(items, join, leaf):
    """Join matching tensors of several output trees with ``join`` (stack or cat along
    dim 0); other leaves go to ``leaf``."""
    first = items[0]
    if isinstance(first, Tensor):
        return join(list(items), 0)
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*[_join_tree([it[k] for it in items], join, leaf)
                             for k in range(len(first))])
    if isinstance(first, (tuple, list)):
        return type(first)(_join_tree([it[k] for it in items], join, leaf)
                           for k in range(len(first)))
    if isinstance(first, dict):
        return {k: _join_tree([it[k] for it in items], join, leaf) for k in first}
    return leaf(items)


def _stack_tree(items):
    return _join_tree(items, core.ops.stack, lambda xs: core.tensor(list(xs)))


def _cat_tree(parts):
    return _join_tree(parts, core.ops.cat, lambda xs: xs[0])


def _batch_args(args, dims):
    """(args with each mapped tensor's batch dim moved first, the batch size)."""
    sizes = set()

    def move(a, d):
        if d is None:
            return a
        if isinstance(a, Tensor):
            if a.ndim == 0:
                raise core.ArgumentError("vmap: cannot map over dim of a 0-d tensor (in_dims "
                                         f"{d})")
            if not -a.ndim <= d < a.ndim:
                raise core.ArgumentError(f"vmap: in_dim {d} is out of range for a tensor of "
                                         f"{a.ndim} dims")
            sizes.add(a.shape[d])
            return _move(a, d, 0)
        if isinstance(a, (tuple, list)):
            return type(a)(move(x, d) for x in a)
        if isinstance(a, dict):
            return {k: move(v, d) for k, v in a.items()}
        raise core.ArgumentError(f"vmap: in_dim {d} given for a non-tensor argument "
                                 f"({type(a).__name__})")

    out = []
    for a, d in zip(args, dims):
        if isinstance(d, (tuple, list)) and isinstance(a, (tuple, list)):
            if len(d) != len(a):
                raise core.ArgumentError("vmap: in_dims and the argument differ in length")
            out.append(type(a)(move(x, dd) for x, dd in zip(a, d)))
        else:
            out.append(move(a, d))
    if not sizes:
        raise core.ArgumentError("vmap: at least one argument must be mapped (in_dims not "
                                 "None)")
    if len(sizes) > 1:
        raise core.ArgumentError(f"vmap: mapped dims have different sizes {sorted(sizes)}")
    return out, dims, sizes.pop()


def _mark(args, dims, wrap):
    """Mapped tensors (batch first) -> ``wrap(t)``; others as they are."""
    def mark(a, d):
        if d is None:
            return a
        if isinstance(a, Tensor):
            return wrap(a)
        if isinstance(a, (tuple, list)):
            return type(a)(mark(x, d) for x in a)
        if isinstance(a, dict):
            return {k: mark(v, d) for k, v in a.items()}
        return a

    out = []
    for a, d in zip(args, dims):
        if isinstance(d, (tuple, list)) and isinstance(a, (tuple, list)):
            out.append(type(a)(mark(x, dd) for x, dd in zip(a, d)))
        else:
            out.append(mark(a, d))
    return out


def _unbatch(out, n):
    """The batched call's outputs -> tensors with the batch dim first; an output that does
    not depend on the batch is expanded over it (as torch.vmap)."""
    def un(x):
        if isinstance(x, BatchedTensor):
            return x.value
        if isinstance(x, Tensor):
            return x.unsqueeze(0).expand((n,) + tuple(x.shape))
        return x
    return _tree_map(un, out)


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """Vectorise ``func`` over dim ``in_dims`` of its tensor arguments, as
    ``torch.func.vmap``: ``in_dims`` is an int (every argument) or one entry per positional
    argument (None: not mapped; a tuple for a tuple argument); outputs get the batch dim
    at ``out_dims`` (an int, or one per output). ``chunk_size`` runs the batch in chunks
    of that many examples (1: one example at a time). Keyword arguments are not mapped.

    ``func`` is called once per chunk on batched tensors, whose ops follow batching
    rules; when it uses an op without a rule it is run once per example instead (a
    warning says which op). Random ops have no rule, so they draw per example
    (``randomness="different"``)."""
    if randomness not in ("error", "different", "same"):
        raise core.ArgumentError(f"vmap: randomness must be 'error', 'different' or 'same', "
                                 f"got {randomness!r}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise core.ArgumentError(f"vmap: chunk_size must be a positive int or None, got "
                                 f"{chunk_size!r}")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        wrapped.batched = True
        dims = tuple(in_dims) if isinstance(in_dims, (tuple, list)) else (in_dims,) * len(args)
        if len(dims) != len(args):
            raise core.ArgumentError(f"vmap: in_dims has {len(dims)} entries for {len(args)} "
                                     "arguments")
        for a in list(args) + list(kwargs.values()):
            if isinstance(a, BatchedTensor):      # vmap inside vmap: the outer one loops
                raise _NoRule("vmap of a vmapped function")
        moved, dims, n = _batch_args(args, dims)
        step = n if chunk_size is None else chunk_size
        parts = []
        for lo in range(0, max(n, 1), max(step, 1)):
            hi = min(n, lo + step)
            part = _mark(moved, dims, lambda t: t[lo:hi]) if step < n else moved
            out, batched = _run(func, part, dims, kwargs, hi - lo)
            parts.append(out)
            wrapped.batched = wrapped.batched and batched
        out = parts[0] if len(parts) == 1 else _cat_tree(parts)
        if isinstance(out_dims, (tuple, list)):
            if not isinstance(out, (tuple, list)) or len(out) != len(out_dims):
                raise core.ArgumentError("vmap: out_dims has one entry per output")
            return type(out)(_tree_map(lambda t, d=d: _move(t, 0, d) if d else t, o)
                             for o, d in zip(out, out_dims))
        return _tree_map(lambda t: _move(t, 0, out_dims) if out_dims else t, out)

    wrapped.batched = None     # after a call: whether every chunk ran batched
    return wrapped


def _run(func, moved, dims, kwargs, n):
    """One chunk: the batched call, or one call per example when an op has no rule."""
    try:
        out = _with_batched_globals(func)(*_mark(moved, dims, BatchedTensor), **kwargs)
        return _unbatch(out, n), True
    except _NoRule as e:
        what = e.what
    key = (getattr(func, "__qualname__", repr(func)), what)
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(f"vmap: {what} has no batching rule, so "
                      f"{getattr(func, '__name__', 'the function')} runs once per example "
                      "(correct, but slower)", stacklevel=4)
    if n == 0:
        raise core.ArgumentError("vmap over an empty batch needs a function whose ops all "
                                 f"have batching rules ({what} has none)")
    per = [func(*_mark(moved, dims, lambda t, i=i: t[i]), **kwargs) for i in range(n)]
    return _stack_tree(per), False
