"""The binary family: element-wise ops of two operands, and the in-place variants.

The rows of ``optable.BINARY`` become, through the generated ``_binary.pxi``, one
schema, node class and public function each, all run by core's dispatch_binary.
pow, maximum, minimum, atan2, hypot and logaddexp on floats run lucid's own kernels
(src/lucid_binary.c), forward and fused backward; the others (and integer inputs)
NumPy's ufuncs, which are already SIMD and broadcast-aware.
"""
cimport cython
cimport numpy as cnp

import numpy as np

from lucid._core.core cimport *
from lucid._core.core import (LucidError, ShapeError, UnsupportedDTypeError, _exact_scalar, export,
                              ops, register)

cnp.import_array()

cdef DType bool_ = dtype_of_code(DT_BOOL)
cdef DType float16 = dtype_of_code(DT_FLOAT16)
cdef DType float32 = dtype_of_code(DT_FLOAT32)
cdef tuple _NO_EDGE = (None, 0)
cdef int _BF16_NUM = dtype_of_code(DT_BFLOAT16).typenum

cdef extern from "lucid_half.h" nogil:
    enum:
        LH_F16
        LH_BF16
        LH_ADD
        LH_SUB
        LH_MUL
        LH_DIV
    void lucid_half_binary(int kind, int op, unsigned short *z, const unsigned short *a, int sa,
                           const unsigned short *b, int sb, Py_ssize_t n)
    void lucid_half_binary_scalar(int kind, int op, unsigned short *z, const unsigned short *x,
                                  float s, int s_first, Py_ssize_t n)
    void lucid_f32_to_half(int kind, unsigned short *y, const float *x, Py_ssize_t n)


cdef inline bint _is_half_num(int num) noexcept:
    return num == cnp.NPY_FLOAT16 or num == _BF16_NUM


cdef cnp.ndarray _f32(object x):
    """An operand (array, NumPy scalar or Python number) as float32 (half widened exactly)."""
    if type(x) is np.ndarray:
        return _half_to_f32(<cnp.ndarray>x)
    return _half_to_f32(np.asarray(x)) if isinstance(x, np.generic) else np.asarray(x, np.float32)

cdef extern from "lucid_vforce.h" nogil:
    enum:
        LV_BC_NONE
        LV_BC_A
        LV_BC_B
    void lucid_vnegf(float *y, const float *x, const int *n)
    void lucid_vneg(double *y, const double *x, const int *n)

ctypedef void (*bf32_t)(float *, const float *, const float *, const int *, int) noexcept nogil
ctypedef void (*bf64_t)(double *, const double *, const double *, const int *, int) noexcept nogil
ctypedef void (*bg32_t)(float *, float *, const float *, const float *, const float *,
                        const float *, const int *, int) noexcept nogil
ctypedef void (*bg64_t)(double *, double *, const double *, const double *, const double *,
                        const double *, const int *, int) noexcept nogil

cdef struct BinaryKernels:
    bf32_t f32
    bf64_t f64
    bg32_t g32
    bg64_t g64


# add, sub, mul, div: forward-only kernels (src/lucid_binary.c), for floats.
cdef extern from *:
    """
    void lucid_vaddf(float *, const float *, const float *, const int *, int);
    void lucid_vadd(double *, const double *, const double *, const int *, int);
    void lucid_vsubf(float *, const float *, const float *, const int *, int);
    void lucid_vsub(double *, const double *, const double *, const int *, int);
    void lucid_vmulf(float *, const float *, const float *, const int *, int);
    void lucid_vmul(double *, const double *, const double *, const int *, int);
    void lucid_vdivf(float *, const float *, const float *, const int *, int);
    void lucid_vdiv(double *, const double *, const double *, const int *, int);
    """
    void lucid_vaddf(float *, const float *, const float *, const int *, int) noexcept nogil
    void lucid_vadd(double *, const double *, const double *, const int *, int) noexcept nogil
    void lucid_vsubf(float *, const float *, const float *, const int *, int) noexcept nogil
    void lucid_vsub(double *, const double *, const double *, const int *, int) noexcept nogil
    void lucid_vmulf(float *, const float *, const float *, const int *, int) noexcept nogil
    void lucid_vmul(double *, const double *, const double *, const int *, int) noexcept nogil
    void lucid_vdivf(float *, const float *, const float *, const int *, int) noexcept nogil
    void lucid_vdiv(double *, const double *, const double *, const int *, int) noexcept nogil

cdef BinaryKernels _K_ARITH_ADD = BinaryKernels(lucid_vaddf, lucid_vadd, NULL, NULL)
cdef BinaryKernels _K_ARITH_SUB = BinaryKernels(lucid_vsubf, lucid_vsub, NULL, NULL)
cdef BinaryKernels _K_ARITH_MUL = BinaryKernels(lucid_vmulf, lucid_vmul, NULL, NULL)
cdef BinaryKernels _K_ARITH_DIV = BinaryKernels(lucid_vdivf, lucid_vdiv, NULL, NULL)

# Kernels take an int count; longer arrays go through in chunks of this many
# elements (a multiple of the kernels' block, so chunking never changes a result).
# Pieces of strided or broadcast operands are _PIECE elements; below _NOGIL_MIN
# elements, releasing the GIL costs more than the kernel.
cdef enum:
    _CHUNK = 1 << 30
    _PIECE = 1 << 14
    _NOGIL_MIN = 8192


cdef void _bin_run(const BinaryKernels *k, int num, char *z, const char *a, const char *b,
                   Py_ssize_t n, int bc, Py_ssize_t isz) noexcept nogil:
    """One contiguous piece of n outputs; a broadcast operand (bc) stays put."""
    cdef Py_ssize_t sa = 0 if bc == LV_BC_A else isz
    cdef Py_ssize_t sb = 0 if bc == LV_BC_B else isz
    cdef int m
    while n > 0:
        m = <int>(n if n < _CHUNK else _CHUNK)
        if num == cnp.NPY_FLOAT:
            k.f32(<float *>z, <const float *>a, <const float *>b, &m, bc)
        else:
            k.f64(<double *>z, <const double *>a, <const double *>b, &m, bc)
        z += m * isz
        a += m * sa
        b += m * sb
        n -= m


# Large arrays run on lucid's pool (core's _parallel_for): one piece per
# _piece_len(n) elements, claimed by the caller and the workers alike.
cdef struct _BinJob:
    const BinaryKernels *k
    int num, bc
    char *z
    char *ga
    char *gb
    const char *g
    const char *a
    const char *b
    const char *y
    Py_ssize_t n, per, isz, sa, sb


cdef void _bin_piece(void *ctx, Py_ssize_t c) noexcept nogil:
    cdef _BinJob *j = <_BinJob *>ctx
    cdef Py_ssize_t start = c * j.per
    _bin_run(j.k, j.num, j.z + start * j.isz, j.a + start * j.sa, j.b + start * j.sb,
             j.per if j.n - start > j.per else j.n - start, j.bc, j.isz)


