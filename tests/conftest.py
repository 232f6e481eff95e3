import gc
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    from hypothesis import settings, HealthCheck

    settings.register_profile(
        "lucid", max_examples=40, deadline=None, derandomize=True,
        suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("lucid")
except ImportError:  # pragma: no cover
    pass


@pytest.fixture
def threads():
    """Restores lucid's thread count after a test that sets it."""
    import lucid
    old = lucid.get_num_threads()
    yield
    lucid.set_num_threads(old)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture
def no_gc():
    """Disable the cyclic GC so that only reference counting frees objects."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@pytest.fixture(autouse=True)
def _grad_mode_guard():
    """Every test starts and must end with grad mode enabled."""
    import lucid
    assert lucid.is_grad_enabled(), "grad mode leaked from a previous test"
    yield
    assert lucid.is_grad_enabled(), "test left grad mode disabled"


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def pytest_terminal_summary(terminalreporter):
    """Print how many hypothesis cases the fuzz suite ran (tests/test_fuzz.py)."""
    fuzz = sys.modules.get("test_fuzz") or sys.modules.get("tests.test_fuzz")
    if fuzz is not None and sum(fuzz.CASES.values()):
        profile = "long" if fuzz.LONG else "bounded (LUCID_FUZZ=long for the long profile)"
        counts = ", ".join(f"{k} {v}" for k, v in sorted(fuzz.CASES.items()))
        terminalreporter.write_line(
            f"lucid fuzz: {sum(fuzz.CASES.values())} cases run, profile {profile}: {counts}")
