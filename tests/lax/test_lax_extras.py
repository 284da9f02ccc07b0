"""fgrad.lax's window, convolution, shape-rule and linalg functions (fgrad/lax/windowed.py,
convolution.py, shape_util.py, linalg.py) against direct NumPy/SciPy references, eagerly
and under jit / grad / vmap; and the `unroll` hints of scan and fori_loop."""
from __future__ import annotations

import functools
import itertools
import operator

import numpy as np
import pytest
import scipy.linalg

import fgrad
import fgrad.numpy as fnp
from fgrad import Tensor, lax
from fgrad.core.errors import ArgumentError

R = np.random.default_rng(11)
NP_OPS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
LAX_OPS = {"add": lax.add, "mul": lax.mul, "max": lax.max, "min": lax.min}
INITS = {"add": 0.0, "mul": 1.0, "max": -np.inf, "min": np.inf}


# ---------------------------------------------------------------------------- references

def np_same_pads(shape, window, strides, lower=False):
    """XLA's SAME padding, written out: ceil(n / s) outputs, the odd element high (low)."""
    pads = []
    for n, k, s in zip(shape, window, strides):
        total = max((-(-n // s) - 1) * s + k - n, 0)
        pads.append((total - total // 2, total // 2) if lower else (total // 2, total - total // 2))
    return pads


def np_dilate_pad(x, value, pads, dilation):
    """x with value-holes between elements (dilation) and value padding (negative crops)."""
    for axis, ((lo, hi), d) in enumerate(zip(pads, dilation)):
        n = x.shape[axis]
        grown = np.full(x.shape[:axis] + ((n - 1) * d + 1 if n else 0,) + x.shape[axis + 1:],
                        value, x.dtype)
        index = [slice(None)] * x.ndim
        index[axis] = slice(None, None, d)
        grown[tuple(index)] = x
        widths = [(0, 0)] * x.ndim
        widths[axis] = (max(lo, 0), max(hi, 0))
        grown = np.pad(grown, widths, constant_values=value)
        index[axis] = slice(-min(lo, 0), grown.shape[axis] + min(hi, 0))
        x = grown[tuple(index)]
    return x


def np_reduce_window(x, init, op, window, strides, padding, base_dil=None, win_dil=None):
    """A loop over every output position, reducing the operand elements of its window
    with the ufunc `op`; as in XLA, init enters once and padding / holes are skipped. String
    padding is JAX's: from the operand's own shape and the dilated window."""
    base_dil = base_dil or (1,) * x.ndim
    win_dil = win_dil or (1,) * x.ndim
    span = [(k - 1) * d + 1 for k, d in zip(window, win_dil)]
    if isinstance(padding, str):
        padding = [(0, 0)] * x.ndim if padding == "VALID" else \
            np_same_pads(x.shape, span, strides)
    padded = np_dilate_pad(x, init, padding, base_dil)
    valid = np_dilate_pad(np.ones(x.shape, bool), False, padding, base_dil)
    out_shape = [max((p - w) // s + 1, 0) for p, w, s in zip(padded.shape, span, strides)]
    out = np.full(out_shape, init, x.dtype)
    for idx in np.ndindex(*out_shape):
        box = tuple(slice(i * s, i * s + w, d)
                    for i, s, w, d in zip(idx, strides, span, win_dil))
        values = padded[box][valid[box]]
        out[idx] = op(init, op.reduce(values)) if values.size else init
    return out


def np_conv(x, w, strides, pads, lhs_dil=None, rhs_dil=None, groups=1):
    """Direct-loop convolution (cross-correlation) in NC... / OI... layout."""
    n_sp = x.ndim - 2
    lhs_dil, rhs_dil = lhs_dil or (1,) * n_sp, rhs_dil or (1,) * n_sp
    xp = np_dilate_pad(x, 0, [(0, 0), (0, 0)] + list(pads), (1, 1) + tuple(lhs_dil))
    k_sp = w.shape[2:]
    span = [(k - 1) * d + 1 for k, d in zip(k_sp, rhs_dil)]
    out_sp = [(p - s_) // st + 1 for p, s_, st in zip(xp.shape[2:], span, strides)]
    out = np.zeros((x.shape[0], w.shape[0], *out_sp), np.float64)
    cin = w.shape[1]
    per_group = w.shape[0] // groups
    for n, o in itertools.product(range(x.shape[0]), range(w.shape[0])):
        g = o // per_group
        for pos in np.ndindex(*out_sp):
            acc = 0.0
            for tap in np.ndindex(*k_sp):
                at = tuple(p * st + t * d for p, st, t, d in zip(pos, strides, tap, rhs_dil))
                window = xp[(n, slice(g * cin, (g + 1) * cin)) + at]
                acc += np.dot(window, w[(o, slice(None)) + tap])
            out[(n, o) + pos] = acc
    return out


def np_scatter_conv_transpose(x, w, stride):
    """1-d transposed convolution in its scatter form (NCH input, IOH kernel: the forward
    convolution's OIH): out[n, o, i * s + t] += x[n, c, i] * w[c, o, t]."""
    n, c, length = x.shape
    _, o, k = w.shape
    out = np.zeros((n, o, (length - 1) * stride + k))
    for i, t in itertools.product(range(length), range(k)):
        out[:, :, i * stride + t] += np.einsum("nc,co->no", x[:, :, i], w[:, :, t])
    return out


def close(got, want, rtol=1e-5, atol=1e-5):
    got = got.numpy() if isinstance(got, Tensor) else np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def fd_grad(f, x, eps=1e-6):
    """Central finite differences of a scalar NumPy function."""
    g = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


# ---------------------------------------------------------------------------- reduce_window

RW_CASES = [  # (shape, window, strides, padding, base_dilation, window_dilation)
    ((5, 6), (2, 3), (1, 1), "VALID", None, None),
    ((5, 6), (3, 2), (2, 1), "SAME", None, None),
    ((5, 6), (2, 2), (2, 3), ((1, 0), (2, 1)), None, None),
    ((5, 6), (2, 2), (1, 1), "SAME", None, (2, 1)),
    ((4, 5), (2, 2), (1, 2), "SAME", (2, 1), None),
    ((2, 3, 7), (1, 2, 3), (1, 1, 2), ((0, 0), (1, -1), (0, 2)), (1, 1, 2), (1, 1, 2)),
]


@pytest.mark.parametrize("kind", sorted(NP_OPS))
@pytest.mark.parametrize("case", range(len(RW_CASES)))
def test_reduce_window_matches_a_sliding_window_loop(kind, case):
    shape, window, strides, padding, bdil, wdil = RW_CASES[case]
    x = R.uniform(0.5, 1.5, size=shape).astype(np.float32)
    got = lax.reduce_window(x, INITS[kind], LAX_OPS[kind], window, strides, padding, bdil,
                            wdil)
    want = np_reduce_window(x, np.float32(INITS[kind]), NP_OPS[kind], window, strides,
                            padding, bdil, wdil)
    close(got, want)


def test_reduce_window_under_jit_and_vmap():
    x = R.standard_normal((3, 6, 5)).astype(np.float32)

    def pool(v):
        return lax.reduce_window(v, -np.inf, lax.max, (2, 2), (2, 2), "SAME")
    want = np.stack([np_reduce_window(v, np.float32(-np.inf), np.maximum, (2, 2), (2, 2),
                                      "SAME") for v in x])
    close(fgrad.jit(fgrad.vmap(pool))(x), want)


@pytest.mark.parametrize("kind", ["add", "max"])
def test_reduce_window_gradient_matches_finite_differences(kind):
    x = R.standard_normal((4, 5))
    args = ((2, 3), (1, 2), ((1, 0), (0, 1)), (1, 2), (1, 2))

    def f(v):
        return (lax.reduce_window(v, INITS[kind], LAX_OPS[kind], *args) ** 2).sum()

    def ref(v):
        return float((np_reduce_window(v, INITS[kind], NP_OPS[kind], *args) ** 2).sum())
    close(fgrad.grad(f)(Tensor(x)), fd_grad(ref, x), rtol=1e-5, atol=1e-6)


def test_reduce_window_general_computations():
    x = R.uniform(0.5, 1.5, size=(4, 6)).astype(np.float32)
    want = np_reduce_window(x, np.float32(0), np.add, (2, 3), (1, 2), "SAME")
    for fn in (operator.add, fnp.add, lambda a, b: a + b):
        close(lax.reduce_window(x, 0.0, fn, (2, 3), (1, 2), "SAME"), want)
    # a non-identity init enters each window once, as in XLA
    close(lax.reduce_window(x, 1.0, lax.add, (2, 2), (1, 1), "VALID"),
          np_reduce_window(x, np.float32(1), np.add, (2, 2), (1, 1), "VALID"))
    close(lax.reduce_window(x, 2.0, lambda a, b: a * b, (2, 2), (1, 1), "VALID"),
          np_reduce_window(x, np.float32(2), np.multiply, (2, 2), (1, 1), "VALID"))
    for fn in (lax.add, lambda a, b: a + b):  # padding and holes add nothing, init enters once
        close(lax.reduce_window(x, 1.0, fn, (2, 3), (2, 1), ((1, 2), (0, 1)), (1, 2), (2, 1)),
              np_reduce_window(x, np.float32(1), np.add, (2, 3), (2, 1), ((1, 2), (0, 1)),
                               (1, 2), (2, 1)))
    # a pytree of operands reduced together
    s, p = lax.reduce_window((x, x), (0.0, 1.0), lambda a, b: (a[0] + b[0], a[1] * b[1]),
                             (2, 2), (2, 2), "VALID")
    close(s, np_reduce_window(x, np.float32(0), np.add, (2, 2), (2, 2), "VALID"))
    close(p, np_reduce_window(x, np.float32(1), np.multiply, (2, 2), (2, 2), "VALID"))
    # an int operand with a Python int init; a window larger than the input
    ints = np.arange(12, dtype=np.int32).reshape(3, 4)
    got = lax.reduce_window(ints, 0, lax.add, (2, 2), (1, 1), "VALID")
    assert got.dtype == fgrad.dtypes.int32
    close(got, np_reduce_window(ints, np.int32(0), np.add, (2, 2), (1, 1), "VALID"))
    assert lax.reduce_window(x, 0.0, lax.add, (5, 2), (1, 1), "VALID").shape == (0, 5)


def test_reduce_window_errors_name_the_argument():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(TypeError, match="window_dimensions"):
        lax.reduce_window(x, 0.0, lax.add, (2,), (1, 1), "VALID")
    with pytest.raises(ValueError, match="padding"):
        lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), ((1, 1),))
    with pytest.raises(RuntimeError, match="Unrecognized padding"):
        lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), "FULL")
    with pytest.raises(TypeError, match="same dtypes"):
        lax.reduce_window(np.ones((3, 4), np.int32), -np.inf, lax.max, (2, 2), (1, 1), "VALID")
    with pytest.raises(ArgumentError, match="positive"):
        lax.reduce_window(x, 0.0, lax.add, (2, 2), (0, 1), "VALID")


# ---------------------------------------------------------------------------- convolutions

def test_conv_is_the_function_and_matches_a_loop():
    assert callable(lax.conv) and lax.conv.__module__ == "fgrad.lax.convolution"
    x = R.standard_normal((2, 3, 6, 5)).astype(np.float32)
    w = R.standard_normal((4, 3, 3, 2)).astype(np.float32)
    close(lax.conv(x, w, (2, 1), "VALID"), np_conv(x, w, (2, 1), [(0, 0), (0, 0)]), 1e-4, 1e-4)
    close(fgrad.jit(lambda a, b: lax.conv(a, b, (1, 2), "SAME"))(x, w),
          np_conv(x, w, (1, 2), np_same_pads((6, 5), (3, 2), (1, 2))), 1e-4, 1e-4)
    pads = [(1, 0), (2, 1)]
    close(lax.conv_with_general_padding(x, w, (1, 1), pads, (2, 1), (1, 2)),
          np_conv(x, w, (1, 1), pads, (2, 1), (1, 2)), 1e-4, 1e-4)


@pytest.mark.parametrize("padding", ["SAME", "VALID", ((2, 1),)])
@pytest.mark.parametrize("stride,k", [(1, 3), (2, 3), (3, 2), (2, 4)])
def test_conv_transpose_matches_dilate_pad_correlate(padding, stride, k):
    x = R.standard_normal((2, 5, 3)).astype(np.float32)        # NHC (the default layout)
    w = R.standard_normal((k, 3, 4)).astype(np.float32)        # HIO
    got = lax.conv_transpose(x, w, (stride,), padding)
    if isinstance(padding, str):  # JAX's rule, written out
        pad_len = k + stride - 2 + (max(k - stride, 0) if padding == "VALID" else 0)
        lo = k - 1 if padding == "VALID" or stride > k - 1 else -(-pad_len // 2)
        pads = [(lo, pad_len - lo)]
    else:
        pads = list(padding)
    want = np_conv(x.transpose(0, 2, 1), w.transpose(2, 1, 0), (1,), pads, (stride,))
    close(got, want.transpose(0, 2, 1), 1e-4, 1e-4)
    if padding == "SAME":
        assert got.shape[1] == 5 * stride


@pytest.mark.parametrize("stride,k", [(1, 3), (2, 3), (2, 2), (3, 4)])
def test_conv_transpose_with_transpose_kernel_is_the_scatter_form_and_conv_gradient(stride,
                                                                                  k):
    x = R.standard_normal((2, 3, 4)).astype(np.float32)       # NCH
    w = R.standard_normal((3, 5, k)).astype(np.float32)       # the forward conv's OIH
    dn = ("NCH", "OIH", "NCH")
    got = lax.conv_transpose(x, w, (stride,), "VALID", dimension_numbers=dn,
                             transpose_kernel=True)
    close(got, np_scatter_conv_transpose(x, w, stride), 1e-4, 1e-4)
    # it is the gradient of the strided convolution with that kernel
    inp = R.standard_normal((2, 5, (4 - 1) * stride + k)).astype(np.float32)
    _, pull = fgrad.vjp(lambda v: lax.conv_general_dilated(v, w, (stride,), "VALID"), inp)
    close(pull(Tensor(x))[0], got, 1e-4, 1e-4)


def test_conv_transpose_2d_layouts_and_rhs_dilation():
    x = R.standard_normal((1, 2, 4, 3)).astype(np.float32)     # NCHW
    w = R.standard_normal((5, 2, 3, 2)).astype(np.float32)     # OIHW
    dn = ("NCHW", "OIHW", "NCHW")
    got = lax.conv_transpose(x, w, (2, 1), "SAME", rhs_dilation=(1, 2), dimension_numbers=dn)
    span_h, span_w = 3, 3
    pads = []
    for k, s in ((span_h, 2), (span_w, 1)):
        pad_len = k + s - 2
        lo = k - 1 if s > k - 1 else -(-pad_len // 2)
        pads.append((lo, pad_len - lo))
    close(got, np_conv(x, w, (1, 1), pads, (2, 1), (1, 2)), 1e-4, 1e-4)
    assert got.shape == (1, 5, 8, 3)
    w_t = R.standard_normal((2, 5, 3, 2)).astype(np.float32)   # O matches x's channels
    flipped = lax.conv_transpose(x, w_t, (1, 1), "VALID", dimension_numbers=dn,
                                 transpose_kernel=True)
    want = np_conv(x, np.flip(w_t, (2, 3)).transpose(1, 0, 2, 3), (1, 1), [(2, 2), (1, 1)])
    close(flipped, want, 1e-4, 1e-4)
    assert flipped.shape == (1, 5, 6, 4)


def test_conv_dimension_numbers():
    dn = lax.conv_dimension_numbers((1, 2, 3, 4), (5, 6, 7, 8), ("NHWC", "HWIO", "NHWC"))
    assert dn == ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    assert isinstance(dn, lax.ConvDimensionNumbers)
    assert lax.conv_dimension_numbers((1, 2, 3), (4, 2, 1), None) == ((0, 1, 2),) * 3
    x = R.standard_normal((2, 6, 5, 3)).astype(np.float32)
    w = R.standard_normal((3, 2, 3, 4)).astype(np.float32)
    by_strings = lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                          dimension_numbers=("NHWC", "HWIO", "NHWC"))
    by_numbers = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=dn)
    close(by_numbers, by_strings.numpy())
    with pytest.raises(TypeError, match="same rank"):
        lax.conv_dimension_numbers((1, 2, 3), (1, 2), None)


# ---------------------------------------------------------------------------- shape rules

def test_broadcast_shapes_and_padtype_to_pads():
    assert lax.broadcast_shapes((3, 1), (4,)) == (3, 4)
    assert lax.broadcast_shapes((2, 1, 5), (1, 4, 1), ()) == (2, 4, 5)
    assert lax.broadcast_shapes([2, 3]) == (2, 3)
    assert lax.broadcast_shapes((0, 1), (1, 3)) == (0, 3)
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        lax.broadcast_shapes((3,), (4,))
    assert lax.padtype_to_pads((5, 6), (2, 3), (2, 2), "SAME") == [(0, 1), (0, 1)]
    assert lax.padtype_to_pads((5, 6), (2, 3), (2, 2), "same_lower") == [(1, 0), (1, 0)]
    assert lax.padtype_to_pads((5, 6), (2, 3), (1, 1), "VALID") == [(0, 0), (0, 0)]
    assert lax.padtype_to_pads((7,), (4,), (3,), "SAME") == np_same_pads((7,), (4,), (3,))
    with pytest.raises(RuntimeError, match="Unrecognized padding type"):
        lax.padtype_to_pads((5,), (2,), (1,), "FULL")


# ---------------------------------------------------------------------------- lax.linalg

def spd(n, batch=()):
    a = R.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def test_linalg_cholesky_and_eigh():
    a = spd(4, (2,))
    low = lax.linalg.cholesky(a)
    close(low, np.linalg.cholesky(a), 1e-10, 1e-10)
    # symmetrize_input=False reads the lower triangle only
    junk = np.tril(a) + np.triu(R.standard_normal(a.shape), 1)
    close(lax.linalg.cholesky(junk, symmetrize_input=False), np.linalg.cholesky(a), 1e-10,
          1e-10)
    assert np.isnan(lax.linalg.cholesky(-np.eye(3)).numpy()).all()
    v, w = lax.linalg.eigh(a)
    close(w, np.linalg.eigvalsh(a), 1e-10, 1e-10)
    close(v.numpy() @ (w.numpy()[..., None] * np.swapaxes(v.numpy(), -1, -2)), a, 1e-9, 1e-9)
    upper = np.triu(a) + np.tril(R.standard_normal(a.shape), -1)
    close(lax.linalg.eigh(upper, lower=False, symmetrize_input=False)[1],
          np.linalg.eigvalsh(a), 1e-10, 1e-10)


def test_linalg_qr_svd_lu():
    x = R.standard_normal((5, 3))
    q, r = lax.linalg.qr(x)
    assert q.shape == (5, 5) and r.shape == (5, 3)
    close(q.numpy() @ r.numpy(), x, 1e-10, 1e-10)
    q2, r2 = lax.linalg.qr(x, full_matrices=False)
    nq, nr = np.linalg.qr(x)
    close(np.abs(q2.numpy()), np.abs(nq), 1e-10, 1e-10)
    close(np.abs(r2.numpy()), np.abs(nr), 1e-10, 1e-10)
    u, s, vh = lax.linalg.svd(x)
    close(s, np.linalg.svd(x, compute_uv=False), 1e-10, 1e-10)
    close(u.numpy()[:, :3] * s.numpy() @ vh.numpy(), x, 1e-10, 1e-10)
    close(lax.linalg.svd(x, compute_uv=False), np.linalg.svd(x, compute_uv=False), 1e-10)
    a = R.standard_normal((4, 4))
    lu, piv, perm = lax.linalg.lu(a)
    want_lu, want_piv = scipy.linalg.lu_factor(a)
    close(lu, want_lu, 1e-10, 1e-10)
    assert piv.numpy().tolist() == want_piv.tolist()
    low = np.tril(lu.numpy(), -1) + np.eye(4)
    close(low @ np.triu(lu.numpy()), a[perm.numpy()], 1e-10, 1e-10)


@pytest.mark.parametrize("left_side,lower,transpose_a,unit_diagonal",
                         list(itertools.product([False, True], repeat=4)))
def test_linalg_triangular_solve(left_side, lower, transpose_a, unit_diagonal):
    a = R.standard_normal((2, 4, 4)) + 4 * np.eye(4)
    b = R.standard_normal((2, 4, 3) if left_side else (2, 3, 4))
    tri = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        tri = tri - tri * np.eye(4) + np.eye(4)
    op = np.swapaxes(tri, -1, -2) if transpose_a else tri
    want = np.linalg.solve(op, b) if left_side else \
        np.swapaxes(np.linalg.solve(np.swapaxes(op, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
    got = lax.linalg.triangular_solve(a, b, left_side=left_side, lower=lower,
                                      transpose_a=transpose_a, unit_diagonal=unit_diagonal)
    close(got, want, 1e-10, 1e-10)
    vec = b[0, :, 0] if left_side else b[0, 0]
    got1 = lax.linalg.triangular_solve(a[0], vec, left_side=left_side, lower=lower,
                                       transpose_a=transpose_a, unit_diagonal=unit_diagonal)
    close(got1, want[0, :, 0] if left_side else want[0, 0], 1e-10, 1e-10)


def test_linalg_transforms_and_errors():
    a = spd(3, (4,)).astype(np.float32)
    close(fgrad.jit(fgrad.vmap(lax.linalg.cholesky))(a), np.linalg.cholesky(a), 1e-4, 1e-4)
    g = fgrad.grad(lambda m: lax.linalg.eigh(m)[1].sum())(Tensor(spd(3)))
    close(g, np.eye(3), 1e-8, 1e-8)  # the trace's gradient
    with pytest.raises(ArgumentError, match="square"):
        lax.linalg.lu(np.ones((3, 2)))
    with pytest.raises(TypeError, match="floating-point"):
        lax.linalg.cholesky(np.eye(3, dtype=np.int32))
    with pytest.raises(NotImplementedError, match="pivoting"):
        lax.linalg.qr(np.eye(3), pivoting=True)


# ---------------------------------------------------------------------------- unroll hints

def test_scan_and_fori_loop_accept_unroll():
    xs = np.arange(5, dtype=np.float32)

    def step(c, x):
        return c + x, c * 2

    want_c, want_ys = lax.scan(step, np.float32(0), xs)
    for unroll in (1, 2, 0, True, False, np.int32(3)):
        c, ys = lax.scan(step, np.float32(0), xs, unroll=unroll)
        close(c, want_c.numpy())
        close(ys, want_ys.numpy())
    c, _ = lax.scan(step, np.float32(0), xs, _split_transpose=True)
    close(c, want_c.numpy())
    body = functools.partial(lambda i, v: v + i)
    assert int(lax.fori_loop(0, 5, body, 0, unroll=2)) == 10
    assert int(fgrad.jit(lambda n: lax.fori_loop(0, 4, body, n, unroll=True))(Tensor(1))) == 7
    with pytest.raises(TypeError, match="unroll"):
        lax.scan(step, np.float32(0), xs, unroll=1.5)
    with pytest.raises(ValueError, match="non-negative"):
        lax.fori_loop(0, 5, body, 0, unroll=-1)
    with pytest.raises(ValueError, match="statically known"):
        fgrad.jit(lambda n: lax.fori_loop(0, n, body, 0, unroll=2))(Tensor(5))


def test_special_functions_match_scipy() -> None:
    import scipy.special as ss

    x = np.array([0.25, 1.5, 7.0], np.float32)
    np.testing.assert_allclose(lax.lgamma(x).numpy(), ss.gammaln(x), rtol=1e-6)
    np.testing.assert_allclose(lax.digamma(x).numpy(), ss.digamma(x), rtol=1e-6)
    np.testing.assert_allclose(lax.erfc(x).numpy(), ss.erfc(x), rtol=1e-5)
    y = np.array([-0.9, 0.1, 0.5], np.float32)
    np.testing.assert_allclose(lax.erf_inv(y).numpy(), ss.erfinv(y), rtol=1e-6)
    np.testing.assert_allclose(fgrad.jit(lax.lgamma)(x).numpy(), ss.gammaln(x), rtol=1e-6)
