"""More of JAX's top-level names on fgrad: custom_gradient (checked against finite
differences), named_call, typeof, the device/process counts, the config states (enable_x64,
log_compiles, default_device, check_tracer_leaks, transfer_guard), print_environment_info,
and fgrad.random.key_impl / key_dtype."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import Tensor


def _fd(f, x, eps=1e-6):
    """Central finite differences of the scalar float64 function f at the array x."""
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


@fgrad.custom_gradient
def log1pexp(x):
    """softplus with a hand-written, overflow-free gradient (JAX's docs' example)."""
    out = fnp.log1p(fnp.exp(x))
    return out, lambda g: g * (1 - 1 / (1 + fnp.exp(x)))


@fgrad.custom_gradient
def scaled_prod(x, y):
    s = fnp.sin(x)
    return (s * y).sum(), lambda g: (g * fnp.cos(x) * y, g * s)


def _np_scaled_prod(x, y):
    return float((np.sin(x) * y).sum())


def test_custom_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5,))
    y = rng.normal(size=(5,))
    errs = []
    gx, gy = fgrad.grad(scaled_prod, argnums=(0, 1))(Tensor(x), Tensor(y))
    errs.append(np.abs(gx.numpy() - _fd(lambda a: _np_scaled_prod(a, y), x)).max())
    errs.append(np.abs(gy.numpy() - _fd(lambda b: _np_scaled_prod(x, b), y)).max())
    for v in (-3.0, 0.0, 0.4, 5.0):
        g = fgrad.grad(log1pexp)(Tensor(v))
        errs.append(abs(float(g) - _fd(lambda a: np.log1p(np.exp(a)), v)))
    assert max(errs) < 1e-5, errs
    assert float(fgrad.grad(log1pexp)(Tensor(100.0))) == 1.0  # the custom rule, no overflow
    assert float(log1pexp(Tensor(0.0))) == pytest.approx(np.log(2.0))


def test_custom_gradient_under_jit_vmap_and_closures():
    x = Tensor(np.linspace(-1, 1, 4, dtype=np.float32))
    y = Tensor(np.linspace(1, 2, 4, dtype=np.float32))
    want_x, want_y = np.cos(x.numpy()) * y.numpy(), np.sin(x.numpy())
    gx, gy = fgrad.jit(fgrad.grad(scaled_prod, argnums=(0, 1)))(x, y)
    np.testing.assert_allclose(gx.numpy(), want_x, rtol=1e-6)
    np.testing.assert_allclose(gy.numpy(), want_y, rtol=1e-6)
    per_row = fgrad.vmap(fgrad.grad(lambda a, b: scaled_prod(a, b), argnums=0))(
        x.reshape(2, 2), y.reshape(2, 2))
    np.testing.assert_allclose(per_row.numpy().ravel(), want_x, rtol=1e-6)
    # the rule closes over a value traced by an outer grad
    outer = fgrad.grad(lambda w: fgrad.grad(lambda a: scaled_prod(a, w * y))(x).sum())(
        Tensor(2.0))
    assert float(outer) == pytest.approx(float((np.cos(x.numpy()) * y.numpy()).sum()), 1e-6)


def test_custom_gradient_clips_and_takes_pytrees_and_kwargs():
    @fgrad.custom_gradient
    def clip_gradient(x):
        return x, lambda g: fnp.clip(g, -1.0, 1.0)

    g = fgrad.grad(lambda v: (clip_gradient(v) * 5.0).sum())(Tensor([1.0, 2.0]))
    np.testing.assert_array_equal(g.numpy(), [1.0, 1.0])

    @fgrad.custom_gradient
    def dot(params, x):
        out = (params["w"] * x).sum() + params["b"]
        return out, lambda g: ({"w": g * x, "b": g}, None)

    params = {"w": Tensor([1.0, 2.0]), "b": Tensor(0.5)}
    g = fgrad.grad(dot)(params, x=Tensor([3.0, 4.0]))
    np.testing.assert_array_equal(g["w"].numpy(), [3.0, 4.0])
    assert float(g["b"]) == 1.0


def test_custom_gradient_errors():
    @fgrad.custom_gradient
    def no_pair(x):
        return x * 2

    with pytest.raises(TypeError, match=r"must return a pair \(value, vjp_fn\)"):
        no_pair(Tensor(1.0))

    @fgrad.custom_gradient
    def short(x, y):
        return x * y, lambda g: g * y

    with pytest.raises(TypeError, match=r"one cotangent per argument \(2\)"):
        fgrad.grad(short)(Tensor(1.0), Tensor(2.0))

    @fgrad.custom_gradient
    def kwonly(x, *, scale):
        return x * scale, lambda g: g * scale

    with pytest.raises(TypeError, match="keyword-only arguments"):
        kwonly(Tensor(1.0), scale=Tensor(2.0))
    with pytest.raises(TypeError, match="forward-mode"):
        fgrad.jvp(log1pexp, (Tensor(1.0),), (Tensor(1.0),))


def test_named_call_keeps_results_and_renames():
    def f(x):
        return x * 3

    g = fgrad.named_call(f, name="triple")
    assert g.__name__ == "triple" and fgrad.named_call(f).__name__ == "f"
    assert float(fgrad.jit(g)(Tensor(2.0))) == 6.0
    assert float(fgrad.grad(g)(Tensor(2.0))) == 3.0
    with pytest.raises(TypeError, match="must be callable"):
        fgrad.named_call(3)


def test_typeof_gives_the_abstract_value():
    t = fgrad.typeof(fnp.ones((2, 3)))
    assert isinstance(t, fgrad.ShapedArray) and t.shape == (2, 3) and str(t) == "f32[2,3]"
    assert str(fgrad.typeof(1.0)) == "f32[]" and str(fgrad.typeof(3)) == "i32[]"
    assert str(fgrad.typeof(True)) == "bool[]"
    assert str(fgrad.typeof(np.zeros(4, np.int8))) == "i8[4]"
    seen = []
    fgrad.jit(lambda x: seen.append(fgrad.typeof(x)) or x)(Tensor(np.ones((3,), np.float32)))
    assert str(seen[0]) == "f32[3]"
    with pytest.raises(TypeError, match="typeof: argument of type str is not an array"):
        fgrad.typeof("a")
    with pytest.raises(TypeError, match="typeof"):
        fgrad.typeof([1, 2])


def test_device_and_process_counts():
    assert fgrad.local_device_count() >= 1
    assert fgrad.local_device_count("cpu") == 1
    assert fgrad.device_count() == fgrad.local_device_count() * fgrad.process_count()
    assert fgrad.host_count() == fgrad.process_count() == 1
    assert fgrad.host_id() == fgrad.process_index() == 0
    assert fgrad.host_ids() == fgrad.process_indices() == [0]
    with pytest.raises(ValueError, match="unknown backend"):
        fgrad.local_device_count("tpu")


def test_enable_x64_and_log_compiles_are_fgrads_settings(caplog):
    before = fgrad.enable_x64.value
    with fgrad.enable_x64(True):
        assert fgrad.enable_x64.value and fgrad.config.enable_x64
        assert fnp.ones(2).dtype == fgrad.dtypes.float64
    with fgrad.enable_x64(False):
        assert fnp.ones(2).dtype == fgrad.dtypes.float32
    assert fgrad.enable_x64.value == before
    with fgrad.enable_x64():  # as JAX's: no value means True
        assert fgrad.enable_x64.value
    with pytest.raises(TypeError, match="expected a bool"):
        with fgrad.enable_x64("yes"):
            pass
    with caplog.at_level(logging.INFO, logger="fgrad.jit"):
        with fgrad.log_compiles(True):
            assert fgrad.log_compiles.value
            fgrad.jit(lambda x: x * 7.5 - 1)(Tensor(np.ones(3, np.float32)))
    assert caplog.records, "log_compiles(True) logged nothing"
    assert "enable_x64" in repr(fgrad.enable_x64)


def test_recorded_states_and_transfer_guard():
    assert fgrad.check_tracer_leaks.value is False
    with fgrad.checking_leaks():
        assert fgrad.check_tracer_leaks.value is True
    assert fgrad.check_tracer_leaks.value is False
    with fgrad.transfer_guard("disallow"):
        assert fgrad.transfer_guard_host_to_device.value == "disallow"
        assert fgrad.transfer_guard_device_to_host.value == "disallow"
        with fgrad.transfer_guard_device_to_device("log"):
            assert fgrad.transfer_guard_device_to_device.value == "log"
        assert fgrad.transfer_guard_device_to_device.value == "disallow"
    assert fgrad.transfer_guard_host_to_device.value is None
    with pytest.raises(ValueError, match="level must be one of"):
        with fgrad.transfer_guard("never"):
            pass
    with pytest.raises(TypeError, match="needs a value"):
        with fgrad.transfer_guard_host_to_device():
            pass


def test_default_device_points_jit_at_the_device():
    assert fgrad.default_device.value is None
    with fgrad.config.override(backend="opencl"):
        with fgrad.default_device("cpu"):
            assert fgrad.default_device.value == "CPU"
            assert fgrad.default_backend() == "llvm"
        assert fgrad.default_backend() == "opencl"
    with fgrad.default_device("CPU"):
        assert fgrad.default_backend() == fgrad.config.backend
    if "CL:0" in fgrad.devices():
        with fgrad.default_device("CL:0"):
            assert fgrad.default_backend() == "opencl"
            assert fgrad.config.opencl_device == "CL:0"
    else:
        with pytest.raises(ValueError, match="no OpenCL device"):
            with fgrad.default_device("CL:0"):
                pass
    with pytest.raises(ValueError, match="unknown device"):
        with fgrad.default_device("TPU"):
            pass
    assert fgrad.default_device.value is None


def test_print_environment_info(capsys):
    text = fgrad.print_environment_info(return_string=True)
    assert text.startswith("fgrad:") and "numpy:" in text and "process_count: 1" in text
    assert fgrad.print_environment_info() is None
    assert capsys.readouterr().out == text


def test_random_key_impl_and_key_dtype():
    key = fgrad.random.key(0)
    assert fgrad.random.key_impl(key) == "threefry2x32"
    assert fgrad.random.key_impl(fgrad.random.split(key, 3)) == "threefry2x32"
    assert fgrad.random.key_dtype() == fgrad.random.key_dtype("threefry2x32") == key.dtype
    with pytest.raises(TypeError, match="key_impl: expected uint32 key data"):
        fgrad.random.key_impl(fnp.ones(2))
    with pytest.raises(ValueError, match="only has the 'threefry2x32'"):
        fgrad.random.key_dtype("rbg")


def test_pmap_maps_the_leading_axis_with_named_collectives() -> None:
    """A data-parallel step written for jax.pmap: per-shard gradients, averaged with
    lax.pmean over the named axis (against NumPy's closed form)."""
    from fgrad import lax
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((2, 8, 3)).astype(np.float32)
    ys = rng.standard_normal((2, 8)).astype(np.float32)
    w = rng.standard_normal(3).astype(np.float32)

    def step(w, x, y, lr):
        g = fgrad.grad(lambda w: ((x @ w - y) ** 2).mean())(w)
        return w - lr * lax.pmean(g, "devices")

    p = fgrad.pmap(step, axis_name="devices", in_axes=(None, 0, 0, None),
                   static_broadcasted_argnums=3)
    got = p(fgrad.Tensor(w), fgrad.Tensor(xs), fgrad.Tensor(ys), 0.1).numpy()
    grads = [2 * x.T @ (x @ w - y) / len(y) for x, y in zip(xs, ys)]
    want = w - 0.1 * np.mean(grads, axis=0)
    np.testing.assert_allclose(got, np.stack([want, want]), rtol=1e-5, atol=1e-6)
    summed = fgrad.pmap(lambda v: lax.psum(v, "i"), "i", backend="cpu")(fgrad.Tensor(xs))
    np.testing.assert_allclose(summed.numpy(), np.stack([xs.sum(0)] * 2), rtol=1e-6)
