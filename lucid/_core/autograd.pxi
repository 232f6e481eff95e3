# Autograd: backward nodes, saved tensors, and the engine.
#
# Ownership, so that a graph is freed by reference counting alone:
#   output tensor --grad_fn--> node --next_functions--> earlier nodes --> AccumulateGrad --> leaf
#   node --saved input--> input tensor (never its own output)
# A node that needs its output (ExpBackward) saves only the output's storage and
# version counter, and rebuilds a tensor pointing back at itself when graph-mode
# backward asks for it. No edge ever points from a node to its outputs.


cdef class Node:
    """A backward node: one per recorded op application.

    ``next_functions`` holds one ``(node, input_nr)`` edge per input (``(None, 0)``
    for inputs that need no gradient). ``grad_formula(g)`` is the eager backward
    (raw kernels, records nothing); ``grad_formula_impl(...)`` is the same formula
    written with lucid ops, used when ``create_graph=True``.
    """
    cdef tuple _next
    cdef bint _released
    cdef object __weakref__

    @property
    def next_functions(self):
        return self._next

    def name(self):
        return type(self).__name__

    def __repr__(self):
        return f"<{type(self).__name__} object at {id(self):#x}>"

    @property
    def saved_tensors(self):
        """The tensors this node keeps for its backward (unpacked)."""
        cdef SavedTensor s
        cdef list out = []
        for s in self._saved_list():
            out.append(s.unpack(self))
        return tuple(out)

    cdef list _saved_list(self):
        return []

    cdef tuple _eager(self, cnp.ndarray g):
        raise NotImplementedError(type(self).__name__)

    cdef tuple _graph(self, Tensor g):
        raise NotImplementedError(type(self).__name__)

    cdef void _release(self):
        self._released = True

    def grad_formula(self, g):
        """Eager backward: the gradient w.r.t. each input, given the output's gradient ``g``."""
        cdef Tensor tg = _as_tensor(g)
        res = self._eager(_contig(tg._data))
        out = tuple(None if r is None else _wrap(_as_ndarray(r), _dtype_of_array(_as_ndarray(r)))
                    for r in res)
        return out[0] if len(out) == 1 else out


cdef inline cnp.ndarray _contig(cnp.ndarray a):
    if cnp.PyArray_IS_C_CONTIGUOUS(a):
        return a
    return np.ascontiguousarray(a)


cdef class SavedTensor:
    """A tensor kept for backward, with the version it had when saved."""
    cdef Tensor _tensor            # a saved input: the tensor itself
    cdef cnp.ndarray _data         # a saved output: its storage only (no reference cycle)
    cdef DType _dtype
    cdef _VersionCounter _vc
    cdef long long _version
    cdef bint _is_output
    cdef bint _released

    cdef void _check(self, Node owner) except *:
        if self._released:
            raise LucidError(
                f"Trying to backward through {type(owner).__name__} a second time (or to access "
                "its saved tensors after they were freed). Saved values are freed when you call "
                ".backward() or lucid.autograd.grad(); pass retain_graph=True to backward "
                "through the graph again.")
        if self._vc.value != self._version:
            data = self._data if self._is_output else self._tensor._data
            raise LucidError(
                "one of the tensors needed for gradient computation has been modified by an "
                f"in-place operation: [{self._dtype} {list((<object>data).shape)}], saved by "
                f"{type(owner).__name__}, is at version {self._vc.value}; expected version "
                f"{self._version} instead.")

    cdef cnp.ndarray data(self, Node owner):
        self._check(owner)
        return self._data if self._is_output else self._tensor._data

    cdef Tensor unpack(self, Node owner):
        self._check(owner)
        if not self._is_output:
            return self._tensor
        cdef Tensor t = _wrap(self._data, self._dtype)
        t._vc = self._vc
        t._grad_fn = owner
        t._requires_grad = True
        return t

    cdef void release(self):
        self._released = True
        self._tensor = None
        self._data = None


cdef inline SavedTensor _save(Tensor t, bint is_output):
    cdef SavedTensor s = SavedTensor.__new__(SavedTensor)
    s._vc = t._get_vc()
    s._version = s._vc.value
    s._is_output = is_output
    s._dtype = t._dtype
    if is_output:
        s._data = t._data
    else:
        s._tensor = t
    return s


cdef class AccumulateGrad(Node):
    """The edge into a leaf: adds the incoming gradient to ``variable.grad``."""
    cdef readonly Tensor variable


cdef tuple _NO_EDGE = (None, 0)


cdef inline tuple _edge(Tensor t):
    """The edge a new node uses to send gradient to ``t``."""
    cdef AccumulateGrad acc
    if t._grad_fn is not None:
        return (t._grad_fn, t._output_nr)
    if t._requires_grad:
        acc = AccumulateGrad.__new__(AccumulateGrad)
        acc.variable = t
        acc._next = ()
        return (acc, 0)
    return _NO_EDGE


