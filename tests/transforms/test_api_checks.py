"""Bad arguments to the transformation API fail early and say what to change (issue 18,
item 13; static arguments from issue 17)."""
import logging

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lax import fori_loop


def one_arg(x):
    return x * 2


def with_n(x, n):
    out = x
    for _ in range(n):  # needs a Python int: fails if n were traced
        out = out + 1
    return out


def test_static_argnums_out_of_range_fails_at_jit_time():
    with pytest.raises(ValueError, match=r"static_argnums=3 is out of range.*\('x',\)"):
        fgrad.jit(one_arg, static_argnums=3)
    with pytest.raises(ValueError, match="donate_argnums=2"):
        fgrad.jit(one_arg, donate_argnums=2)
    fgrad.jit(lambda *xs: xs[0], static_argnums=3)  # *args: any position may exist


def test_unknown_static_argnames_fails_at_jit_time():
    with pytest.raises(ValueError, match=r"static_argnames 'm' is not a parameter.*'x', 'n'"):
        fgrad.jit(with_n, static_argnames="m")
    fgrad.jit(lambda x, **kw: x, static_argnames="m")  # **kwargs: any name may exist


def test_jit_of_a_non_callable_fails_at_jit_time():
    with pytest.raises(TypeError, match="jit expects a function, got int"):
        fgrad.jit(5)
    with pytest.raises(TypeError, match="static_argnums must hold ints"):
        fgrad.jit(one_arg, static_argnums=("x",))
    with pytest.raises(TypeError, match="an int / str or a sequence"):
        fgrad.jit(one_arg, static_argnums=1.0)


def test_static_argname_passed_positionally_is_static():
    f = fgrad.jit(with_n, static_argnames="n")
    x = Tensor(np.zeros(3, np.float32))
    np.testing.assert_array_equal(f(x, 3).numpy(), [3, 3, 3])
    np.testing.assert_array_equal(f(x, n=2).numpy(), [2, 2, 2])
    f(x, 3)
    assert f.cache_info().misses == 2


@pytest.mark.parametrize("value", [Tensor(np.arange(3)), np.arange(3), [1, 2]])
def test_unhashable_or_array_static_argument_is_a_clear_error(value, caplog):
    f = fgrad.jit(lambda x, n: x, static_argnames="n")
    with caplog.at_level(logging.WARNING, logger="fgrad.jit"):
        for _ in range(2):
            with pytest.raises(TypeError, match="static argument"):
                f(Tensor(np.zeros(2, np.float32)), value)
            with pytest.raises(TypeError, match="static argument"):
                f(Tensor(np.zeros(2, np.float32)), n=value)
    assert "retracing" not in caplog.text


def test_fori_loop_bounds_must_be_integers():
    with pytest.raises(TypeError, match="fori_loop: lower must be an int"):
        fori_loop(0.5, 3, lambda i, v: v + i, Tensor(0.0))
    with pytest.raises(TypeError, match="fori_loop: upper must be an int"):
        fori_loop(0, Tensor(3.0), lambda i, v: v + i, Tensor(0.0))
    assert float(fori_loop(np.int64(1), 4, lambda i, v: v + i, Tensor(0.0)).numpy()) == 6.0


@pytest.mark.parametrize("bad,dtype", [(np.ones(3, np.complex64), "complex64"),
                                       (np.array([object()] * 3), "object")])
def test_unsupported_numpy_argument_names_the_parameter(bad, dtype):
    def f(x, y):
        return x + y
    with pytest.raises(TypeError, match=rf"argument y of f is a NumPy value of dtype {dtype}"
                                        r".*astype") as info:
        fgrad.jit(f)(Tensor(np.ones(3, np.float32)), bad)
    assert "static_argnums" not in str(info.value)


def test_giant_shapes_say_what_is_wrong():
    with pytest.raises(ValueError, match=r"shape \(1099511627776, 1099511627776\) is too "
                                         r"large"):
        Tensor.zeros(2 ** 40, 2 ** 40)
    assert Tensor.zeros(2 ** 40, 0).shape == (2 ** 40, 0)
