"""Build lucid's extensions: render the op tables, cythonize, compile the C kernels.

One extension per module of lucid/_core: ``core`` (dtypes, Tensor, autograd engine,
schemas, dispatcher) and one per op family, each cimporting core.pxd. They are
cythonized and compiled in parallel, and a change to one family rebuilds only it.

Environment switches:
  LUCID_DEBUG=1     bounds checks on, -O0 -g (for debugger builds)
  LUCID_SANITIZE=1  AddressSanitizer + UndefinedBehaviorSanitizer (alignment checks
                    included), -O1 -g; run with libasan preloaded (README, "Development")
"""
import os
import re
import runpy
import sys

import numpy as np
from Cython.Build import cythonize
from Cython.Tempita import sub as tempita_sub
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext as _build_ext

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

# Each module of lucid/_core and the C kernel library it links. The kernels are built
# once into static libraries (build_clib, rebuilt only when their sources change), so
# that a change to a family's .pyx recompiles that family's Cython output and nothing
# else. Generated .pxi files are included by their family's .pyx only.
MODULES = {
    "core": "lucid_core_kernels",
    "unary": ["lucid_unary_kernels", "lucid_compare_kernels"],
    "binary": ["lucid_binary_kernels", "lucid_compare_kernels"],
    "compare": "lucid_compare_kernels",
    "reduce": "lucid_reduce_kernels",
    "shape": None,
    "linalg": None,
    "creation": None,
}
KERNELS = {
    "lucid_core_kernels": ["lucid_cpuinfo.c", "lucid_pool.c", "lucid_half.c", "lucid_alloc.c"],
    "lucid_unary_kernels": ["lucid_vforce.c", "lucid_half.c"],
    "lucid_binary_kernels": ["lucid_binary.c", "lucid_half.c"],
    "lucid_reduce_kernels": ["lucid_reduce.c"],
    "lucid_compare_kernels": ["lucid_compare.c"],   # comparisons, where, clamp, 2-D arithmetic
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
# drop errno writes and the assumption that FP ops may trap. -fopenmp-simd covers
# `omp simd` only: large kernels run on lucid's own pool (src/lucid_pool.c, pthreads),
# never on an OpenMP runtime.
# macOS (untested here): Accelerate supplies the vForce functions.
if sys.platform == "darwin":
    c_flags = ["-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math"]
    extra_link = ["-framework", "Accelerate"]
else:
    c_flags = ["-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math", "-pthread"]
    extra_link = ["-pthread"]
c_flags += ["-O0", "-g"] if DEBUG else (SAN_FLAGS if SANITIZE else ["-O3"])
extra_link += SAN_FLAGS[:1]
libraries = ["mvec", "m"] if sys.platform.startswith("linux") else []

# Rebuild dependencies: the headers a file reaches through `#include "..."`, `cdef
# extern from "..."` and Cython `include "..."` lines (found in the including file's
# folder, include/ or src/), so a changed header rebuilds only what uses it.
_INCLUDE = re.compile(r'^\s*(?:#\s*include|cdef\s+extern\s+from|include)\s+"([^"]+)"', re.M)


def _reaches(path, seen=None):
    seen = set() if seen is None else seen
    with open(path) as f:
        names = _INCLUDE.findall(f.read())
    for name in names:
        for d in (os.path.dirname(path), os.path.join(CORE, "include"), SRC):
            dep = os.path.join(d, name)
            if os.path.exists(dep):
                if dep not in seen:
                    seen.add(dep)
                    _reaches(dep, seen)
                break
    return seen


def _deps(*paths):
    out = set()
    for p in paths:
        _reaches(p, out)
    return sorted(out)


kernel_libraries = [
    (lib, {"sources": [os.path.join(SRC, c) for c in files],
           "obj_deps": {"": [], **{os.path.join(SRC, c): _deps(os.path.join(SRC, c))
                                   for c in files}},
           "include_dirs": [os.path.join(CORE, "include")], "cflags": c_flags})
    for lib, files in KERNELS.items()
]

def _libs(lib):
    """A module's kernel libraries: None, one name or a list."""
    return [] if lib is None else [lib] if isinstance(lib, str) else list(lib)


extensions = [
    Extension(
        f"lucid._core.{name}",
        sources=[os.path.join(CORE, f"{name}.pyx")],
        # the headers it declares (its kernel libraries relink it: build_ext below)
        depends=_deps(os.path.join(CORE, f"{name}.pyx"), os.path.join(CORE, "core.pxd")),
        include_dirs=[os.path.join(CORE, "include"), np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=c_flags,
        extra_link_args=extra_link,
        libraries=_libs(lib) + libraries,
    )
    for name, lib in MODULES.items()
]

# -- lucid.optim._fused: the fused optimizer updates -----------------------------------------
# Its own extension, independent of lucid._core (it works on the NumPy arrays of
# parameters, gradients and state). -ffp-contract=off: no FMA contraction, so the
# updates round like torch's CPU kernels; -fno-math-errno lets sqrt vectorise (the
# square root instruction is correctly rounded, as libm's); -fno-unswitch-loops keeps
# the selects on the configuration flags (gcc's unswitched copies of the Adam loop ran
# scalar, 4x slower); never the fast-math flags.
OPTIM = os.path.join("lucid", "optim")
optim_ext = Extension(
    "lucid.optim._fused",
    sources=[os.path.join(OPTIM, "_fused.pyx"), os.path.join(OPTIM, "lucid_optim.c")],
    depends=[os.path.join(OPTIM, "lucid_optim.h")],
    include_dirs=[OPTIM],
    extra_compile_args=(["-O0", "-g"] if DEBUG else ["-O3"]) + [
        "-ffp-contract=off", "-fno-math-errno", "-fno-unswitch-loops"] + SAN_FLAGS,
    extra_link_args=SAN_FLAGS[:1],
)

# -- lucid.nn._kernels: im2col / col2im and max pooling -------------------------------------
# Array kernels independent of lucid._core, like the optimizer's (lucid.nn._im2col records
# the nodes). Plain loops: every element is computed as the scalar code says.
NN = os.path.join("lucid", "nn")
nn_ext = Extension(
    "lucid.nn._kernels",
    sources=[os.path.join(NN, "_kernels.pyx"), os.path.join(NN, "lucid_nn.c")],
    depends=[os.path.join(NN, "lucid_nn.h")],
    include_dirs=[NN, np.get_include()],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
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

class build_ext(_build_ext):
    """build_ext that first builds the kernel libraries (also for --inplace builds)."""

    def run(self):
        self.run_command("build_clib")
        libdir = self.get_finalized_command("build_clib").build_clib
        for ext in self.extensions:    # a rebuilt kernel library relinks its modules
            ext.depends += [os.path.join(libdir, f"lib{lib}.a") for lib in ext.libraries
                            if lib in KERNELS]
        super().run()


setup(
    cmdclass={"build_ext": build_ext},
    libraries=kernel_libraries,
    ext_modules=cythonize(extensions + [optim_ext, nn_ext], compiler_directives=directives,
                          include_path=[CORE], nthreads=JOBS, quiet=True),
    options={"build_ext": {"parallel": JOBS}},
)
