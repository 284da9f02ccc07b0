"""fgrad.scipy.signal: jax.scipy.signal's convolutions and detrend over Tensors.

convolve and correlate take N-d arrays of equal rank; convolve2d and correlate2d take 2-d
arrays and, beyond JAX (which allows only boundary='fill' with fillvalue 0), SciPy's
boundaries 'fill' (any fillvalue), 'wrap' and 'symm'. All are computed directly with
`lax.conv_general_dilated`, so they jit, vmap and differentiate; fftconvolve (and
method='fft') returns the same values, also computed directly: fgrad has no FFT, so it is
not faster for long inputs. Integer inputs give float results, as in JAX.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from fgrad.core.tensor import Tensor
from fgrad.lax import conv_general_dilated
from fgrad.numpy._base import ArrayLike, asarray, axes_of, float_of, result_type
from fgrad.transforms import vmap

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "detrend", "fftconvolve"]

_MODES = ("full", "same", "valid")
_BOUNDARIES = {"fill": "fill", "pad": "fill", "wrap": "wrap", "circular": "wrap",
               "symm": "symm", "symmetric": "symm"}


def _inexact(name: str, in1: ArrayLike, in2: ArrayLike) -> tuple[Tensor, Tensor]:
    a, b = asarray(in1), asarray(in2)
    dt = result_type(a, b)
    if not dt.is_float:
        dt = float_of(Tensor(np.zeros((), dt.np))).dtype
    if a.ndim != b.ndim:
        raise ValueError(f"fgrad.scipy.signal.{name}: in1 and in2 must have the same number "
                         f"of dimensions, got shapes {a.shape} and {b.shape}")
    if 0 in a.shape or 0 in b.shape:
        raise ValueError(f"fgrad.scipy.signal.{name}: zero-size arrays are not supported, got "
                         f"shapes {a.shape} and {b.shape}")
    return a.cast(dt), b.cast(dt)


def _check_mode(name: str, mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"fgrad.scipy.signal.{name}: mode must be one of {list(_MODES)}, got "
                         f"{mode!r}")


def _valid_order(name: str, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """(larger, smaller): one input must be at least as large as the other on every axis."""
    if all(s1 >= s2 for s1, s2 in zip(a.shape, b.shape)):
        return a, b
    if all(s1 <= s2 for s1, s2 in zip(a.shape, b.shape)):
        return b, a
    raise ValueError(f"fgrad.scipy.signal.{name}: one input must be at least as large as the "
                     f"other in every dimension, got shapes {a.shape} and {b.shape}")


def _conv(x: Tensor, kernel: Tensor, pads: Sequence[tuple[int, int]]) -> Tensor:
    """sum_k x[i + k] * flip(kernel)[k] over the padded x: a true convolution."""
    if x.ndim == 0:
        return x * kernel
    w = kernel.flip(*range(kernel.ndim))
    out = conv_general_dilated(x[None, None], w[None, None], (1,) * x.ndim, list(pads))
    return out.reshape(out.shape[2:])


def _convolve_nd(name: str, in1: ArrayLike, in2: ArrayLike, mode: str) -> Tensor:
    _check_mode(name, mode)
    a, b = _inexact(name, in1, in2)
    shape_o = b.shape
    big, small = _valid_order(name, a, b)
    ks = small.shape
    if mode == "valid":
        pads = [(0, 0)] * len(ks)
    elif mode == "same":
        pads = [(k - 1 - (ko - 1) // 2, k - ko + (ko - 1) // 2) for k, ko in zip(ks, shape_o)]
    else:
        pads = [(k - 1, k - 1) for k in ks]
    return _conv(big, small, pads)


def convolve(in1: ArrayLike, in2: ArrayLike, mode: str = "full", method: str = "auto",
             precision: Any = None) -> Tensor:
    """The N-d convolution of in1 and in2 (equal rank); mode 'full', 'same' (in1's shape) or
    'valid'. method 'auto', 'direct' and 'fft' give the same values."""
    if method not in ("auto", "direct", "fft"):
        raise ValueError(f"fgrad.scipy.signal.convolve: method must be 'auto', 'direct' or "
                         f"'fft', got {method!r}")
    return _convolve_nd("convolve", in1, in2, mode)


def correlate(in1: ArrayLike, in2: ArrayLike, mode: str = "full", method: str = "auto",
              precision: Any = None) -> Tensor:
    """The N-d cross-correlation: convolve(in1, in2 reversed on every axis, mode)."""
    if method not in ("auto", "direct", "fft"):
        raise ValueError(f"fgrad.scipy.signal.correlate: method must be 'auto', 'direct' or "
                         f"'fft', got {method!r}")
    b = asarray(in2)
    return _convolve_nd("correlate", in1, b.flip(*range(b.ndim)) if b.ndim else b, mode)


def fftconvolve(in1: ArrayLike, in2: ArrayLike, mode: str = "full",
                axes: int | Sequence[int] | None = None) -> Tensor:
    """convolve(in1, in2, mode), over `axes` only when given (the other axes must have equal
    sizes and are mapped over). Computed directly, not by FFT."""
    _check_mode("fftconvolve", mode)
    a, b = _inexact("fftconvolve", in1, in2)
    if axes is None:
        return _convolve_nd("fftconvolve", a, b, mode)
    conv_axes = axes_of(axes, a.ndim, "fftconvolve")
    mapped = [i for i in range(a.ndim) if i not in conv_axes]
    if any(a.shape[i] != b.shape[i] for i in mapped):
        raise ValueError(f"fgrad.scipy.signal.fftconvolve: mapped axes must have the same "
                         f"size; got in1.shape={a.shape}, in2.shape={b.shape}, axes={axes}")

    def fn(x: Tensor, y: Tensor) -> Tensor:
        return _convolve_nd("fftconvolve", x, y, mode)
    for ax in reversed(mapped):
        fn = vmap(fn, in_axes=ax, out_axes=ax)
    return fn(a, b)


# ---------------------------------------------------------------------------- 2-d

def _check_2d(name: str, mode: str, boundary: str, in1: ArrayLike, in2: ArrayLike
              ) -> tuple[Tensor, Tensor, str]:
    _check_mode(name, mode)
    if boundary not in _BOUNDARIES:
        raise ValueError(f"fgrad.scipy.signal.{name}: boundary must be 'fill', 'wrap' or "
                         f"'symm', got {boundary!r}")
    a, b = _inexact(name, in1, in2)
    if a.ndim != 2:
        raise ValueError(f"fgrad.scipy.signal.{name}: in1 and in2 must be 2-d, got shapes "
                         f"{a.shape} and {b.shape}")
    return a, b, _BOUNDARIES[boundary]


def _extend(x: Tensor, pads: Sequence[int], boundary: str, fillvalue: float) -> Tensor:
    """x extended by pads[i] on both sides of axis i: constant, periodic or mirrored (the
    edge sample repeated, NumPy's 'symmetric')."""
    if boundary == "fill":
        return x.pad([(p, p) for p in pads], value=float(fillvalue))
    for axis, p in enumerate(pads):
        n = x.shape[axis]
        idx = np.arange(-p, n + p) % (2 * n if boundary == "symm" else n)
        if boundary == "symm":
            idx = np.where(idx >= n, 2 * n - 1 - idx, idx)
        index = Tensor(idx.astype(np.int32))
        x = x[index] if axis == 0 else x[:, index]
    return x


def _full_2d(a: Tensor, b: Tensor, boundary: str, fillvalue: float) -> Tensor:
    ext = _extend(a, [k - 1 for k in b.shape], boundary, fillvalue)
    return _conv(ext, b, [(0, 0), (0, 0)])


def convolve2d(in1: ArrayLike, in2: ArrayLike, mode: str = "full", boundary: str = "fill",
               fillvalue: float = 0, precision: Any = None) -> Tensor:
    """The 2-d convolution with SciPy's boundary handling of in1 ('fill' with fillvalue,
    'wrap' or 'symm'); 'valid' ignores the boundary."""
    a, b, bd = _check_2d("convolve2d", mode, boundary, in1, in2)
    if mode == "valid":
        return _convolve_nd("convolve2d", a, b, "valid")
    full = _full_2d(a, b, bd, fillvalue)
    if mode == "full":
        return full
    (m, n), (kh, kw) = a.shape, b.shape
    return full[(kh - 1) // 2:(kh - 1) // 2 + m, (kw - 1) // 2:(kw - 1) // 2 + n]


def correlate2d(in1: ArrayLike, in2: ArrayLike, mode: str = "full", boundary: str = "fill",
                fillvalue: float = 0, precision: Any = None) -> Tensor:
    """The 2-d cross-correlation with SciPy's boundaries and its 'same' centering (which
    differs from convolve2d's for even kernel sizes)."""
    a, b, bd = _check_2d("correlate2d", mode, boundary, in1, in2)
    flipped = b.flip(0, 1)
    if mode == "valid":
        return _convolve_nd("correlate2d", a, flipped, "valid")
    full = _full_2d(a, flipped, bd, fillvalue)
    if mode == "full":
        return full
    (m, n), (kh, kw) = a.shape, b.shape
    return full[kh // 2:kh // 2 + m, kw // 2:kw // 2 + n]


# ---------------------------------------------------------------------------- detrend

def detrend(data: ArrayLike, axis: int = -1, type: str = "linear",  # noqa: A002
            bp: int | Sequence[int] | np.ndarray = 0, overwrite_data: None = None) -> Tensor:
    """data minus its mean ('constant') or minus a least-squares line fitted to each piece
    between the breakpoints `bp` ('linear'), along `axis`."""
    if overwrite_data is not None:
        raise NotImplementedError("fgrad.scipy.signal.detrend: overwrite_data is not "
                                  "supported (Tensors are immutable)")
    if type not in ("constant", "linear"):
        raise ValueError(f"fgrad.scipy.signal.detrend: type must be 'linear' or 'constant', "
                         f"got {type!r}")
    x = float_of(asarray(data))
    ax = axes_of(axis, x.ndim, "detrend")[0]
    if type == "constant":
        return x - x.mean(ax, keepdim=True)
    n = x.shape[ax]
    cuts = np.sort(np.unique(np.r_[0, np.asarray(bp, dtype=np.int64).reshape(-1), n]))
    if cuts[0] < 0 or cuts[-1] > n:
        raise ValueError(f"fgrad.scipy.signal.detrend: breakpoints must be in [0, {n}] "
                         f"(the length along axis {axis}), got bp={bp}")
    moved = x.permute(ax, *[i for i in range(x.ndim) if i != ax])
    pieces = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        y = moved[int(lo):int(hi)]
        t = np.arange(int(hi) - int(lo), dtype=np.float64)
        tc = (t - t.mean()).reshape((-1,) + (1,) * (x.ndim - 1))
        den = float((tc * tc).sum())
        centred = y - y.mean(0, keepdim=True)
        if den > 0:
            tct = Tensor(tc.astype(x.dtype.np))
            centred = centred - tct * ((tct * centred).sum(0, keepdim=True) / den)
        pieces.append(centred)
    out = pieces[0].cat(*pieces[1:], dim=0) if len(pieces) > 1 else pieces[0]
    back = [0] * x.ndim
    for new_pos, old in enumerate([ax] + [i for i in range(x.ndim) if i != ax]):
        back[old] = new_pos
    return out.permute(*back)