cdef void _bin_par(const BinaryKernels *k, int num, char *z, const char *a, const char *b,
                   Py_ssize_t n, int bc, Py_ssize_t isz) noexcept nogil:
    cdef int nt = _threads_for(n)
    cdef _BinJob j
    if nt == 1:
        _bin_run(k, num, z, a, b, n, bc, isz)
        return
    j.k, j.num, j.bc, j.z, j.a, j.b = k, num, bc, z, a, b
    j.n, j.per, j.isz = n, _piece_len(n, nt), isz
    j.sa = 0 if bc == LV_BC_A else isz
    j.sb = 0 if bc == LV_BC_B else isz
    _parallel_for(_bin_piece, &j, (n + j.per - 1) // j.per, nt)


# float16 / bfloat16 add, sub, mul and div (lucid_half.c) on the pool, the same way: each
# element is computed alone, so the pieces never change a result.
cdef struct _HalfJob:
    int kind, op, sa, sb, s_first
    bint scalar                        # b (or a, s_first) is the float32 value s
    float s
    unsigned short *z
    const unsigned short *a
    const unsigned short *b
    Py_ssize_t n, per


cdef void _half_run(_HalfJob *j, Py_ssize_t start, Py_ssize_t m) noexcept nogil:
    if j.scalar:
        lucid_half_binary_scalar(j.kind, j.op, j.z + start, j.a + start, j.s, j.s_first, m)
    else:
        lucid_half_binary(j.kind, j.op, j.z + start, j.a + start * j.sa, j.sa,
                          j.b + start * j.sb, j.sb, m)


cdef void _half_piece(void *ctx, Py_ssize_t c) noexcept nogil:
    cdef _HalfJob *j = <_HalfJob *>ctx
    cdef Py_ssize_t start = c * j.per
    _half_run(j, start, j.per if j.n - start > j.per else j.n - start)


cdef void _half_par(_HalfJob *j) noexcept nogil:
    cdef int nt = _threads_for(j.n)
    if nt == 1:
        _half_run(j, 0, j.n)
        return
    j.per = _piece_len(j.n, nt)
    _parallel_for(_half_piece, j, (j.n + j.per - 1) // j.per, nt)


cdef void _half_go(_HalfJob *j):
    """Run j, without the GIL when it is large enough to pay for releasing it."""
    if j.n < _NOGIL_MIN:
        _half_run(j, 0, j.n)
    else:
        with nogil:
            _half_par(j)


cdef void _bgrad_run(const BinaryKernels *k, int num, char *ga, char *gb, const char *g,
                     const char *a, const char *b, const char *y, Py_ssize_t n, int bc,
                     Py_ssize_t isz) noexcept nogil:
    cdef Py_ssize_t sa = 0 if bc == LV_BC_A else isz
    cdef Py_ssize_t sb = 0 if bc == LV_BC_B else isz
    cdef int m
    while n > 0:
        m = <int>(n if n < _CHUNK else _CHUNK)
        if num == cnp.NPY_FLOAT:
            k.g32(<float *>ga, <float *>gb, <const float *>g, <const float *>a,
                  <const float *>b, <const float *>y, &m, bc)
        else:
            k.g64(<double *>ga, <double *>gb, <const double *>g, <const double *>a,
                  <const double *>b, <const double *>y, &m, bc)
        if ga != NULL:
            ga += m * isz
        if gb != NULL:
            gb += m * isz
        if y != NULL:
            y += m * isz
        g += m * isz
        a += m * sa
        b += m * sb
        n -= m


cdef void _bgrad_piece(void *ctx, Py_ssize_t c) noexcept nogil:
    cdef _BinJob *j = <_BinJob *>ctx
    cdef Py_ssize_t start = c * j.per
    cdef Py_ssize_t off = start * j.isz
    _bgrad_run(j.k, j.num, j.ga + off if j.ga != NULL else NULL,
               j.gb + off if j.gb != NULL else NULL, j.g + off, j.a + start * j.sa,
               j.b + start * j.sb, j.y + off if j.y != NULL else NULL,
               j.per if j.n - start > j.per else j.n - start, j.bc, j.isz)


cdef void _bgrad_par(const BinaryKernels *k, int num, char *ga, char *gb, const char *g,
                     const char *a, const char *b, const char *y, Py_ssize_t n, int bc,
                     Py_ssize_t isz) noexcept nogil:
    cdef int nt = _threads_for(n)
    cdef _BinJob j
    if nt == 1:
        _bgrad_run(k, num, ga, gb, g, a, b, y, n, bc, isz)
        return
    j.k, j.num, j.bc, j.ga, j.gb, j.g, j.a, j.b, j.y = k, num, bc, ga, gb, g, a, b, y
    j.n, j.per, j.isz = n, _piece_len(n, nt), isz
    j.sa = 0 if bc == LV_BC_A else isz
    j.sb = 0 if bc == LV_BC_B else isz
    _parallel_for(_bgrad_piece, &j, (n + j.per - 1) // j.per, nt)


cdef inline bint _full(cnp.ndarray x, tuple shape):
    return cnp.PyArray_IS_C_CONTIGUOUS(x) and _shp(x) == shape


cdef tuple _bshape(cnp.ndarray a, cnp.ndarray b):
    """The broadcast shape of a and b (the common cases without np.broadcast_shapes,
    which is Python code and costs microseconds)."""
    cdef tuple sa = _shp(a), sb = _shp(b)
    if sa == sb:
        return sa
    if cnp.PyArray_SIZE(a) == 1 and cnp.PyArray_NDIM(a) <= cnp.PyArray_NDIM(b):
        return sb
    if cnp.PyArray_SIZE(b) == 1 and cnp.PyArray_NDIM(b) <= cnp.PyArray_NDIM(a):
        return sa
    return _bshape_of((a, b))


cdef int _bc_mode(cnp.ndarray a, cnp.ndarray b, tuple shape):
    """How the kernels can read a and b for an output of `shape`: LV_BC_NONE (both
    full and contiguous), LV_BC_A / LV_BC_B (that one is a single value), or -1
    (a general broadcast or a strided layout)."""
    cdef bint fa = _full(a, shape), fb = _full(b, shape)
    if fa and fb:
        return LV_BC_NONE
    if cnp.PyArray_SIZE(a) == 1 and fb:
        return LV_BC_A
    if cnp.PyArray_SIZE(b) == 1 and fa:
        return LV_BC_B
    return -1


# -- row and column broadcasts of the fused backwards (forwards: _bcast2d.pxi) -----------
# An output of `shape` is seen as M rows of N (the dims before and after a split k).
# Each C-contiguous operand is then FULL (M x N), a ROW (N values, the same for every
# row: (N,), (1, N)), a COL (M values, one per row: (M, 1)) or ONE value. Row i is one
# kernel call over N elements, a COL or ONE operand being that call's single value, so
# nothing is materialised, and an element's result depends on its operands only (the
# rows never change it, whichever thread runs them).
cdef enum:
    _FULL = 0
    _ROW = 1
    _COL = 2
    _ONE = 3
    _ROWS_MIN = 16         # shorter rows go through NumPy (a kernel call per few elements)


cdef int _kind_at(cnp.ndarray x, tuple shape, int k):
    """The kind of operand x for an output `shape` split at k, or -1."""
    cdef int d = len(shape), off = d - cnp.PyArray_NDIM(x), j
    cdef Py_ssize_t xd, sd
    cdef bint lo = True, lf = True, ro = True, rf = True
    if off < 0:
        return -1
    for j in range(d):
        xd = 1 if j < off else cnp.PyArray_DIMS(x)[j - off]
        sd = shape[j]
        if j < k:
            lo = lo and xd == 1
            lf = lf and xd == sd
        else:
            ro = ro and xd == 1
            rf = rf and xd == sd
    if lf and rf:
        return _FULL
    if lo and rf:
        return _ROW
    if lf and ro:
        return _COL
    if lo and ro:
        return _ONE
    return -1


cdef bint _split_rows(cnp.ndarray a, cnp.ndarray b, tuple shape, Py_ssize_t *m,
                      Py_ssize_t *n, int *ka, int *kb) except -1:
    """Find a split of `shape` where both operands are FULL / ROW / COL / ONE and each
    row has one operand spanning it; False if there is none (the caller falls back)."""
    cdef int d = len(shape), k, j
    if not (cnp.PyArray_IS_C_CONTIGUOUS(a) and cnp.PyArray_IS_C_CONTIGUOUS(b)):
        return False
    for k in range(1, d):
        ka[0] = _kind_at(a, shape, k)
        kb[0] = _kind_at(b, shape, k)
        if ka[0] < 0 or kb[0] < 0 or (ka[0] >= _COL and kb[0] >= _COL):
            continue
        m[0] = n[0] = 1
        for j in range(d):
            if j < k:
                m[0] *= <Py_ssize_t>shape[j]
            else:
                n[0] *= <Py_ssize_t>shape[j]
        return n[0] >= _ROWS_MIN and m[0] > 0
    return False


cdef struct _RowJob:
    const BinaryKernels *k
    int num, ka, kb
    char *ga
    char *gb
    const char *g
    const char *a
    const char *b
    const char *y
    Py_ssize_t m, n, rows, isz
    const char *tile       # a ROW operand repeated over `r` rows (see _row_tile), or NULL
    Py_ssize_t r


cdef inline const char *_row_of(const char *x, int kind, Py_ssize_t i, Py_ssize_t n,
                                Py_ssize_t isz) noexcept nogil:
    if kind == _FULL:
        return x + i * n * isz
    if kind == _COL:
        return x + i * isz
    return x


cdef void _rows_piece(void *ctx, Py_ssize_t c) noexcept nogil:
    """Rows [c * rows, (c + 1) * rows) of a fused backward."""
    cdef _RowJob *j = <_RowJob *>ctx
    cdef Py_ssize_t i, off
    cdef Py_ssize_t end = (c + 1) * j.rows if (c + 1) * j.rows < j.m else j.m
    cdef int bc = LV_BC_A if j.ka >= _COL else (LV_BC_B if j.kb >= _COL else LV_BC_NONE)
    cdef Py_ssize_t cnt
    cdef const char *pa
    cdef const char *pb
    if j.tile != NULL:     # a ROW and a FULL operand: r rows per kernel call
        i = c * j.rows
        while i < end:
            cnt = j.r if end - i > j.r else end - i
            off = i * j.n * j.isz
            pa = j.tile if j.ka == _ROW else j.a + off
            pb = j.tile if j.kb == _ROW else j.b + off
            _bgrad_run(j.k, j.num, j.ga + off if j.ga != NULL else NULL,
                       j.gb + off if j.gb != NULL else NULL, j.g + off, pa, pb,
                       j.y + off if j.y != NULL else NULL, cnt * j.n, LV_BC_NONE, j.isz)
            i += cnt
        return
    for i in range(c * j.rows, end):
        off = i * j.n * j.isz
        _bgrad_run(j.k, j.num, j.ga + off if j.ga != NULL else NULL,
                   j.gb + off if j.gb != NULL else NULL, j.g + off,
                   _row_of(j.a, j.ka, i, j.n, j.isz), _row_of(j.b, j.kb, i, j.n, j.isz),
                   j.y + off if j.y != NULL else NULL, j.n, bc, j.isz)


cdef void _rows_run(_RowJob *j) noexcept nogil:
    cdef Py_ssize_t total = j.m * j.n
    cdef int nt = _threads_for(total)
    cdef Py_ssize_t per = _piece_len(total, nt) if nt > 1 else total
    j.rows = per // j.n if per >= j.n else 1
    if j.tile != NULL:
        j.rows = (j.rows + j.r - 1) // j.r * j.r
    if nt == 1 or j.rows >= j.m:
        j.rows = j.m
        _rows_piece(j, 0)
    else:
        _parallel_for(_rows_piece, j, (j.m + j.rows - 1) // j.rows, nt)


cdef object _row_tile(_RowJob *j, cnp.ndarray a, cnp.ndarray b):
    """For a ROW operand next to a FULL one: its row repeated over j.r rows (at least
    2048 elements; j.r a multiple of 16, so each call starts 64-byte aligned), so the kernel runs over r rows at a time and a
    short row never costs a call and a padded tail of its own. Returns the tile (kept
    alive by the caller) or None."""
    cdef Py_ssize_t r
    j.tile = NULL
    if not ((j.ka == _ROW and j.kb == _FULL) or (j.ka == _FULL and j.kb == _ROW)) \
            or j.n >= 2048:
        return None
    r = ((2048 + j.n - 1) // j.n + 15) // 16 * 16
    if r > j.m:
        r = j.m
    tile = np.tile(a.reshape(-1) if j.ka == _ROW else b.reshape(-1), r)
    j.r = r
    j.tile = cnp.PyArray_BYTES(<cnp.ndarray>tile)
    return tile


cdef void _rows_go(_RowJob *j):
    if j.m * j.n < _NOGIL_MIN:
        _rows_run(j)
    else:
        with nogil:
            _rows_run(j)


include "_bcast2d.pxi"

cdef extern from *:
    """
    void lucid_arith2d_f32(int, float *, const float *, const float *, ptrdiff_t, ptrdiff_t,
                           const ptrdiff_t *);
    void lucid_arith2d_f64(int, double *, const double *, const double *, ptrdiff_t,
                           ptrdiff_t, const ptrdiff_t *);
    """
    void lucid_arith2d_f32(int, float *, const float *, const float *, Py_ssize_t, Py_ssize_t,
                           const Py_ssize_t *) nogil
    void lucid_arith2d_f64(int, double *, const double *, const double *, Py_ssize_t,
                           Py_ssize_t, const Py_ssize_t *) nogil


cdef void _arith_rows2d(void *job, char *z, const char **p, Py_ssize_t m,
                        Py_ssize_t n) noexcept nogil:
    cdef _Job2D *j = <_Job2D *>job
    if j.isz[0] == 4:
        lucid_arith2d_f32(j.op, <float *>z, <const float *>p[0], <const float *>p[1], m, n, j.st)
    else:
        lucid_arith2d_f64(j.op, <double *>z, <const double *>p[0], <const double *>p[1], m, n,
                          j.st)


cdef void _bin_rows2d(void *job, char *z, const char **p, Py_ssize_t m,
                      Py_ssize_t n) noexcept nogil:
    """m rows of n outputs for _bcast2d's plan: an operand with column step 0 is the
    row's single value."""
    cdef _Job2D *j = <_Job2D *>job
    cdef Py_ssize_t i, isz = j.isz[0]
    cdef int bc = LV_BC_A if j.st[1] == 0 and n > 1 else (
        LV_BC_B if j.st[3] == 0 and n > 1 else LV_BC_NONE)
    for i in range(m):
        _bin_run(<const BinaryKernels *>j.aux, j.op, z + i * n * isz, p[0] + i * j.st[0] * isz,
                 p[1] + i * j.st[2] * isz, n, bc, isz)


cdef cnp.ndarray _bin_forward(const BinaryKernels *k, object xa, object xb, int code):
    """op(xa, xb) with lucid's kernels, for float16/32/64 operands (ndarrays or NumPy
    scalars) of one dtype. float16 computes in float32. code: the op's code in
    lucid_arith2d (src/lucid_compare.c: add, sub, mul, div, maximum, minimum; these run
    any broadcast in one loop), or -1."""
    cdef cnp.ndarray a = xa if type(xa) is np.ndarray else np.asarray(xa)
    cdef cnp.ndarray b = xb if type(xb) is np.ndarray else np.asarray(xb)
    if not cnp.PyArray_ISALIGNED(a):       # the kernels read through typed pointers
        a = np.array(a, copy=True)
    if not cnp.PyArray_ISALIGNED(b):
        b = np.array(b, copy=True)
    if _is_half_num(cnp.PyArray_TYPE(a)):
        return _f32_to_half(_bin_forward(k, _half_to_f32(a), _half_to_f32(b), code),
                            _dtype_of_array(a))
    cdef tuple shape = _bshape(a, b)
    cdef int num = cnp.PyArray_TYPE(a)
    cdef Py_ssize_t isz = cnp.PyArray_ITEMSIZE(a)
    cdef int bc = _bc_mode(a, b, shape)
    cdef cnp.ndarray out, ain, bin_, zout
    if bc < 0 and cnp.PyArray_SIZE(a) == 1 and cnp.PyArray_SIZE(b) == 1:
        a = np.ascontiguousarray(a).reshape(shape)
        b = np.ascontiguousarray(b).reshape(shape)
        bc = LV_BC_NONE
    if bc >= 0:
        out = cnp.PyArray_EMPTY(len(shape), cnp.PyArray_DIMS(a) if bc != LV_BC_A else cnp.PyArray_DIMS(b),
                                num, 0)
        if cnp.PyArray_SIZE(out) < _NOGIL_MIN:
            _bin_run(k, num, cnp.PyArray_BYTES(out), cnp.PyArray_BYTES(a), cnp.PyArray_BYTES(b),
                     cnp.PyArray_SIZE(out), bc, isz)
        else:
            with nogil:
                _bin_par(k, num, cnp.PyArray_BYTES(out), cnp.PyArray_BYTES(a),
                         cnp.PyArray_BYTES(b), cnp.PyArray_SIZE(out), bc, isz)
        return out
    # Any other broadcast of C-contiguous operands: outer dims around rows (_bcast2d.pxi).
    # add, sub, mul, div, maximum, minimum run rows of any length in one C loop; the
    # other kernels a call per row, where rows are long enough to pay for it.
    cdef _Job2D j2
    if _plan2d(shape, (a, b), &j2):
        if code >= 0:
            j2.run, j2.op = _arith_rows2d, code
            return _go2d(&j2, shape, num)
        if j2.n >= _ROWS_MIN:
            j2.run, j2.aux, j2.op = _bin_rows2d, k, num
            return _go2d(&j2, shape, num)
    # Strided operands, short rows: contiguous pieces of _PIECE elements (NumPy's
    # buffered iterator), never a full copy of either operand.
    it = np.nditer([a, b, None], flags=["external_loop", "buffered", "zerosize_ok"],
                   op_flags=[["readonly", "contig"], ["readonly", "contig"],
                             ["writeonly", "allocate", "contig"]],
                   order="K", buffersize=_PIECE)
    with it:
        for ain, bin_, zout in it:
            with nogil:
                _bin_run(k, num, cnp.PyArray_BYTES(zout), cnp.PyArray_BYTES(ain),
                         cnp.PyArray_BYTES(bin_), cnp.PyArray_SIZE(zout), LV_BC_NONE, isz)
        return it.operands[2]


cdef tuple _bin_backward(const BinaryKernels *k, cnp.ndarray g, object xa, object xb, object y,
                         bint want_a, bint want_b):
    """The fused backward of kernel k: (grad_a, grad_b) in g's (the output's) shape,
    None where not wanted. xa / xb are the saved operands (arrays or Python
    scalars), y the saved output or None (read only by the ops that need it)."""
    cdef object dt = g.dtype
    cdef DType hdt
    if _is_half_num(cnp.PyArray_TYPE(g)):
        hdt = _dtype_of_array(g)
        ha, hb = _bin_backward(k, _half_to_f32(g), _f32(xa), _f32(xb),
                               None if y is None else _f32(y), want_a, want_b)
        return (None if ha is None else _f32_to_half(ha, hdt),
                None if hb is None else _f32_to_half(hb, hdt))
    cdef tuple shape = _shp(g)
    cdef cnp.ndarray a = np.require(xa, dt, "A"), b = np.require(xb, dt, "A")
    g = np.require(g, None, "CA")
    cdef cnp.ndarray yy = None if y is None else np.require(y, dt, "CA")
    cdef int bc = _bc_mode(a, b, shape)
    cdef _RowJob rj
    if bc < 0 and cnp.PyArray_SIZE(g) > 0 and _split_rows(a, b, shape, &rj.m, &rj.n, &rj.ka, &rj.kb):
        ga = np.empty(shape, dt) if want_a else None
        gb = np.empty(shape, dt) if want_b else None
        rj.k, rj.num, rj.isz = k, cnp.PyArray_TYPE(g), cnp.PyArray_ITEMSIZE(g)
        rj.ga = cnp.PyArray_BYTES(ga) if want_a else NULL
        rj.gb = cnp.PyArray_BYTES(gb) if want_b else NULL
        rj.g = cnp.PyArray_BYTES(g)
        rj.a, rj.b = cnp.PyArray_BYTES(a), cnp.PyArray_BYTES(b)
        rj.y = cnp.PyArray_BYTES(yy) if yy is not None else NULL
        tile = _row_tile(&rj, a, b)
        _rows_go(&rj)
        return (ga, gb)
    if bc < 0:       # general broadcasting: give each operand the output's shape
        a = np.ascontiguousarray(np.broadcast_to(a, shape))
        b = np.ascontiguousarray(np.broadcast_to(b, shape))
        bc = LV_BC_NONE
    ga = np.empty(shape, dt) if want_a else None
    gb = np.empty(shape, dt) if want_b else None
    cdef char *pa = cnp.PyArray_BYTES(ga) if want_a else NULL
    cdef char *pb = cnp.PyArray_BYTES(gb) if want_b else NULL
    cdef const char *py = cnp.PyArray_BYTES(yy) if yy is not None else NULL
    cdef Py_ssize_t n = cnp.PyArray_SIZE(g)
    with nogil:
        _bgrad_par(k, cnp.PyArray_TYPE(g), pa, pb, cnp.PyArray_BYTES(g),
                   cnp.PyArray_BYTES(a), cnp.PyArray_BYTES(b), py, n, bc, cnp.PyArray_ITEMSIZE(g))
    return (ga, gb)


# -- the backward of add, sub, mul, div, maximum, minimum over any broadcast -------------
# One C pass (lucid_bin_gradsum in src/lucid_binary.c) computes an operand's gradient and
# sums it over the dims that operand was broadcast along, so a broadcast operand's
# gradient, and the other operand broadcast to the output's shape, never exist at the
# output's size. The output's dims (size-1 dims dropped) are merged into groups of
# consecutive dims where each operand is either full or broadcast throughout. The last
# two groups are the kernel's m x n block: an operand's gradient is FULL there (kept in
# both), a ROW sum (summed over the m rows) or a COL sum (over each row's n columns). The
# groups before are outer dims, each kept by the operand (its gradient moves) or summed
# over (the block is added into the same gradient, in order). So every gradient element
# is summed in an order fixed by the shapes; threads take runs of kept outer indices, or
# of the block's kept rows / columns (at multiples of 64), never the summed dims.

cdef extern from *:
    """
    void lucid_bin_gradsumf(int, int, int, float *, const float *, const float *,
                            const float *, ptrdiff_t, ptrdiff_t, ptrdiff_t, const ptrdiff_t *);
    void lucid_bin_gradsum(int, int, int, double *, const double *, const double *,
                           const double *, ptrdiff_t, ptrdiff_t, ptrdiff_t, const ptrdiff_t *);
    """
    void lucid_bin_gradsumf(int, int, int, float *, const float *, const float *,
                            const float *, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                            const Py_ssize_t *) noexcept nogil
    void lucid_bin_gradsum(int, int, int, double *, const double *, const double *,
                           const double *, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                           const Py_ssize_t *) noexcept nogil

cdef enum:
    _RED_NONE = 0
    _RED_ROWS = 1
    _RED_COLS = 2
    _RED_ACC = 4
    _GS_MAX = 10           # groups a plan takes: the m x n block and 8 outer ones
    _GS_MAXIMUM = 4        # the kernel's op codes past LH_ADD..LH_DIV
    _GS_MINIMUM = 5


cdef struct _GSJob:
    int op, side, red, num
    bint by_cols           # the block is split at columns (else at rows)
    char *z
    const char *g
    const char *a
    const char *b
    Py_ssize_t m, n, isz
    Py_ssize_t st[4]
    int nk, nr             # the side's kept / summed outer groups
    Py_ssize_t ksh[_GS_MAX]
    Py_ssize_t kst[4 * _GS_MAX]        # element steps of g, a, b, z per kept group
    Py_ssize_t rsh[_GS_MAX]
    Py_ssize_t rst[3 * _GS_MAX]        # of g, a, b per summed group (z stays)
    Py_ssize_t kcount, rcount          # kept / summed outer indices
    Py_ssize_t kper, per, ninner       # kept indices per piece; block rows / columns per piece


cdef void _gs_piece(void *ctx, Py_ssize_t c) noexcept nogil:
    """Piece c: kept outer indices [k0, k1) times one run of the block's rows or columns;
    for each kept index, the block of every summed index in order (the first writes,
    the rest add)."""
    cdef _GSJob *j = <_GSJob *>ctx
    cdef Py_ssize_t ip = c % j.ninner, k0 = (c // j.ninner) * j.kper
    cdef Py_ssize_t k1 = k0 + j.kper if j.kcount - k0 > j.kper else j.kcount
    cdef Py_ssize_t s = ip * j.per, ko, ro, r, x, cnt, m, n, og, oa, ob, oz, rg, ra, rb
    cdef int q
    if j.by_cols:
        cnt = j.per if j.n - s > j.per else j.n - s
        m, n = j.m, cnt
        og, oa, ob, oz = s, s * j.st[1], s * j.st[3], s
    else:
        cnt = j.per if j.m - s > j.per else j.m - s
        m, n = cnt, j.n
        og, oa, ob = s * j.n, s * j.st[0], s * j.st[2]
        oz = s * j.n if j.red == _RED_NONE else s
    for ko in range(k0, k1):
        r = ko
        rg, ra, rb, x = og, oa, ob, oz
        q = j.nk - 1
        while q >= 0:
            rg += (r % j.ksh[q]) * j.kst[4 * q]
            ra += (r % j.ksh[q]) * j.kst[4 * q + 1]
            rb += (r % j.ksh[q]) * j.kst[4 * q + 2]
            x += (r % j.ksh[q]) * j.kst[4 * q + 3]
            r //= j.ksh[q]
            q -= 1
        for ro in range(j.rcount):
            _gs_block(j, ro, x, rg, ra, rb, m, n)


cdef inline void _gs_block(_GSJob *j, Py_ssize_t ro, Py_ssize_t oz, Py_ssize_t og,
                           Py_ssize_t oa, Py_ssize_t ob, Py_ssize_t m, Py_ssize_t n) noexcept nogil:
    """The block at summed outer index ro (element offsets of the kept index given)."""
    cdef Py_ssize_t r = ro
    cdef int q = j.nr - 1
    while q >= 0:
        og += (r % j.rsh[q]) * j.rst[3 * q]
        oa += (r % j.rsh[q]) * j.rst[3 * q + 1]
        ob += (r % j.rsh[q]) * j.rst[3 * q + 2]
        r //= j.rsh[q]
        q -= 1
    cdef int red = j.red | (_RED_ACC if ro > 0 else 0)
    if j.num == cnp.NPY_FLOAT:
        lucid_bin_gradsumf(j.op, j.side, red, <float *>j.z + oz, <const float *>j.g + og,
                           <const float *>j.a + oa if j.a != NULL else NULL,
                           <const float *>j.b + ob if j.b != NULL else NULL, m, n, j.n, j.st)
    else:
        lucid_bin_gradsum(j.op, j.side, red, <double *>j.z + oz, <const double *>j.g + og,
                          <const double *>j.a + oa if j.a != NULL else NULL,
                          <const double *>j.b + ob if j.b != NULL else NULL, m, n, j.n, j.st)


cdef void _gs_run(_GSJob *j) noexcept nogil:
    cdef Py_ssize_t slice_ = j.rcount * j.m * j.n, total = j.kcount * slice_, target, ln
    cdef int nt = _threads_for(total)
    j.by_cols = j.red == _RED_ROWS or (j.red == _RED_NONE and j.m == 1)
    ln = j.n if j.by_cols else j.m
    j.kper, j.per, j.ninner = j.kcount, ln, 1
    if nt > 1:
        target = _piece_len(total, nt)
        if slice_ <= target:           # whole kept slices per piece
            j.kper = target // slice_
        elif j.red != _RED_COLS or j.m > 1:     # one slice, a run of the block per piece
            j.kper = 1
            j.per = (ln * target + slice_ - 1) // slice_
            if j.by_cols:              # whole multiples of 64 columns
                j.per = (j.per + 63) // 64 * 64
            j.ninner = (ln + j.per - 1) // j.per
        else:
            j.kper = 1
    cdef Py_ssize_t pieces = (j.kcount + j.kper - 1) // j.kper * j.ninner, c
    if nt <= 1 or pieces <= 1:
        for c in range(pieces):
            _gs_piece(j, c)
        return
    _parallel_for(_gs_piece, j, pieces, nt)


cdef object _ag_operand(object x, int num):
    """A saved operand as an aligned ndarray of type num (a Python number becomes a 0-d
    array; NumPy's arithmetic rounds it to g's dtype the same way), or None."""
    cdef cnp.ndarray r = np.asarray(x) if isinstance(x, np.ndarray) else \
        np.asarray(x, np.float32 if num == cnp.NPY_FLOAT else np.float64)
    if cnp.PyArray_TYPE(r) != num or not cnp.PyArray_IS_C_CONTIGUOUS(r) or \
            not cnp.PyArray_ISALIGNED(r):
        return None
    return r


cdef object _arith_backward(int op, cnp.ndarray g, object xa, object xb, tuple shape_a,
                            tuple shape_b, bint want_a, bint want_b):
    """(grad_a, grad_b) of add / sub / mul / div / maximum / minimum (op: LH_ADD..LH_DIV,
    _GS_MAXIMUM, _GS_MINIMUM), already summed to each operand's shape (in g's dtype), or
    None where this layout or dtype is not handled (the caller then runs its other
    route)."""
    cdef int num = cnp.PyArray_TYPE(g)
    if (num != cnp.NPY_FLOAT and num != cnp.NPY_DOUBLE) or cnp.PyArray_SIZE(g) == 0 or \
            not cnp.PyArray_IS_C_CONTIGUOUS(g) or not cnp.PyArray_ISALIGNED(g):
        return None
    cdef bint need_a = (want_b and op >= LH_MUL) or (want_a and op >= _GS_MAXIMUM)
    cdef bint need_b = (want_a and op >= LH_MUL) or (want_b and (op == LH_DIV or op >= _GS_MAXIMUM))
    cdef object a = _ag_operand(xa, num) if need_a else None
    cdef object b = _ag_operand(xb, num) if need_b else None
    if (need_a and a is None) or (need_b and b is None):
        return None
    cdef tuple shape = _shp(g)
    cdef int d = len(shape), la = len(shape_a), lb = len(shape_b), q, k, L = 0, side, bit, cls
    cdef Py_ssize_t G[_GS_MAX]
    cdef int C[_GS_MAX]                # per group: bit 1 a is full there, bit 2 b is
    cdef Py_ssize_t gs[_GS_MAX]
    cdef Py_ssize_t xs[3 * _GS_MAX]    # element steps of a, b (0: broadcast) per group
    cdef Py_ssize_t sd, xa_d, xb_d
    if la > d or lb > d:
        return None
    for q in range(d):
        sd = shape[q]
        if sd == 1:
            continue
        xa_d = shape_a[q - d + la] if q >= d - la else 1
        xb_d = shape_b[q - d + lb] if q >= d - lb else 1
        cls = (1 if xa_d == sd else 0) | (2 if xb_d == sd else 0)
        if L > 0 and C[L - 1] == cls:
            G[L - 1] *= sd
        elif L == _GS_MAX:
            return None
        else:
            G[L], C[L] = sd, cls
            L += 1
    if L == 0:                          # one element
        G[0], C[0], L = 1, 3, 1
    cdef Py_ssize_t ps = 1, pa = 1, pb = 1
    for k in range(L - 1, -1, -1):      # C-contiguous steps of g, a, b over the groups
        gs[k] = ps
        xs[2 * k] = pa if C[k] & 1 else 0
        xs[2 * k + 1] = pb if C[k] & 2 else 0
        ps *= G[k]
        pa *= G[k] if C[k] & 1 else 1
        pb *= G[k] if C[k] & 2 else 1
    cdef _GSJob j
    cdef int cm = C[L - 2] if L >= 2 else 3, cn = C[L - 1], nout = L - 2 if L >= 2 else 0
    j.m, j.n = (G[L - 2] if L >= 2 else 1), G[L - 1]
    j.st[0] = xs[2 * (L - 2)] if L >= 2 else 0
    j.st[1] = 1 if cn & 1 else 0
    j.st[2] = xs[2 * (L - 2) + 1] if L >= 2 else 0
    j.st[3] = 1 if cn & 2 else 0
    if not need_a:
        j.st[0] = j.st[1] = 0
    if not need_b:
        j.st[2] = j.st[3] = 0
    j.op, j.num, j.isz = op, num, cnp.PyArray_ITEMSIZE(g)
    j.g = cnp.PyArray_BYTES(g)
    j.a = cnp.PyArray_BYTES(<cnp.ndarray>a) if need_a else NULL
    j.b = cnp.PyArray_BYTES(<cnp.ndarray>b) if need_b else NULL
    grads = [None, None]
    cdef cnp.ndarray z
    for side in range(2):
        if not (want_a if side == 0 else want_b):
            continue
        if (op == LH_ADD or (op == LH_SUB and side == 0)) and \
                (shape_a if side == 0 else shape_b) == shape:
            grads[side] = g             # g itself: nothing to compute or sum (a leaf
            continue                    # may then take it without a copy)
        bit = 1 << side
        j.side = side
        if cn & bit:
            j.red = _RED_NONE if cm & bit else _RED_ROWS
        elif cm & bit:
            j.red = _RED_COLS
        else:
            return None                 # (merged groups never leave this)
        j.nk = j.nr = 0
        j.kcount = j.rcount = 1
        for k in range(nout):
            if C[k] & bit:
                j.ksh[j.nk] = G[k]
                j.kst[4 * j.nk] = gs[k]
                j.kst[4 * j.nk + 1] = xs[2 * k] if need_a else 0
                j.kst[4 * j.nk + 2] = xs[2 * k + 1] if need_b else 0
                j.kst[4 * j.nk + 3] = xs[2 * k + side]
                j.kcount *= G[k]
                j.nk += 1
            else:
                j.rsh[j.nr] = G[k]
                j.rst[3 * j.nr] = gs[k]
                j.rst[3 * j.nr + 1] = xs[2 * k] if need_a else 0
                j.rst[3 * j.nr + 2] = xs[2 * k + 1] if need_b else 0
                j.rcount *= G[k]
                j.nr += 1
        z = np.empty(shape_a if side == 0 else shape_b, g.dtype)
        j.z = cnp.PyArray_BYTES(z)
        if j.kcount * j.rcount * j.m * j.n < _NOGIL_MIN:
            _gs_run(&j)
        else:
            with nogil:
                _gs_run(&j)
        grads[side] = z
    return tuple(grads)


# -- the kernels and nodes the generated rows use ------------------------------------

cdef enum:
    _READS_A = 1
    _READS_B = 2
    _READS_OUT = 4


cdef enum:
    _PLAIN = 0          # NumPy's ufunc as it is (add, sub, mul)
    _IEEE = 1           # x/0, (-1)**0.5, ...: IEEE results (inf, nan), not warnings, as PyTorch
    _INT_DIVISION = 2   # fmod, remainder: integer division by zero raises
    _POW = 3            # pow: IEEE for floats, PyTorch's rule for integer negative powers


cdef class BinaryCPU(Kernel):
    """A binary row's CPU forward: lucid's C kernel for float32/float64 (float16 through
    float32) when the row has one, else the NumPy ufunc."""
    cdef object ufunc
    cdef const BinaryKernels *k
    cdef int reads_a, reads_b          # what grad_a / grad_b read: _READS_* bits
    cdef int kind
    cdef bint bool_sub
    cdef bint array_formula            # the row's formula is plain arithmetic (see _eager)
    cdef str name
    cdef int half_op                   # LH_ADD.. for lucid_half_binary, -1: none
    cdef const BinaryKernels *fwd      # add, sub, mul, div: lucid's forward for floats
    cdef int gsum_op                   # the summing backward's op (_arith_backward), -1: none

    cdef object run2(self, object a, object b, DType dt, object params):
        if _is_half_code(dt.code):
            return self._run_half(a, b, dt, params)
        if self.k != NULL and dt.is_floating_point:
            return _bin_forward(self.k, a, b, self.gsum_op)
        if self.fwd != NULL and dt.is_floating_point and (params is None or (
                type(params) is int and params == 1)) and _has_num(a, dt.typenum) \
                and _has_num(b, dt.typenum):
            return _bin_forward(self.fwd, a, b, self.gsum_op)
        if params is not None and (isinstance(params, Tensor) or not _is_scalar(params)):
            raise TypeError(f"{self.name}(): alpha must be a number, got {type(params).__name__}")
        if params is not None and params != 1:          # add / sub's alpha
            if not dt.is_floating_point and not isinstance(params, (int, np.integer)):
                raise TypeError(
                    f"{self.name}(): for integral input tensors, argument alpha must not be a "
                    f"floating point number, got alpha={params!r}")
            b = b * dt.numpy_dtype.type(params)
        if self.kind == _PLAIN:
            if self.bool_sub and dt is bool_:
                raise UnsupportedDTypeError("subtraction of two bool tensors is not supported; "
                                            "use logical_xor or ~")
            return self.ufunc(a, b)
        if self.kind == _INT_DIVISION and not dt.is_floating_point and np.any(np.asarray(b) == 0) \
                and _bsize(a, b) != 0:       # an empty result divides nothing, as PyTorch
            raise ZeroDivisionError(f"integer division by zero in {self.name}")
        if self.kind == _POW and not dt.is_floating_point and dt is not bool_:
            return _int_pow(a, b, dt)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return self.ufunc(a, b)


    cdef object _run_half(self, object a, object b, DType dt, object params,
                          cnp.ndarray out=None):
        """float16 / bfloat16 operands (arrays or NumPy scalars of dt): computed in
        float32 and rounded once. add, sub, mul and div of contiguous operands (or one
        single value) run fused (lucid_half_binary), into ``out`` when given (then the
        result is None if that path does not apply); the rest widen both operands, run
        the float32 kernel and round its result."""
        cdef cnp.ndarray xa = a if type(a) is np.ndarray else np.asarray(a)
        cdef cnp.ndarray xb = b if type(b) is np.ndarray else np.asarray(b)
        cdef tuple shape
        cdef int bc
        cdef _HalfJob j
        cdef bint fa = cnp.PyArray_TYPE(xa) == cnp.NPY_FLOAT, fb = cnp.PyArray_TYPE(xb) == cnp.NPY_FLOAT
        cdef cnp.ndarray x
        j.kind = LH_F16 if dt.typenum == cnp.NPY_FLOAT16 else LH_BF16
        j.op = self.half_op
        if fa != fb:          # a half tensor and a float32 scalar (dispatch_binary's rule)
            x = xb if fa else xa
            if (self.half_op >= 0 and (params is None or params == 1)
                    and cnp.PyArray_IS_C_CONTIGUOUS(x) and cnp.PyArray_ISALIGNED(x)
                    and cnp.PyArray_SIZE(xa if fa else xb) == 1
                    and cnp.PyArray_NDIM(xa if fa else xb) == 0):
                if out is None:
                    out = _empty_like_arr(x, dt.typenum)
                j.scalar, j.s_first, j.s = True, fa, (xa if fa else xb).item()
                j.z = <unsigned short *>cnp.PyArray_DATA(out)
                j.a = j.b = <const unsigned short *>cnp.PyArray_DATA(x)
                j.n = cnp.PyArray_SIZE(out)
                _half_go(&j)
                return out
        elif self.half_op >= 0 and (params is None or params == 1) \
                and cnp.PyArray_ISALIGNED(xa) and cnp.PyArray_ISALIGNED(xb):
            try:
                shape = _bshape(xa, xb)
            except ValueError as e:
                raise ShapeError(f"shapes {_shp(xa)} and {_shp(xb)} do not broadcast: {e}") from None
            bc = _bc_mode(xa, xb, shape)
            if bc >= 0:
                if out is None:
                    out = cnp.PyArray_EMPTY(len(shape), cnp.PyArray_DIMS(xa) if bc != LV_BC_A
                                            else cnp.PyArray_DIMS(xb), dt.typenum, 0)
                j.scalar, j.sa, j.sb = False, bc != LV_BC_A, bc != LV_BC_B
                j.z = <unsigned short *>cnp.PyArray_DATA(out)
                j.a = <const unsigned short *>cnp.PyArray_DATA(xa)
                j.b = <const unsigned short *>cnp.PyArray_DATA(xb)
                j.n = cnp.PyArray_SIZE(out)
                _half_go(&j)
                return out
        if out is not None:
            return None
        r = self.run2(_half_to_f32(xa), _half_to_f32(xb), float32, params)
        return _f32_to_half(_as_ndarray(r), dt)


cdef inline bint _has_num(object x, int num):
    """Is x an ndarray or a NumPy scalar of type number num?"""
    if type(x) is np.ndarray:
        return cnp.PyArray_TYPE(<cnp.ndarray>x) == num
    return isinstance(x, np.generic) and (<cnp.dtype>x.dtype).type_num == num


cdef Py_ssize_t _bsize(object a, object b) except -1:
    """The number of elements of a and b broadcast together."""
    cdef Py_ssize_t n = 1
    for d in np.broadcast_shapes(np.shape(a), np.shape(b)):
        n *= d
    return n


cdef object _int_pow(object a, object b, DType dt):
    """Integer a ** b as PyTorch: a Python scalar exponent below zero raises (whatever
    the tensor holds); a tensor exponent's negative entries give 1 for a base of 1,
    +-1 for -1 (by the exponent's parity) and 0 otherwise (1 / a truncated)."""
    if isinstance(b, np.generic):
        if b < 0:
            raise LucidError(f"pow(): integers to negative integer powers are not allowed "
                             f"(exponent {int(b)} with an integer {dt} base); use a "
                             f"floating point base or exponent")
        return np.power(a, b)
    neg = np.asarray(b) < 0
    if not neg.any():
        return np.power(a, b)
    r = np.power(a, np.where(neg, 0, b).astype(dt.numpy_dtype, copy=False))
    one = np.asarray(a) == 1
    minus_one = np.asarray(a) == -1
    odd = (np.asarray(b) % 2) != 0
    fix = np.where(one, 1, np.where(minus_one, np.where(odd, -1, 1), 0))
    return np.where(neg, fix, r).astype(dt.numpy_dtype, copy=False)


cdef BinaryCPU _binary_kernel(OpSchema s, object ufunc, const BinaryKernels *k, int reads_a,
                              int reads_b, bint array_formula):
    cdef BinaryCPU c = BinaryCPU.__new__(BinaryCPU)
    c.half_native = True
    c.half_op = (LH_ADD if ufunc is np.add else LH_SUB if ufunc is np.subtract else
                 LH_MUL if ufunc is np.multiply else LH_DIV if ufunc is np.true_divide else -1)
    c.array_formula = array_formula
    c.gsum_op = (c.half_op if c.half_op >= 0 else _GS_MAXIMUM if ufunc is np.maximum else
                 _GS_MINIMUM if ufunc is np.minimum else -1)
    c.fwd = (&_K_ARITH_ADD if ufunc is np.add else &_K_ARITH_SUB if ufunc is np.subtract else
             &_K_ARITH_MUL if ufunc is np.multiply else &_K_ARITH_DIV if ufunc is np.true_divide
             else NULL)
    c.ufunc = ufunc
    c.k = k
    c.reads_a = reads_a
    c.reads_b = reads_b
    c.name = s.name
    c.kind = (_PLAIN if ufunc in (np.add, np.subtract, np.multiply) else
              _INT_DIVISION if ufunc in (np.fmod, np.remainder) else
              _POW if ufunc is np.power else _IEEE)
    c.bool_sub = ufunc is np.subtract
    return c


cdef class BinaryBackward(Node):
    """Shared part of the binary nodes: each operand as a saved tensor or a Python
    scalar, the inputs' shapes and dtypes (the gradient is summed back over broadcast
    dims and cast to each input's dtype), and the op's parameter ``p``.

    A node saves what the formulas of the wanted gradients read (``mul`` keeps b only
    if a needs a gradient); a row with a fused kernel keeps both operands, which the
    kernel reads."""
    cdef tuple _shape_a, _shape_b
    cdef DType _dt_a, _dt_b
    cdef SavedTensor _saved_a, _saved_b, _saved_out
    cdef object _scalar_a, _scalar_b
    cdef readonly object _param
    cdef const BinaryKernels *_k
    cdef bint _array_formula
    cdef int _arith                    # the summing C backward's op (_arith_backward), or -1

    cdef void _setup(self, OpSchema s, tuple inputs, Tensor out, object params) except *:
        cdef BinaryCPU cpu = <BinaryCPU>s.cpu
        cdef int reads = (cpu.reads_a if self._wants(0) else 0) | (cpu.reads_b if self._wants(1) else 0)
        if cpu.k != NULL and out._dtype.is_floating_point:
            self._k = cpu.k
            reads |= _READS_A | _READS_B
        self._array_formula = cpu.array_formula
        self._arith = cpu.gsum_op
        a, b = inputs
        if isinstance(a, Tensor):
            self._shape_a = _shp((<Tensor>a)._data)
            self._dt_a = (<Tensor>a)._dtype
            if reads & _READS_A:
                self._saved_a = _save(<Tensor>a, False)
        else:
            self._scalar_a = a
        if isinstance(b, Tensor):
            self._shape_b = _shp((<Tensor>b)._data)
            self._dt_b = (<Tensor>b)._dtype
            if reads & _READS_B:
                self._saved_b = _save(<Tensor>b, False)
        else:
            self._scalar_b = b
        if reads & _READS_OUT:
            self._saved_out = _save(out, True)
        self._param = params

    cdef list _saved_list(self):
        return [s for s in (self._saved_a, self._saved_b, self._saved_out) if s is not None]

    cdef void _release(self):
        self._released = True
        if self._saved_a is not None:
            self._saved_a.release()
        if self._saved_b is not None:
            self._saved_b.release()
        if self._saved_out is not None:
            self._saved_out.release()

    cdef inline bint _wants(self, int side):
        return self._next[side][0] is not None

    cdef bint _summed(self, cnp.ndarray g):
        """Is a wanted gradient summed over broadcast dims (an operand smaller than g)?"""
        return (self._wants(0) and self._shape_a != _shp(g)) or \
            (self._wants(1) and self._shape_b != _shp(g))

    cdef object _arr(self, int side):
        s = self._saved_a if side == 0 else self._saved_b
        if s is not None:
            return (<SavedTensor>s).data(self)
        return self._scalar_a if side == 0 else self._scalar_b

    cdef object _ten(self, int side):
        s = self._saved_a if side == 0 else self._saved_b
        if s is not None:
            return (<SavedTensor>s).unpack(self)
        return self._scalar_a if side == 0 else self._scalar_b

    cdef tuple _formula_of(self, Tensor g, object a, object b, object out):
        raise NotImplementedError(type(self).__name__)

    cdef tuple _array_formula_of(self, cnp.ndarray g, object a, object b, object out):
        raise NotImplementedError(type(self).__name__)

    cdef tuple _formula(self, Tensor g):
        out = self._saved_out.unpack(self) if self._saved_out is not None else None
        return self._formula_of(g, self._ten(0), self._ten(1), out)

    cdef tuple _eager(self, cnp.ndarray g):
        # add, sub, mul, div (alpha 1), and maximum / minimum where an operand was
        # broadcast: one pass per gradient, summed as it goes (a fused kernel does both
        # gradients of unbroadcast operands in one pass, so it keeps those)
        if self._arith >= 0 and (self._param is None or (type(self._param) is int and
                                                         self._param == 1)) \
                and (self._k == NULL or self._summed(g)):
            r = _arith_backward(self._arith, g, self._arr(0), self._arr(1),
                                self._shape_a if self._shape_a is not None else (),
                                self._shape_b if self._shape_b is not None else (),
                                self._wants(0), self._wants(1))
            if r is not None:
                ga, gb = r
                return (None if ga is None else _store(ga, self._dt_a),
                        None if gb is None else _store(gb, self._dt_b))
        if self._k != NULL:
            ga, gb = _bin_backward(self._k, g, self._arr(0), self._arr(1),
                                   self._saved_out.data(self) if self._saved_out is not None else None,
                                   self._wants(0), self._wants(1))
        elif self._array_formula:
            ga, gb = self._array_formula_of(
                g, self._arr(0), self._arr(1),
                self._saved_out.data(self) if self._saved_out is not None else None)
        else:
            ga, gb = self._formula(_wrap(g, _dtype_of_array(g)))
            ga = (<Tensor>ga)._data if isinstance(ga, Tensor) else ga
            gb = (<Tensor>gb)._data if isinstance(gb, Tensor) else gb
        if ga is not None:
            ga = _store(_sum_to(_as_ndarray(ga), self._shape_a), self._dt_a)
        if gb is not None:
            gb = _store(_sum_to(_as_ndarray(gb), self._shape_b), self._dt_b)
        return (ga, gb)

    cdef tuple _graph(self, Tensor g):
        ga, gb = self._formula(g)
        if ga is not None:
            ga = to_dtype(_sum_to_t(_as_tensor_dev(ga), self._shape_a), self._dt_a, False)
        if gb is not None:
            gb = to_dtype(_sum_to_t(_as_tensor_dev(gb), self._shape_b), self._dt_b, False)
        return (ga, gb)

    @property
    def _saved_self(self):
        return self._ten(0)

    @property
    def _saved_other(self):
        return self._ten(1)


def _pow_grad_a(g, a, b):
    """d(a ** b)/da = b a^(b-1), and 0 where b == 0 (so 0 ** 0 has gradient 0)."""
    if isinstance(b, Tensor):
        return ops.where(b == 0, 0.0, g * b * a ** (b - 1))
    if b == 0:
        return g * 0
    return g * b * a ** (b - 1)


def _pow_grad_b(g, a, b, out):
    """d(a ** b)/db = a^b log(a), and 0 where a == 0 and b >= 0 (the limit, not nan)."""
    if not isinstance(a, Tensor):
        a = ops.full_like(b, a)
    zero = (a == 0) & (b >= 0)
    safe_a = ops.where(zero, 1.0, a)          # log(1) = 0 where masked; the graph stays intact
    return ops.where(zero, 0.0, g * out * ops.log(safe_a))


include "_binary.pxi"


# -- neg ----------------------------------------------------------------------------

cdef OpSchema _S_neg = register("neg", "Promote", 1)


cdef class NegCPU(Kernel):
    cdef object run1(self, cnp.ndarray x, object params):
        if cnp.PyArray_TYPE(x) == cnp.NPY_BOOL:
            raise UnsupportedDTypeError("negation of a bool tensor is not supported; use ~ instead")
        return _neg_array(x)


_S_neg.cpu = NegCPU.__new__(NegCPU)


cdef class NegBackward(Node):
    """Backward of neg: -g."""
    schema_v1 = _S_neg

    def grad_formula_impl(self, g):
        return -g


_S_neg._bind(NegBackward)


cdef cnp.ndarray _neg_array(cnp.ndarray x):
    """-x: lucid's kernel for contiguous float32/64, NumPy otherwise."""
    cdef int num = cnp.PyArray_TYPE(x)
    cdef Py_ssize_t n = cnp.PyArray_SIZE(x)
    cdef int m
    cdef cnp.ndarray y
    if not ((num == cnp.NPY_FLOAT or num == cnp.NPY_DOUBLE) and cnp.PyArray_IS_C_CONTIGUOUS(x)
            and cnp.PyArray_ISALIGNED(x) and n < _CHUNK):
        return _as_ndarray(np.negative(x))
    y = _empty_like_arr(x, num)
    m = <int>n
    with nogil:
        if num == cnp.NPY_FLOAT:
            lucid_vnegf(<float *>cnp.PyArray_DATA(y), <const float *>cnp.PyArray_DATA(x), &m)
        else:
            lucid_vneg(<double *>cnp.PyArray_DATA(y), <const double *>cnp.PyArray_DATA(x), &m)
    return y


def neg(input):
    """-input."""
    return dispatch_unary(_S_neg, input, None)


export(neg, method=True)


# -- in-place arithmetic ------------------------------------------------------------------

cdef enum:
    _IP_ADD = 0
    _IP_SUB = 1
    _IP_MUL = 2
    _IP_DIV = 3
    _IP_FILL = 4


cdef OpSchema _S_fill = register("fill_", "KeepInput", 1)


cdef class FillBackward(Node):
    """Backward of fill_/zero_ on a tensor with history: the old values get no gradient."""
    schema_v1 = _S_fill

    def grad_formula_impl(self, g):
        return None


_S_fill._bind(FillBackward)
cdef object _inplace(Tensor self, object other, int op):
    """``self op= other``: writes into self's memory and bumps its version counter."""
    cdef bint recording = grad_enabled() and (
        self._requires_grad or (isinstance(other, Tensor) and (<Tensor>other)._requires_grad))
    cdef bint gpu = self._mx is not None
    if recording and self._requires_grad and self._grad_fn is None:
        raise LucidError(
            "a leaf tensor that requires grad is being used in an in-place operation; "
            "wrap it in `with lucid.no_grad():` (e.g. for an optimizer step)")
    if gpu and _is_view(self):
        # MLX arrays are immutable: a gpu view holds a copy, so a write through it could
        # never reach its base.
        raise LucidError(
            "in-place operation on a view of a gpu tensor (e.g. x[0], x.T, x.reshape(...)) "
            "is not supported: on the gpu device a view holds a copy (MLX arrays are "
            "immutable), so the write could not reach the base tensor. Write through the "
            "base (x[0] = ...), or clone() the view first")
    if recording and self._grad_fn is not None and _is_view(self):
        raise LucidError(
            "in-place operation on a view (e.g. x[0], x.T) of a tensor with autograd history "
            "is not supported: lucid can't carry the gradient through the base. Use out-of-place "
            "ops, or write through the base with index assignment (x[0] = ...)")
    if not recording and not gpu and op != _IP_FILL and _is_half_code(self._dtype.code) \
            and _half_inplace(self, other, op):
        self._bump()
        return self
    cdef Tensor res
    cdef Tensor src
    cdef FillBackward fnode
    if op == _IP_FILL:
        if isinstance(other, Tensor):
            if cnp.PyArray_SIZE((<Tensor>other)._data) != 1:
                raise ShapeError("fill_ takes a Python scalar or a one-element tensor")
            other = (<Tensor>other).item()
        if not _is_scalar(other):
            raise TypeError(f"fill_(): value must be a number, got {type(other).__name__}")
        if not self._dtype.is_floating_point and isinstance(other, (float, np.floating)) and (
                np.isfinite(other) and other != int(other)):
            raise UnsupportedDTypeError(f"fill_(): value {other!r} is not an integer, so it "
                                        f"cannot fill a {self._dtype} tensor")
        from lucid._core.creation import _fill_value
        other = _fill_value(other, self._dtype, "fill_", "value")
        if gpu:            # MLX arrays are immutable: self gets a new one
            self._mx = mlx().full(_shp(self._data),
                                  np.array(other).astype(self._dtype.numpy_dtype).item(),
                                  dtype=mx_dtype(self._dtype))
        elif not cnp.PyArray_ISWRITEABLE(self._data):
            raise LucidError("this tensor's memory is read-only (e.g. a broadcast view); clone() it first")
        else:
            self._data.fill(other)
        self._bump()
        if recording:      # under no_grad a write is invisible to autograd, as in PyTorch
            _invalidate_views(self, self._data)
        if recording and self._requires_grad:
            fnode = FillBackward.__new__(FillBackward)
            fnode._next = (_edge(self),)
            _set_history(self, fnode)
        return self
    if recording:
        # The node must see the old value of self (mul/div save it), not the one we
        # are about to write: give it a snapshot carrying self's history.
        if gpu:        # an MLX array never changes: the snapshot shares it
            src = _wrap_mx(self._mx, self._dtype)
        else:
            src = _wrap(self._data.copy() if op >= _IP_MUL else self._data, self._dtype)
        src._grad_fn = self._grad_fn
        src._output_nr = self._output_nr
        src._requires_grad = self._requires_grad
    else:
        src = self
    res = dispatch_binary(_IP_SCHEMAS[op], src, other, 1 if op <= _IP_SUB else None)
    if _shp(res._data) != _shp(self._data):
        raise ShapeError(
            f"output with shape {_shp(self._data)} doesn't match the broadcast shape "
            f"{_shp(res._data)}")
    if res._dtype is not self._dtype and not (
            self._dtype.is_floating_point or not res._dtype.is_floating_point) :
        raise UnsupportedDTypeError(
            f"result type {res._dtype} can't be cast to the desired output type {self._dtype}")
    if res._dtype.is_floating_point is False and res._dtype.code > self._dtype.code and self._dtype is bool_:
        raise UnsupportedDTypeError(
            f"result type {res._dtype} can't be cast to the desired output type {self._dtype}")
    if gpu:
        mdt = mx_dtype(self._dtype)
        self._mx = res._mx if res._mx.dtype == mdt else res._mx.astype(mdt)
    elif not cnp.PyArray_ISWRITEABLE(self._data):
        raise LucidError("this tensor's memory is read-only (e.g. a NumPy array marked "
                         "non-writeable or a broadcast view); clone() it first")
    elif (_is_half_code(self._dtype.code) and res._dtype is float32
          and cnp.PyArray_IS_C_CONTIGUOUS(self._data) and cnp.PyArray_ISALIGNED(self._data)):
        # (half += float32: the float32 result rounded once, straight into self)
        _round_into(self._data, res._data)
    else:
        np.copyto(self._data, res._data, casting="unsafe")
    self._bump()
    if recording:          # under no_grad a write is invisible to autograd, as in PyTorch
        _invalidate_views(self, self._data)
    if recording:
        self._grad_fn = res._grad_fn
        self._output_nr = 0
        self._requires_grad = True
    return self


cdef tuple _IP_SCHEMAS = (_S_add, _S_sub, _S_mul, _S_div)


cdef bint _half_inplace(Tensor self, object other, int op) except -1:
    """``self op= other`` without autograd, for a cpu float16 / bfloat16 ``self`` and a
    Python number or a cpu tensor of self's dtype: the fused half kernel writes straight
    into self's memory (no result array, no copy). False when that does not apply (the
    general path then runs, and raises what it raises)."""
    cdef cnp.ndarray d = self._data, o
    cdef DType dt = self._dtype
    cdef Tensor t
    cdef char *pa
    cdef char *pd
    if not (cnp.PyArray_IS_C_CONTIGUOUS(d) and cnp.PyArray_ISALIGNED(d)
            and cnp.PyArray_ISWRITEABLE(d)):
        return False
    if isinstance(other, Tensor):
        t = <Tensor>other
        o = t._data
        if t._dtype is not dt or t._mx is not None or cnp.PyArray_TYPE(o) != dt.typenum \
                or cnp.PyArray_NDIM(o) > cnp.PyArray_NDIM(d):
            return False
        if not cnp.PyArray_IS_C_CONTIGUOUS(o) or (cnp.PyArray_SIZE(o) != 1
                                                  and _shp(o) != _shp(d)):
            return False
        # other may be self (x += x) but not overlap it otherwise: the kernel reads each
        # element of other only where it writes the same element of self. Both are
        # contiguous, so their bytes are two intervals.
        pa, pd = cnp.PyArray_BYTES(o), cnp.PyArray_BYTES(d)
        if pa != pd and pa < pd + cnp.PyArray_NBYTES(d) and pd < pa + cnp.PyArray_NBYTES(o):
            return False
        if pa == pd and cnp.PyArray_SIZE(o) != cnp.PyArray_SIZE(d):
            return False
    elif type(other) is float or type(other) is int:
        # as dispatch_binary: the number takes the half dtype first, then float32 math
        try:
            o = np.asarray(_half_scalar(dt, other), np.float32)
        except OverflowError:           # an int beyond float64
            return False
    else:
        return False
    cdef BinaryCPU k = <BinaryCPU>(<OpSchema>_IP_SCHEMAS[op]).cpu
    return k._run_half(d, o, dt, None, d) is not None


cdef void _round_into(cnp.ndarray dst, cnp.ndarray src) except *:
    """dst (a C-contiguous float16 / bfloat16 array) = src (float32, dst's shape) rounded."""
    src = np.require(src, np.float32, "CA")
    cdef Py_ssize_t n = cnp.PyArray_SIZE(dst)
    cdef int kind = LH_F16 if cnp.PyArray_TYPE(dst) == cnp.NPY_FLOAT16 else LH_BF16
    with nogil:
        lucid_f32_to_half(kind, <unsigned short *>cnp.PyArray_DATA(dst),
                          <const float *>cnp.PyArray_DATA(src), n)


cdef Tensor _self_tensor(object self, str op):
    """The tensor an in-place op writes into (these are also unbound Tensor methods, so
    ``self`` can be anything)."""
    if not isinstance(self, Tensor):
        raise TypeError(f"{op}(): self must be a lucid Tensor (it is modified in place), "
                        f"got {type(self).__name__}")
    _check_storage(<Tensor>self, f"{op}()'s self")
    return <Tensor>self


cdef object _check_alpha(object alpha, str op):
    if isinstance(alpha, Tensor) or not _is_scalar(alpha):
        raise TypeError(f"{op}(): alpha must be a number, got {type(alpha).__name__}")
    return alpha


def add_(self, other, *, alpha=1):
    """self += alpha * other, in place."""
    cdef Tensor t = _self_tensor(self, "add_")
    if _check_alpha(alpha, "add_") != 1:
        other = ops.mul(other, alpha) if isinstance(other, Tensor) else other * alpha
    return _inplace(t, other, _IP_ADD)


def sub_(self, other, *, alpha=1):
    """self -= alpha * other, in place."""
    cdef Tensor t = _self_tensor(self, "sub_")
    if _check_alpha(alpha, "sub_") != 1:
        other = ops.mul(other, alpha) if isinstance(other, Tensor) else other * alpha
    return _inplace(t, other, _IP_SUB)


def mul_(self, other):
    """self *= other, in place."""
    return _inplace(_self_tensor(self, "mul_"), other, _IP_MUL)


def div_(self, other):
    """self /= other, in place."""
    return _inplace(_self_tensor(self, "div_"), other, _IP_DIV)


def zero_(self):
    """Fill self with zeros, in place."""
    return _inplace(_self_tensor(self, "zero_"), 0, _IP_FILL)


def fill_(self, value):
    """Fill self with value, in place."""
    return _inplace(_self_tensor(self, "fill_"), value, _IP_FILL)


for _fn in (add_, sub_, mul_, div_, zero_, fill_):
    export(_fn, public=False, method=True)
