# The 2-D broadcast plan and driver of the select kernels (src/lucid_compare.c),
# included by compare.pyx (comparisons, where) and unary.pyx (clamp).
#
# An output of `shape` is split at a dim k into m rows (the dims before k) and n
# columns (the rest). Each operand must then be FULL (m x n), a ROW (n values for
# every row), a COL (one value per row) or ONE value, read through a row step and a
# column step: every NumPy broadcast of a row, a column or a scalar onto a
# C-contiguous operand, and the outer broadcast (m, 1) x (1, n). Any other layout
# (a strided operand, (n, 1, k) with (1, m, 1)) returns False and the caller runs
# NumPy. Threads take whole rows (or, for one row, runs of columns); every element
# is computed alone, so the split never changes a result.

ctypedef void (*_run2d_fn)(void *job, char *z, const char **p, Py_ssize_t m,
                           Py_ssize_t n) noexcept nogil

cdef struct _Job2D:
    _run2d_fn run
    int op, nops
    Py_ssize_t m, n, per
    Py_ssize_t zsz
    Py_ssize_t st[6]
    Py_ssize_t isz[3]
    char *z
    const char *p[3]


cdef enum:
    _NOGIL_2D = 8192       # below this many elements releasing the GIL costs more


cdef bint _plan2d(tuple shape, tuple arrs, _Job2D *j) except -1:
    """Fill j's m, n and steps for `arrs` (C-contiguous, aligned ndarrays) read into an
    output of `shape`; False if no split works."""
    cdef int d = len(shape), k, t, q, off, nd
    cdef Py_ssize_t m, n, xd, sd
    cdef bint lo, lf, ro, rf, ok
    cdef cnp.ndarray x
    j.nops = len(arrs)
    for t in range(j.nops):
        x = <cnp.ndarray>arrs[t]
        if not (cnp.PyArray_IS_C_CONTIGUOUS(x) and cnp.PyArray_ISALIGNED(x)) or \
                cnp.PyArray_NDIM(x) > d:
            return False
        j.p[t] = cnp.PyArray_BYTES(x)
        j.isz[t] = cnp.PyArray_ITEMSIZE(x)
    for k in range(d + 1):
        m = n = 1
        for q in range(d):
            if q < k:
                m *= <Py_ssize_t>shape[q]
            else:
                n *= <Py_ssize_t>shape[q]
        ok = True
        for t in range(j.nops):
            x = <cnp.ndarray>arrs[t]
            nd = cnp.PyArray_NDIM(x)
            off = d - nd
            lo = lf = ro = rf = True
            for q in range(d):
                xd = 1 if q < off else cnp.PyArray_DIMS(x)[q - off]
                sd = shape[q]
                if q < k:
                    lo = lo and xd == 1
                    lf = lf and xd == sd
                else:
                    ro = ro and xd == 1
                    rf = rf and xd == sd
            if lf and rf:
                j.st[2 * t], j.st[2 * t + 1] = n, 1
            elif lo and rf:
                j.st[2 * t], j.st[2 * t + 1] = 0, 1
            elif lf and ro:
                j.st[2 * t], j.st[2 * t + 1] = 1, 0
            elif lo and ro:
                j.st[2 * t], j.st[2 * t + 1] = 0, 0
            else:
                ok = False
                break
        if ok:
            j.m, j.n = m, n
            return True
    return False


cdef void _piece2d(void *ctx, Py_ssize_t c) noexcept nogil:
    """Piece c: j.per rows, or (one row) j.per columns."""
    cdef _Job2D *j = <_Job2D *>ctx
    cdef Py_ssize_t s = c * j.per, cnt, t
    cdef const char *p[3]
    if j.m == 1:
        cnt = j.per if j.n - s > j.per else j.n - s
        for t in range(j.nops):
            p[t] = j.p[t] + s * j.st[2 * t + 1] * j.isz[t]
        j.run(j, j.z + s * j.zsz, p, 1, cnt)
    else:
        cnt = j.per if j.m - s > j.per else j.m - s
        for t in range(j.nops):
            p[t] = j.p[t] + s * j.st[2 * t] * j.isz[t]
        j.run(j, j.z + s * j.n * j.zsz, p, cnt, j.n)


cdef void _go2d_nogil(_Job2D *j) noexcept nogil:
    cdef Py_ssize_t total = j.m * j.n
    cdef int nt = _threads_for(total)
    cdef Py_ssize_t per
    if nt <= 1:
        j.run(j, j.z, j.p, j.m, j.n)
        return
    per = _piece_len(total, nt)
    if j.m == 1:
        j.per = (per + 63) // 64 * 64         # whole cache lines of output per piece
    else:
        j.per = per // j.n if per >= j.n else 1
    _parallel_for(_piece2d, j, ((j.m if j.m > 1 else j.n) + j.per - 1) // j.per, nt)


cdef cnp.ndarray _go2d(_Job2D *j, tuple shape, int typenum):
    """Allocate the output (C order, `shape`, `typenum`) and run j into it."""
    cdef cnp.npy_intp dims[64]
    cdef int q
    for q in range(len(shape)):
        dims[q] = shape[q]
    cdef cnp.ndarray out = cnp.PyArray_EMPTY(len(shape), dims, typenum, 0)
    j.z = cnp.PyArray_BYTES(out)
    j.zsz = cnp.PyArray_ITEMSIZE(out)
    if j.m * j.n == 0:
        return out
    if j.m * j.n < _NOGIL_2D:
        _go2d_nogil(j)
    else:
        with nogil:
            _go2d_nogil(j)
    return out


cdef tuple _bshape_of(tuple arrs):
    """The broadcast shape of the arrays in `arrs`, computed here (np.broadcast_shapes is
    Python code and costs more than a 1e3-element kernel). Raises ValueError (naming
    'broadcast') when they do not broadcast."""
    cdef cnp.npy_intp dims[64]
    cdef cnp.npy_intp xd
    cdef int d = 0, q, nd, off
    for x in arrs:
        nd = cnp.PyArray_NDIM(<cnp.ndarray>x)
        d = nd if nd > d else d
    for q in range(d):
        dims[q] = 1
    for x in arrs:
        nd = cnp.PyArray_NDIM(<cnp.ndarray>x)
        off = d - nd
        for q in range(nd):
            xd = cnp.PyArray_DIMS(<cnp.ndarray>x)[q]
            if xd != dims[off + q]:
                if dims[off + q] == 1:
                    dims[off + q] = xd
                elif xd != 1:
                    raise ValueError("shapes " + ", ".join(str(_shp(<cnp.ndarray>y)) for y in arrs)
                                     + " cannot be broadcast together")
    return tuple([dims[q] for q in range(d)])
