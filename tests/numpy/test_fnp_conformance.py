"""fgrad.numpy against NumPy, row by row (fnp_cases.py): values, dtypes (NumPy's result dtype
canonicalized the way jax.numpy does without x64: 64-bit results of 32-bit inputs become
32-bit), broadcasting and negative axes (rows use both); gradients of the differentiable
rows against central differences of the NumPy reference in float64."""
from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import Tensor
from fnp_cases import Row, all_rows

ROWS = all_rows()
IDS = [f"{r.name}-{i}" for i, r in enumerate(ROWS)]
GRAD_ROWS = [(r, i) for i, r in enumerate(ROWS) if r.grad]

NOT_FUNCTIONS = {"ndarray", "finfo", "iinfo", "linalg", "Tensor"}
COVERED_ELSEWHERE = {
    "result_type": "test_result_type_and_weak_scalars",
    "put_along_axis": "test_put_along_axis",
    "empty": "test_empty",
    "concat": "test_aliases_are_the_same_function",
    "row_stack": "test_aliases_are_the_same_function",
    "dsplit": "test_dsplit",
    "cumulative_sum": "test_aliases_are_the_same_function",
    "cumulative_prod": "test_aliases_are_the_same_function",
    # test_more_functions.py
    **{name: "test_more_functions.py" for name in (
        "vectorize", "issubdtype", "isdtype", "promote_types", "can_cast", "from_dlpack")},
    # test_jnp_more_numpy.py (NumPy) and test_jnp_more_jax_fixture.py (JAX's semantics)
    **{name: "test_jnp_more_numpy.py" for name in (
        "array_repr", "array_str", "bitwise_count", "compress", "einsum_path", "extract",
        "frombuffer", "fromfile", "fromiter", "fromstring", "get_printoptions",
        "histogram2d", "histogramdd", "insert", "intersect1d", "load", "mask_indices",
        "nanpercentile", "nanquantile", "packbits", "place", "polydiv", "printoptions", "put",
        "save", "savez", "set_printoptions", "setdiff1d", "setxor1d", "union1d", "unique_all",
        "unique_counts", "unique_inverse", "unique_values", "unpackbits")},
}


def reference(row: Row) -> Any:
    if row.ref is not None:
        return row.ref
    return getattr(np, row.name)


def canonical(dtype: np.dtype, args: tuple) -> np.dtype:
    """jnp's result dtype for NumPy's: no 64-bit results unless an input was 64-bit."""
    wide = any(isinstance(a, np.ndarray) and a.dtype.itemsize == 8 for a in _leaves(args))
    if dtype.itemsize == 8 and not wide:
        return np.dtype({"f": np.float32, "i": np.int32, "u": np.uint32}.get(dtype.kind,
                                                                              dtype))
    return dtype


def _leaves(tree: Any) -> list[Any]:
    if isinstance(tree, (list, tuple)):
        return [v for t in tree for v in _leaves(t)]
    return [tree]


def compare(got: Any, want: Any, row: Row, args: tuple) -> None:
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)), f"{row.name}: expected a sequence of results"
        assert len(got) == len(want)
        for g, w in zip(got, want):
            compare(g, w, row, args)
        return
    if isinstance(want, (int, np.integer)) and not isinstance(got, Tensor):
        assert got == want
        return
    w = np.asarray(want)
    g = got.numpy() if isinstance(got, Tensor) else np.asarray(got)
    assert isinstance(got, (Tensor, tuple)) or np.isscalar(got), type(got)
    assert g.shape == w.shape, f"{row.name}: shape {g.shape} vs NumPy {w.shape}"
    if row.check_dtype and isinstance(got, Tensor):
        assert g.dtype == canonical(w.dtype, args), \
            f"{row.name}: dtype {g.dtype} vs NumPy {w.dtype} (jnp: {canonical(w.dtype, args)})"
    if w.dtype.kind in "biu":
        np.testing.assert_array_equal(g, w)
    else:
        np.testing.assert_allclose(g.astype(np.float64), w, rtol=row.tol, atol=row.tol,
                                   equal_nan=True)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_values_and_dtypes(row: Row) -> None:
    got = getattr(fnp, row.name)(*row.args, **row.kwargs)
    with np.errstate(all="ignore"):
        want = reference(row)(*row.args, **row.kwargs)
    compare(got, want, row, row.args)


@pytest.mark.parametrize("row", ROWS[:40], ids=IDS[:40])
def test_tensor_arguments_give_the_same(row: Row) -> None:
    """Tensor inputs and NumPy inputs give the same result."""
    def as_tensor(a: Any) -> Any:
        return Tensor(a) if isinstance(a, np.ndarray) else a
    a = getattr(fnp, row.name)(*row.args, **row.kwargs)
    b = getattr(fnp, row.name)(*[as_tensor(x) for x in row.args], **row.kwargs)
    np.testing.assert_array_equal(np.asarray(a.numpy()), np.asarray(b.numpy()))


# ---------------------------------------------------------------------------- gradients

def _float_paths(args: tuple) -> list[tuple[int, ...]]:
    paths = []
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            paths.append((i,))
        elif isinstance(a, list):
            paths += [(i, j) for j, v in enumerate(a)
                      if isinstance(v, np.ndarray) and v.dtype.kind == "f"]
    return paths


def _put(args: tuple, path: tuple[int, ...], value: Any) -> tuple:
    out = list(args)
    if len(path) == 1:
        out[path[0]] = value
    else:
        inner = list(out[path[0]])
        inner[path[1]] = value
        out[path[0]] = inner
    return tuple(out)


def _get(args: tuple, path: tuple[int, ...]) -> Any:
    return args[path[0]] if len(path) == 1 else args[path[0]][path[1]]


