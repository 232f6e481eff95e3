"""Build lucid's extension: render the op table, cythonize, compile the C kernels.

Environment switches:
  LUCID_DEBUG=1   bounds checks on, -O0 -g (for sanitizer and debugger builds)
"""
import glob
import os
import runpy
import sys

import numpy as np
from Cython.Build import cythonize
from Cython.Tempita import sub as tempita_sub
from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
CORE = os.path.join("lucid", "_core")
DEBUG = os.environ.get("LUCID_DEBUG", "") == "1"


def render_templates():
    """optable.py -> _unary.pxi (Cython) and include/lucid_unary_list.h (C X-macro list)."""
    table = runpy.run_path(os.path.join(HERE, CORE, "optable.py"))
    for tp in ("_unary.pxi.tp", os.path.join("include", "lucid_unary_list.h.tp")):
        src = os.path.join(HERE, CORE, tp)
        dst = src[: -len(".tp")]
        with open(src) as f:
            text = tempita_sub(f.read(), UNARY=table["UNARY"], ACCELERATE=table["ACCELERATE"])
        old = open(dst).read() if os.path.exists(dst) else None
        if text != old:  # keep mtimes stable so unchanged builds stay incremental
            with open(dst, "w") as f:
                f.write(text)


render_templates()

# Never the fast-math flags: they break inf/nan handling and set flush-to-zero for
# the whole process. These two flags are what gcc needs to call libmvec; they only
# drop errno writes and the assumption that FP ops may trap. -fopenmp covers
# `omp simd` and the threads of large kernels (cython.parallel.prange).
# macOS (untested here): Apple clang has no OpenMP runtime, so -fopenmp-simd only
# (prange then runs on one thread) and Accelerate supplies the vForce functions.
if sys.platform == "darwin":
    c_flags = ["-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math"]
    extra_link = ["-framework", "Accelerate"]
else:
    c_flags = ["-fopenmp", "-fno-math-errno", "-fno-trapping-math"]
    extra_link = ["-fopenmp"]
c_flags += ["-O0", "-g"] if DEBUG else ["-O3"]
libraries = ["mvec", "m"] if sys.platform.startswith("linux") else []

sources = [os.path.join(CORE, "_C.pyx"), os.path.join(CORE, "src", "lucid_vforce.c"),
           os.path.join(CORE, "src", "lucid_binary.c")]
# Headers: a change to one rebuilds the C sources.
depends = sorted(glob.glob(os.path.join(CORE, "include", "*.h")) +
                 glob.glob(os.path.join(CORE, "src", "*.h")))

ext = Extension(
    "lucid._core._C",
    sources=sources,
    depends=depends,
    include_dirs=[os.path.join(CORE, "include"), np.get_include()],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    extra_compile_args=c_flags,
    extra_link_args=extra_link,
    libraries=libraries,
)

# -- lucid.optim._fused: the fused optimizer updates -----------------------------------------
# Its own extension, independent of lucid._core (it works on the NumPy arrays of
# parameters, gradients and state). -ffp-contract=off: no FMA contraction, so the
# updates round like torch's CPU kernels; never -ffast-math.
OPTIM = os.path.join("lucid", "optim")
optim_ext = Extension(
    "lucid.optim._fused",
    sources=[os.path.join(OPTIM, "_fused.pyx"), os.path.join(OPTIM, "lucid_optim.c")],
    depends=[os.path.join(OPTIM, "lucid_optim.h")],
    include_dirs=[OPTIM],
    extra_compile_args=["-O0", "-g"] if DEBUG else ["-O3", "-ffp-contract=off"],
)

directives = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "cdivision": not DEBUG,
    "initializedcheck": DEBUG,
    "embedsignature": True,
}

setup(
    ext_modules=cythonize([ext, optim_ext], compiler_directives=directives,
                          include_path=[CORE], quiet=True),
)
