"""Conformance with PyTorch: values and gradients at the points where fgrad used to differ.

References are PyTorch's, stored in fixtures/conformance.npz by fixtures/gen_conformance.py
(float64, stored as float32): stable softplus / logsigmoid / logaddexp / BCE-with-logits
(derivative 0.5 at 0), pow at base 0, exponent 0 and negative bases, acosh below -1, var/std
without degrees of freedom, the exact gelu, copysign, log10, diag/diagonal/unfold, normalize,
softmin, reflect/replicate padding with negative widths and uint8 bilinear resizing.
Array-only rules (indices, dtypes, arange) are checked against NumPy inline.
"""
from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, dtypes

FIX = np.load(pathlib.Path(__file__).parent / "fixtures" / "conformance.npz")
GRAD_CASES = {c["name"]: c for c in json.loads(str(FIX["__grad__"]))}
VALUE_CASES = {c["name"]: c for c in json.loads(str(FIX["__value__"]))}

FGRAD = {
    "softplus": lambda x: x.softplus(),
    "softplus_beta2": lambda x: x.softplus(beta=2.0),
    "logsigmoid": lambda x: x.logsigmoid(),
    "logaddexp": lambda x, y: x.logaddexp(y),
    "bce_logits": lambda x, y: x.binary_crossentropy_logits(y),
    "pow_x_0": lambda x: x ** 0.0,
    "pow_x_m1": lambda x: x ** -1.0,
    "pow_x_03": lambda x: x ** 0.3,
    "pow_x_m03": lambda x: x ** -0.3,
    "pow_0_x": lambda x: 0.0 ** x,
    "pow_neg_base": lambda x: (-2.0) ** x,
    "pow_xy": lambda x, y: x ** y,
    "acosh": lambda x: x.acosh(),
    "std_nodof": lambda x: x.std(axis=(0, 4), correction=5),
    "std_nodof_zero": lambda x: x.std(axis=(0, 3), correction=1),
    "gelu_none": lambda x: x.gelu(approximate="none"),
    "gelu_tanh": lambda x: x.gelu(approximate="tanh"),
    "copysign": lambda x, y: x.copysign(y),
    "log10": lambda x: x.log10(),
    "diag": lambda x: x.diag(),
    "diagonal": lambda x: x.diagonal(),
    "diagonal_k1": lambda x: x.diagonal(offset=1),
    "diagonal_km1": lambda x: x.diagonal(offset=-1),
    "diagonal_rect": lambda x: x.diagonal(offset=2),
    "diagonal_batched": lambda x: x.diagonal(dim1=-2, dim2=-1),
    "diagonal_dims": lambda x: x.diagonal(offset=-1, dim1=2, dim2=0),
    "unfold_a": lambda x: x.unfold(0, 2, 1),
    "unfold_b": lambda x: x.unfold(0, 7, 3),
    "unfold_c": lambda x: x.unfold(2, 2, 8),
    "unfold_d": lambda x: x.unfold(-1, 2, 2),
    "unfold_e": lambda x: x.unfold(1, 0, 8),
    "normalize": lambda x: x.normalize(),
    "normalize_p1_dim0": lambda x: x.normalize(p=1, dim=0),
    "normalize_p3": lambda x: x.normalize(p=3, dim=-1),
    "normalize_pinf": lambda x: x.normalize(p=math.inf),
    "softmin": lambda x: x.softmin(axis=1),
    "pad_reflect_neg": lambda x: x.pad((3, -5, 1, -5), mode="reflect"),
    "pad_reflect_neg2": lambda x: x.pad((-1, 2, 2, -1), mode="reflect"),
    "pad_replicate_neg": lambda x: x.pad((3, -5, 1, -5), mode="replicate"),
    "pad_replicate_neg2": lambda x: x.pad((-1, 2, 2, -1), mode="replicate"),
    "interp_u8_down": lambda x: x.interpolate((5, 7), mode="bilinear"),
    "interp_u8_up": lambda x: x.interpolate((20, 33), mode="bilinear"),
    "interp_u8_corners": lambda x: x.interpolate((9, 24), mode="bilinear", align_corners=True),
    "int_pow_2f": lambda x: x ** 2.0,
    "int_pow_1f": lambda x: x ** 1.0,
    "int_pow_05": lambda x: x ** 0.5,
    "int_pow_2": lambda x: x ** 2,
    "logaddexp_inf": lambda x, y: x.logaddexp(y),
    "copysign_int": lambda x, y: x.copysign(y),
    "softplus_extreme": lambda x: x.softplus(),
}


def _close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_values_and_gradients_match_torch(name: str) -> None:
    case, fn = GRAD_CASES[name], FGRAD[name]
    ins = [Tensor(FIX[f"{name}:in{i}"]) for i in range(case["n_in"])]
    _close(fn(*ins).numpy(), FIX[f"{name}:out"])
    n = case["n_diff"]

    def total(*diff: Tensor) -> Tensor:
        return fn(*diff, *ins[n:]).sum()

    grads = fgrad.grad(total, argnums=tuple(range(n)))(*ins[:n])
    for i, g in enumerate(grads):
        _close(g.numpy(), FIX[f"{name}:grad{i}"])


@pytest.mark.parametrize("name", sorted(VALUE_CASES))
def test_values_match_torch_exactly(name: str) -> None:
    ins = [Tensor(FIX[f"{name}:in{i}"]) for i in range(VALUE_CASES[name]["n_in"])]
    got, want = FGRAD[name](*ins).numpy(), FIX[f"{name}:out"]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_copysign_takes_the_sign_bit_of_zero_and_nan() -> None:
    name = "copysign"
    got = Tensor(FIX[f"{name}:in0"]).copysign(Tensor(FIX[f"{name}:in1"])).numpy()
    np.testing.assert_array_equal(np.signbit(got), np.signbit(FIX[f"{name}:out"]))


