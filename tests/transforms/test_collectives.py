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
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(name):
    np.testing.assert_allclose(CASES[name](Tensor(XS)).numpy(), FIX[name], rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("name", ["normalize", "gather0", "grad_psum", "nested"])
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
    with pytest.raises(NameError, match="axis_name='i'"):
        lax.psum(Tensor(XS), "i")
