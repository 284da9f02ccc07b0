"""fgrad.random: Threefry known answers, key derivation, and the statistics of every sampler.

References: the Random123 Threefry-2x32-20 test vectors, a pure-Python Threefry written here,
values printed by JAX 0.10.2 (same key layout), and NumPy / math for distributions.
"""
import math

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, dtypes
from fgrad import random
from fgrad.core import random as core_random

pytestmark = pytest.mark.backends  # jit tests run per backend (conftest.py)

M32 = 0xFFFFFFFF


def _np(x: Tensor) -> np.ndarray:
    return np.asarray(x.numpy())


def _ref_threefry(k0: int, k1: int, x0: int, x1: int) -> tuple[int, int]:
    """Threefry-2x32, 20 rounds, on Python ints (Salmon et al. 2011)."""
    rot = ((13, 15, 26, 6), (17, 29, 16, 24))
    ks = (k0, k1, k0 ^ k1 ^ 0x1BD11BDA)
    x0, x1 = (x0 + ks[0]) & M32, (x1 + ks[1]) & M32
    for g in range(5):
        for r in rot[g % 2]:
            x0 = (x0 + x1) & M32
            x1 = (((x1 << r) | (x1 >> (32 - r))) & M32) ^ x0
        x0 = (x0 + ks[(g + 1) % 3]) & M32
        x1 = (x1 + ks[(g + 2) % 3] + g + 1) & M32
    return x0, x1


def _key_words(k: Tensor) -> tuple[int, int]:
    a = _np(k)
    return int(a[0]), int(a[1])


# ---------------------------------------------------------------------------- threefry