def _wide(args: tuple) -> tuple:
    for p in _float_paths(args):
        args = _put(args, p, _get(args, p).astype(np.float64))
    return args


@pytest.mark.parametrize("row,i", GRAD_ROWS, ids=[f"{r.name}-{i}" for r, i in GRAD_ROWS])
def test_gradient_vs_finite_differences(row: Row, i: int) -> None:
    args = _wide(row.args)
    paths = _float_paths(args)
    assert paths, f"{row.name}: a grad row needs a float argument"
    out = np.asarray(reference(row)(*args, **row.kwargs), np.float64)
    weights = np.random.default_rng(i).normal(size=out.shape)

    def loss(*leaves: Tensor) -> Tensor:
        full = args
        for p, leaf in zip(paths, leaves):
            full = _put(full, p, leaf)
        res = getattr(fnp, row.name)(*full, **row.kwargs)
        return (res * Tensor(weights)).sum()

    grads = fgrad.grad(loss, argnums=tuple(range(len(paths))))(
        *[Tensor(_get(args, p)) for p in paths])
    for p, g in zip(paths, grads):
        base = _get(args, p)
        fd = np.zeros_like(base)
        eps = 1e-6
        for idx in np.ndindex(base.shape):
            for sign in (1, -1):
                moved = base.copy()
                moved[idx] += sign * eps
                value = np.sum(np.asarray(reference(row)(*_put(args, p, moved),
                                                         **row.kwargs)) * weights)
                fd[idx] += sign * value / (2 * eps)
        np.testing.assert_allclose(g.numpy(), fd, rtol=1e-5, atol=1e-6,
                                   err_msg=f"{row.name} d/d arg {p}")


# ---------------------------------------------------------------------------- coverage

def test_every_function_has_a_row() -> None:
    names = {r.name for r in ROWS}
    public = [n for n in fnp.__all__ if callable(getattr(fnp, n))
              and not inspect.isclass(getattr(fnp, n)) and n not in NOT_FUNCTIONS
              and not isinstance(getattr(fnp, n), fgrad.DType)]
    missing = [n for n in public if n not in names and n not in COVERED_ELSEWHERE]
    assert not missing, f"fgrad.numpy functions without a conformance row: {missing}"


def test_aliases_are_the_same_function() -> None:
    assert fnp.concat is not None and fnp.row_stack is fnp.vstack
    np.testing.assert_array_equal(fnp.concat([np.ones(2), np.zeros(1)]).numpy(),
                                  np.concatenate([np.ones(2), np.zeros(1)]))
    x = np.arange(1, 6, dtype=np.float32)
    np.testing.assert_allclose(fnp.cumulative_sum(x).numpy(), np.cumsum(x))
    np.testing.assert_allclose(fnp.cumulative_prod(x).numpy(), np.cumprod(x))


def test_dsplit() -> None:
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for g, w in zip(fnp.dsplit(x, 2), np.dsplit(x, 2)):
        np.testing.assert_array_equal(g.numpy(), w)


def test_empty() -> None:
    e = fnp.empty((2, 3))
    assert e.shape == (2, 3) and e.dtype == fnp.float32


def test_result_type_and_weak_scalars() -> None:
    i8 = Tensor(np.ones(3, np.int8))
    assert fnp.result_type(i8, 3) == fnp.int8
    assert fnp.result_type(i8, 2.5) == fnp.float32
    assert fnp.add(i8, 3).dtype == fnp.int8
    assert fnp.arange(5).dtype == fnp.int32
    assert fnp.mean(fnp.arange(5)).dtype == fnp.float32
    assert fnp.asarray(1.0).dtype == fnp.float32 and fnp.asarray(1).dtype == fnp.int32
    assert fnp.asarray(np.ones(2)).dtype == fnp.float64  # NumPy arrays keep their dtype


def test_nanmedian_under_jit_and_size_dependent_functions_under_vmap() -> None:
    x = np.array([1.0, np.nan, 3.0, 2.0], np.float32)
    assert float(fgrad.jit(fnp.nanmedian)(Tensor(x))) == np.nanmedian(x)
    with pytest.raises(TypeError, match="pass size=N"):
        fgrad.vmap(fnp.flatnonzero)(Tensor(x.reshape(2, 2)))


def test_asarray_of_a_list_of_tracers() -> None:
    def f(r: Tensor) -> Tensor:
        return fnp.asarray([r, 2 * r, [1.0, 2.0]]).sum(0)
    rows = np.arange(6, dtype=np.float32).reshape(3, 2)
    got = fgrad.vmap(f)(Tensor(rows))
    np.testing.assert_allclose(got.numpy(), rows * 3 + np.array([1.0, 2.0]))


def test_put_along_axis() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[1], [3], [0]])
    want = x.copy()
    np.put_along_axis(want, idx, -1.0, axis=1)
    got = fnp.put_along_axis(x, idx, -1.0, axis=1)
    np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(ValueError, match="immutable"):
        fnp.put_along_axis(x, idx, -1.0, axis=1, inplace=True)


def test_out_argument_is_refused_clearly() -> None:
    with pytest.raises(TypeError, match="out= argument is not supported"):
        fnp.sum(np.ones(3), out=np.zeros(()))
    with pytest.raises(TypeError, match="out="):
        fnp.add(1.0, 2.0, out=np.zeros(()))


def test_errors_name_the_function_and_axis() -> None:
    with pytest.raises(ValueError, match=r"fgrad.numpy.sum: axis 3 is out of bounds"):
        fnp.sum(np.ones((2, 2)), axis=3)
    with pytest.raises(ValueError, match="equal sections; use fnp.array_split"):
        fnp.split(np.ones(5), 2)
