"""``lucid.special``: special functions as ``torch.special`` (``lgamma``, ``digamma``,
``polygamma``, ``i0``, ``sinc``, ``logit``, ``xlogy`` also in ``lucid``, as torch).

On lucid's C kernels (src/lucid_special.h, rows of optable.UNARY, accuracy in
docs/accuracy.md): ``lgamma``, ``digamma``, ``polygamma`` (unary.pyx, a parameter n),
``sinc``, ``i0``, ``erfcx``, ``log_ndtr``, ``ndtri``, ``logit``; ``xlogy`` is a row of
optable.BINARY (src/lucid_binary.c, docs/accuracy_binary.md). The rest (``ndtr``,
``i0e``, ``i1``, ``i1e``, ``entr``, ``xlog1py``) compute their values through
SciPy (``scipy.special``) in float64 or float32 (float16 inputs are computed in float32
and rounded once; integer inputs give float32, as torch).

Every op states its derivative once, as a formula in lucid ops: ``lgamma' = digamma``,
``digamma' = polygamma(1, .)``, ``polygamma(n, .)' = polygamma(n + 1, .)``, ... so
derivatives of any order come from the same chain.
"""
import math
import operator

import numpy as np

from lucid._core import core, host, mlx_special
from lucid._core import unary as _unary_mod
from lucid._core.core import PyNode, Tensor, _py_attach, _py_node, export, register

ops = core.ops


class _SciPySpecial:
    """scipy.special, imported on first use: SciPy is optional (pip install "lucid[special]"),
    and `import lucid` must work without it."""

    def __getattr__(self, name):
        try:
            import scipy.special
        except ImportError:
            raise ImportError(f"lucid.special needs SciPy for {name}: pip install scipy "
                              "(or lucid[special])") from None
        return getattr(scipy.special, name)


sc = _SciPySpecial()
_f32 = core.as_dtype("float32")

__all__ = [
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfcx",
    "erfinv",
    "exp2",
    "expit",
    "expm1",
    "gammaln",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "lgamma",
    "log1p",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "multigammaln",
    "ndtr",
    "ndtri",
    "polygamma",
    "psi",
    "round",
    "sinc",
    "softmax",
    "xlog1py",
    "xlogy",
]


_t = host.as_tensor
_need = host.needs_grad


def _host_only(name, *xs):
    """A function without a gpu lowering computes through SciPy on the cpu: a gpu tensor
    raises lucid's cpu-only error naming the function, never a silent copy to the host."""
    if any(isinstance(x, Tensor) and x.is_cuda for x in xs):
        raise core._cpu_only_error(f"special.{name}")


def _compute_dtype(x):
    """(dtype of the result, numpy dtype to compute in): integers give float32, float16
    and bfloat16 are computed in float32 and rounded once."""
    if not x.dtype.is_floating_point:
        return _f32, np.float32
    return x.dtype, host.compute_dtype(x.dtype)


def _result(r, dt):
    r = np.asarray(r)
    with np.errstate(over="ignore"):
        r = r.astype(dt.numpy_dtype)
    if not r.flags.c_contiguous:
        r = r.copy(order="C")
    return core.from_numpy(r)


def _camel(name):
    return "".join(p.capitalize() for p in name.split("_"))


