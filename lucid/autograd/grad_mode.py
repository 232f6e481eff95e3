"""Thread-local grad mode: ``no_grad``, ``enable_grad``, ``set_grad_enabled``.

Each works as a context manager and as a decorator; the flag lives in a C
thread-local, so one thread's ``no_grad`` never affects another thread.
"""
import functools

from lucid._core.core import _set_grad_enabled


class _GradMode:
    _mode = True

    def __enter__(self):
        self._prev = _set_grad_enabled(self._mode)
        return self

    def __exit__(self, *exc):
        _set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """Ops record nothing inside this block (or decorated function)."""
    _mode = False


class enable_grad(_GradMode):
    """Turn recording back on inside a ``no_grad`` block."""
    _mode = True


class set_grad_enabled(_GradMode):
    """``set_grad_enabled(False)`` as a function call, a context manager or a decorator."""

    def __init__(self, mode):
        self._mode = bool(mode)
        self._prev = _set_grad_enabled(self._mode)

    def __enter__(self):
        return self

    def __call__(self, fn):
        _set_grad_enabled(self._prev)
        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapper
