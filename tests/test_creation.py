"""Creation functions and random streams (issue: completing the core)."""
import numpy as np
import pytest

import lucid


def test_like_functions_match_numpy():
    x = lucid.tensor(np.arange(6.0).reshape(2, 3), dtype=lucid.float64)
    for fn, ref in [(lucid.zeros_like, np.zeros_like), (lucid.ones_like, np.ones_like)]:
        y = fn(x)
        assert y.dtype is lucid.float64 and y.shape == (2, 3)
        np.testing.assert_array_equal(y.numpy(), ref(x.numpy()))
    f = lucid.full_like(x, 7.5)
    np.testing.assert_array_equal(f.numpy(), np.full((2, 3), 7.5))
    e = lucid.empty_like(x, dtype=lucid.int32)
    assert e.shape == (2, 3) and e.dtype is lucid.int32


@pytest.mark.parametrize("start,end,steps", [(0, 1, 5), (-2.5, 3.0, 7), (1, 1, 3), (0, 1, 1)])
def test_linspace_matches_numpy(start, end, steps):
    got = lucid.linspace(start, end, steps, dtype=lucid.float64).numpy()
    np.testing.assert_allclose(got, np.linspace(start, end, steps), rtol=0, atol=1e-15)


def test_eye():
    np.testing.assert_array_equal(lucid.eye(3).numpy(), np.eye(3, dtype=np.float32))
    np.testing.assert_array_equal(lucid.eye(2, 4, dtype=lucid.int64).numpy(), np.eye(2, 4))


def test_randint_range_dtype_and_coverage():
    lucid.manual_seed(1)
    r = lucid.randint(-3, 4, (20000,))
    assert r.dtype is lucid.int64
    a = r.numpy()
    assert a.min() == -3 and a.max() == 3          # high is exclusive, every value appears
    counts = np.bincount(a + 3)
    assert counts.min() > 2500                      # roughly uniform (expected 2857 each)
    with pytest.raises(ValueError):
        lucid.randint(5, 5, (3,))


def test_normal_statistics_and_broadcasting():
    lucid.manual_seed(2)
    x = lucid.normal(3.0, 2.0, (200000,), dtype=lucid.float64).numpy()
    assert abs(x.mean() - 3.0) < 0.03 and abs(x.std() - 2.0) < 0.03
    m = lucid.tensor([0.0, 100.0])
    y = lucid.normal(m, 1e-3)
    assert y.shape == (2,) and y.dtype is lucid.float32
    np.testing.assert_allclose(y.numpy(), [0.0, 100.0], atol=0.01)
    with pytest.raises(ValueError):
        lucid.normal(0.0, -1.0, (2,))


def test_generator_makes_streams_reproducible_and_independent():
    g1 = lucid.Generator().manual_seed(123)
    a = lucid.randn(5, generator=g1).numpy()
    b = lucid.rand(5, generator=g1).numpy()
    g2 = lucid.Generator().manual_seed(123)
    np.testing.assert_array_equal(lucid.randn(5, generator=g2).numpy(), a)
    np.testing.assert_array_equal(lucid.rand(5, generator=g2).numpy(), b)
    # the global stream is not disturbed by a private generator
    lucid.manual_seed(9)
    first = lucid.rand(3).numpy()
    lucid.manual_seed(9)
    lucid.randn(4, generator=g1)
    np.testing.assert_array_equal(lucid.rand(3).numpy(), first)
    # state round trip
    st = g1.get_state()
    c = lucid.randint(0, 100, (4,), generator=g1).numpy()
    g1.set_state(st)
    np.testing.assert_array_equal(lucid.randint(0, 100, (4,), generator=g1).numpy(), c)
    assert g1.initial_seed() == 123


def test_rand_rejects_integer_dtype():
    with pytest.raises(TypeError):
        lucid.rand(2, dtype=lucid.int64)
