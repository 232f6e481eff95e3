"""Parameter: a leaf Tensor that a Module registers as one of its weights."""
import numpy as np

import lucid


class Parameter(lucid.Tensor):
    """A Tensor that is a module's weight: assigning one to a Module attribute registers it.

    ``Parameter(t)`` shares ``t``'s memory (like ``torch.nn.Parameter``) and requires grad
    unless ``requires_grad=False``.
    """

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = np.empty((0,), dtype=np.float32)
        if isinstance(data, lucid.Tensor) and data.device == "gpu":
            super().__init__(data.detach(), device="gpu", requires_grad=False)
        else:
            if isinstance(data, lucid.Tensor):
                data = data.detach().numpy()
            # lucid.tensor(ndarray) keeps the dtype; np.asarray keeps the memory when it can
            super().__init__(np.asarray(data), requires_grad=False)
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce__(self):
        raise TypeError("lucid Parameters are saved with lucid.save (safetensors), not pickle")


class Buffer:
    """Marker for ``register_buffer`` users who prefer the torch 2.x ``nn.Buffer`` spelling."""

    def __init__(self, data, persistent=True):
        self.data, self.persistent = data, persistent