def _unary(name, forward, derivative, saves="x", doc="", mlx=None):
    """One special function of one tensor: ``forward(ndarray, ctx)`` computes the value
    on the cpu, ``mlx(mx, array)`` on the gpu (None: the function is cpu-only), and
    ``derivative(x, y, ctx)`` (lucid ops) its derivative, used by eager and graph-mode
    backward alike. ``saves``: which of the input x and output y the derivative reads."""

    def grad_formula_impl(self, g, *saved):
        vals = dict(zip(saves, saved))
        return g * derivative(vals.get("x"), vals.get("y"), self.ctx)

    node = type(_camel(name) + "Backward", (PyNode,), {
        "grad_formula_impl": grad_formula_impl, "__module__": __name__,
        "__doc__": f"Backward of {name}: g * its derivative, in lucid ops."})
    node.schema_v1 = register(name, "Promote", 1, saves_input="x" in saves,
                              saves_output="y" in saves, node=node)

    def op(input, ctx=None):
        x = _t(input)
        dt, comp = _compute_dtype(x)
        if x.is_cuda:
            if mlx is None:
                _host_only(name, x)
            xc = x.detach()
            y = host.run_mlx(mlx, xc if xc.dtype is dt and not host.is_half(dt) else xc.to(_f32))
            y = y if y.dtype is dt else y.to(dt)
        else:
            with np.errstate(all="ignore"):
                y = _result(forward(x.numpy(force=True).astype(comp, copy=False), ctx), dt)
        if x.dtype.is_floating_point and _need(x):
            saved = tuple(x if s == "x" else y for s in saves)
            _py_attach(_py_node(node), y, (x,), saved, ctx)
        return y

    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    op.node = node
    return op


_SQRT_2PI = math.sqrt(2 * math.pi)


def _safe(x, bad):
    """x with the points where ``bad`` holds replaced by 1 (for a formula that a where()
    then overrides there: its gradient stays finite)."""
    return ops.where(bad, 1.0, x)


# -- gamma family ------------------------------------------------------------------------

lgamma = ops.lgamma          # the kernel rows (optable.UNARY)
digamma = ops.digamma
gammaln = lgamma
psi = digamma


def polygamma(n, input):
    """The ``n``-th derivative of the digamma function (n >= 0 an int); one C kernel per
    call, polygamma(n, .)' = polygamma(n + 1, .)."""
    n = operator.index(n)
    if n < 0:
        raise core.ArgumentError(f"polygamma(n, x) does not support negative n, got {n}")
    return _unary_mod._polygamma(n, input)


def multigammaln(input, p):
    """The multivariate log-gamma of dimension ``p``."""
    x = _t(input)
    r = sum(lgamma(x - 0.5 * j) for j in range(int(p)))
    return r + p * (p - 1) / 4 * math.log(math.pi)


# -- error function and normal distribution ---------------------------------------------

erfcx = ops.erfcx
log_ndtr = ops.log_ndtr
ndtri = ops.ndtri
ndtr = _unary("ndtr", lambda a, _: sc.ndtr(a),
              lambda x, y, _: ops.exp(-0.5 * x * x) / _SQRT_2PI,
              doc="The standard normal CDF.", mlx=mlx_special.ndtr)


# -- Bessel functions ---------------------------------------------------------------------

def _i1_deriv(x, y, _):
    zero = x == 0
    return ops.where(zero, 0.5, i0(x) - y / _safe(x, zero))


def _i1e_deriv(x, y, _):
    zero = x == 0
    return ops.where(zero, 0.5, i0e(x) - y * (ops.sign(x) + 1 / _safe(x, zero)))


i1 = _unary("i1", lambda a, _: sc.i1(a), _i1_deriv, saves="xy",
            doc="Modified Bessel function of the first kind, order 1.", mlx=mlx_special.i1)
i1e = _unary("i1e", lambda a, _: sc.i1e(a), _i1e_deriv, saves="xy",
             doc="Exponentially scaled i1: exp(-|x|) i1(x).", mlx=mlx_special.i1e)
i0 = ops.i0
i0e = _unary("i0e", lambda a, _: sc.i0e(a), lambda x, y, _: i1e(x) - ops.sign(x) * y,
             saves="xy", doc="Exponentially scaled i0: exp(-|x|) i0(x).", mlx=mlx_special.i0e)


# -- sinc, entr, logit, expit -----------------------------------------------------------

entr = _unary("entr", lambda a, _: sc.entr(a),
              lambda x, y, _: -(ops.log(x) + 1), doc="-x log x (0 at 0, -inf for x < 0).",
              mlx=mlx_special.entr)