cdef inline bint _needs_grad(object t):
    return lucid_grad_enabled and isinstance(t, Tensor) and (<Tensor>t)._requires_grad


cdef inline void _set_history(Tensor out, Node node):
    out._grad_fn = node
    out._output_nr = 0
    out._requires_grad = True


# -- grad mode ------------------------------------------------------------------

def is_grad_enabled():
    """Whether ops record backward nodes on this thread."""
    return bool(lucid_grad_enabled)


def _set_grad_enabled(bint mode):
    global lucid_grad_enabled
    cdef bint prev = lucid_grad_enabled
    lucid_grad_enabled = mode
    return prev


# -- the engine -------------------------------------------------------------------

cdef object _root_grad(Tensor t, object g, bint create_graph, Py_ssize_t i):
    cdef Tensor tg
    if g is None:
        if cnp.PyArray_SIZE(t._data) != 1:
            raise LucidError(
                "grad can be implicitly created only for scalar outputs; pass gradient= "
                f"(output {i} has shape {_shp(t._data)})")
        arr = np.ones(_shp(t._data), dtype=t._dtype.numpy_dtype)
        return _wrap(arr, t._dtype) if create_graph else arr
    tg = _as_tensor(g)
    if _shp(tg._data) != _shp(t._data):
        raise ShapeError(
            f"Mismatch in shape: grad_output[{i}] has a shape of {_shp(tg._data)} and "
            f"output[{i}] has a shape of {_shp(t._data)}")
    if tg._dtype is not t._dtype:
        if not tg._dtype.is_floating_point:
            raise UnsupportedDTypeError(
                f"grad_output[{i}] has dtype {tg._dtype}; a floating point gradient is needed")
        tg = to_dtype(tg, t._dtype, False) if create_graph else _wrap(
            tg._data.astype(t._dtype.numpy_dtype), t._dtype)
    return tg if create_graph else _contig(tg._data)


cdef list _topo_order(list roots):
    """Nodes reachable from ``roots``, each after every node that sends it gradient."""
    cdef list post = []
    cdef set seen = set()
    cdef list stack
    cdef Node node, child
    cdef Py_ssize_t i
    for r in roots:
        if r is None or r in seen:
            continue
        seen.add(r)
        stack = [[r, 0]]
        while stack:
            frame = stack[len(stack) - 1]
            node = <Node>frame[0]
            i = frame[1]
            if node._next is not None and i < len(node._next):
                frame[1] = i + 1
                child = node._next[i][0]
                if child is not None and child not in seen:
                    seen.add(child)
                    stack.append([child, 0])
            else:
                post.append(node)
                stack.pop()
    post.reverse()
    return post


cdef inline object _sum_grads(object a, object b, bint create_graph):
    if create_graph:
        return add(a, b)
    return _as_ndarray(np.add(a, b))


