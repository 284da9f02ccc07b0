"""jax.numpy's semantics where they depart from NumPy's, against a fixture JAX wrote
(fixtures/gen_numpy_more_jax.py, jax 0.10.2): size=/fill_value= padding of the set
operations, unique_* and compress/extract, the functional put/place, insert's clipping,
r_/c_ dtypes and directives, polydiv's untrimmed remainder, histogram2d's int32 counts,
nanquantile. Values, shapes and dtypes must match, eagerly and under jit."""
from __future__ import annotations

import importlib.util
import os
from typing import Any

import numpy as np
import pytest

import fgrad
import fgrad.numpy as fnp
from fgrad import Tensor

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "gen_numpy_more_jax", os.path.join(HERE, "fixtures", "gen_numpy_more_jax.py"))
assert _spec is not None and _spec.loader is not None
GEN = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(GEN)
FIX = np.load(os.path.join(HERE, "fixtures", "numpy_more_jax.npz"))

# cases whose output shapes do not depend on the values: they also run under jit with the
# array arguments traced
NO_JIT = {"unique_counts_2d", "unique_values_nan", "unique_all_float", "compress_axis0",
          "compress_flat_short", "extract_2d", "setdiff1d_int8", "polydiv_trim",
          "mask_indices_size"}
NO_JIT |= {n for n in GEN.CASES if n.startswith(("r_", "c_"))}


def _check(name: str, got: Any) -> None:
    outs = GEN.parts(got)
    keys = sorted((k for k in FIX.files if k.startswith(name + "/")),
                  key=lambda k: int(k.split("/")[1]))
    assert len(outs) == len(keys), (name, len(outs), len(keys))
    for out, key in zip(outs, keys):
        want = FIX[key]
        assert isinstance(out, Tensor), (key, type(out))
        g = out.numpy()
        assert g.shape == want.shape, (key, g.shape, want.shape)
        assert g.dtype == want.dtype, (key, g.dtype, want.dtype)
        np.testing.assert_allclose(g.astype(np.float64), want.astype(np.float64), rtol=2e-6,
                                   atol=2e-6, equal_nan=True, err_msg=key)


def test_fixture_is_complete() -> None:
    assert str(FIX["jax_version"]) == "0.10.2"
    assert len(GEN.CASES) == 64 and len(FIX.files) == 92


@pytest.mark.parametrize("name", list(GEN.CASES))
def test_eager_matches_jax(name: str) -> None:
    fn, args, kwargs = GEN.CASES[name]
    _check(name, GEN.call(fnp, fn, args, kwargs))


@pytest.mark.parametrize("name", [n for n in GEN.CASES if n not in NO_JIT])
def test_jit_matches_jax(name: str) -> None:
    fn, args, kwargs = GEN.CASES[name]
    arrays = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]

    def f(*traced: Any) -> Any:
        full = list(args)
        for i, t in zip(arrays, traced):
            full[i] = t
        return GEN.call(fnp, fn, tuple(full), kwargs)

    _check(name, fgrad.jit(f)(*[args[i] for i in arrays]))