_logit = ops.logit      # the kernel row; export() below puts this wrapper in its place


def logit(input, eps=None):
    """log(x / (1 - x)); with ``eps``, x is first clamped to [eps, 1 - eps] (zero gradient
    outside, as torch)."""
    x = _t(input)
    if not x.is_floating_point():
        x = x.to(_f32)
    if eps is not None:
        x = ops.clamp(x, eps, 1 - eps)
    return _logit(x)


def expit(input):
    """The logistic sigmoid."""
    return ops.sigmoid(input)


# -- xlogy, xlog1py -------------------------------------------------------------------

xlogy = ops.xlogy          # the kernel row (optable.BINARY)


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


class Xlog1pyBackward(PyNode):
    """Backward of x log1p(y): gx = g log1p(y) (0 where x == 0, y <= -1), gy = g x / (1 + y)."""

    def grad_formula_impl(self, g, x, y):
        sx, sy = self.ctx
        gx = gy = None
        if self.needs_input_grad(0):
            gx = _sum_to(ops.where((x == 0) & (y <= -1), 0.0, g * ops.log1p(y)), sx)
        if self.needs_input_grad(1):
            gy = _sum_to(g * x / (1 + y), sy)
        return gx, gy


Xlog1pyBackward.schema_v1 = register("xlog1py", "Promote", 2, saves_input=True,
                                     node=Xlog1pyBackward)


def xlog1py(input, other):
    """input * log1p(other), 0 where input == 0 (unless other is nan)."""
    # arrays and lists are tensors of their own dtype, as for lucid's other binary ops
    if not isinstance(input, (Tensor, int, float, np.bool_, np.number)):
        input = core.tensor(input)
    if not isinstance(other, (Tensor, int, float, np.bool_, np.number)):
        other = core.tensor(other)
    x = input if isinstance(input, Tensor) else None
    y = other if isinstance(other, Tensor) else None
    if x is None and y is None:
        raise TypeError("xlog1py(): expected at least one Tensor operand")
    fl = [t.dtype for t in (x, y) if t is not None and t.dtype.is_floating_point]
    dt = max(fl, key=lambda d: d.itemsize) if fl else _f32
    if len(fl) == 2 and fl[0] is not fl[1] and fl[0].itemsize == fl[1].itemsize:
        dt = _f32                       # float16 with bfloat16, as torch's promotion
    dev = host.device_of("special.xlog1py", x, y)
    xt = x.to(dt) if x is not None else core.tensor(float(input), dtype=dt, device=dev)
    yt = y.to(dt) if y is not None else core.tensor(float(other), dtype=dt, device=dev)
    if dev == "gpu":
        out = host.run_mlx(mlx_special.xlog1py, xt.detach(), yt.detach())
    else:
        comp = host.compute_dtype(dt)
        with np.errstate(all="ignore"):
            r = sc.xlog1py(xt.numpy(force=True).astype(comp), yt.numpy(force=True).astype(comp))
        out = _result(r, dt)
    if _need(xt, yt):
        _py_attach(_py_node(Xlog1pyBackward), out, (xt, yt), (xt, yt),
                   (tuple(xt.shape), tuple(yt.shape)))
    return out


# -- aliases of ops lucid already has -------------------------------------------------------

erf = ops.erf
erfc = ops.erfc
erfinv = ops.erfinv
exp2 = ops.exp2
expm1 = ops.expm1
log1p = ops.log1p
logsumexp = ops.logsumexp
softmax = ops.softmax
log_softmax = ops.log_softmax
round = ops.round


sinc = ops.sinc

# lucid.<name> where torch has torch.<name> (the kernel rows export themselves)
export(logit, method=True)
export(polygamma, method=lambda self, n: polygamma(n, self))
export(i1, public=False)     # i0's graph-mode derivative
