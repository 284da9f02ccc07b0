"""Tests for checkpoint(policy=...), checkpoint_name and print_saved_residuals: gradients
against a NumPy closed form, and which residuals each policy saves."""
import numpy as np
import pytest

import fgrad
from fgrad import Tensor

RNG = np.random.default_rng(0)
W = RNG.normal(size=(8, 8)).astype(np.float32) / 3
X = RNG.normal(size=(4, 8)).astype(np.float32)
WT = Tensor(W)
P = fgrad.checkpoint_policies


def f(x):
    h = (x @ WT).tanh()
    h = fgrad.checkpoint_name(h, "hidden")
    return (h @ WT).sin().sum()


def numpy_grad(x):
    h = np.tanh(x @ W)
    dz = np.cos(h @ W)
    return ((dz @ W.T) * (1 - h * h)) @ W.T


POLICIES = {
    "default": (None, 0),
    "nothing": (P.nothing_saveable, 0),
    "dots": (P.dots_saveable, 2),
    "dots_no_batch": (P.dots_with_no_batch_dims_saveable, 2),
    "everything": (P.everything_saveable, 2),
    "names": (P.save_only_these_names("hidden"), 1),
    "names_but": (P.save_any_names_but_these("hidden"), 0),
}


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_gradient_and_saved_residuals(name, capsys):
    policy, extra = POLICIES[name]
    g = fgrad.grad(fgrad.checkpoint(f, policy=policy))
    np.testing.assert_allclose(g(Tensor(X)).numpy(), numpy_grad(X), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(fgrad.jit(g)(Tensor(X)).numpy(), numpy_grad(X), rtol=1e-4,
                               atol=1e-5)
    lines = fgrad.print_saved_residuals(fgrad.checkpoint(f, policy=policy), Tensor(X))
    assert capsys.readouterr().out.strip().splitlines() == lines
    # always saved: the weight constant and the argument; the policy adds `extra` values
    assert len(lines) == 2 + extra
    assert any("from argument 0" in line for line in lines)


def test_checkpoint_name_is_identity_everywhere():
    fn = lambda x: fgrad.checkpoint_name({"a": x * 2, "n": 3}, "a")  # noqa: E731
    out = fn(Tensor(X))
    assert out["n"] == 3
    np.testing.assert_array_equal(out["a"].numpy(), X * 2)
    jf = fgrad.jit(lambda x: fn(x)["a"], backend="llvm")
    np.testing.assert_array_equal(jf(Tensor(X)).numpy(), X * 2)
    assert "0 host steps" in jf.lower(Tensor(X)).as_text()
    np.testing.assert_allclose(fgrad.vmap(lambda x: fn(x)["a"])(Tensor(X)).numpy(), X * 2)


def test_print_saved_residuals_without_checkpoint_saves_intermediates():
    lines = fgrad.print_saved_residuals(f, Tensor(X))
    assert len(lines) > 2 and any("read by" in line for line in lines)