def test_softplus_gradient_at_zero_moves_a_zero_initialised_model() -> None:
    # a parameter starting at 0 gets gradient sigmoid(0) = 0.5 (was 0: it never moved)
    g = fgrad.grad(lambda w: (w * Tensor([1.0, 2.0])).softplus().sum())(Tensor(0.0))
    np.testing.assert_allclose(g.numpy(), 0.5 * 1.0 + 0.5 * 2.0)


def test_overflowing_expression_shows_inf_and_the_stable_form_is_right() -> None:
    # the NaN-safe rules keep the gradient of log(1 + exp(x)) at 0 where exp overflows (JAX:
    # NaN); the forward value shows the overflow, and softplus gives the true gradient 1.
    value, g = fgrad.value_and_grad(lambda x: (1 + x.exp()).log())(Tensor(100.0))
    assert math.isinf(value.item()) and g.item() == 0.0
    np.testing.assert_allclose(fgrad.grad(lambda x: x.softplus())(Tensor(100.0)).numpy(), 1.0)


@pytest.mark.parametrize("index", [((0,),), (((0,),),), ((1, 0), slice(None)),
                                   ([[0]], [1, 2]), ((0, 1), (2, 1), 0)])
def test_tuples_inside_an_index_are_index_arrays(index) -> None:
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(Tensor(x)[index].numpy(), x[index])


def test_list_of_tensors_and_tuples_inside_an_index() -> None:
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    i = np.array([1, 0, 1])
    got = Tensor(x)[(Tensor(i), (1, 1, 2))].numpy()
    np.testing.assert_array_equal(got, x[(i, (1, 1, 2))])


def test_bool_mask_covering_its_axes_still_selects() -> None:
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    mask = np.array([True, False, True, True])
    np.testing.assert_array_equal(Tensor(x)[:, Tensor(mask)].numpy(), x[:, mask])
    np.testing.assert_array_equal(Tensor(x)[Tensor(x > 4)].numpy(), x[x > 4])


def test_scalar_tensor_accepts_axis_0_and_minus_1() -> None:
    x = Tensor(3.0)
    for out in (x.sum(0), x.sum(-1), x.cumsum(0), x.cumprod(-1), x.squeeze(0),
                x.cummax(0)[0], x.cummin(-1)[0]):
        assert out.shape == () and out.item() == 3.0


def test_arange_dtypes_follow_numpy_ranges() -> None:
    assert Tensor.arange(2**31, 2**31 + 3).dtype == dtypes.int64
    np.testing.assert_array_equal(Tensor.arange(2**31, 2**31 + 3).numpy(),
                                  np.arange(2**31, 2**31 + 3, dtype=np.int64))
    assert Tensor.arange(10).dtype == dtypes.int32
    np.testing.assert_array_equal(Tensor.arange(-128, 128, dtype=dtypes.int8).numpy(),
                                  np.arange(-128, 128, dtype=np.int8))
    np.testing.assert_array_equal(Tensor.arange(127, -129, -1, dtype=dtypes.int8).numpy(),
                                  np.arange(127, -129, -1).astype(np.int8))


@pytest.mark.parametrize("args", [(2**33,), (129,), (-129, 128), (128, 0, -1), (127, -130, -1)])
def test_arange_values_outside_an_explicit_dtype_overflow(args) -> None:
    dtype = dtypes.int32 if args == (2**33,) else dtypes.int8
    with pytest.raises(OverflowError, match="do not fit"):
        Tensor.arange(*args, dtype=dtype)


def test_arange_larger_than_memory_is_refused_before_allocating() -> None:
    with pytest.raises(MemoryError, match="arange: .* GiB"):
        Tensor.arange(2**50)


def test_nonzero_fill_value_keeps_int32() -> None:
    out = Tensor([1, 0]).nonzero(size=3, fill_value=-1.5)
    assert out.dtype == dtypes.int32
    np.testing.assert_array_equal(out.numpy(), [[0], [-1], [-1]])


def test_dtype_limits_match_numpy() -> None:
    for dt in (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.int32, dtypes.int64,
               dtypes.uint32, dtypes.uint64):
        info = np.iinfo(dt.np)
        assert (dt.min, dt.max) == (int(info.min), int(info.max))
    assert (dtypes.float32.min, dtypes.float16.max) == (-math.inf, math.inf)
    assert (dtypes.bool.min, dtypes.bool.max) == (False, True)


def test_stack_and_cat_accept_a_sequence() -> None:
    a, b = np.ones((2, 3), np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(Tensor.stack([Tensor(a), Tensor(b)], dim=1).numpy(),
                                  np.stack([a, b], axis=1))
    np.testing.assert_array_equal(Tensor.cat((Tensor(a), Tensor(b)), dim=-1).numpy(),
                                  np.concatenate([a, b], axis=-1))
    with pytest.raises(ValueError, match="either as one sequence"):
        Tensor.stack((Tensor(a), Tensor(b)), Tensor(a))


def test_roll_with_a_one_tuple_shift_and_matmul_dtype() -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(Tensor(x).roll((3,)).numpy(), np.roll(x, 3))
    y = Tensor(x).matmul(Tensor(x.T), dtype=dtypes.float64)
    assert y.dtype == dtypes.float64
    np.testing.assert_array_equal(y.numpy(), x.astype(np.float64) @ x.T.astype(np.float64))
    np.testing.assert_array_equal(Tensor(x).dot(w=Tensor(x.T), dtype=dtypes.float64).numpy(),
                                  y.numpy())
    assert Tensor(x).contiguous_backward().shape == (2, 4)
