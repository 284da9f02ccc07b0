"""Conformance with PyTorch and JAX: which mistakes raise, and with which exception class.

fixtures/conformance.npz (written by fixtures/gen_conformance.py) stores, per case, the class
PyTorch raises for the same call (JAX for custom_vjp/custom_jvp rules). fgrad must raise an
instance of it, and also keep the Python class that describes the mistake (ValueError,
TypeError or IndexError), so code written against either contract catches the error.
"""
from __future__ import annotations

import builtins
import json
import pathlib

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, dtypes

FIX = np.load(pathlib.Path(__file__).parent / "fixtures" / "conformance.npz")
REFERENCE = json.loads(str(FIX["__errors__"]))

z = Tensor(1.0)
m = Tensor.ones(3, 4)


def _custom_vjp(bwd):
    @fgrad.custom_vjp
    def f(x):
        return (x * x).sum()
    f.defvjp(lambda x: (f(x), x), bwd)
    return lambda: fgrad.grad(f)(Tensor([1.0, 1.0]))


def _custom_jvp(tangent):
    @fgrad.custom_jvp
    def h(x):
        return x.sin()

    @h.defjvp
    def rule(p, t):
        return h(p[0]), tangent(t[0])
    return lambda: fgrad.jvp(h, (Tensor([1.0, 1.0]),), (Tensor([1.0, 1.0]),))


# name: (fgrad call, the Python class fgrad raises besides the reference's)
FGRAD = {
    "mask_short": (lambda: Tensor([10.0, 20.0, 30.0])[Tensor([True, False])], IndexError),
    "mask_long": (lambda: Tensor([10.0, 20.0])[Tensor([True, False, True])], IndexError),
    "mask_2d": (lambda: m[Tensor(np.ones((3, 3), bool))], IndexError),
    "scalar_sum_axis": (lambda: z.sum(1), IndexError),
    "scalar_cumsum_axis": (lambda: z.cumsum(1), IndexError),
    "scalar_cumprod_axis": (lambda: z.cumprod(1), IndexError),
    "scalar_cummax_axis": (lambda: z.cummax(1), IndexError),
    "scalar_cummin_axis": (lambda: z.cummin(1), IndexError),
    "scalar_squeeze_axis": (lambda: z.squeeze(10), IndexError),
    "int_neg_pow": (lambda: Tensor([-2, 0, 2]) ** -2, ValueError),
    "scatter_mixed_dtype": (lambda: Tensor.zeros(3, 4).half().scatter(
        1, Tensor.zeros(3, 4, dtype=dtypes.int32), Tensor.ones(3, 4)), TypeError),
    "scatter_reduce_mixed_dtype": (lambda: Tensor.zeros(3, 4).half().scatter_reduce(
        1, Tensor.zeros(3, 4, dtype=dtypes.int32), Tensor.ones(3, 4), "sum"), TypeError),
    "matmul_inner": (lambda: Tensor.ones(2, 4) @ Tensor.ones(1, 3), ValueError),
    "matmul_0d": (lambda: z @ z, ValueError),
    "flip_repeated": (lambda: m.flip((1, -1)), ValueError),
    "lshift_float": (lambda: Tensor([1.0]) << 2, TypeError),
    "cat_0d": (lambda: z.cat(z), ValueError),
    "cat_shapes": (lambda: m.cat(Tensor.ones(3, 5)), ValueError),
    "pad_mode": (lambda: Tensor.ones(3, 3, 3).pad((3, 0), mode="typo"), ValueError),
    "pad_odd": (lambda: Tensor.ones(3, 3).pad((2, 0, 2)), ValueError),
    "permute_short": (lambda: Tensor.ones(3, 4, 5, 6).permute((0, 2)), ValueError),
    "permute_repeat": (lambda: Tensor.ones(3, 4, 5, 6).permute((0, 0, 1, 2)), ValueError),
    "reshape_two_minus_one": (lambda: m.reshape((-1, -1, 2)), ValueError),
    "reshape_size": (lambda: m.reshape((5, 3)), ValueError),
    "gather_ndim": (lambda: Tensor.ones(4, 5, 6).gather(0, Tensor([1])), ValueError),
    "scatter_ndim": (lambda: Tensor.ones(2, 3, 10).scatter(
        1, Tensor.zeros(3, 4, 5, dtype=dtypes.int32), Tensor.ones(10, 10, 10)), ValueError),
    "einsum_sizes": (lambda: Tensor.einsum("ij,jk->ik", Tensor.ones(2, 3), Tensor.ones(4, 5)),
                     ValueError),
    "diagonal_same_dims": (lambda: m.diagonal(dim1=0, dim2=0), ValueError),
    "unfold_too_big": (lambda: Tensor.ones(8).unfold(0, 9, 3), ValueError),
    "unfold_bad_dim": (lambda: Tensor.ones(8).unfold(1, 8, 3), IndexError),
    "unfold_bad_step": (lambda: Tensor.ones(8).unfold(0, 1, -1), ValueError),
    "roll_two_shifts": (lambda: m.roll((1, 2)), ValueError),
    "roll_shifts_dims": (lambda: m.roll(1, (0, 1)), ValueError),
    "linspace_bool": (lambda: Tensor.linspace(5, 10, 3, dtype=dtypes.bool), ValueError),
    "clip_none": (lambda: m.clip(None, None), ValueError),
    "div_rounding": (lambda: m.div(m, rounding_mode="typo"), ValueError),
    "conv2d_padding": (lambda: Tensor.ones(2, 16, 2, 2).conv2d(Tensor.ones(32, 16, 3, 3),
                                                               padding=(1, 1, 1)), ValueError),
    "vjp_bwd_shape": (_custom_vjp(lambda x, g: ((g * x).sum(),)), RuntimeError),
    "vjp_bwd_structure": (_custom_vjp(lambda x, g: ([g * x],)), RuntimeError),
    "jvp_tangent_shape": (_custom_jvp(lambda t: t.sum()), RuntimeError),
    "jvp_tangent_structure": (_custom_jvp(lambda t: [t]), RuntimeError),
}


