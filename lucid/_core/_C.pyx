"""lucid's compiled core: dtypes, Tensor, the autograd engine, op schemas and CPU ops.

One extension module assembled from the .pxi files below, so the hot path
(op -> kernel -> backward node) is direct C calls with no cross-module
indirection. Read them in this order:

  dtype.pxi     the six dtypes and PyTorch's promotion rules
  tensor.pxi    Tensor: ndarray storage, autograd metadata, version counter
  autograd.pxi  Node, SavedTensor, AccumulateGrad, the engine, grad mode
  schema.pxi    OpSchema, AmpPolicy, the registry
  unary.pxi     the element-wise machinery every unary op shares; dtype casts
  _unary.pxi    GENERATED from optable.py: one schema, node class and function per row
  binary.pxi    add, sub, mul, div, pow, neg, and the in-place variants
  reduce.pxi    sum, mean, reshape, expand
  shape.pxi     views, joins, indexing (__getitem__/__setitem__), gather/scatter
  linalg.pxi    matmul, dot, outer
  compare.pxi   comparisons, logical ops, where
  activation.pxi element-wise ops with parameters: leaky_relu, elu, clamp, nan_to_num
  creation.pxi  zeros, ones, full, arange, rand, randn, ...
"""
cimport numpy as cnp
from cpython.object cimport PyObject, PyTypeObject
from cython.parallel cimport prange
import numpy as np

cnp.import_array()

# Forward declarations: Tensor and Node refer to each other.
cdef class Node
cdef class Tensor

include "dtype.pxi"
include "tensor.pxi"
include "autograd.pxi"
include "schema.pxi"
include "unary.pxi"
include "_unary.pxi"
include "binary.pxi"
include "reduce.pxi"
include "shape.pxi"
include "linalg.pxi"
include "compare.pxi"
include "activation.pxi"
include "creation.pxi"
