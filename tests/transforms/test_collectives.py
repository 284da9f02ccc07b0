"""Tests for vmap(axis_name=) with lax.psum/pmean/pmax/pmin/all_gather/axis_index against JAX
fixtures (tests/transforms/fixtures/gen_collective_fixtures.py): values, gradients, jit,
nested named axes, and the unbound-name error."""
import pathlib

import numpy as np
import pytest

import fgrad
from fgrad import Tensor, lax

FIX = np.load(pathlib.Path(__file__).parent / "fixtures" / "collectives.npz")
XS = FIX["xs"]


def vm(f):
    return fgrad.vmap(f, axis_name="i")


CASES = {
    "normalize": vm(lambda x: x / lax.psum(x, "i")),
    "pmean": vm(lambda x: x - lax.pmean(x, "i")),
    "pmax": vm(lambda x: lax.pmax(x, "i") + 0 * x),
    "pmin": vm(lambda x: lax.pmin(x, "i") + 0 * x),
    "gather0": vm(lambda x: lax.all_gather(x, "i")),
    "gather1_tiled": vm(lambda x: lax.all_gather(x, "i", axis=0, tiled=True)),
    "index": vm(lambda x: lax.axis_index("i") * x),
    "grad_psum": vm(fgrad.grad(lambda x: (x * lax.psum(x, "i")).sum())),
    "grad_pmean": vm(fgrad.grad(lambda x: (x * lax.pmean(x, "i")).sum())),
    "grad_gather": vm(fgrad.grad(lambda x: (lax.all_gather(x, "i") ** 2).sum())),
    "nested": fgrad.vmap(fgrad.vmap(lambda x: x / lax.psum(x, "outer"), axis_name="inner"),
                         axis_name="outer"),
    # a jit (or scan) inside the named vmap: its batching rule carries the axis name
    "jit_inside": vm(fgrad.jit(lambda x: x / lax.psum(x, "i"))),
    "jit_inside_gather": vm(fgrad.jit(lambda x: lax.all_gather(x, "i") * 2)),
    "jit_inside_pmax_pmean": vm(fgrad.jit(lambda x: lax.pmax(x, "i") - lax.pmean(x, "i"))),
    "jit_in_jit": vm(fgrad.jit(lambda x: fgrad.jit(lambda y: y * lax.psum(y, "i"))(x) + 1)),
    "grad_of_jit": vm(fgrad.grad(fgrad.jit(lambda x: (x * lax.psum(x, "i")).sum()))),
    "jit_nested_outer": fgrad.vmap(fgrad.vmap(fgrad.jit(lambda x: x / lax.psum(x, "outer")),
                                              axis_name="inner"), axis_name="outer"),
    "scan_inside": vm(lambda x: lax.scan(lambda c, r: (c + lax.psum(r, "i"), c * r),
                                         0.0, x)[1]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(name):
    np.testing.assert_allclose(CASES[name](Tensor(XS)).numpy(), FIX[name], rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("name", ["normalize", "gather0", "grad_psum", "nested", "jit_inside",
                                  "grad_of_jit", "scan_inside"])
def test_matches_jax_under_jit(name):
    np.testing.assert_allclose(fgrad.jit(CASES[name])(Tensor(XS)).numpy(), FIX[name],
                               rtol=1e-5, atol=1e-6)


def test_pytree_and_pmax_tangent():
    out = vm(lambda x: lax.psum({"a": x, "b": 2 * x}, "i"))(Tensor(XS))
    np.testing.assert_allclose(out["b"].numpy()[0], 2 * XS.sum(0), rtol=1e-6)
    # pmax's tangent follows the members holding the maximum (JAX has no rule here)
    _, tan = fgrad.jvp(vm(lambda x: lax.pmax(x, "i")), (Tensor(XS),),
                       (Tensor(np.ones_like(XS)),))
    np.testing.assert_allclose(tan.numpy(), 1.0)


def test_unbound_axis_name():
    with pytest.raises(NameError, match="unbound axis name 'j'"):
        vm(lambda x: lax.psum(x, "j"))(Tensor(XS))
    with pytest.raises(NameError, match="unbound axis name 'j'.*axis_name='j'"):
        vm(fgrad.jit(lambda x: lax.psum(x, "j")))(Tensor(XS))
    with pytest.raises(NameError, match="axis_name='i'"):
        lax.psum(Tensor(XS), "i")


def test_collectives_over_a_tuple_of_axis_names():
    """JAX's psum/pmean/pmax/axis_index take several axis names at once (shard_map over a
    2-d mesh); against NumPy over the whole (3, 4) grid."""
    from fgrad import lax
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)

    def member(v):
        return (lax.psum(v, ("i", "j")), lax.pmean(v, ("i", "j")), lax.pmax(v, ("j", "i")),
                lax.axis_index(("i", "j")))

    f = fgrad.vmap(fgrad.vmap(member, axis_name="j"), axis_name="i")
    for g in (f, fgrad.jit(f)):
        s, m, mx, ix = g(fgrad.Tensor(x))
        np.testing.assert_allclose(s.numpy(), np.full((3, 4), x.sum()))
        np.testing.assert_allclose(m.numpy(), np.full((3, 4), x.mean()))
        np.testing.assert_allclose(mx.numpy(), np.full((3, 4), x.max()))
        np.testing.assert_array_equal(ix.numpy(), np.arange(12).reshape(3, 4))
    with pytest.raises(NotImplementedError, match="one axis name at a time"):
        f2 = fgrad.vmap(fgrad.vmap(lambda v: lax.all_gather(v, ("i", "j")), axis_name="j"),
                        axis_name="i")
        f2(fgrad.Tensor(x))
