# The broadcast plan and driver of the select kernels (src/lucid_compare.c), included
# by compare.pyx (comparisons, where), unary.pyx (clamp) and binary.pyx (the layouts
# its row planner does not take).
#
# An output of `shape` is split at a dim k into m rows (the dims before k) and n
# columns (the rest). Each operand must then be FULL (m x n), a ROW (n values for
# every row), a COL (one value per row) or ONE value, read through a row step and a
# column step: every NumPy broadcast of a row, a column or a scalar onto a
# C-contiguous operand, and the outer broadcast (m, 1) x (1, n). Where no split of
# the whole shape works ((n, 1, k) with (1, m, 1)), the leading dims become outer
# dims, looped over with each operand's own stride (0 where it broadcasts), and the
# rest is split as above: so every broadcast of C-contiguous operands is read in
# place. A strided operand returns False and the caller runs NumPy. Threads take
# whole rows (or, for one row, runs of columns); every element is computed alone, so
# the split never changes a result.

cdef enum:
    _NOGIL_2D = 8192       # below this many elements releasing the GIL costs more
    _OUTER_MAX = 8         # outer dims of size > 1 a plan takes


ctypedef void (*_run2d_fn)(void *job, char *z, const char **p, Py_ssize_t m,
                           Py_ssize_t n) noexcept nogil

cdef struct _Job2D:
    _run2d_fn run
    const void *aux        # the caller's (the binary kernels)
    int op, nops
    Py_ssize_t m, n, per
    Py_ssize_t zsz
    Py_ssize_t st[6]
    Py_ssize_t isz[3]
    char *z
    const char *p[3]
    int od                 # outer dims (0: the plan is m x n alone)
    Py_ssize_t outer       # their product
    Py_ssize_t osh[_OUTER_MAX]
    Py_ssize_t ost[3 * _OUTER_MAX]     # byte steps, operand t's at ost[t * _OUTER_MAX]



cdef bint _split2d(tuple shape, tuple arrs, int k0, _Job2D *j) except -1:
    """Fill j's m, n and steps for a split of dims k0.. of `shape` (the operands' own
    trailing dims); False if no split works."""
    cdef int d = len(shape), k, t, q, off
    cdef Py_ssize_t m, n, xd, sd
    cdef bint lo, lf, ro, rf, ok
    cdef cnp.ndarray x
    for k in range(k0, d + 1):
        m = n = 1
        for q in range(k0, d):
            if q < k:
                m *= <Py_ssize_t>shape[q]
            else:
                n *= <Py_ssize_t>shape[q]
        ok = True
        for t in range(j.nops):
            x = <cnp.ndarray>arrs[t]
            off = d - cnp.PyArray_NDIM(x)
            lo = lf = ro = rf = True
            for q in range(k0, d):
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


cdef bint _plan2d(tuple shape, tuple arrs, _Job2D *j) except -1:
    """Plan `arrs` (C-contiguous, aligned ndarrays) read into an output of `shape`: the
    fewest leading dims as outer dims, the rest split into m x n; False if the
    operands are strided or need more than _OUTER_MAX outer dims."""
    cdef int d = len(shape), k0, t, q, off
    cdef Py_ssize_t xd
    cdef cnp.ndarray x
    j.nops = len(arrs)
    j.od, j.outer = 0, 1
    for t in range(j.nops):
        x = <cnp.ndarray>arrs[t]
        if not (cnp.PyArray_IS_C_CONTIGUOUS(x) and cnp.PyArray_ISALIGNED(x)) or \
                cnp.PyArray_NDIM(x) > d:
            return False
        j.p[t] = cnp.PyArray_BYTES(x)
        j.isz[t] = cnp.PyArray_ITEMSIZE(x)
    for k0 in range(d):
        if _split2d(shape, arrs, k0, j):
            break
    else:
        return d == 0 and _split2d(shape, arrs, 0, j)
    for q in range(k0):                  # the outer dims, size-1 ones dropped
        for t in range(j.nops):          # each operand's dim: 1 or the output's
            x = <cnp.ndarray>arrs[t]
            off = d - cnp.PyArray_NDIM(x)
            xd = 1 if q < off else cnp.PyArray_DIMS(x)[q - off]
            if xd != 1 and xd != <Py_ssize_t>shape[q]:
                return False
            if j.od < _OUTER_MAX:
                j.ost[t * _OUTER_MAX + j.od] = 0 if xd == 1 else cnp.PyArray_STRIDES(x)[q - off]
        if shape[q] == 1:
            continue
        if j.od == _OUTER_MAX:
            return False
        j.osh[j.od] = shape[q]
        j.outer *= <Py_ssize_t>shape[q]
        j.od += 1
    return True


cdef void _rows2d(_Job2D *j, Py_ssize_t s, Py_ssize_t e) noexcept nogil:
    """Rows [s, e) of the outer x m rows of an outer plan."""
    cdef Py_ssize_t o, i, r, q, t, hi
    cdef const char *p[3]
    while s < e:
        o = s // j.m
        i = s - o * j.m
        hi = j.m if e - o * j.m > j.m else e - o * j.m
        for t in range(j.nops):
            p[t] = j.p[t]
        r = o
        q = j.od - 1
        while q >= 0:                    # outer index o -> each operand's offset
            for t in range(j.nops):
                p[t] += (r % j.osh[q]) * j.ost[t * _OUTER_MAX + q]
            r //= j.osh[q]
            q -= 1
        for t in range(j.nops):
            p[t] += i * j.st[2 * t] * j.isz[t]
        j.run(j, j.z + (o * j.m + i) * j.n * j.zsz, p, hi - i, j.n)
        s = o * j.m + hi


cdef void _piece2d(void *ctx, Py_ssize_t c) noexcept nogil:
    """Piece c: j.per rows, or (one row) j.per columns."""
    cdef _Job2D *j = <_Job2D *>ctx
    cdef Py_ssize_t s = c * j.per, cnt, t
    cdef const char *p[3]
    if j.od > 0:
        _rows2d(j, s, s + j.per if j.outer * j.m - s > j.per else j.outer * j.m)
    elif j.m == 1:
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
    cdef Py_ssize_t rows = j.outer * j.m
    cdef int nt = _threads_for(rows * j.n)
    cdef Py_ssize_t per
    if nt <= 1:
        if j.od > 0:
            _rows2d(j, 0, rows)
        else:
            j.run(j, j.z, j.p, j.m, j.n)
        return
    per = _piece_len(rows * j.n, nt)
    if rows == 1:
        j.per = (per + 63) // 64 * 64         # whole cache lines of output per piece
    else:
        j.per = per // j.n if per >= j.n else 1
    _parallel_for(_piece2d, j, ((rows if rows > 1 else j.n) + j.per - 1) // j.per, nt)


cdef cnp.ndarray _go2d(_Job2D *j, tuple shape, int typenum):
    """Allocate the output (C order, `shape`, `typenum`) and run j into it."""
    cdef cnp.npy_intp dims[64]
    cdef int q
    for q in range(len(shape)):
        dims[q] = shape[q]
    cdef cnp.ndarray out = cnp.PyArray_EMPTY(len(shape), dims, typenum, 0)
    j.z = cnp.PyArray_BYTES(out)
    j.zsz = cnp.PyArray_ITEMSIZE(out)
    if j.outer * j.m * j.n == 0:
        return out
    if j.outer * j.m * j.n < _NOGIL_2D:
        _go2d_nogil(j)
    else:
        with nogil:
            _go2d_nogil(j)
    return out


cdef inline tuple _bshape_of(tuple arrs):
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
