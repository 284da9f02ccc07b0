"""Tensor reductions: sum, prod, max, min, mean, any, all, argmax, argmin.

Each also takes NumPy's keywords (keepdims=, where=, initial=, dtype=); those calls go to
`array_methods`, so tinygrad's call forms pay one keyword check."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence, cast

from fgrad.core import dtypes as _dt
from fgrad.core import prims as P
from fgrad.core.dtypes import dtypes
from fgrad.core.methods import array_methods as _np

if TYPE_CHECKING:
    from fgrad.core.tensor import Tensor

Axis = int | Sequence[int] | None


def _axes(x: Any, axis: Axis) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(x.ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = tuple(sorted({x._axis(int(a)) for a in axes}))  # 0-d: only 0 and -1 are valid
    return out if x.ndim else ()


def _keep(x: Any, y: Any, axes: tuple[int, ...], keepdim: bool) -> Any:
    if not keepdim:
        return y
    return P.reshape(y, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))


def sum_dtype(dtype: _dt.DType) -> _dt.DType:
    """Sums of bools and small ints accumulate in int32 (uint32 for unsigned), as PyTorch."""
    if dtype == dtypes.bool:
        return dtypes.int32
    if dtype.is_int and dtype.itemsize < 4:
        return dtypes.uint32 if dtype.is_unsigned else dtypes.int32
    return dtype


class ReduceMixin:
    """Reductions for Tensor."""

    __slots__ = ()

    def sum(self, axis: Axis = None, keepdim: bool = False, dtype: Any = None, *,
            keepdims: bool | None = None, initial: Any = None, where: Any = None) -> "Tensor":
        """Sum over `axis` (all axes when None); half types accumulate in float32. NumPy's
        keywords work too: keepdims= (keepdim), initial= (added) and where= (a mask)."""
        if keepdims is not None or initial is not None or where is not None:
            return _np.numpy_sum(cast("Tensor", self), "sum", axis,
                                 keepdim, dtype, keepdims, initial, where)
        x = self.cast(dtype) if dtype is not None else self.cast(sum_dtype(self.dtype))
        axes = _axes(x, axis)
        return _keep(x, P.reduce_sum(x, axes), axes, keepdim)

    def prod(self, axis: Axis = None, keepdim: bool = False, dtype: Any = None, *,
             keepdims: bool | None = None, initial: Any = None, where: Any = None) -> "Tensor":
        """Product over `axis` (NumPy's keepdims=, initial= and where= work too)."""
        if keepdims is not None or initial is not None or where is not None:
            return _np.numpy_sum(cast("Tensor", self), "prod", axis,
                                 keepdim, dtype, keepdims, initial, where)
        x = self.cast(dtype) if dtype is not None else self.cast(sum_dtype(self.dtype))
        axes = _axes(x, axis)
        return _keep(x, P.reduce_prod(x, axes), axes, keepdim)

    def max(self, axis: Axis = None, keepdim: bool = False, *, keepdims: bool | None = None,
            initial: Any = None, where: Any = None) -> "Tensor":
        """Maximum over `axis`. NumPy's keywords work too: keepdims= (keepdim), initial= (a
        lower bound on the result) and where= (a mask; it needs initial=)."""
        if keepdims is not None or initial is not None or where is not None:
            return _np.numpy_extremum(cast("Tensor", self), "max", axis,
                                      keepdim, keepdims, initial, where)
        axes = _axes(self, axis)
        return _keep(self, P.reduce_max(self, axes), axes, keepdim)

    def min(self, axis: Axis = None, keepdim: bool = False, *, keepdims: bool | None = None,
            initial: Any = None, where: Any = None) -> "Tensor":
        """Minimum over `axis` (NumPy's keepdims=, initial= and where= work too)."""
        if keepdims is not None or initial is not None or where is not None:
            return _np.numpy_extremum(cast("Tensor", self), "min", axis,
                                      keepdim, keepdims, initial, where)
        axes = _axes(self, axis)
        return _keep(self, P.reduce_min(self, axes), axes, keepdim)

    def any(self, axis: Axis = None, keepdim: bool = False, *, keepdims: bool | None = None,
            where: Any = None) -> "Tensor":
        """True if any element along `axis` is nonzero (False over an empty axis); NumPy's
        keepdims= and where= work too."""
        if keepdims is not None or where is not None:
            return _np.numpy_any_all(cast("Tensor", self), "any", axis, keepdim, keepdims, where)
        x = self.cast(dtypes.bool)
        return x.sum(axis, keepdim) != 0 if x.numel() == 0 else x.max(axis, keepdim)

    def all(self, axis: Axis = None, keepdim: bool = False, *, keepdims: bool | None = None,
            where: Any = None) -> "Tensor":
        """True if every element along `axis` is nonzero (True over an empty axis); NumPy's
        keepdims= and where= work too."""
        if keepdims is not None or where is not None:
            return _np.numpy_any_all(cast("Tensor", self), "all", axis, keepdim, keepdims, where)
        x = self.cast(dtypes.bool)
        return x.sum(axis, keepdim) == 0 if x.numel() == 0 else x.min(axis, keepdim)

    def mean(self, axis: Axis = None, keepdim: bool = False, *, keepdims: bool | None = None,
             dtype: Any = None, where: Any = None) -> "Tensor":
        """Arithmetic mean over `axis` (ints give float32); NumPy's keepdims=, dtype= and
        where= (the mean of the selected entries) work too."""
        if keepdims is not None or dtype is not None or where is not None:
            return _np.numpy_mean(cast("Tensor", self), axis, keepdim, keepdims, dtype, where)
        x = cast("Tensor", self) if self.dtype.is_float else self.cast(dtypes.default_float)
        axes = _axes(x, axis)
        count = 1
        for a in axes:
            count *= x.shape[a]
        total = x.sum(axis, keepdim)
        return total / count if count else total * float("nan")

    def argmax(self, axis: int | None = None, keepdim: bool = False, *,
               keepdims: bool | None = None) -> "Tensor":
        """Index of the first maximum along `axis` (of the flattened Tensor when None)."""
        if keepdims is not None:
            keepdim = _np.keep_flag("argmax", keepdim, keepdims)
        return self._arg(P.argmax_p, axis, keepdim)

    def argmin(self, axis: int | None = None, keepdim: bool = False, *,
               keepdims: bool | None = None) -> "Tensor":
        """Index of the first minimum along `axis`."""
        if keepdims is not None:
            keepdim = _np.keep_flag("argmin", keepdim, keepdims)
        return self._arg(P.argmin_p, axis, keepdim)

    def _arg(self, prim: Any, axis: int | None, keepdim: bool) -> "Tensor":
        from fgrad.core.methods.index_bounds import position_dtype
        if axis is None:
            flat = self.reshape(-1)
            out = prim.bind(flat, axis=0, index_dtype=position_dtype(flat.shape[0]))
            return out.reshape((1,) * self.ndim) if keepdim else out
        a = self._axis(axis)
        out = prim.bind(self, axis=a, index_dtype=position_dtype(self.shape[a]))
        return _keep(self, out, (a,), keepdim)
