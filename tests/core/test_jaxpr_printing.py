"""Golden tests of `make_jaxpr` text: the exact printed jaxpr of a few small functions, plus
checks that every equation type-checks, evaluates like the eager function, and records the
user source line that created it."""
import inspect
import os

import numpy as np
import pytest

from fgrad import Tensor, make_jaxpr
from fgrad.core.ir import typecheck_jaxpr
from fgrad.core.staging import eval_jaxpr

X = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3) / 4 - 0.5)
C = Tensor(np.array([1.0, -2.0, 0.5], np.float32))
IDX = Tensor(np.array([1, -2], np.int32))


def sin_scale_sum(x):
    return (x.sin() * 2).sum()


def closes_over_constant(x):
    return x * C + 1.0


def two_outputs(x, y):
    return x * 3.0, x.sum() + y


def gather_rows(x, i):
    return x[i]


def basic_index(x):
    return x[1, ::-1]


GOLDEN = {
    sin_scale_sum: (
        (X,), """\
{ lambda ; a:f32[2,3]. let
    b:f32[2,3] = sin a
    c:f32[2,3] = broadcast_in_dim[shape=(2, 3), broadcast_dimensions=()] 2.0:f32[]
    d:f32[2,3] = mul b c
    e:f32[] = reduce_sum[axes=(0, 1)] d
  in (e,) }"""),
    closes_over_constant: (
        (X,), """\
{ lambda a:f32[3] ; b:f32[2,3]. let
    c:f32[2,3] = broadcast_in_dim[shape=(2, 3), broadcast_dimensions=(1,)] a
    d:f32[2,3] = mul b c
    e:f32[2,3] = broadcast_in_dim[shape=(2, 3), broadcast_dimensions=()] 1.0:f32[]
    f:f32[2,3] = add d e
  in (f,) }"""),
    two_outputs: (
        (X, Tensor(1.5)), """\
{ lambda ; a:f32[2,3] b:f32[]. let
    c:f32[2,3] = broadcast_in_dim[shape=(2, 3), broadcast_dimensions=()] 3.0:f32[]
    d:f32[2,3] = mul a c
    e:f32[] = reduce_sum[axes=(0, 1)] a
    f:f32[] = add e b
  in (d, f) }"""),
    gather_rows: (
        (X, IDX), """\
{ lambda ; a:f32[2,3] b:i32[2]. let
    c:i32[2] = broadcast_in_dim[shape=(2,), broadcast_dimensions=()] 0:i32[]
    d:bool[2] = ge b c
    e:i32[2] = broadcast_in_dim[shape=(2,), broadcast_dimensions=()] 2:i32[]
    f:i32[2] = add b e
    g:i32[2] = select d b f
    h:f32[2,3] = gather a g
  in (h,) }"""),
    basic_index: (
        (X,), """\
{ lambda ; a:f32[2,3]. let
    b:f32[1,3] = slice[start=(1, 0), limit=(2, 3), strides=(1, 1)] a
    c:f32[3] = reshape[new_shape=(3,)] b
    d:f32[3] = rev[dimensions=(0,)] c
  in (d,) }"""),
}
CASES = list(GOLDEN.items())
IDS = [fn.__name__ for fn, _ in CASES]


@pytest.mark.parametrize("fn, case", CASES, ids=IDS)
def test_printed_jaxpr_is_pinned(fn, case):
    args, expected = case
    closed = make_jaxpr(fn)(*args)
    assert str(closed) == expected
    assert repr(closed) == expected


@pytest.mark.parametrize("fn, case", CASES, ids=IDS)
def test_jaxpr_typechecks_and_evaluates_like_eager(fn, case):
    args, _ = case
    closed = make_jaxpr(fn)(*args)
    typecheck_jaxpr(closed.jaxpr)
    outs = eval_jaxpr(closed.jaxpr, closed.consts, list(args))
    eager = fn(*args)
    eager = list(eager) if isinstance(eager, tuple) else [eager]
    assert len(outs) == len(eager)
    for got, ref in zip(outs, eager, strict=True):
        assert got.dtype == ref.dtype
        np.testing.assert_array_equal(got.numpy(), ref.numpy())


@pytest.mark.parametrize("fn, case", CASES, ids=IDS)
def test_every_eqn_points_at_the_user_line(fn, case):
    args, _ = case
    closed = make_jaxpr(fn)(*args)
    lines, first = inspect.getsourcelines(fn)
    body = range(first, first + len(lines))
    assert closed.eqns
    for eqn in closed.eqns:
        src = eqn.source
        assert src is not None, eqn.primitive.name
        assert os.path.samefile(src.filename, __file__)
        assert src.lineno in body and src.function == fn.__name__
        assert f"{src.lineno}" in str(src) and fn.__name__ in str(src)


def test_constvar_holds_the_closed_over_value():
    closed = make_jaxpr(closes_over_constant)(X)
    assert len(closed.jaxpr.constvars) == 1 and len(closed.consts) == 1
    np.testing.assert_array_equal(closed.consts[0].numpy(), C.numpy())
    assert [str(a) for a in closed.in_avals] == ["f32[2,3]"]
    assert [str(a) for a in closed.out_avals] == ["f32[2,3]"]


def test_scalar_constants_become_literals_not_constvars():
    closed = make_jaxpr(lambda x: x * Tensor(2.0) + 1)(X)
    assert closed.jaxpr.constvars == [] and closed.consts == []
    assert "2.0:f32[]" in str(closed) and "1.0:f32[]" in str(closed)


def test_static_argument_is_baked_in():
    text = str(make_jaxpr(lambda x, n: x * n, static_argnums=1)(X, 3))
    assert text.startswith("{ lambda ; a:f32[2,3]. let") and "3.0:f32[]" in text


def test_output_pytree_and_dtypes():
    closed = make_jaxpr(lambda x: {"m": x.max(1), "i": x.argmax(1)})(X)
    assert [str(a) for a in closed.out_avals] == ["i32[2]", "f32[2]"]  # dict keys sorted
    assert "argmax[axis=1, index_dtype=i32] a" in str(closed)


def test_many_variables_get_multi_letter_names():
    def chain(x):
        for _ in range(30):
            x = x.sin()
        return x
    text = str(make_jaxpr(chain)(X))
    assert "aa:f32[2,3] = sin z" in text and text.endswith("in (ae,) }")
