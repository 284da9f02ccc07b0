"""Errors under transformations point at the user's code (issue 18, item 14)."""
import os
import traceback

import numpy as np
import pytest

import fgrad
from fgrad import Tensor

FGRAD_DIR = os.path.dirname(os.path.abspath(fgrad.__file__)) + os.sep


def broken(x):
    return x.reshape(7)  # the failing user line


def frames(err):
    return traceback.extract_tb(err.__traceback__)


def fgrad_frames(err):
    return [f for f in frames(err) if os.path.abspath(f.filename).startswith(FGRAD_DIR)]


def run(call):
    with pytest.raises(ValueError) as info:
        call()
    return info.value


@pytest.mark.parametrize("how", ["jit", "grad", "vmap", "jit-in-grad", "make_jaxpr"])
def test_internal_frames_are_filtered(how):
    x = Tensor(np.ones((2, 3), np.float32))
    calls = {"jit": lambda: fgrad.jit(broken)(x),
             "grad": lambda: fgrad.grad(lambda a: broken(a).sum())(x),
             "vmap": lambda: fgrad.vmap(broken)(x),
             "jit-in-grad": lambda: fgrad.grad(lambda a: fgrad.jit(broken)(a).sum())(x),
             "make_jaxpr": lambda: fgrad.jit(lambda a: broken(a)).lower(x)}
    err = run(calls[how])
    inside = fgrad_frames(err)
    assert len(inside) <= 1  # the entry point that re-raised
    assert all(f.filename.endswith("traceback_util.py") or f.name == "__call__" for f in inside)
    assert frames(err)[-1].line == "return x.reshape(7)  # the failing user line"
    assert any("FGRAD_TRACEBACK_FILTERING=off" in n for n in err.__notes__)


def test_filtering_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("FGRAD_TRACEBACK_FILTERING", "off")
    err = run(lambda: fgrad.jit(broken)(Tensor(np.ones(6, np.float32).reshape(2, 3))))
    assert len(fgrad_frames(err)) > 5
    assert not getattr(err, "__notes__", [])


def test_shape_errors_while_tracing_name_the_user_line():
    err = run(lambda: fgrad.jit(broken)(Tensor(np.ones((2, 3), np.float32))))
    message = str(err)
    assert message.startswith("reshape: cannot reshape (2, 3)")
    assert "while tracing jit(broken)" in message and "return x.reshape(7)" in message
    assert f"{__file__}:" in message


def test_dtype_errors_while_tracing_name_the_user_line():
    def bad_index(x):
        return x[Tensor(np.array([0.5], np.float32))]
    with pytest.raises(IndexError):  # not a TypeError/ValueError: message unchanged
        fgrad.jit(bad_index)(Tensor(np.ones(3, np.float32)))

    def bad_dot(x):
        return x @ Tensor(np.ones((4, 2), np.float32))
    err = run(lambda: fgrad.jit(bad_dot)(Tensor(np.ones((2, 3), np.float32))))
    assert "return x @ Tensor(np.ones((4, 2), np.float32))" in str(err)


def test_eager_errors_are_untouched():
    with pytest.raises(ValueError) as info:
        broken(Tensor(np.ones((2, 3), np.float32)))
    assert "while tracing" not in str(info.value)
    assert len(fgrad_frames(info.value)) >= 1
