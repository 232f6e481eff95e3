"""lucid's compiled core: ``core`` (dtypes, Tensor, autograd engine, schemas, dispatcher)
and one extension per op family, loaded here in one place. ``optable.py`` holds the op
tables the build renders into the families."""
from lucid._core import core  # noqa: F401  (first: the families cimport it)
from lucid._core import unary, binary, compare, reduce, shape, linalg, creation  # noqa: F401,E401

FAMILIES = (unary, binary, compare, reduce, shape, linalg, creation)

from lucid._core import gpu  # noqa: F401,E402  (the MLX kernels of the table rows)

# Families written in Python over NumPy/LAPACK (their nodes are core.PyNode subclasses);
# imported here so that their schemas and exports exist before lucid.ops reads them.
from lucid import linalg as _linalg  # noqa: F401,E402
from lucid import _sorting  # noqa: F401,E402
from lucid import special as _special  # noqa: F401,E402
