"""The conformance table of fgrad.numpy: each row names an fnp function, its NumPy reference
and its arguments (values fixed by a seeded rng). `grad=True` rows are differentiable in
their float arguments; test_fnp_conformance.py checks them against central differences of
the NumPy reference."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

RNG = np.random.default_rng(0)
F32 = np.float32


@dataclass
class Row:
    """fnp.<name>(*args, **kwargs) against ref(*args, **kwargs)."""

    name: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    ref: Callable[..., Any] | None = None
    grad: bool = False
    tol: float = 1e-5
    check_dtype: bool = True


def normal(*shape: int) -> np.ndarray:
    return RNG.normal(size=shape).astype(F32)


def positive(*shape: int) -> np.ndarray:
    return RNG.uniform(0.2, 3.0, size=shape).astype(F32)


def unit(*shape: int) -> np.ndarray:
    return RNG.uniform(-0.9, 0.9, size=shape).astype(F32)


def ints(*shape: int, lo: int = -5, hi: int = 6, dtype: Any = np.int32) -> np.ndarray:
    return RNG.integers(lo, hi, size=shape).astype(dtype)


def distinct(*shape: int) -> np.ndarray:
    """Values far apart (no ties), so max/sort/median gradients are well defined."""
    n = int(np.prod(shape))
    return (RNG.permutation(n).astype(F32) * 0.37 + RNG.uniform(0, 0.1, n).astype(F32)
            ).reshape(shape)


def spd(n: int) -> np.ndarray:
    a = RNG.normal(size=(n, n))
    return (a @ a.T + n * np.eye(n)).astype(F32)


def well(n: int, m: int | None = None) -> np.ndarray:
    return (RNG.normal(size=(n, m or n)) + 3 * np.eye(n, m or n)).astype(F32)


UNARY_DOMAINS = {
    "sqrt": positive, "cbrt": positive, "reciprocal": positive, "log": positive,
    "log1p": positive, "log2": positive, "log10": positive, "arcsin": unit, "arccos": unit,
    "arctanh": unit, "arccosh": lambda *s: positive(*s) + 1.1,
}
UNARY = ["abs", "absolute", "negative", "positive", "square", "sqrt", "cbrt", "reciprocal",
         "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan",
         "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
         "arctanh", "deg2rad", "rad2deg", "radians", "degrees", "sinc"]
NONDIFF_UNARY = ["sign", "floor", "ceil", "trunc", "fix", "rint", "round", "around",
                 "signbit", "isnan", "isinf", "isfinite", "isposinf", "isneginf",
                 "logical_not"]
BINARY = ["add", "subtract", "multiply", "divide", "true_divide", "power", "float_power",
          "maximum", "minimum", "fmax", "fmin", "hypot", "arctan2", "logaddexp",
          "logaddexp2", "copysign"]
BINARY_NONDIFF = ["floor_divide", "mod", "remainder", "fmod", "heaviside", "equal",
                  "not_equal", "less", "less_equal", "greater", "greater_equal",
                  "logical_and", "logical_or", "logical_xor", "isclose"]
INT_BINARY = ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift",
              "floor_divide", "mod", "add", "multiply", "maximum"]


def _elementwise() -> list[Row]:
    rows = []
    for name in UNARY:
        gen = UNARY_DOMAINS.get(name, normal)
        rows.append(Row(name, (gen(3, 4),), grad=name not in ("abs", "absolute")))
    rows.append(Row("abs", (distinct(3, 4) - 5.2,), grad=True))
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -2.5, 0.5], F32)
    for name in NONDIFF_UNARY:
        rows.append(Row(name, (np.concatenate([normal(6) * 3, specials]),)))
    rows.append(Row("round", (normal(8) * 30,), {"decimals": 1}, tol=1e-4))
    rows.append(Row("sin", (ints(5),)))  # int input -> float32
    rows.append(Row("sqrt", (ints(5, lo=0),)))
    rows.append(Row("bitwise_not", (ints(6),)))
    rows.append(Row("invert", (ints(6, dtype=np.uint8, lo=0),)))
    rows.append(Row("nan_to_num", (specials,)))
    rows.append(Row("nan_to_num", (specials,), {"nan": 1.0, "posinf": 9.0, "neginf": -9.0}))
    for name in BINARY:
        first = positive(3, 1, 4) if name in ("power", "float_power") else normal(3, 1, 4)
        rows.append(Row(name, (first, normal(5, 4)),
                        grad=name not in ("copysign", "fmax", "fmin", "maximum", "minimum")))
    rows.append(Row("maximum", (distinct(3, 4), distinct(3, 4)), grad=True))
    rows.append(Row("copysign", (distinct(4) + 1, normal(4)), grad=True))
    for name in BINARY_NONDIFF:
        a = normal(3, 1, 4) * 3
        b = np.where(np.abs(n := normal(5, 4)) < 0.3, 1.0, n).astype(F32)
        rows.append(Row(name, (a, b)))
    for name in INT_BINARY:
        b = ints(5, 4, lo=1, hi=4)
        rows.append(Row(name, (ints(3, 1, 4, lo=0, hi=100), b)))
    rows.append(Row("add", (ints(4, dtype=np.int8), 3)))          # weak scalar keeps int8
    rows.append(Row("multiply", (ints(4, dtype=np.int16), 2.5)))  # float scalar -> float32
    rows.append(Row("divide", (ints(4), ints(4, lo=1))))         # ints -> float32
    rows.append(Row("mod", (ints(6), np.int32(-3))))
    rows.append(Row("where", (normal(3, 4) > 0, normal(3, 4), normal(4)), grad=True))
    rows.append(Row("where", (normal(4) > 0, 1.0, 0.0)))
    rows.append(Row("clip", (normal(3, 4),), {"a_min": -0.5, "a_max": 0.5},
                    ref=lambda x, a_min, a_max: np.clip(x, a_min, a_max)))
    rows.append(Row("clip", (normal(3, 4), normal(4) - 1, normal(3, 1) + 1),
                    ref=lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi)))
    rows.append(Row("allclose", (normal(4), normal(4))))
    rows.append(Row("array_equal", (ints(4), ints(4))))
    rows.append(Row("divmod", (normal(5) * 4, positive(5))))
    return rows


def _creation() -> list[Row]:
    return [
        Row("zeros", ((2, 3),)), Row("ones", (4,), {"dtype": np.int32}),
        Row("full", ((2, 2), 7)), Row("full", ((2, 2), 1.5)),
        Row("full", ((2, 3), np.arange(3, dtype=F32))),
        Row("zeros_like", (ints(3),)), Row("ones_like", (normal(2, 2),)),
        Row("full_like", (normal(3), 2)), Row("empty_like", (normal(3),), ref=np.zeros_like),
        Row("arange", (5,)), Row("arange", (1, 10, 3)), Row("arange", (0.0, 1.0, 0.25)),
        Row("linspace", (0.0, 1.0, 7)), Row("linspace", (2, 3), {"num": 5, "endpoint": False}),
        Row("linspace", (np.zeros(2, F32), np.ones(2, F32), 4), {"axis": -1}),
        Row("logspace", (0.0, 2.0, 5), tol=1e-4), Row("eye", (3,)), Row("eye", (3, 4, 1)),
        Row("identity", (3,)), Row("tri", (3, 4, -1)),
        Row("tril", (normal(3, 4),)), Row("triu", (normal(2, 3, 4), 1)),
        Row("tril", (normal(4, 4), -1), grad=True),
        Row("diag", (normal(3),), grad=True), Row("diag", (normal(3), 1)),
        Row("diag", (normal(3, 4),)), Row("diag", (normal(3, 4), -1), grad=True),
        Row("diagflat", (normal(2, 2),)),
        Row("meshgrid", (np.arange(3), np.arange(2, dtype=F32))),
        Row("meshgrid", (np.arange(3), np.arange(2), np.arange(4)), {"indexing": "ij"}),
        Row("array", ([[1, 2], [3, 4]],)), Row("asarray", ([1.5, 2.0],)),
        Row("asarray", (True,)),
        Row("astype", (normal(3) * 4, np.int16), ref=lambda x, dt: x.astype(dt)),
    ]


def _reductions() -> list[Row]:
    x = normal(3, 4, 5)
    rows = []
    for name in ("sum", "prod", "mean", "max", "min", "amax", "amin"):
        for axis in (None, 1, -1, (0, 2), (-1, -3)):
            rows.append(Row(name, (distinct(3, 4, 5) * 0.1 if name != "prod" else x,),
                            {"axis": axis}, grad=True, tol=1e-4))
        rows.append(Row(name, (ints(3, 4, lo=1, hi=4),), {"axis": 0, "keepdims": True}))
    rows.append(Row("sum", (ints(5, dtype=np.int8),)))
    rows.append(Row("sum", (ints(5, dtype=np.uint8, lo=0),)))
    rows.append(Row("sum", (normal(3, 4) > 0,), {"axis": -1}))
    rows.append(Row("sum", (x,), {"axis": 1, "where": x > 0}, grad=True))
    for name in ("var", "std"):
        for kw in ({}, {"axis": -1, "ddof": 1}, {"axis": (0, 1), "keepdims": True}):
            rows.append(Row(name, (x,), kw, grad=True, tol=1e-4))
        rows.append(Row(name, (ints(6),)))
    for name in ("argmax", "argmin"):
        for kw in ({}, {"axis": -2}, {"axis": 0, "keepdims": True}):
            rows.append(Row(name, (distinct(3, 4),), kw))
    for name in ("any", "all"):
        rows += [Row(name, (normal(3, 4) > 0,), {"axis": -1}), Row(name, (ints(3, 4),))]
    for name in ("cumsum", "cumprod"):
        rows += [Row(name, (normal(3, 4),), {"axis": -1}, grad=True, tol=1e-4),
                 Row(name, (normal(3, 4),), grad=True, tol=1e-4),
                 Row(name, (ints(5, lo=1, hi=3, dtype=np.int8),))]
    d = distinct(4, 6)
    rows += [
        Row("median", (d,), grad=True), Row("median", (d,), {"axis": -1}, grad=True),
        Row("median", (distinct(5, 3),), {"axis": 0, "keepdims": True}),
        Row("quantile", (d, 0.3), {"axis": 1}, grad=True),
        Row("quantile", (d, np.array([0.1, 0.5, 0.95], F32)), {"axis": -1}),
        Row("quantile", (d, 0.3), {"axis": 1, "method": "nearest"}),
        Row("quantile", (d, 0.3), {"method": "lower"}),
        Row("quantile", (d, 0.3), {"method": "higher"}),
        Row("quantile", (d, 0.3), {"axis": 0, "method": "midpoint"}),
        Row("percentile", (d, 40.0), {"axis": 0}, grad=True),
        Row("ptp", (x,), {"axis": -1}), Row("count_nonzero", (ints(3, 4),), {"axis": 1}),
        Row("average", (x,), {"axis": 1}, grad=True),
        Row("average", (x,), {"axis": -1, "weights": positive(5)}, grad=True),
        Row("average", (x,), {"weights": positive(3, 4, 5), "returned": True}),
    ]
    with_nan = normal(3, 4)
    with_nan[0, 1] = with_nan[2, 3] = np.nan
    for name in ("nansum", "nanprod", "nanmean", "nanmax", "nanmin", "nanvar", "nanstd",
                 "nanargmax", "nanargmin", "nancumsum", "nanmedian"):
        rows.append(Row(name, (with_nan,), {"axis": -1}))
    rows.append(Row("nanmean", (with_nan,)))
    return rows


def _shape() -> list[Row]:
    x = normal(2, 3, 4)
    g = dict(grad=True)
    return [
        Row("reshape", (x, (4, -1)), **g), Row("ravel", (x,)), Row("transpose", (x,), **g),
        Row("transpose", (x, (1, -1, 0))), Row("swapaxes", (x, 0, -1), **g),
        Row("moveaxis", (x, 0, -1)), Row("moveaxis", (x, (0, 1), (-1, 0))),
        Row("expand_dims", (x, -1)), Row("expand_dims", (x, (0, 2))),
        Row("squeeze", (normal(1, 3, 1),)), Row("squeeze", (normal(1, 3, 1), -1)),
        Row("concatenate", ([x, x[:, :1]],), {"axis": -2}, **g),
        Row("concatenate", ([ints(3), normal(2)],), {"axis": None}),
        Row("stack", ([normal(3), normal(3)],), {"axis": -1}, **g),
        Row("vstack", ([normal(3), normal(2, 3)],)), Row("hstack", ([normal(2), normal(3)],)),
        Row("hstack", ([normal(2, 1), normal(2, 3)],)), Row("dstack", ([normal(2), normal(2)],)),
        Row("column_stack", ([normal(3), normal(3, 2)],)),
        Row("split", (normal(6, 2), 3)), Row("split", (normal(2, 7), [2, 5]), {"axis": -1}),
        Row("array_split", (normal(7), 3)), Row("hsplit", (normal(2, 4), 2)),
        Row("vsplit", (normal(4, 2), [1])),
        Row("tile", (normal(2, 3), 2), **g), Row("tile", (normal(3), (2, 1, 2))),
        Row("repeat", (normal(2, 3), 2), **g), Row("repeat", (normal(2, 3), 3), {"axis": -1}),
        Row("repeat", (normal(2, 3), [1, 0, 2]), {"axis": 1}),
        Row("flip", (x,)), Row("flip", (x, -1), **g), Row("fliplr", (normal(2, 3),)),
        Row("flipud", (normal(2, 3),)), Row("roll", (x, 2), **g),
        Row("roll", (x, -1, -1)), Row("roll", (x, (1, 2), (0, 2))),
        Row("rot90", (normal(2, 3),)), Row("rot90", (x, 3, (1, 2))), Row("rot90", (x, 2)),
        Row("broadcast_to", (normal(3, 1), (2, 3, 4)), **g),
        Row("broadcast_arrays", (normal(3, 1), normal(4))),
        Row("atleast_1d", (np.float32(2),)), Row("atleast_2d", (normal(3),)),
        Row("atleast_3d", (normal(3),)), Row("atleast_3d", (normal(2, 3),)),
        Row("pad", (normal(3, 4), 1), **g), Row("pad", (normal(3, 4), ((0, 1), (2, 0)))),
        Row("pad", (normal(3, 4), ((1, 2), (2, 1))), {"mode": "reflect"}, **g),
        Row("pad", (normal(3, 4), 2), {"mode": "edge"}, **g),
        Row("pad", (normal(3, 4), ((1, 1), (3, 0))), {"mode": "wrap"}, **g),
        Row("pad", (normal(3), 1), {"constant_values": 7}),
        Row("take", (x, np.array([0, 2, -1])), {"axis": -1}, **g),
        Row("take", (x, np.array([[1, 5], [7, 0]]))),
        Row("take_along_axis", (x, np.argsort(x, -1), -1), **g),
        Row("take_along_axis", (x, np.argsort(x, 0)[:1], 0)),
        Row("diagonal", (normal(3, 4),), **g), Row("diagonal", (x, 1, -1, -2)),
        Row("diagonal", (normal(3, 4), -1)), Row("trace", (normal(3, 4),), **g),
        Row("trace", (x, 0, 1, 2)),
        Row("shape", (x,)), Row("ndim", (x,)), Row("size", (x,)),
        Row("broadcast_shapes", ((3, 1), (4,))), Row("matrix_transpose", (x,)),
    ]


def _products() -> list[Row]:
    g = dict(grad=True, tol=1e-4)
    return [
        Row("dot", (normal(3), normal(3)), **g), Row("dot", (normal(2, 3), normal(3, 4)), **g),
        Row("dot", (normal(2, 3, 4), normal(5, 4, 2)), **g), Row("dot", (2.0, normal(3))),
        Row("vdot", (normal(2, 3), normal(3, 2)), **g), Row("inner", (normal(2, 3), normal(4, 3)),
                                                              **g),
        Row("outer", (normal(3), normal(2, 2)), **g),
        Row("matmul", (normal(2, 1, 3, 4), normal(5, 4, 2)), **g),
        Row("matmul", (normal(4), normal(3, 4, 2))), Row("matmul", (normal(2, 4), normal(4))),
        Row("matmul", (ints(2, 3), ints(3, 2))),
        Row("tensordot", (normal(2, 3, 4), normal(3, 4, 5)), **g),
        Row("tensordot", (normal(2, 3, 4), normal(4, 2)), {"axes": ([0, 2], [1, 0])}, **g),
        Row("tensordot", (normal(2, 3), normal(4, 5)), {"axes": 0}),
        Row("einsum", ("ij,jk->ik", normal(2, 3), normal(3, 4)), **g),
        Row("einsum", ("bij,bjk->bik", normal(2, 2, 3), normal(2, 3, 4))),
        Row("einsum", ("ii->i", normal(3, 3))), Row("einsum", ("ij->", normal(3, 3))),
        Row("kron", (normal(2, 3), normal(2, 2)), **g), Row("kron", (normal(3), normal(2))),
        Row("cross", (normal(4, 3), normal(3)), **g), Row("cross", (normal(2), normal(2)),
            ref=lambda a, b: a[0] * b[1] - a[1] * b[0]),
        Row("cross", (normal(3, 5), normal(3, 5)), {"axis": 0}),
        Row("sort", (distinct(3, 4),), grad=True), Row("sort", (normal(3, 4),), {"axis": 0}),
        Row("sort", (normal(3, 4),), {"axis": None}),
        Row("sort", (np.array([3, 1, np.nan, 2, -np.inf], F32),)),
        Row("argsort", (np.array([3, 1, 2, 1, 3, 0], F32),)),
        Row("argsort", (normal(3, 4),), {"axis": -2}),
        Row("searchsorted", (np.sort(normal(6)), normal(2, 3))),
        Row("searchsorted", (np.array([1, 2, 2, 3], F32), np.array([2, 0, 5], F32)),
            {"side": "right"}),
        Row("lexsort", ((ints(6, lo=0, hi=3), ints(6, lo=0, hi=3)),)),
    ]


def _sets() -> list[Row]:
    return [
        Row("nonzero", (ints(3, 4, lo=-1, hi=2),)), Row("flatnonzero", (ints(6, lo=-1, hi=2),)),
        Row("argwhere", (ints(2, 3, lo=-1, hi=2),)), Row("unique", (ints(8, lo=0, hi=4),)),
        Row("unique", (ints(8, lo=0, hi=4),), {"return_counts": True}),
        Row("where", (ints(5, lo=-1, hi=2),), ref=lambda c: np.nonzero(c)),
        Row("isin", (ints(3, 4), np.array([1, 2, 7]))),
        Row("in1d", (ints(3, 4), np.array([1, 2, 7])),
            ref=lambda a, b: np.isin(a.reshape(-1), b)),
    ]


def _numeric() -> list[Row]:
    """numeric.py and polynomial.py (more edge cases in test_more_functions.py)."""
    g = dict(grad=True, tol=1e-4)
    x, m = normal(9), normal(3, 6)
    xp, fp = np.sort(distinct(5) * 0.5) - 0.8, normal(5)
    data = normal(60)
    return [
        Row("diff", (m,), **g), Row("diff", (m,), {"n": 2, "axis": 0}, **g),
        Row("diff", (ints(6),), {"prepend": 0, "append": ints(2)}), Row("diff", (x > 0,)),
        Row("ediff1d", (ints(6),), {"to_begin": -5, "to_end": np.array([7, 8], np.int32)}),
        Row("interp", (x, xp, fp), **g),
        Row("interp", (ints(5), np.array([0, 3, 9], np.int32), np.array([1, 5, 2], np.int32))),
        Row("interp", (x * 3, xp, fp), {"left": -9.0, "right": 9.0}),
        Row("interp", (x * 3, xp, fp), {"period": 2.0}, tol=1e-4),
        Row("bincount", (ints(10, lo=0, hi=6),)),
        Row("bincount", (ints(10, lo=0, hi=6), positive(10)), {"minlength": 9}),
        Row("histogram", (data,), {"bins": 7}, check_dtype=False),
        Row("histogram", (data,), {"bins": 5, "range": (-1.0, 1.5), "density": True}),
        Row("histogram", (data,), {"bins": np.array([-3, -1, 0, 0.5, 3], F32),
                                   "weights": positive(60)}),
        Row("histogram_bin_edges", (data,), {"bins": 4}),
        Row("digitize", (x, np.array([-1, 0, 1], F32))),
        Row("digitize", (x, np.array([1, 0, -1], F32), True)),
        Row("convolve", (x, normal(4)), **g),
        Row("convolve", (normal(3), x), {"mode": "same"}, **g),
        Row("convolve", (x, normal(4)), {"mode": "valid"}),
        Row("correlate", (x, normal(4)), **g), Row("correlate", (normal(4), x), {"mode": "full"}),
        Row("correlate", (x, normal(4)), {"mode": "same"}),
        Row("trapezoid", (m,), **g), Row("trapezoid", (m,), {"dx": 0.5, "axis": 0}),
        Row("trapezoid", (m, np.cumsum(positive(6)).astype(F32)), **g),
        Row("gradient", (x,), **g), Row("gradient", (m,)), Row("gradient", (m, 0.5), {"axis": 1}),
        Row("gradient", (x, np.cumsum(positive(9)).astype(F32)), **g),
        Row("cov", (m,), **g), Row("cov", (m.T,), {"rowvar": False, "bias": True}),
        Row("cov", (m, normal(6)), {"fweights": ints(6, lo=1, hi=4),
                                    "aweights": positive(6)}, **g),
        Row("corrcoef", (m,), **g), Row("unwrap", (np.cumsum(positive(8)).astype(F32),)),
        Row("polyval", (normal(4), x), **g), Row("polyval", (ints(3), ints(5))),
        Row("polyadd", (normal(4), normal(2)), **g), Row("polysub", (normal(2), normal(4))),
        Row("polymul", (normal(4), normal(3)), **g), Row("polyder", (normal(5), 2)),
        Row("polyint", (normal(4), 2), {"k": 1.5}), Row("poly", (normal(3),), tol=1e-4),
        Row("polyfit", (np.arange(8, dtype=F32), x[:8], 2), tol=1e-3),
        Row("vander", (ints(4),)), Row("vander", (x[:3], 4), {"increasing": True}),
    ]


def _more() -> list[Row]:
    """functional.py, indexing.py, mathfuncs.py, extras.py."""
    x, m = normal(8), normal(3, 5)
    idx = np.array([0, 5, 14, 7], np.int32)
    specials = np.array([0.0, -0.0, 1.0, -7.5, 1e-40, 3e38, np.inf, -np.inf, np.nan], F32)
    return [
        Row("select", ([x < 0, x > 1], [x * 2, x * x], -1.0)),
        Row("piecewise", (x, [x < 0, x > 1], [lambda t: -t, lambda t: t * 10, 5.0])),
        Row("apply_along_axis", (lambda r: r[::-1] * r[0], 1, m)),
        Row("apply_over_axes", (lambda a, ax: a.max(ax), m, [0, 1])),
        Row("fromfunction", (lambda i, j: i * 10 + j, (2, 3))),
        Row("indices", ((2, 3),)), Row("indices", ((2, 3),), {"sparse": True}),
        Row("unravel_index", (idx, (3, 5))), Row("ravel_multi_index", ((idx % 3, idx % 5), (3, 5))),
        Row("ravel_multi_index", ((idx, idx - 6), (3, 5)), {"mode": "clip", "order": "F"}),
        Row("tril_indices", (4, 1)), Row("triu_indices", (3, 0, 5)),
        Row("tril_indices_from", (m,)), Row("triu_indices_from", (m, -1)),
        Row("diag_indices", (3, 3)), Row("diag_indices_from", (normal(2, 2, 2),)),
        Row("ix_", (np.array([0, 2], np.int32), np.array([1, 3, 4], np.int32))),
        Row("fill_diagonal", (m, 9.0), {"inplace": False}, ref=_filled),
        Row("acos", (unit(4),)), Row("acosh", (positive(4) + 1,)), Row("asin", (unit(4),)),
        Row("asinh", (x,)), Row("atan", (x,)), Row("atanh", (unit(4),)),
        Row("atan2", (x, normal(8))), Row("pow", (positive(4), x[:4])),
        Row("bitwise_invert", (ints(5),)), Row("bitwise_left_shift", (ints(5, lo=0), 2)),
        Row("bitwise_right_shift", (ints(5), 1)), Row("fabs", (ints(5),)),
        Row("modf", (specials,)), Row("frexp", (specials,)),
        Row("ldexp", (specials, ints(9, lo=-3, hi=4))), Row("spacing", (specials[:6],)),
        Row("nextafter", (specials, np.array([1, -1, 2, 0, 0, np.inf, 0, 0, 1], F32))),
        Row("gcd", (ints(8, lo=-30, hi=30), 12)), Row("lcm", (ints(8, lo=-9, hi=9), 4)),
        Row("i0", (x * 4,), grad=True, tol=1e-4),
        Row("hanning", (7,)), Row("hamming", (6,)), Row("bartlett", (5,)),
        Row("blackman", (8,), tol=1e-4), Row("kaiser", (7, 4.5), tol=1e-4),
        Row("append", (m, m[:1]), {"axis": 0}), Row("append", (m, x)),
        Row("delete", (m, np.array([0, 2])), {"axis": 1}), Row("delete", (x, slice(1, 5))),
        Row("block", ([[m, m[:, :1]], [np.zeros((1, 6), F32)]],)),
        Row("unstack", (m,), {"axis": 1}), Row("rollaxis", (normal(2, 3, 4), 2)),
        Row("permute_dims", (normal(2, 3, 4), (2, 0, 1))), Row("resize", (x, (3, 5))),
        Row("choose", (np.array([0, 1, 2, 1], np.int32), [x[:4], x[4:], -x[:4]])),
        Row("partition", (x, 3), ref=lambda a, k: np.sort(a)),
        Row("argpartition", (distinct(6), 2), ref=lambda a, k: np.argsort(a)),
        Row("trim_zeros", (np.array([0, 0, 1, 2, 0], np.int32),)),
        Row("geomspace", (1.0, 1000.0, 4), tol=1e-4), Row("geomspace", (-2.0, -32.0, 5)),
        Row("nancumprod", (np.array([1, np.nan, 2, 3], F32),)),
        Row("array_equiv", (m[:1], m[:1] + np.zeros((3, 1), F32))),
        Row("matvec", (m, x[:5])), Row("vecmat", (x[:3], m)), Row("vecdot", (m, x[:5])),
        Row("copy", (m,)), Row("real", (m,)), Row("imag", (m,)), Row("conj", (m,)),
        Row("conjugate", (m,)), Row("angle", (specials,)), Row("iscomplex", (m,)),
        Row("isreal", (m,)), Row("iscomplexobj", (m,)), Row("isrealobj", (m,)),
        Row("isscalar", (np.float32(1.0),)), Row("iterable", ([1, 2],)),
    ]


def _filled(a: np.ndarray, val: float, inplace: bool) -> np.ndarray:
    out = a.copy()
    np.fill_diagonal(out, val)
    return out


def all_rows() -> list[Row]:
    """Every row of the table."""
    return _elementwise() + _creation() + _reductions() + _shape() + _products() + _sets() \
        + _numeric() + _more()