def test_every_reference_case_has_an_fgrad_call() -> None:
    assert set(FGRAD) == set(REFERENCE)


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_error_class_matches_the_reference(name: str) -> None:
    call, own_class = FGRAD[name]
    reference = getattr(builtins, REFERENCE[name])
    # PyTorch's NotImplementedError (a RuntimeError) is met by any RuntimeError for ops
    # fgrad rejects for a reason of its own (bool linspace, shifts of floats)
    expected = RuntimeError if reference is NotImplementedError else reference
    with pytest.raises(expected) as info:
        call()
    assert isinstance(info.value, own_class)


def test_pad_with_an_unknown_mode_is_also_not_implemented() -> None:
    with pytest.raises(NotImplementedError, match="mode must be one of"):
        Tensor.ones(3, 3).pad((1, 1), mode="typo")


def test_errors_name_the_problem() -> None:
    with pytest.raises(IndexError, match=r"bool mask of shape \(2,\) does not match .*\(3,\)"):
        Tensor([10.0, 20.0, 30.0])[Tensor([True, False])]
    with pytest.raises(RuntimeError, match="integers to negative integer powers"):
        Tensor([2]) ** -1
    with pytest.raises(ValueError, match=r"custom_vjp bwd rule <lambda>: .* float\[2\], got "):
        _custom_vjp(lambda x, g: ((g * x).sum(),))()
    with pytest.raises(TypeError, match="custom_jvp rule rule: the tangent output"):
        _custom_jvp(lambda t: t.sum())()
    with pytest.raises(TypeError, match="src has dtype float but self has half"):
        Tensor.zeros(2).half().scatter(0, Tensor([0]), Tensor([1.0]))


def test_custom_rules_with_the_right_outputs_still_work() -> None:
    g = _custom_vjp(lambda x, g: (2 * g * x,))()
    np.testing.assert_allclose(g.numpy(), [2.0, 2.0])
    _, t = _custom_jvp(lambda t: t * 3)()
    np.testing.assert_allclose(t.numpy(), [3.0, 3.0])
