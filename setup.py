"""Build lucid's extensions: render the op tables, cythonize, compile the C kernels.

One extension per module of lucid/_core: ``core`` (dtypes, Tensor, autograd engine,
schemas, dispatcher) and one per op family, each cimporting core.pxd. They are
cythonized and compiled in parallel, and a change to one family rebuilds only it.

Environment switches:
  LUCID_DEBUG=1     bounds checks on, -O0 -g (for debugger builds)
  LUCID_SANITIZE=1  AddressSanitizer + UndefinedBehaviorSanitizer (alignment checks
                    included), -O1 -g; run with libasan preloaded (README, "Development")
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
SRC = os.path.join(CORE, "src")
DEBUG = os.environ.get("LUCID_DEBUG", "") == "1"
SANITIZE = os.environ.get("LUCID_SANITIZE", "") == "1"
# -fsanitize=undefined includes -fsanitize=alignment; -fno-sanitize-recover makes every
# finding abort the process, so a clean run means no finding.
SAN_FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all",
             "-fno-omit-frame-pointer", "-g", "-O1"] if SANITIZE else []
JOBS = max(1, min(8, os.cpu_count() or 1))

# Each module of lucid/_core and the C files only it compiles. Generated .pxi files
# are included by their family's .pyx only.
MODULES = {
    "core": ["lucid_cpuinfo.c"],
    "unary": ["lucid_vforce.c"],
    "binary": ["lucid_binary.c"],
    "compare": [],
    "reduce": ["lucid_reduce.c"],
    "shape": [],
    "linalg": [],
    "creation": [],
}

# Templates rendered from the op tables: template -> output.
TEMPLATES = ["_unary.pxi.tp", "_binary.pxi.tp", "_compare.pxi.tp", "_reduce.pxi.tp",
             os.path.join("include", "lucid_unary_list.h.tp")]


def render_templates():
    """optable.py -> the generated .pxi files and include/lucid_unary_list.h."""
    table = runpy.run_path(os.path.join(HERE, CORE, "optable.py"))
    for tp in TEMPLATES:
        src = os.path.join(HERE, CORE, tp)
        dst = src[: -len(".tp")]
        with open(src) as f:
            text = tempita_sub(f.read(), **{k: v for k, v in table.items() if k.isupper()})
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
c_flags += ["-O0", "-g"] if DEBUG else (SAN_FLAGS if SANITIZE else ["-O3"])
extra_link += SAN_FLAGS[:1]
libraries = ["mvec", "m"] if sys.platform.startswith("linux") else []

# Headers: a change to one rebuilds the C sources.
headers = sorted(glob.glob(os.path.join(CORE, "include", "*.h")) +
                 glob.glob(os.path.join(SRC, "*.h")))

extensions = [
    Extension(
        f"lucid._core.{name}",
        sources=[os.path.join(CORE, f"{name}.pyx")] + [os.path.join(SRC, c) for c in c_files],
        depends=headers,
        include_dirs=[os.path.join(CORE, "include"), np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=c_flags,
        extra_link_args=extra_link,
        libraries=libraries,
    )
    for name, c_files in MODULES.items()
]

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
    extra_compile_args=(["-O0", "-g"] if DEBUG else ["-O3"]) + ["-ffp-contract=off"] + SAN_FLAGS,
    extra_link_args=SAN_FLAGS[:1],
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
    ext_modules=cythonize(extensions + [optim_ext], compiler_directives=directives,
                          include_path=[CORE], nthreads=JOBS, quiet=True),
    options={"build_ext": {"parallel": JOBS}},
)
