"""The unary op table: one row per element-wise op, the single source of truth.

The build (setup.py) renders this table twice with Tempita:
  * ``_unary.pxi.tp`` -> ``_unary.pxi``: for each row, the ``cdef extern``
    declarations of its kernels, its ``OpSchema``, its backward node
    ``<Name>Backward`` (a cdef class) and the public ``lucid.<name>`` function;
  * ``include/lucid_unary_list.h.tp`` -> ``include/lucid_unary_list.h``: the
    X-macro list the C layer expands into forward and fused backward kernels.
The tests and benchmarks read the same rows (reference function, domain), so
adding an op is one row here and nothing else.

Fields
  name      public name: ``lucid.<name>``, ``Tensor.<name>()``, schema name
  amp       AMP policy: "Promote", "KeepInput" or "ForceFP32"
  saves     what the backward node keeps: "x" (the input) or "y" (the output)
  c         (float32 function, float64 function) the forward kernel applies
            element-wise; libm names are vectorised through libmvec
  c_grad    the fused backward, a C expression in g, T and the saved x or y
            (EXP/LOG/SQRT are type-generic)
  grad      the graph-mode backward, the same formula written with lucid ops
            in g, x, y (so it is itself differentiable)
  ref       dotted name of an independent reference (numpy / scipy.special)
  mp        the same function as an mpmath expression in x (reference values)
  domain    (lo, hi) where tests sample inputs
  doc       one-line description for the docstring
"""

UNARY = [
    dict(
        name="erf", amp="Promote", saves="x",
        c=("erff", "erf"),
        c_grad="g * (T)1.1283791670955126 * EXP(-(x * x))",
        grad="g * 1.1283791670955126 * exp(-(x * x))",
        ref="scipy.special.erf", mp="erf(x)", domain=(-5.0, 5.0),
        doc="Error function, erf(x) = 2/sqrt(pi) * integral_0^x exp(-t^2) dt.",
    ),
    dict(
        name="exp", amp="ForceFP32", saves="y",
        c=("expf", "exp"),
        c_grad="g * y",
        grad="g * y",
        ref="numpy.exp", mp="exp(x)", domain=(-20.0, 20.0),
        doc="Exponential, e**x. Saves its output: d/dx e**x = e**x.",
    ),
    dict(
        name="log2", amp="ForceFP32", saves="x",
        c=("log2f", "log2"),
        c_grad="g / (x * (T)0.6931471805599453)",
        grad="g / (x * 0.6931471805599453)",
        ref="numpy.log2", mp="log(x, 2)", domain=(0.01, 100.0),
        doc="Base-2 logarithm.",
    ),
    dict(
        name="log", amp="ForceFP32", saves="x",
        c=("logf", "log"),
        c_grad="g / x",
        grad="g / x",
        ref="numpy.log", mp="log(x)", domain=(0.01, 100.0),
        doc="Natural logarithm.",
    ),
]