@pytest.mark.parametrize("key, ctr, expected", [
    ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
    ((M32, M32), (M32, M32), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
])
def test_threefry_known_answers(key, ctr, expected):
    k = Tensor(np.array(key, np.uint32))
    y0, y1 = random.threefry2x32(k, Tensor(np.array([ctr[0]], np.uint32)),
                                 Tensor(np.array([ctr[1]], np.uint32)))
    assert (int(_np(y0)[0]), int(_np(y1)[0])) == expected
    assert _ref_threefry(*key, *ctr) == expected


def test_threefry_vectorized_matches_scalar_reference():
    rng = np.random.default_rng(0)
    kw = rng.integers(0, 2**32, 2, dtype=np.uint64)
    x0 = rng.integers(0, 2**32, (3, 4), dtype=np.uint64).astype(np.uint32)
    x1 = rng.integers(0, 2**32, (3, 4), dtype=np.uint64).astype(np.uint32)
    y0, y1 = random.threefry2x32(Tensor(kw.astype(np.uint32)), Tensor(x0), Tensor(x1))
    for i in np.ndindex(3, 4):
        want = _ref_threefry(int(kw[0]), int(kw[1]), int(x0[i]), int(x1[i]))
        assert (int(_np(y0)[i]), int(_np(y1)[i])) == want


# ---------------------------------------------------------------------------- keys

@pytest.mark.parametrize("seed, words", [
    (0, (0, 0)), (42, (0, 42)), (2**40 + 7, (256, 7)), (-1, (M32, M32)),
    (2**64 - 1, (M32, M32)),
])
def test_key_words(seed, words):
    k = random.key(seed)
    assert k.dtype == dtypes.uint32 and k.shape == (2,)
    assert _key_words(k) == words
    assert _key_words(random.PRNGKey(seed)) == words


def test_key_from_tensor_seed():
    assert _key_words(random.key(Tensor(np.int64(2**40 + 7)))) == (256, 7)
    assert _key_words(random.key(Tensor(-1))) == (0, M32)  # 32-bit seeds: high word 0
    assert _key_words(random.key(Tensor(np.uint32(5)))) == (0, 5)


def test_split_and_fold_in_follow_the_counter_layout():
    k = random.key(1234)
    kw = _key_words(k)
    children = _np(random.split(k, 5))
    assert children.shape == (5, 2) and children.dtype == np.uint32
    for i in range(5):
        assert tuple(int(w) for w in children[i]) == _ref_threefry(*kw, 0, i)
    assert _key_words(random.fold_in(k, 77)) == _ref_threefry(*kw, 0, 77)
    assert _key_words(random.fold_in(k, 2**33 + 1)) == _ref_threefry(*kw, 2, 1)


def test_bits_follow_the_counter_layout():
    k = random.key(99)
    kw = _key_words(k)
    pairs = [_ref_threefry(*kw, 0, i) for i in range(6)]
    b32 = _np(random.bits(k, (2, 3)))
    assert b32.shape == (2, 3) and b32.dtype == np.uint32
    assert b32.ravel().tolist() == [a ^ b for a, b in pairs]
    b64 = _np(random.bits(k, (6,), dtypes.uint64))
    assert b64.tolist() == [(a << 32) | b for a, b in pairs]
    b8 = _np(random.bits(k, (6,), dtypes.uint8))
    assert b8.dtype == np.uint8 and b8.tolist() == [(a ^ b) & 0xFF for a, b in pairs]


def test_matches_jax_values():
    # Printed by JAX 0.10.2 (threefry, partitionable layout), e.g.
    # jax.random.split(jax.random.PRNGKey(0)), jax.random.uniform(PRNGKey(0), (5,)).
    k0, k1 = random.key(0), random.key(2**40 + 7)
    assert _np(random.split(k0)).tolist() == [[1797259609, 2579123966],
                                              [928981903, 3453687069]]
    assert _np(random.fold_in(k0, 3)).tolist() == [2467461003, 3840466878]
    np.testing.assert_allclose(_np(random.uniform(k0, (5,))),
                               [0.947667, 0.9785799, 0.33229148, 0.46866846, 0.5698887],
                               rtol=1e-6)
    np.testing.assert_allclose(_np(random.normal(k0, (5,))),
                               [1.622642, 2.0252647, -0.43359444, -0.07861735, 0.17609091],
                               rtol=1e-5)
    assert _np(random.bits(k1, (3,), dtypes.uint64)).tolist() == [
        11921392564426150491, 4462027852737886281, 4212004369957800783]
    assert _np(random.permutation(k1, 10)).tolist() == [5, 2, 4, 0, 6, 3, 9, 7, 1, 8]


def test_key_validation():
    with pytest.raises(TypeError, match="uint32 Tensor of shape \\(2,\\)"):
        random.uniform(Tensor([1, 2, 3]))
    with pytest.raises(TypeError, match="uint32 Tensor of shape \\(2,\\)"):
        random.normal(Tensor(np.array([1, 2], np.int32)))
    with pytest.raises(TypeError, match="key words"):
        random.split([-1, 0])
    with pytest.raises(OverflowError):
        random.key(2**64)
    with pytest.raises(TypeError, match="Python int"):
        random.key(1.5)
    # anything Tensor() accepts with valid words is a key
    np.testing.assert_array_equal(_np(random.uniform([0, 42], (4,))),
                                  _np(random.uniform(random.key(42), (4,))))


# ---------------------------------------------------------------------------- streams

def test_same_key_same_numbers_different_keys_differ():
    a = _np(random.uniform(random.key(7), (1000,)))
    b = _np(random.uniform(random.key(7), (1000,)))
    c = _np(random.uniform(random.key(8), (1000,)))
    np.testing.assert_array_equal(a, b)
    assert np.mean(a == c) < 0.01


def test_split_children_are_independent():
    parent = random.key(3)
    kids = random.split(parent, 3)
    streams = [_np(random.uniform(kids[i], (20000,))) for i in range(3)]
    streams.append(_np(random.uniform(parent, (20000,))))
    for i in range(4):
        for j in range(i + 1, 4):
            assert abs(np.corrcoef(streams[i], streams[j])[0, 1]) < 0.03
            assert np.mean(streams[i] == streams[j]) < 0.01
    assert len({tuple(r) for r in _np(kids).tolist()}) == 3


def test_fold_in_changes_output():
    k = random.key(0)
    base = _np(random.normal(k, (100,)))
    f1 = _np(random.normal(random.fold_in(k, 1), (100,)))
    f2 = _np(random.normal(random.fold_in(k, 2), (100,)))
    assert not np.allclose(base, f1) and not np.allclose(f1, f2)
    np.testing.assert_array_equal(f1, _np(random.normal(random.fold_in(k, 1), (100,))))


# ---------------------------------------------------------------------------- uniform

@pytest.mark.parametrize("dtype", [dtypes.float16, dtypes.bfloat16, dtypes.float32,
                                   dtypes.float64])
@pytest.mark.parametrize("lo, hi", [(0.0, 1.0), (-3.0, 5.0)])
def test_uniform_range_and_moments(dtype, lo, hi):
    x = random.uniform(random.key(11), (20000,), dtype, lo, hi)
    assert x.dtype == dtype and x.shape == (20000,)
    v = _np(x).astype(np.float64)
    assert v.min() >= lo and v.max() < hi
    assert abs(v.mean() - (lo + hi) / 2) < 0.02 * (hi - lo)
    assert abs(v.var() - (hi - lo) ** 2 / 12) < 0.03 * (hi - lo) ** 2 / 12


def test_uniform_ks_and_shapes():
    v = np.sort(_np(random.uniform(random.key(5), (100000,))).astype(np.float64))
    n = v.size
    ks = np.max(np.maximum(np.arange(1, n + 1) / n - v, v - np.arange(n) / n))
    assert ks < 1.63 / math.sqrt(n)  # 1% Kolmogorov level
    assert random.uniform(random.key(0)).shape == ()
    assert random.uniform(random.key(0), 3).shape == (3,)
    assert random.uniform(random.key(0), (2, 0, 3)).shape == (2, 0, 3)


def test_uniform_excludes_maxval_and_takes_tensor_bounds():
    top = float(np.nextafter(np.float32(1), np.float32(2)))
    v = _np(random.uniform(random.key(0), (4000,), minval=1.0, maxval=top))
    assert (v == 1.0).all()  # every draw would round up to maxval without the clamp
    lo = Tensor([[0.0], [10.0]])
    hi = Tensor([1.0, 2.0, 3.0])
    w = _np(random.uniform(random.key(1), (2, 3), minval=lo, maxval=hi + lo))
    base = np.array([[0.0], [10.0]])
    assert (w >= base).all() and (w < base + np.array([1.0, 2.0, 3.0])).all()
    with pytest.raises(ValueError, match="broadcast"):
        random.uniform(random.key(0), (3,), minval=Tensor([0.0, 1.0]))
    with pytest.raises(TypeError, match="float"):
        random.uniform(random.key(0), (3,), dtypes.int32)


# ---------------------------------------------------------------------------- normal family

def _normal_cdf(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def test_normal_moments_and_ks():
    v = _np(random.normal(random.key(21), (100000,))).astype(np.float64)
    assert abs(v.mean()) < 0.015 and abs(v.var() - 1) < 0.02
    assert abs(np.mean(np.abs(v) < 1) - 0.6827) < 0.01
    assert abs(np.mean(np.abs(v) < 2) - 0.9545) < 0.005
    s = np.sort(v)[::50]
    ks = np.max(np.abs(_normal_cdf(s) - (np.arange(s.size) * 50 + 0.5) / v.size))
    assert ks < 0.01


@pytest.mark.parametrize("dtype", [dtypes.float16, dtypes.float64])
def test_normal_other_dtypes(dtype):
    x = random.normal(random.key(2), (20000,), dtype)
    assert x.dtype == dtype
    v = _np(x).astype(np.float64)
    assert np.isfinite(v).all() and abs(v.mean()) < 0.03 and abs(v.std() - 1) < 0.03


def test_inverse_cdf_against_math_erf():
    u = np.linspace(-0.999, 0.999, 2001)
    z = _np(core_random._erfinv(Tensor(u)))
    np.testing.assert_allclose(np.vectorize(math.erf)(z), u, rtol=1e-6, atol=1e-7)


def test_truncated_normal_bounds_and_mean():
    a, b = -0.5, 1.5
    v = _np(random.truncated_normal(random.key(4), a, b, (50000,))).astype(np.float64)
    assert v.min() > a and v.max() < b
    pdf = lambda t: math.exp(-t * t / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    mass = 0.5 * (math.erf(b / math.sqrt(2)) - math.erf(a / math.sqrt(2)))
    assert abs(v.mean() - (pdf(a) - pdf(b)) / mass) < 0.01
    one_sided = _np(random.truncated_normal(random.key(5), -math.inf, 0.0, (1000,)))
    assert np.isfinite(one_sided).all() and (one_sided < 0).all()
    lo = Tensor([-1.0, 2.0])
    w = _np(random.truncated_normal(random.key(6), lo, lo + 0.1))
    assert w.shape == (2,) and (w > _np(lo)).all() and (w < _np(lo) + 0.1).all()


def test_gumbel_and_exponential_means():
    g = _np(random.gumbel(random.key(8), (50000,))).astype(np.float64)
    assert np.isfinite(g).all() and abs(g.mean() - 0.5772157) < 0.02
    e = _np(random.exponential(random.key(9), (50000,))).astype(np.float64)
    assert e.min() >= 0 and abs(e.mean() - 1) < 0.02 and abs(e.var() - 1) < 0.05


# ---------------------------------------------------------------------------- discrete

def test_randint_range_and_chi_square():
    v = _np(random.randint(random.key(10), (100000,), -3, 7))
    assert v.dtype == np.int32 and v.min() == -3 and v.max() == 6
    counts = np.bincount(v + 3, minlength=10)
    expected = v.size / 10
    assert np.sum((counts - expected) ** 2 / expected) < 27.9  # chi2(9) at 0.1%


@pytest.mark.parametrize("dtype, lo, hi", [
    (dtypes.uint8, 0, 256), (dtypes.int8, -128, 128), (dtypes.int64, -2**40, 2**40),
    (dtypes.uint32, 2**32 - 5, 2**32),
])
def test_randint_dtypes_and_full_ranges(dtype, lo, hi):
    v = _np(random.randint(random.key(12), (5000,), lo, hi, dtype))
    assert v.dtype == dtype.np
    assert int(v.min()) >= lo and int(v.max()) < hi
    assert len(np.unique(v)) == min(hi - lo, 5000) or hi - lo > 5000


def test_randint_degenerate_and_tensor_bounds():
    assert (_np(random.randint(random.key(0), (10,), 5, 5)) == 5).all()
    assert (_np(random.randint(random.key(0), (10,), 5, 2)) == 5).all()
    hi = Tensor([1, 10, 100])
    v = _np(random.randint(random.key(1), (1000, 3), 0, hi))
    assert (v >= 0).all() and (v < np.array([1, 10, 100])).all() and v[:, 2].max() > 50
    with pytest.raises(TypeError, match="integer"):
        random.randint(random.key(0), (2,), 0, 10, dtypes.float32)


def test_bernoulli_frequency():
    v = _np(random.bernoulli(random.key(13), 0.3, (100000,)))
    assert v.dtype == np.bool_ and abs(v.mean() - 0.3) < 0.006
    p = Tensor([0.0, 0.25, 1.0])
    w = _np(random.bernoulli(random.key(14), p, (20000, 3)))
    assert not w[:, 0].any() and w[:, 2].all() and abs(w[:, 1].mean() - 0.25) < 0.015
    assert random.bernoulli(random.key(0), p).shape == (3,)
    assert random.bernoulli(random.key(0)).shape == ()


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def test_categorical_matches_softmax():
    logits = np.array([0.5, -1.0, 2.0, 0.0], np.float32)
    v = _np(random.categorical(random.key(15), Tensor(logits), shape=(50000,)))
    np.testing.assert_allclose(np.bincount(v, minlength=4) / v.size,
                               _softmax(logits, 0), atol=0.01)


def test_categorical_axis_and_batch_shape():
    logits = np.array([[0.0, 3.0], [1.0, 0.0], [-1.0, 0.0]], np.float32)  # categories on 0
    v = _np(random.categorical(random.key(16), Tensor(logits), axis=0, shape=(20000, 2)))
    assert v.shape == (20000, 2) and v.min() >= 0 and v.max() <= 2
    probs = _softmax(logits, 0)
    for col in range(2):
        freq = np.bincount(v[:, col], minlength=3) / v.shape[0]
        np.testing.assert_allclose(freq, probs[:, col], atol=0.015)
    assert random.categorical(random.key(0), Tensor(logits)).shape == (3,)
    with pytest.raises(ValueError, match="batch shape"):
        random.categorical(random.key(0), Tensor(logits), shape=(4,))


def test_permutation_is_a_permutation():
    p = _np(random.permutation(random.key(17), 50))
    assert sorted(p.tolist()) == list(range(50)) and p.tolist() != list(range(50))
    x = np.arange(24, dtype=np.float32).reshape(2, 12)
    y = _np(random.permutation(random.key(18), Tensor(x), axis=1))
    assert y.shape == (2, 12)
    np.testing.assert_array_equal(np.sort(y, axis=1), x)
    np.testing.assert_array_equal(y[1] - y[0], np.full(12, 12.0))  # same order for each row
    assert random.permutation(random.key(0), 0).shape == (0,)


def test_permutation_positions_are_uniform():
    keys = random.split(random.key(26), 800)
    perms = _np(fgrad.vmap(lambda k: random.permutation(k, 4))(keys))
    hits = np.zeros((4, 4))
    for row in perms:
        hits[np.arange(4), row] += 1
    assert (np.sort(perms, axis=1) == np.arange(4)).all()
    assert np.abs(hits - 200).max() < 45


def test_rank_argsort_fallback_is_a_stable_argsort():
    x = np.random.default_rng(1).integers(0, 6, 40).astype(np.uint32)
    np.testing.assert_array_equal(_np(core_random._rank_argsort(Tensor(x))),
                                  np.argsort(x, kind="stable"))


def test_choice_without_replacement_is_unique():
    v = _np(random.choice(random.key(19), 10, (2, 3), replace=False))
    assert v.shape == (2, 3) and len(set(v.ravel().tolist())) == 6 and v.max() < 10
    a = np.arange(30, dtype=np.float32).reshape(3, 10)
    w = _np(random.choice(random.key(20), Tensor(a), (4,), replace=False, axis=1))
    assert w.shape == (3, 4) and len(set(w[0].tolist())) == 4
    np.testing.assert_array_equal(w[2] - w[0], np.full(4, 20.0))
    with pytest.raises(ValueError, match="without replacement"):
        random.choice(random.key(0), 3, (4,), replace=False)


def test_choice_with_replacement_and_weights():
    v = _np(random.choice(random.key(22), 5, (20000,)))
    assert v.min() == 0 and v.max() == 4 and abs(np.bincount(v).min() / v.size - 0.2) < 0.02
    p = np.array([0.1, 0.0, 0.6, 0.3], np.float32)
    w = _np(random.choice(random.key(23), 4, (50000,), p=Tensor(p)))
    np.testing.assert_allclose(np.bincount(w, minlength=4) / w.size, p, atol=0.01)
    picked = _np(random.choice(random.key(24), 4, (3,), replace=False, p=Tensor(p)))
    assert len(set(picked.tolist())) == 3 and 1 not in picked.tolist()
    with pytest.raises(ValueError, match="p must have shape"):
        random.choice(random.key(0), 4, (2,), p=Tensor([0.5, 0.5]))


# ---------------------------------------------------------------------------- transforms

def test_make_jaxpr_traces_without_concretization():
    jaxpr = fgrad.make_jaxpr(lambda k: fgrad.random.uniform(k, (3,)))(fgrad.random.key(0))
    text = str(jaxpr)
    assert "u32[2]" in text and "f32[3]" in text and "shift_left" in text


@pytest.mark.parametrize("sample", [
    lambda k: random.normal(k, (3,)),
    lambda k: random.split(k, 3),
    lambda k: random.randint(k, (4,), 0, 9),
    lambda k: random.permutation(k, 6),
    lambda k: random.choice(k, 5, (2,), p=Tensor([0.1, 0.2, 0.3, 0.2, 0.2])),
    lambda k: random.truncated_normal(k, -1.0, 1.0, (3,)),
])
def test_jit_and_vmap_agree_with_eager(sample):
    if not (hasattr(fgrad, "jit") and hasattr(fgrad, "vmap")):
        pytest.skip("transformations not available")
    keys = random.split(random.key(25), 3)
    eager = np.stack([_np(sample(keys[i])) for i in range(3)])
    np.testing.assert_array_equal(_np(fgrad.jit(sample)(keys[0])), eager[0])
    np.testing.assert_array_equal(_np(fgrad.vmap(sample)(keys)), eager)


def test_uniform_is_differentiable_in_its_bounds():
    if not hasattr(fgrad, "grad"):
        pytest.skip("grad not available")
    k = random.key(27)
    unit = _np(random.uniform(k, (5,))).astype(np.float64)
    d_hi = fgrad.grad(lambda hi: random.uniform(k, (5,), minval=1.0, maxval=hi).sum())
    d_lo = fgrad.grad(lambda lo: random.uniform(k, (5,), minval=lo, maxval=3.0).sum())
    np.testing.assert_allclose(float(d_hi(Tensor(3.0))), unit.sum(), rtol=1e-5)
    np.testing.assert_allclose(float(d_lo(Tensor(1.0))), (1 - unit).sum(), rtol=1e-5)
