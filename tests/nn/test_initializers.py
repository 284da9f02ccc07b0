"""fgrad.nn.initializers: the formulas (fans, variances, truncation, orthogonality) and JAX's
numbers for a fixed key (fixtures/gen_initializers_jax.py wrote them with jax).

Uniform draws are fgrad.random's bits, JAX's exactly, so those initializers must agree bit for
bit; normal draws agree with JAX to float32 round-off (an erfinv evaluated in another order),
and orthogonal goes through a QR, so those are compared to a tolerance.
"""
from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

import fgrad
from fgrad.nn import initializers as I

HERE = os.path.dirname(__file__)
FIX = dict(np.load(os.path.join(HERE, "fixtures", "initializers_jax.npz")))
_spec = importlib.util.spec_from_file_location(
    "gen_initializers_jax", os.path.join(HERE, "fixtures", "gen_initializers_jax.py"))
assert _spec is not None and _spec.loader is not None
GEN = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(GEN)
KEY = fgrad.random.key(GEN.SEED)
BUILDERS = ["glorot_normal", "glorot_uniform", "he_normal", "he_uniform", "lecun_normal",
            "lecun_uniform"]
# (scale, fan used, distribution) of each variance_scaling shortcut.
SPEC = {"glorot_normal": (1.0, "avg", "tn"), "glorot_uniform": (1.0, "avg", "u"),
        "he_normal": (2.0, "in", "tn"), "he_uniform": (2.0, "in", "u"),
        "lecun_normal": (1.0, "in", "tn"), "lecun_uniform": (1.0, "in", "u")}


def _draw(name: str) -> np.ndarray:
    builder, args, kwargs, shape, dtype = GEN.CASES[name]
    out = getattr(I, builder)(*args, **kwargs)(KEY, shape, dtype)
    assert out.shape == shape and out.dtype == fgrad.core.dtypes.to_dtype(dtype)
    return out.cast(fgrad.dtypes.float32).numpy()


def _is_uniform(name: str) -> bool:
    builder, args = GEN.CASES[name][:2]
    return builder.endswith("uniform") or (builder == "variance_scaling" and args[2] == "uniform")


@pytest.mark.parametrize("name", sorted(GEN.CASES))
def test_same_numbers_as_jax(name: str) -> None:
    got, want = _draw(name), FIX[name]
    if _is_uniform(name):
        np.testing.assert_array_equal(got, want)
    elif "orthogonal" in name:
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-5)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_builder_aliases_and_protocol() -> None:
    assert I.xavier_uniform is I.glorot_uniform and I.xavier_normal is I.glorot_normal
    assert I.kaiming_uniform is I.he_uniform and I.kaiming_normal is I.he_normal
    assert isinstance(I.glorot_normal(), I.Initializer)
    assert fgrad.nn.initializers is I


@pytest.mark.parametrize("name", BUILDERS)
def test_variance_follows_the_fans(name: str) -> None:
    shape = (300, 200)
    scale, fan, dist = SPEC[name]
    w = getattr(I, name)()(KEY, shape).numpy()
    n = {"in": 300, "avg": 250}[fan]
    assert w.shape == shape and w.dtype == np.float32
    assert abs(w.mean()) < 3 * np.sqrt(scale / n / w.size) + 1e-6
    np.testing.assert_allclose(w.var(), scale / n, rtol=0.03)
    bound = np.sqrt(3 * scale / n) if dist == "u" else 2 * np.sqrt(scale / n) / .87962566103423978
    assert np.abs(w).max() <= bound * (1 + 1e-6)
    assert np.abs(w).max() > 0.95 * bound  # the draws reach their bounds


def test_fan_modes_and_axes() -> None:
    shape = (3, 3, 16, 8)  # a conv kernel: receptive field 9, in 16, out 8
    fans = {"fan_in": 9 * 16, "fan_out": 9 * 8, "fan_avg": 9 * 12,
            "fan_geo_avg": 9 * np.sqrt(16 * 8)}
    for mode, n in fans.items():
        w = I.variance_scaling(2.0, mode, "uniform")(KEY, shape).numpy()
        assert np.abs(w).max() <= np.sqrt(6.0 / n) * (1 + 1e-6)
        assert np.abs(w).max() > 0.98 * np.sqrt(6.0 / n)
    assert I._compute_fans(shape) == (144.0, 72.0)
    assert I._compute_fans((5, 4, 3), in_axis=0, out_axis=(1, 2)) == (5.0, 12.0)
    assert I._compute_fans((7, 5, 4, 3), in_axis=-2, out_axis=-1, batch_axis=0) == (20.0, 15.0)
    assert I._compute_fans((6,), in_axis=0, out_axis=0) == (1.0, 1.0)  # as JAX computes it
    # in_axis/out_axis/batch_axis reach the draws: fan_in = 2 * 4 = 8 here.
    w = I.variance_scaling(1.0, "fan_in", "uniform", in_axis=(0, 2), out_axis=1,
                           batch_axis=3)(KEY, (2, 50, 4, 30)).numpy()
    assert np.abs(w).max() <= np.sqrt(3 / 8) * (1 + 1e-6)
    np.testing.assert_allclose(w.var(), 1 / 8, rtol=0.05)