cdef tuple _run_engine(tuple outputs, tuple grad_outputs, bint keep_graph, bint create_graph,
                       tuple inputs, bint allow_unused):
    """Reverse-mode sweep. ``inputs is None``: accumulate into leaves' ``.grad`` (backward);
    otherwise return the gradients w.r.t. ``inputs`` and touch no ``.grad`` (autograd.grad)."""
    cdef Tensor t
    cdef Node node
    cdef Py_ssize_t i
    cdef bint capture = inputs is not None
    cdef dict buffers = {}
    cdef list roots = []
    if len(grad_outputs) != len(outputs):
        raise ValueError(f"got {len(grad_outputs)} gradients for {len(outputs)} outputs")
    for i in range(len(outputs)):
        if not isinstance(outputs[i], Tensor):
            raise TypeError(f"outputs[{i}] is a {type(outputs[i]).__name__}, not a Tensor")
        t = <Tensor>outputs[i]
        if not t._requires_grad:
            raise LucidError(
                f"element {i} of tensors does not require grad and does not have a grad_fn")
        g = _root_grad(t, grad_outputs[i], create_graph, i)
        edge = _edge(t)
        roots.append(edge[0])
        if edge[0] in buffers:
            buffers[edge[0]] = _sum_grads(buffers[edge[0]], g, create_graph)
        else:
            buffers[edge[0]] = g

    # What autograd.grad captures: leaves by identity (every AccumulateGrad of the
    # leaf counts), non-leaves at their grad_fn.
    cdef dict leaf_slot = {}
    cdef dict node_slot = {}
    cdef list captured = None
    if capture:
        captured = [None] * len(inputs)
        for i in range(len(inputs)):
            if not isinstance(inputs[i], Tensor):
                raise TypeError(f"inputs[{i}] is a {type(inputs[i]).__name__}, not a Tensor")
            t = <Tensor>inputs[i]
            if not t._requires_grad:
                raise LucidError(f"One of the differentiated Tensors (inputs[{i}]) does not require grad")
            if t._grad_fn is None:
                leaf_slot.setdefault(id(t), []).append(i)
            else:
                node_slot.setdefault(t._grad_fn, []).append(i)

    cdef list order = _topo_order(roots)
    cdef set needed = None
    if capture:
        # Run only nodes on a path to a captured input.
        needed = set()
        for node in reversed(order):
            if (type(node) is AccumulateGrad and id((<AccumulateGrad>node).variable) in leaf_slot) \
                    or node in node_slot:
                needed.add(node)
                continue
            for e in node._next:
                if e[0] is not None and e[0] in needed:
                    needed.add(node)
                    break

    cdef int prev_mode = lucid_grad_enabled
    global lucid_grad_enabled
    lucid_grad_enabled = 1 if create_graph else 0
    try:
        for node in order:
            g = buffers.pop(node, None)
            if g is None:
                continue
            if capture:
                if node in node_slot:
                    for i in node_slot[node]:
                        captured[i] = g if captured[i] is None else _sum_grads(captured[i], g, create_graph)
                if node not in needed:
                    continue
            if type(node) is AccumulateGrad:
                t = (<AccumulateGrad>node).variable
                if capture:
                    for i in leaf_slot.get(id(t), ()):
                        captured[i] = g if captured[i] is None else _sum_grads(captured[i], g, create_graph)
                else:
                    _accumulate(t, g, create_graph)
                continue
            if node._released:
                raise LucidError(
                    f"Trying to backward through {type(node).__name__} a second time: its graph was "
                    "freed by an earlier backward. Pass retain_graph=True to the first "
                    ".backward() (or autograd.grad) to backward through the graph again.")
            grads = node._graph(<Tensor>g) if create_graph else node._eager(<cnp.ndarray>g)
            if not keep_graph:
                node._release()
            for i in range(len(node._next)):
                child = node._next[i][0]
                gi = grads[i]
                if child is None or gi is None:
                    continue
                if not create_graph and type(gi) is not cnp.ndarray:
                    gi = _as_ndarray(gi)       # NumPy hands back scalars from 0-d arithmetic
                if capture and child not in needed and child not in node_slot:
                    continue
                if child in buffers:
                    buffers[child] = _sum_grads(buffers[child], gi, create_graph)
                else:
                    buffers[child] = gi
    finally:
        lucid_grad_enabled = prev_mode

    if not capture:
        return None
    cdef list result = []
    for i in range(len(inputs)):
        g = captured[i]
        t = <Tensor>inputs[i]
        if g is None:
            if not allow_unused:
                raise LucidError(
                    f"One of the differentiated Tensors (inputs[{i}]) appears to not have been "
                    "used in the graph. Set allow_unused=True if this is the desired behavior.")
            result.append(None)
        elif create_graph:
            result.append(g)
        else:
            arr = <cnp.ndarray>g
            if not cnp.PyArray_ISWRITEABLE(arr) or not cnp.PyArray_IS_C_CONTIGUOUS(arr):
                arr = np.array(arr, copy=True)
            if arr.dtype != t._dtype.numpy_dtype:
                arr = arr.astype(t._dtype.numpy_dtype)
            result.append(_wrap(arr, t._dtype))
    return tuple(result)


cdef void _accumulate(Tensor leaf, object g, bint create_graph) except *:
    """Add a gradient into ``leaf.grad``: in place when nothing records, else out of place."""
    cdef Tensor old = leaf._grad
    cdef cnp.ndarray arr
    if create_graph:
        gt = <Tensor>g
        if gt._dtype is not leaf._dtype:
            gt = to_dtype(gt, leaf._dtype, False)
        leaf._grad = gt if old is None else add(old, gt)
        return
    arr = <cnp.ndarray>g
    if old is None:
        # The incoming array may be shared (AddBackward passes g to both inputs): copy.
        leaf._grad = _wrap(np.array(arr, dtype=leaf._dtype.numpy_dtype, copy=True, order="C"),
                           leaf._dtype)
    elif old._requires_grad or not cnp.PyArray_ISWRITEABLE(old._data):
        leaf._grad = _wrap(_as_ndarray(np.add(old._data, arr, dtype=leaf._dtype.numpy_dtype)),
                           leaf._dtype)
    else:
        np.add(old._data, arr, out=old._data, casting="unsafe")
        old._bump()


def _backward(tuple tensors, tuple grad_tensors, retain_graph, bint create_graph):
    keep = create_graph if retain_graph is None else bool(retain_graph)
    _run_engine(tensors, grad_tensors, keep, create_graph, None, False)


def _grad(tuple outputs, tuple inputs, tuple grad_outputs, retain_graph, bint create_graph,
          bint allow_unused):
    keep = create_graph if retain_graph is None else bool(retain_graph)
    return _run_engine(outputs, grad_outputs, keep, create_graph, inputs, allow_unused)
