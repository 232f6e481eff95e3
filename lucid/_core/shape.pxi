# Shape and indexing ops: views, joins, __getitem__ / __setitem__, gather / scatter.


def _getitem(Tensor self, index):
    raise NotImplementedError("indexing is not implemented yet")


def _setitem(Tensor self, index, value):
    raise NotImplementedError("index assignment is not implemented yet")


def _reverse_dims(Tensor self):
    raise NotImplementedError(".T is not implemented yet")