def test_truncated_normal_bounds_and_scale() -> None:
    w = I.truncated_normal(0.5, lower=-1.0, upper=0.5)(KEY, (200, 100)).numpy()
    assert w.min() > -0.5 and w.max() < 0.25
    assert w.min() < -0.49 and w.max() > 0.24
    w = I.truncated_normal()(KEY, (200, 100)).numpy()
    assert np.abs(w).max() < 0.02
    # variance_scaling corrects the truncation: the draws' stddev is sqrt(scale / fan).
    w = I.variance_scaling(1.0, "fan_in", "truncated_normal")(KEY, (400, 100)).numpy()
    np.testing.assert_allclose(w.std(), np.sqrt(1 / 400), rtol=0.02)
    np.testing.assert_allclose(I.normal(0.2)(KEY, (300, 100)).numpy().std(), 0.2, rtol=0.02)
    u = I.uniform(0.3)(KEY, (300, 100)).numpy()
    assert u.min() >= 0 and u.max() < 0.3 and abs(u.mean() - 0.15) < 0.005


@pytest.mark.parametrize("shape,column_axis", [((64, 32), -1), ((32, 64), -1),
                                                ((4, 6, 10), -1), ((12, 3, 5), 0)])
def test_orthogonal_is_orthogonal(shape: tuple[int, ...], column_axis: int) -> None:
    w = I.orthogonal(2.0, column_axis)(KEY, shape).numpy()
    assert w.shape == shape
    m = np.moveaxis(w, column_axis, -1).reshape(-1, shape[column_axis]) / 2.0
    gram = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
    np.testing.assert_allclose(gram, np.eye(gram.shape[0]), atol=1e-5)


def test_delta_orthogonal_puts_an_orthogonal_matrix_at_the_centre() -> None:
    w = I.delta_orthogonal()(KEY, (3, 4, 5, 6)).numpy()
    centre = w[1, 1]
    np.testing.assert_allclose(centre @ centre.T, np.eye(5), atol=1e-5)
    rest = w.copy()
    rest[1, 1] = 0
    assert not rest.any()
    with pytest.raises(ValueError, match="3-, 4- or 5-d"):
        I.delta_orthogonal()(KEY, (4, 4))
    with pytest.raises(ValueError, match="fan_in 6 must be at most fan_out 5"):
        I.delta_orthogonal()(KEY, (3, 6, 5))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_dtypes(dtype: str) -> None:
    want = fgrad.dtypes.bfloat16 if dtype == "bfloat16" else fgrad.dtypes.float16 \
        if dtype == "float16" else fgrad.dtypes.float64
    for init in (I.glorot_uniform(), I.he_normal(), I.normal(), I.uniform(),
                 I.truncated_normal(), I.orthogonal(), I.zeros, I.ones, I.constant(2.0)):
        out = init(KEY, (6, 4), dtype)
        assert out.shape == (6, 4) and out.dtype == want
    assert I.lecun_normal(dtype=dtype)(KEY, (3, 2)).dtype == want  # the builder's default
    assert I.lecun_normal()(KEY, (3, 2)).dtype == fgrad.dtypes.float32


def test_constant_zeros_ones() -> None:
    np.testing.assert_array_equal(I.zeros(KEY, (2, 3)).numpy(), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(I.ones(KEY, 4, "int32").numpy(), np.ones(4, np.int32))
    np.testing.assert_array_equal(I.constant(-7.0)(KEY, (2, 2)).numpy(), np.full((2, 2), -7.0))
    row = I.constant(np.array([1.0, 2.0, 3.0], np.float32))(KEY, (2, 3)).numpy()
    np.testing.assert_array_equal(row, [[1, 2, 3], [1, 2, 3]])
    assert I.constant(3, dtype="int32")(KEY, ()).dtype == fgrad.dtypes.int32


def test_under_jit_the_same_numbers() -> None:
    init = I.glorot_uniform()
    eager = init(KEY, (5, 7)).numpy()
    traced = fgrad.jit(lambda k: init(k, (5, 7)))(KEY).numpy()
    np.testing.assert_array_equal(eager, traced)


def test_clear_errors() -> None:
    with pytest.raises(ValueError, match="invalid mode 'fan'"):
        I.variance_scaling(1.0, "fan", "normal")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid distribution 'cauchy'"):
        I.variance_scaling(1.0, "fan_in", "cauchy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="default in_axis=-2"):
        I.glorot_normal()(KEY, (5,))
    with pytest.raises(ValueError, match="in_axis=3 is out of range"):
        I.glorot_normal(in_axis=3)(KEY, (5, 4))
    with pytest.raises(TypeError, match="not a float dtype"):
        I.he_uniform()(KEY, (5, 4), "int32")
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        I.orthogonal()(KEY, (5,))
    assert I.orthogonal()(KEY, (0, 3)).shape == (0, 3)
